// The sampler (sampler.hpp: its signal-safety contract); the sample the
// hook takes is Sampling's (sampling.hpp). By default the kernel delivers the signal to the Lua
// thread itself (timer_create with SIGEV_THREAD_ID): no helper thread,
// no polling. The handler counts the periods of the sampled clock that
// passed, records where the thread is and arms a one-shot hook (count 1 +
// return, so a C function that is running still takes the sample as it
// returns); the hook records the stack from that position and disarms.
// Between samples the program runs with no hook at all. Where the timers
// cannot be made (or LUAFLAME_SAMPLER=thread), a helper thread polls the
// clock and sends the signal instead.
#include "vm/puc/sampler.hpp"

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "vm/puc/session.hpp"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

namespace lfc {

namespace {

uint64_t ns_of(const timespec& ts) {
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

itimerspec every(uint64_t ns) {
  const timespec t{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
  return itimerspec{t, t};
}

// The handler: see the contract in sampler.hpp.
void on_signal(int) noexcept {
  const int saved = errno;
  Session* s = g_session.load(std::memory_order_relaxed);
  if (s) s->on_sample_signal();
  errno = saved;
}

void sleep_ns(uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// A signal nobody else handles: a free real-time one, else SIGPROF. Why
// not SIGPROF first: it is the program's to use (setitimer(ITIMER_PROF),
// gperftools, LuaJIT's jit.profile). A program that takes SIGPROF while we
// hold it would get our ticks in its handler, and we would put its
// handler back to the default (terminate) at stop (issue 27).
bool free_signal(int sig) {
  struct sigaction cur;
  return sigaction(sig, nullptr, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
         (cur.sa_handler == SIG_DFL || (sig == SIGPROF && cur.sa_handler == SIG_IGN));
}

std::atomic<bool> g_prefer_sigprof{false};

int pick_signal() {
  if (g_prefer_sigprof.load(std::memory_order_relaxed) && free_signal(SIGPROF)) return SIGPROF;
  for (int sig = SIGRTMIN + 4; sig <= SIGRTMAX; ++sig)
    if (free_signal(sig)) return sig;
  return free_signal(SIGPROF) ? SIGPROF : 0;
}

// Whether the signal still runs our handler: the program may have taken it
// since start (sigaction replaces ours).
bool still_ours(int sig) {
  struct sigaction cur;
  return sigaction(sig, nullptr, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
         cur.sa_handler == on_signal;
}

}  // namespace

void Sampler::prefer_sigprof() noexcept {
  g_prefer_sigprof.store(true, std::memory_order_relaxed);
}

uint64_t Sampler::clock_now() const {
  timespec ts;
  if (clock_gettime(cpu_clock_ ? clock_id_ : CLOCK_MONOTONIC, &ts) != 0) return 0;
  return ns_of(ts);
}

bool Sampler::start(double hz, bool cpu_clock, clockid_t cpu_clock_id, std::string& err) {
  hz_ = hz;
  cpu_clock_ = cpu_clock;
  clock_id_ = cpu_clock_id;
  period_ = static_cast<uint64_t>(1e9 / hz);
  if (period_ == 0) period_ = 1;
  lua_thread_ = pthread_self();
  signo_ = pick_signal();
  if (!signo_)
    return err = "no free signal for the sampler (SIGPROF and the real-time signals are taken)",
           false;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(signo_, &sa, &old_action_) != 0)
    return err = std::string("sigaction: ") + std::strerror(errno), signo_ = 0, false;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signo_);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  const char* force = std::getenv("LUAFLAME_SAMPLER");
  std::string terr;
  if (!(force && std::strcmp(force, sampler_name(SamplerKind::thread)) == 0) &&
      start_timers(terr)) {
    kind_ = SamplerKind::timer;
    return true;
  }
  poll_stop_.store(false);
  try {
    poller_ = std::thread(&Sampler::poll_main, this);
  } catch (const std::exception& e) {
    sigaction(signo_, &old_action_, nullptr);
    signo_ = 0;
    return err = std::string("cannot start the sampler thread: ") + e.what(), false;
  }
  kind_ = SamplerKind::thread;
  return true;
}

// CPU clock: the CPU-clock timer armed first (the thread is running now,
// pace() switches to the tick timer on its first signal); wall clock: the
// CLOCK_MONOTONIC timer alone, always on.
bool Sampler::start_timers(std::string& err) {
  sigevent ev;
  std::memset(&ev, 0, sizeof ev);
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = signo_;
  ev.sigev_notify_thread_id = static_cast<pid_t>(syscall(SYS_gettid));
  if (timer_create(CLOCK_MONOTONIC, &ev, &tick_timer_) != 0)
    return err = std::string("timer_create: ") + std::strerror(errno), false;
  has_tick_timer_ = true;
  if (cpu_clock_ && timer_create(clock_id_, &ev, &cpu_timer_) != 0) {
    err = std::string("timer_create (CPU clock): ") + std::strerror(errno);
    timer_delete(tick_timer_);
    has_tick_timer_ = false;
    return false;
  }
  has_cpu_timer_ = cpu_clock_;
  next_due_ = clock_now() + period_;
  last_seen_ = clock_now();
  const itimerspec it = every(period_);
  tick_on_ = !cpu_clock_;
  if (timer_settime(cpu_clock_ ? cpu_timer_ : tick_timer_, 0, &it, nullptr) != 0) {
    err = std::string("timer_settime: ") + std::strerror(errno);
    timer_delete(tick_timer_);
    if (has_cpu_timer_) timer_delete(cpu_timer_);
    has_tick_timer_ = has_cpu_timer_ = false;
    return false;
  }
  return true;
}

// Handler only (CPU clock). A wake-up that finds the thread used less
// than a quarter period since the last one means it waited: preempted
// (runnable, on a busy machine) or blocked in a system call. Twice in a
// row, it is taken as blocked and the tick timer goes off, so that a
// thread waiting in a system call is woken at most twice per wait (calls
// restart under SA_RESTART; select, poll and nanosleep return EINTR, as
// with any signal); the CPU-clock timer, which only fires while the
// thread runs, brings the tick timer back. Once only is a preemption,
// and the tick timer stays (else the next samples would wait for a
// scheduler tick).
void Sampler::pace(uint64_t now) {
  const uint64_t ran = now - last_seen_;
  last_seen_ = now;
  const itimerspec off{}, on = every(period_);
  const bool waited = ran < period_ / 4;
  idle_wakes_ = waited ? idle_wakes_ + 1 : 0;
  if (tick_on_ && waited && idle_wakes_ >= 2) {
    timer_settime(tick_timer_, 0, &off, nullptr);
    timer_settime(cpu_timer_, 0, &on, nullptr);
    tick_on_ = 0;
  } else if (!tick_on_ && !waited) {
    timer_settime(cpu_timer_, 0, &off, nullptr);
    timer_settime(tick_timer_, 0, &on, nullptr);
    tick_on_ = 1;
  }
}

void Sampler::block(sigset_t& old) noexcept {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signo_);
  pthread_sigmask(SIG_BLOCK, &set, &old);
}

void Sampler::unblock(const sigset_t& old) noexcept {
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void Sampler::tick_again() noexcept {
  if (tick_on_) return;  // charge() paced it on
  const itimerspec off{}, on = every(period_);
  timer_settime(cpu_timer_, 0, &off, nullptr);
  timer_settime(tick_timer_, 0, &on, nullptr);
  tick_on_ = 1;
  idle_wakes_ = 0;
  last_seen_ = clock_now();
}

uint64_t Sampler::due() {
  if (kind_ != SamplerKind::timer) return 1;  // the polling thread counted them in owed_
  const uint64_t now = clock_now();
  if (now == 0) return 0;
  if (has_cpu_timer_) pace(now);
  if (now < next_due_) return 0;
  const uint64_t k = 1 + (now - next_due_) / period_;
  next_due_ += k * period_;
  owed_.fetch_add(k, std::memory_order_relaxed);
  return k;
}

void Sampler::note_position(lua_State* L, const void* ci, uint64_t weight, bool in_hook) {
  const sig_atomic_t n = npos_;
  if (n >= kMaxPos) return;  // full: the last position takes the rest (drain's caller)
  Pos& p = pos_[n];
  p.L = L, p.ci = ci, p.weight = static_cast<uint32_t>(weight), p.in_hook = in_hook;
  p.foreign = false;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  npos_ = n + 1;
}

void Sampler::note_foreign(lua_State* L, uint64_t weight, const luaint::Layout& layout) {
  const sig_atomic_t n = npos_;
  if (n >= kMaxPos) return;
  Pos& p = pos_[n];
  if (!foreign::copy_foreign(L, layout, p.copy)) return;  // the hook's stack takes it
  p.L = L, p.ci = p.copy.anchor, p.weight = static_cast<uint32_t>(weight), p.in_hook = false;
  p.foreign = true;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  npos_ = n + 1;
}

uint64_t Sampler::drain(Pos (&out)[kMaxPos], int& n) {
  const uint64_t w = owed_.exchange(0, std::memory_order_relaxed);
  n = npos_;
  for (int i = 0; i < n; ++i) {
    // The copied frames only when there are some (a Pos is ~1 KB).
    Pos& o = out[i];
    const Pos& p = pos_[i];
    o.L = p.L, o.ci = p.ci, o.weight = p.weight, o.in_hook = p.in_hook, o.foreign = p.foreign;
    o.copy.anchor = p.copy.anchor, o.copy.kind = p.copy.kind, o.copy.deeper = p.copy.deeper;
    o.copy.nframes = p.foreign ? p.copy.nframes : 0;
    for (int j = 0; j < o.copy.nframes; ++j) o.copy.frames[j] = p.copy.frames[j];
  }
  npos_ = 0;
  return w;
}

void Sampler::poll_main() noexcept {
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // wake within a microsecond, not 50
  uint64_t next = clock_now() + period_;
  while (!poll_stop_.load(std::memory_order_relaxed)) {
    uint64_t now = clock_now();
    if (now == 0) break;  // the Lua thread is gone
    if (now >= next) {
      uint64_t k = 1 + (now - next) / period_;
      next += k * period_;
      owed_.fetch_add(k, std::memory_order_relaxed);
      pthread_kill(lua_thread_, signo_);
    }
    // The clock advances at most as fast as wall time: sleeping until the
    // next period's wall-time lower bound never oversleeps a busy thread.
    uint64_t wait = next - now;
    if (wait > 20000000) wait = 20000000;
    if (wait < 20000) wait = 20000;
    sleep_ns(wait);
  }
}

void Sampler::stop() {
  if (!signo_) return;
  if (kind_ == SamplerKind::thread) {
    poll_stop_.store(true);
    if (poller_.joinable()) poller_.join();
  }
  if (has_tick_timer_) timer_delete(tick_timer_);
  if (has_cpu_timer_) timer_delete(cpu_timer_);
  has_tick_timer_ = has_cpu_timer_ = false;
  // The program took the signal while we held it: it is its own now, with
  // whatever is pending (not ours to take), and its handler stays.
  if (!still_ours(signo_)) {
    signo_ = 0;
    kind_ = SamplerKind::none;
    return;
  }
  // A signal sent just before may still be pending: take it while
  // blocked, then give the signal back to its previous owner.
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, signo_);
  pthread_sigmask(SIG_BLOCK, &set, &old);
  sigset_t pending;
  timespec zero{0, 0};
  while (sigpending(&pending) == 0 && sigismember(&pending, signo_))
    sigtimedwait(&set, nullptr, &zero);
  sigaction(signo_, &old_action_, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  signo_ = 0;
  kind_ = SamplerKind::none;
}

}  // namespace lfc
