// The sampler: turns the passing of the sampled clock (the Lua thread's CPU
// time, or wall time) into owed sample periods and the positions the
// thread was at, and asks the session to arm its one-shot hook. Internal.
//
// Signal-safety contract (the handler is on_signal in sampler.cpp).
// The signal is delivered to the Lua thread only (a per-thread kernel
// timer with SIGEV_THREAD_ID, or pthread_kill from the fallback thread),
// so the handler interrupts Lua-thread code and never runs beside it.
// What the handler writes, and what it may race with:
//   - `owed` (atomic) and, in timer mode, `next_due_`, `last_seen_`,
//     `tick_on_` and the two timers: written by the handler only (the
//     fallback thread adds to `owed` instead), and by wake() on the Lua
//     thread with the signal blocked; the hook reads and resets
//     `owed` inside a critical section, so no update is lost.
//   - `pos_[]`/`npos_`: the slot first (for a foreign position, the frames
//     foreign::copy_foreign copies: loads only, see foreign.hpp), then the
//     count, a signal fence
//     between; the hook copies and resets them inside a critical section
//     (HookChain::begin_critical), during which the handler only counts
//     (`owed`) and defers its arm (HookChain::defer), so it never sees a
//     half-reset buffer and never writes one that is being read.
//   - the hook itself: lua_sethook is async-signal-safe by Lua's design
//     (see the comment above lua_sethook in ldebug.c, which lua.c's
//     SIGINT handler relies on); the handler calls it only outside
//     critical sections (HookChain::arm).
// The handler reads the running thread (`Coroutines::current`, atomic) and
// its CallInfo pointer (luaint::state_ci: one aligned pointer load, never
// dereferenced there) and calls only clock_gettime, timer_settime (both
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

#include "luaflame/collector.hpp"  // SamplerKind
#include "vm/puc/foreign.hpp"

namespace lfc {

class Session;

class Sampler {
 public:
  /// From now on take SIGPROF first when it is free (an attached host:
  /// hosts that reset every signal or block them spare SIGPROF, the
  /// profiler's by convention; HAProxy's deinit_signals does). Called
  /// before start, on the thread that starts.
  static void prefer_sigprof() noexcept;

  /// Where the thread was when a signal fell, and the periods it stands for.
  struct Pos {
    lua_State* L;
    const void* ci;  ///< L's running CallInfo then (luaint::state_ci), not dereferenced there
    uint32_t weight;
    /// The thread was in luaflame's own hook (Sampling::on_signal).
    bool in_hook;
    /// The thread ran a finalizer or a program hook (foreign.hpp): `copy`
    /// holds the anchor and the frames above it; `ci` is unused.
    bool foreign;
    foreign::Copy copy;
  };
  static constexpr int kMaxPos = 16;

  /// Installs the handler and starts the kernel timers (or, where they
  /// cannot be made, the fallback thread). Call on the Lua thread.
  bool start(double hz, bool cpu_clock, clockid_t cpu_clock_id, std::string& err);
  /// Stops the timers or the thread, takes a signal still pending, and
  /// gives the signal back to its previous owner.
  void stop();
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
    if (kind_ != SamplerKind::timer || !has_cpu_timer_ || tick_on_) return;
    sigset_t old;
    block(old);
    if (!tick_on_) {  // the handler may have switched it in between
      charge();
      tick_again();
    }
    unblock(old);
  }

  // ---- the handler's side (on_signal, Lua thread) ----
  /// Periods of the clock due now, 0 when none (timer mode: reads the
  /// clock, paces the timers); the fallback thread counted them already.
  uint64_t due();
  void note_position(lua_State* L, const void* ci, uint64_t weight, bool in_hook);
  /// A position in foreign code: the anchor and the frames above it copied
  /// (foreign::copy_foreign), or nothing recorded when no anchor was found.
  void note_foreign(lua_State* L, uint64_t weight, const luaint::Layout& layout);

  // ---- the hook's side, inside a critical section ----
  /// Owed periods (reset) and the recorded positions (copied, reset).
  uint64_t drain(Pos (&out)[kMaxPos], int& n);
  bool owes() const { return owed_.load(std::memory_order_relaxed) != 0; }

 private:
  uint64_t clock_now() const;
  bool start_timers(std::string& err);
  void pace(uint64_t now);
  void block(sigset_t& old) noexcept;
  void unblock(const sigset_t& old) noexcept;
  void tick_again() noexcept;  ///< wake's: the tick timer on, the CPU-clock one off
  void poll_main() noexcept;

  SamplerKind kind_ = SamplerKind::none;
  double hz_ = 0;
  bool cpu_clock_ = true;
  clockid_t clock_id_{};
  uint64_t period_ = 0;
  int signo_ = 0;
  struct sigaction old_action_ {};
  pthread_t lua_thread_{};

  std::atomic<uint64_t> owed_{0};  ///< periods elapsed not yet sampled
  Pos pos_[kMaxPos] = {};
  volatile sig_atomic_t npos_ = 0;

  // Timer mode. In CPU mode the CPU-clock timer only fires at scheduler
  // ticks (250 Hz here, whatever period is asked), so while the thread
  // runs a CLOCK_MONOTONIC timer at the period wakes it instead, and goes
  // off as soon as a wake-up finds the thread mostly waited (it then has
  // not used the CPU: the CPU-clock timer takes over until it runs again).
  timer_t cpu_timer_{}, tick_timer_{};
  bool has_cpu_timer_ = false, has_tick_timer_ = false;
  uint64_t next_due_ = 0, last_seen_ = 0;  ///< handler only
  int idle_wakes_ = 0;  ///< handler only: wake-ups in a row that found it waiting
  volatile sig_atomic_t tick_on_ = 0;

  // Fallback: a thread polling the clock, pthread_kill when a period passed.
  std::thread poller_;
  std::atomic<bool> poll_stop_{false};
};

}  // namespace lfc
