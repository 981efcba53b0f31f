// libluaflame-attach.so: the shim `luaflame attach` preloads into a host
// program (docs/attach.md). It wraps the Lua state functions the host calls
// in whichever shared Lua library it links (liblua5.1 ... liblua5.4,
// libluajit-5.1), and hands each state to the luaflame.so built for that
// Lua (vm/lua/attach.hpp), loaded here on first use:
//   luaL_newstate, lua_newstate  a state is born: numbered, its Lua noted
//   luaL_openlibs                its libraries are open: its run starts
//                                (coroutine.resume is there to follow)
//   lua_resume                   a coroutine the host resumes from C (HAProxy's
//                                requests): the run follows it as it follows
//                                coroutine.resume
//   lua_close                    its run ends, then the state
//
// Contract: these run on whatever thread of the host calls them, never in a
// signal handler; several threads may create and close states at once (the
// table of states is under a mutex, never held across a call into Lua or
// the module). Nothing crosses back into the host but what the wrapped
// function returns: no C++ exception (the shim is built without them; a
// failed allocation here ends the shim's work for that state, not the
// host), no Lua error (the module runs its Lua under lua_pcall). What
// cannot be profiled is said once on stderr, and the host runs as it would
// without the shim. The shim knows no Lua header: lua_State is opaque here.
#define LUAFLAME_ATTACH_SHIM 1
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "vm/lua/attach.hpp"

namespace {

using lua_Alloc = void* (*)(void*, void*, size_t, size_t);
using NewStateFn = lua_State* (*)();
using NewStateAFn = lua_State* (*)(lua_Alloc, void*);
using StateFn = void (*)(lua_State*);

// A Lua the shim can hand states to: the library that defines the Lua API
// and the environment variable naming its luaflame.so.
struct Vm {
  const char* lib;  // the library's file name starts so
  const char* release;
  const char* module_env;
  void* module = nullptr;
  luaflame_attach_open_fn open = nullptr;
  luaflame_attach_close_fn close = nullptr;
  luaflame_attach_resume_fn resume = nullptr;
  bool tried = false;
};
Vm g_vms[] = {
    {"liblua5.1.so", "Lua 5.1", "LUAFLAME_ATTACH_LUA51"},
    {"liblua5.2.so", "Lua 5.2", "LUAFLAME_ATTACH_LUA52"},
    {"liblua5.3.so", "Lua 5.3", "LUAFLAME_ATTACH_LUA53"},
    {"liblua5.4.so", "Lua 5.4", "LUAFLAME_ATTACH_LUA54"},
    {"libluajit-5.1.so", "LuaJIT", "LUAFLAME_ATTACH_LUAJIT"},
};

// A state the host made: its number in this process, its Lua, whether its
// run started (then lua_close ends it).
struct State {
  lua_State* L;
  unsigned n;
  Vm* vm;
  bool started;
};
constexpr unsigned kMaxStates =
    4096;  // live at once (as vm/puc/sessions.hpp kMax); more are not profiled
State g_states[kMaxStates];
unsigned g_live = 0, g_made = 0;
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
thread_local int t_in_newstate = 0;  // luaL_newstate calls lua_newstate: one state

const char* program() {
  return program_invocation_short_name && *program_invocation_short_name
             ? program_invocation_short_name
             : "lua";
}

void say(const char* fmt, const char* a, const char* b = "") {
  std::fprintf(stderr, "luaflame attach: ");
  std::fprintf(stderr, fmt, a, b);
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

// The function `name` of the library after this one, looked up when first
// called (a host may load its Lua with dlopen after starting).
template <class F>
F next(const char* name, F& cache) {
  if (!cache) cache = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
  return cache;
}

// The Lua whose library defines `fn`; null, said once, when it is none of
// those above (a Lua linked into the program itself, an unknown library).
Vm* vm_of(void* fn) {
  Dl_info info{};
  if (!dladdr(fn, &info) || !info.dli_fname) return nullptr;
  const char* base = std::strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  for (Vm& v : g_vms)
    if (!std::strncmp(base, v.lib, std::strlen(v.lib))) return &v;
  static bool said = false;
  if (!said)
    say("%s: Lua comes from %s, not a shared Lua library luaflame knows: not profiled", program(),
        info.dli_fname);
  said = true;
  return nullptr;
}

// Loads v's luaflame.so once; false (said once) when it cannot.
bool load(Vm& v) {
  if (v.tried) return v.open != nullptr;
  v.tried = true;
  const char* path = std::getenv(v.module_env);
  if (!path || !*path) {
    say("%s: no luaflame module for %s is installed: not profiled", program(), v.release);
    return false;
  }
  v.module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!v.module) {
    const char* why = dlerror();
    say("cannot load %s: not profiled", why ? why : path);
    return false;
  }
  v.open = reinterpret_cast<luaflame_attach_open_fn>(
      dlsym(v.module, LUAFLAME_ATTACH_TEXT(LUAFLAME_ATTACH_OPEN)));
  v.close = reinterpret_cast<luaflame_attach_close_fn>(
      dlsym(v.module, LUAFLAME_ATTACH_TEXT(LUAFLAME_ATTACH_CLOSE)));
  v.resume = reinterpret_cast<luaflame_attach_resume_fn>(
      dlsym(v.module, LUAFLAME_ATTACH_TEXT(LUAFLAME_ATTACH_RESUME)));
  if (!v.open || !v.close || !v.resume) {
    say("%s is not this shim's luaflame (no " LUAFLAME_ATTACH_TEXT(
            LUAFLAME_ATTACH_OPEN) "): not profiled",
        path);
    v.open = nullptr;
    return false;
  }
  return true;
}

State* find(lua_State* L) {
  for (unsigned i = 0; i < g_live; ++i)
    if (g_states[i].L == L) return &g_states[i];
  return nullptr;
}

void born(lua_State* L, void* fn) {
  if (!L) return;
  Vm* vm = vm_of(fn);
  pthread_mutex_lock(&g_mu);
  ++g_made;
  if (vm && g_live < kMaxStates) g_states[g_live++] = State{L, g_made, vm, false};
  pthread_mutex_unlock(&g_mu);
}

// LUAFLAME_ATTACH_STATE=N profiles the Nth state the process makes only
// (a host whose first state is idle while later ones work: sysbench's
// workers); unset, any state opened while no run is going.
bool wanted(unsigned n) {
  const char* v = std::getenv("LUAFLAME_ATTACH_STATE");
  return !v || !*v || std::strtoul(v, nullptr, 10) == n;
}

// The state's run starts once its libraries are open; null when it is not
// to be profiled.
void opened(lua_State* L) {
  pthread_mutex_lock(&g_mu);
  State* s = find(L);
  State copy{};
  if (s && !s->started) {
    s->started = true;
    copy = *s;
  }
  pthread_mutex_unlock(&g_mu);
  if (!copy.L || !wanted(copy.n) || !load(*copy.vm)) return;
  if (copy.vm->open(L, program(), copy.n) != 0) {
    pthread_mutex_lock(&g_mu);
    if ((s = find(L))) s->started = false;
    pthread_mutex_unlock(&g_mu);
  }
}

void closing(lua_State* L) {
  pthread_mutex_lock(&g_mu);
  State* s = find(L);
  State copy{};
  if (s) {
    copy = *s;
    *s = g_states[--g_live];
  }
  pthread_mutex_unlock(&g_mu);
  if (copy.started && copy.vm->close) copy.vm->close(L);
}

// At exit of the program attach started: said when it made no Lua state
// through a shared library (Lua linked in statically, or no Lua used).
__attribute__((destructor)) void at_unload() {
  const char* pid = std::getenv("LUAFLAME_ATTACH_PID");
  if (!pid || std::strtol(pid, nullptr, 10) != getpid() || g_made != 0) return;
  say("%s made no Lua state through a shared Lua library (Lua linked into the program, or not "
      "used)%s",
      program(), ": nothing profiled");
}

// The module lua_resume's library hands coroutines to, once a run of its Lua
// started (before, a resume is the host's alone).
luaflame_attach_resume_fn resume_hook(void* real) {
  static Vm* vm = nullptr;
  static bool looked = false;
  if (!looked) {
    vm = vm_of(real);
    looked = true;
  }
  return vm && vm->open ? vm->resume : nullptr;
}

NewStateFn g_newstate = nullptr;
NewStateAFn g_newstate_a = nullptr;
StateFn g_openlibs = nullptr, g_close = nullptr;
// lua_resume is (co, from, nargs, &nres) on 5.4, (co, from, nargs) on 5.2 and
// 5.3, (co, nargs) on 5.1 and LuaJIT: the wrapper takes four integer-class
// arguments and passes the same registers on, which the SysV x86-64 and
// AArch64 calling conventions make right for each (a callee ignores what
// it does not take); the result is an int in every version.
using ResumeFn = int (*)(lua_State*, void*, void*, void*);
ResumeFn g_resume = nullptr;

}  // namespace

// The wrappers: the host's calls land here first (LD_PRELOAD). A function
// the host's Lua lacks is never called through here.
extern "C" __attribute__((visibility("default"))) lua_State* luaL_newstate() {
  NewStateFn real = next("luaL_newstate", g_newstate);
  if (!real) return nullptr;
  ++t_in_newstate;
  lua_State* L = real();
  --t_in_newstate;
  born(L, reinterpret_cast<void*>(real));
  return L;
}

extern "C" __attribute__((visibility("default"))) lua_State* lua_newstate(lua_Alloc f, void* ud) {
  NewStateAFn real = next("lua_newstate", g_newstate_a);
  if (!real) return nullptr;
  lua_State* L = real(f, ud);
  if (!t_in_newstate) born(L, reinterpret_cast<void*>(real));
  return L;
}

extern "C" __attribute__((visibility("default"))) void luaL_openlibs(lua_State* L) {
  StateFn real = next("luaL_openlibs", g_openlibs);
  if (!real) return;
  real(L);
  opened(L);
}

extern "C" __attribute__((visibility("default"))) void lua_close(lua_State* L) {
  StateFn real = next("lua_close", g_close);
  if (!real) return;
  closing(L);
  real(L);
}

extern "C" __attribute__((visibility("default"))) int lua_resume(lua_State* co, void* a, void* b,
                                                                 void* c) {
  ResumeFn real = next("lua_resume", g_resume);
  if (!real) return 2;  // LUA_ERRRUN: no Lua to resume with (no message pushed: none can be)
  luaflame_attach_resume_fn told = resume_hook(reinterpret_cast<void*>(real));
  const int entered = told ? told(co, 1) : 0;
  const int status = real(co, a, b, c);
  if (entered) told(co, 0);
  return status;
}
