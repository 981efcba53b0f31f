// Frame naming and interning (see frames.hpp).
#include "vm/lua/frames.hpp"

#include "core/text.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>

extern "C" {
#include <lauxlib.h>
}

namespace lfc {

namespace {

// A function stored under several names (penlight's `List.concat =
// table.concat`) gets the same one in every run: Lua 5.4 seeds its string
// hashes per state, so the order lua_next visits a table in changes from run
// to run, and "the first match" did too. The best of all matches wins: a
// name that is not a deprecated alias, then the shortest text, then the
// smallest in byte order.
//
// Lua 5.1's deprecated aliases (its manual, and lstrlib.c/lmathlib.c's
// LUA_COMPAT_GFIND and LUA_COMPAT_MOD): the same C function as the name a
// program calls, and shorter, so they would win.
bool deprecated(const std::string& name) {
  return name == "string.gfind" || name == "math.mod";
}
void offer(std::string& best, std::string candidate) {
  const bool dep = deprecated(candidate), best_dep = !best.empty() && deprecated(best);
  if (best.empty() || (best_dep && !dep) ||
      (dep == best_dep &&
       (candidate.size() < best.size() || (candidate.size() == best.size() && candidate < best))))
    best = std::move(candidate);
}

// Calls visit(key) for every string key of the table at `t` (the top of
// the stack), with its value on top. Visits at most `budget` entries (past
// it a best name may again depend on the visiting order: only in programs
// with tens of thousands of module entries). Leaves the stack at `t`.
template <class Visit>
void each_named(lua_State* L, int t, int& budget, Visit&& visit) {
  lua_pushnil(L);
  while (budget-- > 0 && lua_next(L, t)) {
    if (lua_type(L, -2) == LUA_TSTRING) visit(lua_tostring(L, -2));
    lua_pop(L, 1);
  }
  if (budget <= 0) lua_settop(L, t);  // lua_next may have stopped with a key on the stack
}

// Offers `prefix` + every string key of the table at `t` whose value is
// raw-equal to `fidx`.
void find_in(lua_State* L, int t, int fidx, const std::string& prefix, std::string& best,
             int& budget) {
  each_named(L, t, budget, [&](const char* key) {
    if (lua_rawequal(L, -1, fidx)) offer(best, prefix + key);
  });
}

// Character classes of the forms below (the C locale's, as std::regex's
// \w and \s were: bytes >= 0x80 are neither).
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}
bool is_alpha_(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_word(char c) {
  return is_alpha_(c) || (c >= '0' && c <= '9');
}

// The three forms, each tried at one position `i` of `t`; on a match the
// captured name. Hand-written matchers of what were the regular expressions
//   1  function\s+([A-Za-z_][\w.:]*)\s*\(
//   2  ([A-Za-z_][\w.]*)\s*=\s*function\b
//   3  \[\s*["']([^"']+)["']\s*\]\s*=\s*function\b
// (each is deterministic: a greedy run is followed by a byte it cannot
// hold, so no backtracking is lost). std::regex took 125,000 instructions
// a frame on luacheck's sources. tests/collector/test_frames.cpp keeps the
// scanner to these expressions: its forms and edge cases, and the same
// answer as the expressions on every line of Debian's Lua sources.
using View = std::string_view;

std::size_t skip_space(View t, std::size_t j) {
  while (j < t.size() && is_space(t[j])) ++j;
  return j;
}

// "function" at j followed by a word boundary: the end after it, or npos.
std::size_t keyword_function(View t, std::size_t j, bool boundary) {
  if (t.compare(j, 8, "function") != 0) return View::npos;
  j += 8;
  if (boundary && j < t.size() && is_word(t[j])) return View::npos;
  return j;
}

bool form_function_name(View t, std::size_t i, View& name) {
  std::size_t j = keyword_function(t, i, false);
  if (j == View::npos || j >= t.size() || !is_space(t[j])) return false;
  j = skip_space(t, j);
  if (j >= t.size() || !is_alpha_(t[j])) return false;
  const std::size_t b = j++;
  while (j < t.size() && (is_word(t[j]) || t[j] == '.' || t[j] == ':')) ++j;
  const std::size_t e = j;
  j = skip_space(t, j);
  if (j >= t.size() || t[j] != '(') return false;
  name = t.substr(b, e - b);
  return true;
}

bool form_assign(View t, std::size_t i, View& name) {
  if (!is_alpha_(t[i])) return false;
  std::size_t j = i + 1;
  while (j < t.size() && (is_word(t[j]) || t[j] == '.')) ++j;
  const std::size_t e = j;
  j = skip_space(t, j);
  if (j >= t.size() || t[j] != '=') return false;
  if (keyword_function(t, skip_space(t, j + 1), true) == View::npos) return false;
  name = t.substr(i, e - i);
  return true;
}

bool form_bracket(View t, std::size_t i, View& name) {
  auto quote = [](char c) { return c == '"' || c == '\''; };
  if (t[i] != '[') return false;
  std::size_t j = skip_space(t, i + 1);
  if (j >= t.size() || !quote(t[j])) return false;
  const std::size_t b = ++j;
  while (j < t.size() && !quote(t[j])) ++j;
  if (j == b || j >= t.size()) return false;
  const std::size_t e = j;
  j = skip_space(t, j + 1);
  if (j >= t.size() || t[j] != ']') return false;
  j = skip_space(t, j + 1);
  if (j >= t.size() || t[j] != '=') return false;
  if (keyword_function(t, skip_space(t, j + 1), true) == View::npos) return false;
  name = t.substr(b, e - b);
  return true;
}

}  // namespace

// The earliest definition on the line wins (at one position, the forms in
// the order above), as regex_search's earliest match did.
std::string name_on_line(const std::string& text) {
  const View t(text);
  for (std::size_t i = 0; i < t.size(); ++i) {
    View name;
    if (form_function_name(t, i, name) || form_assign(t, i, name) || form_bracket(t, i, name))
      return std::string(name);
  }
  return {};
}

int functions_on_line(const std::string& text) {
  int n = 0;
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (std::size_t at = text.find("function"); at != std::string::npos;
       at = text.find("function", at + 8))
    if ((at == 0 || !word(text[at - 1])) && (at + 8 >= text.size() || !word(text[at + 8]))) ++n;
  return n;
}

bool FrameTable::definition_name(const char* source, int line, std::string& name, bool& several) {
  several = false;
  // '@file' or the chunk's own text; '=name' has no text to read.
  if (!source || source[0] == '=' || line <= 0) return false;
  std::string key = source[0] == '@'
                        ? std::string(source)
                        : std::string("=") + std::to_string(std::hash<std::string>()(source));
  auto it = sources_.find(key);
  if (it == sources_.end()) {
    std::vector<std::string> lines;
    std::string text;
    if (source[0] == '@') {
      std::ifstream in(source + 1, std::ios::binary);
      if (in) {
        std::ostringstream ss;
        ss << in.rdbuf();
        text = ss.str();
      }
    } else {
      text = source;
    }
    if (text.size() > (std::size_t{16} << 20)) text.clear();  // not read: too big to keep
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) lines.push_back(std::move(l));
    it = sources_.emplace(std::move(key), std::move(lines)).first;
  }
  if (it->second.empty()) return false;
  if (static_cast<std::size_t>(line) <= it->second.size()) {
    const std::string& text = it->second[static_cast<std::size_t>(line) - 1];
    several = functions_on_line(text) > 1;
    if (!several) name = name_on_line(text);
  }
  return true;
}

std::string global_name(lua_State* L, int fidx, int budget) {
  std::string found;
  int top = lua_gettop(L);
  lua_pushliteral(L, LUA_LOADED_TABLE);
  if (lua_rawget(L, LUA_REGISTRYINDEX) != LUA_TTABLE) {
    lua_settop(L, top);
    return found;
  }
  int loaded = lua_gettop(L);
  // Modules first: package.loaded[m][k] == f gives "m.k" ("k" for _G).
  lua_pushnil(L);
  while (budget > 0 && lua_next(L, loaded)) {
    if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TTABLE) {
      const char* mod = lua_tostring(L, -2);
      const std::string prefix = std::strcmp(mod, "_G") == 0 ? "" : std::string(mod) + ".";
      find_in(L, lua_gettop(L), fidx, prefix, found, budget);
    }
    lua_settop(L, loaded + 1);  // the key, for lua_next
  }
  lua_settop(L, loaded);
  // Then one level into global tables: _G[t][k] == f gives "t.k".
  if (found.empty()) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    int g = lua_gettop(L);
    lua_pushnil(L);
    while (budget > 0 && lua_next(L, g)) {
      if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TTABLE)
        find_in(L, lua_gettop(L), fidx, std::string(lua_tostring(L, -2)) + ".", found, budget);
      lua_settop(L, g + 1);
    }
  }
  lua_settop(L, top);
  return found;
}

uint32_t FrameTable::add(std::string text, bool c) {
  sanitize_frame(text);
  auto it = by_text_.find(text);
  if (it != by_text_.end()) {
    // The same text for a C function and not ("[C] ?" from named): a C frame.
    if (c) is_c_[it->second] = true;
    return it->second;
  }
  const uint32_t fresh = names_.size();
  const uint32_t id = names_.add(std::move(text));
  if (is_c_.size() <= id) is_c_.resize(id + 1, false);
  is_c_[id] = c;
  // Past FrameNames::kMax every text gets the overflow frame: not this text's.
  if (id == fresh) by_text_.emplace(names_[id], id);
  return id;
}

uint32_t FrameTable::named(const std::string& text) {
  auto it = by_text_.find(text);  // a clean text is its own sanitized form
  return it != by_text_.end() ? it->second : add(text, false);
}

void FrameTable::preset(lua_CFunction f, const std::string& name) {
  c_[reinterpret_cast<const void*>(f)] = add(name, true);
}

uint32_t FrameTable::of(lua_State* L, lua_Debug* ar, bool leaf_line) {
  return ar->what[0] == 'C' ? of_c(L, ar) : of_lua(L, ar, leaf_line);
}

uint32_t FrameTable::of_lua(lua_State* L, lua_Debug* ar, bool leaf_line) {
  const int line = leaf_line && ar->currentline > 0 ? ar->currentline : ar->linedefined;
  LuaKey key{ar->source, line, proto_of ? proto_of(L, ar) : nullptr};
  auto& map = lua_[leaf_line ? 1 : 0];
  auto it = map.find(key);
  if (it != map.end() && it->second.short_src == ar->short_src) return it->second.id;
  std::string name;
  if (ar->what[0] == 'm') {
    // The main chunk is named after its file.
    const char* base = std::strrchr(ar->short_src, '/');
    name = base ? base + 1 : ar->short_src;
  } else {
    // The same name in every run, whatever call was seen first: the
    // definition's own text, else a global or module name; the call site's
    // name ("n", which changes with the caller) only when no text is there.
    // A line that defines several functions (`local a, b = function ...
    // end, function ... end`, minified code) names none: there the call
    // site's name tells them apart.
    bool several = false;
    const bool has_text = definition_name(ar->source, ar->linedefined, name, several);
    if (name.empty() && lua_getinfo(L, "f", ar)) {
      name = global_name(L, lua_gettop(L));
      lua_pop(L, 1);
    }
    if (name.empty() && (!has_text || several) && lua_getinfo(L, "n", ar) && ar->name && *ar->name)
      name = ar->name;
    if (name.empty()) name = "<anon>";
  }
  std::string text = name + " " + ar->short_src + ":" + std::to_string(line);
  uint32_t id = add(std::move(text), false);
  map[key] = LuaEntry{ar->short_src, id};
  if (sources) sources->note(ar->short_src, ar->source);
  return id;
}

uint32_t FrameTable::of_c(lua_State* L, lua_Debug* ar) {
  if (!lua_getinfo(L, "f", ar)) return named("[C] ?");
  const void* fn = reinterpret_cast<const void*>(lua_tocfunction(L, -1));
  auto it = c_.find(fn);
  if (it != c_.end()) {
    lua_pop(L, 1);
    return it->second;
  }
  std::string name = global_name(L, lua_gettop(L));
  lua_pop(L, 1);
  // A metamethod with no other name: "__close", "__gc", "__index"...
  if (name.empty() && lua_getinfo(L, "n", ar) && ar->name && *ar->name)
    name = std::strcmp(ar->namewhat, "metamethod") == 0 && std::strncmp(ar->name, "__", 2) != 0
               ? std::string("__") + ar->name
               : std::string(ar->name);
  if (name.empty()) name = "<anon>";
  uint32_t id = add("[C] " + name, true);
  c_[fn] = id;
  return id;
}

// The standard library's C functions under their own names, whatever other
// module holds them too (penlight's `List.concat = table.concat`,
// `compat.load = load`) and whichever was seen first: fixed at start, the
// libraries in a fixed order, the best name within one (offer). Raw reads of
// package.loaded only; no Lua call.
void FrameTable::preset_stdlib(lua_State* L) {
  static const char* const kLibs[] = {"_G", "string",    "table", "math",  "io",
                                      "os", "coroutine", "utf8",  "debug", "package"};
  const int top = lua_gettop(L);
  lua_pushliteral(L, LUA_LOADED_TABLE);
  if (lua_rawget(L, LUA_REGISTRYINDEX) == LUA_TTABLE) {
    const int loaded = lua_gettop(L);
    for (const char* lib : kLibs) {
      lua_pushstring(L, lib);
      if (lua_rawget(L, loaded) == LUA_TTABLE) preset_lib(L, lua_gettop(L), lib);
      lua_settop(L, loaded);
    }
  }
  lua_settop(L, top);
}

void FrameTable::preset_lib(lua_State* L, int t, const char* lib) {
  const std::string prefix = std::strcmp(lib, "_G") == 0 ? "" : std::string(lib) + ".";
  std::unordered_map<const void*, std::string> best;
  int budget = std::numeric_limits<int>::max();  // a library table: all of it
  each_named(L, t, budget, [&](const char* key) {
    const void* f = reinterpret_cast<const void*>(lua_tocfunction(L, -1));
    if (f && !c_.count(f)) offer(best[f], prefix + key);
  });
  // Interned in name order, so frame ids do not follow the hash order either.
  std::vector<std::pair<std::string, const void*>> named;
  named.reserve(best.size());
  for (auto& [f, name] : best) named.emplace_back(std::move(name), f);
  std::sort(named.begin(), named.end());
  for (auto& [name, f] : named) c_[f] = add("[C] " + name, true);
}

// The C functions that iterators and buffers are made of, named after what
// makes them: found by making one of each on a hook-less thread.
void FrameTable::preset_makers(lua_State* L) {
  struct Maker {
    const char* code;
    const char* name;
  };
  static const Maker kMakers[] = {
      {"return (ipairs({}))", "[C] ipairs iterator"},
      {"return (string.gmatch('', ''))", "[C] string.gmatch iterator"},
      {"return (utf8.codes(''))", "[C] utf8.codes iterator"},
      {"return (io.stdin:lines())", "[C] io.lines iterator"},
      {"local b = getmetatable(io.stdout) return b and b.__gc", "[C] file __gc"},
  };
  lua_State* T = lua_newthread(L);
  lua_sethook(T, nullptr, 0, 0);
  for (const Maker& m : kMakers) {
    if (luaL_loadstring(T, m.code) == LUA_OK && lua_pcall(T, 0, 1, 0) == LUA_OK) {
      if (lua_CFunction f = lua_tocfunction(T, -1)) {
        if (!c_.count(reinterpret_cast<const void*>(f))) preset(f, m.name);
      }
    }
    lua_settop(T, 0);
  }
  // lauxlib's buffer box: its __close (and __gc) ends every long
  // string.rep, table.concat, string.format...
  // LUAL_BUFFERSIZE below is Lua's sizeof*sizeof; the lambda is a macro
  // argument, so clang-tidy reads its NOLINT at the macro's line.
  // NOLINTNEXTLINE(bugprone-sizeof-expression)
  lua_pushcfunction(T, [](lua_State* S) noexcept {
    luaL_Buffer b;
    (void)luaL_buffinitsize(S, &b, 4 * LUAL_BUFFERSIZE);  // big enough for a box
    lua_CFunction f = nullptr;
    if (lua_type(S, -1) == LUA_TUSERDATA && lua_getmetatable(S, -1)) {
      lua_getfield(S, -1, "__close");
      f = lua_tocfunction(S, -1);
      lua_pop(S, 2);
    }
    luaL_pushresultsize(&b, 0);  // closes the box where it is (its to-be-closed slot)
    lua_pushlightuserdata(S, reinterpret_cast<void*>(f));
    return 1;
  });
  if (lua_pcall(T, 0, 1, 0) == LUA_OK) {
    if (auto f = reinterpret_cast<lua_CFunction>(lua_touserdata(T, -1))) {
      if (!c_.count(reinterpret_cast<const void*>(f))) preset(f, "[C] buffer __close");
    }
  }
  lua_settop(T, 0);
  lua_pop(L, 1);
}

std::size_t FrameTable::memory_bytes() const {
  std::size_t b = names_.memory_bytes() + is_c_.capacity() / 8;
  for (const auto& m : lua_) b += m.size() * (sizeof(LuaKey) + sizeof(LuaEntry) + 48);
  b += c_.size() * 48 + by_text_.size() * 64;
  return b;
}

}  // namespace lfc
