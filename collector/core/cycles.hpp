// The tracers' cycle counter, per architecture: x86's TSC (rdtsc), arm64's
// virtual counter (cntvct_el0, constant rate by the architecture), else
// none (TraceClock then reads CLOCK_MONOTONIC). One place for the
// architecture guards; nothing else includes <x86intrin.h>.
#pragma once

#include <cstdint>

#include "core/clock.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace lfc {

#if defined(__x86_64__) || defined(__i386__)
constexpr bool kHaveCycles = true;
inline uint64_t read_cycles() {
  return __rdtsc();
}
#elif defined(__aarch64__)
constexpr bool kHaveCycles = true;
inline uint64_t read_cycles() {
  uint64_t v;
  asm volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
}
#else
constexpr bool kHaveCycles = false;
inline uint64_t read_cycles() {
  return 0;
}
#endif

/// Whether read_cycles() ticks at a constant rate that never stops (x86:
/// the CPU says constant_tsc and nonstop_tsc; arm64: always).
bool cycles_constant();

/// A tracer's clock: the cycle counter scaled to nanoseconds when it is
/// constant and non-stop (calibrated against CLOCK_MONOTONIC at init),
/// else CLOCK_MONOTONIC itself. One read per hook event.
struct TraceClock {
  bool tsc = false;
  uint64_t mult = 0;  ///< nanoseconds per tick, times 2^32
  /// Calibrates (about 2 ms).
  void init();
  uint64_t now() const { return tsc ? read_cycles() : now_ns(); }
  uint64_t to_ns(uint64_t ticks) const { return tsc ? tsc_to_ns(ticks) : ticks; }
  /// to_ns when `tsc` is known.
  uint64_t tsc_to_ns(uint64_t ticks) const {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(ticks) * mult) >> 32);
  }
};

}  // namespace lfc
