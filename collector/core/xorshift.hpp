// Marsaglia's xorshift32: the collector's one cheap generator, for picks
// that need no quality beyond "not the same every time" (the one-shot's
// random count, the sampler's kept positions). Loads and stores on the
// caller's state only: safe in a signal handler that owns that state.
#pragma once

#include <cstdint>

namespace lfc {

/// The next value of `s` (never 0 when `s` starts non-zero).
inline uint32_t xorshift32(uint32_t& s) noexcept {
  s ^= s << 13;
  s ^= s >> 17;
  s ^= s << 5;
  return s;
}

}  // namespace lfc
