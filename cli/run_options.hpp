// The collector's options on a command line (`luaflame run`, `luaflame
// attach`): every option of collector/include/luaflame/collector.hpp as
// --NAME VALUE or --NAME=VALUE (--flush-interval for --flush_interval),
// --tag K=V, applied over LUAFLAME_* from the environment.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "luaflame/collector.hpp"

namespace lfcli {

struct RunArgs {
  std::map<std::string, std::string> values;  // option -> value as given
  std::map<std::string, bool> flags;          // flag option -> value
  std::vector<std::string> tag;               // --tag K=V, repeatable
};

/// Adds every collector option and --tag to `app`; what follows the first
/// word that is not an option (the script, the program) is left unparsed.
void add_run_options(CLI::App& app, RunArgs& r);

/// Applies what the command line gave over `o` (the environment's options);
/// notes whether it named the output and the run.
bool apply_args(const CLI::App& app, RunArgs& r, lfc::Options& o, bool& output_given,
                bool& name_given, std::string& err);

}  // namespace lfcli
