// The LuaJIT adapter's session: the run (core/profile.hpp: options,
// metrics, names, tree, counts, outputs, stream) with the frame table every
// Lua shares (vm/lua/frames.hpp), and what LuaJIT adds: its sampler (its
// profiler API driven by our own timer thread), the tracer (LuaJIT's hooks
// are global: one hook sees every coroutine) and the resume chain. It uses
// nothing of the Lua 5.4 adapter (vm/puc).
//
// Threads: the Lua thread runs the profiler callback, the trace hook and
// the coroutine wrappers; the timer thread reads the Lua thread's CPU clock,
// sends it SIGPROF when no sample is pending (LuaJIT's own handler takes it)
// and otherwise counts the periods and waits for the callback (the contract
// is in jsampler.cpp); the streamer thread only reads the tree.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/profile.hpp"
#include "vm/lua/frames.hpp"

extern "C" {
#include <lua.h>
}

namespace lfc::jit {

/// A thread's stack as the tracer sees it: one entry per traced frame,
/// keyed by the frame's slot on its Lua stack (LuaJIT's lua_getstack gives
/// it modulo 2^16 in lua_Debug.i_ci; unwrapped against the last entry).
struct JShadow {
  struct Entry {
    uint32_t node, frame;
    int64_t slot;
  };
  std::vector<Entry> stack;
  uint32_t root = 0;  ///< node the thread's frames hang under (its resumer's frame)
  uint32_t top() const { return stack.empty() ? root : stack.back().node; }
};

/// The run and its frame table.
struct JRun : Profile {
  explicit JRun(const Options& o) : Profile(o, vm_release()) {
    if (opt.sources && !opt.server.empty()) frames.sources = &source_files;
    tree.overflow_frame = frames.named("[luaflame] too many stacks");
  }
  FrameTable frames{names};
};

struct JitState {
  /// frame_at's answer for a frame that is not shown: the original coroutine.resume our wrappers
  /// call.
  static constexpr uint32_t kSkip = 0xffffffffu;
  std::unique_ptr<JRun> s;  ///< options, metrics, names, frames, tree, streamer
  lua_State* L = nullptr;   ///< the thread start() was called on
  lua_State* main_L = nullptr;
  std::uint64_t closer_id = 0;  ///< the serial of this run's closer (vm/lua/closer.hpp)

  // ---- frames ----
  uint32_t vm_frame[5] = {};                           ///< [JIT] [interp] [C] [GC] [compiler]
  std::unordered_map<const void*, uint32_t> c_frames;  ///< C functions by GCfunc address
  std::vector<char> c_frame;                           ///< frame id -> is a C function
  uint32_t frame_at(lua_State* L, lua_Debug* ar, bool leaf);
  bool is_c(uint32_t f) const { return f < c_frame.size() && c_frame[f]; }
  /// L's frames leaf first, then its resumers' (the resume chain).
  void walk(lua_State* L, std::vector<uint32_t>& out);
  uint32_t path_node(const std::vector<uint32_t>& leaf_first);
  std::vector<uint32_t> scratch;

  // ---- coroutine resume chain (coroutine.resume / wrap wrappers) ----
  std::vector<lua_State*> chain;  ///< chain.back() runs
  void enter(lua_State* L, lua_State* co);
  void leave(lua_State* co);
  int orig_resume_ref = -2, orig_wrap_ref = -2;
  const void* resume_fn = nullptr;  ///< our wrappers, named as the 5.4 collector names them
  const void* wrap_fn = nullptr;
  lua_CFunction wrap_call = nullptr;  ///< the C function of every coroutine.wrap result

  // ---- sampler (jsampler.cpp) ----
  pthread_t lua_thread{};
  clockid_t cpu_clock{};
  bool profiling = false;
  std::thread timer;
  std::atomic<bool> timer_stop{false};
  std::atomic<uint64_t> signals{0};  ///< SIGPROFs sent by the timer thread
  bool start_sampler(std::string& err);
  void stop_sampler();
  void on_samples(lua_State* L, int samples, int vmstate);

  // ---- tracer (jtracer.cpp) ----
  std::unordered_map<lua_State*, JShadow> shadows;
  uint64_t last_ns = 0;
  bool jit_was_on = false;
  lua_Hook prev_hook = nullptr;  ///< the start thread's hook before start, restored at stop
  int prev_mask = 0, prev_count = 0;
  void trace_event(lua_State* L, lua_Debug* ar);
  void charge_now();
  void seed(lua_State* T);
  void done(uint64_t t0);  ///< a hook event's end: its cost counted, not charged
  void reroot(JShadow& sh, uint32_t root);
};

/// The running session, or null (one per process).
extern std::atomic<JitState*> g_jit;

uint64_t thread_cpu_ns(clockid_t c);
void trace_hook(lua_State* L, lua_Debug* ar) noexcept;  ///< jtracer.cpp
/// Ends profiling after the profiler's own failure (what its hook or
/// callback threw); the program runs on. Said once on stderr.
void abandon(const char* why) noexcept;

}  // namespace lfc::jit
