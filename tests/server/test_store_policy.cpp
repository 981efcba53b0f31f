// The store policy both stores follow, as pure functions over resolutions and
// horizons (store/batch.hpp): which buckets a timeline reads and a retention
// pass drops. The stores' own tests (test_store.cpp, on SQLite and
// PostgreSQL) check what they read back and keep.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <vector>

#include "store/batch.hpp"
#include "store/store.hpp"

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

namespace {

// retain_runs over a store of runs in memory: id -> (finished, ended at, bytes).
struct Run {
  bool finished;
  int64_t ended_ns;
  uint64_t bytes;
};
struct MemSteps final : lfs::RetainSteps {
  std::map<int64_t, Run> runs;
  bool refuse_deletes = false;  // another server deleted them first
  int trims = 0;
  std::vector<int64_t> finished_before(int64_t ns) override {
    std::vector<int64_t> out;
    for (const auto& [id, r] : runs)
      if (r.finished && r.ended_ns < ns) out.push_back(id);
    return out;
  }
  std::vector<int64_t> finished_beyond(int64_t keep) override {
    std::vector<int64_t> out;
    int64_t newer = 0;
    for (auto it = runs.rbegin(); it != runs.rend(); ++it)
      if (++newer > keep && it->second.finished) out.insert(out.begin(), it->first);
    return out;
  }
  std::optional<int64_t> oldest_finished() override {
    for (const auto& [id, r] : runs)
      if (r.finished) return id;
    return std::nullopt;
  }
  bool delete_run(int64_t id) override { return !refuse_deletes && runs.erase(id) > 0; }
  int64_t trim(const lfs::RetainOptions&, std::vector<int64_t>& touched) override {
    ++trims;
    touched.insert(touched.end(), {7, 3, 7});
    return 4;
  }
  uint64_t stored_bytes() override {
    uint64_t b = 0;
    for (const auto& kv : runs) b += kv.second.bytes;
    return b;
  }
};

lfs::RetainOptions opts(int64_t older, int64_t keep, uint64_t budget, bool trim = false) {
  lfs::RetainOptions o;
  o.older_than_ns = older;
  o.keep_runs = keep;
  o.budget_bytes = budget;
  o.trim = trim;
  return o;
}

// Runs 1-6, 100 bytes each; 2 and 5 are live; run i ended at i s.
MemSteps six() {
  MemSteps m;
  for (int64_t id = 1; id <= 6; ++id) m.runs[id] = {id != 2 && id != 5, id * kS, 100};
  return m;
}

}  // namespace

TEST_CASE("retain_runs: the retention policy both stores run, over their steps") {
  SUBCASE("ended before a time, or beyond the newest N: finished runs only, each once, in order") {
    MemSteps m = six();
    const lfs::RetainResult r = retain_runs(m, opts(4 * kS, 3, 0));  // 1, 3 ended before 4 s
    CHECK(r.deleted == std::vector<int64_t>{1, 3});                  // beyond 4-6: 1, 3 (2 live)
    CHECK(m.runs.count(2) == 1);
    CHECK(m.trims == 0);
  }
  SUBCASE("a budget deletes the oldest finished runs until the store fits, never a live one") {
    MemSteps m = six();
    CHECK(retain_runs(m, opts(0, 0, 350)).deleted == std::vector<int64_t>{1, 3, 4});
    CHECK(m.stored_bytes() == 300);
    MemSteps live = six();
    CHECK(retain_runs(live, opts(0, 0, 50)).deleted == std::vector<int64_t>{1, 3, 4, 6});
    CHECK(live.stored_bytes() == 200);  // runs 2 and 5 are live: above the budget, kept
  }
  SUBCASE("a delete that finds its run gone ends the budget pass (no loop on it)") {
    MemSteps m = six();
    m.refuse_deletes = true;
    CHECK(retain_runs(m, opts(0, 0, 50)).deleted.empty());
  }
  SUBCASE("trim: the runs it touched, sorted without repeats, and its bucket count") {
    MemSteps m = six();
    const lfs::RetainResult r = retain_runs(m, opts(0, 0, 0, true));
    CHECK(m.trims == 1);
    CHECK(r.buckets_trimmed == 4);
    CHECK(r.trimmed == std::vector<int64_t>{3, 7});
    CHECK(r.deleted.empty());
  }
}
