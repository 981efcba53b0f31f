// LuaJIT's sample mode (jsampler.cpp): LuaJIT's profiler takes the
// samples, our timer thread decides when. The contract between the timer
// thread, the signal handler and the Lua thread's callback is in
// jsampler.cpp; the session owns the C entry point LuaJIT calls back
// (profile_cb, jsession.cpp) and hands it to start().
#pragma once

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "core/futex.hpp"
#include "vm/luajit/jframes.hpp"
#include "vm/luajit/jtracer.hpp"

extern "C" {
#include <lua.h>
}

namespace lfc::jit {

/// A thread's CPU clock (pthread_getcpuclockid) or CLOCK_MONOTONIC, in ns; 0 on failure.
uint64_t thread_cpu_ns(clockid_t c);

/// LuaJIT's profiler callback: (data, L, samples, vmstate), luaJIT_profile_start's.
using ProfileCallback = void (*)(void*, lua_State*, int, int);

class JSampler {
 public:
  JSampler(JRun& run, JFrames& frames, JTracer& tracer)
      : run_(run), frames_(frames), tracer_(tracer) {}
  ~JSampler() { stop(); }
  JSampler(const JSampler&) = delete;
  JSampler& operator=(const JSampler&) = delete;
  /// On the Lua thread, at start: its clock is the one sampled (the
  /// run's cpu_clock option turned off when the thread has none).
  void bind_thread();
  /// The sampled clock now (ns).
  uint64_t clock_ns() const { return thread_cpu_ns(cpu_clock_); }
  /// LuaJIT's profiler started on L with `cb(data, ...)` and our timer
  /// thread; false with `err` (nothing left running).
  bool start(lua_State* L, ProfileCallback cb, void* data, std::string& err);
  /// The timer joined and LuaJIT's profiler stopped; SIGPROF's action of
  /// before start back. Idempotent.
  void stop();
  /// The callback's work: a sample of L's stack (Lua thread).
  void on_samples(lua_State* L, int samples, int vmstate);
  /// Abandoned (what the profiler threw): the timer thread ends, unjoined.
  void abandon() { timer_stop_.store(true); }
  std::size_t memory_bytes() const { return scratch_.capacity() * sizeof(uint32_t); }
  /// Whether the host's own C time is told from Lua's (jsampler.cpp,
  /// g_watch), and why not.
  bool host_told() const { return host_ok_; }
  const std::string& host_why() const { return host_why_; }
  /// Whether a finalizer's periods are told (jsampler.cpp, g_gc), and why not.
  bool gc_told() const { return gc_ok_; }
  const std::string& gc_why() const { return gc_why_; }

 private:
  void run_timer() noexcept;
  /// The periods the handler found outside Lua, to "[host] outside Lua" (Lua thread).
  void charge_host();
  /// The periods it found in finalizers, to "[gc] finalizer" over the
  /// walked stack (scratch_ from `base`), or at the root (Lua thread).
  void charge_gc(uint32_t base, bool walked);
  /// At stop, the periods no callback took (jsampler.cpp, g_forwarded).
  void charge_pending();

  JRun& run_;
  JFrames& frames_;
  JTracer& tracer_;
  lua_State* L_ = nullptr;  ///< the state LuaJIT's profiler runs on
  pthread_t lua_thread_{};
  pid_t lua_tid_ = 0, pid_ = 0;  ///< where the timer thread's tgkill goes
  clockid_t cpu_clock_ = CLOCK_MONOTONIC;
  bool profiling_ = false;
  bool host_ok_ = false, gc_ok_ = false;
  std::string host_why_, gc_why_;
  uint32_t host_frame_ = 0, gc_frame_ = 0;
  uint32_t last_node_ = 0;  ///< the last sample's node (charge_pending)
  std::thread timer_;
  std::atomic<bool> timer_stop_{false};
  ThreadUp timer_up_;              ///< the timer runs its loop (start() waits for it)
  std::vector<uint32_t> scratch_;  ///< a sample's frames, leaf first
};

}  // namespace lfc::jit
