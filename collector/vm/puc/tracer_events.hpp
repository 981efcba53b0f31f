// The tracer's per-event code (Tracer::event, Tracer::trace_fast and the
// call they share), inline: the hook (lf_hook, session_hooks.cpp) takes
// the common event without a call. Included by the hook's file only; the
// contract of the events is tracer.hpp's. Internal.
#pragma once

#include <cstdint>

#include "core/profile.hpp"
#include "core/tree.hpp"
#include "vm/puc/hookchain.hpp"
#include "vm/puc/luaint.hpp"
#include "vm/puc/tracer.hpp"

namespace lfc {

/// One trace event in this many (+1) also measures the hook's own cost.
inline constexpr uint64_t kTraceMeasureMask = 255;

// A call: the child of the caller's node for the function being called,
// straight from the call cache when the CallInfo's function is known
// (a few loads, a multiply and a compare), else through callee_node. The
// new frame's shadow entry gets `key` (where the frame runs: tail_key).
inline void Tracer::trace_call(lua_State* L, lua_Debug* ar, Shadow& sh, const void* key) {
  auto& st = sh.stack;
  const uint32_t parent = st.empty() ? sh.root : st.back().node;
  unsigned char tag;
  const void* value;
  luaint::func_of(luaint::hook_ci(L, *ar), tag, value);
  const void* ident = nullptr;
  const void* check = nullptr;
  if (tag == luaint::kTagLuaClosure) {
    if (ident_lua > 0) {
      ident = luaint::at<const void*>(value, luaint::kClosureFn);
      check = luaint::at<const void*>(ident, luaint::kProtoCode);
    }
  } else if (tag == luaint::kTagLightC) {
    if (ident_c > 0) ident = value;
  } else if (tag == luaint::kTagCClosure) {
    if (ident_c > 0) ident = luaint::at<const void*>(value, luaint::kClosureFn);
  }
  uint32_t node;
  std::atomic<uint64_t>* v;
  const CallCache* c = ident ? &call_cache[CallCache::slot(ident, parent, call_bits)] : nullptr;
  if (__builtin_expect(c && c->ident == ident && c->parent == parent && c->check == check, 1)) {
    node = c->child;
    v = c->slots;
  } else {
    node = callee_node(L, ar, parent, v);
    if (__builtin_expect(node == 0, 0)) {  // the host's entry (host_entry): no frame, no call
      st.push_back({0, key, v});
      return;
    }
  }
  Tree::bump(v[col_calls_], 1);
  ++acct_.calls;
  st.push_back({node, key, v});
}

inline void Tracer::event(lua_State* L, lua_Debug* ar) {
  const uint64_t t0 = tclock.now();
  Shadow* sh = last_sh;
  if (__builtin_expect(sh != nullptr, 1)) {
    if (t0 > last_tick) {  // last_tick: when the last event's work ended, about
      std::atomic<uint64_t>* v = sh->top_slots();
      if (!v) v = sh->root_slots = tree_.slots(sh->root);
      Tree::bump(v[col_time_], tclock.to_ns(t0 - last_tick));
    }
    if (L != last_L) sh = &shadows[L];
  } else {
    sh = &shadows[L];
  }
  auto& st = sh->stack;
  const void* key = luaint::frame_key(*ar);
  int ev = ar->event;
#if LUA_VERSION_NUM == 501
  // 5.1 reports a tail call as a call (trace mode runs there only when
  // probe() verified tail_call51: Layout::tail51_ok).
  if (ev == LUA_HOOKCALL && luaint::tail_call51(L)) ev = LUA_HOOKTAILCALL;
#endif
  if (ev == LUA_HOOKRET) {
    if (__builtin_expect(!st.empty() && st.back().ci == key, 1))
      st.pop_back();
    else
      unwind(st, key, ev);
  } else if (ev == LUA_HOOKCALL) {
    if (__builtin_expect(!st.empty() && st.back().ci != luaint::key_below(key), 0))
      unwind(st, key, ev);
    trace_call(L, ar, *sh, key);
  } else if (ev == LUA_HOOKTAILCALL) {
    key = luaint::tail_key(key);
    unwind(st, key, ev);
    trace_call(L, ar, *sh, key);
  }
  last_L = L;
  last_sh = sh;
  last_tick = t0 + hook_est;  // the rest of this event is the collector's time
  ++trace_events;
  if (__builtin_expect((++slow_events & kTraceMeasureMask) == 1, 0)) measure_hook(t0);
}

// The time since the last event's work ended charged to the frame `top`
// (trace_fast_ok: the cycle counter is the clock), the event counted; its
// clock reading returned. The fast path's work after it is fast_est, as
// the slow path's is hook_est: each path's own measured cost is taken off
// the interval that follows it.
inline uint64_t Tracer::charge_fast(std::atomic<uint64_t>* top) noexcept {
  const uint64_t t0 = read_cycles();
  if (t0 > last_tick) Tree::bump(top[col_time_], tclock.tsc_to_ns(t0 - last_tick));
  last_tick = t0 + fast_est;
  ++trace_events;  // a hook call too: counted by fast_events()
  return t0;
}

// The call cache's entry for the function of `ci` called under `parent`,
// or null when it is not there (or its identity cannot be read).
inline const CallCache* Tracer::cached_call(const void* ci, uint32_t parent) const noexcept {
  unsigned char tag;
  const void* value;
  luaint::func_of(ci, tag, value);
  const void* ident;
  const void* check = nullptr;
  if (tag == luaint::kTagLuaClosure && ident_lua > 0) {
    ident = luaint::at<const void*>(value, luaint::kClosureFn);
    check = luaint::at<const void*>(ident, luaint::kProtoCode);
  } else if (tag == luaint::kTagLightC && ident_c > 0) {
    ident = value;
  } else if (tag == luaint::kTagCClosure && ident_c > 0) {
    ident = luaint::at<const void*>(value, luaint::kClosureFn);
  } else {
    return nullptr;
  }
  const CallCache* c = &call_cache[CallCache::slot(ident, parent, call_bits)];
  return c->ident == ident && c->parent == parent && c->check == check ? c : nullptr;
}

// The common event, with no call and no allocation: a return whose
// CallInfo is the top frame's, or a call from the top frame (or a tail
// call replacing it) of a function in the call cache. Anything else returns
// false having changed nothing. The signal handler may arm the one-shot at
// any instruction (hooks.armed(), written by the handler): an armed thread
// takes the slow path, and an arm after the check leaves lua_sethook's
// one-shot to take the sample at the next event (nothing here changes hooks).
// The return, half the events, is done first and on its own.
inline bool Tracer::trace_fast(lua_State* L, lua_Debug* ar, const HookChain& hooks,
                               Accounting& acct) noexcept {
  if (!trace_fast_ok || hooks.armed() || L != last_L || !last_sh) return false;
  Shadow& sh = *last_sh;
  Shadow::Stack& st = sh.stack;
  std::atomic<uint64_t>* top = st.empty() ? sh.root_slots : st.back().slots;
  if (!top) return false;
  const void* key = luaint::frame_key(*ar);
  const int ev = ar->event;
  if (ev == LUA_HOOKRET) {
    if (st.empty() || st.back().ci != key) return false;
    const uint64_t t0 = charge_fast(top);
    st.pop_back();
    if (__builtin_expect((trace_events & kTraceMeasureMask) == 1, 0)) measure_fast(t0);
    return true;
  }
  // 5.1 reports a tail call as a call: told there, taken by event().
  if constexpr (luaint::kRelease == 0)
    if (ev != LUA_HOOKCALL || luaint::tail_call51(L)) return false;
  uint32_t parent;
  if (ev == LUA_HOOKCALL) {
    if (!st.room() || (!st.empty() && st.back().ci != luaint::key_below(key))) return false;
    parent = st.empty() ? sh.root : st.back().node;
  } else if (ev == LUA_HOOKTAILCALL) {
    // The top frame is replaced (the callee runs on its CallInfo): a child of its caller.
    key = luaint::tail_key(key);
    if (st.empty() || st.back().ci != key) return false;
    parent = st.size() > 1 ? st[st.size() - 2].node : sh.root;
  } else {
    return false;
  }
  const CallCache* c = cached_call(luaint::hook_ci(L, *ar), parent);
  if (!c) return false;
  const uint64_t t0 = charge_fast(top);
  if (ev == LUA_HOOKTAILCALL) st.pop_back();  // the time above was the replaced frame's
  Tree::bump(c->slots[col_calls_], 1);
  ++acct.calls;
  st.push_fast({c->child, key, c->slots});
  if (__builtin_expect((trace_events & kTraceMeasureMask) == 1, 0)) measure_fast(t0);
  return true;
}

}  // namespace lfc
