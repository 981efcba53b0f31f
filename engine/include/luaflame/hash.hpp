// FNV-1a, the one string hash of luaflame: fixed and documented, the same in
// every build and on every machine, so what is derived from it never changes
// (frame colours in the engine, the stack hashes the server stores on disk,
// the server's ETags). Not for hash tables that face hostile input.
#pragma once

#include <cstdint>
#include <string_view>

namespace lf {

/// The starting value. NOT the standard FNV-1a basis (14695981039346656037):
/// every earlier copy of this hash dropped its last digit, and the server's
/// databases hold stack hashes made with this one, so it stays.
constexpr uint64_t kFnv1aBasis = 1469598103934665603ull;

/// The 64-bit FNV-1a hash of `s` (with kFnv1aBasis); pass a previous result as `h` to hash
/// several pieces as if they were one string.
inline uint64_t fnv1a(std::string_view s, uint64_t h = kFnv1aBasis) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;  // the FNV 64-bit prime
  }
  return h;
}

}  // namespace lf
