// engine internals: hashing, finding ';', and a depth-first walk over a Tree.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#include "luaflame/tree.hpp"

namespace lf {
namespace detail {

// A fast 64-bit hash of a byte string (word at a time, murmur finaliser).
// Only for in-memory tables: never written out, so it may change.
inline uint64_t load64(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}
inline uint64_t hash_bytes(const char* p, std::size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
  if (n >= 8) {
    const char* end = p + n;
    while (p + 8 < end) {
      h = (h ^ load64(p)) * 0xFF51AFD7ED558CCDull;
      h ^= h >> 32;
      p += 8;
    }
    h ^= load64(end - 8);  // the last 8 bytes, overlapping: no byte loop
  } else {
    uint64_t w = 0;
    if (n >= 4) {
      uint32_t a, b;
      std::memcpy(&a, p, 4);
      std::memcpy(&b, p + n - 4, 4);
      w = uint64_t(a) << 32 | b;
    } else if (n > 0) {
      w = uint64_t(uint8_t(p[0])) << 16 | uint64_t(uint8_t(p[n / 2])) << 8 | uint8_t(p[n - 1]);
    }
    h ^= w;
  }
  h *= 0xC4CEB9FE1A85EC53ull;
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  return h;
}

// First ';' in [p, end), or end. Frames are short (~20 bytes), so a
// word-at-a-time scan beats a memchr call per frame.
inline const char* find_semi(const char* p, const char* end) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull;
  constexpr uint64_t kSemis = kOnes * uint64_t(';');
  while (end - p >= 8) {
    uint64_t x = load64(p) ^ kSemis;
    uint64_t hit = (x - kOnes) & ~x & kHighs;
    if (hit) return p + (__builtin_ctzll(hit) >> 3);  // little-endian: lowest byte first
    p += 8;
  }
#endif
  while (p < end && *p != ';') ++p;
  return p;
}

inline uint64_t hash_pair(uint32_t a, uint32_t b) {
  uint64_t h = (uint64_t(a) << 32 | b) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return h;
}

// Depth-first walk from the root in child-list order. enter(i) returns
// whether to descend into i's children; leave(i) runs after them (also for
// nodes not descended into).
template <class Enter, class Leave>
void walk(const Tree& t, Enter&& enter, Leave&& leave) {
  uint32_t i = Tree::kRoot;
  for (;;) {
    uint32_t c = enter(i) ? t.first_child(i) : Tree::kNone;
    if (c != Tree::kNone) {
      i = c;
      continue;
    }
    for (;;) {
      leave(i);
      if (i == Tree::kRoot) return;
      uint32_t s = t.next_sibling(i);
      if (s != Tree::kNone) {
        i = s;
        break;
      }
      i = t.parent_of(i);
    }
  }
}

}  // namespace detail
}  // namespace lf
