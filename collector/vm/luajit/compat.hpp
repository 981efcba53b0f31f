// The Lua 5.2+ API calls that the shared collector sources (module.cpp,
// frames.cpp) make, mapped onto LuaJIT's Lua 5.1 API. Force-included
// (-include) in the LuaJIT build of those files only, after LuaJIT's own
// headers, so the 5.4 build never sees it. Each shim keeps the 5.4
// function's contract: the same stack effect and the pushed value's type as
// the result.
#pragma once

extern "C" {
#include <lauxlib.h>
#include <lua.h>
#include <luajit.h>
}

#define LUA_LOADED_TABLE "_LOADED"
#define LUA_PRELOAD_TABLE "_PRELOAD"
/// 5.4 keeps the globals in the registry at this index; 5.1 at LUA_GLOBALSINDEX.
#define LUA_RIDX_GLOBALS (-0x4c46)

inline int lfj_absindex(lua_State* L, int i) {
  return i > 0 || i <= LUA_REGISTRYINDEX ? i : lua_gettop(L) + i + 1;
}
inline int lfj_getfield(lua_State* L, int i, const char* k) {
  lua_getfield(L, i, k);
  return lua_type(L, -1);
}
inline int lfj_rawget(lua_State* L, int i) {
  lua_rawget(L, i);
  return lua_type(L, -1);
}
inline int lfj_rawgeti(lua_State* L, int i, lua_Integer n) {
  if (i == LUA_REGISTRYINDEX && n == LUA_RIDX_GLOBALS)
    lua_pushvalue(L, LUA_GLOBALSINDEX);
  else
    lua_rawgeti(L, i, static_cast<int>(n));
  return lua_type(L, -1);
}
/// 5.2's luaL_getsubtable: t[k] as a table, made when missing; true when it existed.
inline int lfj_getsubtable(lua_State* L, int i, const char* k) {
  i = lfj_absindex(L, i);
  lua_getfield(L, i, k);
  if (lua_istable(L, -1)) return 1;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushvalue(L, -1);
  lua_setfield(L, i, k);
  return 0;
}

#undef lua_getglobal
#define lua_getglobal(L, k) lfj_getfield(L, LUA_GLOBALSINDEX, k)
#define lua_getfield lfj_getfield
#define lua_rawget lfj_rawget
#define lua_rawgeti lfj_rawgeti
#define lua_absindex lfj_absindex
#define luaL_getsubtable lfj_getsubtable
// frames.cpp's preset_makers (5.4's to-be-closed buffer box) is not used
// with LuaJIT; these only let it compile.
#define luaL_buffinitsize(L, b, n) (luaL_buffinit(L, b), static_cast<char*>(nullptr))
#define luaL_pushresultsize(b, n) luaL_pushresult(b)
