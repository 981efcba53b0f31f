// The program's own hooks while tracing. Lua keeps one hook per thread, and
// tracing needs it; debug.sethook would replace luaflame's and end the
// trace. So while tracing, debug.sethook and debug.gethook are wrapped: the
// original debug.sethook installs the program's hook (ldblib.c's hookf and
// its registry entry) exactly as without luaflame, then luaflame's hook
// goes back with the program's mask and count added, and forwards to the
// program's hook exactly the events it asked for (Session::hook_rest).
// debug.gethook answers as if the program's hook were installed; so it does
// while sampling, where the one-shot a signal arms is luaflame's hook for
// an instruction and debug.sethook only records the function set.
//
// A hook set from C with lua_sethook cannot be seen, except under luaflame
// attach (Session::host_sethook): it replaces ours, the trace of that
// thread stops there, and stop() says so once (not with -q).
//
// The hook chain (hookchain.hpp) owns the state: the program's hooks kept
// behind luaflame's, and the one-shot hook the sampler and the allocator
// arm, with the critical sections that fence it from the signal handler.
// This file is the session's side of it: the hook itself (lf_hook, with the
// tracer's common event inline: tracer_events.hpp, and its slow path
// Session::hook), the hooks a coroutine gets when it first runs, what an
// event forwards (hook_rest), the debug.sethook/gethook wrappers (swapped
// in by session_libswap.cpp) and the hooks given back at stop.
#include <atomic>
#include <cstdio>
#include <mutex>

#include "vm/lua/boundary.hpp"
#include "vm/puc/alloc.hpp"
#include "vm/puc/session.hpp"
#include "vm/puc/sessions.hpp"
#include "vm/puc/tracer_events.hpp"

extern "C" {
#include <lauxlib.h>
}

namespace lfc {

namespace {

const char* const kHookedThreads = "luaflame.hooked";  // weak-keyed: threads with a chained hook
// Weak-keyed: thread -> the Lua function the program gave debug.sethook
// there while tracing (debug.gethook's first answer: where ldblib.c keeps
// it, a registry key of its own, differs per release and 5.1's and 5.3's
// are static addresses).
const char* const kHookFunctions = "luaflame.hookfns";
lua_Hook g_hookf = nullptr;  // ldblib.c's hookf: the hook debug.sethook installs

// The hook left on threads after stop (coroutines created while profiling
// inherit ours): on their next event they take their state's back. One
// entry per state whose session ended (the last kAfter; when more, the
// oldest entry goes). Written under g_after_mu by stop, read without a
// lock by lf_hook_after_stop on the state's thread: the key is cleared
// while an entry is rewritten.
struct After {
  std::atomic<std::uintptr_t> key{0};
  lua_Hook hook = nullptr;
  int mask = 0, count = 0;
};
constexpr int kAfter = 64;
After g_after[kAfter];
int g_after_next = 0;
std::mutex g_after_mu;

// The mask that asks for event `ev`: a tail call's is the call's, and on
// 5.1 a tail return's (LUA_HOOKTAILRET, after a return event) the return's.
int event_mask(int ev) {
#if LUA_VERSION_NUM == 501
  if (ev == LUA_HOOKTAILRET) return LUA_MASKRET;
#endif
  return ev == LUA_HOOKTAILCALL ? LUA_MASKCALL : (1 << ev);
}

lua_CFunction orig(lua_State* L, const char* key) {
  lua_getfield(L, LUA_REGISTRYINDEX, key);
  lua_CFunction f = lua_tocfunction(L, -1);
  lua_pop(L, 1);
  return f;
}

lua_State* target(lua_State* L) {
  return lua_type(L, 1) == LUA_TTHREAD ? lua_tothread(L, 1) : L;
}

// The thread T (target's answer) pushed as a key: L's own, or argument 1.
void push_target(lua_State* L, lua_State* T) {
  if (T == L)
    lua_pushthread(L);
  else
    lua_pushvalue(L, 1);
}

// The table at the top, replaced by its value at T (nil when it is no table).
void table_at_target(lua_State* L, lua_State* T) {
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    lua_pushnil(L);
    return;
  }
  push_target(L, T);
  lua_rawget(L, -2);
  lua_remove(L, -2);
}

// debug.sethook: the original, called in place (no call event of its own,
// so the program's hook sees the events it would see without luaflame).
int lf_sethook(lua_State* L) noexcept {
  lua_CFunction f = orig(L, "luaflame.orig.sethook");
  if (!f) return 0;
  lua_State* T = target(L);
  const int fn = lua_type(L, 1) == LUA_TTHREAD ? 2 : 1;
  f(L);
  Session* s = sessions::of(L);
  bool chained = false;  // by program_set, while tracing
  if (s && g_hookf) {
    // Its arguments were valid: the hook db_sethook set (its makemask),
    // set again where no signal tears it (HookChain::program_set).
    const char* smask = lua_isnoneornil(L, fn) ? nullptr : lua_tostring(L, fn + 1);
    const int count = smask ? static_cast<int>(lua_tointeger(L, fn + 2)) : 0;
    int mask = count > 0 ? LUA_MASKCOUNT : 0;
    for (const char* c = smask; c && *c; ++c)
      mask |= *c == 'c' ? LUA_MASKCALL : *c == 'r' ? LUA_MASKRET : *c == 'l' ? LUA_MASKLINE : 0;
    lua_Hook h = smask ? g_hookf : nullptr;
    if (const char* failed = cxx_guard([&] { chained = s->program_set(T, h, mask, count); })) {
      abandon_session(s, failed, "debug.sethook's wrapper");
      s = nullptr;
    }
  }
  if (s) {
    lua_getfield(L, LUA_REGISTRYINDEX, kHookFunctions);
    if (lua_istable(L, -1)) {
      push_target(L, T);
      if (lua_isfunction(L, fn))
        lua_pushvalue(L, fn);
      else
        lua_pushnil(L);
      lua_rawset(L, -3);
    }
    lua_pop(L, 1);
  }
  // Its bookkeeping allocates: what it throws ends profiling, not the program.
  if (s && s->tracing())
    if (const char* failed = cxx_guard([&] { s->adopt_program_hook(L, T, chained); }))
      abandon_session(s, failed, "debug.sethook's wrapper");
  return 0;
}

// The function ldblib.c keeps for T's hookf (debug.sethook's argument):
// the one given while profiling, else (set before start) the original
// db_gethook's first answer, nil when it saw luaflame's hook there.
void push_hook_function(lua_State* L, lua_State* T) {
  lua_getfield(L, LUA_REGISTRYINDEX, kHookFunctions);
  table_at_target(L, T);
  if (!lua_isnil(L, -1)) return;
  lua_pop(L, 1);
  const int top = lua_gettop(L);
  lua_CFunction f = orig(L, "luaflame.orig.gethook");
  const int n = f ? f(L) : 0;
  const bool found = n > 0 && lua_isfunction(L, top + 1);
  lua_settop(L, found ? top + 1 : top);
  if (!found) lua_pushnil(L);  // one answer always (it answered T itself)
}

// debug.gethook: ldblib.c's db_gethook, answered from the program's hook
// (Session::program_hook), never luaflame's or the one-shot armed over it (a
// signal amid db_gethook's reads answered "cl", 1 for the program's "cl", 7).
int lf_gethook(lua_State* L) noexcept {
  Session* s = sessions::of(L);
  lua_State* T = target(L);
  if (!s) {
    lua_CFunction f = orig(L, "luaflame.orig.gethook");
    return f ? f(L) : 0;
  }
  const HookChain::Chained c = s->program_hook(T);
  if (!c.hook && LUA_VERSION_NUM >= 504) {  // 5.1-5.3 answer nil, "", 0
    lua_pushnil(L);
    return 1;
  }
  if (!c.hook) {
    lua_pushnil(L);
  } else if (c.hook != g_hookf) {
    lua_pushliteral(L, "external hook");
  } else {
    push_hook_function(L, T);
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
  lua_pushcfunction(T, [](lua_State*) noexcept { return 0; });
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

const LibSwap kHookSwaps[] = {{"sethook", "luaflame.orig.sethook", lf_sethook},
                              {"gethook", "luaflame.orig.gethook", lf_gethook}};

}  // namespace

void set_hook_after_stop(std::uintptr_t key, lua_Hook h, int mask, int count, bool in_child) {
  // In a forked child the only thread: the lock may be held by a parent's
  // thread that is not there (it would never be released).
  std::unique_lock<std::mutex> lock(g_after_mu, std::defer_lock);
  if (!in_child) lock.lock();
  After* e = nullptr;
  for (After& a : g_after)
    if (a.key.load(std::memory_order_relaxed) == key) e = &a;
  if (!e) e = &g_after[g_after_next++ % kAfter];
  e->key.store(0, std::memory_order_release);
  e->hook = h, e->mask = mask, e->count = count;
  e->key.store(key, std::memory_order_release);
}

HookChain::Chained hook_after_stop(std::uintptr_t key) {
  for (const After& a : g_after)
    if (a.key.load(std::memory_order_acquire) == key) return {a.hook, a.mask, a.count};
  return {};
}

// A hook event of a state whose session has gone: the hook kept for it
// (set_hook_after_stop) goes back and gets the event.
void lf_hook_after_stop(lua_State* L, lua_Debug* ar) noexcept {
  const HookChain::Chained c = hook_after_stop(sessions::key_of(L));
  lua_sethook(L, c.hook, c.mask, c.count);
  if (c.hook && (c.mask & event_mask(ar->event))) c.hook(L, ar);
}

// --lines on 5.4: a sample's count event moved on to where the thread
// really runs (HookChain::move_on says why). Not an allocation sample: its
// place is the allocation's.
bool Session::move_line_sample_on(lua_State* L, int ev) {
  if (LUA_VERSION_NUM < 504 || !opt.lines || ev != LUA_HOOKCOUNT || !sampler.owes() ||
      alloc_pending.load(std::memory_order_relaxed))
    return false;
  hooks.begin_critical();
  const bool moved = hooks.move_on(L);
  hooks.end_critical();
  return moved;
}

// What a hook event does besides tracing: a sample or allocations pending
// on an armed thread, and the chained hook. lf_hook calls it only when a
// thread is armed or a hook was there before start.
void Session::hook_rest(lua_State* L, lua_Debug* ar, int ev) {
  const bool was_armed = hooks.armed_on(L);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  // The hook the thread had before we armed it gets exactly its events:
  // those of its own mask, and its count event only when its count is due.
  const HookChain::Chained own = hooks.chained_for(L);
  lua_Hook fwd = own.hook;
  int fwd_mask = own.mask;
  bool count_due = false;
  if (was_armed) {
    const bool was_busy = alloc && alloc->busy;
    if (alloc) alloc->busy = true;  // what the hook allocates is the collector's
    hooks.armed_forward(ev, fwd, fwd_mask, count_due);
    const int consumed = ev == LUA_HOOKCOUNT ? 1 : 0;
    if (!move_line_sample_on(L, ev)) {
      if (sampler.owes()) sampling.take(L);
      if (alloc_pending.load(std::memory_order_relaxed)) take_alloc(L);
      hooks.begin_critical();
      hooks.disarm(consumed);
      hooks.end_critical();
    }
    if (alloc) alloc->busy = was_busy;
  }
  if (fwd && fwd != lf_hook && (fwd_mask & event_mask(ev)) &&
      (ev != LUA_HOOKCOUNT || !was_armed || count_due)) {
    if constexpr (luaint::kRelease == 0) {  // cleared when lf_hook ends (foreign.hpp)
      foreign::t_own_hook.forwarding = 1;
      std::atomic_signal_fence(std::memory_order_seq_cst);
    }
    if (opt.trace && fwd == own.hook && fwd != g_hookf)
      forward_c_hook(L, ar, own);
    else
      fwd(L, ar);
  }
}

// A C hook chained while tracing (a host's lua_sethook, adopted at its
// lua_resume: Session::adopt_host_hook) runs as without luaflame, with its
// own hook, mask and count installed: it may read them (lua_gethookmask)
// and set them (lua_sethook). HAProxy's hlua_hook does both: with ours in
// place it saw LUA_MASKRET, took its count event for a function's return
// and set itself with a count of 1 in our place: the trace of the
// request's coroutine stopped there (tests/attach/rich.lua: fib traced
// 897,449 times under the service where it ran 897,531; some paths
// without their entry point).
// What it leaves is chained again behind ours (HookChain::adopt).
// It may raise a Lua error (HAProxy's timeout, through luaD_throw): the
// thread then keeps the program's hook, as without luaflame, and its trace
// ends there; nothing of ours is held across the call (no critical
// section, no C++ object).
void Session::forward_c_hook(lua_State* L, lua_Debug* ar, const HookChain::Chained& own) {
  const std::size_t off = layout.hookcount_off;
  const int left = off && (own.mask & LUA_MASKCOUNT) ? luaint::hookcount(L, off) : 0;
  hooks.begin_critical();
  if (hooks.armed_on(L)) hooks.disarm();
  lua_sethook(L, own.hook, own.mask, own.count);
  // Its count's progress kept, unless this is its count event (restarted).
  if (ar->event != LUA_HOOKCOUNT && left > 0) luaint::set_hookcount(L, off, left);
  hooks.end_critical();
  own.hook(L, ar);
  if (const char* failed = cxx_guard([&] { hooks.adopt(L); })) abandon(failed, "the host's hook");
}

void Session::install_thread_hook(lua_State* L, lua_State* co) {
  if (co == hooks.armed_thread()) return;
  lua_Hook h = lua_gethook(co);
  if (opt.trace) {
    if (h != lf_hook || lua_gethookmask(co) != hooks.thread_mask(co)) {
      lua_sethook(co, lf_hook, hooks.thread_mask(co), hooks.chained_for(co).count);
      tracer.hooked(co, L);
    }
  } else if (h == lf_hook) {
    // Inherited from a thread that was armed when it created this one.
    const HookChain::Chained c = hooks.chained_for(co);
    lua_sethook(co, c.hook, c.mask, c.count);
  }
}

namespace {
// The thread at `idx` of L's stack remembered weakly, to give it its hook
// back at stop if it lives. May raise a Lua error (memory): callers hold no
// C++ object with a destructor.
void remember_hooked(lua_State* L, int idx) {
  idx = lua_absindex(L, idx);
  lua_getfield(L, LUA_REGISTRYINDEX, kHookedThreads);
  if (lua_istable(L, -1)) {
    lua_pushvalue(L, idx);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
  }
  lua_pop(L, 1);
}
}  // namespace

void Session::adopt_program_hook(lua_State* L, lua_State* T, bool chained) {
  if (!chained && !hooks.adopt(T)) return;
  tracer.fast_off();  // every event may have to be forwarded
  if (T == start_L || T == main_L) return;
  if (T == L) {
    lua_pushthread(L);
    remember_hooked(L, -1);
    lua_pop(L, 1);
  } else {
    remember_hooked(L, 1);
  }
}

// Without luaflame, a coroutine made after debug.sethook(f, "cl", 7) has
// its maker's hook, mask and count (lua_newthread copies them; ldblib.c's
// hookf then finds no function for it): debug.gethook(co) answers nil, "cl",
// 7. Here its maker has luaflame's hook with that mask and count, so it
// chains the maker's program hook too. Threads made from C (lua_newthread)
// chain the hook of before start. Sampling, it may have copied the maker's
// one-shot: it gets the maker's own hook instead (HookChain::unshare_one_shot).
void Session::inherit_program_hook(lua_State* L) {
  lua_State* NL = lua_tothread(L, -1);
  if (!NL) return;
  if (!opt.trace) {
    hooks.unshare_one_shot(L, NL);
    return;
  }
  bool inherited = false;
  if (const char* failed = cxx_guard([&] { inherited = hooks.inherit(L, NL); }))
    return abandon_session(this, failed, "coroutine.create's wrapper");
  if (inherited) remember_hooked(L, -1);
}

void install_hook_wrappers(lua_State* L) {
  lua_getglobal(L, "debug");
  lua_CFunction set = nullptr, get = nullptr;
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "sethook");
    lua_getfield(L, -2, "gethook");
    set = lua_tocfunction(L, -2), get = lua_tocfunction(L, -1);
    lua_pop(L, 2);
  }
  lua_pop(L, 1);
  if (!set || !get) return;
  if (!g_hookf) g_hookf = learn_hookf(L, set);
  swap_library(L, "debug", kHookSwaps, 2);
  lua_newtable(L);
  lua_newtable(L);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, kHookedThreads);
  lua_newtable(L);
  lua_newtable(L);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, kHookFunctions);
  // The start thread's function, set before start: learned before luaflame's
  // hook goes there (db_gethook would then answer an external hook).
  if (g_hookf && lua_gethook(L) == g_hookf) {
    lua_pushthread(L);
    push_hook_function(L, L);
    lua_getfield(L, LUA_REGISTRYINDEX, kHookFunctions);
    lua_insert(L, -3);
    lua_rawset(L, -3);
    lua_pop(L, 1);
  }
}

void Session::restore_program_hooks(lua_State* L) {
  if (opt.trace) give_back_program_hooks(L);
  lua_pushnil(L);
  lua_setfield(L, LUA_REGISTRYINDEX, kHookedThreads);
  lua_pushnil(L);
  lua_setfield(L, LUA_REGISTRYINDEX, kHookFunctions);
  restore_library(L, "debug", kHookSwaps, 2);
}

// Tracing: the program's hooks back on every thread that has luaflame's.
void Session::give_back_program_hooks(lua_State* L) {
  // Where luaflame's hook still is, the program's (or the one of before
  // start) goes back; a thread whose hook C code replaced is said once.
  auto give_back = [&](lua_State* T) {
    if (lua_gethook(T) == lf_hook) {
      const HookChain::Chained c = hooks.chained_for(T);
      lua_sethook(T, c.hook, c.mask, c.count);
    } else if (!opt.quiet && lua_gethook(T) != nullptr && hooks.first_lost_hook()) {
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
}

// The hook on every profiled thread: the common trace event inline, the
// rest (a first sighting, an unwind, a coroutine switch, an armed thread,
// a chained hook, after stop) in Session::hook.
// Boundary: Lua (C) calls it for every hook event. No C++ exception leaves
// it: what the collector throws (std::bad_alloc growing its tables) ends
// profiling, and the program runs on with its own hooks (abandon_session).
// It never raises a Lua error, and calls no Lua function that could, while
// a C++ object with a destructor is alive in its frames (FrameTable::of and
// the walk use raw accesses and lua_getinfo only).
namespace {

// The slow path, out of line, with the try that ends profiling on a C++
// exception: lf_hook reaches it by a tail call and its common event needs
// no frame to catch in (luacheck traced: 7,907.5 M instructions before,
// 7,855.9 M after, by callgrind).
[[gnu::noinline]] void hook_slow(Session* s, lua_State* L, lua_Debug* ar) noexcept {
  try {
    s->hook(L, ar);
  } catch (const std::exception& e) {
    abandon_session(s, e.what());
  } catch (...) {
    abandon_session(s, "unknown error");
  }
}

}  // namespace

inline bool Session::trace_fast(lua_State* L, lua_Debug* ar) noexcept {
  return tracer.trace_fast(L, ar, hooks, acct);
}

namespace {

// trace_fast allocates nothing and throws nothing (tracer_events.hpp).
inline void hook_session(Session* s, lua_State* L, lua_Debug* ar) noexcept {
  if (__builtin_expect(s != nullptr, 1)) {
    if (__builtin_expect(s->trace_fast(L, ar), 1)) return;
    return hook_slow(s, L, ar);
  }
  lf_hook_after_stop(L, ar);
}

// A state whose session is not in slot 0 (another state profiled at the
// same time), or none (after stop): out of line, so that lf_hook's test of
// slot 0 comes before anything is saved.
[[gnu::noinline]] void hook_other_slot(lua_State* L, lua_Debug* ar, std::uintptr_t key) noexcept {
  hook_session(sessions::of_rest(key), L, ar);
}

}  // namespace

#if LUA_VERSION_NUM == 501
// Lua 5.1 marks no hook's CallInfo: lf_hook says it runs (foreign.hpp:
// t_own_hook), and sits in a section of its own, whose bounds tell the
// handler its prologue and epilogue, outside the flags. The session may end
// inside; the thread's flags stay.
__attribute__((section("lf_hook51_text"))) void lf_hook(lua_State* L, lua_Debug* ar) noexcept {
  foreign::OwnHook& own = foreign::t_own_hook;
  own.hook_ret = static_cast<const char*>(__builtin_return_address(0));
  own.running = 1;
  own.forwarding = 0;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  const std::uintptr_t key = sessions::key_of(L);
  if (sessions::g_slots[0].key.load(std::memory_order_acquire) != key)
    hook_other_slot(L, ar, key);
  else
    hook_session(sessions::g_slots[0].session.load(std::memory_order_acquire), L, ar);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  own.forwarding = 0;
  own.running = 0;
}
#else
#if LUA_VERSION_NUM == 502 || LUA_VERSION_NUM == 503
namespace {
// A hook event on a thread whose status is LUA_YIELD: the host runs a
// function on a suspended coroutine (nmap's nse_restore lua_pcall's
// nse_main.lua's WAITING_TO_RUNNING on a script's yielded thread). Lua
// 5.2's and 5.3's lua_getinfo then take L->ci for the call that yielded
// and swap its `func` with its `extra` (ldebug.c's swapextra; 5.4 has
// none): traced, attached nmap died of SIGSEGV, 5.2 named it `[C] <anon>`.
// The tracer takes such an event with the thread's status LUA_OK, as while
// it runs (Session::trace_yielded: where lua_State.status was verified at
// start); else it leaves it alone, and its time stays with the frame the
// running thread is in. The program's own hook gets it with the status it
// has.
[[gnu::noinline]] void hook_yielded(lua_State* L, lua_Debug* ar) noexcept {
  Session* s = sessions::of(L);
  if (!s) return lf_hook_after_stop(L, ar);
  s->trace_yielded(L, ar);
  const HookChain::Chained c = s->chained_for(L);
  if (c.hook && c.hook != lf_hook && (c.mask & event_mask(ar->event))) c.hook(L, ar);
}
}  // namespace
#endif

void lf_hook(lua_State* L, lua_Debug* ar) noexcept {
#if LUA_VERSION_NUM == 502 || LUA_VERSION_NUM == 503
  if (__builtin_expect(lua_status(L) == LUA_YIELD, 0)) return hook_yielded(L, ar);
#endif
  const std::uintptr_t key = sessions::key_of(L);
  if (__builtin_expect(sessions::g_slots[0].key.load(std::memory_order_acquire) != key, 0))
    return hook_other_slot(L, ar, key);
  hook_session(sessions::g_slots[0].session.load(std::memory_order_acquire), L, ar);
}
#endif

// hook_yielded's event traced with the status LUA_OK, written back before
// anything that may raise a Lua error (the program's hook, forwarded
// after). The signal handler reads no status.
void Session::trace_yielded(lua_State* L, lua_Debug* ar) noexcept {
  const int ev = ar->event;
  if (!opt.trace || !layout.status_ok || ev == LUA_HOOKCOUNT || ev == LUA_HOOKLINE ||
      luaint::status(L) != LUA_YIELD)
    return;
  luaint::set_status(L, LUA_OK);
  const char* failed = cxx_guard([&] { tracer.event(L, ar); });
  luaint::set_status(L, LUA_YIELD);
  if (failed) abandon(failed, "the trace hook");
}

// lf_hook's slow path (here, so that Tracer::event is inlined in it): the tracer's event (call and
// return events; the count event is the one-shot's), then what an armed thread or a chained hook
// needs. The signal handler may arm while the tracer works: the fence keeps the read of the armed
// state after that work, so such a sample is taken at this event.
void Session::hook(lua_State* L, lua_Debug* ar) {
  ++acct.hook_calls;
  const int ev = ar->event;
  if (opt.trace && ev != LUA_HOOKCOUNT && ev != LUA_HOOKLINE) tracer.event(L, ar);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (hooks.armed() || hooks.forwards()) hook_rest(L, ar, ev);
}

}  // namespace lfc
