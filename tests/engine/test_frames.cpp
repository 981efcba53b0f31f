// Stage 4 beside the SVG: the frames as data (engine/include/luaflame/frames.hpp).
// Every SVG case of tests/data/svg is also a case here: its frames document
// is kept under tests/data/frames (byte for byte), and it must hold the
// frames the case's SVG draws, in the SVG's order, at its x and width, in
// its fills, under its names.
#include "luaflame/frames.hpp"

#include <nlohmann/json.hpp>

#include <regex>
#include <string>
#include <vector>

#include "golden.hpp"
#include "luaflame/diff.hpp"
#include "luaflame/svg.hpp"

namespace {

using golden::options_from;
using golden::tree_of;

struct SvgFrame {
  std::string title, x, width, fill;
};

// The frames of one of our SVGs, in order (<g> <title> <rect x y width fill>).
std::vector<SvgFrame> svg_frames(const std::string& svg) {
  static const std::regex g(
      R"re(<g[^>]*><title>([^<]*)</title><rect x="([^"]*)" y="[^"]*" width="([^"]*)" fill="([^"]*)")re");
  std::vector<SvgFrame> out;
  for (std::sregex_iterator it(svg.begin(), svg.end(), g), end; it != end; ++it)
    out.push_back({(*it)[1], (*it)[2], (*it)[3], (*it)[4]});
  return out;
}

std::string xml_escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '"')
      out += "&quot;";
    else if (c == '\'')
      out += "&#39;";
    else
      out += c;
  }
  return out;
}

// A number as the SVG writes coordinates: one decimal, ".0" dropped.
std::string coord(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  std::string s = buf;
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s;
}

// Checks that `doc` holds the frames `svg` draws.
void check_same_graph(const nlohmann::json& doc, const std::string& svg) {
  std::vector<SvgFrame> want = svg_frames(svg);
  const auto& rows = doc["frames"];
  const std::size_t stride = doc["stride"];
  REQUIRE(rows.size() == want.size() * stride);
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CAPTURE(want[i].title);
    const std::size_t o = i * stride;
    CHECK(coord(rows[o + 1]) == want[i].x);
    CHECK(coord(rows[o + 2]) == want[i].width);
    CHECK(doc["colors"][rows[o + 4].get<std::size_t>()] == want[i].fill);
    std::string name = doc["names"][rows[o + 3].get<std::size_t>()];
    CHECK(want[i].title.rfind(xml_escaped(name) + " (", 0) == 0);
    if (i == 0) CHECK(rows[o] == 0);  // the root first
  }
}

std::string frames_of(const lf::Tree& t, const lf::SvgOptions& o) {
  std::string out;
  lf::render_frames(t, o, out);
  return out;
}

}  // namespace

TEST_CASE("data: every SVG case's frames, byte for byte, the SVG's graph") {
  for (const auto& in : golden::cases("svg", ".folded")) {
    CAPTURE(in.string());
    std::string base = in.string().substr(0, in.string().size() - 7);
    lf::SvgOptions o;
    if (golden::fs::exists(base + ".opts")) o = options_from(golden::read(base + ".opts"));
    lf::Tree t = tree_of(golden::read(in), o.flamechart);
    std::string text = frames_of(t, o);
    nlohmann::json doc = nlohmann::json::parse(text);  // throws when not JSON
    CHECK(doc["format"] == "luaflame-frames");
    CHECK(doc["version"] == lf::kFramesVersion);
    std::string svg;
    lf::render_svg(t, o, svg);
    check_same_graph(doc, svg);
    golden::check(golden::data_dir("frames") / (in.stem().string() + ".json"), text);
  }
}

TEST_CASE("a differential graph: the SVG's frames, and each frame's change") {
  lf::Tree base = tree_of("main;a 60\nmain;b 40\n");
  lf::Tree head = tree_of("main;a 30\nmain;b 60\nmain;c 10\n");
  lf::Tree diff = lf::diff_trees(base, head, {});
  diff.sort_children();
  for (bool negate : {false, true}) {
    lf::SvgOptions o;
    o.negate = negate;
    nlohmann::json doc = nlohmann::json::parse(frames_of(diff, o));
    CHECK(doc["differential"] == true);
    CHECK(doc["negate"] == negate);
    REQUIRE(doc["stride"] == 8);
    std::string svg;
    lf::render_svg(diff, o, svg);
    check_same_graph(doc, svg);
    // names: all main a b c; rows in order all, main, a, b, c
    const auto& r = doc["frames"];
    REQUIRE(r.size() == 5 * 8);
    CHECK(doc["names"][r[2 * 8 + 3].get<std::size_t>()] == "a");
    CHECK(r[2 * 8 + 7] == -30);  // a: self 60 -> 30 (normalised: equal totals)
    CHECK(doc["names"][r[4 * 8 + 3].get<std::size_t>()] == "c");
    CHECK(r[4 * 8 + 7] == 10);
  }
}

TEST_CASE("header: what the page needs to draw and to word the values") {
  lf::SvgOptions o;
  o.width = 800;
  o.frame_height = 18;
  o.unit = "ns";
  o.factor = 2;
  o.inverted = true;
  o.count_name = "calls \"q\"";
  nlohmann::json doc = nlohmann::json::parse(frames_of(tree_of("m;f 3\nm 1\n"), o));
  CHECK(doc["width"] == 800);
  CHECK(doc["frame_height"] == 18);
  CHECK(doc["inverted"] == true);
  CHECK(doc["unit"] == "ns");
  CHECK(doc["factor"] == 2);
  CHECK(doc["count_name"] == "calls \"q\"");
  CHECK(doc["total"] == 4);
  CHECK(doc["depth"] == 2);
  // rows: all (4), m (4, self 1), f (3, self 3)
  const auto& r = doc["frames"];
  REQUIRE(r.size() == 3 * 7);
  CHECK(r[7 + 0] == 1);
  CHECK(r[7 + 5] == 4);
  CHECK(r[7 + 6] == 1);
  CHECK(r[14 + 0] == 2);
  CHECK(r[14 + 6] == 3);
}

TEST_CASE("names that are not UTF-8 or hold quotes and controls stay valid JSON") {
  std::string text = frames_of(tree_of("a\"b\\c;\x01\xff\xfe 1\n"), {});
  nlohmann::json doc = nlohmann::json::parse(text);
  CHECK(doc["names"][1] == "a\"b\\c");
  CHECK(doc["names"][2] == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST_CASE("an empty tree: a document with no frames") {
  lf::Tree t;
  t.finalize();
  nlohmann::json doc = nlohmann::json::parse(frames_of(t, {}));
  CHECK(doc["frames"].empty());
  CHECK(doc["colors"].empty());
  CHECK(doc["total"] == 0);
}
