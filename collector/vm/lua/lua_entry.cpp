// luaflame.so's entry point: require "luaflame" from a stock lua5.4.
#include "luaflame/collector.hpp"
#include "vm/lua/boundary.hpp"

extern "C" __attribute__((visibility("default"))) int luaopen_luaflame(lua_State* L) LF_LUA_ENTRY {
  return lfc::open_module(L);
}
