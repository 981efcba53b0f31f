// The module's side of `luaflame attach` (docs/attach.md): the preloaded
// shim (collector/attach/shim.cpp) calls these two functions of the
// luaflame.so built for the Lua the host links, through attach.hpp.
//
// Contract: both are called on the host's thread that owns L, from the
// shim's luaL_openlibs and lua_close, never from a signal handler; several
// threads may call them at once for different states (each state its own
// run, where the adapter tells states apart: Lua 5.1-5.4; LuaJIT's
// profiler is one per process, so a second state is not profiled there). Nothing
// crosses back into the host: a C++ exception is caught here, a Lua error
// stays inside lua_pcall (start_session runs under it). The options come
// from LUAFLAME_* in the environment, as for any program.
#include "vm/lua/attach.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "luaflame/collector.hpp"
#include "vm/lua/boundary.hpp"
#include "vm/lua/run_common.hpp"

extern "C" {
#include <lua.h>
}

namespace lfc {

extern bool g_report_at_exit;  // core/profile.hpp

namespace attach {

namespace {

std::atomic<bool> g_quiet{false};
std::atomic<bool> g_said_busy{false};

void say(const char* host, unsigned n, const std::string& what) {
  std::fprintf(stderr, "luaflame attach: %s#%u %s\n", host, n, what.c_str());
  std::fflush(stderr);
}

// FILE.svg -> FILE-N.svg for the state numbered N > 1, so that the runs of
// a host's successive states do not overwrite each other's files.
std::string numbered(const std::string& output, unsigned n) {
  if (n <= 1 || output.empty()) return output;
  const std::size_t slash = output.rfind('/');
  std::size_t dot = output.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot == 0)
    dot = output.size();
  return output.substr(0, dot) + "-" + std::to_string(n) + output.substr(dot);
}

// The run's options: the environment's, then what attach adds (name, tags).
bool options_for(const char* host, unsigned n, Options& o, std::string& err) {
  if (!apply_env(o, err)) return false;
  if (!std::getenv("LUAFLAME_NAME")) o.name = std::string(host) + "#" + std::to_string(n);
  char hostname[256] = "";
  gethostname(hostname, sizeof hostname - 1);
  std::string tags;
  for (const auto& kv : o.tags) tags += kv.first + "=" + kv.second + ",";
  tags += "program=" + std::string(host) + ",pid=" + std::to_string(getpid());
  if (hostname[0] && !o.tags.count("host")) tags += ",host=" + std::string(hostname);
  if (!set_option(o, "tags", tags, err)) return false;
  if (o.output.empty() && o.server.empty()) o.output = "luaflame.svg";
  o.output = numbered(o.output, n);
  return true;
}

}  // namespace

int open(lua_State* L, const char* host, unsigned n) LF_LUA_ENTRY {
  Options o;
  std::string err;
  bool ok = false;
  const char* failed = cxx_guard([&] { ok = options_for(host, n, o, err); });
  if (failed || !ok) {
    say(host, n, std::string("not profiled: ") + (failed ? failed : err.c_str()));
    return -1;
  }
  adapter_setup();
  lua_pushcfunction(L, run::start_session);
  lua_pushlightuserdata(L, &o);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    const char* msg = lua_tostring(L, -1);
    // Another state's run holds the process (LuaJIT): said once, not per state.
    const bool busy = msg && std::strstr(msg, "already running on another");
    if (!busy || !g_said_busy.exchange(true))
      say(host, n, std::string("not profiled: ") + (msg ? msg : "cannot start"));
    lua_pop(L, 1);
    return -1;
  }
  g_quiet = o.quiet;
  g_report_at_exit = !o.quiet;  // a state never closed is reported at exit
  return 0;
}

void close(lua_State* L) LF_LUA_ENTRY {
  run::end_session(L, g_quiet);
}

}  // namespace attach
}  // namespace lfc
