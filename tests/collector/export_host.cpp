// A host that embeds Lua 5.4 and exports every function it defines (linked
// with -rdynamic, as hosts are so that C modules find the Lua API: lua5.4
// itself, nmap, HAProxy), among them two with the very names of functions
// luaflame.so defines for itself (lfc::now_ns and lfc::unix_now_ns, the
// clocks every part reads). luaflame.so must call its own: had it left
// its functions interposable, its calls would bind to these, which say so
// and exit with 3. The same stands for a host that links its own copy of
// a library the module embeds (cpp-httplib, nlohmann/json) at another
// version.
//   export_host MODULE_DIR OUTPUT: profiles a loop into OUTPUT, exits 0.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

extern "C" {
#include <lauxlib.h>
#include <lualib.h>
}

namespace lfc {

[[noreturn]] static void interposed(const char* name) {
  std::fprintf(stderr, "export_host: luaflame.so called the host's %s\n", name);
  _exit(3);
}
uint64_t now_ns() {
  interposed("lfc::now_ns");
}
uint64_t unix_now_ns() {
  interposed("lfc::unix_now_ns");
}

}  // namespace lfc

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: export_host MODULE_DIR OUTPUT\n");
    return 2;
  }
  lua_State* L = luaL_newstate();
  luaL_openlibs(L);
  const std::string script =
      "package.cpath = ... .. '/?.so'\n"
      "local lf = require 'luaflame'\n"
      "lf.start{mode = 'both', hz = 1000, quiet = true, output = select(2, ...)}\n"
      "local function work(n) local x = 0 for i = 1, n do x = x + i % 7 end return x end\n"
      "local t = {} for i = 1, 200 do t[i] = work(20000) end\n"
      "local s = lf.stop()\n"
      "assert(s.samples > 0 and s.calls >= 200, 'nothing recorded')\n";
  int status = luaL_loadstring(L, script.c_str());
  if (status == LUA_OK) {
    lua_pushstring(L, argv[1]);
    lua_pushstring(L, argv[2]);
    status = lua_pcall(L, 2, 0, 0);
  }
  if (status != LUA_OK) std::fprintf(stderr, "export_host: %s\n", lua_tostring(L, -1));
  lua_close(L);
  return status == LUA_OK ? 0 : 1;
}
