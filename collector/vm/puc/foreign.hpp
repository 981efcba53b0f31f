// Where no hook can run: finalizers and the program's own hooks.
//
// Lua runs a `__gc` finalizer (lgc.c, GCTM) and a debug hook (ldo.c,
// luaD_hook) with L->allowhook cleared, so no hook of L fires until they
// return: the one-shot hook the sampler arms cannot take a sample there, and
// armed with a count of 1 it makes every instruction of the finalizer pay
// luaG_traceexec and luaD_hook for nothing (a finalizer-heavy program ran
// 4x slower). The signal handler therefore tells three cases apart:
//   - hooks allowed: the program's code; the sample is taken by the hook;
//   - hooks off and the running CallInfo is the hooked one (CIST_HOOKED): a C
//     hook runs, luaflame's own (or the program's C hook it forwards to);
//   - hooks off and the running CallInfo is not the hooked one: a function
//     called with hooks off runs, a finalizer or a program's hook written in
//     Lua. That is "foreign" code: the handler copies what names its frames
//     (below) and the one-shot is armed lazily (HookChain::arm), so the
//     finalizer runs at full speed and the sample is taken once hooks are
//     allowed again, charged to the frame that ran the finalizer or the hook
//     (the anchor) and, under it, the copied frames.
//
// Signal-safety contract of copy_foreign (called by the handler on the Lua
// thread, at any instruction): it only loads. It follows CallInfo.previous
// from L->ci down to the anchor (at most kMaxWalk CallInfos; each stays
// allocated until a GC shrinks the list, which no handler interrupts on its
// own thread in the middle of a CallInfo's use), reads each CallInfo's
// callstatus and func, and reads the function value only when func lies
// inside [L->stack, L->stack_last): while Lua 5.4.6 reallocates a stack,
// CallInfo.func holds an offset, not a pointer, and fails that test; 5.4.0 to
// 5.4.5 keep the old stack readable until every pointer was moved; 5.2 and
// 5.3 free it first (realloc), and are read only while stacksize agrees with
// the bounds (luaint::stack_settled), when a pointer not yet moved lies
// outside the new stack. Closures,
// Protos and source strings on the stack are alive and never move. It writes
// only `out`, a buffer of the sampler's (sampler.hpp) no other code touches
// until the hook drains it. Each read is checked at start (luaint::probe);
// when a check failed, `foreign_ok` or `copy_ok` is false and the case is
// not told apart (foreign) or the frames are not copied (the sample then goes
// to a "[gc] finalizer" or "[hook] program hook" frame under the anchor).
#pragma once

#include <csignal>
#include <cstddef>
#include <cstdint>

#include "vm/puc/luaint.hpp"

extern "C" {
#include <lua.h>
}

namespace lfc::foreign {

/// A function of a foreign stack, as the handler saw it: what names it.
/// Plain data, left uninitialized (the sampler's buffers hold 16 of them
/// per position): copy_foreign writes every field it publishes.
struct FrameCopy {
  static constexpr std::size_t kText = 120;
  const void* ident;  ///< a Lua function's source (getstr), a C function's address
  int line;           ///< Lua: linedefined
  bool c;
  bool cut;          ///< the source was longer than kText
  uint16_t len;      ///< bytes of the source copied into `text`
  char text[kText];  ///< Lua: the source string's first bytes
};

/// A sample in foreign code: the anchor and the frames above it, root first.
struct Copy {
  static constexpr int kMaxFrames = 6;
  enum Kind : uint8_t { kNone, kFinalizer, kHook };
  const void* anchor;  ///< the CallInfo that ran the finalizer or the hook
  Kind kind;
  uint8_t nframes;
  bool deeper;  ///< more frames above the last one copied (left out)
  FrameCopy frames[kMaxFrames];
};

/// Lua 5.1 marks neither a hook's CallInfo nor a finalizer's: what luaflame's
/// hook says of itself instead, per thread, for the signal handler on that
/// thread (initial-exec TLS: loads, no call). `running`: lf_hook's body runs
/// (session_hooks.cpp); `forwarding`: it calls the program's hook;
/// `hook_ret`: where luaD_callhook goes on after a hook (lf_hook's return
/// address); `pc`: the instruction the handler interrupted (null outside the
/// handler). Lua clears allowhook a few instructions before it calls the hook
/// and sets it a few after (luaD_callhook), and lf_hook's prologue and
/// epilogue lie outside its flags: a pc there (near hook_ret, or in lf_hook,
/// which the 5.1 build puts in a section of its own, lf_hook51_text) is a
/// hook of ours, not foreign code. A hook run on a coroutine from inside a
/// hook, or an error unwinding a hook
/// (longjmp), leaves the flags wrong until the next hook's end; a sample is
/// then named as the other kind, or taken at the hook's stack.
struct OwnHook {
  volatile sig_atomic_t running, forwarding;
  const char* volatile hook_ret;
  const char* volatile pc;
};
inline thread_local OwnHook t_own_hook
    __attribute__((tls_model("initial-exec"))) = {0, 0, nullptr, nullptr};

}  // namespace lfc::foreign

// lf_hook's code on 5.1, [start, stop): the linker's bounds of its section
// (session_hooks.cpp; weak: other builds have no such section).
extern "C" const char __start_lf_hook51_text[] __attribute__((weak, visibility("hidden")));
extern "C" const char __stop_lf_hook51_text[] __attribute__((weak, visibility("hidden")));

namespace lfc::foreign {

/// 5.1: a pc of one of luaflame's hooks, flags aside (OwnHook). Loads only.
inline bool in_own_hook_code(const OwnHook& o) {
  const char* pc = o.pc;
  const char* ret = o.hook_ret;
  if (!pc) return false;
  if (ret && pc >= ret - 16 && pc < ret + 24) return true;  // luaD_callhook around the call
  return pc >= __start_lf_hook51_text && pc < __stop_lf_hook51_text;
}

/// Hooks off in L and the running CallInfo not the hooked one (5.1: no hook
/// of luaflame's runs, or it forwards to the program's): a finalizer or a
/// program hook runs. A few loads; handler-safe.
inline bool in_foreign(const lua_State* L, const luaint::Layout& layout) {
  if (!layout.foreign_ok || luaint::allowhook(L)) return false;
  if constexpr (luaint::kRelease == 0) {
    const OwnHook& o = t_own_hook;
    return o.forwarding || (!o.running && !in_own_hook_code(o));
  }
  return !luaint::ci_hooked(luaint::state_ci(L));
}

/// The anchor below L->ci and the frames above it (see the contract above).
/// False when no anchor was found within kMaxWalk CallInfos (`out` then
/// holds no frame). On 5.2, which marks no finalizer, a walk that reaches
/// the base CallInfo with no hook found is a finalizer with no anchor and
/// no frame; on 5.1 every copy is one with no anchor and no frame, of the
/// kind t_own_hook and L's hook say. Handler-safe.
bool copy_foreign(const lua_State* L, const luaint::Layout& layout, Copy& out);

}  // namespace lfc::foreign
