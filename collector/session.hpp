// The profiling session: state shared by the hook, the sampler's signal
// handler, the tracer, the allocator wrapper and the streamer. Internal.
//
// Threads: the Lua thread runs hooks, wrappers and the signal handler; the
// sampler thread only reads a CPU clock and sends a signal; the streamer
// thread only reads the tree (see tree.hpp). The signal handler does
// nothing but arm a one-shot hook with lua_sethook (async-signal-safe, as
// ldebug.c and lua.c rely on); Lua-thread code that changes hooks itself
// runs inside critical sections, during which the handler defers its arm
// (the contract: hookchain.hpp). Each concern keeps its state in its own
// owner: HookChain (hooks), Accounting (the summary's counts), Sampler,
// AllocState, Streamer; the session wires them.
#pragma once

#include <atomic>
#include <csignal>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cycles.hpp"
#include "frames.hpp"
#include "hookchain.hpp"
#include "luaflame/collector.hpp"
#include "luaint.hpp"
#include "sampler.hpp"
#include "tree.hpp"

extern "C" {
#include <lua.h>
}

namespace lfc {

class Streamer;
struct AllocState;

/// A thread's stack as the tracer sees it: tree nodes with the CallInfo
/// each was entered with, so a call or return whose CallInfo does not match
/// tells that an error unwound frames without return events.
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

uint64_t now_ns();       ///< CLOCK_MONOTONIC
uint64_t unix_now_ns();  ///< CLOCK_REALTIME
using luaint::ci_prev;   // CallInfo.previous (luaint.hpp; trusted only when layout.ci_prev_ok)

/// The tracer's clock: the cycle counter (cycles.hpp: x86's TSC, arm64's
/// virtual counter) scaled to nanoseconds when it is constant and non-stop
/// (calibrated against CLOCK_MONOTONIC at start), else CLOCK_MONOTONIC
/// itself. One read per hook event.
struct TraceClock {
  bool tsc = false;
  uint64_t mult = 0;  ///< nanoseconds per tick, times 2^32
  void init();
  uint64_t now() const { return tsc ? read_cycles() : now_ns(); }
  uint64_t to_ns(uint64_t ticks) const {
    return tsc ? static_cast<uint64_t>((static_cast<unsigned __int128>(ticks) * mult) >> 32)
               : ticks;
  }
};

/// A function's identity read from the CallInfo (Lua 5.4's layouts, checked
/// against lua_getinfo on first use): the Proto for a Lua function (with its
/// code array as a check against a reused address), the C function
/// otherwise. Saves lua_getinfo + a string hash on every traced call.
struct CallCache {
  static constexpr int kBits = 12;     ///< 4096 entries, direct-mapped, at start
  static constexpr int kMaxBits = 16;  ///< grown up to 65536 (2 MiB) when it misses often
  /// The entry for (ident, parent): a multiply's top bits.
  static std::size_t slot(const void* ident, uint32_t parent, int bits = kBits) {
    return static_cast<std::size_t>(
        ((reinterpret_cast<uintptr_t>(ident) ^ (parent * 0x9e3779b97f4a7c15ull)) *
         0xbf58476d1ce4e5b9ull) >>
        (64 - bits));
  }
  const void* ident = nullptr;
  const void* check = nullptr;
  uint32_t parent = 0, child = 0;
  std::atomic<uint64_t>* slots = nullptr;  ///< the child's values
};

/// What a session counts for its summary: written on the Lua thread (the
/// hook, the tracer, the allocator), except `samples_asked` (atomic).
struct Accounting {
  uint64_t start_wall = 0, start_unix = 0, start_clock = 0;
  uint64_t hook_ns = 0, hook_calls = 0, calls = 0;
  uint64_t sample_events = 0, samples = 0;
  std::atomic<uint64_t> samples_asked{0};
  /// The recorded frame had returned by the hook: charged to the hook's stack.
  uint64_t samples_moved = 0;
};

class Session {
 public:
  Session(lua_State* L, const Options& o);
  ~Session();

  // ---- configuration ----
  Options opt;
  std::vector<std::string> metrics;
  int col_samples = -1, col_time = -1, col_calls = -1;
  int col_abytes = -1, col_acount = -1, col_live = -1;
  FrameNames names;
  SourceFiles source_files;  ///< option `sources`: files of the profiled functions
  FrameTable frames{names};
  Tree tree;
  lua_State* start_L;
  lua_State* main_L;
  luaint::Layout layout;    ///< which direct reads of Lua's structures this Lua allows
  bool ci_walk_ok = false;  ///< ci_prev verified on this build of Lua (layout.ci_prev_ok)

  // ---- hooks: the program's, chained behind ours, and the one-shot (hookchain.hpp) ----
  std::atomic<lua_State*> current{nullptr};  ///< the running thread, read by the signal handler
  HookChain hooks{current, layout, opt.trace};
  /// After the program's debug.sethook on T while tracing: its hook is
  /// chained, luaflame's goes back (hooks.cpp).
  void adopt_program_hook(lua_State* L, lua_State* T);
  void restore_program_hooks(lua_State* L);  ///< at stop (hooks.cpp)
  void hook_rest(lua_State* L, lua_Debug* ar,
                 int ev);  ///< armed thread or chained hook (lf_hook's slow part)
  void install_thread_hook(lua_State* L, lua_State* co);

  // ---- coroutine tracking (coroutine.resume / coroutine.wrap wrappers) ----
  std::vector<lua_State*> chain;            ///< resume chain: chain.back() runs (`current`, above)
  void enter(lua_State* L, lua_State* co);  ///< L resumes co
  void leave(lua_State* L, lua_State* co);  ///< co yielded, returned or failed back to L

  // ---- sampling (sampler.cpp): arms hooks.arm() from its signal handler ----
  std::atomic<bool> alloc_pending{false};  ///< the allocator armed: take_alloc at the hook
  Sampler sampler;
  void on_sample_signal();              ///< from the handler (sampler.cpp)
  void note_position(uint64_t weight);  ///< from the handler
  void take_sample(lua_State* L);
  /// The frames of L's stack and its resumers', leaf first. With `from_T`,
  /// the walk starts at `from_ci` on thread from_T (a frame the signal or
  /// the allocator recorded): false, `out` undefined, when from_T is not
  /// in L's resume chain or from_ci no longer on from_T's stack.
  bool walk(lua_State* L, std::vector<uint32_t>& out, lua_State* from_T = nullptr,
            const void* from_ci = nullptr);
  uint32_t path_node(const std::vector<uint32_t>& leaf_first);

  // ---- tracer (tracer.cpp) ----
  std::unordered_map<lua_State*, Shadow> shadows;
  lua_State* last_L = nullptr;
  Shadow* last_sh = nullptr;
  uint64_t last_tick = 0;
  TraceClock tclock;
  uint64_t hook_est = 0;  ///< mean ticks inside the trace hook (sampled), not charged
  uint64_t hook_sampled = 0, hook_sampled_n = 0, trace_events = 0;
  uint64_t hook_kept = 0,
           hook_kept_n = 0;        ///< measurements without preemption (< 100 us), for the report
  int ident_lua = 0, ident_c = 0;  ///< layout checks: 0 not yet, 1 good, -1 bad
  std::vector<CallCache> call_cache;
  int call_bits = CallCache::kBits;  ///< log2 of call_cache's size (grow_call_cache)
  uint64_t call_misses = 0;          ///< since the call cache last grew
  void grow_call_cache();
  uint32_t frame_of_ident(lua_State* L, lua_Debug* ar, unsigned char tag, const void* ident,
                          const void* check);
  /// A function's frame by its identity (CallCache::ident), checked like
  /// the call cache (and, for a Lua function, its source and line): a call
  /// cache miss on a known function skips lua_getinfo and the frame table.
  struct IdentFrame {
    const void* check;
    const void* source;
    int line;
    uint32_t frame;
  };
  std::unordered_map<const void*, IdentFrame> ident_frames;
  uint32_t callee_node(lua_State* L, lua_Debug* ar, uint32_t parent, std::atomic<uint64_t>*& slots);
  inline void trace_event(lua_State* L, lua_Debug* ar);  ///< tracer.cpp, inlined in lf_hook
  inline void trace_call(lua_State* L, lua_Debug* ar, Shadow& sh);
  void unwind(Shadow::Stack& st, const void* ci, int ev);
  inline bool trace_fast(lua_State* L,
                         lua_Debug* ar);   ///< the common event, or false having done nothing
  void hook(lua_State* L, lua_Debug* ar);  ///< every other event (lf_hook's slow path)
  bool trace_fast_ok = false;  ///< trace mode, TSC clock, no chained hook: lf_hook may take
                               ///< trace_fast  ///< rare: a tail call or frames an error skipped
  void measure_hook(uint64_t t0);
  void seed_shadow(lua_State* T, Shadow& sh,
                   lua_State* via);  ///< `via`: the running thread (API calls)
  void reroot(Shadow& sh, uint32_t root);
  /// Both mode: a sample's node from the shadow stack, no walk (tracer.cpp).
  bool traced_node(lua_State* L, lua_State* T, const void* ci, uint32_t& node);
  void charge_now();

  // ---- allocation profiler (alloc.cpp) ----
  std::unique_ptr<AllocState> alloc;
  uint64_t alloc_total_bytes = 0, alloc_total_count = 0;  ///< exact, for the report
  bool start_alloc(std::string& err);
  void request_alloc_sample();  ///< from the allocator: arm the hook
  void take_alloc(lua_State* L);
  void stop_alloc(lua_State* L, bool collect);

  Accounting acct;
  uint64_t clock_ns_read() const;
  std::size_t memory_bytes() const;

  clockid_t lua_cpu_clock{};  ///< the Lua thread's CPU clock (opt.cpu_clock)

  // ---- output ----
  std::unique_ptr<Streamer> streamer;
  void write_outputs(Summary& sum);  ///< output.cpp: the files, and what became of each
  std::string folded_text(int col) const;

  std::vector<uint32_t> scratch;  ///< reused by walk()
};

/// Print the whole summary when the session ends at exit or lua_close (the runner sets it).
extern bool g_report_at_exit;
/// A session of this process could not write an output file (the runner's exit status, runner.cpp).
extern bool g_output_failed;

/// The session the hooks and handler see (one per process).
extern std::atomic<Session*> g_session;

/// Wraps debug.sethook/gethook while tracing (hooks.cpp).
void install_hook_wrappers(lua_State* L);

/// A library function swapped for luaflame's while profiling; the
/// original is kept in the registry under `key`.
struct LibSwap {
  const char* name;
  const char* key;
  lua_CFunction ours;
};
/// Swaps lib.NAME for ours, keeping the originals (hooks.cpp).
void swap_library(lua_State* L, const char* lib, const LibSwap* swaps, std::size_t n);
/// Puts the originals back where ours still are (the program may have
/// replaced them since: theirs stays).
void restore_library(lua_State* L, const char* lib, const LibSwap* swaps, std::size_t n);
/// The hook lf_hook_after_stop gives back (hooks.cpp).
void set_hook_after_stop(lua_Hook h, int mask, int count);

/// coroutine.resume/wrap swapped for the tracking ones (coroutines.cpp).
void install_coroutine_wrappers(lua_State* L);
void restore_coroutine_wrappers(lua_State* L);
void preset_coroutine_frames(FrameTable& frames);

}  // namespace lfc
