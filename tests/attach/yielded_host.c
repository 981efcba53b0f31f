/* A host that runs a function on a suspended coroutine from C, as nmap's
 * NSE does (nse_restore calls nse_main.lua on a script's yielded thread
 * each time a socket operation completes): attached and traced, every call
 * of that function is in the calls, under the coroutine, on every Lua (on
 * 5.2 and 5.3, where lua_getinfo misreads a yielded thread's running call,
 * it was left out, and on 5.2 named `[C] <anon>`, until 2026-12-07).
 *
 *   yielded_host CALLS   prints "probe CALLS sum S resumed R"
 */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>

#include "host_lua.h"

int main(int argc, char** argv) {
  const long calls = argc > 1 ? atol(argv[1]) : 1000;
  lua_State *L = luaL_newstate(), *T;
  long i, sum = 0;
  luaL_openlibs(L);
  if (luaL_dostring(L,
                    "function probe(x) local s = 0 for i = 1, 100 do s = s + x % i end "
                    "return s end\n"
                    "function waiting() return coroutine.yield() * 2 end\n"
                    "co = coroutine.create(function() return waiting() end)")) {
    fprintf(stderr, "yielded_host: %s\n", lua_tostring(L, -1));
    return 2;
  }
  lua_getglobal(L, "co");
  T = lua_tothread(L, -1);
  if (resume(T, L, 0) != LUA_YIELD) return 2;
  for (i = 0; i < calls; ++i) {
    lua_getglobal(T, "probe");
    lua_pushinteger(T, i);
    if (lua_pcall(T, 1, 1, 0) != 0) {
      fprintf(stderr, "yielded_host: %s\n", lua_tostring(T, -1));
      return 2;
    }
    sum += (long)lua_tointeger(T, -1);
    lua_pop(T, 1);
  }
  lua_pushinteger(T, 21);
  if (resume(T, L, 1) != 0) return 2;
  printf("probe %ld sum %ld resumed %ld\n", calls, sum, (long)lua_tointeger(T, -1));
  lua_close(L);
  return 0;
}
