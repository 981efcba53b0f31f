// LuaJIT sessions: start/stop/flush/folded (luaflame/collector.hpp) for
// LuaJIT, and the C entry points LuaJIT calls: the trace hook, the
// profiler callback, the coroutine wrappers, the state's closer.
#include "vm/luajit/jsession.hpp"

#include <pthread.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/streamer.hpp"
#include "vm/lua/attach.hpp"
#include "vm/lua/boundary.hpp"
#include "vm/lua/closer.hpp"
#include "vm/lua/same_state.hpp"
#include "vm/luajit/jlayout.hpp"

extern "C" {
#include <lauxlib.h>
#include <luajit.h>
}

namespace lfc {

namespace jit {

std::atomic<JitState*> g_jit{nullptr};

namespace {

// Why alloc mode is refused (docs/luajit.md): checked, not assumed.
const char* const kNoAlloc =
    "alloc mode is not available with LuaJIT: its allocator runs inside JIT-compiled code, "
    "where the Lua stack is not written back, so no stack can be taken there, and this "
    "build's allocator (GC64, built-in) cannot be wrapped from outside";

// ------------------------------------------------------ coroutine wrappers
// coroutine.resume and coroutine.wrap are replaced while a session runs so
// the sampler and the tracer know which thread resumed which (LuaJIT's
// stack walk sees one coroutine). Each resumes through lua_resume
// (resume_in), with the original's results and messages: calling the
// original, a fast function, through lua_pcall was a call event of its
// own, which a program's call hook saw. Only LuaJIT's own resume is
// replaced: a host's (OpenResty's ngx_lua puts a Lua function there that
// ties the coroutine to the request, so that ngx.sleep in it yields to
// nginx) stays, as a yield through a C wrapper would cross a C frame.

void enter(lua_State* L, lua_State* co) {
  JitState* j = g_jit.load();
  if (!j) return;
  const bool trace = j->run->opt.trace;
  if (trace) j->tracer.charge_now();
  j->chain.enter(L, co);
  if (trace) j->tracer.resumed(L, co);
}
void leave(lua_State* co) {
  JitState* j = g_jit.load();
  if (!j) return;
  if (j->run->opt.trace) j->tracer.charge_now();
  j->chain.leave(co);
}

// LuaJIT's coroutine.resume (lib_base.c, ffh_resume) through lua_resume:
// resumes co with the `nargs` values on top of L, leaves on L what
// coroutine.resume returns (true and co's values, or false and a message)
// and returns their count. A coroutine with frames (running, or resuming
// another) "cannot resume running coroutine"; a finished or failed one
// "cannot resume dead coroutine". Errors inside co are returned, not raised.
int resume_in(lua_State* L, lua_State* co, int nargs) LF_LUA_ENTRY {
  lua_Debug ar;
  const int status = lua_status(co);
  const char* refused = nullptr;
  if (status == 0 && (co == L || lua_getstack(co, 0, &ar)))
    refused = "cannot resume running coroutine";
  else if (status > LUA_YIELD || (status == 0 && lua_gettop(co) == 0))
    refused = "cannot resume dead coroutine";
  if (refused) {
    lua_pop(L, nargs);
    lua_pushboolean(L, 0);
    lua_pushstring(L, refused);
    return 2;
  }
  if (!lua_checkstack(co, nargs + LUA_MINSTACK)) luaL_error(L, "stack overflow");
  lua_xmove(L, co, nargs);
  enter(L, co);
  int n = 0;
  const int st = lua_resume(co, L, nargs, &n);  // vm/lua/compat.hpp: LuaJIT's lua_resume(co, nargs)
  leave(co);
  if (st != 0 && st != LUA_YIELD) {
    lua_pushboolean(L, 0);
    lua_xmove(co, L, 1);
    return 2;
  }
  luaL_checkstack(L, n + 1, "too many results to resume");
  lua_pushboolean(L, 1);
  lua_xmove(co, L, n);
  return n + 1;
}

// coroutine.resume(co, ...): upvalue 1 the original, which raises the
// error of a first argument that is not a coroutine.
int lf_resume(lua_State* L) LF_LUA_ENTRY {
  lua_State* co = lua_tothread(L, 1);
  if (co) return resume_in(L, co, lua_gettop(L) - 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

// A coroutine.wrap function: upvalue 1 the coroutine.
// An error in the coroutine is raised in the caller with the caller's
// position before a string message, as LuaJIT's own wrap does.
int lf_wrap_call(lua_State* L) LF_LUA_ENTRY {
  lua_State* co = lua_tothread(L, lua_upvalueindex(1));
  const int n = lua_gettop(L);
  resume_in(L, co, n);  // L holds its results alone now
  if (!lua_toboolean(L, 1)) {
    if (lua_type(L, 2) == LUA_TSTRING) {
      luaL_where(L, 1);
      lua_pushvalue(L, 2);
      lua_concat(L, 2);
    } else {
      lua_pushvalue(L, 2);
    }
    return lua_error(L);
  }
  lua_remove(L, 1);
  return lua_gettop(L);
}

// coroutine.wrap(f).
int lf_wrap(lua_State* L) LF_LUA_ENTRY {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_State* co = lua_newthread(L);
  lua_pushvalue(L, 1);
  lua_xmove(L, co, 1);
  lua_pushcclosure(L, lf_wrap_call, 1);
  return 1;
}

void install_coroutine_wrappers(lua_State* L, JitState& j) {
  lua_getglobal(L, "coroutine");
  if (!lua_istable(L, -1)) return lua_pop(L, 1);
  lua_getfield(L, -1, "resume");
  j.own_resume =
      j.layout_ok && lua_iscfunction(L, -1) && jit::layout::is_fast_function(lua_topointer(L, -1));
  if (!j.own_resume) return lua_pop(L, 2);
  j.frames.skip(lua_topointer(L, -1));  // shown as our wrapper alone
  lua_pushvalue(L, -1);
  j.orig_resume_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushcclosure(L, lf_resume, 1);
  const void* resume_fn = lua_topointer(L, -1);
  lua_setfield(L, -2, "resume");
  lua_getfield(L, -1, "wrap");
  j.orig_wrap_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushcfunction(L, lf_wrap);
  j.frames.name_wrappers(resume_fn, lua_topointer(L, -1), lf_wrap_call);
  lua_setfield(L, -2, "wrap");
  lua_pop(L, 1);
}

// Puts the originals back unless the program replaced ours meanwhile.
void restore_coroutine_wrappers(lua_State* L, JitState& j) {
  lua_getglobal(L, "coroutine");
  if (lua_istable(L, -1)) {
    const struct {
      const char* name;
      int ref;
      const void* ours;
    } kFns[] = {{"resume", j.orig_resume_ref, j.frames.resume_fn()},
                {"wrap", j.orig_wrap_ref, j.frames.wrap_fn()}};
    for (const auto& f : kFns) {
      if (f.ref < 0) continue;
      lua_getfield(L, -1, f.name);
      const bool ours = lua_topointer(L, -1) == f.ours;
      lua_pop(L, 1);
      if (ours) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, f.ref);
        lua_setfield(L, -2, f.name);
      }
      luaL_unref(L, LUA_REGISTRYINDEX, f.ref);
    }
  }
  lua_pop(L, 1);
  j.orig_resume_ref = j.orig_wrap_ref = -2;
}

// The trace hook. Contract: LuaJIT's hooks are global and run on the Lua
// thread (jtracer.hpp). No C++ exception leaves it: what the tracer throws
// (std::bad_alloc growing its tables) ends profiling.
void trace_hook(lua_State* L, lua_Debug* ar) noexcept {
  JitState* j = g_jit.load();
  if (!j || (ar->event != LUA_HOOKCALL && ar->event != LUA_HOOKRET)) return;
  if (const char* failed = cxx_guard([&] { j->tracer.event(L, ar); })) abandon(failed);
}

// The profiler callback. Contract: LuaJIT calls it on the Lua thread, from
// its profile hook at an instruction boundary of the interpreter (a trace
// exits to it first), never from the signal handler, so the Lua API's
// read-only calls may be used on L; values pushed are popped before return.
// `samples` is the number of SIGPROFs taken since the last call (LuaJIT
// counts them in the handler): the weight of this sample. No C++
// exception leaves it.
void profile_cb(void* data, lua_State* L, int samples, int vmstate) noexcept {
  auto* j = static_cast<JitState*>(data);
  if (g_jit.load() != j) return;  // abandoned, or a child after fork
  if (const char* failed = cxx_guard([&] { j->sampler.on_samples(L, samples, vmstate); }))
    abandon(failed);
}

bool g_closing = false;  // stop() from the lua_close finalizer

// Stops the session when the state closes (lua_close runs the registry's
// finalizers while the state is whole): a session left running must not
// outlive its state, whose profiler it drives.
int on_state_close(lua_State* L) LF_LUA_ENTRY {
  JitState* j = g_jit.load();
  if (!j || j->closer_id != closer::serial_of(L)) return 0;  // a stopped run's closer
  const char* failed = cxx_guard([&] {
    g_closing = true;
    Summary s = stop(L);
    g_closing = false;
    if (g_report_at_exit) std::fprintf(stderr, "%s", format_summary(s).c_str());
  });
  if (failed) std::fprintf(stderr, "luaflame: ending the profile at lua_close: %s\n", failed);
  return 0;
}

// fork (pthread_atfork's child handler): the child inherits neither the
// sampler's timer thread nor the streamer's; the session is left behind
// (reachable, never written or streamed) and the child runs on unprofiled:
// the hooks of ours it meets find no session and return.
JitState* g_left_behind = nullptr;
void detach_in_child() {
  g_left_behind = g_jit.load();
  g_jit.store(nullptr);
}

}  // namespace

// The session is left behind as after a fork (g_left_behind: reachable,
// never freed while the program may still call into it); its hook and
// profile callback find no session and return, its timer thread ends.
void abandon(const char* why) noexcept {
  JitState* j = g_jit.load();
  if (!j) return;
  j->sampler.abandon();
  detach_in_child();
  std::fprintf(stderr, "luaflame: %s in the profiler: profiling stopped, the program runs on\n",
               why);
}

namespace {

void at_process_exit() {
  if (!g_jit.load()) return;
  Summary s = stop(nullptr);
  if (g_report_at_exit) std::fprintf(stderr, "%s", format_summary(s).c_str());
}

}  // namespace

}  // namespace jit

using jit::g_jit;
using jit::JitState;

namespace {

// L is a thread of the state the run profiles: they share the registry.
// LuaJIT's profiler is one per process (luaJIT_profile_start), so is the run.
bool profiles(const JitState* j, lua_State* L) {
  return j && same_state(j->L, L);
}

}  // namespace

bool running(lua_State* L) {
  return profiles(g_jit.load(), L);
}

bool start(lua_State* L, const Options& o, std::string& err) {
  if (JitState* other = g_jit.load())
    return err = profiles(other, L) ? "luaflame is already running (call luaflame.stop() first)"
                                    : "luaflame is already running on another state of this "
                                      "process (LuaJIT's profiler is one per process)",
           false;
  if (o.alloc) return err = jit::kNoAlloc, false;
  static std::once_flag exit_once;
  std::call_once(exit_once, [] {
    std::atexit(jit::at_process_exit);
    pthread_atfork(nullptr, nullptr, jit::detach_in_child);
  });
  Streamer::set_exit_handler(
      jit::at_process_exit);  // registered again after httplib's first answer
  auto j = std::make_unique<JitState>(o, L);
  jit::JRun& s = *j->run;
  if (!s.opt.tags.count("vm")) s.opt.tags["vm"] = "luajit";
  s.acct.start_wall = now_ns();
  s.acct.start_unix = unix_now_ns();
  j->sampler.bind_thread();
  s.acct.start_clock = j->sampler.clock_ns();
  j->chain.start(L);
  j->layout_ok = jit::layout::probe(L, j->layout_why);
  jit::install_coroutine_wrappers(L, *j);
  j->closer_id = closer::add(L, jit::on_state_close);
  JitState* raw = j.release();  // g_jit owns it from here: stop() deletes it
  g_jit.store(raw);
  if (s.opt.trace) raw->tracer.start(L, jit::trace_hook, raw->layout_ok, raw->layout_why);
  if (s.opt.sample && !raw->sampler.start(L, jit::profile_cb, raw, err)) {
    stop(L);
    return false;
  }
  s.start_streaming();
  return true;
}

bool finish_for_exit() {
  return finish_outside_all([](const std::function<void(Profile&)>& each) {
    if (JitState* j = g_jit.load()) each(*j->run);
  });
}

Summary stop(lua_State* L) {
  Summary sum;
  JitState* j = g_jit.load();
  if (!j || (L && !profiles(j, L))) return sum;
  ending_begin_stop(*j->run);
  jit::JRun& s = *j->run;
  if (s.opt.sample) j->sampler.stop();
  if (s.opt.trace) j->tracer.stop(L, jit::g_closing);
  if (L) {
    jit::restore_coroutine_wrappers(L, *j);
    closer::drop(L);
  }
  {
    std::lock_guard<std::mutex> lock(ending_mutex());  // finish_for_exit's visit
    g_jit.store(nullptr);
  }

  sum.mode = s.opt.trace ? (s.opt.sample ? "both" : "trace") : "sample";
  sum.lua = vm_release();
  sum.metrics = s.metrics;
  sum.wall_ns = now_ns() - s.acct.start_wall;
  const uint64_t clk = j->sampler.clock_ns();
  sum.clock_ns = clk > s.acct.start_clock ? clk - s.acct.start_clock : 0;
  sum.hz_asked = s.opt.hz;
  if (s.opt.sample) {
    sum.samples_asked = static_cast<uint64_t>(static_cast<double>(sum.clock_ns) * s.opt.hz / 1e9);
    sum.sample_events = s.acct.sample_events;
    sum.samples = s.acct.samples;
    sum.sampler = SamplerKind::thread;  // our timer thread sends the signals (jsampler.cpp)
    sum.hz_delivered = sum.clock_ns ? static_cast<double>(s.acct.sample_events) * 1e9 /
                                          static_cast<double>(sum.clock_ns)
                                    : 0;
  }
  sum.hook_ns = s.acct.hook_ns;
  if (s.opt.cpu_clock && sum.hook_ns > sum.clock_ns) sum.hook_ns = sum.clock_ns;
  sum.hook_calls = s.acct.hook_calls;
  sum.calls = s.acct.calls;
  sum.fast_paths = s.opt.sample ? "luajit_profiler" : "";
  if (s.opt.trace) {
    if (j->tracer.idents_off().empty())
      sum.fast_paths += sum.fast_paths.empty() ? "idents" : " idents";
    sum.fast_paths_off = "JIT compiler off while tracing (hooks do not fire in compiled code)";
    if (!j->tracer.idents_off().empty())
      sum.fast_paths_off += "; calls named through lua_getinfo: " + j->tracer.idents_off();
  }
  if (!j->own_resume) {
    if (!sum.fast_paths_off.empty()) sum.fast_paths_off += "; ";
    sum.fast_paths_off +=
        "coroutine.resume is not LuaJIT's own (the host's, or not verified): a coroutine's "
        "frames are not shown under its resumer";
  }
  sum.nodes = s.tree.size();
  sum.frames = s.names.size();
  sum.memory_bytes = sizeof(JitState) + sizeof(jit::JRun) + s.tree.memory_bytes() +
                     s.frames.memory_bytes() + j->frames.memory_bytes() + j->sampler.memory_bytes();
  s.output.write(sum);
  for (const auto& e : sum.file_errors) std::fprintf(stderr, "luaflame: %s\n", e.c_str());
  if (sum.files_failed) g_output_failed = true;
  if (s.streamer) s.streamer->finish(sum);
  ending_stopped(s);
  delete j;
  return sum;
}

void flush(lua_State* L) {
  JitState* j = g_jit.load();
  if (!profiles(j, L)) return;
  Summary written;
  j->run->output.write(written);
  for (const auto& e : written.file_errors) std::fprintf(stderr, "luaflame: %s\n", e.c_str());
  if (j->run->streamer) j->run->streamer->flush_now();
}

bool folded(lua_State* L, const std::string& metric, std::string& out, std::string& err) {
  JitState* j = g_jit.load();
  if (!profiles(j, L)) return err = "luaflame is not running", false;
  const int col = j->run->column_of(metric, err);
  if (col < 0) return false;
  if (j->run->opt.trace) j->tracer.charge_now();
  out = j->run->output.folded_text(col);
  return true;
}

}  // namespace lfc

namespace lfc {

// LuaJIT's profiler samples whichever coroutine runs: a resume by the
// host's C code needs no telling (vm/lua/attach.hpp).
bool attach::host_resume(lua_State*, bool) noexcept {
  return false;
}

// LuaJIT's profiler signal is SIGPROF already (jsampler.cpp).
void attach::adapter_setup() noexcept {}

}  // namespace lfc
