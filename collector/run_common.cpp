// The runners' shared glue (run_common.hpp), for Lua 5.4 and LuaJIT.
#include "run_common.hpp"

#include <csignal>
#include <cstdio>
#include <string>

#include "luaflame/collector.hpp"

extern "C" {
#include <lauxlib.h>
}

namespace lfc::run {

namespace {

lua_State* g_L = nullptr;  // the state a Ctrl-C interrupts (watch_sigint)

void lstop(lua_State* L, lua_Debug*) {
  lua_sethook(L, nullptr, 0, 0);
  luaL_error(L, "interrupted!");
}

// Signal contract (as lua.c's laction): runs on the Lua thread at any
// instruction; lua_sethook is async-signal-safe by Lua's design (the
// comment above lua_sethook in ldebug.c), and g_L is set before the
// handler is installed and not changed while it is.
void laction(int i) {
  std::signal(i, SIG_DFL);
  lua_sethook(g_L, lstop, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

}  // namespace

void l_message(const char* pname, const char* msg) {
  if (pname) std::fprintf(stderr, "%s: ", pname);
  std::fprintf(stderr, "%s\n", msg);
  std::fflush(stderr);
}

void watch_sigint(lua_State* L) {
  g_L = L;
  std::signal(SIGINT, laction);
}

void unwatch_sigint() {
  std::signal(SIGINT, SIG_DFL);
}

int start_session(lua_State* L) {
  const Options* o = static_cast<const Options*>(lua_touserdata(L, 1));
  {
    std::string err;  // gone before lua_error jumps
    if (start(L, *o, err)) return 0;
    lua_pushlstring(L, err.data(), err.size());
  }
  return lua_error(L);
}

void end_session(lua_State* L, bool quiet) {
  if (!running()) return;
  Summary s = stop(L);
  if (!quiet || !s.stream_error.empty() || !s.fallback_file.empty())
    std::fprintf(stderr, "%s", format_summary(s).c_str());
}

}  // namespace lfc::run
