// The probe of luaint.hpp's layouts against the running Lua.
#include "vm/puc/luaint.hpp"

#include "vm/puc/foreign.hpp"

#include <mutex>

extern "C" {
#include <lauxlib.h>
}

namespace lfc::luaint {

namespace {

Layout* g_probe_out = nullptr;      // probe() runs on the Lua thread, one at a time
int g_allowhook_in_hook = -1;       // lua_State.allowhook as probe_hook saw it
int g_hooked_in_hook = -1;          // CIST_HOOKED on L->ci as probe_hook saw it
const char* g_probe_why = nullptr;  // probe_body's reason a fast path is off (no allocation there)

// Called (a light C function) from a Lua function: compares the direct
// reads with what lua_getstack/lua_getinfo say.
int probe_fn(lua_State* L) noexcept {
  Layout* out = g_probe_out;
  lua_Debug a0, a1;
  if (!out || !lua_getstack(L, 0, &a0) || !lua_getstack(L, 1, &a1)) return 0;
  lua_getinfo(L, "S", &a1);
  out->ci_prev_ok =
      a1.what[0] != 'C' && ci_prev(ci_of(a0)) == ci_of(a1) && ci_prev(ci_of(a1)) != nullptr;
  out->state_ci_ok = state_ci(L) == ci_of(a0);
  out->allowhook_ok = allowhook(L);  // 1 here; 0 inside probe_hook (checked after)
  out->hooked_ok = kHasCallstatus && !ci_hooked(ci_of(a0)) &&
                   !ci_hooked(ci_of(a1));  // set inside probe_hook (after)
  const char* stack = at<const char*>(L, kStateStack);
  const char* stack_last = at<const char*>(L, kStateStackLast);
  const char* func0 = at<const char*>(ci_of(a0), 0);
  const char* func1 = at<const char*>(ci_of(a1), 0);
  out->stack_ok = stack && stack < stack_last && func1 >= stack && func1 < func0 &&
                  func0 < stack_last && stack_settled(L);
  if (!out->ci_prev_ok) return 0;
  unsigned char tag;
  const void* value;
  func_of(ci_of(a0), tag, value);
  out->c_ident_ok = tag == kTagLightC && value == reinterpret_cast<const void*>(probe_fn);
  func_of(ci_of(a1), tag, value);
  if (tag != kTagLuaClosure || !value) return 0;
  const void* proto = at<const void*>(value, kClosureFn);
  const void* src = at<const void*>(proto, kProtoSource);
  // The caller's saved pc lies inside its Proto's code: checks Proto.code.
  const char* code = at<const char*>(proto, kProtoCode);
  const char* pc = at<const char*>(ci_of(a1), kCiSavedpc);
  const int sizecode = at<int>(proto, kProtoSizecode);
  // A short TString's tag and length (the handler copies source strings:
  // foreign.cpp).
  std::size_t len = 0;
  out->tstring_ok = src && at<unsigned char>(src, kTStringTag) == kTagShortString &&
                    tstring_len(src, len) && len == std::strlen(a1.source);
  out->lua_ident_ok = at<int>(proto, kProtoLine) == a1.linedefined &&
                      at<int>(proto, kProtoLine + 4) == a1.lastlinedefined && src &&
                      static_cast<const char*>(src) + kTStringContents == a1.source && code &&
                      sizecode > 0 && pc > code &&
                      pc <= code + 4 * static_cast<std::size_t>(sizecode);
  return 0;
}

// Inside a hook: allowhook 0, and the hooked CallInfo (L->ci) has CIST_HOOKED.
void probe_hook(lua_State* L, lua_Debug*) {
  g_allowhook_in_hook = allowhook(L) ? 1 : 0;
  g_hooked_in_hook = kHasCallstatus && ci_hooked(state_ci(L)) ? 1 : 0;
}

// lua_State.hookcount: on a new thread with a count hook of `a`, the only
// place holding basehookcount and hookcount (two ints in a row, lstate.h)
// both equal to `a`, then to `b`; running 3 instructions there leaves
// hookcount at b - 3 (luaG_traceexec decrements it once per instruction).
std::size_t find_hookcount(lua_State* L) {
  lua_State* T = lua_newthread(L);  // inherits L's hook: replaced before anything runs there
  const int a = 0x1e3a5f17, b = 0x2c4b6d19;
  lua_sethook(T, probe_hook, LUA_MASKCOUNT, a);
  std::size_t found = 0;
  for (std::size_t off = kStateCi; off + 8 <= 512 && !found; off += 4)
    if (hookcount(T, off) == a && hookcount(T, off - 4) == a) found = off;
  lua_sethook(T, probe_hook, LUA_MASKCOUNT, b);
  if (found && (hookcount(T, found) != b || hookcount(T, found - 4) != b)) found = 0;
  if (found) {
    // "local x = 1; return x": LOADI, RETURN1 ... the count of executed
    // instructions is what matters, not which.
    static const char kCode[] = "local x = 1 x = x + 1 return x";
    int nres = 0;
    if (luaL_loadbuffer(T, kCode, sizeof kCode - 1, "=luaflame.probe") != LUA_OK ||
        lua_resume(T, L, 0, &nres) != LUA_OK || hookcount(T, found) >= b ||
        hookcount(T, found) < b - 16 || hookcount(T, found - 4) != b)
      found = 0;
  }
  lua_sethook(T, nullptr, 0, 0);
  lua_pop(L, 1);
  return found;
}

// lua_State.allowhook as a count hook of 1 sees it on a new thread: 0 when
// the offset is right (luaD_hook clears it around the hook), -1 on failure.
int allowhook_in_hook(lua_State* L) noexcept {
  lua_State* T = lua_newthread(L);
  lua_sethook(T, probe_hook, LUA_MASKCOUNT, 1);
  g_allowhook_in_hook = -1;
  g_hooked_in_hook = -1;
  static const char kOne[] = "return 1";
  int nres = 0;
  if (luaL_loadbuffer(T, kOne, sizeof kOne - 1, "=luaflame.probe") != LUA_OK ||
      lua_resume(T, L, 0, &nres) != LUA_OK)
    g_allowhook_in_hook = -1;
  lua_sethook(T, nullptr, 0, 0);
  lua_pop(L, 1);
  return g_allowhook_in_hook;
}

// The probe's body, a lua_CFunction run under lua_pcall (probe): a memory
// error of its Lua calls (lua_newthread raises one) ends it there, over no
// C++ object of its own. Argument 1: the Layout to fill (light userdata).
// lua_State.status against lua_status: on L, which runs, and on a thread
// suspended in a yield (a C function's, so that no library is needed).
bool status_matches(lua_State* L) {
  if (status(L) != LUA_OK || lua_status(L) != LUA_OK) return false;
  lua_State* co = lua_newthread(L);
  lua_sethook(co, nullptr, 0, 0);
  lua_pushcfunction(co, [](lua_State* T) noexcept { return lua_yield(T, 0); });
  int nres = 0;
  const bool ok = lua_resume(co, L, 0, &nres) == LUA_YIELD && lua_status(co) == LUA_YIELD &&
                  status(co) == LUA_YIELD;
  lua_pop(L, 1);
  return ok;
}

int probe_body(lua_State* L) noexcept {
  Layout& out = *static_cast<Layout*>(lua_touserdata(L, 1));
  lua_settop(L, 0);
  const int top = 0;
  // On a thread of its own with no hook: the program's hooks (a coverage
  // tool's line hook) must not see the probe's code run.
  lua_State* T = lua_newthread(L);
  lua_sethook(T, nullptr, 0, 0);
  // A function defined on lines 2-4 (linedefined/lastlinedefined differ
  // from the main chunk's 0/0), calling the probe.
  static const char kChunk[] = "local f = ...\nlocal function g()\n  f()\nend\ng() return 0";
  if (luaL_loadbuffer(T, kChunk, sizeof kChunk - 1, "=luaflame.probe") == LUA_OK) {
    lua_pushcfunction(T, probe_fn);
    int nres = 0;
    g_probe_out = &out;
    const int st = lua_resume(T, L, 1, &nres);
    g_probe_out = nullptr;
    if (st == LUA_ERRMEM) out.mem_error = true;
    if (st != LUA_OK) return 0;
  } else {
    out.mem_error = true;  // the only way loading this text fails
    return 0;
  }
  lua_settop(L, top);
  if constexpr (kRelease == 502 || kRelease == 503) out.status_ok = status_matches(L);
  out.hookcount_off = find_hookcount(L);
  out.allowhook_ok = out.allowhook_ok && allowhook_in_hook(L) == 0;
  out.hooked_ok = out.hooked_ok && out.state_ci_ok && g_hooked_in_hook == 1;
  out.foreign_ok = out.allowhook_ok && out.hooked_ok;
  out.proto_ok = out.ci_prev_ok && out.lua_ident_ok;
  out.copy_ok = out.foreign_ok && out.ci_prev_ok && out.stack_ok && out.tstring_ok &&
                out.lua_ident_ok && out.c_ident_ok;
  lua_settop(L, top);
  if (!out.ci_prev_ok)
    g_probe_why = "CallInfo.previous does not match lua_getstack";
  else if (!out.state_ci_ok)
    g_probe_why = "lua_State.ci does not match lua_getstack";
  else if (!out.lua_ident_ok)
    g_probe_why = "Proto layout differs: trace mode names each call through lua_getinfo";
  else if (!out.c_ident_ok)
    g_probe_why = "C function layout differs: trace mode names C calls through lua_getinfo";
  else if (!out.hookcount_off)
    g_probe_why =
        "lua_State.hookcount not found: a program's count hook may fire late while sampling";
  else if (!out.foreign_ok && out.allowhook_ok)
    g_probe_why =
        "CallInfo.callstatus not verified: samples in finalizers and program hooks go to "
        "[luaflame] hook";
  else if (!out.allowhook_ok)
    g_probe_why =
        "lua_State.allowhook not found: samples in a program with a count hook may wait for "
        "its next count event";
  return 0;
}

// The running Lua's release as 5.4's lua_version reports it (5.2 and 5.3
// return a pointer to it; 5.1 has no lua_version).
int running_release(lua_State* L) {
#if LUA_VERSION_NUM >= 504
  return static_cast<int>(lua_version(L));
#elif LUA_VERSION_NUM >= 502
  const lua_Number* v = lua_version(L);
  return v ? static_cast<int>(*v) : 0;
#else
  (void)L;
  return 0;
#endif
}

#if LUA_VERSION_NUM == 501
// 5.1: the CallInfo `ci` runs a Lua function.
bool ci51_runs_lua(const void* ci) {
  unsigned char tag;
  const void* value;
  func_of(ci, tag, value);
  return tag == kTagLuaClosure;
}

// probe51_tail's record of what tail_call51 said at each call event.
constexpr int kTailEvents = 8;
int g_tail_n = 0;
bool g_tail_seen[kTailEvents];
bool g_tail_layout = true;           // lua_State.ci/base_ci as lua_getstack says
int g_ident_lua = 0, g_ident_c = 0;  // calls whose identity read matched (-1: one did not)

// The called function as func_of reads it through hook_ci, against
// lua_getinfo: the closure and its Proto's lines and source for a Lua
// function, the C function for a C one.
void probe51_ident(lua_State* L, lua_Debug* ar) {
  unsigned char tag;
  const void* value;
  func_of(hook_ci(L, *ar), tag, value);
  if (!lua_getinfo(L, "Sf", ar)) return;
  if (lua_iscfunction(L, -1)) {
    const bool ok =
        tag == kTagCClosure &&
        at<const void*>(value, kClosureFn) == reinterpret_cast<const void*>(lua_tocfunction(L, -1));
    g_ident_c = ok && g_ident_c >= 0 ? g_ident_c + 1 : -1;
  } else {
    const void* p = tag == kTagLuaClosure && value == lua_topointer(L, -1)
                        ? at<const void*>(value, kClosureFn)
                        : nullptr;
    const char* src = p ? at<const char*>(p, kProtoSource) : nullptr;
    const bool ok = p && at<int>(p, kProtoLine) == ar->linedefined &&
                    at<int>(p, kProtoLine + 4) == ar->lastlinedefined && src &&
                    src + kTStringContents == ar->source && at<const void*>(p, kProtoCode);
    g_ident_lua = ok && g_ident_lua >= 0 ? g_ident_lua + 1 : -1;
  }
  lua_pop(L, 1);
}

void probe51_hook(lua_State* L, lua_Debug* ar) noexcept {
  if (ar->event != LUA_HOOKCALL) return;
  lua_Debug top;
  const char* base = at<const char*>(L, kState51BaseCi);
  const char* ci = at<const char*>(L, kState51Ci);
  // Loads from L only, before anything is followed through them.
  if (!lua_getstack(L, 0, &top) || !base || ci != base + kCi51Size * (top.i_ci + 0u) ||
      top.i_ci != ar->i_ci)
    g_tail_layout = false;
  const bool tail = g_tail_layout && tail_call51(L);
  if (g_tail_layout) probe51_ident(L, ar);
  if (g_tail_n < kTailEvents) g_tail_seen[g_tail_n] = tail;
  ++g_tail_n;
}

// tail_call51 on known calls, on a thread of its own with the probe's hook
// only: the chunk's calls, in order, are main, tail, leaf (a tail call),
// plain, leaf, ctail and type (a C function in tail position: not one).
// Under probe()'s protected call (lua_newthread may raise).
void probe51_tail(lua_State* L, Layout& out) {
  static const char kChunk[] =
      "local function leaf() return 1 end\n"
      "local function tail() return leaf() end\n"
      "local function plain() local r = leaf() return r end\n"
      "local function ctail() return type(1) end\n"
      "tail() plain() ctail()";
  static const bool kWant[] = {false, false, true, false, false, false, false};
  lua_State* T = lua_newthread(L);
  lua_sethook(T, nullptr, 0, 0);
  if (luaL_loadbuffer(T, kChunk, sizeof kChunk - 1, "=luaflame.probe") != LUA_OK) return;
  g_tail_n = 0;
  g_tail_layout = true;
  g_ident_lua = g_ident_c = 0;
  lua_sethook(T, probe51_hook, LUA_MASKCALL, 0);
  int nres = 0;
  const int st = lua_resume(T, L, 0, &nres);
  lua_sethook(T, nullptr, 0, 0);
  lua_pop(L, 1);
  bool ok = st == LUA_OK && g_tail_layout && g_tail_n == 7;
  for (int i = 0; ok && i < 7; ++i) ok = g_tail_seen[i] == kWant[i];
  out.tail51_ok = ok;
  // Six Lua calls (main, tail, leaf, plain, leaf, ctail) and one C (type).
  out.lua_ident_ok = ok && g_ident_lua == 6;
  out.c_ident_ok = ok && g_ident_c == 1;
}

#endif

// Lua 5.1: the closure -> Proto read of proto_of, checked on a function
// defined on lines 1-2 of a chunk (linedefined, lastlinedefined and the
// source's text must be the API's). Under probe()'s protected call.
int probe51_body(lua_State* L) noexcept {
  Layout& out = *static_cast<Layout*>(lua_touserdata(L, 1));
  static const char kChunk[] = "local function g()\nend\nreturn g";
  if (luaL_loadbuffer(L, kChunk, sizeof kChunk - 1, "=luaflame.probe") != LUA_OK) return 0;
  lua_call(L, 0, 1);
  lua_Debug ar;
  lua_pushvalue(L, -1);
  if (!lua_getinfo(L, ">S", &ar)) return 0;
  const void* cl = lua_topointer(L, -1);
  const void* p = cl ? at<const void*>(cl, kClosureFn) : nullptr;
  const void* src = p ? at<const void*>(p, kProtoSource) : nullptr;
  out.proto_ok = p && at<int>(p, kProtoLine) == ar.linedefined &&
                 at<int>(p, kProtoLine + 4) == ar.lastlinedefined && ar.linedefined == 1 && src &&
                 static_cast<const char*>(src) + kTStringContents == ar.source;
#if LUA_VERSION_NUM == 501
  lua_settop(L, 0);
  probe51_tail(L, out);
  // lua_State.allowhook, 1 here and 0 in a hook: code run with hooks off is
  // told by it and by what lf_hook says of itself (foreign::OwnHook).
  out.allowhook_ok = allowhook(L) && allowhook_in_hook(L) == 0;
  out.foreign_ok = out.allowhook_ok && +__start_lf_hook51_text < +__stop_lf_hook51_text;
  out.hookcount_off = find_hookcount(L);
#endif
  return 0;
}

}  // namespace

#if LUA_VERSION_NUM == 501
bool tail_call51(const lua_State* L) {
  const char* base = at<const char*>(L, kState51BaseCi);
  const char* ci = at<const char*>(L, kState51Ci);
  if (!base || ci <= base) return false;
  const char* caller = ci - kCi51Size;  // the array's entry below
  if (!ci51_runs_lua(ci) || !ci51_runs_lua(caller)) return false;
  const auto* pc = at<const std::uint32_t*>(caller, kCi51Savedpc);
  return pc && (pc[-1] & 0x3f) == kOp51TailCall;
}
#endif

const void* proto_of(lua_State* L, lua_Debug* ar) {
#if LUA_VERSION_NUM >= 502
  (void)L;
  const void* ci = ci_of(*ar);
  if (!ci) return nullptr;
  unsigned char tag;
  const void* value;
  func_of(ci, tag, value);
  return tag == kTagLuaClosure && value ? at<const void*>(value, kClosureFn) : nullptr;
#else
  if (!lua_getinfo(L, "f", ar)) return nullptr;
  const void* cl = lua_iscfunction(L, -1) ? nullptr : lua_topointer(L, -1);
  lua_pop(L, 1);
  return cl ? at<const void*>(cl, kClosureFn) : nullptr;
#endif
}

namespace {

// l_G's frealloc and ud are what lua_getallocf says (luaint.hpp, global_of).
bool global_matches(lua_State* L) {
  const void* g = global_of(L);
  void* ud = nullptr;
  const lua_Alloc f = lua_getallocf(L, &ud);
  return g && at<lua_Alloc>(g, kGlobalFrealloc) == f &&
         at<void*>(g, kGlobalFrealloc + sizeof(void*)) == ud;
}

std::mutex g_probe_mu;  // the probe's globals above: one state's probe at a time

}  // namespace

Layout probe(lua_State* L) {
  std::lock_guard<std::mutex> lock(g_probe_mu);
  Layout out;
  if (sizeof(void*) == 8 && (kRelease == 0 || running_release(L) == kRelease))
    out.global_ok = global_matches(L);
  if (kRelease == 0) {
    out.why = "Lua 5.1's CallInfo is an array: the sampler's walk uses the API";
    const int top = lua_gettop(L);
    lua_pushcfunction(L, probe51_body);
    lua_pushlightuserdata(L, &out);
    const int st = lua_pcall(L, 1, 0, 0);
    lua_settop(L, top);
    if (st != LUA_OK || sizeof(void*) != 8) out.proto_ok = false;
    out.mem_error = st == LUA_ERRMEM;
    return out;
  }
  if (running_release(L) != kRelease || sizeof(void*) != 8) {
    out.why = "the running Lua is not the one this collector was built for, or not 64-bit";
    return out;
  }
  const int top = lua_gettop(L);
  lua_pushcfunction(L, probe_body);
  lua_pushlightuserdata(L, &out);
  g_probe_why = nullptr;
  const int st = lua_pcall(L, 1, 0, 0);
  lua_settop(L, top);
  if (g_probe_why) out.why = g_probe_why;
  if (st != LUA_OK || out.mem_error) {
    const bool mem = st == LUA_ERRMEM || out.mem_error;
    const bool global_ok = out.global_ok;
    out = Layout{};
    out.global_ok = global_ok;
    out.mem_error = mem;
    out.why = mem ? "not enough memory" : "the probe failed";
  }
  return out;
}

std::string Layout::on() const {
  std::string r;
  auto add = [&r](bool ok, const char* name) {
    if (!ok) return;
    if (!r.empty()) r += ' ';
    r += name;
  };
  add(ci_prev_ok, "ci_walk");
  add(state_ci_ok && ci_prev_ok, "signal_position");
  add(hookcount_off != 0, "hook_count");
  add((ci_prev_ok || tail51_ok) && lua_ident_ok, "lua_ident");
  add((ci_prev_ok || tail51_ok) && c_ident_ok, "c_ident");
  add(allowhook_ok, "allowhook");
  add(proto_ok, "proto");
  add(foreign_ok, "foreign");
  add(copy_ok, "foreign_frames");
  add(global_ok, "states");
  add(tail51_ok, "tail_calls");
  add(status_ok, "yielded_trace");
  return r;
}

}  // namespace lfc::luaint
