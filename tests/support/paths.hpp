// Where the tests find their inputs and the server binary they start: from
// the environment CTest gives every test (tests/CMakeLists.txt), not from
// compile definitions, so that no object holds the clone's absolute path and
// ccache serves the objects to a clone of the same sources in another folder.
// A compile definition of the same name still counts where there is no
// variable (the arm64 job's hand-made build defines LUAFLAME_TEST_DATA).
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace lft {

inline std::string test_path(const char* var, const char* compiled) {
  if (const char* v = std::getenv(var); v && *v) return v;
  if (compiled && *compiled) return compiled;
  throw std::runtime_error(std::string(var) +
                           " is not set: run the tests with ctest, which sets it");
}

#ifdef LUAFLAME_TEST_DATA
inline std::string test_data_dir() {
  return test_path("LUAFLAME_TEST_DATA", LUAFLAME_TEST_DATA);
}
#else
inline std::string test_data_dir() {
  return test_path("LUAFLAME_TEST_DATA", nullptr);
}
#endif

#ifdef LUAFLAME_SERVER_BIN
inline std::string server_bin() {
  return test_path("LUAFLAME_SERVER_BIN", LUAFLAME_SERVER_BIN);
}
#else
inline std::string server_bin() {
  return test_path("LUAFLAME_SERVER_BIN", nullptr);
}
#endif

}  // namespace lft
