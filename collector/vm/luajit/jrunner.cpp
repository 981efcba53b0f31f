// `luaflame-luajit`: runs a script exactly as `luajit SCRIPT ARGS...` does
// (this follows LuaJIT 2.1's luajit.c: the arg table with the interpreter
// at arg[-1], LUA_INIT, the traceback handler, "luajit: " before an
// uncaught error, a nil error object printing nothing, exit status 1 on
// error, Ctrl-C as "interrupted!"), with a session around the script.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "luaflame/collector.hpp"
#include "vm/lua/boundary.hpp"
#include "vm/lua/run_common.hpp"

extern "C" {
#include <lauxlib.h>
#include <lua.h>
#include <luajit.h>
#include <lualib.h>
}

namespace lfc {

extern bool g_report_at_exit;
extern bool g_output_failed;

namespace {

// luajit's name, so an error reads exactly as luajit prints it.
const char* const kProgName = "luajit";

struct RunArgs {
  const Options* opts;
  int argc;
  char** argv;
  int script;
  int status;
};

int report(lua_State* L, int status) {
  if (status && !lua_isnil(L, -1)) {
    const char* msg = lua_tostring(L, -1);
    if (msg == nullptr) msg = "(error object is not a string)";
    run::l_message(kProgName, msg);
    lua_pop(L, 1);
  }
  return status;
}

int traceback(lua_State* L) LF_LUA_ENTRY {
  if (!lua_isstring(L, 1)) {  // a non-string error object: its __tostring, else itself
    if (lua_isnoneornil(L, 1) || !luaL_callmeta(L, 1, "__tostring") || !lua_isstring(L, -1))
      return 1;
    lua_remove(L, 1);
  }
  luaL_traceback(L, L, lua_tostring(L, 1), 1);
  return 1;
}

int docall(lua_State* L, int narg, int clear) {
  const int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, traceback);
  lua_insert(L, base);
  run::watch_sigint(L);
  const int status = lua_pcall(L, narg, clear ? 0 : LUA_MULTRET, base);
  run::unwatch_sigint();
  lua_remove(L, base);
  if (status != LUA_OK) lua_gc(L, LUA_GCCOLLECT, 0);  // force a complete collection, as luajit
  return status;
}

int dostring(lua_State* L, const char* s, const char* name) {
  int status = luaL_loadbuffer(L, s, std::strlen(s), name) || docall(L, 0, 1);
  return report(L, status);
}

int handle_luainit(lua_State* L) LF_LUA_ENTRY {
  const char* init = std::getenv("LUA_INIT");
  if (init == nullptr) return 0;
  if (init[0] == '@') return report(L, luaL_loadfile(L, init + 1) || docall(L, 0, 1));
  return dostring(L, init, "=LUA_INIT");
}

// arg: the script at 0, its arguments after, the interpreter at -1 (as
// luajit sets it when started as `luajit script.lua`). The profiler's own
// options are not the program's: they do not appear in `arg`.
void createargtable(lua_State* L, char** argv, int argc, int script) {
  lua_createtable(L, argc - script - 1, 1);
  lua_pushstring(L, kProgName);
  lua_rawseti(L, -2, -1);
  for (int i = script; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

int handle_script(lua_State* L, char** argv, int n) {
  const char* fname = argv[0];
  if (std::strcmp(fname, "-") == 0 && std::strcmp(argv[-1], "--") != 0) fname = nullptr;  // stdin
  int status = luaL_loadfile(L, fname);
  if (status == LUA_OK) {
    luaL_checkstack(L, n, "too many arguments to script");
    for (int i = 1; i <= n; i++) lua_pushstring(L, argv[i]);
    status = docall(L, n, 0);
  }
  return report(L, status);
}

int pmain(lua_State* L) LF_LUA_ENTRY {
  RunArgs* a = static_cast<RunArgs*>(lua_touserdata(L, 1));
  lua_gc(L, LUA_GCSTOP, 0);
  luaL_openlibs(L);
  lua_gc(L, LUA_GCRESTART, -1);
  preload_module(L);
  createargtable(L, a->argv, a->argc, a->script);
  if (handle_luainit(L)) {
    a->status = 1;
    return 0;
  }
  lua_pushcfunction(L, run::start_session);
  lua_pushlightuserdata(L, const_cast<Options*>(a->opts));
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    run::l_message("luaflame run", lua_tostring(L, -1));
    lua_pop(L, 1);
    a->status = 1;
    return 0;
  }
  run::watch_sigterm();
  g_report_at_exit = !a->opts->quiet;
  a->status = handle_script(L, a->argv + a->script, a->argc - a->script - 1);
  if (const char* failed = cxx_guard([&] { run::end_session(L, a->opts->quiet); }))
    std::fprintf(stderr, "luaflame: ending the profile: %s\n", failed);
  g_report_at_exit = false;
  return 0;
}

}  // namespace

int run_script(const Options& opts, int argc, char** argv, int script_index) {
  lua_State* L = luaL_newstate();
  if (!L) {
    run::l_message(kProgName, "cannot create state: not enough memory");
    return EXIT_FAILURE;
  }
  RunArgs a{&opts, argc, argv, script_index, 0};
  int status = lua_cpcall(L, pmain, &a);
  report(L, status);
  run::end_session(L, opts.quiet);
  lua_close(L);
  if (status || a.status) return EXIT_FAILURE;
  return g_output_failed ? run::kOutputFailed : EXIT_SUCCESS;
}

}  // namespace lfc
