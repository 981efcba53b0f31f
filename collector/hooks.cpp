// The program's own hooks while tracing. Lua keeps one hook per thread, and
// tracing needs it; debug.sethook would replace luaflame's and end the
// trace. So while tracing, debug.sethook and debug.gethook are wrapped: the
// original debug.sethook installs the program's hook (ldblib.c's hookf and
// its registry entry) exactly as without luaflame, then luaflame's hook
// goes back with the program's mask and count added, and forwards to the
// program's hook exactly the events it asked for (Session::hook_rest).
// debug.gethook answers as if the program's hook were installed.
//
// A hook set from C with lua_sethook cannot be seen: it replaces ours, the
// trace of that thread stops there, and stop() says so once (not with -q).
#include <cstdio>

#include "session.hpp"

extern "C" {
#include <lauxlib.h>
}

namespace lfc {

namespace {

const char* const kOrigSethook = "luaflame.orig.sethook";
const char* const kOrigGethook = "luaflame.orig.gethook";
const char* const kHookedThreads = "luaflame.hooked";  // weak-keyed: threads with a chained hook
lua_Hook g_hookf = nullptr;  // ldblib.c's hookf: the hook debug.sethook installs

lua_CFunction orig(lua_State* L, const char* key) {
  lua_getfield(L, LUA_REGISTRYINDEX, key);
  lua_CFunction f = lua_tocfunction(L, -1);
  lua_pop(L, 1);
  return f;
}

lua_State* target(lua_State* L) {
  return lua_type(L, 1) == LUA_TTHREAD ? lua_tothread(L, 1) : L;
}

// debug.sethook: the original, called in place (no call event of its own,
// so the program's hook sees the events it would see without luaflame).
int lf_sethook(lua_State* L) {
  lua_CFunction f = orig(L, kOrigSethook);
  if (!f) return 0;
  lua_State* T = target(L);
  f(L);
  Session* s = g_session.load(std::memory_order_relaxed);
  if (s && s->opt.trace) s->adopt_program_hook(L, T);
  return 0;
}

// debug.gethook: ldblib.c's db_gethook, answered from the chained hook.
int lf_gethook(lua_State* L) {
  Session* s = g_session.load(std::memory_order_relaxed);
  lua_State* T = target(L);
  if (!s || !s->opt.trace || lua_gethook(T) != lf_hook) {
    lua_CFunction f = orig(L, kOrigGethook);
    return f ? f(L) : 0;
  }
  const Session::Chained c = s->chained_for(T);
  if (!c.hook) {
    lua_pushnil(L);
    return 1;
  }
  if (c.hook != g_hookf) {
    lua_pushliteral(L, "external hook");
  } else {
    lua_getfield(L, LUA_REGISTRYINDEX, "_HOOKKEY");  // ldblib.c's HOOKKEY
    if (!lua_istable(L, -1)) {
      lua_pop(L, 1);
      lua_pushnil(L);
    } else {
      if (T == L)
        lua_pushthread(L);
      else
        lua_pushvalue(L, 1);
      lua_rawget(L, -2);
      lua_remove(L, -2);
    }
  }
  char mask[4];
  int i = 0;
  if (c.mask & LUA_MASKCALL) mask[i++] = 'c';
  if (c.mask & LUA_MASKRET) mask[i++] = 'r';
  if (c.mask & LUA_MASKLINE) mask[i++] = 'l';
  mask[i] = '\0';
  lua_pushstring(L, mask);
  lua_pushinteger(L, c.count);
  return 3;
}

// ldblib.c's hookf, learned on a throwaway thread with no hook (the
// program's hooks see nothing of it).
lua_Hook learn_hookf(lua_State* L, lua_CFunction sethook) {
  lua_State* T = lua_newthread(L);
  lua_sethook(T, nullptr, 0, 0);
  lua_pushcfunction(T, sethook);
  lua_pushcfunction(T, [](lua_State*) { return 0; });
  lua_pushliteral(T, "c");
  lua_Hook h = nullptr;
  if (lua_pcall(T, 2, 0, 0) == LUA_OK) h = lua_gethook(T);
  lua_settop(T, 0);
  lua_pushcfunction(T, sethook);  // and off again, registry entry included
  lua_pcall(T, 0, 0, 0);
  lua_settop(T, 0);
  lua_pop(L, 1);
  return h;
}

}  // namespace

void Session::adopt_program_hook(lua_State* L, lua_State* T) {
  begin_critical();
  if (armed && armed_L == T) {
    // Armed after debug.sethook ran: what we armed over is the program's
    // new hook, put it back (with its count progress). Armed before: the
    // program's hook replaced our one-shot; owed waits for the next signal.
    if (lua_gethook(T) == lf_hook)
      disarm();
    else
      armed = 0, armed_L = nullptr;
  }
  lua_Hook h = lua_gethook(T);
  if (h == lf_hook) {
    end_critical();
    return;
  }
  chained[T] = Chained{h, h ? lua_gethookmask(T) : 0, h ? lua_gethookcount(T) : 0};
  trace_fast_ok = false;  // every event may have to be forwarded
  lua_sethook(T, lf_hook, thread_mask(T), chained[T].count);
  end_critical();
  if (T != start_L && T != main_L) {
    // Remembered weakly, to give it its hook back at stop if it lives.
    lua_getfield(L, LUA_REGISTRYINDEX, kHookedThreads);
    if (lua_istable(L, -1)) {
      if (T == L)
        lua_pushthread(L);
      else
        lua_pushvalue(L, 1);
      lua_pushboolean(L, 1);
      lua_rawset(L, -3);
    }
    lua_pop(L, 1);
  }
}

void install_hook_wrappers(lua_State* L) {
  lua_getglobal(L, "debug");
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  lua_getfield(L, -1, "sethook");
  lua_getfield(L, -2, "gethook");
  lua_CFunction set = lua_tocfunction(L, -2), get = lua_tocfunction(L, -1);
  if (!set || !get) {
    lua_pop(L, 3);
    return;
  }
  lua_setfield(L, LUA_REGISTRYINDEX, kOrigGethook);
  lua_setfield(L, LUA_REGISTRYINDEX, kOrigSethook);
  if (!g_hookf) g_hookf = learn_hookf(L, set);
  lua_pushcfunction(L, lf_sethook);
  lua_setfield(L, -2, "sethook");
  lua_pushcfunction(L, lf_gethook);
  lua_setfield(L, -2, "gethook");
  lua_pop(L, 1);
  lua_newtable(L);
  lua_newtable(L);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, kHookedThreads);
}

void Session::restore_program_hooks(lua_State* L) {
  // Where luaflame's hook still is, the program's (or the one of before
  // start) goes back; a thread whose hook C code replaced is said once.
  auto give_back = [&](lua_State* T) {
    if (lua_gethook(T) == lf_hook) {
      const Chained c = chained_for(T);
      lua_sethook(T, c.hook, c.mask, c.count);
    } else if (!warned_hook && !opt.quiet && lua_gethook(T) != nullptr) {
      warned_hook = true;
      std::fprintf(stderr,
                   "luaflame: a hook set from C while tracing replaced luaflame's; that thread's "
                   "trace stopped there\n");
    }
  };
  give_back(start_L);
  if (main_L && main_L != start_L) give_back(main_L);
  lua_getfield(L, LUA_REGISTRYINDEX, kHookedThreads);
  if (lua_istable(L, -1)) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      lua_pop(L, 1);
      if (lua_State* T = lua_tothread(L, -1)) give_back(T);
    }
  }
  lua_pop(L, 1);
  lua_pushnil(L);
  lua_setfield(L, LUA_REGISTRYINDEX, kHookedThreads);
  // The originals back where ours still are.
  lua_getglobal(L, "debug");
  if (lua_istable(L, -1)) {
    const char* names[] = {"sethook", "gethook"};
    const char* keys[] = {kOrigSethook, kOrigGethook};
    lua_CFunction ours[] = {lf_sethook, lf_gethook};
    for (int i = 0; i < 2; ++i) {
      lua_getfield(L, -1, names[i]);
      const bool mine = lua_tocfunction(L, -1) == ours[i];
      lua_pop(L, 1);
      lua_getfield(L, LUA_REGISTRYINDEX, keys[i]);
      if (mine && !lua_isnil(L, -1))
        lua_setfield(L, -2, names[i]);
      else
        lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
}

}  // namespace lfc
