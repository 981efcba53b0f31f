// The sampler (sampler.hpp: its signal-safety contract) and the sample
// the hook takes. By default the kernel delivers the signal to the Lua
// thread itself (timer_create with SIGEV_THREAD_ID): no helper thread,
// no polling. The handler counts the periods of the sampled clock that
// passed, records where the thread is and arms a one-shot hook (count 1 +
// return, so a C function that is running still takes the sample as it
// returns); the hook records the stack from that position and disarms.
// Between samples the program runs with no hook at all. Where the timers
// cannot be made (or LUAFLAME_SAMPLER=thread), a helper thread polls the
// clock and sends the signal instead.
#include "sampler.hpp"

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "session.hpp"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

namespace lfc {

namespace {

constexpr std::size_t kMaxDepth = 4000;  // frames kept per sample (leaf side)

uint64_t ns_of(const timespec& ts) {
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

itimerspec every(uint64_t ns) {
  const timespec t{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
  return itimerspec{t, t};
}

// The handler: see the contract in sampler.hpp.
void on_signal(int) {
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

// A signal nobody else handles: SIGPROF, else a free real-time one.
int pick_signal() {
  struct sigaction cur;
  if (sigaction(SIGPROF, nullptr, &cur) == 0 &&
      (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN) && !(cur.sa_flags & SA_SIGINFO))
    return SIGPROF;
  for (int sig = SIGRTMIN + 4; sig <= SIGRTMAX; ++sig)
    if (sigaction(sig, nullptr, &cur) == 0 && cur.sa_handler == SIG_DFL &&
        !(cur.sa_flags & SA_SIGINFO))
      return sig;
  return 0;
}

}  // namespace

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
  if (!(force && std::strcmp(force, "thread") == 0) && start_timers(terr)) {
    kind_ = Kind::timer;
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
  kind_ = Kind::thread;
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

uint64_t Sampler::due() {
  if (kind_ != Kind::timer) return 1;  // the polling thread counted them in owed_
  const uint64_t now = clock_now();
  if (now == 0) return 0;
  if (has_cpu_timer_) pace(now);
  if (now < next_due_) return 0;
  const uint64_t k = 1 + (now - next_due_) / period_;
  next_due_ += k * period_;
  owed_.fetch_add(k, std::memory_order_relaxed);
  return k;
}

void Sampler::note_position(lua_State* L, const void* ci, uint64_t weight) {
  const sig_atomic_t n = npos_;
  if (n >= kMaxPos) return;  // full: the last position takes the rest (drain's caller)
  pos_[n] = Pos{L, ci, static_cast<uint32_t>(weight)};
  std::atomic_signal_fence(std::memory_order_seq_cst);
  npos_ = n + 1;
}

uint64_t Sampler::drain(Pos (&out)[kMaxPos], int& n) {
  const uint64_t w = owed_.exchange(0, std::memory_order_relaxed);
  n = npos_;
  for (int i = 0; i < n; ++i) out[i] = pos_[i];
  npos_ = 0;
  return w;
}

void Sampler::poll_main() {
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
  if (kind_ == Kind::thread) {
    poll_stop_.store(true);
    if (poller_.joinable()) poller_.join();
  }
  if (has_tick_timer_) timer_delete(tick_timer_);
  if (has_cpu_timer_) timer_delete(cpu_timer_);
  has_tick_timer_ = has_cpu_timer_ = false;
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
  kind_ = Kind::off;
}

// From on_signal: the periods due, then (outside a critical section) the
// position and the arm; inside one, the arm waits for end_critical and
// the sample goes to the hook's stack.
void Session::on_sample_signal() {
  const uint64_t k = sampler.due();
  if (!k) return;
  if (hooks.in_critical()) {
    hooks.defer();
    return;
  }
  note_position(k);
  hooks.arm();
}

void Session::note_position(uint64_t weight) {
  if (!layout.state_ci_ok || !ci_walk_ok) return;
  lua_State* L = current.load(std::memory_order_relaxed);
  if (L) sampler.note_position(L, luaint::state_ci(L), weight);
}

bool Session::walk(lua_State* L, std::vector<uint32_t>& out, lua_State* from_T,
                   const void* from_ci) {
  out.clear();
  int at = -1;
  for (std::size_t i = chain.size(); i-- > 0;)
    if (chain[i] == L) {
      at = static_cast<int>(i);
      break;
    }
  int first = at < 0 ? 0 : at;
  if (from_T && from_T != L) {
    // The recorded thread must be one of L's resumers.
    if (at < 0) return false;
    first = -1;
    for (int i = at - 1; i >= 0; --i)
      if (chain[static_cast<std::size_t>(i)] == from_T) {
        first = i;
        break;
      }
    if (first < 0) return false;
  }
  lua_Debug ar;
  for (int t = first; t >= 0 && out.size() < kMaxDepth; --t) {
    lua_State* T = at < 0 ? L : chain[static_cast<std::size_t>(t)];
    const bool leaf = opt.lines && out.empty();
    if (!lua_getstack(T, 0, &ar)) {
      if (T == from_T) return false;
      continue;
    }
    if (ci_walk_ok) {
      const void* top = ar.i_ci;
      if (T == from_T) {
        // The recorded CallInfo must still be on the stack (at or below the
        // top): a frame entered since is not the one the signal fell in.
        const void* c = top;
        while (c && c != from_ci) c = ci_prev(c);
        if (!c) return false;
        top = from_ci;
      }
      // Follow the CallInfo list directly: lua_getstack(level) costs O(level).
      for (const void* ci = top; ci && ci_prev(ci) && out.size() < kMaxDepth; ci = ci_prev(ci)) {
        ar.i_ci = static_cast<struct CallInfo*>(const_cast<void*>(ci));
        const bool line = leaf && out.empty();
        lua_getinfo(L, line ? "Sl" : "S", &ar);
        out.push_back(frames.of(L, &ar, line));
      }
    } else {
      for (int level = 0; lua_getstack(T, level, &ar) && out.size() < kMaxDepth; ++level) {
        const bool line = leaf && level == 0;
        lua_getinfo(L, line ? "Sl" : "S", &ar);
        out.push_back(frames.of(L, &ar, line));
      }
    }
  }
  // The host's own C entry (lua.c's pmain, the runner) is not the program's.
  while (!out.empty() && frames.is_c(out.back())) out.pop_back();
  if (out.size() >= kMaxDepth) out.push_back(frames.named("[luaflame] truncated"));
  return true;
}

uint32_t Session::path_node(const std::vector<uint32_t>& leaf_first) {
  uint32_t node = 0;
  for (std::size_t i = leaf_first.size(); i-- > 0;) node = tree.child(node, leaf_first[i]);
  return node;
}

void Session::take_sample(lua_State* L) {
  uint64_t t0 = opt.trace ? tracer.tclock.now() : now_ns();
  // Owed periods and recorded positions, taken together so that no signal
  // lands between the two reads.
  Sampler::Pos pos[Sampler::kMaxPos];
  int n = 0;
  hooks.begin_critical();
  uint64_t w = sampler.drain(pos, n);
  hooks.end_critical();
  if (!w) return;
  // Each recorded position its periods, the rest (signals deferred by a
  // critical section, a full buffer, the polling thread's coalesced
  // signals) to the last one; none recorded (no layout, or deferred): the
  // hook's stack.
  for (int i = 0; i < n || (i == 0 && n == 0); ++i) {
    uint64_t k = w;
    if (n > 0 && i + 1 < n) k = pos[i].weight < w - 1 ? pos[i].weight : w - 1;
    if (k == 0) continue;
    w -= k;
    uint32_t node = 0;
    if (!traced_node(L, n > 0 ? pos[i].L : L, n > 0 ? pos[i].ci : nullptr, node)) {
      bool ok = n > 0 && walk(L, scratch, pos[i].L, pos[i].ci);
      if (!ok) {
        if (n > 0) acct.samples_moved += k;
        walk(L, scratch);
      }
      node = path_node(scratch);
    }
    tree.add(node, col_samples, k);
    acct.samples += k;
  }
  ++acct.sample_events;
  if (opt.trace) {
    uint64_t dt = tracer.tclock.now() - t0;
    acct.hook_ns += tracer.tclock.to_ns(dt);
    tracer.last_tick += dt;  // not charged to the program's frames
  } else {
    acct.hook_ns += now_ns() - t0;
  }
}

}  // namespace lfc
