// Stage 1: parsing folded stacks (engine/include/luaflame/folded.hpp).
#include "luaflame/folded.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "golden.hpp"

namespace {

struct Parsed {
  lf::ParseResult result;
  std::vector<lf::FoldedLine> lines;
  std::vector<std::string> stacks;  // copies: the views die with the input
};

Parsed parse(const std::string& text, lf::ParseOptions o) {
  Parsed p;
  p.result = lf::parse_folded(text, o, [&](const lf::FoldedLine& l) {
    p.lines.push_back(l);
    p.stacks.emplace_back(l.stack);
  });
  return p;
}

lf::ParseOptions strict() {
  lf::ParseOptions o;
  o.strict = true;
  return o;
}

// The dump the data-driven cases compare against.
std::string dump(const Parsed& p) {
  std::string out;
  for (std::size_t i = 0; i < p.lines.size(); ++i) {
    const lf::FoldedLine& l = p.lines[i];
    out += "line " + std::to_string(l.line) + ": ";
    lf::append_count(out, l.value);
    if (l.differential) {
      out += " -> ";
      lf::append_count(out, l.value2);
    }
    out += " [" + p.stacks[i] + "]\n";
  }
  for (const lf::ParseError& e : p.result.errors)
    out += "error " + std::to_string(e.line) + ": " + e.reason + "\n";
  out += "lines " + std::to_string(p.result.lines) + ", accepted " +
         std::to_string(p.result.accepted) + ", rejected " + std::to_string(p.result.rejected) +
         (p.result.differential ? ", differential" : "") + "\n";
  return out;
}

}  // namespace

TEST_CASE("data: tests/data/parse/*.folded, strict and lenient") {
  for (const auto& in : golden::cases("parse", ".folded")) {
    CAPTURE(in.string());
    std::string text = golden::read(in);
    std::string base = in.string().substr(0, in.string().size() - 7);
    golden::check(base + ".strict.txt", dump(parse(text, strict())));
    golden::check(base + ".lenient.txt", dump(parse(text, lf::ParseOptions{})));
  }
}

TEST_CASE("every kind of bad line is reported with its number and reason") {
  struct Case {
    std::string line;
    std::string reason;  // start of the expected reason
  };
  std::vector<Case> cases = {
      {"a;b", "no count"},
      {"a;b x", "no count"},
      {"17", "no count"},
      {"a;b 1e5", "no count"},
      {"a;b -3", "negative count"},
      {"a;b -0.5", "negative count"},
      {"a;b inf", "non-finite count"},
      {"a;b NaN", "non-finite count"},
      {"a;b -Infinity", "non-finite count"},
      {"a;b " + std::string(400, '9'), "non-finite count"},
      // Refused only with blank_frames = false (flamegraph.pl draws them).
      {" 5", "empty stack"},
      {"\t5", "empty stack"},
      {"a;;b 5", "empty frame (frame 2)"},
      {";a 5", "empty frame (frame 1)"},
      {"a; 5", "empty frame (frame 2)"},
      {"write0;  5", "blank frame (frame 2)"},
      {"a; ;b 5", "blank frame (frame 2)"},
      {"a;" + std::string(5000, 'x') + " 1", "frame too long"},
      {"a;b\x01;c 1", "control character"},
      {"a;b\x7f 1", "control character"},
      {"a;b\xc2\x85 1", "control character"},
      {"a;\xff;c 1", "invalid UTF-8"},
      {"a;\xc0\xaf 1", "invalid UTF-8"},      // overlong '/'
      {"a;\xed\xa0\x80 1", "invalid UTF-8"},  // a surrogate
      {"a;\xe2\x82 1", "invalid UTF-8"},      // cut short
  };
  std::string deep;
  for (int i = 0; i < 1100; ++i) deep += (i ? ";f" : "f");
  cases.push_back({deep + " 1", "stack too deep"});
  for (const Case& c : cases) {
    CAPTURE(c.line);
    std::string text = "ok;line 1\n" + c.line + "\nok;again 2\n";
    bool blank = c.reason.find("empty") == 0 || c.reason.find("blank") == 0;
    if (blank) {  // accepted by default, strict or not
      CHECK(parse(text, strict()).result.ok());
      CHECK(parse(text, lf::ParseOptions{}).result.accepted == 3);
    }
    lf::ParseOptions so = strict();
    so.blank_frames = false;
    Parsed p = parse(text, so);
    REQUIRE(p.result.rejected == 1);
    REQUIRE(p.result.errors.size() == 1);
    CHECK(p.result.errors[0].line == 2);
    CAPTURE(p.result.errors[0].reason);
    CHECK(p.result.errors[0].reason.rfind(c.reason, 0) == 0);
    CHECK_FALSE(p.result.ok());
    // Lenient mode skips the same structural errors; text checks are off.
    Parsed l = parse(text, lf::ParseOptions{});
    bool text_error = c.reason == "control character" || c.reason == "invalid UTF-8";
    CHECK(l.result.rejected == (text_error || blank ? 0u : 1u));
    CHECK(l.result.accepted == (text_error || blank ? 3u : 2u));
  }
}

TEST_CASE("line too long is reported, not parsed") {
  lf::ParseOptions o = strict();
  o.max_line_bytes = 100;
  Parsed p = parse("a;" + std::string(200, 'b') + " 1\nc 2\n", o);
  REQUIRE(p.result.errors.size() == 1);
  CHECK(p.result.errors[0].reason.rfind("line too long", 0) == 0);
  CHECK(p.result.accepted == 1);
}

TEST_CASE("counts: integers, decimals, one white space before the count") {
  Parsed p = parse("a;b 10\nc\t2.5\nd e   3.\r\nf 0\n  \n\r\n\ng;h 007\n", strict());
  REQUIRE(p.result.ok());
  REQUIRE(p.lines.size() == 5);
  CHECK(p.stacks[0] == "a;b");
  CHECK(p.lines[0].value == 10);
  CHECK(p.lines[1].value == 2.5);
  CHECK(p.stacks[2] ==
        "d e  ");  // one white space goes with the count, the rest stays (flamegraph.pl)
  CHECK(p.lines[2].value == 3);
  CHECK(p.lines[3].value == 0);
  CHECK(p.lines[4].value == 7);
  CHECK(p.lines[4].line == 8);  // blank lines still count as lines
  CHECK(p.result.lines == 5);
}

TEST_CASE("a second count column makes the profile differential") {
  Parsed p = parse("a;b 3 5\na;c 4\n", strict());
  REQUIRE(p.lines.size() == 2);
  CHECK(p.result.differential);
  CHECK(p.lines[0].differential);
  CHECK(p.lines[0].value == 3);
  CHECK(p.lines[0].value2 == 5);
  CHECK(p.stacks[0] == "a;b");
  CHECK_FALSE(p.lines[1].differential);
}

TEST_CASE("max_errors caps the list, not the count") {
  lf::ParseOptions o = strict();
  o.max_errors = 3;
  std::string text;
  for (int i = 0; i < 10; ++i) text += "bad\n";
  Parsed p = parse(text, o);
  CHECK(p.result.rejected == 10);
  CHECK(p.result.errors.size() == 3);
  CHECK(p.result.errors[2].line == 3);
}

TEST_CASE("first_line and last_line let a caller parse in pieces") {
  lf::ParseOptions o = strict();
  o.first_line = 41;
  Parsed p = parse("a 1\n\nbad\n", o);
  REQUIRE(p.result.errors.size() == 1);
  CHECK(p.result.errors[0].line == 43);
  CHECK(p.result.last_line == 43);
  lf::ParseResult total;
  lf::merge_results(total, p.result, 100);
  lf::merge_results(total, p.result, 100);
  CHECK(total.rejected == 2);
  CHECK(total.accepted == 2);
}

TEST_CASE("no trailing newline, CRLF, empty input") {
  CHECK(parse("a 1", strict()).lines.size() == 1);
  Parsed crlf = parse("a;b 1\r\nc 2\r\n", strict());
  REQUIRE(crlf.result.ok());
  CHECK(crlf.stacks[0] == "a;b");
  Parsed none = parse("", strict());
  CHECK(none.result.lines == 0);
  CHECK(none.result.ok());
}

TEST_CASE("split_stack, check_frame, reverse_stack") {
  CHECK(lf::split_stack("a;b;c") == std::vector<std::string_view>{"a", "b", "c"});
  CHECK(lf::split_stack("a") == std::vector<std::string_view>{"a"});
  CHECK(lf::split_stack("a;") == std::vector<std::string_view>{"a", ""});
  lf::ParseOptions o = strict();
  CHECK(lf::check_frame("main a.lua:1", o).empty());
  CHECK(lf::check_frame("", o) == "empty frame");
  CHECK(lf::check_frame("a;b", o) == "frame contains ';'");
  CHECK(lf::check_frame("a\nb", o) == "control character");
  CHECK(lf::check_frame(std::string(5000, 'x'), o) == "frame too long");
  CHECK(lf::reverse_stack("a;b;c") == "c;b;a");
  CHECK(lf::reverse_stack("a") == "a");
  CHECK(lf::reverse_stack(";a") == "a;");
}

TEST_CASE("append_count writes what parse_folded reads back") {
  for (double v : {0.0, 1.0, 42.0, 1234567890123.0, 0.5, 2.25, 1e-7, 123.456, 1e20, 1e300}) {
    CAPTURE(v);
    std::string s;
    lf::append_count(s, v);
    CHECK(s.find('e') == std::string::npos);
    Parsed p = parse("x " + s + "\n", strict());
    REQUIRE(p.lines.size() == 1);
    CHECK(std::fabs(p.lines[0].value - v) <= std::fabs(v) * 1e-9 + 1e-9);
  }
}

// flamegraph.pl compat (bench/compat/run.sh): perf captures with an unresolved
// symbol ("write0;  3") were refused; flamegraph.pl draws a blank frame.
TEST_CASE("regression: blank and empty frames are kept as flamegraph.pl keeps them") {
  struct Case {
    std::string line, stack;
  };
  std::vector<Case> cases = {
      {"write0;  3", "write0; "},  // the frame " "
      {"write0; 3", "write0"},     // Perl's split drops the trailing empty field
      {"a;b;; 3", "a;b"},
      {"a;;b 3", "a;;b"},
      {";a 3", ";a"},
      {" 3", ""},  // counts at the root
      {"a;b   3", "a;b  "},
  };
  for (const Case& c : cases) {
    CAPTURE(c.line);
    Parsed p = parse(c.line + "\n", strict());
    REQUIRE(p.result.ok());
    REQUIRE(p.stacks.size() == 1);
    CHECK(p.stacks[0] == c.stack);
    CHECK(p.lines[0].value == 3);
  }
}
