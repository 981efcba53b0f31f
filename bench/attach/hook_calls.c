/* What a host's own hook calls cost under `luaflame attach` (docs/attach.md,
 * "A hook the host sets from C"): N rounds of lua_sethook and
 * lua_gethookmask from C on a state's main thread, as HAProxy makes around
 * each request. Run alone and attached; compare instructions (callgrind)
 * or time per round:
 *   cc -O2 -o hook_calls bench/attach/hook_calls.c $(pkg-config --cflags --libs lua5.3)
 *   valgrind --tool=callgrind ./hook_calls 1000000
 *   env $(luaflame attach --env -q) valgrind --tool=callgrind ./hook_calls 1000000
 * prints "rounds N ns/round X" (wall clock, CLOCK_MONOTONIC). */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void host_hook(lua_State* L, lua_Debug* ar) {
  (void)L;
  (void)ar;
}

int main(int argc, char** argv) {
  const long rounds = argc > 1 ? atol(argv[1]) : 1000000;
  lua_State* L = luaL_newstate();
  struct timespec t0, t1;
  long i, sum = 0;
  luaL_openlibs(L);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (i = 0; i < rounds; ++i) {
    lua_sethook(L, host_hook, LUA_MASKCOUNT, 1000 + (int)(i & 7));
    sum += lua_gethookmask(L);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("rounds %ld ns/round %.1f (%ld)\n", rounds,
         ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (double)rounds,
         sum / rounds);
  lua_close(L);
  return 0;
}
