#include "args.hpp"

#include <cstdio>
#include <iostream>

namespace lfcli {

void house_style(CLI::App& app) {
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.get_formatter()->column_width(24);
}

int parse_args(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    return usage_error(app, e.what());
  }
  return -1;
}

int usage_error(const CLI::App& app, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n(%s --help describes the options)\n", app.get_name().c_str(),
               message.c_str(), app.get_name().c_str());
  return kExitUsage;
}

int fail(const CLI::App& app, const std::string& message, int status) {
  std::fprintf(stderr, "%s: %s\n", app.get_name().c_str(), message.c_str());
  return status;
}

}  // namespace lfcli
