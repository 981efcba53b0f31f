// RefusalLog (server/http/refusal_log.hpp): the first refusal of a quiet spell in
// full, the rest summed per client and reason, one line per interval.
#include <doctest/doctest.h>

#include "http/refusal_log.hpp"

namespace {
constexpr int64_t kSec = 1'000'000'000;
}

TEST_CASE("refusal log: one full line, then one summary per interval, then quiet again") {
  lfs::RefusalLog log(10 * kSec);
  const std::string first = log.refused("10.0.0.1", "too many", 1 * kSec);
  CHECK(first == "10.0.0.1: too many (more refusals within 10 s: one summary line)");
  for (int i = 0; i < 1000; ++i)
    CHECK(log.refused(i % 3 ? "10.0.0.1" : "10.0.0.2", "too many", 2 * kSec) == "");
  CHECK(log.tick(5 * kSec) == "");  // not yet an interval since the line
  CHECK(log.tick(11 * kSec) ==
        "1000 more refusals in 10 s: 666 10.0.0.1 (too many), 334 10.0.0.2 (too many)");
  CHECK(log.refused("10.0.0.3", "slow", 12 * kSec) == "");  // counted for the next line
  CHECK(log.tick(21 * kSec) == "1 more refusals in 10 s: 1 10.0.0.3 (slow)");
  CHECK(log.tick(31 * kSec) == "");  // an interval with none: quiet again
  CHECK(log.refused("10.0.0.4", "slow", 32 * kSec) ==
        "10.0.0.4: slow (more refusals within 10 s: one summary line)");
}

TEST_CASE("refusal log: a summary names the five largest and counts the rest") {
  lfs::RefusalLog log(kSec);
  log.refused("a", "r", 0);
  for (int p = 0; p < 8; ++p)
    for (int i = 0; i <= p; ++i) log.refused("p" + std::to_string(p), "r", 1);
  const std::string s = log.tick(kSec);
  CHECK(s.rfind("36 more refusals in 1 s: 8 p7 (r), 7 p6 (r), 6 p5 (r), 5 p4 (r), 4 p3 (r)", 0) ==
        0);
  CHECK(s.find("and 3 more kinds") != std::string::npos);
}
