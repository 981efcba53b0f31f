// Whether two Lua threads belong to one state: they share the registry.
// Lua API only (every Lua, both adapters); from the thread that runs them,
// never from a signal handler. Raises nothing (lua_checkstack first).
#pragma once

extern "C" {
#include <lua.h>
}

namespace lfc {

inline bool same_state(lua_State* a, lua_State* b) {
  if (a == b) return true;
  if (!a || !b || !lua_checkstack(a, 1) || !lua_checkstack(b, 1)) return false;
  lua_pushvalue(a, LUA_REGISTRYINDEX);
  lua_pushvalue(b, LUA_REGISTRYINDEX);
  const bool same = lua_topointer(a, -1) == lua_topointer(b, -1);
  lua_pop(a, 1);
  lua_pop(b, 1);
  return same;
}

}  // namespace lfc
