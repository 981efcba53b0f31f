// Placeholder: replaced by the real subcommand.
#include <cstdio>
#include "commands.hpp"
namespace lfcli {
int cmd_run(int, char**) { std::fprintf(stderr, "luaflame run: not built yet\n"); return 2; }
}
