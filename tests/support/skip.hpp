// A doctest case that cannot run on this machine (a tool or package is
// missing) ends its process with exit status 77, which CTest reports as
// skipped (SKIP_RETURN_CODE 77, set by luaflame_add_unit_test): never as a
// pass that checked nothing. ctest runs each case in a process of its own, so
// only that case ends. With CI=true scripts/test.sh fails on any skip.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace lft {

[[noreturn]] inline void skip_case(const std::string& why) {
  std::fprintf(stderr, "SKIPPED: %s\n", why.c_str());
  std::fflush(nullptr);
  std::_Exit(77);
}

}  // namespace lft
