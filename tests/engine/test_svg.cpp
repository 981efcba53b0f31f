// Stage 4: the SVG renderer (engine/include/luaflame/svg.hpp).
#include "luaflame/svg.hpp"

#include <algorithm>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "golden.hpp"
#include "luaflame/diff.hpp"
#include "luaflame/hash.hpp"

namespace {

using golden::options_from;
using golden::tree_of;

std::string svg_of(const std::string& folded, const lf::SvgOptions& o = {}) {
  lf::Tree t = tree_of(folded, o.flamechart);
  std::string out;
  lf::render_svg(t, o, out);
  return out;
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// The <g> of the frame whose title starts with `name (`.
std::string frame(const std::string& svg, const std::string& name) {
  std::size_t t = svg.find("<title>" + name + " (");
  if (t == std::string::npos) return {};
  std::size_t g = svg.rfind("<g", t);
  return svg.substr(g, svg.find("</g>", t) + 4 - g);
}

std::string attr(const std::string& el, const std::string& name) {
  std::size_t p = el.find(" " + name + "=\"");
  if (p == std::string::npos) return {};
  p += name.size() + 3;
  return el.substr(p, el.find('"', p) - p);
}

}  // namespace

TEST_CASE("data: tests/data/svg/*.folded -> .svg, byte for byte, well-formed") {
  for (const auto& in : golden::cases("svg", ".folded")) {
    CAPTURE(in.string());
    std::string base = in.string().substr(0, in.string().size() - 7);
    lf::SvgOptions o;
    if (golden::fs::exists(base + ".opts")) o = options_from(golden::read(base + ".opts"));
    std::string svg = svg_of(golden::read(in), o);
    CHECK(golden::xml_problem(svg) == "");
    golden::check_svg(base + ".svg", svg);
  }
}

TEST_CASE("the embedded script, once: tests/data/svg/script.js, the same in every graph") {
  std::string first;
  for (const auto& in : golden::cases("svg", ".folded")) {
    CAPTURE(in.string());
    std::string base = in.string().substr(0, in.string().size() - 7);
    lf::SvgOptions o;
    if (golden::fs::exists(base + ".opts")) o = options_from(golden::read(base + ".opts"));
    std::string script;
    golden::strip_script(svg_of(golden::read(in), o), &script);
    REQUIRE(script.find("function init(evt)") != std::string::npos);
    if (first.empty()) first = script;
    CHECK(script == first);  // options live in the parameter line, never in the script
  }
  golden::check(golden::data_dir("svg") / "script.js", first);
}

TEST_CASE("titles are flamegraph.pl's: NAME (COUNT COUNTNAME, PCT%)") {
  std::string svg = svg_of("main a.lua:1;work a.lua:5 1234\nmain a.lua:1 8766\n");
  CHECK(svg.find("<title>all (10,000 samples, 100%)</title>") != std::string::npos);
  CHECK(svg.find("<title>work a.lua:5 (1,234 samples, 12.34%)</title>") != std::string::npos);
  // self is added after the flamegraph.pl part, only when it says something
  CHECK(svg.find("<title>main a.lua:1 (10,000 samples, 100.00%), self 8,766</title>") !=
        std::string::npos);
  lf::SvgOptions o;
  o.count_name = "calls";
  o.factor = 2;
  std::string f = svg_of("a 3\n", o);
  CHECK(f.find("<title>a (6 calls, 100.00%)</title>") != std::string::npos);
  CHECK(attr(frame(f, "a"), "v") == "3");  // exact value for the script's search sum
}

TEST_CASE("one <g> per frame with title, rect and text, rect geometry like flamegraph.pl") {
  std::string svg = svg_of("a;b 1\na;c 3\n");
  CHECK(count(svg, "<g>") == 4);  // all, a, b, c
  std::string c = frame(svg, "c");
  CHECK(attr(c, "x") == "305");  // 10 + 1/4 of 1180
  CHECK(attr(c, "width") == "885");
  CHECK(c.find("<text") != std::string::npos);
  std::string all = frame(svg, "all");
  CHECK(attr(all, "width") == "1180");
  // depth 0 sits at the bottom: height - ypad2 - 16 + 1
  CHECK(attr(all, "y") == std::to_string(3 * 16 + 36 + 34 - 34 - 16 + 1));
}

TEST_CASE("--minwidth prunes narrow frames, in pixels or percent") {
  std::string text = "a;big 990\na;small 10\n";
  lf::SvgOptions o;
  o.min_width = 12;  // small is 11.8 px wide
  CHECK(frame(svg_of(text, o), "small").empty());
  o.min_width = 11;
  CHECK_FALSE(frame(svg_of(text, o), "small").empty());
  o.min_width = 1.5;
  o.min_width_percent = true;
  CHECK(frame(svg_of(text, o), "small").empty());
  CHECK_FALSE(frame(svg_of(text, o), "big").empty());
  lf::Tree t = tree_of(text);
  std::string out;
  CHECK(lf::render_svg(t, o, out) == 3);  // all, a, big
}

TEST_CASE("output is byte-identical for the same input, whatever its line order") {
  std::string lines[] = {"m;f;g 5", "m;f 2", "m;h;[C] string.rep 7", "m;[GC] 1", "n;f 3", "m;h 4"};
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  std::string first = svg_of(text);
  CHECK(svg_of(text) == first);
  std::mt19937 rng(1);
  for (int i = 0; i < 10; ++i) {
    std::shuffle(std::begin(lines), std::end(lines), rng);
    std::string shuffled;
    for (const auto& l : lines) shuffled += l + "\n";
    CAPTURE(shuffled);
    CHECK(svg_of(shuffled) == first);
  }
}

TEST_CASE("hostile frame names stay text: well-formed XML, no markup, no script") {
  std::vector<std::string> names = {"<script>alert(1)</script>",
                                    "]]><script>alert(2)</script>",
                                    "</script><svg onload=alert(3)>",
                                    "a\"b'c&d<e>f",
                                    "&amp&#x3c&lt",
                                    "<!-- comment -->",
                                    "<![CDATA[x]]>",
                                    "ctl\x01\x02\x1b[31m\x7f",
                                    "bad\xff\xfe utf8 \xc3",
                                    "\xed\xa0\x80 surrogate",
                                    "nonchar \xef\xbf\xbf",
                                    "tab\there",
                                    std::string(50000, 'L'),
                                    "emoji \xf0\x9f\x94\xa5 ok"};
  // Straight into the tree: the parser would refuse the 50,000-byte name,
  // and the renderer must cope with whatever a tree holds.
  lf::Tree t;
  for (std::size_t i = 0; i < names.size(); ++i) t.add("root;" + names[i], double(10 + i));
  t.finalize();
  lf::SvgOptions o;
  o.title = "<b>title</b>]]>";
  o.subtitle = "\x01sub & title";
  o.notes = "notes -- with --> and <tags>";
  o.name_type = "\"><script>x</script>";
  o.count_name = "<i>n</i>";
  o.font_type = "Verdana;}</style><script>alert(4)</script>";
  std::string svg;
  lf::render_svg(t, o, svg);
  CHECK(golden::xml_problem(svg) == "");
  CHECK(count(svg, "<script") == 1);  // only ours
  CHECK(count(svg, "]]>") == 1);      // only the end of our CDATA
  CHECK(count(svg, "<g>") == 2 + names.size());
  CHECK(svg.find("alert(1)") != std::string::npos);  // the text is there, escaped
  CHECK(svg.find("&lt;script&gt;alert(1)") != std::string::npos);
  CHECK(svg.find("\xef\xbf\xbd") != std::string::npos);  // U+FFFD for the bad bytes
  // A 50,000-byte name: cut in the title (4096 bytes + "..."), cut to the width in the label.
  std::string big = frame(svg, std::string(4096, 'L') + "...");
  CHECK_FALSE(big.empty());
  CHECK(big.size() < 5000);
  CHECK(svg.find(std::string(4097, 'L')) == std::string::npos);
}

TEST_CASE("differential: red grew, blue shrank, white unchanged, change in the title") {
  lf::Tree before = tree_of("m;grow 10\nm;shrink 50\nm;same 20\n");
  lf::Tree after = tree_of("m;grow 40\nm;shrink 10\nm;same 20\n");
  lf::Tree d = lf::diff_trees(before, after, {});
  std::string svg;
  lf::render_svg(d, lf::SvgOptions{}, svg);
  CHECK(golden::xml_problem(svg) == "");
  std::string grow = frame(svg, "grow"), shrink = frame(svg, "shrink"), same = frame(svg, "same");
  CHECK(attr(grow, "fill") == "#f33");    // g = b = 210 * (40 - 30) / 40: the largest change is 40
  CHECK(attr(shrink, "fill") == "#00f");  // the largest change: full blue
  CHECK(attr(same, "fill") == "#fff");
  CHECK(grow.find("(40 samples, 57.14%; +42.86%)") != std::string::npos);
  CHECK(shrink.find("(10 samples, 14.29%; -57.14%)") != std::string::npos);
  lf::SvgOptions neg;
  neg.negate = true;
  std::string n;
  lf::render_svg(d, neg, n);
  CHECK(attr(frame(n, "grow"), "fill") == "#33f");
  CHECK(attr(frame(n, "shrink"), "fill") == "#f00");
}

TEST_CASE("units: ns as us/ms/s, bytes as KiB/MiB") {
  lf::SvgOptions o;
  o.min_width = 0;
  o.unit = "ns";
  std::string t = svg_of("a;b 1500000\na;c 2500000000\na;d 999\n", o);
  CHECK(t.find("<title>b (1.50 ms, 0.06%)</title>") != std::string::npos);
  CHECK(t.find("<title>c (2.50 s, 99.94%)</title>") != std::string::npos);
  CHECK(t.find("<title>d (999 ns, 0.00%)</title>") != std::string::npos);
  o.unit = "bytes";
  o.colors = "mem";
  std::string m = svg_of("a;b 2048\na;c 3145728\n", o);
  CHECK(m.find("<title>b (2.00 KiB, 0.07%)</title>") != std::string::npos);
  CHECK(m.find("<title>c (3.00 MiB, 99.93%)</title>") != std::string::npos);
}

TEST_CASE("palettes: lua tells Lua, C and interpreter frames apart, colours stable per name") {
  std::string svg =
      svg_of("m.lua;f a.lua:3 5\nm.lua;[C] string.rep 5\nm.lua;[GC] 5\nn.lua;f a.lua:3 5\n");
  auto rgb = [](const std::string& hex) {
    auto v = [&](int i) { return std::stoi(hex.substr(std::size_t(i), 1), nullptr, 16); };
    return std::vector<int>{v(1), v(2), v(3)};
  };
  std::vector<int> lua = rgb(attr(frame(svg, "f a.lua:3"), "fill"));
  std::vector<int> c = rgb(attr(frame(svg, "[C] string.rep"), "fill"));
  std::vector<int> gc = rgb(attr(frame(svg, "[GC]"), "fill"));
  CHECK(lua[0] > lua[2]);  // warm
  CHECK(c[2] > c[0]);      // blue-ish
  CHECK(gc[2] >= gc[1]);   // purple-ish
  CHECK(gc != c);
  // the same function under two parents: the same colour
  std::size_t first = svg.find("<title>f a.lua:3 ("),
              second = svg.find("<title>f a.lua:3 (", first + 1);
  REQUIRE(second != std::string::npos);
  CHECK(attr(svg.substr(first, 200), "fill") == attr(svg.substr(second, 200), "fill"));
  for (const char* p :
       {"hot", "mem", "io", "red", "green", "blue", "aqua", "yellow", "purple", "orange", "lua"}) {
    CAPTURE(p);
    CHECK(lf::known_palette(p));
  }
  for (const char* p : {"java", "js", "perl", "wakeup", "chain"}) CHECK(lf::known_palette(p));
  CHECK_FALSE(lf::known_palette("nope"));
}

TEST_CASE("inverted draws the root at the top and says Icicle Graph") {
  lf::SvgOptions o;
  o.inverted = true;
  std::string svg = svg_of("a;b 1\n", o);
  CHECK(svg.find(">Icicle Graph</text>") != std::string::npos);
  CHECK(std::stod(attr(frame(svg, "all"), "y")) < std::stod(attr(frame(svg, "b"), "y")));
}

TEST_CASE("flame chart keeps input order on the x axis") {
  lf::SvgOptions o;
  o.flamechart = true;
  std::string svg = svg_of("z 1\na 1\n", o);
  CHECK(std::stod(attr(frame(svg, "z"), "x")) < std::stod(attr(frame(svg, "a"), "x")));
  std::string sorted = svg_of("z 1\na 1\n");
  CHECK(std::stod(attr(frame(sorted, "z"), "x")) > std::stod(attr(frame(sorted, "a"), "x")));
}

TEST_CASE("the sink overload writes the same bytes as the string overload") {
  std::string text;
  for (int i = 0; i < 30000; ++i)
    text += "m;f" + std::to_string(i % 977) + ";g" + std::to_string(i) + " 1\n";
  lf::Tree t = tree_of(text);
  lf::SvgOptions o;
  o.min_width = 0;
  std::string whole, pieces;
  std::size_t drawn = lf::render_svg(t, o, whole);
  int calls = 0;
  CHECK(lf::render_svg(t, o, [&](std::string_view s) {
          pieces.append(s);
          ++calls;
        }) == drawn);
  CHECK(pieces == whole);
  CHECK(calls > 1);
  // every frame's <g> holds a <title>, a <rect> and a <text> (empty when narrow)
  CHECK(count(whole, "<g>") == drawn);
  CHECK(count(whole, "<title>") == drawn);
  CHECK(count(whole, "<rect x=") == drawn + 1);  // + the background
  CHECK(count(whole, "<text/>") + count(whole, "<text x=") == drawn);
  CHECK(count(whole, "<text/>") > 0);
}

TEST_CASE("empty input: a valid SVG that says so") {
  std::string out;
  lf::render_empty_svg(lf::SvgOptions{}, "No <data> & nothing", out);
  CHECK(golden::xml_problem(out) == "");
  CHECK(out.find("No &lt;data&gt; &amp; nothing") != std::string::npos);
}

TEST_CASE("random bytes in, well-formed SVG out (lenient parse, any tree)") {
  std::mt19937 rng(3);
  const char alphabet[] = "ab;;  \t\r\n0123456789.-<>&\"']]>\x01\x7f\xc3\xa9\xff\xed\xa0";
  for (int round = 0; round < 200; ++round) {
    CAPTURE(round);
    std::string text;
    int len = int(rng() % 400);
    for (int i = 0; i < len; ++i) text += alphabet[rng() % (sizeof alphabet - 1)];
    text += "\nx;y 5\n";  // at least one good line
    lf::SvgOptions o;
    o.min_width = rng() % 2 ? 0 : 0.1;
    o.inverted = rng() % 2;
    std::string svg = svg_of(text, o);
    CHECK(golden::xml_problem(svg) == "");
    CHECK(count(svg, "<script") == 1);
  }
}

TEST_CASE("same frames, titles and geometry as flamegraph.pl (tests/data/svg-compat)") {
  // <case>.flamegraph-pl.txt lists "TITLE|x|y|width" of every frame in
  // flamegraph.pl's SVG of <case>.folded with --minwidth 0 (made once with
  // brendangregg/FlameGraph's flamegraph.pl, which is not in this repository).
  for (const auto& in : golden::cases("svg-compat", ".folded")) {
    CAPTURE(in.string());
    std::string base = in.string().substr(0, in.string().size() - 7);
    lf::SvgOptions o;
    o.min_width = 0;
    o.show_self = false;  // flamegraph.pl's titles have no self part
    std::string svg = svg_of(golden::read(in), o);
    std::vector<std::string> rows;
    std::regex frame_re(
        "<title>(.*?)</title><rect x=\"([0-9.]+)\" y=\"([0-9.]+)\" width=\"([0-9.]+)\"");
    for (std::sregex_iterator it(svg.begin(), svg.end(), frame_re), end; it != end; ++it) {
      std::string title = (*it)[1];
      for (auto [from, to] : {std::pair<std::string, std::string>{"&lt;", "<"},
                              {"&gt;", ">"},
                              {"&quot;", "\""},
                              {"&#39;", "'"},
                              {"&amp;", "&"}}) {
        for (std::size_t p = title.find(from); p != std::string::npos;
             p = title.find(from, p + to.size()))
          title.replace(p, from.size(), to);
      }
      rows.push_back(title + "|" + std::string((*it)[2]) + "|" + std::string((*it)[3]) + "|" +
                     std::string((*it)[4]));
    }
    std::sort(rows.begin(), rows.end());
    std::string got;
    for (const auto& r : rows) got += r + "\n";
    std::string want = golden::read(base + ".flamegraph-pl.txt");
    CHECK(rows.size() == std::size_t(std::count(want.begin(), want.end(), '\n')));
    CHECK(got == want);
  }
}

// flamegraph.pl compat (bench/compat/run.sh on FlameGraph's test/results): each
// kind of case that differed, with input written here.
TEST_CASE("regression: _[k] _[j] _[i] _[w] leave titles and labels, and choose the colour") {
  std::string folded =
      "java;Interpreter_[j] 30\njava;inlined_[i] 30\njava;sys_read_[k] 30\njava;waker_[w] 30\n"
      "java;plain_[x] 30\n";
  lf::SvgOptions java;
  java.colors = "java";
  std::string svg = svg_of(folded, java);
  CHECK(svg.find("_[j]") == std::string::npos);
  CHECK(svg.find("_[k]") == std::string::npos);
  CHECK(svg.find("<title>plain_[x] (") != std::string::npos);  // not an annotation
  std::string jit = frame(svg, "Interpreter");
  REQUIRE(!jit.empty());
  CHECK(jit.find(">Interpreter</text>") != std::string::npos);  // the label too
  // flamegraph.pl's java palette: _[j] green (r = b < g), _[i] aqua (g = b > r), _[k] orange (b =
  // 0).
  auto chan = [](const std::string& fill, int i) {
    return std::stoi(fill.substr(1 + i, 1), nullptr, 16);
  };
  std::string g = attr(jit, "fill"), a = attr(frame(svg, "inlined"), "fill"),
              o = attr(frame(svg, "sys_read"), "fill");
  CAPTURE(g);
  CAPTURE(a);
  CAPTURE(o);
  CHECK((chan(g, 0) == chan(g, 2) && chan(g, 1) > chan(g, 0)));
  CHECK((chan(a, 1) == chan(a, 2) && chan(a, 0) < chan(a, 1)));
  CHECK((chan(o, 2) == 0 && chan(o, 0) > chan(o, 1)));
  // The default lua palette colours them by kind too.
  std::string lua = svg_of(folded);
  std::string k = attr(frame(lua, "sys_read"), "fill");
  CHECK((chan(k, 2) == 0 && chan(k, 0) > chan(k, 1)));
  // The same name with and without its annotation is two frames, as in flamegraph.pl.
  std::string both = svg_of("a;f_[k] 1\na;f 1\n", java);
  CHECK(count(both, "<title>f (") == 2);
}

TEST_CASE("regression: an empty frame has an empty title, a blank one a blank title") {
  std::string svg = svg_of("write0;  3\na;;b 1\n");
  CHECK(svg.find("<title>  (3 samples, 75.00%)</title>") != std::string::npos);
  CHECK(svg.find("<title> (1 samples, 25.00%)</title>") != std::string::npos);
  CHECK(golden::xml_problem(svg) == "");
}

TEST_CASE("regression: a shrink too small to show is -0.00%, as flamegraph.pl prints it") {
  std::string before = "m;big 100000\nm;tiny 3\n", after = "m;big 100000\nm;tiny 2\n";
  lf::Tree d = lf::diff_trees(tree_of(before), tree_of(after), {});
  std::string svg;
  lf::SvgOptions all;
  all.min_width = 0;
  lf::render_svg(d, all, svg);
  CHECK(frame(svg, "tiny").find("(2 samples, 0.00%; -0.00%)") != std::string::npos);
  CHECK(frame(svg, "big").find("(100,000 samples, 100.00%; 0.00%)") != std::string::npos);
  // flamegraph.pl's largest change starts at 1: a change of 1 is full colour.
  CHECK(attr(frame(svg, "tiny"), "fill") == "#00f");
}

TEST_CASE("fnv1a: fixed values (colours and the server's stored stack hashes depend on them)") {
  // Regression: three copies of this hash existed; the one left must give what they gave.
  CHECK(lf::fnv1a("") == 1469598103934665603ull);
  CHECK(lf::fnv1a("a") == ((1469598103934665603ull ^ 'a') * 1099511628211ull));
  CHECK(lf::fnv1a("main;work") ==
        lf::fnv1a("work", lf::fnv1a("main;")));  // pieces hash as one string
}
