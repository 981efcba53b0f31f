// The check of jlayout.hpp's reads against the running LuaJIT.
#include "vm/luajit/jlayout.hpp"

extern "C" {
#include <lauxlib.h>
}

namespace lfc::jit::layout {

namespace {

// What probe_hook saw: Lua and other functions whose reads matched the
// API, and the first read that did not. probe() runs on the Lua thread of
// the one LuaJIT session (jsession.cpp: one per process), not in parallel.
struct Seen {
  int lua = 0, other = 0;
  const char* bad = nullptr;
};
Seen g_seen;

// A Lua function's prototype as lua_getinfo "S" describes it: its lines,
// and a chunk name whose text is the source (strdata: just after the GCstr).
bool proto_matches(const void* fn, const lua_Debug& ar) {
  const Ident id = ident_of(fn);
  const char* proto = static_cast<const char*>(id.key) - kProtoSize;
  const auto* chunk = static_cast<const char*>(id.chunk);
  return id.line == ar.linedefined &&
         id.line + at<int>(proto, kProtoNumline) == ar.lastlinedefined && chunk &&
         ar.source > chunk && ar.source - chunk <= 64;
}

// Boundary: a C hook; it raises no Lua error (lua_getinfo "Sf" on the
// hook's own frame does not) and throws nothing.
void probe_hook(lua_State* L, lua_Debug* ar) noexcept {
  if (ar->event != LUA_HOOKCALL || g_seen.bad) return;
  // Before anything is read through lua_State.stack: the hook's frame link
  // lies just below lua_State.base (lj_dispatch.c's callhook), both loads.
  const char* stack = at<const char*>(L, kStateStack);
  if (!stack ||
      at<const char*>(L, kStateBase) != stack + (static_cast<std::size_t>(ar->i_ci) + 1) * 8) {
    g_seen.bad = "lua_State.stack and .base differ";
    return;
  }
  const void* fn = hook_func(L, *ar);
  lua_Debug up;
  const std::int64_t slot = ar->i_ci;
  const std::int64_t want =
      lua_getstack(L, 1, &up) ? slot - (static_cast<std::int64_t>(up.i_ci) - slot) / 65535 : -1;
  if (caller_slot(L, slot) != want) {
    g_seen.bad = "a frame link (the caller's slot) differs";
    return;
  }
  if (!lua_getinfo(L, "Sf", ar)) {
    g_seen.bad = "lua_getinfo failed in a hook";
    return;
  }
  const void* api = lua_topointer(L, -1);
  const bool lua_fn = !lua_iscfunction(L, -1);
  lua_pop(L, 1);
  if (fn != api)
    g_seen.bad = "a frame's function slot (lua_State.stack) differs";
  else if (lua_fn != (at<std::uint8_t>(fn, kFuncFfid) == 0))
    g_seen.bad = "GCfunc.ffid differs";
  else if (lua_fn && !proto_matches(fn, *ar))
    g_seen.bad = "GCproto (firstline, numline, chunkname) differs";
  else
    ++(lua_fn ? g_seen.lua : g_seen.other);
}

// Lua calls (the chunk, f, g and f again by a tail call, a vararg
// function, a comparator called from C, a metamethod) and fast functions
// (tostring, string.rep, pcall, table.sort, setmetatable), every call
// event checked.
int probe_body(lua_State* L) {
  static const char kChunk[] =
      "local function f() return 1 end\n"
      "local g = function()\n  return f()\nend\n"
      "local function v(...) return f(...) end\n"
      "f() g() tostring(1) string.rep('x', 2) v(1, 2) pcall(v, 3)\n"
      "table.sort({3, 1, 2}, function(a, b) return a < b end)\n"
      "local t = setmetatable({}, {__index = function(_, k) return f() end}) local _ = t.x";
  if (luaL_loadbuffer(L, kChunk, sizeof kChunk - 1, "=luaflame.probe") != 0) return 0;
  lua_call(L, 0, 0);
  return 0;
}

}  // namespace

bool probe(lua_State* L, std::string& why) {
  if (sizeof(void*) != 8) return why = "not a 64-bit LuaJIT", false;
  const lua_Hook hook = lua_gethook(L);
  const int mask = lua_gethookmask(L), count = lua_gethookcount(L);
  g_seen = Seen{};
  lua_sethook(L, probe_hook, LUA_MASKCALL, 0);  // LuaJIT's hook is the state's
  const int top = lua_gettop(L);
  const int st = lua_cpcall(L, probe_body, nullptr);
  lua_settop(L, top);
  lua_sethook(L, hook, mask, count);
  if (st != 0) return why = "the layout probe failed", false;
  if (g_seen.bad) return why = g_seen.bad, false;
  if (g_seen.lua < 4 || g_seen.other < 2) return why = "the probe's calls were not all seen", false;
  return true;
}

}  // namespace lfc::jit::layout
