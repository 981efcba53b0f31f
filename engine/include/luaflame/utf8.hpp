// luaflame engine: UTF-8 validation, shared by strict parsing (folded.cpp),
// the renderer's text sanitizer (svg_text.hpp) and the collector's frame names
// (collector/core/text.cpp): one definition of which bytes are valid text.
#pragma once

#include <cstddef>

namespace lf {

// Length of the valid UTF-8 sequence at s[i] within s[0..n), or 0 when
// invalid (overlong forms, surrogates, code points past U+10FFFF, a
// sequence cut by n).
inline std::size_t utf8_len(const unsigned char* s, std::size_t n, std::size_t i) {
  unsigned char c = s[i];
  if (c < 0x80) return 1;
  std::size_t len;
  unsigned lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF)
    len = 2;
  else if (c == 0xE0) {
    len = 3;
    lo = 0xA0;
  } else if (c >= 0xE1 && c <= 0xEC)
    len = 3;
  else if (c == 0xED) {
    len = 3;
    hi = 0x9F;
  } else if (c >= 0xEE && c <= 0xEF)
    len = 3;
  else if (c == 0xF0) {
    len = 4;
    lo = 0x90;
  } else if (c >= 0xF1 && c <= 0xF3)
    len = 4;
  else if (c == 0xF4) {
    len = 4;
    hi = 0x8F;
  } else
    return 0;
  if (i + len > n) return 0;
  if (s[i + 1] < lo || s[i + 1] > hi) return 0;
  for (std::size_t k = 2; k < len; ++k)
    if (s[i + k] < 0x80 || s[i + k] > 0xBF) return 0;
  return len;
}

}  // namespace lf
