/* A host that makes its state, runs some Lua, then forks a worker that
 * calls into Lua by lua_pcall alone (a prefork server's handlers: no
 * coroutine, no lua_resume): attached, the worker's run starts again at
 * its first call and holds the worker's `work`, in a file of its own
 * beside the parent's (until 2026-12-07 the worker was not profiled).
 * The host counts its Lua calls with a call hook of its own, set before
 * the fork: the worker's hook sees what it sees alone.
 *
 * With `cpcall` (5.1 and LuaJIT) the worker makes its calls by lua_call
 * inside one lua_cpcall, as a 5.1 host protects its C code; with `call`
 * (every Lua) by lua_call alone, unprotected; with `lua` the Lua forks
 * (`forker`, through a C function) and the child goes on in it.
 *
 *   fork_host CALLS [WORKERS [cpcall|call|lua]]   prints "parent S child S' status 0 hooked H"
 *   (WORKERS, default 1, one after another, each after CALLS/10 setups) */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static long hooked;
static void count_call(lua_State* L, lua_Debug* ar) {
  (void)L, (void)ar;
  ++hooked;
}

static long calls_of(lua_State* L, const char* fn, long calls) {
  long i, sum = 0;
  for (i = 0; i < calls; ++i) {
    lua_getglobal(L, fn);
    lua_pushinteger(L, i);
    if (lua_pcall(L, 1, 1, 0) != 0) {
      fprintf(stderr, "fork_host: %s\n", lua_tostring(L, -1));
      exit(2);
    }
    sum += (long)lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  return sum;
}

static long cp_calls, cp_sum;
static int cp_worker(lua_State* L) {
  long i;
  for (i = 0; i < cp_calls; ++i) {
    lua_getglobal(L, "work");
    lua_pushinteger(L, i);
    lua_call(L, 1, 1);
    cp_sum += (long)lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  return 0;
}

enum entry { BY_PCALL, BY_CPCALL, BY_CALL, BY_LUA };

static int cfork(lua_State* L) {
  pid_t pid;
  fflush(stdout);
  pid = fork();
  if (pid == 0) hooked = 0;
  lua_pushinteger(L, (lua_Integer)pid);
  return 1;
}

/* `lua`: forker(calls) forks, and in the child calls work; the child's sum. */
static pid_t lua_fork(lua_State* L, long calls, long* sum) {
  pid_t pid;
  lua_getglobal(L, "forker");
  lua_pushinteger(L, calls);
  if (lua_pcall(L, 1, 2, 0) != 0) {
    fprintf(stderr, "fork_host: %s\n", lua_tostring(L, -1));
    exit(2);
  }
  pid = (pid_t)lua_tointeger(L, -2);
  *sum = (long)lua_tointeger(L, -1);
  lua_pop(L, 2);
  return pid;
}

static long worker(lua_State* L, long calls, enum entry by, long* hooks) {
  long sum;
  hooked = 0;
  if (by == BY_CALL) {
    cp_calls = calls, cp_sum = 0;
    cp_worker(L);
    sum = cp_sum;
  } else if (by == BY_PCALL) {
    sum = calls_of(L, "work", calls);
  } else {
#if LUA_VERSION_NUM == 501
    cp_calls = calls, cp_sum = 0;
    if (lua_cpcall(L, cp_worker, NULL) != 0) {
      fprintf(stderr, "fork_host: %s\n", lua_tostring(L, -1));
      exit(2);
    }
    sum = cp_sum;
#else
    fprintf(stderr, "fork_host: no lua_cpcall in this Lua\n");
    exit(2);
#endif
  }
  *hooks = hooked;
  return sum;
}

int main(int argc, char** argv) {
  const long calls = argc > 1 ? atol(argv[1]) : 1000;
  const long workers = argc > 2 ? atol(argv[2]) : 1;
  const char* how = argc > 3 ? argv[3] : "pcall";
  const enum entry by = strcmp(how, "cpcall") == 0 ? BY_CPCALL
                        : strcmp(how, "call") == 0 ? BY_CALL
                        : strcmp(how, "lua") == 0  ? BY_LUA
                                                   : BY_PCALL;
  lua_State* L = luaL_newstate();
  int status = 0, st, fds[2];
  long got[2], total[2] = {0, 0}, mine = 0, w;
  pid_t pid;
  luaL_openlibs(L);
  lua_sethook(L, count_call, LUA_MASKCALL, 0);
  lua_register(L, "cfork", cfork);
  if (luaL_dostring(
          L,
          "function setup(x) local s = 0 for i = 1, 300 do s = s + i % 5 end return s end\n"
          "function work(x) local s = 0 for i = 1, 3000 do s = s + (x + i) % 7 end "
          "return s end\n"
          "function forker(n) local pid = cfork() if pid ~= 0 then return pid, 0 end "
          "local s = 0 for i = 1, n do s = s + work(i) end return 0, s end")) {
    fprintf(stderr, "fork_host: %s\n", lua_tostring(L, -1));
    return 2;
  }
  for (w = 0; w < workers; ++w) {
    mine += calls_of(L, "setup", calls / 10);
    fflush(stdout);
    if (pipe(fds) != 0) return 2;
    pid = by == BY_LUA ? lua_fork(L, calls, &got[0]) : fork();
    if (pid < 0) return 2;
    if (pid == 0) {
      close(fds[0]);
      if (by == BY_LUA)
        got[1] = hooked;
      else
        got[0] = worker(L, calls, by, &got[1]);
      if (write(fds[1], got, sizeof got) != (ssize_t)sizeof got) _exit(3);
      lua_close(L);
      _exit(0);
    }
    close(fds[1]);
    if (read(fds[0], got, sizeof got) != (ssize_t)sizeof got) return 2;
    close(fds[0]);
    waitpid(pid, &st, 0);
    status |= st, total[0] += got[0], total[1] += got[1];
  }
  printf("parent %ld child %ld status %d hooked %ld\n", mine, total[0], status, total[1]);
  lua_close(L);
  return status != 0;
}
