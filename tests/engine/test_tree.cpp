// Stage 2: the call tree (engine/include/luaflame/tree.hpp).
#include "luaflame/tree.hpp"

#include <map>
#include <random>
#include <string>
#include <vector>

#include "golden.hpp"

namespace {

using golden::folded_of;
using golden::tree_of;

// What write_folded must produce, computed the slow obvious way.
std::string reference_folded(const std::vector<std::pair<std::string, double>>& lines) {
  std::map<std::string, double> sum;
  for (const auto& l : lines) sum[l.first] += l.second;
  // write_folded walks the tree depth first, children sorted as if each
  // name ended in ';': the order of the strings "f1;f2;...;fn;".
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& s : sum) {
    if (s.second == 0) continue;
    std::string key;
    for (std::string_view f : lf::split_stack(s.first)) key += std::string(f) + ";";
    std::string line = s.first + " ";
    lf::append_count(line, s.second);
    rows.push_back({key, line});
  }
  std::sort(rows.begin(), rows.end());
  std::string out;
  for (const auto& r : rows) out += r.second + "\n";
  return out;
}

}  // namespace

TEST_CASE("data: tests/data/tree/*.folded -> folded and function table") {
  for (const auto& in : golden::cases("tree", ".folded")) {
    CAPTURE(in.string());
    lf::Tree t = tree_of(golden::read(in));
    std::string out = folded_of(t);
    out += "--- functions: self total\n";
    for (const lf::FunctionStat& s : lf::function_stats(t)) {
      out += s.name + ": ";
      lf::append_count(out, s.self);
      out += ' ';
      lf::append_count(out, s.total);
      out += '\n';
    }
    std::string base = in.string().substr(0, in.string().size() - 7);
    golden::check(base + ".txt", out);
  }
}

TEST_CASE("self and total per node") {
  lf::Tree t = tree_of("a;b;c 3\na;b 2\na;d 5\ne 1\n");
  CHECK(t.total() == 11);
  uint32_t ab = t.find("a;b");
  REQUIRE(ab != lf::Tree::kNone);
  CHECK(t.node(ab).self[0] == 2);
  CHECK(t.node(ab).total[0] == 5);
  CHECK(t.node(ab).depth == 2);
  CHECK(t.node(t.find("a")).total[0] == 10);
  CHECK(t.node(t.find("a")).self[0] == 0);
  CHECK(t.find("a;x") == lf::Tree::kNone);
  CHECK(t.path(t.find("a;b;c")) == "a;b;c");
  CHECK(t.frame_name(t.node(t.find("a;d")).frame) == "d");
}

TEST_CASE("random unsorted input merges like a plain map (prefix reuse and wide nodes)") {
  // Few names and many children per node: exercises the flow() shortcut
  // across unrelated consecutive lines, the list search and the index.
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    CAPTURE(round);
    int names = round < 10 ? 4 : 300;
    std::vector<std::pair<std::string, double>> lines;
    std::string text;
    for (int i = 0; i < 2000; ++i) {
      int depth = 1 + int(rng() % 8);
      std::string s;
      for (int d = 0; d < depth; ++d)
        s += (d ? ";" : "") + std::string("f") + std::to_string(rng() % names);
      double v = double(rng() % 5);
      lines.push_back({s, v});
      text += s + " " + std::to_string(int(v)) + "\n";
      if (rng() % 3 == 0) {  // the same stack again, or a prefix of it, right after
        std::string p = s.substr(0, s.rfind(';') == std::string::npos ? s.size() : s.rfind(';'));
        lines.push_back({p, 1});
        text += p + " 1\n";
      }
    }
    lf::Tree t = tree_of(text);
    CHECK(folded_of(t) == reference_folded(lines));
  }
}

TEST_CASE("add() after finalize() keeps merging (regression: index freed by finalize)") {
  lf::Tree t;
  std::string wide;
  for (int i = 0; i < 40; ++i) t.add("root;c" + std::to_string(i), 1);
  t.finalize();
  for (int i = 0; i < 40; ++i) t.add("root;c" + std::to_string(i), 1);
  t.add("root;c3;deeper", 2);
  t.finalize();
  CHECK(t.total() == 82);
  CHECK(t.node(t.find("root")).total[0] == 82);
  CHECK(t.node(t.find("root;c7")).self[0] == 2);
  CHECK(t.size() == 1 + 1 + 40 + 1);  // root, "root", 40 children, "deeper"
}

TEST_CASE("children keep input order until sort_children()") {
  lf::Tree t = tree_of("a;z 1\na;m 1\na;b 1\n");
  uint32_t a = t.find("a");
  std::vector<std::string> order;
  for (uint32_t c = t.node(a).first_child; c != lf::Tree::kNone; c = t.node(c).next_sibling)
    order.push_back(t.frame_name(t.node(c).frame));
  CHECK(order == std::vector<std::string>{"z", "m", "b"});
  t.sort_children();
  order.clear();
  for (uint32_t c = t.node(a).first_child; c != lf::Tree::kNone; c = t.node(c).next_sibling)
    order.push_back(t.frame_name(t.node(c).frame));
  CHECK(order == std::vector<std::string>{"b", "m", "z"});
}

TEST_CASE("flame chart mode merges only consecutive stacks") {
  lf::Tree t = tree_of("a;b 1\na;c 1\na;b 1\nd 1\na 1\n", true);
  // a{b,c,b} then d then a again: two "a" nodes at the root, three children in the first.
  std::vector<std::string> roots;
  for (uint32_t c = t.node(0).first_child; c != lf::Tree::kNone; c = t.node(c).next_sibling)
    roots.push_back(t.frame_name(t.node(c).frame));
  CHECK(roots == std::vector<std::string>{"a", "d", "a"});
  uint32_t a = t.node(0).first_child;
  int kids = 0;
  for (uint32_t c = t.node(a).first_child; c != lf::Tree::kNone; c = t.node(c).next_sibling) ++kids;
  CHECK(kids == 3);
}

TEST_CASE("differential lines fill two columns, one-column lines count the same in both") {
  lf::Tree t = tree_of("a;b 1\na;c 2 5\n");
  REQUIRE(t.differential());
  CHECK(t.total(0) == 3);
  CHECK(t.total(1) == 6);
  CHECK(t.node(t.find("a;b")).self[1] == 1);
  CHECK(t.node(t.find("a;c")).self[0] == 2);
  CHECK(t.node(t.find("a;c")).self[1] == 5);
  std::string out;
  t.sort_children();
  lf::write_folded(t, out);
  CHECK(out == "a;b 1 1\na;c 2 5\n");
}

TEST_CASE("function_stats counts a recursive function's total once per stack") {
  lf::Tree t = tree_of("main;f;f;f 4\nmain;f;g 2\nmain;g 1\n");
  std::map<std::string, lf::FunctionStat> by;
  for (const auto& s : lf::function_stats(t)) by[s.name] = s;
  CHECK(by["f"].self == 4);
  CHECK(by["f"].total == 6);  // not 4+4+4+2
  CHECK(by["g"].self == 3);
  CHECK(by["g"].total == 3);
  CHECK(by["main"].total == 7);
  CHECK(by.count("all") == 0);
  CHECK(lf::function_stats(t).front().name == "f");  // sorted by self, descending
}

TEST_CASE("write_folded round-trips through parse") {
  lf::Tree t = tree_of("x;y 1.5\nx;y;z 2\nx 3\n");
  std::string once = folded_of(t);
  lf::Tree again = tree_of(once);
  CHECK(folded_of(again) == once);
  CHECK(once == "x 3\nx;y 1.5\nx;y;z 2\n");
}
