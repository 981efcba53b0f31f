// LuaJIT's trace mode: call and return hooks, with the JIT compiler off
// (jsession.cpp) since hooks do not fire in compiled code.
//
// LuaJIT gives no return event for C functions (fast functions and C
// functions return without one) and none for a frame a tail call or an
// error replaced, so the shadow stack is kept by frame position: at a call
// the new frame's caller is lua_getstack level 1, and every entry above
// the caller's slot is gone; at a return every entry above the returning
// frame is gone, and the frame itself. A C function's time therefore ends
// at the next traced event (docs/luajit.md).
#include "vm/lua/boundary.hpp"
#include "vm/luajit/jsession.hpp"

namespace lfc::jit {

// Contract: LuaJIT's hooks are global (one per state, every coroutine) and
// run on the Lua thread only; the sampler's callback runs on the same
// thread between instructions, never inside this hook, so the two share
// the session without locks. The streamer thread only reads the tree.
void trace_hook(lua_State* L, lua_Debug* ar) noexcept {
  JitState* j = g_jit.load();
  if (!j || (ar->event != LUA_HOOKCALL && ar->event != LUA_HOOKRET)) return;
  // What the tracer throws (std::bad_alloc growing its tables) ends profiling.
  if (const char* failed = cxx_guard([&] { j->trace_event(L, ar); })) abandon(failed);
}

// The frames already on T's stack when tracing starts, outermost first, so
// the calls that follow hang under them; the host's C entry and the C
// function that called start are left out.
void JitState::seed(lua_State* T) {
  JShadow& sh = shadows[T];
  struct Seen {
    int64_t slot;
    uint32_t frame;
    bool c;
  };
  std::vector<Seen> seen;
  lua_Debug ar;
  int64_t slot = 0;
  for (int level = 0; lua_getstack(T, level, &ar) && level < 4096; ++level) {
    slot = level == 0 ? ar.i_ci : slot - (static_cast<int64_t>(ar.i_ci) - slot) / 65535;
    lua_getinfo(T, "S", &ar);
    const int top = lua_gettop(T);
    const uint32_t f = frame_at(T, &ar, false);
    lua_settop(T, top);
    if (f != kSkip) seen.push_back({slot, f, ar.what[0] == 'C'});
  }
  if (!seen.empty() && seen.front().c) seen.erase(seen.begin());
  while (!seen.empty() && seen.back().c) seen.pop_back();
  for (std::size_t i = seen.size(); i-- > 0;)
    sh.stack.push_back({s->tree.child(sh.top(), seen[i].frame), seen[i].frame, seen[i].slot});
}

void JitState::charge_now() {
  const uint64_t t = now_ns();
  auto it = shadows.find(chain.empty() ? L : chain.back());
  if (it != shadows.end() && t > last_ns) s->tree.add(it->second.top(), s->col_time, t - last_ns);
  last_ns = t;
}

void JitState::trace_event(lua_State* T, lua_Debug* ar) {
  const uint64_t t0 = now_ns();
  JShadow& sh = shadows[T];
  if (t0 > last_ns) s->tree.add(sh.top(), s->col_time, t0 - last_ns);
  // In the hook, ar->i_ci is the running frame's slot on T's stack, whole.
  const int64_t slot = ar->i_ci;
  if (ar->event == LUA_HOOKCALL) {
    // lua_getstack's i_ci is (size << 16) + slot, size being the distance
    // to the frame above: level 1's slot is slot - size.
    lua_Debug up;
    int64_t caller = -1;
    if (lua_getstack(T, 1, &up)) caller = slot - (static_cast<int64_t>(up.i_ci) - slot) / 65535;
    while (!sh.stack.empty() && sh.stack.back().slot > caller) sh.stack.pop_back();
    lua_getinfo(T, "S", ar);
    const int top = lua_gettop(T);
    const uint32_t frame = frame_at(T, ar, false);
    lua_settop(T, top);
    if (frame == kSkip) return done(t0);
    const uint32_t node = s->tree.child(sh.top(), frame);
    sh.stack.push_back({node, frame, slot});
    s->tree.add(node, s->col_calls, 1);
    ++s->acct.calls;
  } else {
    while (!sh.stack.empty() && sh.stack.back().slot > slot) sh.stack.pop_back();
    if (!sh.stack.empty() && sh.stack.back().slot == slot) sh.stack.pop_back();
  }
  done(t0);
}

void JitState::done(uint64_t t0) {
  ++s->acct.hook_calls;
  last_ns = now_ns();
  s->acct.hook_ns += last_ns - t0;
}

}  // namespace lfc::jit
