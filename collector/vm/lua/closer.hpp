// The closer: a userdata in the registry whose finalizer ends the run when
// lua_close collects it, so that a run never outlives its state.
//
// A run stopped by luaflame.stop() drops its closer from the registry, but
// the userdata lives on until a later collection finalizes it, possibly
// while a newer run is on: each closer therefore carries the serial of the
// run that made it, and its finalizer acts only when that run is the one
// running (otherwise a start/stop/start sequence had the old closer stop the
// new run at the next collection).
//
// Lua API calls that may raise (memory errors): call from the Lua thread,
// under the caller's protected call, with no C++ object alive in between.
// Serials are unique in the process (an atomic counter): the Lua threads of
// several states start runs at once (docs/attach.md, "States and threads").
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

extern "C" {
#include <lua.h>
}

namespace lfc::closer {

inline constexpr const char* kKey = "luaflame.closer";

/// Makes the closer of a new run, with finalizer `on_close`, and stores it
/// in the registry. Returns the run's serial (never 0).
inline std::uint64_t add(lua_State* L, lua_CFunction on_close) {
  static std::atomic<std::uint64_t> next{0};
  const std::uint64_t serial = next.fetch_add(1, std::memory_order_relaxed) + 1;
  void* box = lua_newuserdatauv(L, sizeof serial, 0);
  std::memcpy(box, &serial, sizeof serial);
  lua_newtable(L);
  lua_pushcfunction(L, on_close);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, kKey);
  return serial;
}

/// The serial of the closer a finalizer was called with (argument 1).
inline std::uint64_t serial_of(lua_State* L) {
  const void* box = lua_touserdata(L, 1);
  std::uint64_t serial = 0;
  if (box) std::memcpy(&serial, box, sizeof serial);
  return serial;
}

/// Drops the running closer from the registry (a stopped run's).
inline void drop(lua_State* L) {
  lua_pushnil(L);
  lua_setfield(L, LUA_REGISTRYINDEX, kKey);
}

}  // namespace lfc::closer
