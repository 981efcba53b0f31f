// Coroutine tracking: which thread runs, and which resumed it. Lua has no
// resume/yield event, so while profiling coroutine.resume and
// coroutine.wrap are luaflame's (coroutines.cpp: lcorolib.c's, with the
// session told of each switch, Session::on_resume / on_return). Internal.
//
// Contract with the signal handler and the allocator. `chain_` is the Lua
// thread's alone: written by enter()/leave()/start(), read by the stack
// walk (StackWalker), never by the handler. The handler (sampler.cpp,
// through Sampling::on_signal), HookChain::arm() and the allocator
// (alloc.cpp) read only `current_`: an atomic, written with the chain by
// enter()/leave() inside a critical section (HookChain::begin_critical) that
// the caller holds, so the handler never arms on a thread that has stopped
// running while the hook changes are under way (it defers; end_critical arms
// on the thread that runs then). Relaxed order suffices: the handler runs on
// the Lua thread itself (a signal fence, in the critical section, orders it).
// A sample already armed on the thread that stops running is re-armed on
// the one that runs now (disarm + arm, inside the same critical section),
// so it is charged to where the program is when the hook runs.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <vector>

extern "C" {
#include <lua.h>
}

namespace lfc {

class HookChain;

/// The calling thread's serial, one per thread for the process's life (a
/// pthread_t is given again once its thread is joined; a serial never is).
/// Not in a signal handler: the first call on a thread may allocate its
/// thread-local storage (a dlopen'd module's).
uint64_t thread_serial() noexcept;

class Coroutines {
 public:
  /// The running thread: read by the signal handler, HookChain::arm() and
  /// the allocator (see the contract above).
  const std::atomic<lua_State*>& current() const { return current_; }
  /// The resume chain, outermost first: back() runs (Lua thread only).
  const std::vector<lua_State*>& chain() const { return chain_; }

  /// At start, before the handler is installed: L runs, alone in the chain,
  /// on the calling thread (the Lua thread).
  void start(lua_State* L);
  /// The calling thread is the one that runs the profiled state. Told by
  /// thread_serial, not pthread_t: a host that joins a thread and makes
  /// another may be given the same pthread_t, and the new thread would pass
  /// for the old one (no follow_thread: its timers and CPU clock stayed
  /// with the ended thread, and nothing more was sampled).
  bool on_lua_thread() const { return thread_serial() == owner_.load(std::memory_order_relaxed); }
  /// The state runs on the calling thread from now on (Session::follow_thread).
  void move_here() { owner_.store(thread_serial(), std::memory_order_relaxed); }
  /// L resumes co. Inside the caller's critical section.
  void enter(lua_State* co, HookChain& hooks);
  /// co yielded, returned or failed back to L. Inside the caller's critical section.
  void leave(lua_State* L, lua_State* co, HookChain& hooks);

  std::size_t memory_bytes() const { return chain_.capacity() * sizeof(lua_State*); }

 private:
  std::atomic<lua_State*> current_{nullptr};
  std::vector<lua_State*> chain_;
  std::atomic<uint64_t> owner_{0};
};

}  // namespace lfc
