// The hook chain: the one owner of what luaflame does with Lua's one hook
// per thread. It keeps the program's hooks (the start thread's of before
// start, and those the program sets with debug.sethook while tracing), which
// luaflame's hook forwards to, and the one-shot hook the sampler's signal
// handler and the allocator arm. Internal; the hook itself (lf_hook) and
// debug.sethook's wrappers are the session's (session_hooks.cpp).
//
// Signal-safety contract of the one-shot (hookchain.cpp, "arming"). The
// signal handler (on_sampler_signal) and the allocator (alloc.cpp) call arm() on
// the Lua thread at any instruction; Lua-thread code that changes hooks
// calls it too:
//   - arm() and disarm() write the armed state (`armed_`, `armed_L_`,
//     `armed_hook_`, `armed_mask_`, `armed_count_`, `armed_left_`,
//     `armed_keep_count_`, `armed_lazy_`) and call lua_sethook (async-signal-safe by Lua's
//     design, see the comment above lua_sethook in ldebug.c). They allocate
//     nothing and take no lock: the handler may run them. Only two callers
//     run them: the handler or allocator outside a critical section, or
//     Lua-thread code inside one (begin_critical .. end_critical). In a
//     critical section the handler only calls defer(); end_critical() then
//     arms, and loops until no signal fell between its last check and
//     leaving, so a signal is never lost and never arms in the middle of a
//     hook change.
//   - `in_critical_` and `deferred_` are volatile sig_atomic_t, ordered with
//     signal fences (the handler runs on this thread: no CPU fence needed).
//   - arm() reads whether that thread runs foreign code (foreign::in_foreign:
//     two loads) and then arms lazily, on the thread's own events only: a
//     count of 1 would make each instruction of a finalizer pay for an event
//     no hook can take there.
//   - arm() reads the running thread (`current`, atomic, written by the
//     coroutine tracking inside critical sections) and that thread's hook
//     (lua_gethook: one load) to keep the program's: what we arm over is
//     restored by disarm(), with its count hook's progress (luaint::hookcount,
//     one int) given back.
//   - lua_sethook is safe to call from the handler, not to interrupt: a
//     signal amid the program's own lua_sethook (debug.sethook) reads a
//     hook half written, and the rest of that lua_sethook then overwrites
//     part of the one-shot. debug.sethook's wrapper sets the program's hook
//     again inside a critical section (program_set), and so does a
//     host's lua_sethook from C under luaflame attach (its shim hands it
//     to Session::host_sethook); a host's without the shim is not
//     covered. disarm() leaves a hook set over the one-shot.
//   - The program's hooks (`prev_`, `chained_`) change only on the Lua
//     thread inside critical sections (adopt); arm() only reads them. The
//     map is not read by the handler while it rehashes: a critical section
//     defers the handler's arm.
#pragma once

#include <atomic>
#include <csignal>
#include <unordered_map>

#include "vm/puc/luaint.hpp"

extern "C" {
#include <lua.h>
}

namespace lfc {

/// The hook function installed on every profiled thread (session_hooks.cpp).
void lf_hook(lua_State* L, lua_Debug* ar) noexcept;
/// lf_hook on a thread that still had it after stop: the old hook back.
void lf_hook_after_stop(lua_State* L, lua_Debug* ar) noexcept;

class HookChain {
 public:
  /// A hook the program keeps on a thread: luaflame's hook forwards it
  /// exactly the events of its mask, its count events when its count is due.
  struct Chained {
    lua_Hook hook = nullptr;
    int mask = 0, count = 0;
  };

  /// `current`: the running thread (coroutine tracking); `layout`: which
  /// direct reads of Lua's structures this Lua allows (filled at start);
  /// `trace`: luaflame's own hook stays on every thread.
  HookChain(const std::atomic<lua_State*>& current, const luaint::Layout& layout, bool trace)
      : current_(current), layout_(layout), trace_(trace) {}

  // ---- the program's hooks ----
  /// At start: the start thread's hook, chained and restored at stop.
  void keep_start_hook(lua_State* L);
  const Chained& start_hook() const { return prev_; }
  /// The hook luaflame's forwards to on L: the one the program set there
  /// while tracing, else the start thread's of before start.
  Chained chained_for(lua_State* L) const {
    if (!chained_.empty()) {
      auto it = chained_.find(L);
      if (it != chained_.end()) return it->second;
    }
    return prev_;
  }
  /// Whether any thread may have a program hook to forward to (lf_hook's test).
  bool forwards() const { return prev_.hook || !chained_.empty(); }
  /// luaflame's mask on a thread: call/return when tracing, and the program's.
  int base_mask() const { return own_mask() | prev_.mask; }
  int thread_mask(lua_State* L) const { return own_mask() | chained_for(L).mask; }
  /// After the program's debug.sethook on T while tracing: keeps its hook
  /// and puts luaflame's back with its mask and count. False when T still
  /// has luaflame's (nothing to chain).
  bool adopt(lua_State* T);
  /// A thread `NL` made by `L` (coroutine.create, coroutine.wrap while
  /// tracing): lua_newthread copied L's hook, so NL chains L's program hook
  /// as the VM would have it. Inside a critical section of its own; true
  /// when L had one (NL is then to be given it back at stop).
  bool inherit(lua_State* L, lua_State* NL);
  /// After the program's debug.sethook on T (ldblib.c's db_sethook, which
  /// ends in lua_sethook): the hook it asked for set again in a critical
  /// section, and a one-shot armed on T forgotten (owed: armed again at the
  /// section's end). A signal amid that lua_sethook read a hook half
  /// written (the new function, the old mask) and its one-shot was then
  /// half overwritten: the program's hook went back with a wrong mask and
  /// count (pl.pretty.read, which turns the hook off and sets it again:
  /// "cr", 0 where it set "", 1000 on 5.1 while tracing; lost while sampling).
  /// Tracing, it is chained behind luaflame's in the same section (true
  /// when chained; it may throw, as adopt): a one-shot armed between two
  /// sections put luaflame's hook back with T's old mask, adopt then saw
  /// ours and kept the old hook chained (both mode, tests/attach/
  /// hook_host.c: 208-314 reads of 600,000 gave the old hook back, and its
  /// count hook got up to 505 events more than the 535,385 of alone).
  bool program_set(lua_State* T, lua_Hook hook, int mask, int count);
  /// What the program set on T (debug.gethook's answer): the hook under
  /// the one-shot armed there while sampling, the chained one under
  /// luaflame's, else T's own. Inside a critical section.
  Chained program_hook(lua_State* T) const;
  /// Sampling: lua_newthread copied L's hook to NL. When that was the
  /// one-shot armed on L (by a signal or the allocator while L ran
  /// coroutine.create, or for the thread's own allocation), NL gets the hook
  /// L had under it, as the VM would have copied: debug.gethook(co) answered
  /// luaflame's mask and count of 1, and the coroutine lost the program's
  /// hook when the one-shot fired there. True when it did.
  bool unshare_one_shot(lua_State* L, lua_State* NL);
  /// True the first time only: a C hook replaced luaflame's (said once).
  bool first_lost_hook() { return !warned_ && (warned_ = true); }

  // ---- the one-shot hook ----
  bool armed() const { return armed_; }
  bool armed_on(const lua_State* L) const { return armed_ && armed_L_ == L; }
  lua_State* armed_thread() const { return armed_L_; }
  /// From the handler or the allocator outside a critical section, or
  /// inside one: the one-shot on the running thread.
  void arm();
  /// Restores the armed thread's hook, and its count hook's progress less
  /// the `consumed` instructions our count hook took.
  void disarm(int consumed = 0);
  /// --lines on Lua 5.4: the one-shot fired where the VM noticed it, not
  /// where the signal fell. 5.4 checks for a hook set by a signal only at a
  /// call, a return or a loop's back jump (lvm.c's `trap`, refreshed there),
  /// so in a call-free loop every sample landed on the loop's first line.
  /// Moves the pending sample on by a random count of 1 to kMoveOn
  /// instructions (each line then gets samples in proportion to the
  /// instructions run on it), once per arm. Only on the Lua thread, inside a
  /// critical section; false (take the sample here) when it cannot: already
  /// moved, or the thread's own count or line hook is chained.
  bool move_on(lua_State* L);
  static constexpr int kMoveOn = 512;
  /// What an event on the armed thread forwards: the hook it had before we
  /// armed (when not luaflame's) and whether its own count event is due.
  void armed_forward(int ev, lua_Hook& hook, int& mask, bool& count_due) const;

  bool in_critical() const { return in_critical_; }
  /// From the handler or the allocator inside a critical section: arm at its end.
  void defer() { deferred_ = 1; }
  void begin_critical() {
    in_critical_ = 1;
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  void end_critical();
  /// At stop, the sampler stopped and disarmed: no arm owed any more.
  void end_critical_stopped() { in_critical_ = 0; }

 private:
  int own_mask() const { return trace_ ? (LUA_MASKCALL | LUA_MASKRET) : 0; }
  bool chain_in_section(lua_State* T);
  bool count_progress_unsure(const lua_State* L, int left) const;

  const std::atomic<lua_State*>& current_;
  const luaint::Layout& layout_;
  const bool trace_;

  Chained prev_;  ///< the start thread's hook before start
  /// Hooks the program set with debug.sethook while tracing, by thread, and
  /// those its threads inherited at creation; a thread not here chains the
  /// hook of before start.
  std::unordered_map<lua_State*, Chained> chained_;
  bool warned_ = false;

  volatile sig_atomic_t in_critical_ = 0, deferred_ = 0, armed_ = 0;
  lua_State* armed_L_ = nullptr;
  lua_Hook armed_hook_ = nullptr;
  int armed_mask_ = 0, armed_count_ = 0;
  /// The armed thread's hookcount before arming (its own count hook's
  /// progress), 0 unknown.
  int armed_left_ = 0;
  /// The one-shot runs on the program's own count (count_progress_unsure).
  volatile sig_atomic_t armed_keep_count_ = 0;
  /// Armed in foreign code (foreign.hpp) on the thread's own events only:
  /// the next arm() outside it arms for the next instruction.
  volatile sig_atomic_t armed_lazy_ = 0;
  /// move_on moved the armed sample on (cleared by disarm).
  volatile sig_atomic_t moved_on_ = 0;
  uint32_t move_rng_ = 0x9e3779b9u;  ///< xorshift32 state for move_on's counts
};

}  // namespace lfc
