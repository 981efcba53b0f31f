// The probe of luaint.hpp's layouts against the running Lua.
#include "luaint.hpp"

extern "C" {
#include <lauxlib.h>
}

namespace lfc::luaint {

namespace {

// Called from a Lua function: compares the direct reads with lua_getstack.
int probe_fn(lua_State* L) {
  Layout* out = static_cast<Layout*>(lua_touserdata(L, lua_upvalueindex(1)));
  lua_Debug a0, a1;
  if (!lua_getstack(L, 0, &a0) || !lua_getstack(L, 1, &a1)) return 0;
  lua_getinfo(L, "S", &a1);
  out->ci_prev_ok = a1.what[0] != 'C' && ci_prev(a0.i_ci) == a1.i_ci && ci_prev(a1.i_ci) != nullptr;
  out->state_ci_ok = state_ci(L) == a0.i_ci;
  return 0;
}

}  // namespace

Layout probe(lua_State* L) {
  Layout out;
  if (lua_version(L) != 504 || sizeof(void*) != 8) {
    out.why = "not Lua 5.4 on a 64-bit ABI";
    return out;
  }
  const int top = lua_gettop(L);
  static const char kChunk[] = "local f = ... ; f() return 0";
  if (luaL_loadbuffer(L, kChunk, sizeof kChunk - 1, "=luaflame.probe") == LUA_OK) {
    lua_pushlightuserdata(L, &out);
    lua_pushcclosure(L, probe_fn, 1);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) out = Layout{};
  }
  lua_settop(L, top);
  if (!out.ci_prev_ok) out.why = "CallInfo.previous does not match lua_getstack";
  else if (!out.state_ci_ok) out.why = "lua_State.ci does not match lua_getstack";
  return out;
}

}  // namespace lfc::luaint
