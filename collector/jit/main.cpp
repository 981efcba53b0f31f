// luaflame-jit: `luaflame run` for LuaJIT. The same options and command line
// (cli/cmd_run.cpp), the LuaJIT collector and runner behind it.
#include "../../cli/commands.hpp"

int main(int argc, char** argv) {
  return lfcli::cmd_run(argc, argv);
}
