// LuaJIT sessions: start/stop/flush/folded (luaflame/collector.hpp) for
// LuaJIT, and the C entry points LuaJIT calls: the trace hook, the
// profiler callback, the coroutine wrappers (a host's: jhost.cpp), the
// state's closer.
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

std::atomic<JSession*> g_jit{nullptr};

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
// replaced so: a host's (OpenResty's ngx_lua puts a Lua function there that
// ties the coroutine to the request, so that ngx.sleep in it yields to
// nginx) is wrapped in Lua (jhost.cpp), with its coroutine.wrap, as a yield
// through a C wrapper would cross a C frame.

void enter(lua_State* L, lua_State* co) {
  if (JSession* j = g_jit.load()) j->on_resume(L, co);
}
void leave(lua_State* co) {
  if (JSession* j = g_jit.load()) j->on_return(co);
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

// The profiler callback. Contract: LuaJIT calls it on the Lua thread, from
// its profile hook at an instruction boundary of the interpreter (a trace
// exits to it first), never from the signal handler, so the Lua API's
// read-only calls may be used on L; values pushed are popped before return.
// `samples` is the number of SIGPROFs taken since the last call (LuaJIT
// counts them in the handler): the weight of this sample. No C++
// exception leaves it.
void profile_cb(void* data, lua_State* L, int samples, int vmstate) noexcept {
  auto* j = static_cast<JSession*>(data);
  if (g_jit.load() != j) return;  // abandoned, or a child after fork
  if (const char* failed = cxx_guard([&] { j->on_samples(L, samples, vmstate); })) abandon(failed);
}

// Stops the session when the state closes (lua_close runs the registry's
// finalizers while the state is whole): a session left running must not
// outlive its state, whose profiler it drives.
int on_state_close(lua_State* L) LF_LUA_ENTRY {
  JSession* j = g_jit.load();
  if (!j || !j->closes_with(L)) return 0;  // a stopped run's closer
  const char* failed = cxx_guard([&] {
    Summary s = j->stop(L, true);
    if (g_report_at_exit) std::fprintf(stderr, "%s", format_summary(s).c_str());
  });
  if (failed) std::fprintf(stderr, "luaflame: ending the profile at lua_close: %s\n", failed);
  return 0;
}

// fork (pthread_atfork's child handler): the child inherits neither the
// sampler's timer thread nor the streamer's; the session is left behind
// (reachable, never written or streamed) and the child runs on unprofiled:
// the hooks of ours it meets find no session and return.
JSession* g_left_behind = nullptr;
void detach_in_child() {
  g_left_behind = g_jit.load();
  g_jit.store(nullptr);
}

void at_process_exit() {
  JSession* j = g_jit.load();
  if (!j) return;
  Summary s = j->stop(nullptr, false);
  if (g_report_at_exit) std::fprintf(stderr, "%s", format_summary(s).c_str());
}

}  // namespace

// The trace hook. Contract: LuaJIT's hooks are global and run on the Lua
// thread (jtracer.hpp). No C++ exception leaves it: what the tracer throws
// (std::bad_alloc growing its tables) ends profiling. Then the program's
// hook gets the events of its mask (jhooks.cpp), with the lua_Debug as
// LuaJIT gave it; it may raise a Lua error, which LuaJIT unwinds C++-style
// through here: not noexcept, and no C++ object is alive across it.
void trace_hook(lua_State* L, lua_Debug* ar) LF_LUA_ENTRY {
  JSession* j = g_jit.load();
  if (!j) return;
  const int ev = ar->event, line = ar->currentline;  // what a forwarded hook reads
  if (ev == LUA_HOOKCALL || ev == LUA_HOOKRET)
    if (const char* failed = cxx_guard([&] { j->on_hook(L, ar); })) abandon(failed);
  ar->event = ev, ar->currentline = line;
  forward_program_hook(L, ar);
}

// The session is left behind as after a fork (g_left_behind: reachable,
// never freed while the program may still call into it); its hook and
// profile callback find no session and return, its timer thread ends.
void abandon(const char* why) noexcept {
  JSession* j = g_jit.load();
  if (!j) return;
  j->abandon();
  detach_in_child();
  std::fprintf(stderr, "luaflame: %s in the profiler: profiling stopped, the program runs on\n",
               why);
}

// ------------------------------------------------------------- the session

JSession::JSession(const Options& o, lua_State* start_L)
    : run_(std::make_unique<JRun>(o)),
      L_(start_L),
      frames_(*run_, chain_),
      tracer_(*run_, frames_, chain_),
      sampler_(*run_, frames_, tracer_) {}

bool JSession::start(lua_State* L, const Options& o, std::string& err) {
  if (o.alloc) return err = kNoAlloc, false;
  static std::once_flag exit_once;
  std::call_once(exit_once, [] {
    std::atexit(at_process_exit);
    pthread_atfork(nullptr, nullptr, detach_in_child);
  });
  Streamer::set_exit_handler(at_process_exit);  // registered again after httplib's first answer
  // A forked worker whose state attach starts again (docs/attach.md,
  // "Forked workers"): the run its parent left it is on this state.
  // Once; the run stays allocated and reachable (its threads are not here).
  static JSession* taken_off = nullptr;
  if (JSession* old = g_left_behind; old && old != taken_off && old->profiles(L)) {
    old->take_off_wrappers(L);
    taken_off = old;
  }
  std::unique_ptr<JSession> owned(new JSession(o, L));
  owned->begin(L);
  JSession* j = owned.release();  // g_jit owns it from here: stop() deletes it
  g_jit.store(j);
  return j->arm(L, err);
}

// The run's clocks, the probe, the wrappers and the closer.
void JSession::begin(lua_State* L) {
  JRun& s = *run_;
  if (!s.opt.tags.count("vm")) s.opt.tags["vm"] = "luajit";
  s.acct.start_wall = now_ns();
  s.acct.start_unix = unix_now_ns();
  sampler_.bind_thread();
  s.acct.start_clock = sampler_.clock_ns();
  chain_.start(L);
  layout_ok_ = layout::probe(L, layout_why_);
  install_coroutine_wrappers(L);
  closer_id_ = closer::add(L, on_state_close);
}

// The hook and the profiler armed, the stream last; false (`err`) when the
// profiler cannot start, the session stopped and deleted.
bool JSession::arm(lua_State* L, std::string& err) {
  JRun& s = *run_;
  if (s.opt.trace) {
    tracer_.start(L, trace_hook, layout_ok_, layout_why_);
    install_hook_wrappers(L);  // jhooks.cpp
  }
  if (s.opt.sample && !sampler_.start(L, profile_cb, this, err)) {
    stop(L, false);  // deletes this
    return false;
  }
  s.start_streaming();
  return true;
}

void JSession::install_coroutine_wrappers(lua_State* L) {
  lua_getglobal(L, "coroutine");
  if (!lua_istable(L, -1)) return lua_pop(L, 1);
  lua_getfield(L, -1, "resume");
  own_resume_ =
      layout_ok_ && lua_iscfunction(L, -1) && layout::is_fast_function(lua_topointer(L, -1));
  if (!own_resume_) return install_host_resume(L);  // pops both
  frames_.skip(lua_topointer(L, -1));               // shown as our wrapper alone
  lua_pushvalue(L, -1);
  orig_resume_ref_ = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushcclosure(L, lf_resume, 1);
  const void* resume_fn = lua_topointer(L, -1);
  lua_setfield(L, -2, "resume");
  lua_getfield(L, -1, "wrap");
  orig_wrap_ref_ = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushcfunction(L, lf_wrap);
  frames_.name_wrappers(resume_fn, lua_topointer(L, -1), lf_wrap_call);
  lua_setfield(L, -2, "wrap");
  lua_pop(L, 1);
}

// Puts the originals back unless the program replaced ours meanwhile.
void JSession::restore_coroutine_wrappers(lua_State* L) {
  lua_getglobal(L, "coroutine");
  if (lua_istable(L, -1)) {
    const struct {
      const char* name;
      int ref;
      const void* ours;
    } kFns[] = {{"resume", orig_resume_ref_, frames_.resume_fn()},
                {"wrap", orig_wrap_ref_, frames_.wrap_fn()}};
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
  orig_resume_ref_ = orig_wrap_ref_ = -2;
  restore_host_spawn(L);
  for (int* ref : {&links_ref_, &firsts_ref_}) {
    if (*ref >= 0) luaL_unref(L, LUA_REGISTRYINDEX, *ref);
    *ref = -2;
  }
  frames_.host_resume(-2, -2, nullptr);
}

void JSession::on_resume(lua_State* L, lua_State* co) {
  const bool trace = run_->opt.trace;
  if (trace) tracer_.charge_now();
  chain_.enter(L, co);
  if (trace) tracer_.resumed(L, co);
}

void JSession::on_return(lua_State* co) {
  if (run_->opt.trace) {
    tracer_.charge_now();
    tracer_.returned(co);
  }
  chain_.leave(co);
}

// LuaJIT's profiler is one per process (luaJIT_profile_start), so is the run.
bool JSession::profiles(lua_State* L) const {
  return same_state(L_, L);
}

bool JSession::closes_with(lua_State* L) const {
  return closer_id_ == closer::serial_of(L);
}

Summary JSession::stop(lua_State* L, bool closing) {
  ending_begin_stop(*run_);
  if (run_->opt.sample) sampler_.stop();
  if (run_->opt.trace) tracer_.stop(L, closing);
  if (L) {
    restore_coroutine_wrappers(L);
    restore_hook_wrappers(L);
    closer::drop(L);
  }
  {
    std::lock_guard<std::mutex> lock(ending_mutex());  // finish_for_exit's visit
    g_jit.store(nullptr);
  }
  Summary sum;
  fill_summary(sum);
  JRun& s = *run_;
  s.output.write(sum);
  for (const auto& e : sum.file_errors) std::fprintf(stderr, "luaflame: %s\n", e.c_str());
  if (sum.files_failed) g_output_failed = true;
  if (s.streamer) s.streamer->finish(sum);
  ending_stopped(s);
  delete this;
  return sum;
}

void JSession::fill_summary(Summary& sum) const {
  const JRun& s = *run_;
  sum.mode = s.opt.trace ? (s.opt.sample ? "both" : "trace") : "sample";
  sum.lua = vm_release();
  sum.metrics = s.metrics;
  sum.wall_ns = now_ns() - s.acct.start_wall;
  const uint64_t clk = sampler_.clock_ns();
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
  if (s.opt.sample && sampler_.host_told()) sum.fast_paths += " host_time";
  if (s.opt.sample && sampler_.gc_told()) sum.fast_paths += " gc_finalizers";
  if (s.opt.sample && !sampler_.host_told())
    sum.fast_paths_off =
        "the host's own C time is charged to the next Lua code (" + sampler_.host_why() + ")";
  if (s.opt.sample && !sampler_.gc_told()) {
    if (!sum.fast_paths_off.empty()) sum.fast_paths_off += "; ";
    sum.fast_paths_off +=
        "time in __gc finalizers is charged to the next Lua code (" + sampler_.gc_why() + ")";
  }
  const std::string& idents_off = tracer_.idents_off();
  if (s.opt.trace) {
    if (idents_off.empty()) sum.fast_paths += sum.fast_paths.empty() ? "idents" : " idents";
    if (!sum.fast_paths_off.empty()) sum.fast_paths_off += "; ";
    sum.fast_paths_off += "JIT compiler off while tracing (hooks do not fire in compiled code)";
    if (!idents_off.empty())
      sum.fast_paths_off += "; calls named through lua_getinfo: " + idents_off;
  }
  if (!own_resume_ && !host_wrapped_) {
    if (!sum.fast_paths_off.empty()) sum.fast_paths_off += "; ";
    sum.fast_paths_off +=
        "coroutine.resume is not LuaJIT's own (the host's, or not verified): a coroutine's "
        "frames are not shown under its resumer";
  }
  sum.nodes = s.tree.size();
  sum.frames = s.names.size();
  sum.memory_bytes = sizeof(JSession) + sizeof(JRun) + s.tree.memory_bytes() +
                     s.frames.memory_bytes() + frames_.memory_bytes() + sampler_.memory_bytes();
}

void JSession::flush() {
  Summary written;
  run_->output.write(written);
  for (const auto& e : written.file_errors) std::fprintf(stderr, "luaflame: %s\n", e.c_str());
  if (run_->streamer) run_->streamer->flush_now();
}

bool JSession::folded(const std::string& metric, std::string& out, std::string& err) {
  const int col = run_->column_of(metric, err);
  if (col < 0) return false;
  if (run_->opt.trace) tracer_.charge_now();
  out = run_->output.folded_text(col);
  return true;
}

}  // namespace jit

// ------------------------------------------------ the collector's API (LuaJIT)

using jit::g_jit;
using jit::JSession;

bool running(lua_State* L) {
  JSession* j = g_jit.load();
  return j && j->profiles(L);
}

bool start(lua_State* L, const Options& o, std::string& err) {
  if (JSession* other = g_jit.load())
    return err = other->profiles(L) ? "luaflame is already running (call luaflame.stop() first)"
                                    : "luaflame is already running on another state of this "
                                      "process (LuaJIT's profiler is one per process)",
           false;
  return JSession::start(L, o, err);
}

bool finish_for_exit() {
  return finish_outside_all([](const std::function<void(Profile&)>& each) {
    if (JSession* j = g_jit.load()) each(j->run());
  });
}

Summary stop(lua_State* L) {
  JSession* j = g_jit.load();
  if (!j || (L && !j->profiles(L))) return Summary{};
  return j->stop(L, false);
}

void flush(lua_State* L) {
  if (JSession* j = g_jit.load(); j && j->profiles(L)) j->flush();
}

bool folded(lua_State* L, const std::string& metric, std::string& out, std::string& err) {
  JSession* j = g_jit.load();
  if (!j || !j->profiles(L)) return err = "luaflame is not running", false;
  return j->folded(metric, out, err);
}

// LuaJIT's profiler samples whichever coroutine runs: a resume by the
// host's C code needs no telling (vm/lua/attach.hpp).
bool attach::host_resume(lua_State*, bool) noexcept {
  return false;
}

// Tracing, the trace hook is the state's one hook (LuaJIT's hooks are per
// state): the host's own, set from C, is kept behind it as the program's
// debug.sethook is (JTracer::adopt), and read back as it set it. Sampling,
// LuaJIT's profiler arms no hook: the host's own are its own.
// Contract: on the thread that runs the state, as LuaJIT requires. A host
// that sets its hook from a signal handler (luajit.c's SIGINT: lstop) may
// land amid the trace hook's copy of the kept hook (three words): for that
// one event the copy may pair one's function with the other's mask; the
// next event forwards the new hook whole.
bool attach::host_sethook(lua_State* L, lua_Hook f, int mask, int count) noexcept {
  JSession* j = g_jit.load();
  if (!j || !j->tracing() || !j->profiles(L)) return false;
  lua_sethook(L, f, mask, count);
  j->adopt_program_hook(L);
  return true;
}
bool attach::host_gethook(lua_State* L, lua_Hook& f, int& mask, int& count) noexcept {
  JSession* j = g_jit.load();
  if (!j || !j->tracing() || !j->profiles(L) || lua_gethook(L) != jit::trace_hook) return false;
  const jit::JTracer::Chained c = j->program_hook();
  f = c.hook, mask = c.mask, count = c.count;
  return true;
}

// In a forked child, the trace hook of the run left behind, over the
// host's own (attach.cpp's open_run gives that back before the run starts
// again).
bool attach::left_hook(lua_State* L, lua_Hook& f, int& mask, int& count) noexcept {
  jit::JSession* old = jit::g_left_behind;
  if (jit::g_jit.load() || !old || lua_gethook(L) != jit::trace_hook || !old->profiles(L))
    return false;
  const jit::JTracer::Chained c = old->program_hook();
  f = c.hook, mask = c.mask, count = c.count;
  return true;
}

// LuaJIT's profiler signal is SIGPROF already (jsampler.cpp).
void attach::adapter_setup() noexcept {}

}  // namespace lfc
