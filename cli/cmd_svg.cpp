// Placeholder: replaced by the real subcommand.
#include <cstdio>
#include "commands.hpp"
namespace lfcli {
int cmd_svg(int, char**) { std::fprintf(stderr, "luaflame svg: not built yet\n"); return 2; }
int cmd_diff(int, char**) { std::fprintf(stderr, "luaflame diff: not built yet\n"); return 2; }
}
