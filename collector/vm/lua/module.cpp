// The Lua module: require "luaflame" from stock lua5.4 (luaflame.so), or
// from a script under `luaflame run` (preloaded, the same core).
//   luaflame.start{mode=, hz=, clock=, output=, server=, token=, name=, tags=,
//                  flush_interval=, lines=, quiet=, alloc_rate=}
//   luaflame.stop() -> summary table
//   luaflame.profile(fn, opts, ...) -> summary, fn's results
//   luaflame.flush()
//   luaflame.folded([metric]) -> folded text so far
//   luaflame.running() -> boolean (each function acts on the calling state's run)
#include <cstdio>
#include <cstring>
#include <string>

#include "luaflame/collector.hpp"
#include "vm/lua/boundary.hpp"

extern "C" {
#include <lauxlib.h>
#include <lua.h>
}

namespace lfc {

namespace {

const char* type_wanted(const char* name) {
  if (!std::strcmp(name, "hz") || !std::strcmp(name, "flush_interval") ||
      !std::strcmp(name, "alloc_rate") || !std::strcmp(name, "max_output"))
    return "number";
  if (option_is_flag(name)) return "boolean";
  if (!std::strcmp(name, "tags")) return "table";
  return "string";
}

bool known(const char* name) {
  for (const char* const* n = kOptionNames; *n; ++n)
    if (!std::strcmp(*n, name)) return true;
  return false;
}

// The string at `i`, whole: a name or tag may hold NUL bytes (lua_tostring's
// C string would end at the first), which go on to the server escaped.
std::string whole_string(lua_State* L, int i) {
  std::size_t n = 0;
  const char* p = lua_tolstring(L, i, &n);
  return p ? std::string(p, n) : std::string();
}

// A number's text, made here: lua_tostring would make a Lua string, whose
// memory error would jump over the caller's strings. Integers as Lua
// prints them, floats with every digit (the options parse them back).
std::string number_text(lua_State* L, int i) {
  int is_int = 0;
  const lua_Integer n = lua_tointegerx(L, i, &is_int);
  if (is_int) return std::to_string(n);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", static_cast<double>(lua_tonumber(L, i)));
  return buf;
}

// tags = {k = "v", ...}: string keys, string or number values. Raises
// nothing: false with the message in `err`.
bool tags_text(lua_State* L, int t, const char* fn, std::string& out, std::string& err) {
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_type(L, -2) != LUA_TSTRING ||
        (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER)) {
      lua_pop(L, 2);
      return err = std::string(fn) + ": option 'tags' must map strings to strings", false;
    }
    std::string k = whole_string(L, -2);
    std::string v = lua_type(L, -1) == LUA_TNUMBER ? number_text(L, -1) : whole_string(L, -1);
    lua_pop(L, 1);
    if (k.find_first_of(",=") != std::string::npos || v.find(',') != std::string::npos) {
      lua_pop(L, 1);
      return err = std::string(fn) + ": tag '" + k +
                   "': keys may not contain ',' or '=', values may not contain ','",
             false;
    }
    if (!out.empty()) out += ',';
    out += k + "=" + v;
  }
  return true;
}

// The script's name (arg[0] without folder and .lua), the default run name.
std::string default_name(lua_State* L) {
  std::string name = "lua";
  int top = lua_gettop(L);
  // Raw reads only: an __index on _G or arg could raise, over `name`.
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_pushliteral(L, "arg");
  lua_rawget(L, -2);
  if (lua_type(L, -1) == LUA_TTABLE && lua_rawgeti(L, -1, 0) == LUA_TSTRING) {
    std::string a = whole_string(L, -1);
    std::size_t slash = a.rfind('/');
    if (slash != std::string::npos) a = a.substr(slash + 1);
    if (a.size() > 4 && a.compare(a.size() - 4, 4, ".lua") == 0) a.resize(a.size() - 4);
    if (!a.empty()) name = a;
  }
  lua_settop(L, top);
  return name;
}

// Options from the environment, then the table at `idx` (nil = none).
// Raises nothing (a Lua error would jump over the strings here): its Lua
// calls are raw reads, lua_next over a table it does not change and
// lua_tolstring on strings only. False with the message in `err`, the
// stack as it was. C++ exceptions go to the caller (cxx_guard).
bool read_options(lua_State* L, int idx, const char* fn, Options& o, std::string& err) {
  const std::string f = fn;
  o.name = default_name(L);
  if (!apply_env(o, err)) return err = f + ": " + err, false;
  if (lua_isnoneornil(L, idx)) return true;
  if (!lua_istable(L, idx))
    return err = f + ": options must be a table, got " + luaL_typename(L, idx), false;
  idx = lua_absindex(L, idx);
  const int top = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      return lua_settop(L, top), err = f + ": option names must be strings", false;
    const char* name = lua_tostring(L, -2);
    if (!known(name)) {
      set_option(o, name, "", err);
      return lua_settop(L, top), err = f + ": " + err, false;
    }
    const char* want = type_wanted(name);
    int t = lua_type(L, -1);
    std::string value;
    if (!std::strcmp(want, "table") && t == LUA_TTABLE) {
      if (!tags_text(L, lua_gettop(L), fn, value, err)) return lua_settop(L, top), false;
    } else if (!std::strcmp(want, "table") && t == LUA_TSTRING)
      value = whole_string(L, -1);
    else if (!std::strcmp(want, "boolean") && t == LUA_TBOOLEAN)
      value = lua_toboolean(L, -1) ? "true" : "false";
    else if (!std::strcmp(want, "number") && t == LUA_TNUMBER)
      value = number_text(L, -1);
    else if (!std::strcmp(want, "string") && t == LUA_TSTRING)
      value = whole_string(L, -1);
    else {
      err = f + ": option '" + name + "' must be a " + want + ", got " + luaL_typename(L, -1);
      return lua_settop(L, top), false;
    }
    if (!set_option(o, name, value, err)) return lua_settop(L, top), err = f + ": " + err, false;
    lua_pop(L, 1);
  }
  return true;
}

// Runs `body` (a lua_CFunction taking a light userdata) under lua_pcall:
// one value is left on the stack, its result or the error it raised (a
// memory error). Lets a C++ caller push from objects it owns without a Lua
// error jumping over their destructors.
bool protected_push(lua_State* L, lua_CFunction body, const void* arg) {
  lua_pushcfunction(L, body);
  lua_pushlightuserdata(L, const_cast<void*>(arg));
  return lua_pcall(L, 1, 1, 0) == LUA_OK;
}

int push_string_body(lua_State* L) LF_LUA_ENTRY {
  const auto* msg = static_cast<const std::string*>(lua_touserdata(L, 1));
  lua_pushlstring(L, msg->data(), msg->size());
  return 1;
}

// Raises `msg` as a Lua error once the caller's C++ objects are gone: the
// message is pushed inside their scope (protected: a memory error there is
// what gets raised), lua_error is called outside it.
void push_message(lua_State* L, const std::string& msg) {
  protected_push(L, push_string_body, &msg);
}

void set_num(lua_State* L, const char* k, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, k);
}
void set_int(lua_State* L, const char* k, uint64_t v) {
  lua_pushinteger(L, static_cast<lua_Integer>(v));
  lua_setfield(L, -2, k);
}
void set_str(lua_State* L, const char* k, const std::string& v) {
  lua_pushlstring(L, v.data(), v.size());
  lua_setfield(L, -2, k);
}

void push_summary(lua_State* L, const Summary& s) {
  lua_createtable(L, 0, 24);
  set_str(L, "mode", s.mode);
  set_str(L, "lua", s.lua);
  lua_createtable(L, static_cast<int>(s.metrics.size()), 0);
  for (std::size_t i = 0; i < s.metrics.size(); ++i) {
    set_str(L, "x", s.metrics[i]);
    lua_getfield(L, -1, "x");
    lua_rawseti(L, -2, static_cast<lua_Integer>(i) + 1);
  }
  lua_pushnil(L);
  lua_setfield(L, -2, "x");
  lua_setfield(L, -2, "metrics");
  set_num(L, "hz_asked", s.hz_asked);
  set_num(L, "hz_delivered", s.hz_delivered);
  if (s.sampler != SamplerKind::none) set_str(L, "sampler", sampler_name(s.sampler));
  set_int(L, "samples_asked", s.samples_asked);
  set_int(L, "sample_events", s.sample_events);
  set_int(L, "samples", s.samples);
  set_int(L, "clock_ns", s.clock_ns);
  set_int(L, "wall_ns", s.wall_ns);
  set_int(L, "hook_ns", s.hook_ns);
  set_int(L, "hook_calls", s.hook_calls);
  set_int(L, "calls", s.calls);
  set_int(L, "alloc_bytes", s.alloc_bytes);
  set_int(L, "alloc_count", s.alloc_count);
  set_int(L, "live_bytes", s.live_bytes);
  set_int(L, "nodes", s.nodes);
  set_int(L, "frames", s.frames);
  set_int(L, "memory_bytes", s.memory_bytes);
  set_int(L, "chunks_sent", s.chunks_sent);
  lua_createtable(L, static_cast<int>(s.files.size()), 0);
  for (std::size_t i = 0; i < s.files.size(); ++i) {
    lua_pushlstring(L, s.files[i].data(), s.files[i].size());
    lua_rawseti(L, -2, static_cast<lua_Integer>(i) + 1);
  }
  lua_setfield(L, -2, "files");
  lua_createtable(L, static_cast<int>(s.file_errors.size()), 0);
  for (std::size_t i = 0; i < s.file_errors.size(); ++i) {
    lua_pushlstring(L, s.file_errors[i].data(), s.file_errors[i].size());
    lua_rawseti(L, -2, static_cast<lua_Integer>(i) + 1);
  }
  lua_setfield(L, -2, "file_errors");
  set_int(L, "output_ns", s.output_ns);
  set_int(L, "output_cpu_ns", s.output_cpu_ns);
  set_str(L, "fast_paths", s.fast_paths);
  if (!s.fast_paths_off.empty()) set_str(L, "fast_paths_off", s.fast_paths_off);
  set_int(L, "samples_moved", s.samples_moved);
  set_int(L, "samples_in_hooks", s.samples_in_hooks);
  if (!s.run_url.empty()) set_str(L, "run_url", s.run_url);
  if (!s.stream_error.empty()) set_str(L, "stream_error", s.stream_error);
  if (!s.fallback_file.empty()) set_str(L, "fallback_file", s.fallback_file);
}

int push_summary_body(lua_State* L) LF_LUA_ENTRY {
  push_summary(L, *static_cast<const Summary*>(lua_touserdata(L, 1)));
  return 1;
}

// The module's functions: the C++ of each runs in cxx_guard; its message
// (or the memory error of pushing it) is pushed inside, protected, and
// raised outside, when no C++ object is left in the frame.
int raise_failure(lua_State* L, const char* fn, const char* failed) LF_LUA_ENTRY {
  if (failed) lua_pushfstring(L, "%s: %s", fn, failed);
  return lua_error(L);
}

int l_start(lua_State* L) LF_LUA_ENTRY {
  bool ok = false;
  const char* failed = cxx_guard([&] {
    Options o;
    std::string err;
    if (read_options(L, 1, "luaflame.start", o, err) && start(L, o, err)) {
      ok = true;
      return;
    }
    if (err.rfind("luaflame.start: ", 0) != 0) err = "luaflame.start: " + err;
    push_message(L, err);
  });
  return ok ? 0 : raise_failure(L, "luaflame.start", failed);
}

int l_stop(lua_State* L) LF_LUA_ENTRY {
  if (!running(L))
    return luaL_error(L, "luaflame.stop: luaflame is not running (call luaflame.start first)");
  bool ok = false;
  const char* failed = cxx_guard([&] {
    Summary s = stop(L);
    ok = protected_push(L, push_summary_body, &s);
  });
  // the summary, or the memory error making it, or what stop threw
  return ok ? 1 : raise_failure(L, "luaflame.stop", failed);
}

// luaflame.profile's start: true when started, else its message pushed.
bool profile_start(lua_State* L) LF_LUA_ENTRY {
  bool ok = false;
  const char* failed = cxx_guard([&] {
    Options o;
    std::string err;
    ok = read_options(L, 2, "luaflame.profile", o, err) && start(L, o, err);
    if (ok) return;
    if (err.rfind("luaflame.profile: ", 0) != 0) err = "luaflame.profile: " + err;
    push_message(L, err);
  });
  if (failed) lua_pushfstring(L, "luaflame.profile: %s", failed);
  return ok;
}

int l_profile(lua_State* L) LF_LUA_ENTRY {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  if (!profile_start(L)) return lua_error(L);
  // fn(...) with the arguments after opts; an error stops and propagates.
  const int base = lua_gettop(L);
  lua_pushvalue(L, 1);
  for (int i = 3; i <= base; ++i) lua_pushvalue(L, i);
  const int status = lua_pcall(L, base > 2 ? base - 2 : 0, LUA_MULTRET, 0);
  if (status != LUA_OK) {
    cxx_guard([&] { stop(L); });  // its Summary is gone before fn's error is raised
    return lua_error(L);          // fn's error value is on top
  }
  const int nres = lua_gettop(L) - base;
  bool ok = false;
  const char* failed = cxx_guard([&] {
    Summary s = stop(L);
    ok = protected_push(L, push_summary_body, &s);
  });
  if (!ok) return raise_failure(L, "luaflame.profile", failed);
  lua_insert(L, base + 1);
  return nres + 1;
}

int l_flush(lua_State* L) LF_LUA_ENTRY {
  if (!running(L)) return luaL_error(L, "luaflame.flush: luaflame is not running");
  if (const char* failed = cxx_guard([L] { flush(L); }))
    return raise_failure(L, "luaflame.flush", failed);
  return 0;
}

int l_folded(lua_State* L) LF_LUA_ENTRY {
  const char* metric = luaL_optstring(L, 1, "");
  bool ok = false;
  const char* failed = cxx_guard([&] {
    std::string out, err;
    if (folded(L, metric, out, err)) {
      ok = protected_push(L, push_string_body, &out);
      return;
    }
    push_message(L, "luaflame.folded: " + err);
  });
  return ok ? 1 : raise_failure(L, "luaflame.folded", failed);
}

int l_running(lua_State* L) LF_LUA_ENTRY {
  lua_pushboolean(L, running(L));
  return 1;
}

const luaL_Reg kFuncs[] = {{"start", l_start}, {"stop", l_stop},     {"profile", l_profile},
                           {"flush", l_flush}, {"folded", l_folded}, {"running", l_running},
                           {nullptr, nullptr}};

}  // namespace

int open_module(lua_State* L) {  // raises only a memory error, over no C++ object
  luaL_newlib(L, kFuncs);
  lua_pushliteral(L, "0.1.0");
  lua_setfield(L, -2, "version");
  return 1;
}

void preload_module(lua_State* L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, open_module);
  lua_setfield(L, -2, "luaflame");
  lua_pop(L, 1);
}

}  // namespace lfc
