// LuaJIT's trace mode (jtracer.cpp): call and return hooks, with the JIT
// compiler off while it runs. Contract: LuaJIT's hooks are global (one per
// state, every coroutine) and run on the Lua thread only; the sampler's
// callback runs on the same thread between instructions, never inside the
// hook, so the two share the run without locks (the callback moves the
// clock past its own time: exclude). The streamer thread only reads the tree.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/cycles.hpp"
#include "core/tree.hpp"
#include "vm/luajit/jframes.hpp"
#include "vm/luajit/jlayout.hpp"

extern "C" {
#include <lua.h>
}

namespace lfc::jit {

/// A thread's stack as the tracer sees it: one entry per traced frame,
/// keyed by the frame's slot on its Lua stack (LuaJIT's lua_getstack gives
/// it modulo 2^16 in lua_Debug.i_ci; unwrapped against the last entry).
struct JShadow {
  struct Entry {
    uint32_t node, frame;
    int64_t slot;
    std::atomic<uint64_t>* values;  ///< the node's value slots (Tree::slots)
  };
  std::vector<Entry> stack;
  uint32_t root = 0;  ///< node the thread's frames hang under (its resumer's frame)
  std::atomic<uint64_t>* root_values = nullptr;  ///< root's value slots, once asked
  uint32_t top() const { return stack.empty() ? root : stack.back().node; }
  /// The top node's value slots (the root's looked up the first time).
  std::atomic<uint64_t>* top_values(Tree& tree) {
    if (!stack.empty()) return stack.back().values;
    if (!root_values) root_values = tree.slots(root);
    return root_values;
  }
};

class JTracer {
 public:
  JTracer(JRun& run, JFrames& frames, const ResumeChain& chain)
      : run_(run), frames_(frames), chain_(chain) {}
  /// On the start thread L: the JIT off (traces flushed), L's hook kept
  /// and `hook` set (the session's entry point, which calls event), L's
  /// stack seeded. `layout_ok`: jlayout.hpp's reads hold (layout::probe,
  /// at the session's start), else `why` not.
  void start(lua_State* L, lua_Hook hook, bool layout_ok, const std::string& why);
  /// The time so far charged; unless L is null (at exit), L's hook and
  /// (unless the state is closing: luaJIT_setmode raises there) the JIT
  /// given back.
  void stop(lua_State* L, bool closing);

  // ---- the program's hook (LuaJIT's is one per state: ours replaces it) ----
  /// The hook the trace hook forwards the events of its mask to: the one
  /// of before start, then each one the program sets (adopt); given back
  /// at stop.
  struct Chained {
    lua_Hook hook = nullptr;
    int mask = 0, count = 0;
  };
  const Chained& program_hook() const { return prog_; }
  /// After the program's debug.sethook on L (jhooks.cpp): the hook it set is
  /// kept, and ours goes back with that hook's line and count events too.
  void adopt(lua_State* L);
  /// The program's hook in place of ours (for debug.gethook's original to
  /// read), and ours back.
  void show_program_hook(lua_State* L) const {
    lua_sethook(L, prog_.hook, prog_.mask, prog_.count);
  }
  void own_hook_back(lua_State* L) const;
  /// A call or return event (trace_hook).
  void event(lua_State* L, lua_Debug* ar);
  /// The time since the last event charged now (a switch, stop, a folded text).
  void charge_now();
  /// L resumes co: co's frames hang under L's top frame (moved there
  /// when an earlier resume was elsewhere).
  void resumed(lua_State* L, lua_State* co);
  /// T, a thread the host spawned (ngx.thread.spawn), hangs under `node`
  /// (its spawner's frame then) while its first frame runs `f`.
  void spawned(lua_State* T, uint32_t node, const void* f);
  /// The node of T's top traced frame.
  uint32_t top_node(lua_State* T) { return shadow(T).top(); }
  /// co gave control back to its resumer (our resume): finished or
  /// failed, its shadow goes (a thread made later at its address is another).
  void returned(lua_State* co);
  /// Time the sampler's callback took (ns): not the program's.
  void exclude(uint64_t dt_ns);
  /// The called function named from LuaJIT's own objects (jlayout.hpp), or
  /// why not ("" when it is): for the summary.
  const std::string& idents_off() const { return idents_why_; }

 private:
  void seed(lua_State* T);
  /// sh's frames moved under `root`.
  void reroot(JShadow& sh, uint32_t root);
  /// A call event's frames: the shadow stack cut back to the caller, the
  /// callee pushed (unless not shown) and its call counted.
  void on_call(lua_State* T, lua_Debug* ar, JShadow& sh, int64_t slot, int64_t caller);
  /// The slot of the frame that called the one at `slot`, or -1.
  int64_t caller_of(lua_State* T, int64_t slot);
  JShadow& shadow(lua_State* T);  ///< T's shadow stack (the last thread's without a lookup)
  /// The frame of the function a call event is about (JFrames::kSkip: not
  /// shown): from its identity `id` (read by cached_node) when known, else
  /// through lua_getinfo.
  uint32_t frame_of(lua_State* T, lua_Debug* ar, const layout::Ident& id);

  /// The node of a call whose callee and caller's node were seen before:
  /// (callee identity, parent node) -> frame and child, direct-mapped, as
  /// the 5.4 tracer's CallCache. Skips the identity map and the tree's map.
  struct Callee {
    uint32_t node, frame;
    std::atomic<uint64_t>* values;
  };
  Callee cached_node(lua_State* T, lua_Debug* ar, uint32_t parent);
  /// cached_node's miss: through frame_of and the tree, the entry filled.
  Callee call_miss(lua_State* T, lua_Debug* ar, uint32_t parent, const layout::Ident& id);
  void grow_calls();

  /// A function's frame by its identity (jlayout.hpp's Ident, checked on
  /// every use against the chunk name and first line it was named with).
  struct IdentFrame {
    const void* chunk;
    int line;
    uint32_t frame;
  };
  struct Call {
    const void* key = nullptr;
    const void* chunk = nullptr;
    int line = 0;
    uint32_t parent = 0, frame = 0, child = 0;
    std::atomic<uint64_t>* values = nullptr;  ///< child's value slots
  };
  static constexpr int kCallBits = 12, kMaxCallBits = 16;  ///< 4096 entries, up to 65536

  JRun& run_;
  JFrames& frames_;
  const ResumeChain& chain_;
  lua_State* start_L_ = nullptr;                     ///< the thread start() was called on
  std::unordered_map<lua_State*, JShadow> shadows_;  ///< nodes never move: last_sh_ stays valid
  lua_State* last_T_ = nullptr;
  JShadow* last_sh_ = nullptr;
  lua_State* resumed_co_ = nullptr;  ///< the thread last resumed through a resume we saw
  struct Spawned {
    uint32_t node;
    const void* first;
  };
  /// Threads the host spawned: their spawner's node while their first frame
  /// runs `first` (a thread recycled for other work is not).
  std::unordered_map<lua_State*, Spawned> spawned_;
  /// The node a thread's first function hangs under: its spawner's, or the root.
  uint32_t start_root(lua_State* T, lua_Debug* ar);
  TraceClock clock_;         ///< the cycle counter when it can be, read twice per event
  uint64_t last_tick_ = 0;   ///< when the last event's work ended (clock_ ticks)
  uint64_t events_ = 0;      ///< hook events, for the summary's hook_calls
  uint64_t hook_ticks_ = 0;  ///< the hook's own time, for the summary's hook_ns
  bool jit_was_on_ = false;
  Chained prog_;             ///< the program's hook (program_hook)
  lua_Hook hook_ = nullptr;  ///< ours (the session's trace hook)
  bool idents_ok_ = false;   ///< jlayout's reads hold on this LuaJIT (layout::probe)
  std::string idents_why_;
  std::unordered_map<const void*, IdentFrame> idents_;
  std::vector<Call> calls_;  ///< the call cache (idents_ok_ only)
  int call_bits_ = kCallBits;
  uint64_t call_misses_ = 0;  ///< since the call cache last grew
};

}  // namespace lfc::jit
