// The cycle counter's checks and the tracers' clock (cycles.hpp).
#include "core/cycles.hpp"

#include <cstdio>
#include <cstring>

namespace lfc {

namespace {

[[maybe_unused]] bool cpu_has(const char* flag) {
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (!f) return false;
  char line[4096];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f))
    if (!std::strncmp(line, "flags", 5)) found = std::strstr(line, flag) != nullptr;
  std::fclose(f);
  return found;
}

}  // namespace

bool cycles_constant() {
#if defined(__x86_64__) || defined(__i386__)
  return cpu_has(" constant_tsc") && cpu_has(" nonstop_tsc");
#else
  return kHaveCycles;
#endif
}

void TraceClock::init() {
  tsc = cycles_constant();
  if (!tsc) return;
  // Ticks per nanosecond over ~2 ms of CLOCK_MONOTONIC.
  uint64_t n0 = now_ns(), t0 = read_cycles(), n1, t1;
  do {
    n1 = now_ns();
    t1 = read_cycles();
  } while (n1 - n0 < 2000000);
  if (t1 <= t0) {
    tsc = false;
    return;
  }
  mult = static_cast<uint64_t>((static_cast<double>(n1 - n0) / static_cast<double>(t1 - t0)) *
                               4294967296.0);
}

}  // namespace lfc
