// The tracer: call and return hooks with CLOCK_MONOTONIC. Between two
// events, the time goes to the frame on top of the thread that ran (its
// self time); a call counts once on its path. Each shadow frame remembers
// the CallInfo it was entered with, which keeps the shadow stack right
// where Lua sends no event:
//  - tail call: the replaced frame is dropped (same CallInfo, new function);
//  - an error unwinding through pcall/error: the next call names its parent
//    CallInfo (ci->previous) and the next return its own, so the frames the
//    error skipped are popped there;
//  - coroutines: every thread has its own shadow stack, hung under the frame
//    that resumed it; time while suspended goes to whatever runs instead.
// The collector's own time in the hook is measured and not charged.
#include "session.hpp"

namespace lfc {

namespace {

// Index of the topmost entry entered with `ci`, or -1.
long find_ci(const std::vector<Shadow::Entry>& st, const void* ci) {
  for (std::size_t k = st.size(); k-- > 0;) if (st[k].ci == ci) return static_cast<long>(k);
  return -1;
}

}  // namespace

void Session::charge_now() {
  if (!last_sh || col_time < 0) return;
  uint64_t now = now_ns();
  if (now > last_ns) tree.add(last_sh->top(), col_time, now - last_ns);
  last_ns = now;
}

void Session::trace_event(lua_State* L, lua_Debug* ar) {
  const uint64_t t0 = now_ns();
  if (last_sh && t0 > last_ns) tree.add(last_sh->top(), col_time, t0 - last_ns);
  Shadow* sh = (L == last_L && last_sh) ? last_sh : &shadows[L];
  auto& st = sh->stack;
  const void* ci = ar->i_ci;
  const int ev = ar->event;
  bool push = false;
  if (ev == LUA_HOOKRET) {
    long k = find_ci(st, ci);
    if (k >= 0) st.resize(static_cast<std::size_t>(k));
  } else if (ev == LUA_HOOKCALL || ev == LUA_HOOKTAILCALL) {
    long k = ev == LUA_HOOKTAILCALL ? find_ci(st, ci) : -1;
    if (k >= 0) {
      st.resize(static_cast<std::size_t>(k));
    } else {
      // Called from the frame entered with ci->previous; a caller the
      // tracer never saw (the host's C entry, a coroutine's base) means root.
      long p = find_ci(st, ci_prev(ci));
      st.resize(static_cast<std::size_t>(p + 1));
    }
    push = true;
  }
  if (push) {
    lua_getinfo(L, "S", ar);
    uint32_t node = tree.child(sh->top(), frames.of(L, ar));
    tree.add(node, col_calls, 1);
    ++calls;
    st.push_back({node, ci});
  }
  last_L = L;
  last_sh = sh;
  const uint64_t t1 = now_ns();
  hook_ns += t1 - t0;
  last_ns = t1;
}

void Session::seed_shadow(lua_State* T, Shadow& sh, lua_State* via) {
  struct Level {
    uint32_t frame;
    const void* ci;
  };
  std::vector<Level> levels;  // leaf first
  lua_Debug ar;
  for (int level = 0; lua_getstack(T, level, &ar); ++level) {
    lua_getinfo(via, "S", &ar);
    levels.push_back({frames.of(via, &ar), ar.i_ci});
  }
  // The host's C entry at the bottom is not part of the program.
  while (!levels.empty() && frames.is_c(levels.back().frame)) levels.pop_back();
  uint32_t node = sh.root;
  for (std::size_t i = levels.size(); i-- > 0;) {
    node = tree.child(node, levels[i].frame);
    sh.stack.push_back({node, levels[i].ci});
  }
}

void Session::reroot(Shadow& sh, uint32_t root) {
  sh.root = root;
  uint32_t node = root;
  for (auto& e : sh.stack) {
    node = tree.child(node, tree.frame(e.node));
    e.node = node;
  }
}

}  // namespace lfc
