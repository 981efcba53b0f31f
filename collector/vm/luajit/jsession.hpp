// The LuaJIT adapter's session: the run (jframes.hpp's JRun: the core's
// Profile with the frame table every Lua shares) and LuaJIT's parts, each
// owning its state: the resume chain and the frames (jframes.hpp), the
// tracer (jtracer.hpp: LuaJIT's hooks are global, one hook sees every
// coroutine), the sampler (jsampler.hpp: LuaJIT's profiler driven by our
// timer thread). The session's files (jsession.cpp) hold the C entry
// points LuaJIT calls (the trace hook, the profiler callback, the
// coroutine wrappers, the state's closer) and start/stop; no part
// includes this header. It uses nothing of the PUC adapter (vm/puc).
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

#include "vm/luajit/jframes.hpp"
#include "vm/luajit/jsampler.hpp"
#include "vm/luajit/jtracer.hpp"

extern "C" {
#include <lua.h>
}

namespace lfc::jit {

/// The session: its run and its parts, which hold references into the run
/// (declared first: built first, destroyed last).
struct JitState {
  JitState(const Options& o, lua_State* start_L)
      : run(std::make_unique<JRun>(o)),
        L(start_L),
        frames(*run, chain),
        tracer(*run, frames, chain),
        sampler(*run, frames, tracer) {}

  std::unique_ptr<JRun> run;    ///< options, metrics, names, frames, tree, streamer
  lua_State* const L;           ///< the thread start() was called on
  std::uint64_t closer_id = 0;  ///< the serial of this run's closer (vm/lua/closer.hpp)
  ResumeChain chain;
  JFrames frames;
  JTracer tracer;
  JSampler sampler;
  /// The original coroutine.resume and coroutine.wrap (registry references);
  /// ours are named in `frames`.
  int orig_resume_ref = -2, orig_wrap_ref = -2;
  /// jlayout.hpp's reads hold on this LuaJIT (layout::probe at start), or why not.
  bool layout_ok = false;
  std::string layout_why;
  /// coroutine.resume is LuaJIT's own (a fast function), not a host's
  /// (OpenResty's): ours replace it and coroutine.wrap (jsession.cpp).
  bool own_resume = false;
};

/// The running session, or null (one per process: LuaJIT's profiler is).
extern std::atomic<JitState*> g_jit;

/// Ends profiling after the profiler's own failure (what its hook or
/// callback threw); the program runs on. Said once on stderr.
void abandon(const char* why) noexcept;

}  // namespace lfc::jit
