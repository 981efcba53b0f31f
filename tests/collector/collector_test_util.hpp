// What the collector's in-process tests share (test_collector.cpp,
// test_collector_sampling.cpp): a real Lua 5.4 state with the luaflame module
// preloaded, and folded profiles read back as maps.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "../support/paths.hpp"
#include "core/out_tree.hpp"
#include "core/tree.hpp"
#include "luaflame/collector.hpp"
#include "vm/lua/frames.hpp"

extern "C" {
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
}

namespace lfct {

using Folded = std::map<std::string, double>;

inline Folded parse_folded(const std::string& text) {
  Folded f;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    f[line.substr(0, sp)] += std::stod(line.substr(sp + 1));
  }
  return f;
}

inline double total(const Folded& f) {
  double t = 0;
  for (const auto& kv : f) t += kv.second;
  return t;
}

// Share (percent) of the stacks that contain a frame starting with `name`.
inline double share_containing(const Folded& f, const std::string& name) {
  double in = 0;
  for (const auto& kv : f) {
    std::string s = ";" + kv.first;
    if (s.find(";" + name) != std::string::npos) in += kv.second;
  }
  return 100.0 * in / total(f);
}

// Share (percent) of the stacks whose leaf frame starts with `name`.
inline double share_leaf(const Folded& f, const std::string& name) {
  double in = 0;
  for (const auto& kv : f) {
    auto semi = kv.first.rfind(';');
    std::string leaf = semi == std::string::npos ? kv.first : kv.first.substr(semi + 1);
    if (leaf.rfind(name, 0) == 0) in += kv.second;
  }
  return 100.0 * in / total(f);
}

// A Lua state with the module preloaded; runs chunks, reads globals.
struct Lua {
  lua_State* L;
  Lua() : L(luaL_newstate()) {
    luaL_openlibs(L);
    lfc::preload_module(L);
  }
  ~Lua() {
    if (lfc::running(L)) lfc::stop(L);
    lua_close(L);
  }
  // Runs `code` (chunk name `name`); returns "" or the error with traceback.
  std::string run(const std::string& code, const std::string& name = "=test") {
    if (luaL_loadbuffer(L, code.data(), code.size(), name.c_str()) != LUA_OK) return pop_error();
    lua_getglobal(L, "debug");
    lua_getfield(L, -1, "traceback");
    lua_remove(L, -2);
    lua_insert(L, -2);
    int st = lua_pcall(L, 0, 0, -2);
    if (st != LUA_OK) return pop_error();
    lua_pop(L, 1);
    return "";
  }
  std::string pop_error() {
    std::string e = lua_tostring(L, -1) ? lua_tostring(L, -1) : "?";
    lua_settop(L, 0);
    return e;
  }
  std::string global(const char* name) {
    lua_getglobal(L, name);
    std::string s = lua_tostring(L, -1) ? lua_tostring(L, -1) : "";
    lua_pop(L, 1);
    return s;
  }
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace lfct
