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
#include "tracer.hpp"
#include "tree.hpp"

extern "C" {
#include <lua.h>
}

namespace lfc {

class Streamer;
struct AllocState;

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

  // ---- tracer: its state in Tracer (tracer.hpp), its events here (tracer.cpp) ----
  Tracer tracer;
  uint32_t frame_of_ident(lua_State* L, lua_Debug* ar, unsigned char tag, const void* ident,
                          const void* check);
  uint32_t callee_node(lua_State* L, lua_Debug* ar, uint32_t parent, std::atomic<uint64_t>*& slots);
  inline void trace_event(lua_State* L, lua_Debug* ar);  ///< tracer.cpp, inlined in lf_hook
  inline void trace_call(lua_State* L, lua_Debug* ar, Shadow& sh);
  /// The common event, or false having done nothing (inlined in lf_hook).
  inline bool trace_fast(lua_State* L, lua_Debug* ar);
  void hook(lua_State* L, lua_Debug* ar);  ///< every other event (lf_hook's slow path)
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
