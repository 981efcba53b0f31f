// The hook chain (hookchain.hpp): the program's hooks kept behind
// luaflame's, and the one-shot hook armed by the sampler's signal and the
// allocator. Every lua_sethook of arming and adopting is here; the hooks a
// coroutine gets when it first runs and those given back at stop are in
// session_hooks.cpp.
#include "vm/puc/hookchain.hpp"

#include "core/xorshift.hpp"
#include "vm/puc/foreign.hpp"

namespace lfc {

void HookChain::keep_start_hook(lua_State* L) {
  lua_Hook h = lua_gethook(L);
  if (h == lf_hook) {
    prev_ = Chained{};
    return;
  }
  prev_ = Chained{h, lua_gethookmask(L), lua_gethookcount(L)};
}

bool HookChain::adopt(lua_State* T) {
  begin_critical();
  if (armed_ && armed_L_ == T) {
    // Armed after debug.sethook ran: what we armed over is the program's
    // new hook, put it back (with its count progress). Armed before: the
    // program's hook replaced our one-shot; owed waits for the next signal.
    if (lua_gethook(T) == lf_hook)
      disarm();
    else
      armed_ = 0, armed_L_ = nullptr;
  }
  const bool chained = chain_in_section(T);
  end_critical();
  return chained;
}

// T's hook, when it is not ours, chained behind ours. Inside a critical
// section, which a failed insert ends before it throws on.
bool HookChain::chain_in_section(lua_State* T) {
  lua_Hook h = lua_gethook(T);
  if (h == lf_hook) return false;
  const Chained c{h, h ? lua_gethookmask(T) : 0, h ? lua_gethookcount(T) : 0};
  try {
    chained_[T] = c;
  } catch (...) {
    end_critical();
    throw;
  }
  lua_sethook(T, lf_hook, thread_mask(T), c.count);
  return true;
}

bool HookChain::inherit(lua_State* L, lua_State* NL) {
  auto it = chained_.find(L);
  if (it == chained_.end()) {
    // NL may have the address of a collected thread whose hook was
    // chained: that hook is not NL's.
    if (chained_.count(NL)) {
      begin_critical();
      chained_.erase(NL);
      end_critical();
    }
    return false;
  }
  const Chained c = it->second;  // the insert below may rehash
  begin_critical();
  chained_[NL] = c;
  end_critical();
  return true;
}

bool HookChain::program_set(lua_State* T, lua_Hook hook, int mask, int count) {
  begin_critical();
  if (armed_on(T)) {
    armed_ = 0, armed_L_ = nullptr, armed_lazy_ = 0, moved_on_ = 0;
    deferred_ = 1;
  }
  lua_sethook(T, hook, mask, count);
  const bool chained = trace_ && chain_in_section(T);
  end_critical();
  return chained;
}

HookChain::Chained HookChain::program_hook(lua_State* T) const {
  // Not luaflame's: the program's own (also when it replaced a one-shot).
  lua_Hook h = lua_gethook(T);
  if (h != lf_hook) return Chained{h, lua_gethookmask(T), lua_gethookcount(T)};
  if (armed_on(T) && armed_hook_ != lf_hook) return Chained{armed_hook_, armed_mask_, armed_count_};
  return chained_for(T);
}

// lua_newthread copies L's hook, mask and count in an order the compiler
// chooses: a signal arming L amid the copy gave NL the program's hook with
// the one-shot's count of 1 (debug.gethook(co): "cl", 1 for "cl", 7; once in
// 300,000 coroutines at 4 kHz). So whenever L is armed, NL gets the hook
// under the one-shot, whatever it copied: the same as L's before arming.
bool HookChain::unshare_one_shot(lua_State* L, lua_State* NL) {
  if (trace_) return false;
  begin_critical();
  const bool armed = armed_on(L);
  const bool copied = armed || lua_gethook(NL) == lf_hook;
  if (copied) {
    const Chained c = armed ? Chained{armed_hook_, armed_mask_, armed_count_} : chained_for(L);
    lua_sethook(NL, c.hook, c.mask, c.count);
  }
  end_critical();
  return copied;
}

void HookChain::armed_forward(int ev, lua_Hook& hook, int& mask, bool& count_due) const {
  if (armed_hook_ != lf_hook) hook = armed_hook_, mask = armed_mask_;
  const int consumed = ev == LUA_HOOKCOUNT ? 1 : 0;
  count_due = armed_keep_count_ ? ev == LUA_HOOKCOUNT : armed_left_ > 0 && armed_left_ <= consumed;
}

// ---------------------------------------------------------------- arming
//
// The one-shot hook: its contract with the signal handler (sampler.hpp),
// the allocator (alloc.hpp) and the Lua-thread code that also changes
// hooks is written above the class (hookchain.hpp).
//
// Whether the count progress read in arm() cannot be trusted to split the
// program's count events from the one-shot's, so that arm() keeps the
// program's count running instead (the sample then waits for its next
// count event or a return, at most its count of instructions):
//   - `left` 0 or back at the base count: the signal may have fallen inside
//     luaG_traceexec (ldebug.c) after it decided to raise the program's count
//     event and before luaD_hook reads L->hook, so the event in flight is the
//     program's; or the count was just reset, so it is not. Either is
//     possible and they read the same.
//   - hooks not allowed: a hook of L runs (the program's, or ours forwarding
//     to it). Its instructions count down the program's count, with no
//     event the one-shot could take (luaD_hook skips them), so the progress
//     given back at the next event would be short of them. (Seen under qemu:
//     a count hook every 1,000 instructions lost one event of 903; with a
//     count of 3, one event in four samples.)
//   - the allowhook read not verified at start: always.
//   - Lua 5.1 and 5.2: always. Their VM's decrement of the count may be
//     split by the signal, and its store would undo the one-shot's count
//     (luaint::kCountStoreRaces).
// Reads L->allowhook (luaint.hpp): safe in the handler.
bool HookChain::count_progress_unsure(const lua_State* L, int left) const {
  return luaint::kCountStoreRaces || left <= 0 || left == armed_count_ || !layout_.allowhook_ok ||
         !luaint::allowhook(L);
}

void HookChain::arm() {
  lua_State* L = current_.load(std::memory_order_relaxed);
  // In a finalizer or a program's hook no hook fires (foreign.hpp): armed
  // lazily, on the thread's own events only, so that code runs at full speed.
  const bool lazy = L && foreign::in_foreign(L, layout_);
  if (armed_) {
    // Still ours: the sample is pending, unless the thread has since
    // entered foreign code or left it: armed again, lazily (a one-shot
    // armed outside, say in collectgarbage before its finalizers, made
    // every finalizer instruction pay luaG_traceexec: 2x the run time of
    // a collection whose marking came first) or for its next instruction.
    // Replaced (the program called debug.sethook meanwhile): its hook
    // stays, and we arm again.
    if (!armed_L_ || lua_gethook(armed_L_) == lf_hook) {
      if (armed_L_ != L || bool(armed_lazy_) == lazy) return;
      disarm();
    } else {
      armed_ = 0;
    }
  }
  if (!L) return;
  lua_Hook h = lua_gethook(L);
  if (h == lf_hook || h == nullptr) {
    // Back to the thread's base state afterwards (ours when tracing).
    const Chained c = chained_for(L);
    armed_hook_ = trace_ ? lf_hook : c.hook;
    armed_mask_ = trace_ ? thread_mask(L) : (c.hook ? c.mask : 0);
    armed_count_ = c.count;
    if (h == nullptr && !trace_) armed_hook_ = nullptr, armed_mask_ = 0, armed_count_ = 0;
  } else {
    armed_hook_ = h;
    armed_mask_ = lua_gethookmask(L);
    armed_count_ = lua_gethookcount(L);
  }
  armed_L_ = L;
  // The thread's own count progress, given back less what the one-shot
  // took; when it is unsure the program's count keeps running instead.
  armed_left_ = 0;
  armed_keep_count_ = 0;
  if ((armed_mask_ & LUA_MASKCOUNT) && layout_.hookcount_off) {
    const int left = luaint::hookcount(L, layout_.hookcount_off);
    armed_left_ = left > 0 ? left : luaint::kCountLeftAtZero;
    armed_keep_count_ = lazy || count_progress_unsure(L, left);
  }
  armed_lazy_ = lazy;
  if (armed_keep_count_ || lazy) {
    lua_sethook(L, lf_hook, armed_mask_ | LUA_MASKRET, armed_count_);
    if (armed_keep_count_) luaint::set_hookcount(L, layout_.hookcount_off, armed_left_);
  } else {
    lua_sethook(L, lf_hook, armed_mask_ | LUA_MASKCOUNT | LUA_MASKRET, 1);
  }
  armed_ = 1;
}

void HookChain::disarm(int consumed) {
  if (!armed_) return;
  // A hook set over the one-shot (debug.sethook, or C) stays: putting back
  // the one of before arming removed the program's new hook at the next
  // coroutine switch (pl.pretty.read turns the hook off and sets it again).
  if (armed_L_ && lua_gethook(armed_L_) == lf_hook) {
    const std::size_t off = layout_.hookcount_off;
    const bool counts = (armed_mask_ & LUA_MASKCOUNT) && off;
    // Kept running: the program's progress is the thread's count now.
    const int live = counts && armed_keep_count_ ? luaint::hookcount(armed_L_, off) : 0;
    lua_sethook(armed_L_, armed_hook_, armed_mask_, armed_count_);
    // lua_sethook restarted the thread's own count: give back its progress
    // (when it is due now, hook_rest forwards the count event and the
    // fresh count stays).
    if (counts && armed_keep_count_ && live > 0)
      luaint::set_hookcount(armed_L_, off, live);
    else if (counts && !armed_keep_count_ && armed_left_ > consumed)
      luaint::set_hookcount(armed_L_, off, armed_left_ - consumed);
  }
  armed_L_ = nullptr;
  armed_lazy_ = 0;
  moved_on_ = 0;
  armed_ = 0;
}

bool HookChain::move_on(lua_State* L) {
  if (!armed_ || armed_L_ != L || moved_on_ || armed_keep_count_ || armed_lazy_ ||
      (armed_mask_ & (LUA_MASKCOUNT | LUA_MASKLINE)))
    return false;
  const int count = 1 + static_cast<int>(xorshift32(move_rng_) % kMoveOn);
  lua_sethook(L, lf_hook, armed_mask_ | LUA_MASKCOUNT | LUA_MASKRET, count);
  moved_on_ = 1;
  return true;
}

void HookChain::end_critical() {
  for (;;) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (deferred_) {
      deferred_ = 0;
      arm();
    }
    std::atomic_signal_fence(std::memory_order_seq_cst);
    in_critical_ = 0;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (!deferred_) return;
    in_critical_ = 1;
  }
}

}  // namespace lfc
