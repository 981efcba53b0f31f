/* A host that sets and reads its Lua hook from C around each call into Lua,
 * as HAProxy does around each resume of a request's coroutine (hlua.c):
 * attached, luaflame must leave that hook exactly as the host set it, and
 * the host's count hook must see the events it sees alone.
 *
 *   hook_host CALLS   prints "calls N events E bad B", exit 1 when B > 0
 *
 * Each call: the host sets a count hook (or none, every fifth call) on a
 * new coroutine that it then resumes (HAProxy's requests), or on the main
 * thread that it then calls by lua_pcall (an instruction-limit sandbox),
 * reads it back with lua_gethook, lua_gethookmask and lua_gethookcount,
 * runs a loop there and reads the hook again. B counts the reads that
 * differ from what was set; E the count hook's events (the same alone and
 * attached: the count restarts at each lua_sethook, and each call runs the
 * same instructions). */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>

#include "host_lua.h"

static long events;

static void host_hook(lua_State* L, lua_Debug* ar) {
  (void)L;
  (void)ar;
  ++events;
}

static int same(lua_State* T, lua_Hook h, int mask, int count) {
  return lua_gethook(T) == h && lua_gethookmask(T) == mask && lua_gethookcount(T) == count;
}

int main(int argc, char** argv) {
  const long calls = argc > 1 ? atol(argv[1]) : 100000;
  lua_State* L = luaL_newstate();
  long bad = 0, i;
  luaL_openlibs(L);
  if (luaL_dostring(L,
                    "function work(n) local s = 0 for i = 1, n do s = s + i % 7 end "
                    "return s end")) {
    fprintf(stderr, "hook_host: %s\n", lua_tostring(L, -1));
    return 2;
  }
  for (i = 0; i < calls; ++i) {
    const int co = i % 2 == 0;
    lua_State* T = co ? lua_newthread(L) : L;
    lua_Hook h = i % 5 == 4 ? NULL : host_hook;
    const int mask = h ? LUA_MASKCOUNT : 0, count = h ? 1000 + (int)(i % 13) : 0;
    int status;
    lua_sethook(T, h, mask, count);
    bad += !same(T, h, mask, count);
    lua_getglobal(T, "work");
    lua_pushinteger(T, 1000);
    status = co ? resume(T, L, 1) : lua_pcall(T, 1, 1, 0);
    if (status != 0) {
      fprintf(stderr, "hook_host: %s\n", lua_tostring(T, -1));
      return 2;
    }
    bad += !same(T, h, mask, count);
    lua_pop(L, 1); /* the thread, or work's result */
  }
  printf("calls %ld events %ld bad %ld\n", calls, events, bad);
  lua_close(L);
  return bad != 0;
}
