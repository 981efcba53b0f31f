// Which Lua this adapter build runs on (collector.hpp: vm_release, vm_name),
// from the headers it was compiled against.
#include "luaflame/collector.hpp"

extern "C" {
#include <lua.h>
#ifdef LUAFLAME_LUAJIT
#include <luajit.h>
#endif
}

namespace lfc {

const char* vm_release() {
#ifdef LUAFLAME_LUAJIT
  return LUAJIT_VERSION;
#else
  return LUA_RELEASE;
#endif
}

const char* vm_name() {
#ifdef LUAFLAME_LUAJIT
  return "luajit";
#elif LUA_VERSION_NUM == 501
  return "5.1";
#elif LUA_VERSION_NUM == 502
  return "5.2";
#elif LUA_VERSION_NUM == 503
  return "5.3";
#else
  return "5.4";
#endif
}

}  // namespace lfc
