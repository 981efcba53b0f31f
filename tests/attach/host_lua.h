/* What the test hosts (hook_host.c, yielded_host.c) need that differs
 * between the Lua versions they are built against: lua_resume's
 * arguments (5.1 and LuaJIT: none beyond the count; 5.2, 5.3: the thread
 * resuming it; 5.4: also where it writes the count of results). */
#ifndef LUAFLAME_TESTS_ATTACH_HOST_LUA_H
#define LUAFLAME_TESTS_ATTACH_HOST_LUA_H

#include <lua.h>

static int resume(lua_State* T, lua_State* L, int nargs) {
#if LUA_VERSION_NUM >= 504
  int nres;
  return lua_resume(T, L, nargs, &nres);
#elif LUA_VERSION_NUM >= 502
  return lua_resume(T, L, nargs);
#else
  (void)L;
  return lua_resume(T, nargs);
#endif
}

#endif
