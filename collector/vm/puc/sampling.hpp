// Sample taking: what the sampler's signal handler does on the Lua thread
// (the position the thread is at, the one-shot hook armed) and the sample
// the armed hook then takes (the owed periods charged to the stacks of the
// recorded positions). Internal. The signal, the timers, the owed periods
// and the position buffer are the Sampler's (sampler.hpp); the walk is the
// StackWalker's; the one-shot hook is the HookChain's.
//
// Signal-safety contract of the handler's side (on_signal). The handler
// (on_sampler_signal, session_common.cpp) calls it through
// Session::on_sample_signal, on the Lua thread, at any instruction of the
// program or of luaflame:
//   - it reads the running thread (Coroutines::current: atomic, written by
//     the coroutine tracking only inside critical sections), the layout
//     flags (written at start, before the handler is installed), the
//     thread's running CallInfo (luaint::state_ci: one aligned pointer
//     load) and whether a call is in progress there (luaint::
//     state_running: that CallInfo's `previous`, from a CallInfo in use,
//     which no GC frees; on 5.1 L->ci against L->base_ci, compared only),
//     HookChain::in_critical(), and outside
//     a critical section the thread's allowhook byte (luaint::allowhook:
//     one load; Lua writes it around every hook call, a stale value only
//     mis-tags this one sample) and HookChain::forwards() (the program's
//     hooks: changed only inside critical sections, so stable here);
//   - in a finalizer or a program's hook written in Lua (foreign.hpp) it
//     copies the frames that name the code there (foreign::copy_foreign:
//     loads only), since no hook can take the sample until that code ends;
//   - it writes only through Sampler::due/note_position/note_foreign and
//     HookChain::defer/arm, under their contracts (sampler.hpp,
//     hookchain.hpp): inside a critical section it only defers (the
//     position is then not recorded: the sample goes to the hook's stack),
//     else it records the position and arms;
//   - it allocates nothing, takes no lock, calls no Lua function but
//     lua_sethook (in arm). It is inline, and the parts are its arguments,
//     taken straight from the session (Session::on_sample_signal): the
//     handler reaches each at a fixed offset, no reference to follow.
// The hook's side (take) runs on the Lua thread in the armed hook. It
// drains the sampler inside a critical section (owed periods and positions
// together, so no signal lands between the two reads), then walks and
// charges the tree outside it.
#pragma once

#include <atomic>
#include <cstdint>

#include "vm/puc/coroutines.hpp"
#include "vm/puc/foreign.hpp"
#include "vm/puc/hookchain.hpp"
#include "vm/puc/luaint.hpp"
#include "vm/puc/sampler.hpp"

extern "C" {
#include <lua.h>
}

namespace lfc {

class FrameTable;
class StackWalker;
class Tracer;
class Tree;
struct Accounting;
struct Options;

class Sampling {
 public:
  /// The parts the hook's side reads and writes; `tracer` for its clock
  /// and, in both mode, the sample's node from its shadow stack
  /// (Tracer::traced_node).
  Sampling(Sampler& sampler, HookChain& hooks, StackWalker& walker, FrameTable& frames, Tree& tree,
           const int& col_samples, Accounting& acct, Tracer& tracer, const Options& opt)
      : sampler_(sampler),
        hooks_(hooks),
        walker_(walker),
        frames_(frames),
        tree_(tree),
        col_samples_(col_samples),
        acct_(acct),
        tracer_(tracer),
        opt_(opt) {}

  /// The handler's side (see the contract above): the periods due, then
  /// (outside a critical section) the position and the arm; inside one, the
  /// arm waits for end_critical and the sample goes to the hook's stack.
  static void on_signal(Sampler& sampler, HookChain& hooks, const Coroutines& coroutines,
                        const luaint::Layout& layout, bool ci_walk_ok) {
    const uint64_t k = sampler.due();
    if (!k) return;
    if (hooks.in_critical()) {
      sampler.settle(false);
      hooks.defer();
      return;
    }
    // Where the running thread is, for the hook to charge the sample from
    // there (no layout: the hook's own stack). Lua 5.1 has no walk of ours
    // but tells foreign code (foreign::t_own_hook). Running: a finalizer or
    // a program hook, or a call in progress (not the base CallInfo).
    const bool walk = layout.state_ci_ok && ci_walk_ok;
    bool running = false;
    if (walk || luaint::kRelease == 0)
      if (lua_State* L = coroutines.current().load(std::memory_order_relaxed)) {
        if (foreign::in_foreign(L, layout)) {
          sampler.note_foreign(L, k, layout);
          running = true;
        } else {
          // No walk (5.1): a position with no CallInfo, the hook's stack
          // when it runs, so that the periods here are not shared out to
          // the foreign positions of the same wait.
          sampler.note_position(L, walk ? luaint::state_ci(L) : nullptr, k,
                                in_own_hook(L, hooks, layout));
          running = luaint::state_running(L, layout);
        }
      }
    sampler.settle(running);
    hooks.arm();
  }

  /// The hook's side: the owed periods charged to the recorded positions'
  /// stacks (or the hook's own), in the armed hook on thread L.
  void take(lua_State* L);

  /// The frame a sample gets under the recorded one when the signal fell in
  /// luaflame's own hook ("[luaflame] hook"); 0 until the session sets it.
  uint32_t hook_frame = 0;
  /// Samples in luaflame's own hook are kept in the tree under hook_frame
  /// (option show_profiler); else only counted (Accounting::samples_in_hooks).
  bool show_profiler = false;

 private:
  /// The node of a foreign position: its anchor's path (or the hook's
  /// stack), then the copied frames, or a frame saying what ran.
  uint32_t foreign_node(lua_State* L, const Sampler::Pos& p, uint64_t k);
  /// The node of a position in the program's code (or the hook's stack).
  uint32_t program_node(lua_State* L, const Sampler::Pos* p, uint64_t k);

  /// Whether L is inside a hook that is luaflame's: Lua clears allowhook
  /// for any hook's duration (luaD_hook), and with no program hook to
  /// forward to, every hook L runs is ours (the tracer's call/return hook,
  /// the armed one-shot). The tracer's time leaves its own hook time out of
  /// the functions' (Tracer::last_tick); without this a sample falling in it
  /// went to the callee (call event) or the caller (return event).
  static bool in_own_hook(lua_State* L, const HookChain& hooks, const luaint::Layout& layout) {
    // The thread's hook not ours: the C hook running is the program's.
    return layout.allowhook_ok && !luaint::allowhook(L) && !hooks.forwards() &&
           lua_gethook(L) == lf_hook;
  }
  uint32_t gc_frame_ = 0, program_hook_frame_ = 0, deeper_frame_ = 0;

  Sampler& sampler_;
  HookChain& hooks_;
  StackWalker& walker_;
  FrameTable& frames_;
  Tree& tree_;
  const int& col_samples_;
  Accounting& acct_;
  Tracer& tracer_;
  const Options& opt_;
};

}  // namespace lfc
