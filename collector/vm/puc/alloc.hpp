// The allocation profiler's state (alloc.cpp). The wrapper around the
// state's allocator never walks the Lua stack, never calls Lua and never
// allocates through the state: it counts bytes, and when a sample falls
// (every alloc_rate bytes on average, exponential intervals), it notes the
// allocation in a fixed buffer and arms the one-shot hook, as the sampler's
// signal does. With each sample it notes the running thread and its
// CallInfo (two loads, no call); the hook, at the next call, return or
// instruction, charges what is pending to the stack from that CallInfo
// down (the stack that made the block, not the C function called since),
// with the object type as the leaf frame ("[alloc] table").
//
// Contract. lf_alloc runs on the Lua thread wherever Lua allocates: in the
// program, in a GC step, inside luaflame's own hook (then `busy` is set
// and nothing is sampled: the collector's bytes are not the program's) and
// inside a critical section. It may race only with the sampler's signal
// handler, which neither allocates nor reads this state. It writes
// `pending`/`npending`, `countdown`, `live` and the filter, all read only
// by Lua-thread code after it returns (the hook, stop). Arming goes
// through request_sample: in a critical section it only defers
// (HookChain::defer; end_critical arms), else it opens one around arm(), so
// the handler never arms at the same time (hookchain.hpp: the contract).
// lua_sethook does not allocate, so arming never re-enters lf_alloc.
// The session takes the samples at its hook and keeps the tree
// (session_alloc.cpp); this part knows only the wiring below.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

extern "C" {
#include <lua.h>
}

namespace lfc {

class HookChain;

struct AllocState {
  /// What the allocator needs of the session, fixed at start.
  struct Wiring {
    HookChain* hooks;                        ///< arms the one-shot for a sample
    const std::atomic<lua_State*>* running;  ///< the running thread (Coroutines::current)
    bool ci_ok;                              ///< its CallInfo may be read (layout checked at start)
    std::atomic<bool>* due;                  ///< set with each arm: the hook takes the samples
  };
  /// `type` of a pending block that is no new object.
  static constexpr int kBuffer = -1;  ///< a new vector or buffer (table parts, stack, code...)
  static constexpr int kGrowth = -2;  ///< a block grown in place or moved (table resize, buffers)
  /// The leaf frame of an allocation of `type` ("[alloc] table").
  static const char* type_frame(int type);

  /// Wraps L's allocator (lua_setallocf): sampled every `rate` bytes on
  /// average, or every allocation when rate <= 0. Lua thread, at start.
  static std::unique_ptr<AllocState> start(lua_State* L, double rate, const Wiring& w);
  /// Gives L its original allocator back when the wrapper is still L's
  /// (true). Else (someone wrapped it again, or the state is closing) the
  /// wrapper stays, passing everything through, and this state must stay
  /// with it as its ud, never freed (false).
  bool restore(lua_State* L);
  /// The wrapper stays (restore gave false): it deletes itself when it
  /// forwards the free of `main_L`'s own block, lua_close's last call of the
  /// allocator (lstate.c's close_state: the LX/LG block, at the state minus
  /// LUA_EXTRASPACE). Before, the state was left holding it for ever: a
  /// leak per state closed while profiled (os.exit(true, true), a host's
  /// lua_close), reported by LeakSanitizer. Lua thread, at stop.
  static void pass_through(std::unique_ptr<AllocState> a, lua_State* main_L);

  /// One sampled allocation waiting for the hook.
  struct Pending {
    void* block;
    uint64_t bytes;  ///< estimated bytes it stands for
    uint64_t count;  ///< estimated allocations it stands for
    int type;        ///< LUA_T* of a new object, -1 buffer/array, -2 growth
    bool freed;
    bool gc;         ///< made inside a GC step or a finalizer: "[GC]" above the leaf
    lua_State* th;   ///< the thread that ran when it was made (Coroutines::current)
    const void* ci;  ///< its running CallInfo then (luaint::state_ci), or null
  };
  /// A sampled block still allocated: where it came from, what it weighs.
  struct Live {
    uint32_t node;
    uint64_t bytes;
  };
  static constexpr std::size_t kPending = 4096;

  Wiring wiring{};
  lua_State* L = nullptr;
  lua_Alloc orig = nullptr;
  void* orig_ud = nullptr;
  bool active = false;                ///< false: pass everything through (after stop)
  const void* state_block = nullptr;  ///< passing through: the free that ends it (pass_through)
  bool failed = false;    ///< the bookkeeping ran out of memory: allocations no longer watched
  bool exact = false;     ///< alloc_rate 0: every allocation
  bool busy = false;      ///< the collector itself is allocating (hook, stop)
  bool fast_new = false;  ///< active and sampling: a new block may take lf_alloc's fast path
  /// Lua 5.4.4's global_State, if its layout checked out at start (else
  /// null: no "[GC]" frames). Read only on the sampled path.
  const unsigned char* gstate = nullptr;
  double rate = 0;        ///< mean bytes between samples
  int64_t countdown = 0;  ///< bytes until the next sample
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  Pending pending[kPending];
  std::size_t npending = 0;
  uint64_t lost_bytes = 0, lost_count = 0;    ///< pending buffer full
  uint64_t total_bytes = 0, total_count = 0;  ///< exact totals, for the report
  std::unordered_map<void*, Live> live;
  std::vector<uint64_t> filter;  ///< bitmap of addresses that may be in `live`

  void next_countdown();
  bool maybe_live(void* p) const {
    uint64_t h = (reinterpret_cast<uintptr_t>(p) >> 4) * 0x9e3779b97f4a7c15ull >> 44;  // 20 bits
    return (filter[h >> 6] >> (h & 63)) & 1;
  }
  void mark_live(void* p) {
    uint64_t h = (reinterpret_cast<uintptr_t>(p) >> 4) * 0x9e3779b97f4a7c15ull >> 44;
    filter[h >> 6] |= 1ull << (h & 63);
  }
  /// A new block that does not take a sample (countdown > size), counted
  /// unless the collector itself allocates.
  void count_new(std::size_t size) {
    if (busy) return;
    total_bytes += size;
    ++total_count;
    countdown -= static_cast<int64_t>(size);
  }
  /// Every allocation: counts, and samples when the countdown runs out.
  void on_new(void* block, std::size_t size, int type) {
    if (busy) return;
    total_bytes += size;
    ++total_count;
    if (!exact) {
      countdown -= static_cast<int64_t>(size);
      if (countdown > 0) return;
    }
    sampled(block, size, type);
  }
  /// Whether a free may concern a pending sample or a remembered block.
  bool may_track(void* p) const { return npending || (!live.empty() && maybe_live(p)); }
  /// Every free: only blocks in the pending buffer or maybe in `live` cost more.
  void on_free(void* block) {
    if (npending) unpend(block);
    if (!live.empty() && maybe_live(block))
      live.erase(block);  // blocks from before the session are not there
  }
  void sampled(void* block, std::size_t size, int type);
  void request_sample();
  bool in_gc() const;
  void unpend(void* block);
  /// A block moved by a reallocation (from -> to): its pending samples follow.
  void repend(void* from, void* to);
};

}  // namespace lfc
