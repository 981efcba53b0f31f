// Stage 3: differential trees (engine/include/luaflame/diff.hpp).
#include "luaflame/diff.hpp"

#include <string>

#include "golden.hpp"
#include "luaflame/svg.hpp"

namespace {

using golden::folded_of;
using golden::tree_of;


}  // namespace

TEST_CASE("data: tests/data/diff/<case>.before.folded + .after.folded") {
  for (const auto& in : golden::cases("diff", ".before.folded")) {
    CAPTURE(in.string());
    std::string base = in.string().substr(0, in.string().size() - 14);
    lf::Tree before = tree_of(golden::read(in));
    lf::Tree after = tree_of(golden::read(base + ".after.folded"));
    lf::DiffOptions abs, norm;
    norm.normalize = true;
    lf::Tree d = lf::diff_trees(before, after, abs);
    lf::Tree n = lf::diff_trees(before, after, norm);
    golden::check(base + ".txt", folded_of(d));
    golden::check(base + ".normalized.txt", folded_of(n));
    std::string svg;
    lf::render_svg(d, lf::SvgOptions{}, svg);
    golden::check(base + ".svg", svg);
  }
}

TEST_CASE("absolute diff: both columns, frames present on one side only") {
  lf::Tree d = lf::diff_trees(tree_of("a;b 10\na;c 5\n"), tree_of("a;b 4\na;d 7\n"), {});
  REQUIRE(d.differential());
  CHECK(folded_of(d) == "a;b 10 4\na;c 5 0\na;d 0 7\n");
  CHECK(d.total(0) == 15);
  CHECK(d.total(1) == 11);
  CHECK(d.node(d.find("a")).total[1] == 11);
}

TEST_CASE("normalized diff scales before to the after total (difffolded.pl -n)") {
  lf::DiffOptions o;
  o.normalize = true;
  lf::Tree d = lf::diff_trees(tree_of("a 10\nb 30\n"), tree_of("a 40\nb 40\n"), o);
  CHECK(d.total(0) == doctest::Approx(80));
  CHECK(d.node(d.find("a")).self[0] == doctest::Approx(20));
  CHECK(d.node(d.find("b")).self[0] == doctest::Approx(60));
  CHECK(folded_of(d) == "a 20 40\nb 60 40\n");
}

// flamegraph.pl compat: luaflame kept fractions where difffolded.pl -n takes
// int($count * $total2 / $total1), so small frames changed sign.
TEST_CASE("regression: normalized counts round down per stack, as difffolded.pl -n") {
  lf::DiffOptions o;
  o.normalize = true;
  // totals 3 and 7: a 1 -> int(7/3) = 2, b 2 -> int(14/3) = 4.
  lf::Tree d = lf::diff_trees(tree_of("m;a 1\nm;b 2\n"), tree_of("m;a 2\nm;b 5\n"), o);
  CHECK(folded_of(d) == "m;a 2 2\nm;b 4 5\n");
  // Equal totals: nothing is scaled (difffolded.pl skips the division).
  lf::Tree e = lf::diff_trees(tree_of("a 1.5\nb 2.5\n"), tree_of("a 2\nb 2\n"), o);
  CHECK(folded_of(e) == "a 1.5 2\nb 2.5 2\n");
}

TEST_CASE("normalizing an empty side does not divide by zero") {
  lf::DiffOptions o;
  o.normalize = true;
  lf::Tree empty;
  empty.finalize();
  lf::Tree d = lf::diff_trees(empty, tree_of("a 3\n"), o);
  CHECK(d.total(0) == 0);
  CHECK(d.total(1) == 3);
}
