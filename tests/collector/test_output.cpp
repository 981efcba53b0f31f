// The collector's output files, written from a call tree: folded text, the
// SVG flame graph, speedscope JSON, the size cut with its
// "[luaflame] truncated" frame, and the per-file errors of OutFile.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/out_formats.hpp"
#include "luaflame/collector.hpp"
#include "luaflame/pprof.hpp"

namespace {

using Totals = std::map<std::string, uint64_t>;

// A tree built from (stack, value per metric) like the hooks build it.
struct Built {
  lfc::FrameNames names;
  lfc::Tree tree;
  std::map<std::string, uint32_t> ids;
  explicit Built(int nm) : tree(nm) {}
  uint32_t node(const std::string& stack) {
    uint32_t n = 0;
    std::stringstream ss(stack);
    std::string f;
    while (std::getline(ss, f, ';')) {
      auto it = ids.find(f);
      uint32_t id = it != ids.end() ? it->second : (ids[f] = names.add(f));
      n = tree.child(n, id);
    }
    return n;
  }
  lfc::OutTree snap(lfc::Format fmt = lfc::Format::folded, uint64_t budget = 0) {
    return lfc::snapshot(
        tree, names, [&](uint32_t n, int m) { return tree.value(n, m); },
        [&](std::size_t len, std::string_view name) {
          return lfc::node_cost(fmt, tree.nmetrics(), len, name);
        },
        budget);
  }
};

Totals parse_folded(const std::string& text) {
  Totals t;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line))
    t[line.substr(0, line.rfind(' '))] += std::stoull(line.substr(line.rfind(' ') + 1));
  return t;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tmp_dir() {
  char tmpl[] = "/tmp/lf_output_XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  return tmpl;
}

const Totals kStacks = {{"main", 3},
                        {"main;parse", 10},
                        {"main;parse;[C] string.sub", 4},
                        {"main;emit", 7},
                        {"main;emit;parse", 1}};

}  // namespace

TEST_CASE("output: folded text from the tree is the stacks recorded, zero nodes left out") {
  Built b(2);
  for (const auto& [stack, v] : kStacks) {
    b.tree.add(b.node(stack), 0, v);
    b.tree.add(b.node(stack), 1, v * 100);
  }
  b.node("main;never;called");  // no value: no line
  lfc::OutTree t = b.snap();
  for (int m = 0; m < 2; ++m) {
    CAPTURE(m);
    std::string text;
    lfc::write_folded_text(t, m, [&](std::string_view l) { text.append(l); });
    Totals want;
    for (const auto& [stack, v] : kStacks) want[stack] = m ? v * 100 : v;
    CHECK(parse_folded(text) == want);
  }
  CHECK(t.dropped == 0);
}

TEST_CASE(
    "output: 100,000-deep recursion is cut at the limit with a truncated frame, totals kept") {
  // The regression: a trace of deep recursion repeats its whole path on
  // every line, 100,000 lines of up to 2 MB each; the file must stay bounded.
  Built b(1);
  uint32_t rec = b.names.add("rec deep.lua:1");
  uint32_t n = b.tree.child(0, b.names.add("deep.lua deep.lua:0"));
  uint64_t total = 0;
  for (int d = 0; d < 100000; ++d) {
    n = b.tree.child(n, rec);
    b.tree.add(n, 0, 1);
    ++total;
  }
  const uint64_t limit = 4 << 20;
  lfc::OutTree t = b.snap(lfc::Format::folded, limit);
  CHECK(t.dropped > 0);
  CHECK(t.dropped < 100000);
  std::string dir = tmp_dir(), path = dir + "/deep.folded";
  lfc::OutFile f(path, limit);
  lfc::write_folded_file(t, 0, f);
  REQUIRE(f.commit());
  std::string text = slurp(path);
  CHECK(text.size() <= limit);
  Totals got = parse_folded(text);
  uint64_t sum = 0, cut = 0;
  for (const auto& [stack, v] : got) {
    sum += v;
    if (stack.size() >= lfc::kTruncatedFrame.size() &&
        stack.compare(stack.size() - lfc::kTruncatedFrame.size(), std::string::npos,
                      lfc::kTruncatedFrame) == 0)
      cut += v;
  }
  CHECK(sum == total);      // nothing lost: the cut values sit in the truncated frame
  CHECK(cut == t.dropped);  // one call per dropped level
  std::remove(path.c_str());
  rmdir(dir.c_str());
}

TEST_CASE("output: speedscope holds every metric as nested events whose values add up") {
  Built b(2);
  for (const auto& [stack, v] : kStacks) {
    b.tree.add(b.node(stack), 0, v);
    b.tree.add(b.node(stack), 1, 2 * v);
  }
  lfc::OutTree t = b.snap(lfc::Format::speedscope);
  std::string dir = tmp_dir(), path = dir + "/p.json";
  lfc::OutFile f(path, 0);
  lfc::write_speedscope(t, {"time", "calls"}, "app \"x\"", f);
  REQUIRE(f.commit());
  auto j = nlohmann::json::parse(slurp(path));
  CHECK(j["$schema"] == "https://www.speedscope.app/file-format-schema.json");
  CHECK(j["name"] == "app \"x\"");
  REQUIRE(j["profiles"].size() == 2);
  const auto& frames = j["shared"]["frames"];
  for (int m = 0; m < 2; ++m) {
    CAPTURE(m);
    const auto& p = j["profiles"][m];
    CHECK(p["type"] == "evented");
    CHECK(p["unit"] == (m == 0 ? "nanoseconds" : "none"));
    // Replay: a stack of open frames; self value = time not covered by children.
    std::vector<std::pair<std::string, uint64_t>> open;  // path, at of last event inside
    std::vector<uint64_t> child_time;
    Totals self;
    uint64_t last_at = 0;
    std::vector<uint64_t> opened;
    for (const auto& e : p["events"]) {
      uint64_t at = e["at"];
      CHECK(at >= last_at);
      last_at = at;
      std::string name = frames[e["frame"].get<std::size_t>()]["name"];
      if (e["type"] == "O") {
        open.push_back({open.empty() ? name : open.back().first + ";" + name, 0});
        opened.push_back(at);
        child_time.push_back(0);
      } else {
        REQUIRE(!open.empty());
        CHECK(open.back().first.substr(open.back().first.rfind(';') + 1) ==
              name.substr(name.rfind(';') + 1));
        uint64_t span = at - opened.back();
        uint64_t own = span - child_time.back();
        if (own) self[open.back().first] += own;
        open.pop_back();
        opened.pop_back();
        child_time.pop_back();
        if (!child_time.empty()) child_time.back() += span;
      }
    }
    CHECK(open.empty());
    Totals want;
    uint64_t total = 0;
    for (const auto& [stack, v] : kStacks) {
      want[stack] = m ? 2 * v : v;
      total += want[stack];
    }
    CHECK(self == want);
    CHECK(p["endValue"] == total);
  }
  // file and line from "NAME SOURCE:LINE"
  Built c(1);
  c.tree.add(c.node("parse app.lua:12"), 0, 1);
  lfc::OutTree tc = c.snap();
  lfc::OutFile g(path, 0);
  lfc::write_speedscope(tc, {"samples"}, "a", g);
  REQUIRE(g.commit());
  auto k = nlohmann::json::parse(slurp(path));
  CHECK(k["shared"]["frames"][0]["file"] == "app.lua");
  CHECK(k["shared"]["frames"][0]["line"] == 12);
  std::remove(path.c_str());
  rmdir(dir.c_str());
}

TEST_CASE("output: an SVG flame graph per metric, rendered by the engine") {
  Built b(1);
  for (const auto& [stack, v] : kStacks) b.tree.add(b.node(stack), 0, v);
  lfc::OutTree t = b.snap(lfc::Format::svg);
  std::string dir = tmp_dir(), path = dir + "/p.svg";
  lfc::OutFile f(path, 0);
  lfc::write_svg(t, 0, "calls", "luaflame: app (calls)", f);
  REQUIRE(f.commit());
  std::string svg = slurp(path);
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find("luaflame: app (calls)") != std::string::npos);
  CHECK(svg.find("<title>[C] string.sub (4 calls") != std::string::npos);
  CHECK(svg.find("<title>main (25 calls") != std::string::npos);
  // Two metrics from one engine tree: the second graph holds only its own values.
  Built two(2);
  for (const auto& [stack, v] : kStacks) {
    two.tree.add(two.node(stack), 0, v);
    if (stack != "main;emit;parse") two.tree.add(two.node(stack), 1, 1000 * v);
  }
  lfc::OutTree t2 = two.snap(lfc::Format::svg);
  lfc::SvgWriter w(t2);
  for (int m : {1, 0, 1}) {
    CAPTURE(m);
    lfc::OutFile g(path, 0);
    w.write(m, m ? "alloc_bytes" : "calls", "t", g);
    REQUIRE(g.commit());
    std::string s2 = slurp(path);
    auto count = [&](const std::string& what) {
      std::size_t n = 0;
      for (std::size_t at = s2.find(what); at != std::string::npos; at = s2.find(what, at + 1)) ++n;
      return n;
    };
    if (m) {
      CHECK(count("<title>main (23.44 KiB, 100.00%), self 2.93 KiB") ==
            1);                                                     // 1000 x (25 - 1) bytes
      CHECK(count("<title>emit (6.84 KiB, 29.17%)</title>") == 1);  // no child drawn
      CHECK(count("<title>parse (") == 1);  // main;emit;parse holds none of this metric
    } else {
      CHECK(count("<title>main (25 calls, 100.00%), self 3") == 1);
      CHECK(count("<title>parse (") == 2);
    }
  }
  std::remove(path.c_str());
  rmdir(dir.c_str());
}

TEST_CASE("output: a file that cannot be written says which and why, the limit is never passed") {
  lfc::OutFile f("/nonexistent-dir/p.svg", 0);
  f.write("x");
  CHECK_FALSE(f.commit());
  CHECK(f.error().find("/nonexistent-dir/p.svg") != std::string::npos);
  CHECK(f.error().find("No such file or directory") != std::string::npos);

  std::string dir = tmp_dir(), path = dir + "/big.folded";
  lfc::OutFile g(path, 4096);
  std::string line(1000, 'x');
  for (int i = 0; i < 5; ++i) g.write(line);
  CHECK_FALSE(g.commit());
  CHECK(g.error().find("output limit of 4096 bytes") != std::string::npos);
  struct stat st {};
  CHECK(stat(path.c_str(), &st) != 0);  // nothing left behind
  CHECK(stat((path + ".tmp").c_str(), &st) != 0);
  rmdir(dir.c_str());

  CHECK(lfc::format_of("a.svg") == lfc::Format::svg);
  CHECK(lfc::format_of("a.json") == lfc::Format::speedscope);
  CHECK(lfc::format_of("a.pb.gz") == lfc::Format::pprof);
  CHECK(lfc::format_of("a.folded") == lfc::Format::folded);
  CHECK(lfc::format_of("profile.txt") == lfc::Format::folded);
  CHECK(lfc::output_path("o.svg", "calls", false) == "o.calls.svg");
  CHECK(lfc::output_path("o.folded", "time", false) == "o.time.folded");
  CHECK(lfc::output_path("o", "time", false) == "o.time.folded");
}

TEST_CASE("output: pprof holds every metric as a sample type, read back by the engine") {
  Built b(2);
  for (const auto& [stack, v] : kStacks) {
    b.tree.add(b.node(stack), 0, v);
    b.tree.add(b.node(stack), 1, 2 * v);
  }
  lfc::OutTree t = b.snap(lfc::Format::pprof);
  std::string dir = tmp_dir(), path = dir + "/p.pb.gz";
  lfc::OutFile f(path, 0);
  lfc::write_pprof_file(t, {"time", "live_count"}, f);
  REQUIRE(f.commit());
  lf::PprofProfile p;
  std::string err;
  REQUIRE(lf::read_pprof(slurp(path), lf::PprofLimits{}, p, err));
  REQUIRE(p.sample_types.size() == 2);
  CHECK(p.sample_types[0].type == "cpu");
  CHECK(p.sample_types[0].unit == "nanoseconds");
  CHECK(p.sample_types[1].type == "inuse_objects");
  std::map<std::string, std::vector<int64_t>> got;
  for (const lf::PprofStack& s : p.stacks) got[lf::stack_text(p, s)] = s.values;
  CHECK(got.size() == std::size(kStacks));
  for (const auto& kv : kStacks) {  // no structured binding: clang 14 cannot capture one (CAPTURE)
    const std::string& stack = kv.first;
    CAPTURE(stack);
    CHECK(got[stack] == std::vector<int64_t>{int64_t(kv.second), int64_t(2 * kv.second)});
  }
  std::remove(path.c_str());
  rmdir(dir.c_str());
}
