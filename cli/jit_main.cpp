// luaflame-jit: `luaflame run` for LuaJIT. The same options and command line
// (cmd_run.cpp), the LuaJIT collector and runner behind it (collector/vm/luajit):
// the command line depends on the collector, never the other way round.
#include "commands.hpp"

int main(int argc, char** argv) {
  return lfcli::cmd_run(argc, argv);
}
