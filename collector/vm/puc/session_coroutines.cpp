// coroutine.create / resume / wrap as lcorolib.c's, and a host's own
// lua_resume (luaflame attach), with the session told of each switch
// (Session::on_resume before the resume, Session::on_return after it),
// which moves the coroutine tracking (coroutines.hpp), the hooks and the
// tracer together.
#include "vm/lua/attach.hpp"
#include "vm/lua/same_state.hpp"
#include "vm/puc/session.hpp"
#include "vm/puc/sessions.hpp"

extern "C" {
#include <lauxlib.h>
}

namespace lfc {

namespace {

#if LUA_VERSION_NUM == 501
// Lua 5.1's lcorolib costatus: why a coroutine cannot be resumed, or null.
const char* not_resumable(lua_State* L, lua_State* co) {
  if (L == co) return "running";
  if (lua_status(co) == LUA_YIELD) return nullptr;
  if (lua_status(co) != 0) return "dead";
  lua_Debug ar;
  if (lua_getstack(co, 0, &ar) > 0) return "normal";
  return lua_gettop(co) == 0 ? "dead" : nullptr;
}
#endif

// Whether lua_resume(co) from L runs co: suspended, or new. One it refuses
// (running, or resuming another: "cannot resume non-suspended coroutine")
// makes no switch: telling the session of one would hang a running
// thread's frames under its own callee and drop its shadow stack while it
// runs (a coroutine resuming itself, as runner/coroutine_states.lua does).
bool will_run(lua_State* L, lua_State* co) {
  lua_Debug ar;
  return lua_status(co) == LUA_YIELD ||
         (lua_status(co) == LUA_OK && co != L && !lua_getstack(co, 0, &ar) && lua_gettop(co) > 0);
}

// lcorolib.c's auxresume (of the Lua it is built for), with the session
// told of the switch.
int aux_resume(lua_State* L, lua_State* co, int narg) {
#if LUA_VERSION_NUM == 501
  if (!lua_checkstack(co, narg)) luaL_error(L, "too many arguments to resume");
  if (const char* st = not_resumable(L, co)) {
    lua_pushfstring(L, "cannot resume %s coroutine", st);
    return -1;
  }
#else
  if (!lua_checkstack(co, narg)) {
    lua_pushliteral(L, "too many arguments to resume");
    return -1;
  }
#if LUA_VERSION_NUM < 504
  if (lua_status(co) == LUA_OK && lua_gettop(co) == 0) {
    lua_pushliteral(L, "cannot resume dead coroutine");
    return -1;
  }
#endif
#endif
  lua_xmove(L, co, narg);
#if LUA_VERSION_NUM == 501
  lua_setlevel(L, co);
#endif
  Session* s = will_run(L, co) ? sessions::of(L) : nullptr;
  if (s) s->on_resume(L, co);
  int nres = 0;
  int status = lua_resume(co, L, narg, &nres);
  Session* s2 = s ? sessions::of(L) : nullptr;
  if (s2 && s2 == s) s2->on_return(L, co);
  if (status == LUA_OK || status == LUA_YIELD) {
    if (!lua_checkstack(L, nres + 1)) {
      lua_pop(co, nres);
      lua_pushliteral(L, "too many results to resume");
      return -1;
    }
    lua_xmove(co, L, nres);
    return nres;
  }
  lua_xmove(co, L, 1);
  return -1;
}

// coroutine.resume, as lcorolib.c's luaB_coresume.
int lf_resume(lua_State* L) noexcept {
  lua_State* co = lua_tothread(L, 1);
#if LUA_VERSION_NUM < 503
  luaL_argcheck(L, co, 1, "coroutine expected");
#elif LUA_VERSION_NUM == 503
  luaL_argcheck(L, co, 1, "thread expected");
#elif LUA_VERSION_RELEASE_NUM >= 50406
  luaL_argexpected(L, co, 1, "coroutine");  // lcorolib.c's getco says "coroutine" from 5.4.6
#else
  luaL_argexpected(L, co, 1, "thread");
#endif
  int r = aux_resume(L, co, lua_gettop(L) - 1);
  if (r < 0) {
    lua_pushboolean(L, 0);
    lua_insert(L, -2);
    return 2;
  }
  lua_pushboolean(L, 1);
  lua_insert(L, -(r + 1));
  return r + 1;
}

// The function coroutine.wrap returns, as lcorolib.c's auxwrap.
int lf_wrap_call(lua_State* L) noexcept {
  lua_State* co = lua_tothread(L, lua_upvalueindex(1));
  int r = aux_resume(L, co, lua_gettop(L));
  if (r < 0) {
#if LUA_VERSION_NUM >= 504
    int stat = lua_status(co);
    if (stat != LUA_OK && stat != LUA_YIELD) {
      stat = lua_resetthread(co);  // close its to-be-closed variables
      lua_xmove(co, L, 1);
    }
    if (stat != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
#elif LUA_VERSION_NUM == 503
    if (lua_type(L, -1) == LUA_TSTRING) {
#else
    if (lua_isstring(L, -1)) {
#endif
      luaL_where(L, 1);
      lua_insert(L, -2);
      lua_concat(L, 2);
    }
    return lua_error(L);
  }
  return r;
}

// coroutine.wrap, as lcorolib.c's luaB_cowrap.
int lf_wrap(lua_State* L) noexcept {
#if LUA_VERSION_NUM == 501
  luaL_argcheck(L, lua_isfunction(L, 1) && !lua_iscfunction(L, 1), 1, "Lua function expected");
#else
  luaL_checktype(L, 1, LUA_TFUNCTION);
#endif
  lua_State* NL = lua_newthread(L);
  lua_pushvalue(L, 1);
  lua_xmove(L, NL, 1);
  if (Session* s = sessions::of(L)) s->inherit_program_hook(L);
  lua_pushcclosure(L, lf_wrap_call, 1);
  return 1;
}

// coroutine.create, as lcorolib.c's luaB_cocreate (5.1's checks its
// argument after making the thread). The new thread chains its maker's
// program hook while tracing, and never keeps a one-shot it copied from its
// maker while sampling (Session::inherit_program_hook).
int lf_create(lua_State* L) noexcept {
#if LUA_VERSION_NUM == 501
  lua_State* NL = lua_newthread(L);
  luaL_argcheck(L, lua_isfunction(L, 1) && !lua_iscfunction(L, 1), 1, "Lua function expected");
#else
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_State* NL = lua_newthread(L);
#endif
  lua_pushvalue(L, 1);
  lua_xmove(L, NL, 1);
  if (Session* s = sessions::of(L)) s->inherit_program_hook(L);
  return 1;
}

const LibSwap kCoroutineSwaps[] = {{"create", "luaflame.orig.create", lf_create},
                                   {"resume", "luaflame.orig.resume", lf_resume},
                                   {"wrap", "luaflame.orig.wrap", lf_wrap}};
constexpr std::size_t kCoroutineSwapCount = sizeof(kCoroutineSwaps) / sizeof(kCoroutineSwaps[0]);

}  // namespace

void install_coroutine_wrappers(lua_State* L) {
  swap_library(L, "coroutine", kCoroutineSwaps, kCoroutineSwapCount);
}

void restore_coroutine_wrappers(lua_State* L) {
  restore_library(L, "coroutine", kCoroutineSwaps, kCoroutineSwapCount);
}

void preset_coroutine_frames(FrameTable& frames) {
  frames.preset(lf_create, "[C] coroutine.create");
  frames.preset(lf_resume, "[C] coroutine.resume");
  frames.preset(lf_wrap, "[C] coroutine.wrap");
  frames.preset(lf_wrap_call, "[C] <wrapped coroutine>");
}

// A coroutine the host's C code resumes with lua_resume (seen by luaflame
// attach's shim: HAProxy runs every request so), told to the session of
// its state as coroutine.resume would. Only for a thread of that state, and
// not for what lf_resume resumes (its lua_resume passes through the shim
// too: the chain shows co entered). A resume from another thread than the
// state ran on, while it runs no Lua (the chain holds its main thread
// alone), moves the session there (HAProxy runs per-thread states made on
// its main thread on its workers, and a shared state on each in turn).
bool attach::host_resume(lua_State* co, bool entering) noexcept {
  Session* s = sessions::of(co);
  return s && s->host_resume(co, entering);
}

// A hook the host set from C on co (lua_sethook) while tracing: HAProxy
// sets a count hook on each request's coroutine before resuming it, which
// yields it every tune.lua.forced-yield instructions. It replaced ours, and
// the trace of that coroutine stopped (attached HAProxy traced 44 of 100
// calls of a request's function, the rest a `[C]` frame). Chained behind
// ours as a debug.sethook's is (HookChain::adopt), so it gets its events;
// its yield happens after our hook returns (luaG_traceexec), as without
// luaflame. Not remembered for stop: a thread's hook after stop is its
// state's of before start (the host sets its own again before each resume).
bool Session::adopt_host_hook(lua_State* co) noexcept {
  const lua_Hook h = lua_gethook(co);
  if (!h || h == lf_hook) return true;
  bool adopted = false;
  if (const char* failed = cxx_guard([&] { adopted = hooks.adopt(co); })) {
    abandon(failed, "the host's lua_resume");
    return false;
  }
  if (adopted) tracer.fast_off();  // every event may have to be forwarded
  return true;
}

bool Session::host_resume(lua_State* co, bool entering) noexcept {
  if (!coroutines.on_lua_thread()) {
    if (!entering || coroutines.chain().size() != 1) return false;
    follow_thread();
  }
  const std::vector<lua_State*>& chain = coroutines.chain();
  if (chain.empty()) return false;
  if (entering) {
    lua_State* L = chain.back();
    if (L == co || !same_state(L, co) || !will_run(L, co)) return false;
    if (opt.trace && !adopt_host_hook(co)) return false;  // abandoned
    // A request begins: what is due so far is the host's, and the request
    // is sampled from its first period (Sampler::wake).
    sampler.wake([this] { on_sample_signal(); });
    on_resume(L, co);
    return true;
  }
  if (chain.size() < 2 || chain.back() != co) return false;
  on_return(chain[chain.size() - 2], co);
  return true;
}

// A host's own lua_sethook from C on a thread of a profiled state (luaflame
// attach's shim): HAProxy sets a count hook on each request's coroutine
// before resuming it, and again from that hook. lua_sethook may be called
// from a signal handler, not interrupted by one that sets a hook too: the
// sampler's signal amid it read a hook half written, and the rest of it
// then overwrote part of the one-shot (the host's hook came back with a
// stale mask or the one-shot's count). Set in a critical section, as
// debug.sethook's wrapper sets the program's (HookChain::program_set), and
// only on the thread that runs the state: a critical section fences that
// thread's signal. Inside one of ours it is fenced already: set as it is.
// Tracing, it is chained behind ours at once, in the same section, also
// when it is none: the thread's trace goes on whether the host resumes it or
// runs it by lua_pcall, and the thread forwards what the host set last,
// not the hook of a collected thread that had its address (the count hook
// of tests/attach/hook_host.c got 12.5% more events than alone: its
// coroutines set to no hook forwarded a dead one's).
bool attach::host_sethook(lua_State* L, lua_Hook f, int mask, int count) noexcept {
  Session* s = sessions::of(L);
  return s && s->host_sethook(L, f, mask, count);
}

bool Session::host_sethook(lua_State* T, lua_Hook f, int mask, int count) noexcept {
  if (!coroutines.on_lua_thread()) return false;
  if (hooks.in_critical()) {
    lua_sethook(T, f, mask, count);
    return true;
  }
  bool chained = false;
  if (const char* failed = cxx_guard([&] { chained = program_set(T, f, mask, count); }))
    abandon(failed, "the host's lua_sethook");
  else if (chained && f)
    tracer.fast_off();  // its events are forwarded
  return true;
}

// The host's own lua_gethook, lua_gethookmask, lua_gethookcount: the
// program's hook, as debug.gethook answers (HookChain::program_hook), never
// the one-shot armed over it nor luaflame's trace hook: HAProxy's count
// hook (hlua.c's hlua_hook) asks lua_gethookmask for LUA_MASKRET ("Lua
// cannot yield when it is returning") and, shown ours, would skip its
// forced yield.
bool attach::host_gethook(lua_State* L, lua_Hook& f, int& mask, int& count) noexcept {
  Session* s = sessions::of(L);
  return s && s->host_gethook(L, f, mask, count);
}

bool Session::host_gethook(lua_State* T, lua_Hook& f, int& mask, int& count) noexcept {
  if (!coroutines.on_lua_thread()) return false;
  const HookChain::Chained c = hooks.in_critical() ? hooks.program_hook(T) : program_hook(T);
  f = c.hook, mask = c.mask, count = c.count;
  return true;
}

// luaflame's hook on L with no session of L's state here (a run left
// behind in a forked child): the host's hook kept for it goes back to the
// caller (attach.cpp's open_run, before the state's run starts again).
bool attach::left_hook(lua_State* L, lua_Hook& f, int& mask, int& count) noexcept {
  if (lua_gethook(L) != lf_hook || sessions::of(L)) return false;
  const HookChain::Chained c = hook_after_stop(sessions::key_of(L));
  f = c.hook, mask = c.mask, count = c.count;
  return true;
}

// Attached hosts take SIGPROF first (Sampler::prefer_sigprof says why).
void attach::adapter_setup() noexcept {
  Sampler::prefer_sigprof();
}

}  // namespace lfc
