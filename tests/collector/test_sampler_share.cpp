// How a hook's owed periods are charged to the positions the signal handler
// kept (collector/vm/puc/sampler.hpp: Sampler::share). Cases as data:
// weights kept, periods owed, periods each position gets.
#include <doctest/doctest.h>

#include <vector>

#include "vm/puc/sampler.hpp"

namespace {

struct Case {
  const char* what;
  std::vector<uint32_t> weights;
  uint64_t owed;
  std::vector<uint64_t> want;
};

const Case kCases[] = {
    {"every period kept: each its own", {1, 2, 1}, 4, {1, 2, 1}},
    // The wait of a collection: 16 kept of 400, 12 in finalizers, 4 in the
    // collector's own work. Before, the last took all that was not kept.
    {"a full buffer's rest in proportion",
     {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
     400,
     {25, 25, 25, 25, 25, 25, 25, 25, 25, 25, 25, 25, 25, 25, 25, 25}},
    {"rounding left to the last", {1, 1, 1}, 10, {3, 3, 4}},
    {"heavier positions take more of the rest", {3, 1}, 8, {6, 2}},
    {"a slot whose copy failed (weight 0) takes none but rounding", {2, 0, 2}, 8, {4, 0, 4}},
    {"no weight kept: the last takes all", {0, 0}, 5, {0, 5}},
    {"more kept than owed (weights cut): none past the owed", {5, 5}, 6, {5, 1}},
    {"nothing kept", {}, 7, {}},
};

}  // namespace

TEST_CASE("sampler: owed periods are shared by the kept positions in proportion") {
  for (const Case& c : kCases) {
    CAPTURE(c.what);
    std::vector<lfc::Sampler::Pos> pos(c.weights.size());
    for (std::size_t i = 0; i < pos.size(); ++i) pos[i].weight = c.weights[i];
    std::vector<uint64_t> got(pos.size());
    lfc::Sampler::share(pos.data(), static_cast<int>(pos.size()), c.owed, got.data());
    CHECK(got == c.want);
    uint64_t sum = 0;
    for (uint64_t k : got) sum += k;
    if (!pos.empty()) CHECK(sum == c.owed);
  }
}
