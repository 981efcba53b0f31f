// luaflame: the command-line front. Dispatches to a subcommand, which parses
// its own options with CLI11 (args.hpp); bad usage exits 2 everywhere.
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.hpp"

namespace {

struct Command {
  const char* name;
  int (*fn)(int, char**);
  const char* help;
};

const Command kCommands[] = {
    {"run", lfcli::cmd_run, "run a Lua script under the profiler"},
    {"attach", lfcli::cmd_attach, "profile the Lua inside a program that embeds it, unmodified"},
    {"svg", lfcli::cmd_svg, "render folded stacks as an SVG flame graph (flamegraph.pl drop-in)"},
    {"diff", lfcli::cmd_diff, "render a differential flame graph of two folded files"},
    {"push", lfcli::cmd_push, "upload a folded profile to a luaflame server"},
    {"compare", lfcli::cmd_compare, "compare two runs on a server; fail past a threshold"},
};

void usage(FILE* to) {
  std::fprintf(to, "usage: luaflame COMMAND [options]\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(to, "  %-8s %s\n", c.name, c.help);
  std::fprintf(to, "\n'luaflame COMMAND --help' describes a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(stdout);
    return 0;
  }
  for (const Command& c : kCommands)
    if (!std::strcmp(argv[1], c.name)) return c.fn(argc - 1, argv + 1);
  std::fprintf(stderr, "luaflame: unknown command '%s'\n(luaflame --help describes the commands)\n",
               argv[1]);
  return 2;
}
