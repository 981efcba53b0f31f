// The check of jlayout.hpp's reads against the running LuaJIT.
#include "vm/luajit/jlayout.hpp"

extern "C" {
#include <lauxlib.h>
}

namespace lfc::jit::layout {

namespace {

// What probe_hook saw: Lua and other functions whose reads matched the
// API, and the first read that did not. probe() runs on the Lua thread of
// the one LuaJIT session (jsession.cpp: one per process), not in parallel.
struct Seen {
  int lua = 0, other = 0;
  const char* bad = nullptr;
};
Seen g_seen;

// A Lua function's prototype as lua_getinfo "S" describes it: its lines,
// and a chunk name whose text is the source (strdata: just after the GCstr).
bool proto_matches(const void* fn, const lua_Debug& ar) {
  const Ident id = ident_of(fn);
  const char* proto = static_cast<const char*>(id.key) - kProtoSize;
  const auto* chunk = static_cast<const char*>(id.chunk);
  return id.line == ar.linedefined &&
         id.line + at<int>(proto, kProtoNumline) == ar.lastlinedefined && chunk &&
         ar.source > chunk && ar.source - chunk <= 64;
}

// Boundary: a C hook; it raises no Lua error (lua_getinfo "Sf" on the
// hook's own frame does not) and throws nothing.
void probe_hook(lua_State* L, lua_Debug* ar) noexcept {
  if (ar->event != LUA_HOOKCALL || g_seen.bad) return;
  // Before anything is read through lua_State.stack: the hook's frame link
  // lies just below lua_State.base (lj_dispatch.c's callhook), both loads.
  const char* stack = at<const char*>(L, kStateStack);
  if (!stack ||
      at<const char*>(L, kStateBase) != stack + (static_cast<std::size_t>(ar->i_ci) + 1) * 8) {
    g_seen.bad = "lua_State.stack and .base differ";
    return;
  }
  const void* fn = hook_func(L, *ar);
  lua_Debug up;
  const std::int64_t slot = ar->i_ci;
  const std::int64_t want =
      lua_getstack(L, 1, &up) ? slot - (static_cast<std::int64_t>(up.i_ci) - slot) / 65535 : -1;
  if (caller_slot(L, slot) != want) {
    g_seen.bad = "a frame link (the caller's slot) differs";
    return;
  }
  if (!lua_getinfo(L, "Sf", ar)) {
    g_seen.bad = "lua_getinfo failed in a hook";
    return;
  }
  const void* api = lua_topointer(L, -1);
  const bool lua_fn = !lua_iscfunction(L, -1);
  lua_pop(L, 1);
  if (fn != api)
    g_seen.bad = "a frame's function slot (lua_State.stack) differs";
  else if (lua_fn != (at<std::uint8_t>(fn, kFuncFfid) == 0))
    g_seen.bad = "GCfunc.ffid differs";
  else if (lua_fn && !proto_matches(fn, *ar))
    g_seen.bad = "GCproto (firstline, numline, chunkname) differs";
  else
    ++(lua_fn ? g_seen.lua : g_seen.other);
}

// Lua calls (the chunk, f, g and f again by a tail call, a vararg
// function, a comparator called from C, a metamethod) and fast functions
// (tostring, string.rep, pcall, table.sort, setmetatable), every call
// event checked.
int probe_body(lua_State* L) {
  static const char kChunk[] =
      "local function f() return 1 end\n"
      "local g = function()\n  return f()\nend\n"
      "local function v(...) return f(...) end\n"
      "f() g() tostring(1) string.rep('x', 2) v(1, 2) pcall(v, 3)\n"
      "table.sort({3, 1, 2}, function(a, b) return a < b end)\n"
      "local t = setmetatable({}, {__index = function(_, k) return f() end}) local _ = t.x";
  if (luaL_loadbuffer(L, kChunk, sizeof kChunk - 1, "=luaflame.probe") != 0) return 0;
  lua_call(L, 0, 0);
  return 0;
}

// What host_probe_body saw, on the threads probe_host resumes: where
// global_State holds the running thread (offsets, 8 at most, kept by both
// threads), and whether the thread's cframe was set while it ran.
struct HostSeen {
  const char* g = nullptr;
  int threads = 0;
  bool inside = false;
  bool resumed = false;  ///< both threads' cframe as described
  std::size_t n = 0;
  std::size_t off[8] = {};
};
HostSeen g_host;
constexpr std::size_t kGlobalScan = 1024;  // bytes of global_State searched (jit_State follows it)

// Boundary: a C function lua_resume runs as a new thread's body, called
// from probe_host; it reads, raises nothing and throws nothing.
int host_probe_body(lua_State* co) noexcept {
  HostSeen& h = g_host;
  h.inside = at<const void*>(co, kStateCframe) != nullptr;
  if (h.threads++ == 0) {
    for (std::size_t off = 0; off < kGlobalScan; off += 8)
      if (at<const void*>(h.g, off) == co && h.n++ < 8) h.off[h.n - 1] = off;
    return 0;
  }
  if (h.n > 8) return 0;  // too many: probe_host says so
  std::size_t kept = 0;
  for (std::size_t i = 0; i < h.n; ++i)
    if (at<const void*>(h.g, h.off[i]) == co) h.off[kept++] = h.off[i];
  h.n = kept;
  return 0;
}

// A new thread resumed from C runs host_probe_body: its cframe null
// before, set inside, null again after.
bool resume_probe(lua_State* L) {
  lua_State* co = lua_newthread(L);  // anchored on L's stack
  if (at<const void*>(co, kStateCframe)) return false;
  lua_pushcfunction(co, host_probe_body);
  g_host.inside = false;
  int nres = 0;
  return lua_resume(co, L, 0, &nres) == 0 && g_host.inside && !at<const void*>(co, kStateCframe);
}

// Under lua_cpcall (lua_newthread may raise).
int host_probe_main(lua_State* L) {
  const bool first = resume_probe(L);         // finds the places naming its thread
  g_host.resumed = first && resume_probe(L);  // keeps those naming the second's
  return 0;
}
int host_probe_noop(lua_State*) {
  return 0;
}
void host_probe_hook(lua_State*, lua_Debug*) {}

// global_State.hookmask: the one byte among the first kMaskScan whose low
// nibble follows lua_sethook's masks (call; return and line; count; none)
// while its high bits stay (dispatchmode, beside it, follows the first two
// too: the count tells them apart). L's hook is off on entry and on return.
std::size_t find_hookmask(lua_State* L, const char* g) {
  constexpr std::size_t kMaskScan = 512;
  constexpr int kSets = 4;
  static const int kMasks[kSets] = {LUA_MASKCALL, LUA_MASKRET | LUA_MASKLINE, LUA_MASKCOUNT, 0};
  unsigned char seen[kSets][kMaskScan];
  for (int i = 0; i < kSets; ++i) {
    lua_sethook(L, kMasks[i] ? host_probe_hook : nullptr, kMasks[i], kMasks[i] ? 1000000 : 0);
    std::memcpy(seen[i], g, kMaskScan);
  }
  std::size_t found = 0, n = 0;
  for (std::size_t off = 1; off < kMaskScan; ++off) {
    bool ok = true;
    for (int i = 0; i < kSets && ok; ++i)
      ok = (seen[i][off] & 0x0f) == kMasks[i] && (seen[i][off] & 0xf0) == (seen[0][off] & 0xf0);
    if (ok) found = off, ++n;
  }
  return n == 1 ? found : 0;
}

}  // namespace

// A debug hook (ours in trace mode, the program's) makes LuaJIT's
// dispatch keep the last hooked thread in jit_State too (J->L, just past
// global_State): it is off while the probe runs, as probe() does.
bool probe_host(lua_State* L, HostWatch& w, std::string& why, std::string& gc_why) {
  if (sizeof(void*) != 8) return why = "not a 64-bit LuaJIT", false;
  const auto* g = at<const char*>(L, kStateGlref);
  void* ud = nullptr;
  const lua_Alloc f = lua_getallocf(L, &ud);
  if (!g || std::memcmp(g, &f, sizeof f) != 0 || at<void*>(g, 8) != ud)
    return gc_why = why = "lua_State.glref differs", false;
  g_host = HostSeen{};
  g_host.g = g;
  const lua_Hook hook = lua_gethook(L);
  const int mask = lua_gethookmask(L), count = lua_gethookcount(L);
  lua_sethook(L, nullptr, 0, 0);
  w.g = g;
  w.hookmask = find_hookmask(L, g);
  if (!w.hookmask) gc_why = "global_State.hookmask not found";
  const int top = lua_gettop(L);
  bool ok = lua_cpcall(L, host_probe_main, nullptr) == 0 && g_host.resumed;
  lua_settop(L, top);
  // cur_L names the last thread resumed; entering the VM on L names L again.
  ok = lua_cpcall(L, host_probe_noop, nullptr) == 0 && ok;
  lua_sethook(L, hook, mask, count);
  if (!ok) return why = "lua_State.cframe differs", false;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < g_host.n && g_host.n <= 8; ++i)
    if (at<const void*>(g, g_host.off[i]) == L) g_host.off[kept++] = g_host.off[i];
  if (kept != 1) return why = "global_State.cur_L not found", false;
  w.cur_l = g_host.off[0];
  return true;
}

bool probe(lua_State* L, std::string& why) {
  if (sizeof(void*) != 8) return why = "not a 64-bit LuaJIT", false;
  const lua_Hook hook = lua_gethook(L);
  const int mask = lua_gethookmask(L), count = lua_gethookcount(L);
  g_seen = Seen{};
  lua_sethook(L, probe_hook, LUA_MASKCALL, 0);  // LuaJIT's hook is the state's
  const int top = lua_gettop(L);
  const int st = lua_cpcall(L, probe_body, nullptr);
  lua_settop(L, top);
  lua_sethook(L, hook, mask, count);
  if (st != 0) return why = "the layout probe failed", false;
  if (g_seen.bad) return why = g_seen.bad, false;
  if (g_seen.lua < 4 || g_seen.other < 2) return why = "the probe's calls were not all seen", false;
  return true;
}

}  // namespace lfc::jit::layout
