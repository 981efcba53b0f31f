// LuaJIT's trace mode: call and return hooks, with the JIT compiler off
// (JTracer::start) since hooks do not fire in compiled code.
//
// LuaJIT gives no return event for C functions (fast functions and C
// functions return without one) and none for a frame a tail call or an
// error replaced, so the shadow stack is kept by frame position: at a call
// the new frame's caller is lua_getstack level 1, and every entry above
// the caller's slot is gone; at a return every entry above the returning
// frame is gone, and the frame itself. A C function's time therefore ends
// at the next traced event (docs/luajit.md).
#include "vm/luajit/jtracer.hpp"

extern "C" {
#include <luajit.h>
}

namespace lfc::jit {

// The frames already on T's stack when tracing starts, outermost first, so
// the calls that follow hang under them; the host's C entry and the C
// function that called start are left out.
void JTracer::seed(lua_State* T) {
  JShadow& sh = shadows_[T];
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
    const uint32_t f = frames_.frame_at(T, &ar, false);
    lua_settop(T, top);
    if (f != JFrames::kSkip) seen.push_back({slot, f, ar.what[0] == 'C'});
  }
  if (!seen.empty() && seen.front().c) seen.erase(seen.begin());
  while (!seen.empty() && seen.back().c) seen.pop_back();
  for (std::size_t i = seen.size(); i-- > 0;)
    sh.stack.push_back({run_.tree.child(sh.top(), seen[i].frame), seen[i].frame, seen[i].slot});
}

void JTracer::charge_now() {
  const uint64_t t = clock_.now();
  auto it = shadows_.find(chain_.running(start_L_));
  if (it != shadows_.end() && t > last_tick_)
    run_.tree.add(it->second.top(), run_.col_time, clock_.to_ns(t - last_tick_));
  last_tick_ = t;
}

void JTracer::exclude(uint64_t dt_ns) {
  // ns back to ticks: the inverse of to_ns (mult is ns per tick times 2^32).
  last_tick_ +=
      clock_.tsc && clock_.mult
          ? static_cast<uint64_t>((static_cast<unsigned __int128>(dt_ns) << 32) / clock_.mult)
          : dt_ns;
}

JShadow& JTracer::shadow(lua_State* T) {
  if (T != last_T_ || !last_sh_) {
    last_sh_ = &shadows_[T];
    last_T_ = T;
  }
  return *last_sh_;
}

void JTracer::resumed(lua_State* L, lua_State* co) {
  auto it = shadows_.find(co);
  if (it == shadows_.end()) shadows_[co].root = shadows_[L].top();
}

namespace {

bool jit_status(lua_State* L) {
  const int top = lua_gettop(L);
  bool on = false;
  lua_getfield(L, LUA_REGISTRYINDEX, "_LOADED");
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "jit");
    if (lua_istable(L, -1)) {
      lua_getfield(L, -1, "status");
      if (lua_isfunction(L, -1) && lua_pcall(L, 0, 1, 0) == 0) on = lua_toboolean(L, -1);
    }
  }
  lua_settop(L, top);
  return on;
}

}  // namespace

// Hooks do not fire in compiled code: the tracer runs the program on the
// interpreter (flushing the traces made so far), and says so.
void JTracer::start(lua_State* L, lua_Hook hook) {
  start_L_ = L;
  clock_.init();
  jit_was_on_ = jit_status(L);
  luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_FLUSH);
  luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
  prev_hook_ = lua_gethook(L);
  prev_mask_ = lua_gethookmask(L);
  prev_count_ = lua_gethookcount(L);
  seed(L);
  last_tick_ = clock_.now();
  lua_sethook(L, hook, LUA_MASKCALL | LUA_MASKRET, 0);
}

void JTracer::stop(lua_State* L, bool closing) {
  charge_now();
  if (!L) return;
  lua_sethook(L, prev_hook_, prev_mask_, prev_count_);
  // Not while the state closes: luaJIT_setmode raises there (from
  // lua_close's finalizer), and that error unwound out of stop() before
  // it wrote the profile (the exit handler wrote it instead).
  if (jit_was_on_ && !closing) luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_ON);
}

void JTracer::event(lua_State* T, lua_Debug* ar) {
  const uint64_t t0 = clock_.now();
  JShadow& sh = shadow(T);
  if (t0 > last_tick_) run_.tree.add(sh.top(), run_.col_time, clock_.to_ns(t0 - last_tick_));
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
    const uint32_t frame = frames_.frame_at(T, ar, false);
    lua_settop(T, top);
    if (frame == JFrames::kSkip) return done(t0);
    const uint32_t node = run_.tree.child(sh.top(), frame);
    sh.stack.push_back({node, frame, slot});
    run_.tree.add(node, run_.col_calls, 1);
    ++run_.acct.calls;
  } else {
    while (!sh.stack.empty() && sh.stack.back().slot > slot) sh.stack.pop_back();
    if (!sh.stack.empty() && sh.stack.back().slot == slot) sh.stack.pop_back();
  }
  done(t0);
}

void JTracer::done(uint64_t t0) {
  ++run_.acct.hook_calls;
  last_tick_ = clock_.now();
  run_.acct.hook_ns += clock_.to_ns(last_tick_ - t0);
}

}  // namespace lfc::jit
