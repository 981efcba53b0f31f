// Argument parsing of every `luaflame` subcommand, through CLI11 (Debian's
// libcli11-dev): one place that decides what --help prints and which exit
// status bad usage gets, so every subcommand behaves alike.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace lfcli {

/// Exit statuses shared by every subcommand. A subcommand may add its own
/// (1 for a regression past a threshold, 3 for `svg --strict`).
constexpr int kExitOk = 0;
constexpr int kExitUsage = 2;  ///< bad usage, always; the subcommand's other errors may share it

/// The house defaults for a subcommand's CLI11 app (named "luaflame SUB"):
/// a repeated option keeps its last value, as flamegraph.pl's Getopt does.
void house_style(CLI::App& app);

/// Parses argv (argv[0] is the subcommand's name). Returns -1 to go on;
/// otherwise the status to exit with: 0 after printing --help, kExitUsage
/// after saying what is wrong.
int parse_args(CLI::App& app, int argc, char** argv);

/// Bad usage found after parsing (a missing option, an unknown palette):
/// says so like a parse error and returns kExitUsage.
int usage_error(const CLI::App& app, const std::string& message);

/// A failure that is not about the arguments: the message alone; returns `status`.
int fail(const CLI::App& app, const std::string& message, int status);

}  // namespace lfcli
