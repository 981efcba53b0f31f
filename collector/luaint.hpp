// Lua 5.4's internals that the collector reads directly, in one place.
//
// The public API cannot tell the signal handler where the thread is (no
// API function is async-signal-safe to call there but lua_sethook), nor
// walk a long stack in O(depth): for these two the collector reads
// lua_State.ci and CallInfo.previous itself. Every layout read here is
// checked once at start by probe() against what the API says on a real
// stack; a read whose check failed is never used (its caller falls back to
// the API, slower or less exact, and the summary says why).
//
// Layouts (lstate.h, 5.4.0 to 5.4.6, any LP64 ABI):
//   struct lua_State { CommonHeader (next, tt, marked); lu_byte status,
//     allowhook; unsigned short nci; StkId top; global_State *l_G;
//     CallInfo *ci; ... }                         -> ci at 4 pointers
//   struct CallInfo { StkId func, top; CallInfo *previous, *next; ... }
//                                                 -> previous at 2 pointers
#pragma once

#include <cstddef>
#include <cstring>
#include <string>

extern "C" {
#include <lua.h>
}

namespace lfc::luaint {

constexpr std::size_t kStateCi = 4 * sizeof(void*);  ///< lua_State.ci
constexpr std::size_t kCiPrevious = 2 * sizeof(void*);  ///< CallInfo.previous

/// The CallInfo below `ci` (null below the base CallInfo).
inline const void* ci_prev(const void* ci) {
  const void* p;
  std::memcpy(&p, static_cast<const char*>(ci) + kCiPrevious, sizeof p);
  return p;
}

/// The CallInfo `L` runs now. One aligned pointer load, no call: safe in a
/// signal handler that interrupted L's own thread (the value is the old or
/// the new CallInfo, both of which stay allocated until a GC shrinks the
/// list, and the handler does not dereference it).
inline const void* state_ci(const lua_State* L) {
  const void* ci;
  std::memcpy(&ci, reinterpret_cast<const char*>(L) + kStateCi, sizeof ci);
  return ci;
}

/// lua_State.hookcount (the instructions left before the count hook fires)
/// at byte offset `off`, found by probe(). lua_sethook resets it to the
/// base count; the collector puts it back after arming so that a program's
/// count hook (an instruction-limit sandbox, a coverage tool) still fires
/// at its count. Plain int load/store: safe from the handler on L's thread.
inline int hookcount(const lua_State* L, std::size_t off) {
  int v;
  std::memcpy(&v, reinterpret_cast<const char*>(L) + off, sizeof v);
  return v;
}
inline void set_hookcount(lua_State* L, std::size_t off, int v) {
  std::memcpy(reinterpret_cast<char*>(L) + off, &v, sizeof v);
}

/// What probe() found: which direct reads this Lua allows.
struct Layout {
  bool ci_prev_ok = false;       ///< CallInfo.previous walks the stack
  bool state_ci_ok = false;      ///< lua_State.ci is the running CallInfo
  std::size_t hookcount_off = 0;  ///< lua_State.hookcount, 0 when not found
  std::string why;               ///< "" or why a fast path is off
};

/// Checks every read above on a real two-level stack of L (a Lua function
/// calling a C function). Calls Lua: not from a hook or a signal handler.
Layout probe(lua_State* L);

}  // namespace lfc::luaint
