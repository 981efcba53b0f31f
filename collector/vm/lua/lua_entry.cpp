// luaflame.so's entry points: require "luaflame" from a stock interpreter,
// and the functions `luaflame attach`'s shim calls (vm/lua/attach.hpp).
#include "luaflame/collector.hpp"
#include "vm/lua/attach.hpp"
#include "vm/lua/boundary.hpp"

#define LF_EXPORT extern "C" __attribute__((visibility("default")))

LF_EXPORT int luaopen_luaflame(lua_State* L) LF_LUA_ENTRY {
  return lfc::open_module(L);
}

LF_EXPORT int LUAFLAME_ATTACH_OPEN(lua_State* L, const char* program, unsigned n) LF_LUA_ENTRY {
  return lfc::attach::open(L, program, n);
}

LF_EXPORT void LUAFLAME_ATTACH_CLOSE(lua_State* L) LF_LUA_ENTRY {
  lfc::attach::close(L);
}

LF_EXPORT int LUAFLAME_ATTACH_RESUME(lua_State* co, int entering) noexcept {
  return lfc::attach::resume(co, entering != 0) ? 1 : 0;
}

LF_EXPORT int LUAFLAME_ATTACH_SETHOOK(lua_State* L, lua_Hook f, int mask, int count) noexcept {
  return lfc::attach::host_sethook(L, f, mask, count) ||
                 lfc::attach::forked_sethook(L, f, mask, count)
             ? 1
             : 0;
}

LF_EXPORT int LUAFLAME_ATTACH_GETHOOK(lua_State* L, lua_Hook* f, int* mask, int* count) noexcept {
  return f && mask && count &&
                 (lfc::attach::host_gethook(L, *f, *mask, *count) ||
                  lfc::attach::forked_gethook(L, *f, *mask, *count))
             ? 1
             : 0;
}
