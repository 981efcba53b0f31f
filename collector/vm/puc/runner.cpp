// `luaflame run`: runs a script exactly as `lua5.X SCRIPT ARGS...` does,
// for the Lua release it is built for (this follows that release's lua.c:
// the arg table, LUA_INIT_5_X then LUA_INIT, 5.4's generational GC, the
// message handler and its traceback, "lua5.X: " before an uncaught error,
// exit status 1 on error, Ctrl-C as "interrupted!"), with a session around
// the script.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <unistd.h>

#include "luaflame/collector.hpp"
#include "vm/lua/boundary.hpp"
#include "vm/lua/run_common.hpp"
#include "vm/puc/chunk_locals.hpp"

extern "C" {
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
}

namespace lfc {

extern bool g_report_at_exit;  // session_common.cpp
extern bool g_output_failed;   // session_common.cpp

namespace {

// The interpreter's name, so an error reads exactly as lua5.X prints it,
// and its LUA_INIT variable (5.1 reads LUA_INIT only).
#if LUA_VERSION_NUM == 501
const char* const kProgName = "lua5.1";
const char* const kInitName = "=LUA_INIT";
#elif LUA_VERSION_NUM == 502
const char* const kProgName = "lua5.2";
const char* const kInitName = "=LUA_INIT_5_2";
#elif LUA_VERSION_NUM == 503
const char* const kProgName = "lua5.3";
const char* const kInitName = "=LUA_INIT_5_3";
#else
const char* const kProgName = "lua5.4";
const char* const kInitName = "=LUA_INIT_5_4";
#endif

struct RunArgs {
  const Options* opts;
  int argc;
  char** argv;
  int script;
};

int report(lua_State* L, int status) {
  if (status != LUA_OK && (LUA_VERSION_NUM > 502 || !lua_isnil(L, -1))) {
    const char* msg = lua_tostring(L, -1);
    run::l_message(kProgName, msg ? msg : "(error object is not a string)");
    lua_pop(L, 1);
  }
  return status;
}

#if LUA_VERSION_NUM == 501
// lua.c 5.1's traceback: debug.traceback on a string message.
int msghandler(lua_State* L) noexcept {
  if (!lua_isstring(L, 1)) return 1;
  lua_getfield(L, LUA_GLOBALSINDEX, "debug");
  if (!lua_istable(L, -1)) return lua_pop(L, 1), 1;
  lua_getfield(L, -1, "traceback");
  if (!lua_isfunction(L, -1)) return lua_pop(L, 2), 1;
  lua_pushvalue(L, 1);
  lua_pushinteger(L, 2);
  lua_call(L, 2, 1);
  return 1;
}
#elif LUA_VERSION_NUM == 502
// lua.c 5.2's traceback.
int msghandler(lua_State* L) noexcept {
  const char* msg = lua_tostring(L, 1);
  if (msg)
    luaL_traceback(L, L, msg, 1);
  else if (!lua_isnoneornil(L, 1) && !luaL_callmeta(L, 1, "__tostring"))
    lua_pushliteral(L, "(no error message)");
  return 1;
}
#else
int msghandler(lua_State* L) noexcept {
  const char* msg = lua_tostring(L, 1);
  if (msg == nullptr) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}
#endif

// `func_at`: where the function was when lua_pcall was made.
int docall(lua_State* L, int narg, int nres, int* func_at = nullptr) {
  int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  if (func_at) *func_at = base + 1;
  run::watch_sigint(L);
  int status = lua_pcall(L, narg, nres, base);
  run::unwatch_sigint();
  lua_remove(L, base);
  return status;
}

int dochunk(lua_State* L, int status) {
  if (status == LUA_OK) status = docall(L, 0, 0);
  return report(L, status);
}

int handle_luainit(lua_State* L) noexcept {
  const char* name = kInitName;
  const char* init = std::getenv(name + 1);
  if (!init && LUA_VERSION_NUM > 501) {
    name = "=LUA_INIT";
    init = std::getenv(name + 1);
  }
  if (!init) return LUA_OK;
  if (init[0] == '@') return dochunk(L, luaL_loadfile(L, init + 1));
  return dochunk(L, luaL_loadbuffer(L, init, std::strlen(init), name));
}

// The interpreter a program re-running itself should use (penlight's
// app.lua() reads arg[-1] and below): lua5.4 on the PATH, as lua.c would
// have it in arg[-1] when started as `lua5.4 script.lua`. The profiler's
// own options are not the program's: they do not appear in `arg`.
const char* interpreter() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (const char* name : {kProgName, "lua"}) {
    std::size_t start = 0;
    while (start <= dirs.size()) {
      std::size_t end = dirs.find(':', start);
      if (end == std::string::npos) end = dirs.size();
      std::string dir = dirs.substr(start, end - start);
      if (dir.empty()) dir = ".";
      if (access((dir + "/" + name).c_str(), X_OK) == 0) return name;
      start = end + 1;
    }
  }
  return kProgName;
}

void createargtable(lua_State* L, char** argv, int argc, int script) {
  int narg = argc - (script + 1);
  lua_createtable(L, narg, 1);
  lua_pushstring(L, interpreter());  // a literal: no C++ object under a raising call
  lua_rawseti(L, -2, -1);
  for (int i = script; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

int pushargs(lua_State* L) noexcept {
  if (lua_getglobal(L, "arg") != LUA_TTABLE) luaL_error(L, "'arg' is not a table");
  int n = static_cast<int>(luaL_len(L, -1));
  luaL_checkstack(L, n + 3, "too many arguments to script");
  int i;
  for (i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
  lua_remove(L, -i);
  return n;
}

// The script's results are not kept (lua.c leaves them on the stack unread):
// with none, the chunk's registers stay as it left them, and in alloc mode
// the values of its locals stay live through the stop (chunk_locals.hpp).
int handle_script(lua_State* L, char** argv, bool keep_locals, bool quiet) {
  const char* fname = argv[0];
  if (std::strcmp(fname, "-") == 0 && std::strcmp(argv[-1], "--") != 0) fname = nullptr;  // stdin
  int status = luaL_loadfile(L, fname);
  if (status == LUA_OK) {
    const void* closure = lua_topointer(L, -1);
    int n = pushargs(L);
    int func_at = 0;
    status = docall(L, n, 0, &func_at);
    bool fewest = false;
    if (status == LUA_OK && keep_locals && chunk_locals::push(L, {func_at, n, closure}, &fewest) &&
        fewest && !quiet)
      std::fprintf(stderr,
                   "luaflame: live bytes count the main chunk's locals in scope at each of its "
                   "returns only (Lua 5.1 does not keep which return was taken)\n");
  }
  return report(L, status);
}

int pmain(lua_State* L) noexcept {
  RunArgs* a = static_cast<RunArgs*>(lua_touserdata(L, 1));
#if LUA_VERSION_NUM >= 502
  luaL_checkversion(L);
#endif
  luaL_openlibs(L);
  preload_module(L);
  createargtable(L, a->argv, a->argc, a->script);
  lua_gc(L, LUA_GCRESTART);
#if LUA_VERSION_NUM >= 504
  lua_gc(L, LUA_GCGEN, 0, 0);
#endif
  // Said before the program runs: a script that ends by os.exit() does not come back here.
  const char* keep_why = a->opts->alloc ? chunk_locals::probe(L) : nullptr;
  const bool keep_locals = a->opts->alloc && !keep_why;
  if (keep_why && !a->opts->quiet)
    std::fprintf(stderr, "luaflame: live bytes do not count the main chunk's locals: %s\n",
                 keep_why);
  if (handle_luainit(L) != LUA_OK) return 0;
  lua_pushcfunction(L, run::start_session);
  lua_pushlightuserdata(L, const_cast<Options*>(a->opts));
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    run::l_message("luaflame run", lua_tostring(L, -1));
    lua_pop(L, 1);
    return 0;
  }
  run::watch_sigterm();
  g_report_at_exit = !a->opts->quiet;
  int status = handle_script(L, a->argv + a->script, keep_locals, a->opts->quiet);
  if (const char* failed = cxx_guard([&] { run::end_session(L, a->opts->quiet); }))
    std::fprintf(stderr, "luaflame: ending the profile: %s\n", failed);
  g_report_at_exit = false;
  if (status != LUA_OK) return 0;
  lua_pushboolean(L, 1);
  return 1;
}

}  // namespace

int run_script(const Options& opts, int argc, char** argv, int script_index) {
  lua_State* L = luaL_newstate();
  if (!L) {
    run::l_message(kProgName, "cannot create state: not enough memory");
    return EXIT_FAILURE;
  }
  lua_gc(L, LUA_GCSTOP);
  RunArgs a{&opts, argc, argv, script_index};
  lua_pushcfunction(L, pmain);
  lua_pushlightuserdata(L, &a);
  int status = lua_pcall(L, 1, 1, 0);
  int result = lua_toboolean(L, -1);
  report(L, status);
  run::end_session(L, opts.quiet);
  lua_close(L);
  // The program's status, except that a run that succeeded but whose
  // profile could not be written says so (docs/collector.md: exit status).
  if (result && status == LUA_OK) return g_output_failed ? run::kOutputFailed : EXIT_SUCCESS;
  return EXIT_FAILURE;
}

}  // namespace lfc
