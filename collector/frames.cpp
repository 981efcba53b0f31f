// Frame naming and interning (see frames.hpp).
#include "frames.hpp"

#include <cstring>

extern "C" {
#include <lauxlib.h>
}

namespace lfc {

void sanitize_frame(std::string& s) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      out += (c == ';' || c < 0x20 || c == 0x7f) ? '_' : static_cast<char>(c);
      ++i;
      continue;
    }
    // A UTF-8 sequence: lead byte, then 1 to 3 continuation bytes.
    std::size_t len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    bool ok = len && i + len <= n && c >= 0xc2 && c <= 0xf4;
    for (std::size_t k = 1; ok && k < len; ++k) ok = (p[i + k] & 0xc0) == 0x80;
    if (ok && len == 3 && c == 0xe0) ok = p[i + 1] >= 0xa0;   // overlong
    if (ok && len == 3 && c == 0xed) ok = p[i + 1] < 0xa0;    // surrogates
    if (ok && len == 4 && c == 0xf0) ok = p[i + 1] >= 0x90;   // overlong
    if (ok && len == 4 && c == 0xf4) ok = p[i + 1] < 0x90;    // beyond U+10FFFF
    if (ok) { out.append(s, i, len); i += len; }
    else { out += '?'; ++i; }
  }
  s.swap(out);
}

namespace {

// Searches table at `t` for a value raw-equal to `fidx`; on success returns
// true with the key (a string) in `key`.
bool find_in(lua_State* L, int t, int fidx, std::string& key, int& budget) {
  lua_pushnil(L);
  while (budget-- > 0 && lua_next(L, t)) {
    if (lua_type(L, -2) == LUA_TSTRING && lua_rawequal(L, -1, fidx)) {
      key = lua_tostring(L, -2);
      lua_pop(L, 2);
      return true;
    }
    lua_pop(L, 1);
  }
  if (budget <= 0) lua_settop(L, t);  // lua_next may have stopped with a key on the stack
  return false;
}

}  // namespace

std::string global_name(lua_State* L, int fidx, int budget) {
  std::string found, key;
  int top = lua_gettop(L);
  lua_pushliteral(L, LUA_LOADED_TABLE);
  if (lua_rawget(L, LUA_REGISTRYINDEX) != LUA_TTABLE) { lua_settop(L, top); return found; }
  int loaded = lua_gettop(L);
  // Modules first: package.loaded[m][k] == f gives "m.k" ("k" for _G).
  lua_pushnil(L);
  while (found.empty() && budget > 0 && lua_next(L, loaded)) {
    if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TTABLE &&
        find_in(L, lua_gettop(L), fidx, key, budget)) {
      const char* mod = lua_tostring(L, -2);
      found = std::strcmp(mod, "_G") == 0 ? key : std::string(mod) + "." + key;
    }
    lua_pop(L, 1);
  }
  lua_settop(L, loaded);
  // Then one level into global tables: _G[t][k] == f gives "t.k".
  if (found.empty()) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    int g = lua_gettop(L);
    lua_pushnil(L);
    while (found.empty() && budget > 0 && lua_next(L, g)) {
      if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TTABLE &&
          find_in(L, lua_gettop(L), fidx, key, budget))
        found = std::string(lua_tostring(L, -2)) + "." + key;
      lua_pop(L, 1);
    }
  }
  lua_settop(L, top);
  return found;
}

uint32_t FrameTable::add(std::string text, bool c) {
  sanitize_frame(text);
  uint32_t id = names_.add(std::move(text));
  if (is_c_.size() <= id) is_c_.resize(id + 1, false);
  is_c_[id] = c;
  return id;
}

uint32_t FrameTable::named(const std::string& text) {
  auto it = synthetic_.find(text);
  if (it != synthetic_.end()) return it->second;
  uint32_t id = add(text, false);
  synthetic_.emplace(text, id);
  return id;
}

void FrameTable::preset(lua_CFunction f, const std::string& name) {
  c_[reinterpret_cast<const void*>(f)] = add(name, true);
}

uint32_t FrameTable::of(lua_State* L, lua_Debug* ar, bool leaf_line) {
  return ar->what[0] == 'C' ? of_c(L, ar) : of_lua(L, ar, leaf_line);
}

uint32_t FrameTable::of_lua(lua_State* L, lua_Debug* ar, bool leaf_line) {
  const int line = leaf_line && ar->currentline > 0 ? ar->currentline : ar->linedefined;
  LuaKey key{ar->source, line};
  auto& map = lua_[leaf_line ? 1 : 0];
  auto it = map.find(key);
  if (it != map.end() && it->second.short_src == ar->short_src) return it->second.id;
  std::string name;
  if (ar->what[0] == 'm') {
    // The main chunk is named after its file.
    const char* base = std::strrchr(ar->short_src, '/');
    name = base ? base + 1 : ar->short_src;
  } else {
    if (lua_getinfo(L, "f", ar)) {
      name = global_name(L, lua_gettop(L));
      lua_pop(L, 1);
    }
    if (name.empty() && lua_getinfo(L, "n", ar) && ar->name && *ar->name) name = ar->name;
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
  if (it != c_.end()) { lua_pop(L, 1); return it->second; }
  std::string name = global_name(L, lua_gettop(L));
  lua_pop(L, 1);
  if (name.empty() && lua_getinfo(L, "n", ar) && ar->name && *ar->name) name = ar->name;
  if (name.empty()) name = "<anon>";
  uint32_t id = add("[C] " + name, true);
  c_[fn] = id;
  return id;
}

std::size_t FrameTable::memory_bytes() const {
  std::size_t b = names_.memory_bytes() + is_c_.capacity() / 8;
  for (const auto& m : lua_) b += m.size() * (sizeof(LuaKey) + sizeof(LuaEntry) + 48);
  b += c_.size() * 48 + synthetic_.size() * 64;
  return b;
}

}  // namespace lfc
