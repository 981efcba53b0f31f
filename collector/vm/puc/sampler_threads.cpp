// The sampler's kernel timers, one pair per thread the state runs on, and
// the sampled clock they pace (sampler.hpp: the signal-safety contract).
// A state made on one thread may run on another, or on several in turn (a
// host's thread pool resuming a shared state: HAProxy's `lua-load` with
// `nbthread 2` moves it at every forced yield, tens of times per request).
// A move must be cheap and lose nothing: the timers of a thread are made
// once, when the state first runs there, and only switched on and off
// after; the clock is the state's own (the CPU time of the threads while
// they ran it, summed), so a period begun on one thread ends on the next.
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "vm/puc/sampler.hpp"

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

}  // namespace

uint64_t Sampler::thread_clock(const ThreadTimers& t) const {
  timespec ts;
  if (clock_gettime(cpu_clock_ ? t.clock : CLOCK_MONOTONIC, &ts) != 0) return 0;
  return ns_of(ts);
}

uint64_t Sampler::clock_now() const {
  const uint64_t raw = thread_clock(here());
  return raw ? state_clock(raw) : 0;
}

uint64_t Sampler::last_clock() const {
  return cpu_clock_ ? state_clock(here().last_seen) : 0;
}

Sampler::~Sampler() {
  for (auto& block : more_) delete[] block.load(std::memory_order_relaxed);
}

// Async-signal-safe: loads only.
int Sampler::entry_of(pthread_t self) const noexcept {
  const int n = nth_.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i)
    if (pthread_equal(entry(i).thread, self)) return i;
  return -1;
}

// The calling thread's entry, new: -1 when the table is full or a new
// block cannot be had. Not in the handler (it may allocate); the block is
// published (release) before the count that makes its first entry visible.
int Sampler::add_entry(clockid_t clock) noexcept {
  const int i = nth_.load(std::memory_order_relaxed);
  if (i >= kThreads) return -1;
  if (i >= kBlock && i % kBlock == 0) {
    std::atomic<ThreadTimers*>& block = more_[i / kBlock - 1];
    if (!block.load(std::memory_order_relaxed)) {
      ThreadTimers* made = new (std::nothrow) ThreadTimers[kBlock];
      if (!made) return -1;
      block.store(made, std::memory_order_release);
    }
  }
  ThreadTimers& t = entry(i);
  t = ThreadTimers{};
  t.thread = pthread_self();
  t.tid = static_cast<pid_t>(syscall(SYS_gettid));
  t.clock = clock;
  nth_.store(i + 1, std::memory_order_release);
  return i;
}

// The calling thread's entry, for follow (the Lua thread, the signal
// blocked): its own; else an ended thread's, whose timers signal nobody
// now (found by its pthread_t, which the calling thread may have been
// given again, or by its kernel id no longer being there); else a new one.
// A pool that makes a thread per job so keeps one entry per live thread.
int Sampler::claim_entry(clockid_t clock) noexcept {
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  int i = entry_of(pthread_self());
  if (i >= 0 && entry(i).tid == tid) return i;
  if (i < 0) i = ended_entry();
  if (i < 0) return add_entry(clock);
  recycle(entry(i), clock);
  return i;
}

int Sampler::ended_entry() const noexcept {
  const int n = nth_.load(std::memory_order_acquire);
  const pid_t pid = getpid();
  for (int i = 0; i < n; ++i) {
    const pid_t tid = entry(i).tid;
    if (tid && syscall(SYS_tgkill, pid, tid, 0) != 0 && errno == ESRCH) return i;
  }
  return -1;
}

// An ended thread's entry, the calling thread's now. Its timers go: they
// signal a thread that is not there, so no handler runs on them.
void Sampler::recycle(ThreadTimers& t, clockid_t clock) noexcept {
  if (t.made) {
    timer_delete(t.tick);
    if (cpu_clock_) timer_delete(t.cpu);
  }
  t.made = t.armed = false;
  t.tick_on = 0;
  t.idle_wakes = 0;
  t.last_seen = 0;
  t.clock = clock;
  t.tid = static_cast<pid_t>(syscall(SYS_gettid));
  t.thread = pthread_self();
}

// Both timers of the calling thread, delivering to it alone, stopped.
bool Sampler::make_timers(ThreadTimers& t, std::string& err) noexcept {
  sigevent ev;
  std::memset(&ev, 0, sizeof ev);
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = signo_;
  ev.sigev_value.sival_int = slot_;
  ev.sigev_notify_thread_id = static_cast<pid_t>(syscall(SYS_gettid));
  if (timer_create(CLOCK_MONOTONIC, &ev, &t.tick) != 0)
    return err = std::string("timer_create: ") + std::strerror(errno), false;
  if (cpu_clock_ && timer_create(t.clock, &ev, &t.cpu) != 0) {
    err = std::string("timer_create (CPU clock): ") + std::strerror(errno);
    timer_delete(t.tick);
    return false;
  }
  t.made = true;
  return true;
}

// One of t's timers on: the tick timer (the thread runs now) or, in CPU
// mode, the CPU-clock one. On t's thread, the signal blocked or not yet ours.
void Sampler::arm(ThreadTimers& t, bool tick) noexcept {
  const itimerspec off{}, on = every(period_);
  tick = tick || !cpu_clock_;
  if (cpu_clock_) timer_settime(t.cpu, 0, tick ? &off : &on, nullptr);
  timer_settime(t.tick, 0, tick ? &on : &off, nullptr);
  t.tick_on = tick;
  t.idle_wakes = 0;
  t.last_seen = thread_clock(t);
  t.armed = true;
}

// CPU clock: the CPU-clock timer armed first (the thread is running now,
// pace() switches to the tick timer on its first signal); wall clock: the
// CLOCK_MONOTONIC timer alone, always on.
bool Sampler::start_timers(std::string& err) {
  ThreadTimers& t = here();
  if (!make_timers(t, err)) return false;
  base_ = 0;
  seg_start_ = cpu_clock_ ? thread_clock(t) : 0;
  next_due_ = clock_now() + period_;
  arm(t, false);
  return true;
}

// Handler only, on t's thread (CPU clock). A wake-up that finds the thread
// used less than a quarter period since the last one means it waited:
// preempted (runnable, on a busy machine) or blocked in a system call.
// Twice in a row, it is taken as blocked and the tick timer goes off, so
// that a thread waiting in a system call is woken at most twice per wait
// (calls restart under SA_RESTART; select, poll and nanosleep return
// EINTR, as with any signal); the CPU-clock timer, which only fires while
// the thread runs, brings the tick timer back. Once only is a preemption,
// and the tick timer stays (else the next samples would wait for a
// scheduler tick).
void Sampler::pace(ThreadTimers& t, uint64_t raw) {
  const uint64_t ran = raw - t.last_seen;
  t.last_seen = raw;
  const itimerspec off{}, on = every(period_);
  const bool waited = ran < period_ / 4;
  t.idle_wakes = waited ? t.idle_wakes + 1 : 0;
  if (t.tick_on && waited && t.idle_wakes >= 2) {
    timer_settime(t.tick, 0, &off, nullptr);
    timer_settime(t.cpu, 0, &on, nullptr);
    t.tick_on = 0;
  } else if (!t.tick_on && !waited) {
    timer_settime(t.cpu, 0, &off, nullptr);
    timer_settime(t.tick, 0, &on, nullptr);
    t.tick_on = 1;
  }
}

void Sampler::tick_again() noexcept {
  ThreadTimers& t = here();
  if (t.tick_on) return;  // charge() paced it on
  arm(t, true);
}

uint64_t Sampler::due() {
  if (kind_ != SamplerKind::timer) return 1;  // the polling thread counted them in owed_
  ThreadTimers& t = here();
  const uint64_t raw = thread_clock(t);
  if (raw == 0) return 0;
  if (cpu_clock_) pace(t, raw);
  const uint64_t now = state_clock(raw);
  if (now < next_due_) return 0;
  const uint64_t k = 1 + (now - next_due_) / period_;
  next_due_ += k * period_;
  owed_.fetch_add(k, std::memory_order_relaxed);
  return k;
}

// Resting is for a state that runs nothing on this thread: a signal that
// found it running code (a C function, or Lua with hooks off) starts the
// count again. A collection marking a large heap for 30 ms before its
// finalizers ran made the timers rest after 8 periods of the mark, so that
// every finalizer's period was charged to collectgarbage itself.
void Sampler::settle(bool running) noexcept {
  if (kind_ != SamplerKind::timer) return;
  if (running) {
    untaken_ = 0;
  } else if (++untaken_ >= kRestAfter && !resting_) {
    quiet_here();
    resting_ = 1;
  }
}

void Sampler::rouse() noexcept {
  if (!resting_) return;
  sigset_t old;
  block(old);
  if (resting_) {
    resting_ = 0;
    untaken_ = 0;
    due();  // the periods while resting: owed, to the recorded positions
    ThreadTimers& t = here();
    if (t.made && !t.armed) arm(t, true);
  }
  unblock(old);
}

// The state moved to the calling thread (sampler.hpp). The clock so far is
// kept (the old thread's time up to now: its clock, or its last reading
// when it has ended); this thread's timers are made the first time and
// switched on; the old thread's go off at their next signal there
// (quiet_here), not from here: a state that comes back soon finds them on.
bool Sampler::follow(clockid_t cpu_clock_id) noexcept {
  if (!signo_) return false;
  sigset_t old;
  block(old);
  const ThreadTimers& from = here();
  if (cpu_clock_) {
    const uint64_t raw = thread_clock(from);
    base_ = state_clock(raw ? raw : from.last_seen);
  }
  lua_thread_.store(pthread_self());
  const int i = claim_entry(cpu_clock_id);
  bool ok = i >= 0;
  std::string err = ok ? "" : "more threads than its table holds";
  if (ok) {
    ThreadTimers& t = entry(i);
    seg_start_ = cpu_clock_ ? thread_clock(t) : 0;
    cur_.store(i, std::memory_order_relaxed);
    if (kind_ == SamplerKind::timer && !t.made) ok = make_timers(t, err);
    if (kind_ == SamplerKind::timer && ok && !t.armed) arm(t, true);
    resting_ = 0;
    untaken_ = 0;
  }
  if (!ok) {
    // Said in the summary (Sampler::unsampled_threads): the first reason.
    if (unsampled_++ == 0) std::snprintf(unsampled_why_, sizeof unsampled_why_, "%s", err.c_str());
  }
  unblock(old);
  return ok;
}

void Sampler::quiet_here() noexcept {
  const int i = entry_of(pthread_self());
  if (i < 0) return;
  ThreadTimers& t = entry(i);
  if (!t.made || !t.armed) return;
  const itimerspec off{};
  timer_settime(t.tick, 0, &off, nullptr);
  if (cpu_clock_) timer_settime(t.cpu, 0, &off, nullptr);
  t.armed = false;
  t.tick_on = 0;
}

void Sampler::delete_timers() noexcept {
  const int n = nth_.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    ThreadTimers& t = entry(i);
    if (!t.made) continue;
    timer_delete(t.tick);
    if (cpu_clock_) timer_delete(t.cpu);
    t.made = t.armed = false;
  }
}

}  // namespace lfc
