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

#include <algorithm>

#include "vm/luajit/jlayout.hpp"

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
  for (std::size_t i = seen.size(); i-- > 0;) {
    const uint32_t node = run_.tree.child(sh.top(), seen[i].frame);
    sh.stack.push_back({node, seen[i].frame, seen[i].slot, run_.tree.slots(node)});
  }
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

// A coroutine's frames hang under the frame that resumes it now, as the
// 5.4 tracer's do: a generator resumed from two places shows under each.
void JTracer::resumed(lua_State* L, lua_State* co) {
  const uint32_t parent = shadows_[L].top();
  JShadow& sh = shadows_[co];  // unordered_map: references stay valid as it grows
  if (sh.root != parent) reroot(sh, parent);
  resumed_co_ = co;
}

void JTracer::spawned(lua_State* T, uint32_t node, const void* f) {
  JShadow& sh = shadow(T);
  if (sh.root != node) reroot(sh, node);
  spawned_[T] = {node, f};
}

// Contract: in the hook (event), for a call with no caller: the function
// called is the hook's frame's (ar).
uint32_t JTracer::start_root(lua_State* T, lua_Debug* ar) {
  auto it = spawned_.find(T);
  if (it == spawned_.end()) return 0;
  const void* fn = nullptr;
  if (idents_ok_) {
    fn = layout::hook_func(T, *ar);
  } else if (lua_checkstack(T, 1) && lua_getinfo(T, "f", ar)) {
    fn = lua_topointer(T, -1);
    lua_pop(T, 1);
  }
  if (fn == it->second.first) return it->second.node;
  spawned_.erase(it);  // recycled: the host runs other work on it now
  return 0;
}

void JTracer::returned(lua_State* co) {
  if (lua_status(co) == LUA_YIELD) return;
  if (last_T_ == co) last_T_ = nullptr, last_sh_ = nullptr;
  if (resumed_co_ == co) resumed_co_ = nullptr;
  shadows_.erase(co);
}

void JTracer::reroot(JShadow& sh, uint32_t root) {
  sh.root = root;
  sh.root_values = nullptr;
  uint32_t node = root;
  for (auto& e : sh.stack) {
    node = run_.tree.child(node, e.frame);
    e.node = node;
    e.values = run_.tree.slots(node);
  }
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
void JTracer::start(lua_State* L, lua_Hook hook, bool layout_ok, const std::string& why) {
  start_L_ = L;
  clock_.init();
  jit_was_on_ = jit_status(L);
  luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_FLUSH);
  luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
  idents_ok_ = layout_ok;
  idents_why_ = layout_ok ? "" : why;
  if (idents_ok_) calls_.assign(std::size_t{1} << call_bits_, Call{});
  prog_ = {lua_gethook(L), lua_gethookmask(L), lua_gethookcount(L)};
  hook_ = hook;
  seed(L);
  last_tick_ = clock_.now();
  own_hook_back(L);
}

void JTracer::own_hook_back(lua_State* L) const {
  const int mask = LUA_MASKCALL | LUA_MASKRET | (prog_.hook ? prog_.mask : 0);
  lua_sethook(L, hook_, mask, (mask & LUA_MASKCOUNT) ? prog_.count : 0);
}

void JTracer::adopt(lua_State* L) {
  const lua_Hook h = lua_gethook(L);
  if (h == hook_) return;
  prog_ = {h, h ? lua_gethookmask(L) : 0, h ? lua_gethookcount(L) : 0};
  own_hook_back(L);
}

void JTracer::stop(lua_State* L, bool closing) {
  charge_now();
  // The hook's own time and events, for the summary.
  run_.acct.hook_calls += events_;
  run_.acct.hook_ns += clock_.to_ns(hook_ticks_);
  events_ = hook_ticks_ = 0;
  if (!L) return;
  lua_sethook(L, prog_.hook, prog_.mask, prog_.count);
  // Not while the state closes: luaJIT_setmode raises there (from
  // lua_close's finalizer), and that error unwound out of stop() before
  // it wrote the profile (the exit handler wrote it instead).
  if (jit_was_on_ && !closing) luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_ON);
}

// lua_getstack's i_ci is (size << 16) + slot, size being the distance to
// the frame above: level 1's slot is slot - size. -1: no caller.
inline int64_t JTracer::caller_of(lua_State* T, int64_t slot) {
  if (__builtin_expect(idents_ok_, 1)) return layout::caller_slot(T, slot);
  lua_Debug up;
  if (lua_getstack(T, 1, &up)) return slot - (static_cast<int64_t>(up.i_ci) - slot) / 65535;
  return -1;
}

// Contract: on the Lua thread, inside LuaJIT's hook (trace_hook), so T's
// frames stay where they are. The time before its first clock reading is
// the program's, charged to the frame on top; the time to its second is
// its own. Reading the clock once and taking off an estimate of the rest
// (as the 5.4 tracer's fast path does) cost little fewer instructions
// and moved time between frames: a C function (no return event) took the
// error of each call's estimate, 1.7x the time of `(for generator)` on
// luacheck with the estimate of 1 event in 256.
void JTracer::event(lua_State* T, lua_Debug* ar) {
  const uint64_t t0 = clock_.now();
  JShadow& sh = shadow(T);
  // In the hook, ar->i_ci is the running frame's slot on T's stack, whole.
  const int64_t slot = ar->i_ci;
  const bool call = ar->event == LUA_HOOKCALL;
  const int64_t caller = call ? caller_of(T, slot) : 0;
  // The time since the last event goes to T's top frame, unless this is a
  // thread's first function that no resume we saw started: the host's C
  // code started it (nginx's request threads, Neovim's callbacks), and the
  // time was the host's, which the trace leaves out (as the PUC tracer
  // does between a host's resumes).
  if (__builtin_expect(caller < 0 && T != resumed_co_, 0)) {
    // Not under the resumer of a dead thread at its address.
    if (const uint32_t root = start_root(T, ar); sh.root != root) reroot(sh, root);
  } else if (t0 > last_tick_) {
    Tree::bump(sh.top_values(run_.tree)[run_.col_time], clock_.to_ns(t0 - last_tick_));
  }
  if (call) {
    on_call(T, ar, sh, slot, caller);
  } else {
    while (!sh.stack.empty() && sh.stack.back().slot > slot) sh.stack.pop_back();
    if (!sh.stack.empty() && sh.stack.back().slot == slot) sh.stack.pop_back();
  }
  // The time until here is the hook's own: not the program's, counted apart.
  last_tick_ = clock_.now();
  hook_ticks_ += last_tick_ - t0;
  ++events_;
}

void JTracer::on_call(lua_State* T, lua_Debug* ar, JShadow& sh, int64_t slot, int64_t caller) {
  while (!sh.stack.empty() && sh.stack.back().slot > caller) sh.stack.pop_back();
  const Callee c = cached_node(T, ar, sh.top());
  if (c.frame == JFrames::kSkip) return;
  sh.stack.push_back({c.node, c.frame, slot, c.values});
  Tree::bump(c.values[run_.col_calls], 1);
  ++run_.acct.calls;
}

// A Lua function's identity is its bytecode, a C function's its object
// (jlayout.hpp): a hit costs a few loads and a hash lookup where
// lua_getinfo "S" walks the debug info and copies the chunk name (luacheck
// traced: the most instructions of any one function of the collector).
uint32_t JTracer::frame_of(lua_State* T, lua_Debug* ar, const layout::Ident& id) {
  if (idents_ok_) {
    auto it = idents_.find(id.key);
    if (it != idents_.end() && it->second.chunk == id.chunk && it->second.line == id.line)
      return it->second.frame;
  }
  lua_getinfo(T, "S", ar);
  const int top = lua_gettop(T);
  const uint32_t frame = frames_.frame_at(T, ar, false);
  lua_settop(T, top);
  if (idents_ok_) {
    // Entries of functions since freed stay until their place is reused: a
    // program that makes functions without end gets a fresh map now and then.
    if (idents_.size() >= (std::size_t{1} << 16)) idents_.clear();
    idents_[id.key] = IdentFrame{id.chunk, id.line, frame};
  }
  return frame;
}

JTracer::Callee JTracer::cached_node(lua_State* T, lua_Debug* ar, uint32_t parent) {
  if (__builtin_expect(!idents_ok_, 0)) return call_miss(T, ar, parent, layout::Ident{});
  const layout::Ident id = layout::ident_of(layout::hook_func(T, *ar));
  const Call& c = calls_[call_slot(id.key, parent, call_bits_)];
  if (__builtin_expect(
          c.key == id.key && c.parent == parent && c.chunk == id.chunk && c.line == id.line, 1))
    return {c.child, c.frame, c.values};
  return call_miss(T, ar, parent, id);
}

JTracer::Callee JTracer::call_miss(lua_State* T, lua_Debug* ar, uint32_t parent,
                                   const layout::Ident& id) {
  uint32_t frame = frame_of(T, ar, id);
  // A C function called at the root is the host's entry into the program (a
  // worker's lua_cpcall, a C function a host runs by lua_pcall): the walk of
  // a sample leaves out every C frame at the bottom of the stack
  // (JFrames::walk), so the trace does not show it either. What it calls
  // hangs from the root; its own time is the root's, as a sample's would be.
  if (parent == 0 && frames_.is_c(frame)) frame = JFrames::kSkip;
  const bool shown = frame != JFrames::kSkip;  // a frame not shown is cached as such
  const uint32_t child = shown ? run_.tree.child(parent, frame) : 0;
  std::atomic<uint64_t>* values = shown ? run_.tree.slots(child) : nullptr;
  if (!idents_ok_) return {child, frame, values};
  if (++call_misses_ > (calls_.size() << 1))
    grow_calls();
  else
    calls_[call_slot(id.key, parent, call_bits_)] =
        Call{id.key, id.chunk, id.line, parent, frame, child, values};
  return {child, frame, values};
}

// A program whose (caller path, function) pairs overflow the cache gets
// four times the entries, up to kMaxCallBits (tracer.cpp's grow_call_cache).
void JTracer::grow_calls() {
  call_misses_ = 0;
  if (call_bits_ >= kMaxCallBits) return;
  call_bits_ = std::min(call_bits_ + 2, kMaxCallBits);
  calls_.assign(std::size_t{1} << call_bits_, Call{});
}

}  // namespace lfc::jit
