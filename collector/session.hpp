// The profiling session: a small class that wires the parts of the
// collector, each the one owner of its concern and its state:
//   - HookChain (hookchain.hpp): the program's hooks behind luaflame's, the
//     one-shot hook, the critical sections (the signal-safety contract);
//   - Coroutines (coroutines.hpp): the resume chain and the running thread;
//   - Sampler (sampler.hpp): the signal, the timers, owed periods, positions;
//   - Sampling (sampling.hpp): the handler's side of a sample and the
//     sample the armed hook takes; StackWalker (stackwalk.hpp): the walk;
//   - Tracer (tracer.hpp, tracer.cpp): shadow stacks, clock, call cache and
//     the trace events; AllocState (alloc.hpp): the allocator;
//   - Output (output.hpp), Streamer (streamer.hpp): the files, the server;
//   - Accounting (below): the summary's counts.
// The session holds them by value (the hook and the handler reach each at
// a fixed offset from the session, no pointer to follow), with the
// configuration they share, and wires the events that cross them: start
// and stop (session.cpp), a coroutine switch (on_resume/on_return), the
// signal (on_sample_signal) and the hook (lf_hook and its slow path
// Session::hook in tracer.cpp, hook_rest in hooks.cpp).
//
// Threads: the Lua thread runs hooks, wrappers and the signal handler (the
// kernel timers deliver the signal to it); the sampler's fallback thread,
// where those timers cannot be made, only reads a CPU clock and sends the
// signal; the streamer thread only reads the tree (see tree.hpp). The
// signal handler does nothing but arm a one-shot hook with lua_sethook
// (async-signal-safe, as ldebug.c and lua.c rely on); Lua-thread code that
// changes hooks itself runs inside critical sections, during which the
// handler defers its arm (the contract: hookchain.hpp). Internal.
#pragma once

#include <atomic>
#include <csignal>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "coroutines.hpp"
#include "cycles.hpp"
#include "frames.hpp"
#include "hookchain.hpp"
#include "luaflame/collector.hpp"
#include "luaint.hpp"
#include "output.hpp"
#include "sampler.hpp"
#include "sampling.hpp"
#include "stackwalk.hpp"
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
  /// The signal fell in luaflame's own hook: charged to "[luaflame] hook".
  uint64_t samples_in_hooks = 0;
};

class Session {
 public:
  Session(lua_State* L, const Options& o);
  ~Session();

  // ---- configuration ----
  Options opt;
  std::vector<std::string> metrics;
  /// The tree's column of each metric, -1 when not recorded.
  const int col_samples, col_time, col_calls;
  const int col_abytes, col_acount, col_live;
  FrameNames names;
  SourceFiles source_files;  ///< option `sources`: files of the profiled functions
  FrameTable frames{names};
  Tree tree;
  lua_State* start_L;
  lua_State* main_L;
  luaint::Layout layout;    ///< which direct reads of Lua's structures this Lua allows
  bool ci_walk_ok = false;  ///< ci_prev verified on this build of Lua (layout.ci_prev_ok)

  // ---- coroutine tracking (coroutines.hpp): the running thread, the resume chain ----
  Coroutines coroutines;  ///< before `hooks`, which reads its `current`
  /// L resumes co / co yielded, returned or failed back to L (the
  /// coroutine.resume wrappers): the switch, in one critical section, for
  /// the coroutine tracking, the new thread's hook and the tracer (session.cpp).
  void on_resume(lua_State* L, lua_State* co);
  void on_return(lua_State* L, lua_State* co);

  // ---- hooks: the program's, chained behind ours, and the one-shot (hookchain.hpp) ----
  HookChain hooks{coroutines.current(), layout, opt.trace};
  /// After the program's debug.sethook on T while tracing: its hook is
  /// chained, luaflame's goes back (hooks.cpp).
  void adopt_program_hook(lua_State* L, lua_State* T);
  void restore_program_hooks(lua_State* L);  ///< at stop (hooks.cpp)
  /// Every event lf_hook's fast path (Tracer::trace_fast) leaves: the
  /// tracer's event, then hook_rest (tracer.cpp, with lf_hook).
  void hook(lua_State* L, lua_Debug* ar);
  void hook_rest(lua_State* L, lua_Debug* ar,
                 int ev);  ///< armed thread or chained hook (lf_hook's slow part)
  void install_thread_hook(lua_State* L, lua_State* co);

  // ---- sampling: the signal (sampler.hpp), the sample (sampling.hpp), the walk ----
  std::atomic<bool> alloc_pending{false};  ///< the allocator armed: take_alloc at the hook
  Sampler sampler;
  StackWalker walker{coroutines, frames, tree, opt.lines, ci_walk_ok};
  Sampling sampling{sampler, hooks, walker, frames, tree, col_samples, acct, tracer, opt};
  /// From the handler (sampler.cpp): the parts handed straight to it.
  void on_sample_signal() { Sampling::on_signal(sampler, hooks, coroutines, layout, ci_walk_ok); }

  // ---- tracer: its state and events (tracer.hpp) ----
  Tracer tracer{tree, frames, acct, alloc, opt, layout, ci_walk_ok, col_time, col_calls};

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

  // ---- output: the files (output.hpp), the server (streamer.hpp) ----
  Output output{opt, metrics, tree, names};
  std::unique_ptr<Streamer> streamer;
};

/// Print the whole summary when the session ends at exit or lua_close (the runner sets it).
extern bool g_report_at_exit;
/// A session of this process could not write an output file (the runner's exit status, runner.cpp).
extern bool g_output_failed;

/// The session the hooks and handler see (one per process).
extern std::atomic<Session*> g_session;

/// Who ends a session (session_common.cpp): stop() calls ending_begin_stop
/// first (which never returns when finish_outside has the run: the process
/// is ending) and ending_stopped last; start() calls ending_reset.
/// finish_outside(s), from a thread that is not the Lua thread, writes the
/// files and finishes the stream of a session still running, once (see
/// finish_for_exit in collector.hpp).
/// The summary's name of a mode: "sample", "both", "trace+alloc"...
std::string mode_name(const Options& o);
void ending_reset();
void ending_begin_stop();
void ending_stopped();
bool finish_outside(Session* s);

/// Ends profiling where it failed (a hook's std::bad_alloc): said once on
/// stderr with `why`; the session is left as a forked child leaves it
/// (nothing written or streamed from here on), the program's hooks given
/// back at its next event, the allocator passing through. Lua thread.
void abandon_session(const char* why, const char* where = "the profiler's hook") noexcept;

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

}  // namespace lfc
