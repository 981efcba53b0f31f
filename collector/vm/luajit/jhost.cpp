// A host's coroutine.resume, coroutine.wrap and ngx.thread.spawn, wrapped
// in Lua while a session runs (JSession's install_host_resume and
// restore_host_spawn). A host's resume (OpenResty's, in a request:
// ngx_lua's C resume yields the request's thread to nginx, whose C code
// resumes the coroutine later) is wrapped in Lua, so that a yield through
// it crosses no C frame of ours; so is its coroutine.wrap when the
// function it makes is a C closure over the coroutine (ngx_lua's and
// LuaJIT's are). The wrappers tell who resumes whom and tail-call the
// host's function, so that it sees the stack it saw before: its error
// messages name the same caller and position. The link goes into a
// registry table weak in keys and values (enter's upvalue): a thread is
// never kept alive by it, and the sampler's walk reads a thread from it
// only while the thread lives (jframes.cpp, which also checks that the
// resumer is still inside a resume). The sampler shows a coroutine under
// the frames of the threads that resumed it; the tracer hangs its frames
// there.
//
// ngx.thread.spawn(f, ...) makes a thread that nginx's C code runs, and
// runs on by itself while its spawner goes on: it belongs under the
// spawner's stack as it was at the spawn, not as it is later. The wrapper
// takes that stack's node in the tree (`mark`: the sampler's walk, or in
// trace mode the tracer's top frame) and
// spawns, in f's place, a function that links its thread to the node
// (links[thread] = the node, a number) and tail-calls f, so that f runs
// on the thread's first frame as before. Anything but a Lua function goes
// to the host's spawn unchanged (its own message: "Lua function
// expected"). The functions' lines are JFrames::HostLines (checked).
#include <cstring>

#include "vm/lua/boundary.hpp"
#include "vm/luajit/jsession.hpp"

extern "C" {
#include <lauxlib.h>
}

namespace lfc::jit {

namespace {

const char* const kHostChunk = "=[luaflame] coroutine";
const char* const kHostSource =
    "local resume, wrap, enter, link, isfunction, spawn, mark, islua = ...\n"
    "local function resumer(co, ...)\n"  // HostLines::kResume
    "  enter(co)\n"
    "  return resume(co, ...)\n"
    "end\n"
    "local function wrapper(f)\n"  // HostLines::kWrap
    "  if not isfunction(f) then return wrap(f) end\n"
    "  local w = wrap(f)\n"
    "  if not enter(w, true) then return w end\n"
    "  return function(...)\n"  // HostLines::kWrapped
    "    enter(w)\n"
    "    return w(...)\n"
    "  end\n"
    "end\n"
    "local function spawner(f, ...)\n"  // HostLines::kSpawn
    "  if not islua(f) then return spawn(f, ...) end\n"
    "  local node = mark()\n"
    "  if not node then return spawn(f, ...) end\n"
    "  return spawn(function(...)\n"  // HostLines::kSpawned
    "    link(node, f)\n"
    "    return f(...)\n"
    "  end, ...)\n"
    "end\n"
    "return resumer, wrapper, spawner\n";

// The function at idx is defined on `line` of its chunk.
bool defined_on(lua_State* L, int idx, int line) {
  lua_Debug ar;
  lua_pushvalue(L, idx);
  return lua_getinfo(L, ">S", &ar) && ar.linedefined == line;
}

// isfunction(x): whether x is a function (the program's own `type` may be
// replaced; this is ours).
int lf_is_function(lua_State* L) LF_LUA_ENTRY {
  lua_pushboolean(L, lua_isfunction(L, 1));
  return 1;
}

// islua(x): whether x is a Lua function (what ngx_lua's spawn takes).
int lf_is_lua_function(lua_State* L) LF_LUA_ENTRY {
  lua_pushboolean(L, lua_isfunction(L, 1) && !lua_iscfunction(L, 1));
  return 1;
}

// firsts[T] = fn (its pointer): the function T runs while the link made
// now holds (jframes.cpp's host_resumers). Upvalue 2 is firsts.
void set_first(lua_State* L, int thread_idx, const void* fn) {
  lua_pushvalue(L, thread_idx);
  lua_pushlightuserdata(L, const_cast<void*>(fn));
  lua_rawset(L, lua_upvalueindex(2));
}

// firsts[co] for a resume of co (at thread_idx): a coroutine not started
// yet names its function now (a recycled one starts over so); one resumed
// before in this life keeps what its first resume named, so that a resume
// walks no stack. Only one started before the session began is looked up.
void note_first(lua_State* L, int thread_idx, lua_State* co) {
  lua_Debug ar;
  if (lua_getstack(co, 0, &ar)) {
    lua_pushvalue(L, thread_idx);
    lua_rawget(L, lua_upvalueindex(2));
    const bool known = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (known) return;
  }
  set_first(L, thread_idx, JFrames::first_function(co));
}

// enter(co) or enter(w), w a C closure over a coroutine (upvalue 1):
// links[co] = the running thread; true. enter(x, true) only says whether
// x names a coroutine so. False for anything else. Upvalues: links, firsts.
int lf_host_enter(lua_State* L) LF_LUA_ENTRY {
  const bool check = lua_toboolean(L, 2);
  lua_settop(L, 1);
  if (lua_iscfunction(L, 1) && lua_getupvalue(L, 1, 1)) lua_replace(L, 1);
  lua_State* co = lua_tothread(L, 1);
  if (co && !check) {
    lua_pushvalue(L, 1);
    lua_pushthread(L);
    lua_rawset(L, lua_upvalueindex(1));
    note_first(L, 1, co);
    if (JSession* j = g_jit.load(); j && j->profiles(L)) j->on_host_resume(L, co);
  }
  lua_pushboolean(L, co != nullptr);
  return 1;
}

// link(node, f), a spawned thread's first call (which then runs f):
// links[the running thread] = node. Upvalues: links, firsts (as enter's).
int lf_spawn_link(lua_State* L) LF_LUA_ENTRY {
  if (lua_type(L, 1) != LUA_TNUMBER) return 0;
  const void* f = lua_topointer(L, 2);
  lua_settop(L, 1);
  lua_pushthread(L);  // 2
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 1);
  lua_rawset(L, lua_upvalueindex(1));
  set_first(L, 2, f);
  if (JSession* j = g_jit.load(); j && j->profiles(L))
    j->on_spawned(L, static_cast<uint32_t>(lua_tonumber(L, 1)), f);
  return 0;
}

// mark(): the tree's node of the running thread's stack (the spawner's,
// its top the wrapper), or nil when no session samples this state.
int lf_spawn_mark(lua_State* L) LF_LUA_ENTRY {
  uint32_t node = 0;
  if (JSession* j = g_jit.load(); j && j->profiles(L)) {
    if (const char* failed = cxx_guard([&] { node = j->spawn_node(L); })) abandon(failed);
  }
  if (node == 0) return 0;
  lua_pushnumber(L, static_cast<lua_Number>(node));
  return 1;
}

// ngx.thread, read raw (a program's strict-mode __index is not run): pushes
// the table, or nothing.
bool push_ngx_thread(lua_State* L) {
  lua_pushliteral(L, "ngx");
  lua_rawget(L, LUA_GLOBALSINDEX);
  if (lua_istable(L, -1)) {
    lua_pushliteral(L, "thread");
    lua_rawget(L, -2);
    lua_remove(L, -2);
  }
  if (lua_istable(L, -1)) return true;
  lua_pop(L, 1);
  return false;
}

// ngx.thread and its spawn when that is a C function (the host's): pushes
// both; else nothing.
bool get_host_spawn(lua_State* L) {
  if (!push_ngx_thread(L)) return false;
  lua_pushliteral(L, "spawn");
  lua_rawget(L, -2);
  if (lua_iscfunction(L, -1)) return true;
  lua_pop(L, 2);
  return false;
}

}  // namespace

// The wrapper chunk's arguments after resume and wrap: enter, link,
// isfunction, a host's ngx.thread.spawn (else nil), mark, islua.
void JSession::push_host_args(lua_State* L) {
  for (int* ref : {&links_ref_, &firsts_ref_}) {
    lua_newtable(L);  // the links, the first functions: weak
    lua_newtable(L);
    lua_pushliteral(L, "kv");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    *ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  lua_pushvalue(L, -2);
  lua_pushvalue(L, -2);
  lua_pushcclosure(L, lf_host_enter, 2);
  frames_.skip(lua_topointer(L, -1));
  lua_insert(L, -3);                      // enter, links, firsts
  lua_pushcclosure(L, lf_spawn_link, 2);  // enter, link
  frames_.skip(lua_topointer(L, -1));
  lua_pushcfunction(L, lf_is_function);
  frames_.skip(lua_topointer(L, -1));
  if (get_host_spawn(L)) {
    lua_remove(L, -2);  // ngx.thread
  } else {
    lua_pushnil(L);
  }
  lua_pushcfunction(L, lf_spawn_mark);
  frames_.skip(lua_topointer(L, -1));
  lua_pushcfunction(L, lf_is_lua_function);
  frames_.skip(lua_topointer(L, -1));
}

// coroutine.resume (on top, its table below) is a host's function: the
// wrappers in place of it and of coroutine.wrap (and of ngx.thread.spawn),
// or nothing when they cannot be made. Pops both.
void JSession::install_host_resume(lua_State* L) {
  const int base = lua_gettop(L) - 2;
  if (!lua_isfunction(L, -1)) return lua_settop(L, base);
  lua_getfield(L, -2, "wrap");
  const bool wrap = lua_isfunction(L, -1);
  if (luaL_loadbuffer(L, kHostSource, std::strlen(kHostSource), kHostChunk) != 0)
    return lua_settop(L, base);
  lua_pushvalue(L, -3);  // resume
  lua_pushvalue(L, -3);  // wrap
  push_host_args(L);
  // tbl, resume, wrap, chunk, resume, wrap, enter, link, isfunction, spawn, mark, islua
  //   -> tbl, resume, wrap, resumer, wrapper, spawner
  if (lua_pcall(L, 8, 3, 0) != 0 || !defined_on(L, -3, JFrames::HostLines::kResume) ||
      !defined_on(L, -2, JFrames::HostLines::kWrap) ||
      !defined_on(L, -1, JFrames::HostLines::kSpawn)) {
    luaL_unref(L, LUA_REGISTRYINDEX, links_ref_);
    luaL_unref(L, LUA_REGISTRYINDEX, firsts_ref_);
    links_ref_ = firsts_ref_ = -2;
    return lua_settop(L, base);
  }
  install_host_spawn(L);  // pops the spawner
  lua_pushvalue(L, -4);
  orig_resume_ref_ = luaL_ref(L, LUA_REGISTRYINDEX);
  const void* resume_fn = lua_topointer(L, -2);
  const void* wrap_fn = nullptr;
  if (wrap) {
    lua_pushvalue(L, -3);
    orig_wrap_ref_ = luaL_ref(L, LUA_REGISTRYINDEX);
    wrap_fn = lua_topointer(L, -1);
    lua_setfield(L, -5, "wrap");
  } else {
    lua_pop(L, 1);
  }
  frames_.name_wrappers(resume_fn, wrap_fn, nullptr);
  frames_.host_resume(links_ref_, firsts_ref_, kHostChunk);
  host_wrapped_ = true;
  lua_setfield(L, -4, "resume");
  lua_pop(L, 3);
}

// The spawner (on top) in ngx.thread.spawn's place when the host has one.
// Pops it.
void JSession::install_host_spawn(lua_State* L) {
  if (!get_host_spawn(L)) return lua_pop(L, 1);
  orig_spawn_ref_ = luaL_ref(L, LUA_REGISTRYINDEX);  // ngx.thread, spawner
  spawn_fn_ = lua_topointer(L, -2);
  lua_pushliteral(L, "spawn");
  lua_pushvalue(L, -3);
  lua_rawset(L, -3);
  lua_pop(L, 2);
}

// Puts the host's spawn back unless the program replaced ours meanwhile.
void JSession::restore_host_spawn(lua_State* L) {
  if (orig_spawn_ref_ < 0) return;
  if (push_ngx_thread(L)) {
    lua_pushliteral(L, "spawn");
    lua_rawget(L, -2);
    const bool ours = lua_topointer(L, -1) == spawn_fn_;
    lua_pop(L, 1);
    if (ours) {
      lua_pushliteral(L, "spawn");
      lua_rawgeti(L, LUA_REGISTRYINDEX, orig_spawn_ref_);
      lua_rawset(L, -3);
    }
    lua_pop(L, 1);
  }
  luaL_unref(L, LUA_REGISTRYINDEX, orig_spawn_ref_);
  orig_spawn_ref_ = -2;
  spawn_fn_ = nullptr;
}

// The node of L's stack now: the sampler's walk (under L's own spawner's
// node when it was spawned), or in trace mode the tracer's top frame of L.
uint32_t JSession::spawn_node(lua_State* L) {
  if (!run_->opt.sample) return tracer_.top_node(L);
  const int top = lua_gettop(L);
  const uint32_t base = frames_.walk(L, spawn_frames_);
  lua_settop(L, top);
  return spawn_frames_.empty() ? base : frames_.path_node(spawn_frames_, base);
}

void JSession::on_spawned(lua_State* L, uint32_t node, const void* f) {
  if (run_->opt.trace && node < run_->tree.size()) {
    tracer_.charge_now();
    tracer_.spawned(L, node, f);
  }
}

void JSession::on_host_resume(lua_State* L, lua_State* co) {
  if (run_->opt.trace) {
    tracer_.charge_now();
    tracer_.resumed(L, co);
  }
}

}  // namespace lfc::jit
