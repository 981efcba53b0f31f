// The Lua library's own hook functions (compat.hpp, lfc::hook_api): where
// the collector's lua_sethook and lua_gethook* calls go.
#include <dlfcn.h>

#include "vm/lua/compat.hpp"

// The library's symbols themselves here, not compat.hpp's redirection.
#undef lua_sethook
#undef lua_gethook
#undef lua_gethookmask
#undef lua_gethookcount

namespace lfc::hook_api {

Fns g_fns{{&::lua_sethook}, {&::lua_gethook}, {&::lua_gethookmask}, {&::lua_gethookcount}};

// Under `luaflame attach` the symbols above are the shim's wrappers (it is
// preloaded: it comes first in the global scope). lua_gettop is not
// wrapped, so the library that defines it is the host's Lua, and its
// hook functions are looked up there, by handle.
bool resolve() noexcept {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&::lua_gettop), &info) || !info.dli_fname || !*info.dli_fname)
    return false;
  void* lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!lib) return false;
  auto* set = reinterpret_cast<SetHook>(dlsym(lib, "lua_sethook"));
  auto* get = reinterpret_cast<GetHook>(dlsym(lib, "lua_gethook"));
  auto* mask = reinterpret_cast<GetInt>(dlsym(lib, "lua_gethookmask"));
  auto* count = reinterpret_cast<GetInt>(dlsym(lib, "lua_gethookcount"));
  dlclose(lib);  // the host's own reference keeps it loaded
  if (!set || !get || !mask || !count) return false;
  g_fns.set.store(set, std::memory_order_relaxed);
  g_fns.get.store(get, std::memory_order_relaxed);
  g_fns.mask.store(mask, std::memory_order_relaxed);
  g_fns.count.store(count, std::memory_order_relaxed);
  return true;
}

}  // namespace lfc::hook_api
