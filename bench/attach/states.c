/* What each state costs a host that makes a state per job (docs/attach.md,
 * "States and threads"; docs/benchmarks.md): N rounds of luaL_newstate,
 * luaL_openlibs, a chunk of 200 Lua calls, lua_close. Under `luaflame
 * attach` each state is a run of its own, started at luaL_openlibs and
 * written at lua_close. Compare instructions (callgrind) or CPU time:
 *   cc -O2 -o states bench/attach/states.c $(pkg-config --cflags --libs lua5.3)
 *   valgrind --tool=callgrind ./states 100
 *   env $(luaflame attach --env -q -o /tmp/st/p.folded) valgrind --tool=callgrind ./states 100
 * prints the chunks' sum (the same alone and attached). */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>

static const char kChunk[] =
    "local function f(x) return x * 2 end local s = 0 for i = 1, 200 do s = s + f(i) end "
    "return s";

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 100;
  long sum = 0;
  for (int i = 0; i < n; ++i) {
    lua_State* L = luaL_newstate();
    if (!L) return 1;
    luaL_openlibs(L);
    if (luaL_dostring(L, kChunk) != LUA_OK) {
      fprintf(stderr, "states: %s\n", lua_tostring(L, -1));
      lua_close(L);
      return 1;
    }
    sum += (long)lua_tointeger(L, -1);
    lua_close(L);
  }
  printf("%ld\n", sum);
  return 0;
}
