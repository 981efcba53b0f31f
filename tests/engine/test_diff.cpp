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
    golden::check_svg(base + ".svg", svg);
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

TEST_CASE("compare_shares: self shares, sorted by change, the threshold gate") {
  // base: slow is 10% of 100; head: slow is 50% of 10 (counts differ, shares compare)
  lf::Tree base = tree_of("main;fast 90\nmain;slow 10\n"),
           head = tree_of("main;fast 5\nmain;slow 5\n");
  lf::Comparison none = lf::compare_shares(base, head);
  CHECK_FALSE(none.failed);
  REQUIRE(none.rows.size() == 3);      // fast, slow, and main (self 0 in both)
  CHECK(none.rows[0].name == "fast");  // |-40| ties |+40|: by name
  CHECK(none.rows[0].delta() == doctest::Approx(-40));
  CHECK(none.rows[1].name == "slow");
  CHECK(none.rows[1].delta() == doctest::Approx(40));
  CHECK(none.rows[1].base_total == doctest::Approx(10));
  CHECK(none.rows[2].head_total == doctest::Approx(100));
  const struct {
    double threshold;
    bool failed;
  } gates[] = {{39.9, true}, {40, false}, {0, true}, {100, false}};
  for (const auto& g : gates) {
    CAPTURE(g.threshold);
    lf::Comparison c = lf::compare_shares(base, head, g.threshold);
    CHECK(c.failed == g.failed);
    CHECK(c.worst == (g.failed ? "slow" : ""));
  }
}

TEST_CASE("comparison_markdown: tables, escaping, verdict") {
  lf::Tree base = tree_of("a|b 1\nc 3\n"), head = tree_of("a|b 3\nc 1\n");
  std::string md = lf::comparison_markdown(lf::compare_shares(base, head, 10), "T", 10);
  CHECK(md.rfind("### T\n\n**Regressions**\n\n", 0) == 0);
  CHECK(md.find("| a\\|b | 25.00 | 75.00 | +50.00 |\n") != std::string::npos);
  CHECK(md.find("| c | 75.00 | 25.00 | -50.00 |\n") != std::string::npos);
  CHECK(md.find("**FAILED**: a\\|b grew by more than 10.00 points\n") != std::string::npos);
  std::string pass = lf::comparison_markdown(lf::compare_shares(base, base, 1), "T", 10);
  CHECK(pass.find("**Regressions**\n\nnone\n") != std::string::npos);
  CHECK(pass.find("Passed: no function grew by more than 1.00 points\n") != std::string::npos);
  CHECK(lf::comparison_markdown(lf::compare_shares(base, head), "T", 0).find("Passed") ==
        std::string::npos);
}

TEST_CASE("parse_threshold: points from 0 to 100, an optional %") {
  const struct {
    const char* text;
    bool ok;
    double value;
  } cases[] = {{"5", true, 5},     {"5%", true, 5},  {"0.5", true, 0.5}, {"0", true, 0},
               {"100", true, 100}, {"", false, 0},   {"%", false, 0},    {"-1", false, 0},
               {"101", false, 0},  {"5x", false, 0}, {" 5", false, 0},   {"nan", false, 0},
               {"5%%", false, 0}};
  for (const auto& c : cases) {
    CAPTURE(c.text);
    double v = -7;
    CHECK(lf::parse_threshold(c.text, v) == c.ok);
    CHECK(v == (c.ok ? c.value : -7));
  }
}
