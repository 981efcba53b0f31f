// The LuaJIT adapter's session: the run (jframes.hpp's JRun: the core's
// Profile with the frame table every Lua shares) and LuaJIT's parts, each
// owning its state: the resume chain and the frames (jframes.hpp), the
// tracer (jtracer.hpp: LuaJIT's hooks are global, one hook sees every
// coroutine), the sampler (jsampler.hpp: LuaJIT's profiler driven by our
// timer thread). The session's parts and state are private; the C entry
// points LuaJIT calls (the trace hook, the profiler callback, the
// coroutine wrappers, the state's closer, in jsession.cpp) and the API's
// start/stop/flush/folded call its member functions. No part includes
// this header; jsession.cpp and jhost.cpp (the host's coroutine and
// thread functions wrapped) do. It uses nothing of the PUC
// adapter (vm/puc).
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
#include <vector>

#include "vm/lua/boundary.hpp"
#include "vm/luajit/jframes.hpp"
#include "vm/luajit/jsampler.hpp"
#include "vm/luajit/jtracer.hpp"

extern "C" {
#include <lua.h>
}

namespace lfc::jit {

class JSession {
 public:
  // ---- its life ----
  /// The API's start(): the session of L's state, running (g_jit) when
  /// true; false with `err`, nothing left. One per process: LuaJIT's
  /// profiler is.
  static bool start(lua_State* L, const Options& o, std::string& err);
  /// Ends the run and deletes the session: with L (on the Lua thread) the
  /// hook, the JIT and the coroutine wrappers are given back first
  /// (`closing`: from the state's closer, where the JIT is not); then the
  /// files, the stream and the summary. Null L: at exit.
  Summary stop(lua_State* L, bool closing);
  /// The API's flush() and folded(): the files and the stream now, one
  /// metric's folded text now.
  void flush();
  bool folded(const std::string& metric, std::string& out, std::string& err);
  /// L is a thread of the state this session profiles (they share the registry).
  bool profiles(lua_State* L) const;
  /// L's lua_close is the end of this session's state (its closer's).
  bool closes_with(lua_State* L) const;
  /// The sampler's timer thread ends (abandon, after a failure).
  void abandon() { sampler_.abandon(); }
  /// A run left behind (after a fork, or abandoned) whose state gets a new
  /// run: its library wrappers come off first, so that the new run's wrap
  /// LuaJIT's or the host's own functions, not the old run's. Once; L's
  /// thread.
  void take_off_wrappers(lua_State* L) {
    restore_coroutine_wrappers(L);
    restore_hook_wrappers(L);
  }
  /// The run, for the core's ending (core/profile.hpp: finish_outside_all).
  Profile& run() { return *run_; }

  // ---- the events its entry points forward (Lua thread) ----
  /// L resumes co / co gave control back (the coroutine wrappers).
  void on_resume(lua_State* L, lua_State* co);
  void on_return(lua_State* co);
  /// L resumes co through the host's resume, wrapped (jhost.cpp).
  void on_host_resume(lua_State* L, lua_State* co);
  /// The node of L's stack now, which a thread L spawns hangs under (jhost.cpp).
  uint32_t spawn_node(lua_State* L);
  /// L, a spawned thread, hangs under `node` while its first frame runs `f`.
  void on_spawned(lua_State* L, uint32_t node, const void* f);
  /// A call or return event (the trace hook).
  void on_hook(lua_State* L, lua_Debug* ar) { tracer_.event(L, ar); }
  /// The program's hook while tracing (jhooks.cpp; JTracer's program_hook).
  bool tracing() const { return run_->opt.trace; }
  void adopt_program_hook(lua_State* L) {
    if (run_->opt.trace) tracer_.adopt(L);
  }
  JTracer::Chained program_hook() const { return tracer_.program_hook(); }
  void show_program_hook(lua_State* L) const { tracer_.show_program_hook(L); }
  void own_hook_back(lua_State* L) const { tracer_.own_hook_back(L); }
  /// LuaJIT's profiler callback: `samples` SIGPROFs since the last one.
  void on_samples(lua_State* L, int samples, int vmstate) {
    sampler_.on_samples(L, samples, vmstate);
  }

 private:
  JSession(const Options& o, lua_State* start_L);
  void begin(lua_State* L);
  bool arm(lua_State* L, std::string& err);
  void install_coroutine_wrappers(lua_State* L);
  void install_host_resume(lua_State* L);
  void push_host_args(lua_State* L);
  void install_host_spawn(lua_State* L);
  void restore_host_spawn(lua_State* L);
  void restore_coroutine_wrappers(lua_State* L);
  /// debug.sethook and debug.gethook wrapped while tracing (jhooks.cpp).
  void install_hook_wrappers(lua_State* L);
  void restore_hook_wrappers(lua_State* L);
  void fill_summary(Summary& sum) const;

  // The run first (built first, destroyed last): the parts hold references into it.
  std::unique_ptr<JRun> run_;    ///< options, metrics, names, frames, tree, streamer
  lua_State* const L_;           ///< the thread start() was called on
  std::uint64_t closer_id_ = 0;  ///< the serial of this run's closer (vm/lua/closer.hpp)
  ResumeChain chain_;
  JFrames frames_;
  JTracer tracer_;
  JSampler sampler_;
  /// The original coroutine.resume and coroutine.wrap (registry references);
  /// ours are named in `frames_`.
  int orig_resume_ref_ = -2, orig_wrap_ref_ = -2;
  /// The host's resume wrapped (install_host_resume): its links table.
  int links_ref_ = -2, firsts_ref_ = -2;  ///< and each linked thread's first function
  bool host_wrapped_ = false;             ///< install_host_resume put the wrappers in
  /// The host's ngx.thread.spawn (registry reference) and our wrapper in its place.
  int orig_spawn_ref_ = -2;
  const void* spawn_fn_ = nullptr;
  std::vector<uint32_t> spawn_frames_;  ///< spawn_node's walk, kept between spawns
  /// jlayout.hpp's reads hold on this LuaJIT (layout::probe at start), or why not.
  bool layout_ok_ = false;
  std::string layout_why_;
  /// coroutine.resume is LuaJIT's own (a fast function), not a host's
  /// (OpenResty's): ours replace it and coroutine.wrap (jsession.cpp).
  bool own_resume_ = false;
  /// Our debug.sethook and debug.gethook, while in place (jhooks.cpp).
  const void* hook_fns_[2] = {nullptr, nullptr};
};

/// The running session, or null (one per process: LuaJIT's profiler is).
extern std::atomic<JSession*> g_jit;

/// The trace hook (jsession.cpp), and the program's hook it forwards to
/// for the events of its mask (jhooks.cpp).
void trace_hook(lua_State* L, lua_Debug* ar) LF_LUA_ENTRY;
void forward_program_hook(lua_State* L, lua_Debug* ar);

/// Ends profiling after the profiler's own failure (what its hook or
/// callback threw); the program runs on. Said once on stderr.
void abandon(const char* why) noexcept;

}  // namespace lfc::jit
