// engine internals shared by the pprof reader (pprof_read.cpp) and writer
// (pprof.cpp): the error prefix and the gzip magic.
#pragma once

#include <string>
#include <string_view>

namespace lf {
namespace detail {

/// Sets `error` to "pprof: " + why and returns false.
inline bool pprof_fail(std::string& error, std::string why) {
  error = "pprof: " + std::move(why);
  return false;
}

inline bool is_gzip(std::string_view s) {
  return s.size() >= 2 && static_cast<unsigned char>(s[0]) == 0x1f &&
         static_cast<unsigned char>(s[1]) == 0x8b;
}

}  // namespace detail
}  // namespace lf
