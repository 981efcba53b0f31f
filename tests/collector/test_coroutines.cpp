// Coroutine tracking (collector/vm/puc/coroutines.hpp) on a real Lua 5.4 state:
// the resume chain and the running thread the signal handler reads follow
// each switch, and a one-shot hook armed on the thread that stops running
// moves to the one that runs (the contract above Coroutines).
#include <doctest/doctest.h>

#include <vector>

#include "vm/puc/coroutines.hpp"
#include "vm/puc/hookchain.hpp"
#include "vm/puc/luaint.hpp"

extern "C" {
#include <lauxlib.h>
#include <lualib.h>
}

namespace {

struct State {
  lua_State* L = luaL_newstate();
  ~State() { lua_close(L); }
  lua_State* thread() {
    lua_State* co = lua_newthread(L);  // kept alive on L's stack
    return co;
  }
};

using Chain = std::vector<lua_State*>;

bool one_shot_on(lua_State* T) {
  return lua_gethook(T) == lfc::lf_hook;
}
bool no_hook_on(lua_State* T) {
  return lua_gethook(T) == nullptr;
}

}  // namespace

TEST_CASE("coroutines: the chain and the running thread follow resume and return") {
  State st;
  lua_State* L = st.L;
  lua_State* a = st.thread();
  lua_State* b = st.thread();
  lfc::luaint::Layout layout;
  lfc::Coroutines co;
  lfc::HookChain hooks(co.current(), layout, false);
  co.start(L);
  CHECK(co.chain() == Chain{L});
  CHECK(co.current().load() == L);

  hooks.begin_critical();
  co.enter(a, hooks);
  co.enter(b, hooks);
  CHECK(co.chain() == Chain{L, a, b});
  CHECK(co.current().load() == b);
  co.leave(a, b, hooks);  // b yielded back to a
  CHECK(co.chain() == Chain{L, a});
  CHECK(co.current().load() == a);
  // An error unwound a's resume of b without b's return being seen: b is
  // taken out wherever it is, and the last of the chain runs.
  co.enter(b, hooks);
  co.leave(L, a, hooks);
  CHECK(co.chain() == Chain{L, b});
  CHECK(co.current().load() == b);
  co.leave(L, b, hooks);
  CHECK(co.chain() == Chain{L});
  // A return from a thread not in the chain (resumed before the session)
  // leaves the resumer running, never an empty chain.
  co.leave(L, L, hooks);
  CHECK(co.chain() == Chain{L});
  CHECK(co.current().load() == L);
  hooks.end_critical();
}

TEST_CASE(
    "coroutines: a sample armed on the thread that stops running moves to the one that runs") {
  State st;
  lua_State* L = st.L;
  lua_State* a = st.thread();
  lfc::luaint::Layout layout;
  lfc::Coroutines co;
  lfc::HookChain hooks(co.current(), layout, false);
  co.start(L);

  hooks.begin_critical();
  hooks.arm();  // as the signal handler would, on the running thread
  REQUIRE(hooks.armed_on(L));
  CHECK(one_shot_on(L));

  co.enter(a, hooks);
  CHECK(hooks.armed_on(a));
  CHECK(one_shot_on(a));
  CHECK(no_hook_on(L));  // L's hook given back as it was

  co.leave(L, a, hooks);
  CHECK(hooks.armed_on(L));
  CHECK(one_shot_on(L));
  CHECK(no_hook_on(a));

  // Not armed: a switch arms nothing.
  hooks.disarm();
  co.enter(a, hooks);
  CHECK_FALSE(hooks.armed());
  CHECK(no_hook_on(a));
  co.leave(L, a, hooks);
  CHECK_FALSE(hooks.armed());
  hooks.end_critical();
}
