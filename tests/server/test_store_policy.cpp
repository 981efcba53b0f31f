// The store policy both stores follow, as pure functions over resolutions and
// horizons (store/batch.hpp): which buckets a timeline reads and a retention
// pass drops. The stores' own tests (test_store.cpp, on SQLite and
// PostgreSQL) check what they read back and keep.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "store/batch.hpp"

namespace {

constexpr int64_t kS = 1000000000;
constexpr int64_t kH = 3600 * kS;
constexpr int64_t kNone = std::numeric_limits<int64_t>::max();

// 10 s, 1 min, 10 min, 1 h buckets (the server's default widths).
const std::vector<lfs::Resolution> kRes = {{10 * kS, 0}, {60 * kS, 0}, {600 * kS, 0}, {kH, 0}};

struct Case {
  const char* what;
  int64_t from, until, step;
  std::vector<int64_t> horizon;
  std::vector<lfs::Piece> want;
};

const Case kCases[] = {
    {"a streamed run, every level whole: the finest level no wider than the step",
     0,
     kH,
     60 * kS,
     {0, 0, 0, 0},
     {{1, 0, kH}}},
    {"a step below the finest width reads the finest", 0, kH, kS, {0, 0, 0, 0}, {{0, 0, kH}}},
    {"10 s buckets trimmed before 5 h: 1 min ones before that",
     4 * kH,
     6 * kH,
     10 * kS,
     {5 * kH, 0, 0, 0},
     {{0, 5 * kH, 6 * kH}, {1, 4 * kH, 5 * kH}}},
    {"a trimmed horizon inside a coarser bucket: the coarser level ends at its bucket start",
     0,
     2 * kH,
     10 * kS,
     {kH + 90 * kS, 0, 0, 0},
     {{0, kH + 90 * kS, 2 * kH}, {1, 0, kH + 60 * kS}}},
    {"an upload keeps its finest bucket only: read there at any step",
     0,
     2 * kH,
     600 * kS,
     {kH, kNone, kNone, kNone},
     {{0, kH, 2 * kH}}},
    {"a range after everything the levels hold reads the finest level's part only",
     5 * kH,
     6 * kH,
     60 * kS,
     {0, 0, 0, 0},
     {{1, 5 * kH, 6 * kH}}},
    {"no buckets at all: nothing to read", 0, kH, 60 * kS, {kNone, kNone, kNone, kNone}, {}},
    {"an empty range: nothing to read", kH, kH, 60 * kS, {0, 0, 0, 0}, {}},
};

}  // namespace

TEST_CASE("timeline_pieces: which buckets a timeline reads, newest first") {
  for (const Case& c : kCases) {
    CAPTURE(c.what);
    const std::vector<lfs::Piece> got =
        lfs::timeline_pieces(c.from, c.until, c.step, kRes, c.horizon);
    REQUIRE(got.size() == c.want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      CAPTURE(i);
      CHECK(got[i].level == c.want[i].level);
      CHECK(got[i].lo == c.want[i].lo);
      CHECK(got[i].hi == c.want[i].hi);
    }
  }
}

TEST_CASE("trim_steps: what a retention pass drops per resolution") {
  const int64_t now = 100 * kH;
  // 10 s kept 6 h, 1 min kept forever, 10 min kept 2 days, 1 h kept 30 days (the coarsest).
  const std::vector<lfs::Resolution> res = {
      {10 * kS, 6 * kH}, {60 * kS, 0}, {600 * kS, 48 * kH}, {kH, 720 * kH}};
  const std::vector<lfs::TrimStep> got = lfs::trim_steps(res, now);
  REQUIRE(got.size() == 3);  // none for the level kept forever
  // A bucket goes once it ended more than its keep ago: it started before now - keep - width.
  CHECK(got[0].width_ns == 10 * kS);
  CHECK(got[0].cutoff == now - 6 * kH - 10 * kS);
  CHECK_FALSE(got[0].coarsest);
  CHECK(got[1].width_ns == 600 * kS);
  CHECK(got[1].cutoff == now - 48 * kH - 600 * kS);
  CHECK_FALSE(got[1].coarsest);
  CHECK(got[2].width_ns == kH);
  CHECK(got[2].cutoff == now - 720 * kH - kH);
  CHECK(got[2].coarsest);                     // its buckets also leave the merged tree
  CHECK(lfs::trim_steps(kRes, now).empty());  // every level kept forever
}
