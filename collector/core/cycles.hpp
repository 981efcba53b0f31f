// The tracer's cycle counter, per architecture: x86's TSC (rdtsc), arm64's
// virtual counter (cntvct_el0, constant rate by the architecture), else
// none (TraceClock then reads CLOCK_MONOTONIC). One place for the
// architecture guards; nothing else includes <x86intrin.h>.
#pragma once

#include <cstdint>

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

}  // namespace lfc
