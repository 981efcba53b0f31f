// The tracer (trace and both modes): its state (shadow stacks, the clock,
// the call cache, the hook's own cost) and its events (the call and return
// hooks, a coroutine switch, the node a sample in both mode falls on). The
// session wires it: it hands the tracer, at construction, the parts it
// charges and reads (the tree, the frames, the hook chain's armed state,
// the accounting, the allocator's busy flag, the layout; the fast path gets
// the hook chain and the accounting as arguments); lf_hook and the
// session's slow path (Session::hook) call its events. Internal.
//
// Threads: all of it is the Lua thread's: written by the trace hook, the
// coroutine switches and start/stop, read by the hook taking a sample in
// both mode (traced_node). The signal handler never reads it, so nothing
// here needs a fence; the hook's fast path reads HookChain::armed(), which
// the handler writes, and leaves an armed thread to the slow path.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/clock.hpp"
#include "core/cycles.hpp"
#include "core/tree.hpp"
#include "luaflame/collector.hpp"
#include "vm/puc/luaint.hpp"

extern "C" {
#include <lua.h>
}

namespace lfc {

class FrameTable;
class HookChain;
class Tree;
struct Accounting;
struct AllocState;

/// A thread's stack as the tracer sees it: tree nodes with the CallInfo
/// each was entered with (its key, luaint::frame_key: the CallInfo's index
/// on 5.1), so a call or return whose CallInfo does not match tells that an
/// error unwound frames without return events.
struct Shadow {
  struct Entry {
    uint32_t node;
    const void* ci;
    std::atomic<uint64_t>* slots;  ///< the node's values (Tree::slots)
  };
  /// A growable array of entries whose room() + push_fast() never
  /// allocate, so the hook's fast path makes no call. resize() only shrinks.
  class Stack {
   public:
    bool empty() const { return n_ == 0; }
    std::size_t size() const { return n_; }
    std::size_t capacity() const { return v_.capacity(); }
    Entry& back() { return v_[n_ - 1]; }
    const Entry& back() const { return v_[n_ - 1]; }
    const Entry& operator[](std::size_t i) const { return v_[i]; }
    Entry* begin() { return v_.data(); }
    Entry* end() { return v_.data() + n_; }
    bool room() const { return n_ < cap_; }
    void push_fast(const Entry& e) { v_[n_++] = e; }
    void push_back(const Entry& e) {
      if (!room()) v_.resize(cap_ = cap_ ? 2 * cap_ : 32);
      push_fast(e);
    }
    void pop_back() { --n_; }
    void resize(std::size_t k) {
      if (k < n_) n_ = k;
    }
    void clear() { n_ = 0; }

   private:
    std::vector<Entry> v_;
    std::size_t n_ = 0, cap_ = 0;  ///< cap_: v_.size(), kept to spare a division
  };
  Stack stack;
  uint32_t root = 0;  ///< node the thread's frames hang under (the resumer's frame)
  std::atomic<uint64_t>* root_slots = nullptr;
  uint32_t top() const { return stack.empty() ? root : stack.back().node; }
  std::atomic<uint64_t>* top_slots() const {
    return stack.empty() ? root_slots : stack.back().slots;
  }
};

/// A function's identity read from the CallInfo (Lua 5.4's layouts, checked
/// against lua_getinfo on first use): the Proto for a Lua function (with its
/// code array as a check against a reused address), the C function
/// otherwise. Saves lua_getinfo + a string hash on every traced call.
struct CallCache {
  static constexpr int kBits = 12;     ///< 4096 entries, direct-mapped, at start
  static constexpr int kMaxBits = 16;  ///< grown up to 65536 (2 MiB) when it misses often
  /// The entry for (ident, parent) (core/tree.hpp's call_slot).
  static std::size_t slot(const void* ident, uint32_t parent, int bits = kBits) {
    return call_slot(ident, parent, bits);
  }
  const void* ident = nullptr;
  const void* check = nullptr;
  uint32_t parent = 0, child = 0;
  std::atomic<uint64_t>* slots = nullptr;  ///< the child's values
};

/// The tracer: what it keeps between events, and the events.
class Tracer {
 public:
  /// The parts it charges and reads (held by reference, owned by the
  /// session) and the tree's time and calls columns (-1: not recorded).
  Tracer(Tree& tree, FrameTable& frames, Accounting& acct, const std::unique_ptr<AllocState>& alloc,
         const Options& opt, const luaint::Layout& layout, const bool& ci_walk_ok, int col_time,
         int col_calls)
      : col_time_(col_time),
        col_calls_(col_calls),
        tree_(tree),
        frames_(frames),
        acct_(acct),
        alloc_(alloc),
        opt_(opt),
        layout_(layout),
        ci_walk_ok_(ci_walk_ok) {}

  // ---- events (tracer.cpp) ----
  /// At start, on the start thread L: its shadow stack seeded, the clock
  /// calibrated, the fast path on when `fast_ok` (no hook chained) and the
  /// clock is the cycle counter.
  void start(lua_State* L, bool fast_ok);
  /// The common event, or false having done nothing (inlined in lf_hook).
  /// The session's hook chain and accounting are its arguments, as lf_hook
  /// reaches them at a fixed offset from the session: no reference to
  /// follow on the hottest path (its cost is counted with callgrind).
  inline bool trace_fast(lua_State* L, lua_Debug* ar, const HookChain& hooks,
                         Accounting& acct) noexcept;
  /// Any call or return event (the hook's slow path: inlined in
  /// Session::hook, tracer.cpp).
  inline void event(lua_State* L, lua_Debug* ar);
  /// The time since the last event charged now (a switch, stop, a folded text).
  void charge_now();
  /// L resumed co: co's stack hung under L's top frame, co's the last event's.
  void resumed(lua_State* L, lua_State* co);
  /// co gave control back to L (yield, return or error).
  void returned(lua_State* L, lua_State* co);
  /// Thread co got luaflame's hook now (install_thread_hook): its stack as
  /// it is, read through `via` (the running thread).
  void hooked(lua_State* co, lua_State* via);
  /// Both mode: a sample's node from the shadow stack, no walk.
  bool traced_node(lua_State* L, lua_State* T, const void* ci, uint32_t& node);
  /// Every event may have to be forwarded (the program chained a hook).
  void fast_off() { trace_fast_ok = false; }

  // ---- for the summary ----
  uint64_t hook_kept = 0,
           hook_kept_n = 0;  ///< measurements without preemption (< 100 us), for the report
  uint64_t hook_least = 0;   ///< the least measurement (ticks), kept or not
  /// The mean ticks of a slow event, for the report: of the measurements
  /// kept, or the least of them when none was (a short run measures one or
  /// two events, the first of which builds the tree: 0 is no answer).
  double hook_mean() const {
    if (hook_kept_n) return static_cast<double>(hook_kept) / static_cast<double>(hook_kept_n);
    return static_cast<double>(hook_least);
  }
  /// Ticks in trace events, for the report: each path's own mean times
  /// its events (the fast path's events cost a fraction of the slow one's:
  /// luacheck traced on 5.4, the slow mean over all 12 M events read 724 to
  /// 778 ms of hooks in a 0.74-0.79 s run that takes 0.40 s untraced).
  double hook_ticks() const {
    const double fast = fast_sampled_n ? static_cast<double>(fast_est) : hook_mean();
    return hook_mean() * static_cast<double>(slow_events) +
           fast * static_cast<double>(fast_events());
  }
  uint64_t trace_events = 0;  ///< call and return events traced
  uint64_t slow_events = 0;   ///< those of them taken by event() (the session counted its hook)
  /// Hook calls taken by trace_fast alone (it counts no hook call: the
  /// session's hook_calls are the slow path's).
  uint64_t fast_events() const { return trace_events - slow_events; }
  TraceClock tclock;
  uint64_t last_tick = 0;  ///< when the last event ended (tclock ticks); Sampling moves it
  /// Layout checks of the call cache's reads: 0 not yet, 1 good, -1 bad
  /// (set -1 at start when luaint::probe found the layout wrong).
  int ident_lua = 0, ident_c = 0;
  std::size_t memory_bytes() const;

 private:
  /// A function's frame by its identity (CallCache::ident), checked like
  /// the call cache (and, for a Lua function, its source and line): a call
  /// cache miss on a known function skips lua_getinfo and the frame table.
  struct IdentFrame {
    const void* check;
    const void* source;
    int line;
    uint32_t frame;
  };

  inline void trace_call(lua_State* L, lua_Debug* ar, Shadow& sh, const void* key);
  inline uint64_t charge_fast(std::atomic<uint64_t>* top) noexcept;
  inline const CallCache* cached_call(const void* ci, uint32_t parent) const noexcept;
  uint32_t callee_node(lua_State* L, lua_Debug* ar, uint32_t parent, std::atomic<uint64_t>*& slots);
  /// A C function called at the root (parent 0): its entry is the root (slots), no frame.
  bool host_entry(uint32_t parent, uint32_t frame, std::atomic<uint64_t>*& slots);
  uint32_t frame_of_ident(lua_State* L, lua_Debug* ar, unsigned char tag, const void* ident,
                          const void* check);
  /// `via`: the running thread; `starting`: the top frame is the C function that started the run.
  void seed_shadow(lua_State* T, Shadow& sh, lua_State* via, bool starting = false);
  void reroot(Shadow& sh, uint32_t root);
  void grow_call_cache();
  /// A slow event's cost, measured 1 in 256 of them (kTraceMeasureMask).
  void measure_hook(uint64_t t0);
  /// The fast path's work after its clock reading t0, measured 1 in 256 events.
  [[gnu::noinline]] void measure_fast(uint64_t t0) noexcept;
  /// Rare: a tail call or frames an error skipped (the stack cut back).
  static void unwind(Shadow::Stack& st, const void* ci, int ev);

  // The fast path's state first.
  /// Trace mode, cycle-counter clock, no chained hook: lf_hook may take trace_fast.
  bool trace_fast_ok = false;
  lua_State* last_L = nullptr;  ///< the thread of the last event
  Shadow* last_sh = nullptr;    ///< its shadow stack
  uint64_t hook_est = 0;        ///< mean ticks of a slow event after its clock reading, not charged
  uint64_t fast_est = 0;        ///< the same for the fast path
  std::vector<CallCache> call_cache;
  int call_bits = CallCache::kBits;  ///< log2 of call_cache's size (grow_call_cache)
  const int col_time_, col_calls_;
  uint64_t call_misses = 0;  ///< since the call cache last grew
  uint64_t hook_sampled = 0, hook_sampled_n = 0;
  uint64_t fast_sampled = 0, fast_sampled_n = 0;
  std::unordered_map<lua_State*, Shadow> shadows;
  std::unordered_map<const void*, IdentFrame> ident_frames;

  Tree& tree_;
  FrameTable& frames_;
  Accounting& acct_;
  const std::unique_ptr<AllocState>& alloc_;  ///< its busy flag: what naming allocates is ours
  const Options& opt_;
  const luaint::Layout& layout_;
  const bool& ci_walk_ok_;
};

}  // namespace lfc
