// The program's own debug hook in trace mode. LuaJIT keeps one hook per
// state, for every coroutine: a program that calls debug.sethook while
// luaflame traces (a coverage tool, a debugger, a script counting its own
// events) replaced the trace hook, and the trace stopped there, every later
// moment charged to `[C] debug.sethook`. So, while a trace runs,
// debug.sethook and debug.gethook are wrapped (JSession's
// install_hook_wrappers, restored at stop):
//   - debug.sethook calls the original in place (no call event of its
//     own), then the tracer keeps the hook it set and puts ours back with
//     that hook's line and count events (JTracer::adopt);
//   - the trace hook gives the program's hook the events of its mask, as
//     LuaJIT gave them (forward_program_hook, from trace_hook);
//   - debug.gethook answers what the program set: the original reads it
//     with the program's hook in place of ours for the call.
// Boundary: the wrappers are lua_CFunctions and the forward runs the
// program's hook, which may raise a Lua error: LuaJIT unwinds it C++-style
// through them, so they are LF_LUA_ENTRY (not noexcept) and hold no C++
// object across a call into Lua.
#include "vm/lua/boundary.hpp"
#include "vm/luajit/jsession.hpp"

namespace lfc::jit {

namespace {

// debug.sethook: upvalue 1 the original (a C function of LuaJIT's library).
int lf_sethook(lua_State* L) LF_LUA_ENTRY {
  const lua_CFunction f = lua_tocfunction(L, lua_upvalueindex(1));
  if (!f) return 0;
  f(L);
  if (JSession* j = g_jit.load()) j->adopt_program_hook(L);
  return 0;
}

// debug.gethook: upvalue 1 the original.
int lf_gethook(lua_State* L) LF_LUA_ENTRY {
  const lua_CFunction f = lua_tocfunction(L, lua_upvalueindex(1));
  if (!f) return 0;
  JSession* j = g_jit.load();
  if (!j || lua_gethook(L) != trace_hook) return f(L);
  j->show_program_hook(L);
  const int n = f(L);  // pushes only (a memory error leaves the program's hook in place)
  if (JSession* now = g_jit.load()) now->own_hook_back(L);
  return n;
}

const char* const kNames[] = {"sethook", "gethook"};

}  // namespace

void forward_program_hook(lua_State* L, lua_Debug* ar) {
  JSession* j = g_jit.load();
  if (!j) return;
  const JTracer::Chained c = j->program_hook();  // a copy: the hook may stop the session
  const int ev = ar->event == LUA_HOOKTAILRET ? LUA_HOOKRET : ar->event;
  if (c.hook && c.hook != trace_hook && (c.mask & (1 << ev))) c.hook(L, ar);
}

void JSession::install_hook_wrappers(lua_State* L) {
  lua_getglobal(L, "debug");
  if (!lua_istable(L, -1)) return lua_pop(L, 1);
  const lua_CFunction ours[] = {lf_sethook, lf_gethook};
  for (int i = 0; i < 2; ++i) {
    lua_getfield(L, -1, kNames[i]);
    if (!lua_tocfunction(L, -1)) {
      lua_pop(L, 1);
      continue;
    }
    lua_pushcclosure(L, ours[i], 1);
    hook_fns_[i] = lua_topointer(L, -1);
    lua_setfield(L, -2, kNames[i]);
  }
  lua_pop(L, 1);
}

// Puts the originals back unless the program replaced ours meanwhile.
void JSession::restore_hook_wrappers(lua_State* L) {
  lua_getglobal(L, "debug");
  if (lua_istable(L, -1)) {
    for (int i = 0; i < 2; ++i) {
      if (!hook_fns_[i]) continue;
      lua_getfield(L, -1, kNames[i]);
      if (lua_topointer(L, -1) == hook_fns_[i] && lua_getupvalue(L, -1, 1)) {
        lua_setfield(L, -3, kNames[i]);
      }
      lua_pop(L, 1);
      hook_fns_[i] = nullptr;
    }
  }
  lua_pop(L, 1);
}

}  // namespace lfc::jit
