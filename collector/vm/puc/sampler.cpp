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
#include <mutex>

#include "core/xorshift.hpp"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

namespace lfc {

namespace {

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
  return sigaction(sig, nullptr, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
         cur.sa_sigaction == on_sampler_signal;
}

// The signals the sessions of this process hold: each installed once and
// shared (the handler routes by slot), given back to its previous owner
// when the last session lets it go. A host that resets every signal but
// SIGPROF (HAProxy) thus sees the one signal whatever its states number.
struct Held {
  int refs = 0;
  struct sigaction old {};
};
std::mutex g_held_mu;
Held g_held[_NSIG];

int take_signal(std::string& err) {
  std::lock_guard<std::mutex> lock(g_held_mu);
  for (int sig = 1; sig < _NSIG; ++sig)
    if (g_held[sig].refs > 0 && still_ours(sig)) return ++g_held[sig].refs, sig;
  const int sig = pick_signal();
  if (!sig)
    return err = "no free signal for the sampler (SIGPROF and the real-time signals are taken)", 0;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sampler_signal;
  sa.sa_flags = SA_RESTART | SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(sig, &sa, &g_held[sig].old) != 0)
    return err = std::string("sigaction: ") + std::strerror(errno), 0;
  g_held[sig].refs = 1;
  return sig;
}

// The last session to let `sig` go takes a signal still pending (sent just
// before its timers went) while blocked, then gives the signal back. A
// signal the program took while we held it is its own now, with whatever
// is pending (not ours to take), and its handler stays.
void give_signal(int sig) {
  std::lock_guard<std::mutex> lock(g_held_mu);
  if (sig <= 0 || sig >= _NSIG || g_held[sig].refs == 0 || --g_held[sig].refs > 0) return;
  if (!still_ours(sig)) return;
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, &old);
  sigset_t pending;
  timespec zero{0, 0};
  while (sigpending(&pending) == 0 && sigismember(&pending, sig))
    sigtimedwait(&set, nullptr, &zero);
  sigaction(sig, &g_held[sig].old, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace

void Sampler::prefer_sigprof() noexcept {
  g_prefer_sigprof.store(true, std::memory_order_relaxed);
}

bool Sampler::start(double hz, bool cpu_clock, clockid_t cpu_clock_id, int slot, std::string& err) {
  hz_ = hz;
  cpu_clock_ = cpu_clock;
  slot_ = slot;
  add_entry(cpu_clock_id);
  period_ = static_cast<uint64_t>(1e9 / hz);
  if (period_ == 0) period_ = 1;
  lua_thread_.store(pthread_self());
  signo_ = take_signal(err);
  if (!signo_) return false;
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
  poller_up_.reset();
  try {
    poller_ = std::thread(&Sampler::poll_main, this);
  } catch (const std::exception& e) {
    give_signal(signo_);
    signo_ = 0;
    return err = std::string("cannot start the sampler thread: ") + e.what(), false;
  }
  // The program runs on only once the poller is in its loop: a fork during
  // the thread's start-up copies a held lock (core/futex.hpp).
  poller_up_.wait();
  kind_ = SamplerKind::thread;
  return true;
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

// A finalizer's or a program hook's samples wait for the hook until the
// code run with hooks off ends (foreign.hpp): a collection running 1,000
// finalizers at 1 kHz offers hundreds of positions to 16 slots. Keeping the
// first 16 and charging the rest to the last one put a whole wait's time
// wherever its 16th signal fell (with the marking of a large heap first:
// on collectgarbage itself). A uniform pick keeps the slots a fair sample
// of the whole wait, and share() spreads the rest over them.
int Sampler::slot_for() noexcept {
  const sig_atomic_t n = npos_;
  ++seen_;
  if (n < kMaxPos) return n;
  const uint32_t j = xorshift32(pick_rng_) % seen_;
  return j < static_cast<uint32_t>(kMaxPos) ? static_cast<int>(j) : -1;
}

void Sampler::note_position(lua_State* L, const void* ci, uint64_t weight, bool in_hook) {
  const sig_atomic_t n = npos_;
  const int i = slot_for();
  if (i < 0) return;  // not kept: share() charges its periods with the rest
  Pos& p = pos_[i];
  p.L = L, p.ci = ci, p.weight = static_cast<uint32_t>(weight), p.in_hook = in_hook;
  p.foreign = false;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (i == n) npos_ = n + 1;
}

void Sampler::note_foreign(lua_State* L, uint64_t weight, const luaint::Layout& layout) {
  const sig_atomic_t n = npos_;
  const int i = slot_for();
  if (i < 0) return;
  Pos& p = pos_[i];
  if (!foreign::copy_foreign(L, layout, p.copy)) {
    // The hook's stack takes it. A kept slot the copy overwrote keeps
    // no weight of its own (share() spreads its periods).
    if (i < n) p.foreign = false, p.in_hook = false, p.ci = nullptr, p.weight = 0;
    return;
  }
  p.L = L, p.ci = p.copy.anchor, p.weight = static_cast<uint32_t>(weight), p.in_hook = false;
  p.foreign = true;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (i == n) npos_ = n + 1;
}

void Sampler::share(const Pos* pos, int n, uint64_t owed, uint64_t* out) {
  uint64_t kept = 0;
  for (int i = 0; i < n; ++i) kept += pos[i].weight;
  const uint64_t rest = owed > kept ? owed - kept : 0;
  uint64_t left = owed;
  for (int i = 0; i < n; ++i) {
    uint64_t k = pos[i].weight;
    if (kept > 0) k += static_cast<uint64_t>(static_cast<unsigned __int128>(rest) * k / kept);
    if (i + 1 == n || k > left) k = left;
    out[i] = k;
    left -= k;
  }
}

uint64_t Sampler::drain(Pos (&out)[kMaxPos], int& n) {
  const uint64_t w = owed_.exchange(0, std::memory_order_relaxed);
  untaken_ = 0;
  seen_ = 0;
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
  poller_up_.mark();
  uint64_t next = clock_now() + period_;
  while (!poll_stop_.load(std::memory_order_relaxed)) {
    uint64_t now = clock_now();
    if (now == 0) break;  // the Lua thread is gone
    if (now >= next) {
      uint64_t k = 1 + (now - next) / period_;
      next += k * period_;
      owed_.fetch_add(k, std::memory_order_relaxed);
      pthread_sigqueue(lua_thread_.load(), signo_, sigval{slot_});
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
  delete_timers();
  give_signal(signo_);
  signo_ = 0;
  kind_ = SamplerKind::none;
}

}  // namespace lfc
