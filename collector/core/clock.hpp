// The clocks every part reads (core/profile.cpp). Async-signal-safe:
// clock_gettime only.
#pragma once

#include <cstdint>

namespace lfc {

uint64_t now_ns();       ///< CLOCK_MONOTONIC
uint64_t unix_now_ns();  ///< CLOCK_REALTIME

}  // namespace lfc
