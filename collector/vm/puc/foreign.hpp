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
// 5.4.5 keep the old stack readable until every pointer was moved. Closures,
// Protos and source strings on the stack are alive and never move. It writes
// only `out`, a buffer of the sampler's (sampler.hpp) no other code touches
// until the hook drains it. Each read is checked at start (luaint::probe);
// when a check failed, `foreign_ok` or `copy_ok` is false and the case is
// not told apart (foreign) or the frames are not copied (the sample then goes
// to a "[gc] finalizer" or "[hook] program hook" frame under the anchor).
#pragma once

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

/// Hooks off in L and the running CallInfo not the hooked one: a finalizer or
/// a program hook written in Lua runs. Two loads; handler-safe.
inline bool in_foreign(const lua_State* L, const luaint::Layout& layout) {
  return layout.foreign_ok && !luaint::allowhook(L) && !luaint::ci_hooked(luaint::state_ci(L));
}

/// The anchor below L->ci and the frames above it (see the contract above).
/// False when no anchor was found within kMaxWalk CallInfos (`out` then
/// holds no frame). Handler-safe.
bool copy_foreign(const lua_State* L, const luaint::Layout& layout, Copy& out);

}  // namespace lfc::foreign
