// The sampler: turns the passing of the sampled clock (the state's CPU
// time on the threads that run it, or wall time) into owed sample periods
// and the positions the thread was at, and asks the session to arm its
// one-shot hook. Internal.
//
// Signal-safety contract (the handler is the adapter's on_sampler_signal,
// session_common.cpp: it routes by slot to a session's Sampling).
// The signal is delivered to the thread that runs the state only (its
// kernel timers with SIGEV_THREAD_ID, or pthread_sigqueue from the
// fallback thread), carrying the session's slot; the handler samples only
// on the thread that runs the state now (on_its_thread), so it interrupts
// Lua-thread code and never runs beside it. On a thread the state has left
// it only switches that thread's own timers off (quiet_here). The
// sessions of several states share one handler and one signal
// (refcounted, sampler.cpp).
// What the handler writes, and what it may race with:
//   - `owed` (atomic) and, in timer mode, `next_due_`, `untaken_`,
//     `resting_` and the current thread's entry (its timers, `tick_on`,
//     `armed`, `idle_wakes`, `last_seen`): written by the handler (the
//     fallback thread adds to `owed` instead), and by wake(), rouse() and
//     follow() on the Lua thread with the signal blocked; the hook reads
//     and resets `owed` and `untaken_` inside a critical section, so no
//     update is lost. follow() also writes `base_`, `seg_start_`, `cur_`
//     and `lua_thread_`, the signal blocked on the new thread; a late
//     signal on the old thread reads only `lua_thread_` and its own entry.
//   - `pos_[]`/`npos_`, `seen_`, `pick_rng_`: the slot first (for a foreign
//     position, the frames foreign::copy_foreign copies: loads only, see
//     foreign.hpp), then the count, a signal fence between; once the
//     buffer is full a signal may rewrite a published slot in place
//     (slot_for: a uniform pick among the signals since the last drain),
//     which no reader sees half-written: the hook copies and resets them
//     inside a critical section (HookChain::begin_critical), during which the handler only counts
//     (`owed`) and defers its arm (HookChain::defer), so it never sees a
//     half-reset buffer and never writes one that is being read.
//   - the hook itself: lua_sethook is async-signal-safe by Lua's design
//     (see the comment above lua_sethook in ldebug.c, which lua.c's
//     SIGINT handler relies on); the handler calls it only outside
//     critical sections (HookChain::arm).
// The handler reads the running thread (`Coroutines::current`, atomic) and
// its CallInfo pointer (luaint::state_ci: one aligned pointer load, which
// the Sampler never dereferences; what Sampling reads through it:
// sampling.hpp) and calls only clock_gettime, timer_settime (both
// async-signal-safe) and lua_sethook. errno is saved and restored.
#pragma once

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <string>
#include <thread>

extern "C" {
#include <lua.h>
}

#include "core/futex.hpp"
#include "luaflame/collector.hpp"  // SamplerKind
#include "vm/puc/foreign.hpp"

namespace lfc {

/// The handler every session's signal runs, one per process: the adapter's
/// (session_common.cpp), which finds the session by the slot the signal
/// carries (si_value) and hands the signal to its parts. The contract above
/// holds for it; no C++ exception leaves it.
void on_sampler_signal(int sig, siginfo_t* si, void* uctx) noexcept;

class Sampler {
 public:
  Sampler() = default;
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;
  /// From now on take SIGPROF first when it is free (an attached host:
  /// hosts that reset every signal or block them spare SIGPROF, the
  /// profiler's by convention; HAProxy's deinit_signals does). Called
  /// before start, on the thread that starts.
  static void prefer_sigprof() noexcept;

  /// Where the thread was when a signal fell, and the periods it stands for.
  struct Pos {
    lua_State* L;
    const void* ci;  ///< L's running CallInfo then (luaint::state_ci), not dereferenced there;
                     ///< null: the hook's stack (5.1, no walk)
    uint32_t weight;
    /// The thread was in luaflame's own hook (Sampling::on_signal).
    bool in_hook;
    /// The thread ran a finalizer or a program hook (foreign.hpp): `copy`
    /// holds the anchor and the frames above it; `ci` is unused.
    bool foreign;
    foreign::Copy copy;
  };
  static constexpr int kMaxPos = 16;

  /// Installs the handler (or shares the one another session installed)
  /// and starts the kernel timers (or, where they cannot be made, the
  /// fallback thread); their signals carry `slot`, the session's
  /// (sessions.hpp). Call on the Lua thread.
  bool start(double hz, bool cpu_clock, clockid_t cpu_clock_id, int slot, std::string& err);
  /// Stops the timers or the thread; the last session to hold the signal
  /// takes one still pending and gives it back to its previous owner. Any
  /// thread (at exit, for a session of another thread).
  void stop();
  /// The state now runs on the calling thread, whose CPU clock is
  /// `cpu_clock_id`: the timers follow it (made again for this thread).
  /// False when they could not be: sampling ends there. On the new
  /// thread, while the state runs no Lua (attach::host_resume).
  bool follow(clockid_t cpu_clock_id) noexcept;
  /// Threads the state moved to whose timers could not be made (the
  /// process's limit on timers, RLIMIT_SIGPENDING): not sampled there; the
  /// first one's reason.
  int unsampled_threads() const { return unsampled_; }
  const char* unsampled_why() const { return unsampled_why_; }
  /// The handler runs on the thread that runs the state (sampler.cpp).
  bool on_its_thread() const noexcept {
    return pthread_equal(pthread_self(), lua_thread_.load(std::memory_order_relaxed)) != 0;
  }
  /// The sampled clock when the handler last read it (CPU-clock timers;
  /// else 0): what the state's thread had used by then, once that thread
  /// has ended and its clock cannot be read.
  uint64_t last_clock() const;
  /// Kernel timers, the polling thread, or none (off).
  SamplerKind kind() const { return kind_; }
  /// The Lua thread is about to run Lua after a wait (an attached host
  /// resumes a coroutine: a request begins): `charge()` (the handler's
  /// path: the periods due now, at the host's position) and the tick timer
  /// back on if pace() had switched it off. Else the first signal of the
  /// burst comes from the CPU-clock timer, which the kernel fires only at
  /// its tick (4 ms on Debian's kernels), and its periods, owed since the
  /// burst began, are all charged where it lands: a host serving short
  /// requests had the first function of each request charged to the next
  /// (HAProxy: 63% where 75% was done). Lua thread only, never in the
  /// handler; the signal is blocked while it writes what the handler writes.
  template <class F>
  void wake(F&& charge) noexcept {
    if (kind_ != SamplerKind::timer || !cpu_clock_ || !here().armed || here().tick_on) return;
    sigset_t old;
    block(old);
    if (!here().tick_on) {  // the handler may have switched it in between
      charge();
      tick_again();
    }
    unblock(old);
  }
  /// The hook's side, before drain: when the handler let the timers rest
  /// (kRestAfter signals in a row found the armed hook not yet taken and
  /// the state running nothing on this thread: settle), the
  /// periods since are counted now, charged with the others to the
  /// recorded positions, and the timers go on again. Lua thread.
  void rouse() noexcept;
  /// A signal of this session on a thread that no longer runs its state
  /// (the handler's): that thread's timers go off until the state comes
  /// back (follow). Async-signal-safe.
  void quiet_here() noexcept;

  // ---- the handler's side (on_sampler_signal, Lua thread) ----
  /// Periods of the clock due now, 0 when none (timer mode: reads the
  /// clock, paces the timers); the fallback thread counted them already.
  uint64_t due();
  /// After due(): whether the state was running code (`running`: a call in
  /// progress on its running thread) or not (idle, or not known). The
  /// timers rest after kRestAfter signals in a row found it idle with the
  /// armed hook not yet taken; running code is sampled at every period.
  void settle(bool running) noexcept;
  void note_position(lua_State* L, const void* ci, uint64_t weight, bool in_hook);
  /// A position in foreign code: the anchor and the frames above it copied
  /// (foreign::copy_foreign), or nothing recorded when no anchor was found.
  void note_foreign(lua_State* L, uint64_t weight, const luaint::Layout& layout);

  // ---- the hook's side, inside a critical section ----
  /// Owed periods (reset) and the recorded positions (copied, reset).
  uint64_t drain(Pos (&out)[kMaxPos], int& n);
  /// Periods per position: each its own weight, plus a share of the owed
  /// periods no kept position stands for (signals a full buffer let go, or
  /// deferred by a critical section) in proportion to its weight, so that
  /// they land where the kept positions say the thread spent its time, not
  /// all at the last one; the last position takes what rounding leaves.
  /// None kept: 0 entries (the hook's stack takes `owed`). Pure.
  static void share(const Pos* pos, int n, uint64_t owed, uint64_t* out);
  bool owes() const { return owed_.load(std::memory_order_relaxed) != 0; }

 private:
  /// The kernel timers of one thread the state has run on (timer mode),
  /// and its CPU clock. Each entry's timers, `armed`, `tick_on`,
  /// `idle_wakes` and `last_seen` are written on that thread only (by
  /// follow with the signal blocked, or by the handler); stop() deletes
  /// them from any thread once no handler can run for the session.
  struct ThreadTimers {
    pthread_t thread{};
    pid_t tid = 0;      ///< its kernel id: a pthread_t is reused once its thread is joined
    clockid_t clock{};  ///< the thread's CPU clock
    timer_t cpu{}, tick{};
    bool made = false;   ///< both timers exist
    bool armed = false;  ///< one of them runs
    volatile sig_atomic_t tick_on = 0;
    int idle_wakes = 0;      ///< wake-ups in a row that found it waiting
    uint64_t last_seen = 0;  ///< the thread's own clock at its last wake-up
  };
  /// Entries come in blocks: the first in the sampler, the others made by
  /// follow (on the Lua thread, the signal blocked) when a state reaches a
  /// new thread, published before the count that makes them visible, freed
  /// with the sampler. The handler only loads them.
  static constexpr int kBlock = 64;
  static constexpr int kThreads =
      64 * kBlock;  ///< threads a state may run on (more: not sampled there)
  /// Signals in a row with the armed hook not taken and the state idle
  /// before the timers rest (settle): a state that runs nothing (a host's
  /// idle state on a thread busy with another) costs this many signals,
  /// not one per period.
  static constexpr int kRestAfter = 8;

  /// Entry i, published (i < nth_): async-signal-safe, loads only.
  ThreadTimers& entry(int i) noexcept {
    return i < kBlock ? th_[i] : more_[i / kBlock - 1].load(std::memory_order_acquire)[i % kBlock];
  }
  const ThreadTimers& entry(int i) const noexcept { return const_cast<Sampler*>(this)->entry(i); }
  const ThreadTimers& here() const { return entry(cur_.load(std::memory_order_relaxed)); }
  ThreadTimers& here() { return entry(cur_.load(std::memory_order_relaxed)); }
  uint64_t thread_clock(const ThreadTimers& t) const;
  /// The sampled clock: in CPU mode the state's, summed over the threads it
  /// ran on (base_ + this segment), so periods carry over a move.
  uint64_t clock_now() const;
  uint64_t state_clock(uint64_t raw) const {
    return base_ + (raw > seg_start_ ? raw - seg_start_ : 0);
  }
  int entry_of(pthread_t self) const noexcept;
  int add_entry(clockid_t clock) noexcept;
  int claim_entry(clockid_t clock) noexcept;
  int ended_entry() const noexcept;
  void recycle(ThreadTimers& t, clockid_t clock) noexcept;
  bool make_timers(ThreadTimers& t, std::string& err) noexcept;
  void arm(ThreadTimers& t, bool tick) noexcept;
  bool start_timers(std::string& err);
  void pace(ThreadTimers& t, uint64_t raw);
  void block(sigset_t& old) noexcept;
  void unblock(const sigset_t& old) noexcept;
  void tick_again() noexcept;  ///< wake's: the tick timer on, the CPU-clock one off
  void delete_timers() noexcept;
  void poll_main() noexcept;

  SamplerKind kind_ = SamplerKind::none;
  double hz_ = 0;
  bool cpu_clock_ = true;
  uint64_t period_ = 0;
  int signo_ = 0;
  int slot_ = -1;  ///< the session's slot, carried by the signal (sigev_value)
  std::atomic<pthread_t> lua_thread_{};

  std::atomic<uint64_t> owed_{0};  ///< periods elapsed not yet sampled
  Pos pos_[kMaxPos] = {};
  volatile sig_atomic_t npos_ = 0;
  /// Positions offered since the last drain, and the handler's generator
  /// for slot_for's pick (both reset or advanced by the handler only, and
  /// by drain inside a critical section).
  uint32_t seen_ = 0;
  uint32_t pick_rng_ = 0x9e3779b9u;  ///< xorshift32 state (core/xorshift.hpp)
  /// The slot a new position goes to: the next free one, or once the
  /// buffer is full a uniformly picked slot with probability
  /// kMaxPos/seen (reservoir sampling: every signal since the last drain
  /// equally likely kept), else -1. Handler only.
  int slot_for() noexcept;

  // The threads (entry 0: where start ran) and the one that runs the state
  // now. In CPU mode the CPU-clock timer only fires at scheduler ticks (250
  // Hz here, whatever period is asked), so while the thread runs a
  // CLOCK_MONOTONIC timer at the period wakes it instead, and goes off as
  // soon as a wake-up finds the thread mostly waited (it then has not used
  // the CPU: the CPU-clock timer takes over until it runs again).
  ThreadTimers th_[kBlock];
  std::atomic<ThreadTimers*> more_[kThreads / kBlock - 1] = {};
  std::atomic<int> nth_{0}, cur_{0};
  uint64_t base_ = 0, seg_start_ = 0;  ///< the state's clock (clock_now): follow writes them
  uint64_t next_due_ = 0;              ///< handler only (and follow, the signal blocked)
  int untaken_ = 0;                    ///< handler; reset by drain (critical section)
  volatile sig_atomic_t resting_ = 0;  ///< handler sets; rouse/follow clear (signal blocked)
  int unsampled_ = 0;                  ///< follow only (the Lua thread)
  char unsampled_why_[96] = "";

  // Fallback: a thread polling the clock, pthread_kill when a period passed.
  std::thread poller_;
  std::atomic<bool> poll_stop_{false};
  ThreadUp poller_up_;  ///< the poller runs its loop (start() waits for it)
};

}  // namespace lfc
