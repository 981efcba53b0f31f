// Which Lua `luaflame run` runs a script on (docs/collector.md, "Every Lua"):
// `--lua V`, else the script's `#!` line when it names a Lua interpreter,
// else the Lua this program was built with (5.4 for `luaflame`). Each
// version has its own runner program beside `luaflame`
// (luaflame-lua5.1 ... luaflame-luajit: the same command line over that
// version's collector); `luaflame run` execs the one chosen.
#pragma once

#include <string>

namespace lfcli {

/// "5.1".."5.4" or "luajit" for what a user may write after --lua ("5.3",
/// "lua5.3", "53", "luajit", "jit"); "" when it names no Lua.
std::string lua_name(const std::string& v);

/// The Lua a script's first line asks for ("#!/usr/bin/lua5.1",
/// "#!/usr/bin/env luajit"), "" when it names none or a plain "lua".
std::string shebang_lua(const std::string& script);

/// The runner program of Lua `name`, beside this program; "" when absent.
std::string runner_for(const std::string& name);

/// Lua `name`'s luaflame.so (what `luaflame attach` hands a host's states
/// to), in the build tree or the installed layout; "" when absent.
std::string module_for(const std::string& name);

/// The names module_for takes: "5.1" ... "5.4", "luajit".
extern const char* const kLuaNames[];

/// The shim `luaflame attach` preloads (libluaflame-attach.so); "" when absent.
std::string attach_shim();

/// Replaces this process by the runner `path` with the same arguments
/// (argv[0] aside). Returns only on failure, with errno's text in `err`.
void exec_runner(const std::string& path, int argc, char** argv, std::string& err);

/// `luaflame run --lua list`: every Lua a runner is installed for, its
/// release and whether it is the default. Returns the exit status.
int list_luas();

/// LUAFLAME_PRINT_VM=1: the runner prints "NAME\tRELEASE" and exits (how
/// list_luas asks each runner). True when it did.
bool print_vm_if_asked();

}  // namespace lfcli
