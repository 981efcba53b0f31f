// A minimal protobuf wire-format writer for hand-made pprof profiles in the
// tests (independent of the engine's generated code, so a test checks the
// reader against bytes it did not write itself).
#pragma once

#include <cstdint>
#include <string>

namespace lft {

inline void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>(v | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
inline void field_varint(std::string& out, int field, uint64_t v) {
  varint(out, uint64_t(field) << 3);
  varint(out, v);
}
inline void field_bytes(std::string& out, int field, const std::string& b) {
  varint(out, uint64_t(field) << 3 | 2);
  varint(out, b.size());
  out += b;
}

}  // namespace lft
