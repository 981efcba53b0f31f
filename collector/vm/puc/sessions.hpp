// The live sessions of this process: one per profiled Lua state, each its
// own run (`luaflame attach` profiles every state a host makes, on the
// threads that run them). Internal.
//
// A session is found by its state's global_State (luaint::global_of, one
// pointer load, checked at start by the probe: Layout::global_ok): the
// hooks and the coroutine wrappers look it up from the lua_State they are
// given, the signal handler from the slot number its timer carries
// (sigev_value). A key is l_G with its low bit set (a pointer to an
// aligned struct: the bit is free, and an empty slot's 0 never matches);
// where l_G is not verified the mask clears it and every state has the one
// key 1: one session at a time, as before. Mask, not branch: the trace
// hook computes a key at every call and return.
//
// Contract. add() and remove() run under ending_mutex() (core/profile.hpp),
// so that finish_for_exit's visit never sees a session being deleted. The
// readers take no lock: a slot's key is written after its session and
// cleared before it, and a session is deleted only after remove(), by
// stop() on the thread that runs its state (its hooks do not run then) or
// at exit with the sessions of threads still running left behind
// (session.cpp). The signal handler may run on a thread the state has left
// (a late signal there, Sampler::quiet_here): it holds the slot (enter,
// leave) and remove() waits until it has let go.
#pragma once

#include <atomic>
#include <cstdint>

#include "vm/puc/luaint.hpp"

extern "C" {
#include <lua.h>
}

namespace lfc {

class Session;

namespace sessions {

/// States profiled at once; more are refused at start. A host may keep a
/// state per request or per connection; slots cost 24 bytes each, and the
/// lookup of a state past slot 0 starts at its hint (below), not a scan.
constexpr int kMax = 4096;
constexpr int kHintBits = 12;

/// No member initializers: g_table's storage is static, so every slot
/// starts zeroed (0: free) before the program runs. With them GCC made the
/// table's start a constructor that cleared its 96 KiB at load, each page
/// touched in every host that loads luaflame.so.
struct Slot {
  std::atomic<std::uintptr_t> key;
  std::atomic<Session*> session;
  /// Signal handlers inside this slot's session now (enter/leave): a
  /// session moved off a thread still gets that thread's late signals,
  /// and remove() waits for them before the session may be deleted.
  std::atomic<int> busy;
};
/// The live sessions and how their keys are made, side by side: lf_hook
/// reads the key bits and slot 0 from one base address.
struct Table {
  /// 0 when l_G tells states apart, ~0 when not (set while no session is live).
  std::atomic<std::uintptr_t> key_or{~std::uintptr_t{0}};
  Slot slots[kMax];
  /// The slot a key was last put in, by hint_of(key): of_rest's first guess,
  /// checked against the slot's key (two keys may share a hint: the loser
  /// is found by the scan).
  std::atomic<int> hints[1 << kHintBits];
};
extern Table g_table;
inline constexpr Slot (&g_slots)[kMax] = g_table.slots;
extern std::atomic<int> g_used;  ///< slots [0, g_used) may be live

/// The key of L's state: its l_G, or ~0 for every state when l_G is not
/// verified (never 0, a free slot's key). A load of lua_State's l_G
/// offset, safe whatever it holds (lua_State is larger).
inline std::uintptr_t key_of(const lua_State* L) noexcept {
  return reinterpret_cast<std::uintptr_t>(luaint::global_of(L)) |
         g_table.key_or.load(std::memory_order_relaxed);
}

/// A key's place in Table::hints (keys are global_State addresses, a few
/// hundred bytes apart: a multiplicative hash spreads them).
inline unsigned hint_of(std::uintptr_t key) noexcept {
  return static_cast<unsigned>((static_cast<std::uint64_t>(key >> 4) * 0x9E3779B97F4A7C15ull) >>
                               (64 - kHintBits));
}

/// The session of the state keyed `key` in slots 1 and up (of()'s slow
/// path: a second state profiled at once).
Session* of_rest(std::uintptr_t key) noexcept;

/// The session of L's state, or null. Any thread; async-signal-safe. Slot
/// 0 first, inline: the trace hook calls this at every call and return,
/// and most processes profile one state.
inline Session* of(const lua_State* L) noexcept {
  const std::uintptr_t key = key_of(L);
  if (g_slots[0].key.load(std::memory_order_acquire) == key)
    return g_slots[0].session.load(std::memory_order_acquire);
  return of_rest(key);
}

/// The session in `slot`, or null (the signal handler's lookup).
inline Session* at(int slot) noexcept {
  if (slot < 0 || slot >= kMax) return nullptr;
  return g_slots[slot].session.load(std::memory_order_acquire);
}

/// The signal handler's way in: the slot (its session may be null), held
/// until leave(); null for a slot number out of range.
inline Slot* enter(int slot) noexcept {
  if (slot < 0 || slot >= kMax) return nullptr;
  g_slots[slot].busy.fetch_add(1, std::memory_order_acq_rel);
  return &g_slots[slot];
}
inline void leave(Slot& slot) noexcept {
  slot.busy.fetch_sub(1, std::memory_order_release);
}

/// Puts s in a free slot under `key`: the slot, or -1 when all are taken.
/// Under ending_mutex().
int add(Session* s, std::uintptr_t key);
/// Takes s out of its slot, then waits for the handlers inside it (on
/// other threads) to leave; `wait` false in a forked child (the threads
/// that were inside are not there). Under ending_mutex().
void remove(int slot, bool wait = true);

/// Each live session (under ending_mutex(), or on the only thread left).
template <class F>
void each(F&& f) {
  const int n = g_used.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i)
    if (Session* s = g_slots[i].session.load(std::memory_order_acquire)) f(s);
}

}  // namespace sessions
}  // namespace lfc
