// Frame naming (collector/vm/lua/frames.hpp): one frame per displayed name, and the
// definition scanner. name_on_line
// is a hand-written matcher of three regular expressions (it replaced
// std::regex for speed); these tests keep it to them: the forms and their
// edge cases with the names expected, and the scanner against the same
// expressions, written here, on every line of Debian's Lua sources.
#include <doctest/doctest.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../support/skip.hpp"
#include "luaflame/collector.hpp"
#include "vm/lua/frames.hpp"

extern "C" {
#include <lauxlib.h>
#include <lualib.h>
}

namespace {

// What frames.cpp's scanner replaced: the earliest match of the three forms
// on the line, the first form winning at one position.
std::string regex_name(const std::string& line) {
  static const std::regex kForms[] = {
      std::regex(R"(function\s+([A-Za-z_][\w.:]*)\s*\()"),
      std::regex(R"(([A-Za-z_][\w.]*)\s*=\s*function\b)"),
      std::regex(R"(\[\s*["']([^"']+)["']\s*\]\s*=\s*function\b)"),
  };
  std::string best;
  std::size_t best_at = std::string::npos;
  for (const auto& re : kForms) {
    std::smatch m;
    if (std::regex_search(line, m, re) && static_cast<std::size_t>(m.position(0)) < best_at) {
      best_at = static_cast<std::size_t>(m.position(0));
      best = m[1].str();
    }
  }
  return best;
}

struct Case {
  const char* line;
  const char* name;  ///< "" when the line defines no named function
};

const Case kCases[] = {
    // form 1: function NAME (
    {"function foo(", "foo"},
    {"local function f(", "f"},
    {"local function f (a, b)", "f"},
    {"function a.b:c(", "a.b:c"},
    {"function M.f(x) return x end", "M.f"},
    {"function o:m()", "o:m"},
    {"function a:b.c(", "a:b.c"},
    {"function _f1(", "_f1"},
    {"function x1_y2.z_3(", "x1_y2.z_3"},
    {"\tfunction\tf\t(", "f"},
    {"  function   spaced   (", "spaced"},
    {"local\tfunction\t\tg\t(", "g"},
    {"function f", ""},                // no parenthesis on the line
    {"function (a) end", ""},          // anonymous
    {"return function(a) end", ""},    // anonymous
    {"functionx(", ""},                // not the keyword followed by space
    {"function 9f(", ""},              // a name cannot start with a digit
    {"function f-(", ""},              // '-' ends the name, '(' must follow
    {"myfunction helper(", "helper"},  // no boundary before the keyword (as the regex)
    // form 2: NAME = function
    {"x = function(", "x"},
    {"t.k = function", "t.k"},
    {"M.f = function(a)", "M.f"},
    {"local f = function()", "f"},
    {"f=function()", "f"},
    {"f\t=\tfunction\t(", "f"},
    {"x1_y2 = function()", "x1_y2"},
    {"_private9.k_2 = function", "_private9.k_2"},
    {"obj.method = function(self)", "obj.method"},
    {"x = functionx", ""},      // no word boundary after the keyword
    {"x = function_b", ""},     // '_' is a word byte
    {"x = function9", ""},      // so is a digit
    {"a == function", ""},      // '==' is not an assignment
    {"x.y:z = function", "z"},  // ':' is not in an assigned name: the match starts at z
    {"3x = function", "x"},     // a digit cannot start one: the match starts at x
    {"x = f(function() end)", ""},
    // form 3: ['NAME'] = function
    {"['f'] = function(", "f"},
    {"[\"key name\"] = function()", "key name"},
    {"[ 'a' ]=function", "a"},
    {"[\t\"b.c\"\t]\t=\tfunction", "b.c"},
    {"[''] = function", ""},       // an empty key
    {"[\"a'b\"] = function", ""},  // a quote of the other kind ends the key
    {"['f'] = functionx", ""},
    // the earliest definition on the line wins
    {"x = function() end; function y(", "x"},
    {"function y() end x = function", "y"},
    {"local t = { ['k'] = function() end, f = function() end }", "k"},
    // comments and strings are text like any other (a line-level scan)
    {"-- function commented(", "commented"},
    {"--[[ x = function ]]", "x"},
    {"print(\"function inside(\")", "inside"},
    {"local s = 'x = function'", "x"},
    {"local s = 'no definition here'", ""},
    // bytes >= 0x80 are not word bytes (the C locale's \w)
    {"\xc3\xa9t = function", "t"},
    {"", ""},
    {"   ", ""},
    {"end", ""},
};

}  // namespace

TEST_CASE("name_on_line: the three definition forms and their edge cases") {
  for (const Case& c : kCases) {
    const std::string line = c.line;
    CAPTURE(line);
    CHECK(lfc::name_on_line(line) == c.name);
    // The table's expectations are the regular expressions' answers too.
    CHECK(regex_name(line) == c.name);
  }
}

// Every line of Debian's Lua sources (luacheck, penlight, ldoc, busted,
// dkjson, lpeg's re, ... under /usr/share/lua): the scanner names exactly
// what the regular expressions name.
TEST_CASE("name_on_line agrees with the regular expressions on Debian's Lua sources") {
  namespace fs = std::filesystem;
  const fs::path root = "/usr/share/lua";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    lft::skip_case("no " + root.string() + " (Debian's Lua packages are not installed)");
  }
  std::set<fs::path> files;  // the versioned directories share files through symlinks
  for (auto it = fs::recursive_directory_iterator(
           root, fs::directory_options::follow_directory_symlink, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->path().extension() == ".lua" && it->is_regular_file(ec))
      files.insert(fs::weakly_canonical(it->path(), ec));
  std::size_t lines = 0, named = 0;
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      CAPTURE(file.string());
      CAPTURE(number);
      CAPTURE(line);
      const std::string got = lfc::name_on_line(line);
      CHECK(got == regex_name(line));
      ++lines;
      if (!got.empty()) ++named;
    }
  }
  MESSAGE(files.size() << " files, " << lines << " lines, " << named << " named");
  // Not a vacuous pass: Debian's Lua packages define thousands of functions.
  CHECK(files.size() > 10);
  CHECK(named > 1000);
}

// Regression: C functions with no name to reach them by (package.searchers'
// entries, which require runs; functions handed to a chunk) were each a
// frame of their own, all shown "[C] <anon>": the folded text had the same
// stack on several lines, and the tree sibling nodes with one label.
TEST_CASE("frames: two unnamed C functions under one caller give one folded line") {
  struct Case {
    const char* code;
    const char* stack;  ///< the unnamed functions' one line
    int calls;          ///< calls on it: one per function
  };
  const Case cases[] = {
      // two C functions of this test, called through pcall (no call-site name)
      {"local a, b = ... pcall(a) pcall(b)", "t t:0;[C] pcall;[C] <anon>", 2},
      // Lua's four package searchers (preload, Lua, C, all-in-one) under require
      {"package.path, package.cpath = '', '' pcall(require, 'luaflame_no_such_module')",
       "t t:0;[C] pcall;[C] require;[C] <anon>", 4},
  };
  for (const Case& c : cases) {
    const std::string code = c.code;
    CAPTURE(code);
    lua_State* L = luaL_newstate();
    luaL_openlibs(L);
    lfc::Options o;
    o.sample = false;
    o.trace = true;
    std::string err;
    REQUIRE_MESSAGE(lfc::start(L, o, err), err);
    REQUIRE(luaL_loadbuffer(L, code.data(), code.size(), "=t") == LUA_OK);
    lua_pushcfunction(L, [](lua_State*) { return 0; });
    lua_pushcfunction(L, [](lua_State* S) {
      lua_pushinteger(S, 1);  // a body of its own: never folded into the other
      return 1;
    });
    CHECK(lua_pcall(L, 2, 0, 0) == LUA_OK);
    std::string folded;
    CHECK(lfc::folded(L, "calls", folded, err));
    lfc::stop(L);
    lua_close(L);
    CAPTURE(folded);
    std::map<std::string, int> lines;  // stack -> lines it is on
    std::map<std::string, long> calls;
    std::istringstream in(folded);
    for (std::string line; std::getline(in, line);) {
      const auto sp = line.rfind(' ');
      REQUIRE(sp != std::string::npos);
      ++lines[line.substr(0, sp)];
      calls[line.substr(0, sp)] += std::stol(line.substr(sp + 1));
    }
    for (const auto& kv : lines) {  // no structured binding: clang 14 cannot CAPTURE one
      const std::string& stack = kv.first;
      CAPTURE(stack);
      CHECK(kv.second == 1);
    }
    CHECK(lines[c.stack] == 1);
    CHECK(calls[c.stack] == c.calls);
  }
}
