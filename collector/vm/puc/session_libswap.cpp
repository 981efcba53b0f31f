// Library functions swapped for luaflame's while profiling (session.hpp:
// LibSwap): debug.sethook/gethook (session_hooks.cpp) and coroutine's
// create/resume/wrap (session_coroutines.cpp). The originals are kept in
// the registry and put back at stop where ours still are.
// Boundary: called on the Lua thread at start (under a protected call) and
// at stop. They may raise a Lua error (memory, or a metamethod of the
// library's table) and hold no C++ object with a destructor.
#include "vm/puc/session.hpp"

namespace lfc {

void swap_library(lua_State* L, const char* lib, const LibSwap* swaps, std::size_t n) {
  lua_getglobal(L, lib);
  if (lua_istable(L, -1))
    for (const LibSwap* e = swaps; e != swaps + n; ++e) {
      lua_getfield(L, -1, e->name);
      // Ours already (a run left behind in a forked child, whose run starts
      // again: docs/attach.md): the original stays the one kept then.
      if (lua_tocfunction(L, -1) == e->ours) {
        lua_pop(L, 1);
        continue;
      }
      lua_setfield(L, LUA_REGISTRYINDEX, e->key);
      lua_pushcfunction(L, e->ours);
      lua_setfield(L, -2, e->name);
    }
  lua_pop(L, 1);
}

void restore_library(lua_State* L, const char* lib, const LibSwap* swaps, std::size_t n) {
  lua_getglobal(L, lib);
  if (lua_istable(L, -1))
    for (const LibSwap* e = swaps; e != swaps + n; ++e) {
      lua_getfield(L, -1, e->name);
      const bool mine = lua_tocfunction(L, -1) == e->ours;
      lua_pop(L, 1);
      lua_getfield(L, LUA_REGISTRYINDEX, e->key);
      if (mine && !lua_isnil(L, -1))
        lua_setfield(L, -2, e->name);
      else
        lua_pop(L, 1);
    }
  lua_pop(L, 1);
}

}  // namespace lfc
