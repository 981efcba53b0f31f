// LuaJIT's sample mode: LuaJIT's profiler API takes the samples, our timer
// thread decides when.
//
// Why the profiler API: a debug hook does not fire in JIT-compiled code
// (traces run machine code with no hook checks), so a sampler built on a
// count hook armed from a signal, as the 5.4 collector's is, would see
// only the interpreter. luaJIT_profile_start makes the JIT put profile
// checks into the traces it compiles (and flushes the old ones), records
// the VM state the signal fell in (compiled code, interpreter, C, GC,
// compiler) and calls our callback at the next safe point, where the Lua
// stack is written back and may be walked with lua_getstack.
//
// Why our own timer: LuaJIT arms setitimer(ITIMER_PROF), whose expiries
// come at the kernel's tick (250 Hz here, whatever interval is asked:
// `-jp=i1` delivers about 0.25 samples per ms), and goes to any thread of
// the process. Here LuaJIT's timer is given an interval it never reaches,
// and a thread of ours watches the Lua thread's CPU clock (as the 5.4
// sampler does) and sends SIGPROF to the Lua thread with pthread_kill when
// a period ends and no sample is pending (see g_pending): LuaJIT's own
// SIGPROF handler takes it as one of its samples.
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <string>

#include "vm/luajit/jsampler.hpp"

#include "vm/luajit/jlayout.hpp"

extern "C" {
#include <lauxlib.h>
#include <luajit.h>
}

namespace lfc::jit {

uint64_t thread_cpu_ns(clockid_t c) {
  timespec ts{};
  if (clock_gettime(c, &ts) != 0) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

namespace {

JFrames::Vm vm_of(int vmstate) {
  switch (vmstate) {
    case 'N':
      return JFrames::kJit;  // a compiled trace
    case 'I':
      return JFrames::kInterp;
    case 'C':
      return JFrames::kC;
    case 'G':
      return JFrames::kGc;
    default:
      return JFrames::kCompiler;  // 'J': the trace compiler
  }
}

// LuaJIT's SIGPROF handler, and the periods our timer owes it.
struct sigaction g_lj_action {};
std::atomic<uint64_t> g_owed{0};

// One signal per callback. Once a signal has set LuaJIT's profile hook,
// more signals before the callback only add to its count, yet each costs
// the Lua thread an interruption and the timer a pthread_kill: in `f` mode
// a loop with no function entry keeps the hook pending for hundreds of
// periods (cpu.lua: ~70 callbacks for ~1200 periods a second). So:
//   - g_pending: 1 from the timer's signal until the callback (also the
//     futex word the parked timer waits on);
//   - g_extra: periods that ended while pending, not signalled; the
//     callback adds them to LuaJIT's count, so every period still counts;
//   - g_parked: the timer waits on g_pending (a stretch with no check), so
//     the callback wakes it and the next signal comes a period later, not
//     at the end of a long sleep.
// Contract: the timer thread and the Lua thread race on these; all are
// lock-free atomics, seq_cst where one side writes one and reads the other
// (g_pending, g_parked: a wake is never missed). The callback clears
// g_pending; so does the signal handler when the signal fell outside Lua
// (see g_watch_g: no hook was set, no callback will come), a store and a
// futex wake, both async-signal-safe. A period added to g_extra just
// after the callback took it goes to the next callback: none is lost, one
// may move by a callback.
std::atomic<uint32_t> g_pending{0};
std::atomic<uint64_t> g_extra{0};
std::atomic<bool> g_parked{false};
// Periods given to LuaJIT's handler since the last callback. A finalizer
// that starts before the callback clears LuaJIT's pending hook, and a run
// may end before the next one: at stop these and g_extra are what no
// callback took (JSampler::charge_pending). Contract: as g_extra's.
std::atomic<uint64_t> g_forwarded{0};

// The end of the first period not yet counted, on the sampled clock, and
// the period. Periods are taken by whoever sees them end first: the timer
// at a wake-up, or the callback, which reads the clock itself, so the
// periods that ended while the timer was parked count for this sample
// (they were spent before it), not for the next. Contract: the timer and
// the Lua thread's callback race on g_next; take_periods advances it by
// compare-and-swap, so each period is taken once.
std::atomic<uint64_t> g_next{0};
uint64_t g_period = 1;

/// Periods of the clock ended by `now` and not yet counted, now counted.
uint64_t take_periods(uint64_t now) {
  uint64_t n = g_next.load();
  while (now >= n) {
    const uint64_t k = (now - n) / g_period + 1;
    if (g_next.compare_exchange_weak(n, n + k * g_period)) return k;
  }
  return 0;
}

// The host's own C code. LuaJIT's handler sets its hook wherever the
// signal falls, and its callback comes at the next Lua code: a signal that
// fell in nginx's C work between two requests was charged to the next
// request's first line as `[C]`. So the handler asks first whether any Lua
// runs (jlayout.hpp's outside_lua, on the state's global_State, set when
// probe_host held); when none does, the periods are the host's: g_host
// counts them for "[host] outside Lua", charged at the next callback or at
// stop, and LuaJIT's handler is not called. Contract: g_watch_g is set
// before our handler is installed and cleared after the timer is joined;
// g_watch_off is written before it is set; g_host is a lock-free atomic the
// handler adds to and the Lua thread takes.
std::atomic<const void*> g_watch_g{nullptr};
std::atomic<std::size_t> g_watch_off{0};
std::atomic<uint64_t> g_host{0};

// __gc finalizers. LuaJIT's handler sets no profile hook while one runs
// (HOOK_GC), only counts the signal for the next callback: charged to
// whatever Lua ran next, and lost at stop when none came (a program whose
// time is in finalizers had 0 of 224 periods recorded). So the handler
// asks (jlayout.hpp's in_finalizer, when probe_host found hookmask) and
// counts them in g_gc for "[gc] finalizer" over the next callback's stack
// (where Lua went on after the collection), or at the root at stop; LuaJIT's
// handler is not called. Contract: as g_host's; g_watch_mask is written
// before g_watch_g is set, 0 when not found.
std::atomic<std::size_t> g_watch_mask{0};
std::atomic<uint64_t> g_gc{0};

// The periods of a signal that no callback will follow, to `counter`.
void owe_elsewhere(std::atomic<uint64_t>& counter, uint64_t k) {
  counter.fetch_add(k, std::memory_order_relaxed);
  g_pending.store(0);  // no callback will come for this signal
  if (g_parked.load()) futex_wake(g_pending);
}

// Contract: runs on the Lua thread (our timer sends SIGPROF there with
// pthread_kill; LuaJIT's setitimer, armed for 11 days, would go to any
// thread). Outside Lua it counts the owed periods as the host's, in a
// finalizer as the finalizer's (above).
// Else it only calls LuaJIT's own handler once per owed period: LuaJIT's
// handler counts one sample per call and sets its profile hook, which is
// what it does for its own timer's signal (async-signal-safe by LuaJIT's
// design); g_owed is a lock-free atomic. A SIGPROF from elsewhere
// (LuaJIT's own timer) counts once.
void on_sigprof(int sig) noexcept {
  uint64_t k = g_owed.exchange(0, std::memory_order_relaxed);
  if (k == 0) k = 1;
  if (const void* g = g_watch_g.load(std::memory_order_acquire)) {
    const layout::HostWatch w{g, g_watch_off.load(std::memory_order_relaxed),
                              g_watch_mask.load(std::memory_order_relaxed)};
    if (w.cur_l && layout::outside_lua(w)) return owe_elsewhere(g_host, k);
    if (w.hookmask && layout::in_finalizer(w)) return owe_elsewhere(g_gc, k);
  }
  for (uint64_t i = 0; i < k; ++i) g_lj_action.sa_handler(sig);
  g_forwarded.fetch_add(k, std::memory_order_relaxed);
}

// SIGPROF's action before start, and the guard put in its place before
// LuaJIT's profiler starts, so that the guard is what LuaJIT saves and
// gives back when its profiler stops.
struct sigaction g_before {};

// Contract: lua_close stops LuaJIT's profiler (luaJIT_profile_stop, which
// restores the action LuaJIT found) before the finalizer that stops our
// timer thread runs (os.exit(code, true), a host closing its state). A
// SIGPROF the thread sends in between would meet the action of before
// start, by default the one that kills the process; it meets this guard
// instead, which does nothing (async-signal-safe trivially). stop_sampler
// puts the action of before start back once the thread is joined.
void guard_sigprof(int) noexcept {}

// The thread's clock runs at most as fast as the wall clock, and at the
// share of it the thread had since the last wake-up: the wall time until
// `left` ns of the thread's clock have passed at that share (a busy
// thread: the period left; an idle one, blocked in epoll: up to kMaxSleep).
uint64_t wall_wait(uint64_t left, double share) {
  constexpr double kMaxSleep = 20000000;  // 20 ms: an idle thread costs 50 wake-ups a second
  return static_cast<uint64_t>(
      std::min(static_cast<double>(left) / std::max(std::min(share, 1.0), 0.02), kMaxSleep));
}

}  // namespace

void JSampler::run_timer() noexcept {
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);  // 1 us: the default 50 us slack is 5% of a period
  timer_up_.mark();                           // start() waits for this (core/futex.hpp)
  const uint64_t period = g_period;
  uint64_t cpu0 = thread_cpu_ns(cpu_clock_), wall0 = now_ns();
  bool parked = false;      // the last wait was a park that timed out (the callback did not come)
  bool resent = false;      // the pending signal was sent again once
  uint64_t wall_waits = 0;  // wake-ups with a signal pending, wall clock
  while (!timer_stop_.load(std::memory_order_relaxed)) {
    const uint64_t cpu = thread_cpu_ns(cpu_clock_), wall = now_ns();
    bool waiting = false;  // a signal is pending: park after this wake-up
    // Every period that ended is owed, so a late wake-up loses none: the
    // handler counts them all, and the sample weighs that many.
    if (const uint64_t k = take_periods(cpu)) {
      // A signal when none is pending. Sent again a period later, and after
      // each park that timed out, in case LuaJIT dropped it: its handler
      // sets no hook while its VM-event hook runs (our callback, until
      // LuaJIT's profile hook returns) or a GC finalizer does, and then the
      // callback would never come. A signal LuaJIT took only adds to its count.
      const bool fresh = g_pending.exchange(1) == 0;
      waiting = !fresh;
      if (fresh || !resent || parked) {
        resent = !fresh;
        g_owed.fetch_add(k, std::memory_order_relaxed);
        syscall(SYS_tgkill, pid_, lua_tid_, SIGPROF);
      } else {
        g_extra.fetch_add(k, std::memory_order_relaxed);
      }
    }
    const double share =
        wall > wall0 ? static_cast<double>(cpu - cpu0) / static_cast<double>(wall - wall0) : 1;
    cpu0 = cpu;
    wall0 = wall;
    // A whole period passed and the callback has not come (a stretch with
    // no profile check, e.g. a loop in `f` mode): wait for it rather than
    // wake every period, at most 16 periods of the clock at the thread's share.
    parked = false;
    // Not with the wall clock: the woken timer may preempt the Lua thread
    // just after a callback (a function entry), and the wall time that
    // costs would be charged to the code after it (measured: the split
    // test's 75/25 program read 0.64-0.72 instead of 0.73-0.77 under load).
    // There the timer wakes each period while the signal is pending,
    // sending none, and again every 16th wake-up as after a park.
    if (waiting && !run_.opt.cpu_clock) {
      parked = ++wall_waits % 16 == 0;
      waiting = false;
    }
    if (waiting) {
      g_parked.store(true);
      if (g_pending.load() == 1) {
        futex_wait(g_pending, 1, wall_wait(16 * period, share));
        parked = g_pending.load() == 1;
      }
      g_parked.store(false);
      continue;
    }
    const uint64_t next = g_next.load();
    const uint64_t wait = wall_wait(next > cpu ? next - cpu : 0, share);
    timespec ts{static_cast<time_t>(wait / 1000000000ull), static_cast<long>(wait % 1000000000ull)};
    nanosleep(&ts, nullptr);
  }
}

// The signal goes by tgkill, not pthread_kill: glibc's pthread_kill holds
// the target thread's lock while it sends, and a fork of the host then
// (a prefork worker) gave the child that lock held, where the timer thread
// of the worker's own run waited on it forever (seen: a forked child of
// tests/attach/fork_host.c on LuaJIT, stopped at lua_close, joining it).
// The Lua thread outlives the timer thread (stop joins it first).
void JSampler::bind_thread() {
  lua_thread_ = pthread_self();
  lua_tid_ = static_cast<pid_t>(syscall(SYS_gettid));
  pid_ = getpid();
  if (pthread_getcpuclockid(lua_thread_, &cpu_clock_) != 0) run_.opt.cpu_clock = false;
  if (!run_.opt.cpu_clock) cpu_clock_ = CLOCK_MONOTONIC;
}

void JSampler::charge_host() {
  const uint64_t k = g_host.exchange(0, std::memory_order_relaxed);
  if (k == 0) return;
  if (!host_frame_) host_frame_ = run_.frames.named("[host] outside Lua");
  scratch_.assign(1, host_frame_);
  run_.tree.add(frames_.path_node(scratch_), run_.col_samples, k);
  run_.acct.samples += k;
}

// The finalizers' periods over `path` (a walk's frames, leaf first), or at
// the root when there is none (at stop).
void JSampler::charge_gc(uint32_t base, bool walked) {
  const uint64_t k = g_gc.exchange(0, std::memory_order_relaxed);
  if (k == 0) return;
  if (!gc_frame_) gc_frame_ = run_.frames.named("[gc] finalizer");
  if (!walked) scratch_.clear(), base = 0;
  scratch_.insert(scratch_.begin(), gc_frame_);
  run_.tree.add(frames_.path_node(scratch_, base), run_.col_samples, k);
  run_.acct.samples += k;
  scratch_.erase(scratch_.begin());
}

// At stop: the periods no callback took (g_forwarded, g_extra) and those
// that ended since the timer last looked (it parks up to 16), to where the
// last sample was, the program's last known place; none taken yet: a frame
// saying so.
void JSampler::charge_pending() {
  const uint64_t k = g_forwarded.exchange(0, std::memory_order_relaxed) +
                     g_extra.exchange(0, std::memory_order_relaxed) +
                     take_periods(thread_cpu_ns(cpu_clock_));
  if (k == 0) return;
  if (!last_node_) {
    scratch_.assign(1, run_.frames.named("[luaflame] no callback before stop"));
    last_node_ = frames_.path_node(scratch_);
  }
  run_.tree.add(last_node_, run_.col_samples, k);
  run_.acct.samples += k;
}

void JSampler::on_samples(lua_State* L, int samples, int vmstate) {
  const uint64_t t0 = now_ns();
  charge_host();
  const int top = lua_gettop(L);
  const uint32_t base = frames_.walk(L, scratch_);
  lua_settop(L, top);
  charge_gc(base, true);
  scratch_.insert(scratch_.begin(), frames_.vm(vm_of(vmstate)));
  // The sample weighs the periods LuaJIT counted (the signals), those the
  // timer counted without a signal while the hook was pending, and those
  // that ended since, up to now (taken here, so that a timer woken below
  // finds the current period unfinished).
  g_forwarded.store(0, std::memory_order_relaxed);  // `samples` counts them
  uint64_t k = (samples > 0 ? static_cast<uint64_t>(samples) : 0) +
               g_extra.exchange(0, std::memory_order_relaxed) +
               take_periods(thread_cpu_ns(cpu_clock_));
  if (k == 0) k = 1;
  last_node_ = frames_.path_node(scratch_, base);
  run_.tree.add(last_node_, run_.col_samples, k);
  run_.acct.samples += k;
  ++run_.acct.sample_events;
  ++run_.acct.hook_calls;
  const uint64_t dt = now_ns() - t0;
  run_.acct.hook_ns += dt;
  tracer_.exclude(dt);  // not charged to the traced frames (mode both)
  // Last: the timer may signal again (woken if parked). A signal that came
  // before LuaJIT's hook returns would be dropped (see timer_main).
  g_pending.store(0);
  if (g_parked.load()) futex_wake(g_pending);
}

bool JSampler::start(lua_State* L, ProfileCallback cb, void* data, std::string& err) {
  if (!(run_.opt.hz > 0 && run_.opt.hz <= 100000))
    return err = "option 'hz' must be between 0 and 100000", false;
  // Where the JIT puts profile checks into traces: 'f' at function entries
  // (jit.p's default; +1.4% instructions on bench/jit/cpu.lua), or with
  // LUAFLAME_JIT_CHECKS=line 'l' at every new line (+8%: a check per loop
  // iteration), which takes a sample inside a long loop when it falls
  // rather than at the loop's end. 'i': LuaJIT's own timer at an interval
  // (ms) it never reaches, 11 days: our timer sends the signals.
  const char* checks = std::getenv("LUAFLAME_JIT_CHECKS");
  const bool line = checks && std::string(checks) == "line";
  struct sigaction guard {};
  guard.sa_handler = guard_sigprof;
  guard.sa_flags = SA_RESTART;
  sigemptyset(&guard.sa_mask);
  layout::HostWatch watch;
  host_ok_ = layout::probe_host(L, watch, host_why_, gc_why_);
  gc_ok_ = watch.hookmask != 0;
  g_host.store(0);
  g_gc.store(0);
  g_watch_off.store(host_ok_ ? watch.cur_l : 0);
  g_watch_mask.store(watch.hookmask);
  g_watch_g.store(host_ok_ || gc_ok_ ? watch.g : nullptr, std::memory_order_release);
  sigaction(SIGPROF, &guard, &g_before);
  L_ = L;
  luaJIT_profile_start(L, line ? "li1000000000" : "fi1000000000", cb, data);
  profiling_ = true;
  // LuaJIT's handler is called from ours, which counts the periods owed.
  struct sigaction ours {};
  if (sigaction(SIGPROF, nullptr, &g_lj_action) != 0 || (g_lj_action.sa_flags & SA_SIGINFO) ||
      g_lj_action.sa_handler == SIG_DFL || g_lj_action.sa_handler == SIG_IGN) {
    luaJIT_profile_stop(L);
    profiling_ = false;
    sigaction(SIGPROF, &g_before, nullptr);
    return err = "LuaJIT's profiler did not install its SIGPROF handler", false;
  }
  ours = g_lj_action;
  ours.sa_handler = on_sigprof;
  g_owed.store(0);
  g_pending.store(0);
  g_extra.store(0);
  g_forwarded.store(0);
  last_node_ = 0;
  g_period = static_cast<uint64_t>(1e9 / run_.opt.hz);
  g_next.store(thread_cpu_ns(cpu_clock_) + g_period);
  sigaction(SIGPROF, &ours, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPROF);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  timer_stop_.store(false);
  timer_up_.reset();
  try {
    timer_ = std::thread([this] { run_timer(); });
  } catch (const std::exception& e) {
    sigaction(SIGPROF, &g_lj_action, nullptr);
    luaJIT_profile_stop(L);
    profiling_ = false;
    sigaction(SIGPROF, &g_before, nullptr);
    return err = std::string("cannot start the sampler thread: ") + e.what(), false;
  }
  // The program runs on only once the timer thread is in its loop: a fork
  // during the thread's start-up copies a held lock (core/futex.hpp).
  timer_up_.wait();
  return true;
}

// Contract: after the join no SIGPROF is sent; one sent just before may
// still be pending, and LuaJIT's handler (still installed until
// luaJIT_profile_stop) takes it. luaJIT_profile_stop restores the guard
// and LuaJIT's timer; a sample it leaves pending is never called back.
// When lua_close stopped LuaJIT's profiler already, SIGPROF's action is
// the guard, not ours: LuaJIT's handler must not come back then (it
// reads the profiler's state, gone). Last, the action of before start.
void JSampler::stop() {
  timer_stop_.store(true);
  if (timer_.joinable()) timer_.join();
  g_watch_g.store(nullptr);
  if (profiling_) {
    struct sigaction now {};
    sigaction(SIGPROF, nullptr, &now);
    if (now.sa_handler == on_sigprof) {
      sigaction(SIGPROF, &g_lj_action, nullptr);  // LuaJIT's back: its stop restores the guard
      luaJIT_profile_stop(L_);
    }
    sigaction(SIGPROF, &g_before, nullptr);
    charge_host();
    charge_gc(0, false);
    charge_pending();
  }
  profiling_ = false;
}

}  // namespace lfc::jit
