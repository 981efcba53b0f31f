// Placeholder: replaced by the real subcommand.
#include <cstdio>
#include "commands.hpp"
namespace lfcli {
int cmd_push(int, char**) { std::fprintf(stderr, "luaflame push: not built yet\n"); return 2; }
int cmd_compare(int, char**) { std::fprintf(stderr, "luaflame compare: not built yet\n"); return 2; }
}
