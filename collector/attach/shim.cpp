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
//   lua_sethook, lua_gethook,    the host's own hook, set and read from C:
//   lua_gethookmask,             the profiled state's run sets it where the
//   lua_gethookcount             sampler's signal cannot tear it, and
//                                answers with it, never luaflame's (the
//                                module's own calls go to the library:
//                                vm/lua/compat.hpp's hook_api)
//
// Contract: these run on whatever thread of the host calls them, never in a
// signal handler; several threads may create and close states at once (the
// table of states is under a mutex, never held across a call into Lua or
// the module). Lua allows lua_sethook in a signal handler (lua.c's SIGINT
// handler stops the interpreter so): its wrapper looks nothing up once the
// state's run started (warm_hooks), and the module sets it in a critical
// section, which allocates only while tracing (a new thread's chained
// hook): a host that sets hooks from its own signal handler is safe to
// sample, not to trace. Nothing crosses back into the host but what the wrapped
// function returns: no C++ exception (the shim is built without them; a
// failed allocation here ends the shim's work for that state, not the
// host), no Lua error (the module runs its Lua under lua_pcall). What
// cannot be profiled is said once on stderr, and the host runs as it would
// without the shim. The shim knows no Lua header: lua_State is opaque here.
#define LUAFLAME_ATTACH_SHIM 1
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
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
  luaflame_attach_sethook_fn sethook = nullptr;  // optional: the library's own when absent
  luaflame_attach_gethook_fn gethook = nullptr;
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
  v.sethook = reinterpret_cast<luaflame_attach_sethook_fn>(
      dlsym(v.module, LUAFLAME_ATTACH_TEXT(LUAFLAME_ATTACH_SETHOOK)));
  v.gethook = reinterpret_cast<luaflame_attach_gethook_fn>(
      dlsym(v.module, LUAFLAME_ATTACH_TEXT(LUAFLAME_ATTACH_GETHOOK)));
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

void warm_hooks();

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
  warm_hooks();
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

// The Vm of the library that defines `real` (the host's lua_resume and hook
// functions: one library), once a run of its Lua started (before, the call
// is the host's alone). Looked up on the first call.
Vm* running(void* real) {
  static Vm* vm = nullptr;
  static bool looked = false;
  if (!looked) {
    vm = vm_of(real);
    looked = true;
  }
  return vm && vm->open ? vm : nullptr;
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
// lua_sethook returns int on 5.1, 5.2 and LuaJIT (always 1), nothing on
// 5.3 and 5.4: the wrapper returns what the library's returned, or 1,
// which a caller of 5.3's or 5.4's ignores.
using Hook = luaflame_attach_hook;
using SetHookFn = int (*)(lua_State*, Hook, int, int);
using GetHookFn = Hook (*)(lua_State*);
using GetIntFn = int (*)(lua_State*);
SetHookFn g_sethook = nullptr;
GetHookFn g_gethook = nullptr;
GetIntFn g_gethookmask = nullptr, g_gethookcount = nullptr;

// The addresses the Lua library's segments span: its own calls of the hook
// functions (debug.sethook's, debug.gethook's: ldblib.c) are the
// program's, which the module already takes through its debug.sethook
// wrapper; only calls from outside it are the host's. Set by warm_hooks.
std::atomic<std::uintptr_t> g_lib_lo{0}, g_lib_hi{0};

int lib_span(dl_phdr_info* info, size_t, void* base) {
  if (info->dlpi_addr != reinterpret_cast<std::uintptr_t>(base)) return 0;
  std::uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    lo = std::min<std::uintptr_t>(lo, info->dlpi_addr + ph.p_vaddr);
    hi = std::max<std::uintptr_t>(hi, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
  }
  g_lib_lo.store(lo, std::memory_order_relaxed);
  g_lib_hi.store(hi, std::memory_order_relaxed);
  return 1;
}

void warm_hooks() {
  SetHookFn real = next("lua_sethook", g_sethook);
  Dl_info info{};
  if (real && dladdr(reinterpret_cast<void*>(real), &info) && info.dli_fbase)
    dl_iterate_phdr(lib_span, info.dli_fbase);
  if (real) running(reinterpret_cast<void*>(real));
  next("lua_gethook", g_gethook);
  next("lua_gethookmask", g_gethookmask);
  next("lua_gethookcount", g_gethookcount);
}

// Whether a wrapper was called from the Lua library itself.
bool from_lib(void* return_address) {
  const auto at = reinterpret_cast<std::uintptr_t>(return_address);
  return at >= g_lib_lo.load(std::memory_order_relaxed) &&
         at < g_lib_hi.load(std::memory_order_relaxed);
}

// The module that answers for the host's own hook calls, when L's state
// may have a run here: null for the library's own calls.
Vm* hooks_of(void* real, void* return_address) {
  return from_lib(return_address) ? nullptr : running(real);
}

// The host's read of L's hook: true with the program's hook from the
// module (or none, when the library lacks the function), false when the
// library is to answer.
struct HookParts {
  Hook f = nullptr;
  int mask = 0, count = 0;
};
bool answered(lua_State* L, void* real, void* return_address, HookParts& h) {
  if (!real) return true;
  Vm* vm = hooks_of(real, return_address);
  return vm && vm->gethook && vm->gethook(L, &h.f, &h.mask, &h.count) == 1;
}

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
  Vm* vm = running(reinterpret_cast<void*>(real));
  luaflame_attach_resume_fn told = vm ? vm->resume : nullptr;
  const int entered = told ? told(co, 1) : 0;
  const int status = real(co, a, b, c);
  if (entered) told(co, 0);
  return status;
}

extern "C" __attribute__((visibility("default"))) int lua_sethook(lua_State* L, Hook f, int mask,
                                                                  int count) {
  SetHookFn real = next("lua_sethook", g_sethook);
  if (!real) return 0;
  Vm* vm = hooks_of(reinterpret_cast<void*>(real), __builtin_return_address(0));
  if (vm && vm->sethook && vm->sethook(L, f, mask, count) == 1) return 1;
  return real(L, f, mask, count);
}

extern "C" __attribute__((visibility("default"))) Hook lua_gethook(lua_State* L) {
  GetHookFn real = next("lua_gethook", g_gethook);
  HookParts h;
  return answered(L, reinterpret_cast<void*>(real), __builtin_return_address(0), h) ? h.f : real(L);
}

extern "C" __attribute__((visibility("default"))) int lua_gethookmask(lua_State* L) {
  GetIntFn real = next("lua_gethookmask", g_gethookmask);
  HookParts h;
  return answered(L, reinterpret_cast<void*>(real), __builtin_return_address(0), h) ? h.mask
                                                                                    : real(L);
}

extern "C" __attribute__((visibility("default"))) int lua_gethookcount(lua_State* L) {
  GetIntFn real = next("lua_gethookcount", g_gethookcount);
  HookParts h;
  return answered(L, reinterpret_cast<void*>(real), __builtin_return_address(0), h) ? h.count
                                                                                    : real(L);
}
