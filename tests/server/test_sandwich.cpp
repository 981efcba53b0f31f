// The views of issue 17: a function's sandwich cut from a view's stacks
// (recursion merged, narrow nodes left out), frame SOURCE:LINE parsing, line
// heat from a function table, and the SQLite source store.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "views/sandwich.hpp"

namespace {

// A PathSet from folded-like stacks "a;b;c" with values.
lfs::PathSet paths_of(const std::vector<std::pair<std::string, double>>& stacks) {
  lfs::PathSet p;
  std::map<std::string, uint32_t> ids;
  p.offs.push_back(0);
  for (const auto& [stack, v] : stacks) {
    for (std::string_view f : lf::split_stack(stack)) {
      auto [it, fresh] = ids.emplace(std::string(f), static_cast<uint32_t>(p.names.size()));
      if (fresh) p.names.emplace_back(f);
      p.ids.push_back(it->second);
    }
    p.offs.push_back(static_cast<uint32_t>(p.ids.size()));
    p.values.push_back(v);
  }
  return p;
}

// Folded text of a sandwich side below its function (the root "all" and the function dropped).
std::map<std::string, double> folded_of(const lfs::SandwichSide& s) {
  std::map<std::string, double> out;
  for (uint32_t i = 2; i < s.tree.size(); ++i) {
    if (s.tree.self_at(i) == 0) continue;
    std::string path;
    for (uint32_t j = i; s.tree.parent_of(j) != lf::Tree::kRoot; j = s.tree.parent_of(j))
      path = s.tree.frame_name(s.tree.frame_of(j)) + (path.empty() ? "" : ";") + path;
    out[path] += s.tree.self_at(i);
  }
  return out;
}

const std::vector<std::pair<std::string, double>> kRecursive = {
    {"main;a;rec;rec;rec;leaf", 50}, {"main;a;rec;rec", 7},         {"main;b;rec;leaf", 30},
    {"main;b;rec;other", 20},        {"main;b;rec;x;rec;other", 5}, {"main;c", 40},
};

}  // namespace

TEST_CASE("sandwich: recursion merged, each stack once") {
  lfs::PathSet p = paths_of(kRecursive);
  lfs::SandwichSide callees = lfs::make_sandwich(p, "rec", lfs::Side::callees);
  lfs::SandwichSide callers = lfs::make_sandwich(p, "rec", lfs::Side::callers);
  CHECK(callees.found);
  CHECK(callees.total == 112);  // every stack holding rec, once
  CHECK(callees.self == 7);
  CHECK(callers.total == 112);
  // Callees: below the innermost rec; callers: above the outermost, nearest first.
  CHECK(folded_of(callees) == std::map<std::string, double>{{"leaf", 80}, {"other", 25}});
  CHECK(folded_of(callers) == std::map<std::string, double>{{"a;main", 57}, {"b;main", 55}});
  CHECK(callees.tree.total_at(1) == 112);  // the function's node spans its total
}

TEST_CASE("sandwich: an unknown function, a root function, depth limit") {
  lfs::PathSet p = paths_of(kRecursive);
  CHECK_FALSE(lfs::make_sandwich(p, "nope", lfs::Side::callees).found);
  lfs::SandwichSide main_callers = lfs::make_sandwich(p, "main", lfs::Side::callers);
  CHECK(main_callers.total == 152);
  CHECK(main_callers.tree.size() == 2);  // no callers: the root and main
  lfs::SandwichSide d1 = lfs::make_sandwich(p, "main", lfs::Side::callees, 0, 1);
  CHECK(d1.tree.size() == 5);  // all, main, a, b, c
  CHECK(d1.pruned);            // deeper nodes were left out
  CHECK(d1.tree.total_at(1) == 152);
}

TEST_CASE("sandwich: narrow nodes are left out, their value stays in the parent") {
  lfs::PathSet p = paths_of({{"f;big", 990}, {"f;tiny;deeper", 10}});
  lfs::SandwichSide s = lfs::make_sandwich(p, "f", lfs::Side::callees, 0.05);
  CHECK(s.pruned);
  CHECK(folded_of(s) == std::map<std::string, double>{{"big", 990}});
  CHECK(s.tree.total_at(1) == 1000);  // widths stay true
  CHECK(s.tree.self_at(1) == 10);
}

// sandwich_info is one pass with no tree; it must agree with the depth-1 sandwich
// (the page shows one beside the other), on every function of a recursive profile.
TEST_CASE("sandwich_info: the depth-1 sandwich's callers and callees, in one pass") {
  lfs::PathSet p = paths_of(kRecursive);
  for (const char* fn : {"main", "a", "b", "c", "rec", "leaf", "other", "x", "nope"}) {
    CAPTURE(fn);
    lfs::SandwichInfo info = lfs::sandwich_info(p, fn);
    CHECK(info.view_total == 152);
    for (lfs::Side side : {lfs::Side::callers, lfs::Side::callees}) {
      lfs::SandwichSide d1 = lfs::make_sandwich(p, fn, side, 0, 1);
      CHECK(info.found == d1.found);
      if (!d1.found) continue;
      CHECK(info.total == d1.total);
      CHECK(info.self == d1.self);
      std::map<std::string, double> want;
      for (uint32_t c = d1.tree.first_child(d1.tree.first_child(lf::Tree::kRoot));
           c != lf::Tree::kNone; c = d1.tree.next_sibling(c))
        want[d1.tree.frame_name(d1.tree.frame_of(c))] = d1.tree.total_at(c);
      const auto& got = side == lfs::Side::callers ? info.callers : info.callees;
      CHECK(std::map<std::string, double>(got.begin(), got.end()) == want);
      for (std::size_t i = 1; i < got.size(); ++i) CHECK(got[i - 1].second >= got[i].second);
    }
  }
  lfs::SandwichInfo rec = lfs::sandwich_info(p, "rec");
  REQUIRE(rec.callees.size() == 2);
  CHECK(rec.callees[0] == std::pair<std::string, double>{"leaf", 80});
}

// What a page's clicks render from: made once per function and side, the same
// tree as a direct cut at the fine fraction; the warm-up's root is "main".
TEST_CASE("PathSet::side: kept per function and side, equal to a direct cut") {
  lfs::PathSet p = paths_of(kRecursive);
  CHECK(p.side("rec", lfs::Side::callees) != p.side("rec", lfs::Side::callees));  // not kept
  p.keep_sides();
  auto a = p.side("rec", lfs::Side::callees);
  CHECK(a == p.side("rec", lfs::Side::callees));
  CHECK(a != p.side("rec", lfs::Side::callers));
  CHECK(folded_of(*a) ==
        folded_of(lfs::make_sandwich(p, "rec", lfs::Side::callees, lfs::PathSet::kFineFraction)));
  for (std::size_t i = 0; i < lfs::PathSet::kMemoSides; ++i)
    p.side("f" + std::to_string(i), lfs::Side::callers);  // pushes "rec" out
  CHECK(a != p.side("rec", lfs::Side::callees));
  REQUIRE(p.root_frame() != UINT32_MAX);
  CHECK(p.names[p.root_frame()] == "main");
  CHECK(lfs::PathSet{}.root_frame() == UINT32_MAX);
}

TEST_CASE("frame_source: NAME SOURCE:LINE and NAME (SOURCE:LINE)") {
  struct Case {
    const char* frame;
    bool ok;
    const char* src;
    int64_t line;
  };
  const Case cases[] = {
      {"fib work.lua:2", true, "work.lua", 2},
      {"Json.decode lib/json.lua:120", true, "lib/json.lua", 120},
      {"game.fn_1 (game/game_1.lua:8)", true, "game/game_1.lua", 8},
      {"work.lua work.lua:0", true, "work.lua", 0},
      {"[C] string.rep", false, "", 0},
      {"main", false, "", 0},
      {"f a.lua:", false, "", 0},
      {"f a.lua:12x", false, "", 0},
  };
  for (const Case& c : cases) {
    CAPTURE(c.frame);
    std::string_view src;
    int64_t line = -1;
    CHECK(lfs::frame_source(c.frame, src, line) == c.ok);
    if (c.ok) {
      CHECK(src == c.src);
      CHECK(line == c.line);
    }
  }
}

TEST_CASE("line_heat: self per line of one file") {
  lfs::FunctionTable t;
  t.functions = {{"f a.lua:12", 30, 30},
                 {"f a.lua:10", 0, 50},
                 {"g a.lua:12", 5, 5},
                 {"h b.lua:12", 7, 7},
                 {"[C] x", 9, 9}};
  t.total = 51;
  lfs::LineHeat h = lfs::line_heat(t, "a.lua");
  CHECK(h.lines == std::vector<std::pair<int64_t, double>>{{12, 35}});
  REQUIRE(h.functions.size() == 3);
  CHECK(h.functions[0].line == 10);  // sorted by line
}

TEST_CASE("sqlite sources: put, replace, list, get, drop") {
  char tmpl[] = "/tmp/luaflame-sources-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  {
    auto s = lfs::open_sqlite_sources(dir);
    s->put_sources(1, {{"a.lua", "print(1)\n"}, {"b.lua", std::string("x\0y", 3)}});
    s->put_sources(2, {{"a.lua", "other"}});
    s->put_sources(1, {{"a.lua", "print(2)\n"}});
    CHECK(s->get_source(1, "a.lua") == std::optional<std::string>("print(2)\n"));
    CHECK(s->get_source(1, "b.lua")->size() == 3);  // bytes kept as they are
    CHECK_FALSE(s->get_source(1, "c.lua"));
    CHECK(s->list_sources(1) ==
          std::vector<std::pair<std::string, int64_t>>{{"a.lua", 9}, {"b.lua", 3}});
    s->drop_sources(1);
    CHECK(s->list_sources(1).empty());
  }
  auto again = lfs::open_sqlite_sources(dir);  // reopened: run 2's file is still there
  CHECK(again->get_source(2, "a.lua") == std::optional<std::string>("other"));
  again.reset();
  std::filesystem::remove_all(dir);
}
