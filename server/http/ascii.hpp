// ASCII text helpers of the HTTP edge (framing.cpp, client_addr.cpp): header
// names compare case-insensitively, values lose their optional white space.
#pragma once

#include <cctype>
#include <string_view>

namespace lfs {

/// RFC 9110's OWS: a space or a tab.
inline bool ows(char c) {
  return c == ' ' || c == '\t';
}

/// `v` without OWS at either end.
inline std::string_view trim_ows(std::string_view v) {
  while (!v.empty() && ows(v.front())) v.remove_prefix(1);
  while (!v.empty() && ows(v.back())) v.remove_suffix(1);
  return v;
}

/// Equal but for ASCII case (header names).
inline bool ascii_iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

}  // namespace lfs
