// What `luaflame run` (runner.cpp, Lua 5.4) and `luaflame-luajit`
// (jit/jrunner.cpp, LuaJIT) share around the script: messages as the
// interpreter prints them, Ctrl-C as "interrupted!", and the session's start
// and stop. Compiled in both builds (run_common.cpp).
#pragma once

#include "vm/lua/boundary.hpp"

extern "C" {
#include <lua.h>
}

namespace lfc::run {

/// The status of a run whose program succeeded but whose profile could not
/// be written (docs/collector.md: exit status).
constexpr int kOutputFailed = 3;

/// "pname: msg" on stderr, as lua.c and luajit.c print it.
void l_message(const char* pname, const char* msg);

/// lua.c's SIGINT handling around one protected call: while watched, Ctrl-C
/// raises "interrupted!" in L at its next hook event.
void watch_sigint(lua_State* L);
void unwatch_sigint();

/// SIGTERM (docker stop, kill) while profiling: the run is finished with
/// what it holds (files written, the stream finished: lfc::finish_for_exit)
/// on a watcher thread, then the process dies of SIGTERM as it would
/// unprofiled (status 143). The program's own SIGTERM handler, installed
/// later, replaces this one; a forked child dies as unprofiled. Once per
/// process, after the session started.
void watch_sigterm();

/// A lua_CFunction: starts the session with the Options given as argument 1
/// (a light userdata); raises the reason when it cannot. Called as a C
/// function of its own so the session sees a two-level stack (the 5.4
/// session checks its CallInfo walk there).
int start_session(lua_State* L) LF_LUA_ENTRY;

/// Stops a running session and prints its summary (unless quiet; a stream
/// error or a fallback file is always said).
void end_session(lua_State* L, bool quiet);

}  // namespace lfc::run
