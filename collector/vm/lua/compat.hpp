// The Lua 5.4 C API that the collector's Lua sources are written against,
// mapped onto Lua 5.3, 5.2, 5.1 and LuaJIT 2.1 (whose API is 5.1's plus a
// few of 5.2's functions). Force-included (-include) in every adapter build
// after the VM's own headers; on 5.4 it adds nothing.
//
// Each shim keeps the 5.4 function's contract: the same stack effect, and
// the pushed value's type as the result where 5.4 returns one. What a
// version cannot do at all (5.1's tail-call events, 5.4's warnings) is not
// faked here: the adapter asks LUA_VERSION_NUM and says so at run time.
#pragma once

#include <atomic>

extern "C" {
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
}

#if LUA_VERSION_NUM < 504

#ifndef LUA_NUMTYPES
#define LUA_NUMTYPES 9
#endif
#ifndef LUA_VERSION_RELEASE_NUM
#define LUA_VERSION_RELEASE_NUM (LUA_VERSION_NUM * 100)
#endif
#ifndef LUA_LOADED_TABLE
#define LUA_LOADED_TABLE "_LOADED"
#endif
#ifndef LUA_PRELOAD_TABLE
#define LUA_PRELOAD_TABLE "_PRELOAD"
#endif

namespace lfc::compat {

/// 5.4's lua_resume(L, from, nargs, &nres): on a yield or a return, the
/// values L left are all of its stack (the caller moves them off).
inline int resume(lua_State* L, lua_State* from, int nargs, int* nres) {
#if LUA_VERSION_NUM >= 502
  const int st = lua_resume(L, from, nargs);
#else
  (void)from;
  const int st = lua_resume(L, nargs);
#endif
  *nres = lua_gettop(L);
  return st;
}

/// 5.4's variadic lua_gc: the options of 5.1-5.3 take one int.
inline int gc(lua_State* L, int what, int data = 0) {
  return lua_gc(L, what, data);
}

inline int getfield(lua_State* L, int i, const char* k) {
  lua_getfield(L, i, k);
  return lua_type(L, -1);
}
inline int rawget(lua_State* L, int i) {
  lua_rawget(L, i);
  return lua_type(L, -1);
}
inline int gettable(lua_State* L, int i) {
  lua_gettable(L, i);
  return lua_type(L, -1);
}

}  // namespace lfc::compat

#undef lua_resume
#define lua_resume lfc::compat::resume
#define lua_gc(L, ...) lfc::compat::gc(L, __VA_ARGS__)
#define lua_newuserdatauv(L, sz, nuv) lua_newuserdata(L, sz)
#define luaL_argexpected(L, cond, arg, tname) \
  ((void)((cond) || luaL_argerror(L, (arg), lua_pushfstring(L, "%s expected", (tname)))))

#if LUA_VERSION_NUM < 503
#define lua_getfield lfc::compat::getfield
#define lua_rawget lfc::compat::rawget
#define lua_gettable lfc::compat::gettable
#endif

#if LUA_VERSION_NUM == 501  // Lua 5.1 and LuaJIT
#define LUA_OK 0
/// 5.2+ keep the globals in the registry at this index; 5.1 at LUA_GLOBALSINDEX.
#define LUA_RIDX_GLOBALS (-0x4c46)
/// 5.2+ keep the main thread there; 5.1 has no way to reach it from a
/// coroutine: the shim pushes the running thread (callers run on the main one).
#define LUA_RIDX_MAINTHREAD (-0x4c47)
/// 5.1 has no tail-call event (its LUA_HOOKTAILRET, 4, is a return): a value
/// no hook event takes, so a `case` for it never matches.
#define LUA_HOOKTAILCALL (-0x4c48)

namespace lfc::compat {
inline int absindex(lua_State* L, int i) {
  return i > 0 || i <= LUA_REGISTRYINDEX ? i : lua_gettop(L) + i + 1;
}
inline int rawgeti(lua_State* L, int i, lua_Integer n) {
  if (i == LUA_REGISTRYINDEX && n == LUA_RIDX_GLOBALS)
    lua_pushvalue(L, LUA_GLOBALSINDEX);
  else if (i == LUA_REGISTRYINDEX && n == LUA_RIDX_MAINTHREAD)
    lua_pushthread(L);
  else
    lua_rawgeti(L, i, static_cast<int>(n));
  return lua_type(L, -1);
}
/// 5.2's luaL_getsubtable: t[k] as a table, made when missing; true when it existed.
inline int getsubtable(lua_State* L, int i, const char* k) {
  i = absindex(L, i);
  lua_getfield(L, i, k);
  if (lua_istable(L, -1)) return 1;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushvalue(L, -1);
  lua_setfield(L, i, k);
  return 0;
}
#ifndef LUAFLAME_LUAJIT
inline lua_Integer tointegerx(lua_State* L, int i, int* isnum) {
  const lua_Integer v = lua_tointeger(L, i);
  if (isnum) *isnum = v != 0 || lua_isnumber(L, i);
  return v;
}
#endif
}  // namespace lfc::compat

#undef lua_getglobal
#define lua_getglobal(L, k) lfc::compat::getfield(L, LUA_GLOBALSINDEX, k)
#define lua_rawgeti lfc::compat::rawgeti
#define lua_absindex lfc::compat::absindex
#define luaL_getsubtable lfc::compat::getsubtable
#define lua_pushglobaltable(L) lua_pushvalue(L, LUA_GLOBALSINDEX)
#define lua_rawlen(L, i) lua_objlen(L, i)
#define luaL_len(L, i) static_cast<lua_Integer>(lua_objlen(L, i))
#ifndef LUAFLAME_LUAJIT
#define lua_tointegerx lfc::compat::tointegerx
#define luaL_newlib(L, l) (lua_newtable(L), luaL_register(L, nullptr, l))
#endif
// frames.cpp's preset_makers (5.4's to-be-closed buffer box) is not used
// before 5.4; these only let it compile.
#define luaL_buffinitsize(L, b, n) (luaL_buffinit(L, b), static_cast<char*>(nullptr))
#define luaL_pushresultsize(b, n) luaL_pushresult(b)

#else  // 5.2 and 5.3
#if LUA_VERSION_NUM < 503
#define lua_getglobal(L, k) (lua_getglobal(L, k), lua_type(L, -1))
#define lua_rawgeti(L, i, n) (lua_rawgeti(L, i, static_cast<int>(n)), lua_type(L, -1))
#endif
#endif

#endif  // LUA_VERSION_NUM < 504

// The hook functions of the Lua library itself, never the wrappers that
// `luaflame attach`'s shim preloads over them (collector/attach/shim.cpp):
// the shim hands the host's own lua_sethook and lua_gethook* from C to the
// session (vm/lua/attach.hpp), and the collector's calls, the signal
// handler's among them, must not come back there. The pointers start at
// the symbols the module was linked against; before an attached run
// starts they are resolved in the Lua library itself (hook_api.cpp). A
// relaxed load each: safe in a signal handler. The same on every version.
namespace lfc::hook_api {
using SetHook = decltype(&::lua_sethook);
using GetHook = decltype(&::lua_gethook);
using GetInt = decltype(&::lua_gethookmask);
struct Fns {
  std::atomic<SetHook> set;
  std::atomic<GetHook> get;
  std::atomic<GetInt> mask, count;
};
extern Fns g_fns;
/// The library's own four, found by the library that defines lua_gettop
/// (which the shim does not wrap); false, the pointers unchanged, when
/// they cannot be found. Not in a signal handler (dladdr, dlopen).
bool resolve() noexcept;
inline auto sethook(lua_State* L, lua_Hook f, int mask, int count) {
  return g_fns.set.load(std::memory_order_relaxed)(L, f, mask, count);
}
inline lua_Hook gethook(lua_State* L) {
  return g_fns.get.load(std::memory_order_relaxed)(L);
}
inline int gethookmask(lua_State* L) {
  return g_fns.mask.load(std::memory_order_relaxed)(L);
}
inline int gethookcount(lua_State* L) {
  return g_fns.count.load(std::memory_order_relaxed)(L);
}
}  // namespace lfc::hook_api

#define lua_sethook lfc::hook_api::sethook
#define lua_gethook lfc::hook_api::gethook
#define lua_gethookmask lfc::hook_api::gethookmask
#define lua_gethookcount lfc::hook_api::gethookcount
