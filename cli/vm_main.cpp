// The runner of one Lua version (luaflame-lua5.1 ... luaflame-luajit):
// `luaflame run` over that version's collector (collector/vm/puc built for
// it, or collector/vm/luajit). `luaflame run --lua V` execs it with its own
// arguments (lua_choice.hpp); its command line is cmd_run's, and it runs
// the script on its own Lua unless --lua names another (a #! line does not
// move it). The command line depends on the collector, never the other way round.
#include "commands.hpp"

int main(int argc, char** argv) {
  return lfcli::run_here(argc, argv);
}
