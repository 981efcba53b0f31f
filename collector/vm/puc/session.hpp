// The Lua 5.4 adapter's session: the run (core/profile.hpp: options,
// metrics, frame names, the call tree, the summary's counts, the output
// files and the stream) and the parts that profile a 5.4 state, each the
// one owner of its concern and its state:
//   - HookChain (hookchain.hpp): the program's hooks behind luaflame's, the
//     one-shot hook, the critical sections (the signal-safety contract);
//   - Coroutines (coroutines.hpp): the resume chain and the running thread;
//   - Sampler (sampler.hpp): the signal, the timers, owed periods, positions;
//   - Sampling (sampling.hpp): the handler's side of a sample and the
//     sample the armed hook takes; StackWalker (stackwalk.hpp): the walk;
//   - Tracer (tracer.hpp, tracer.cpp): shadow stacks, clock, call cache and
//     the trace events; AllocState (alloc.hpp): the allocator;
//   - FrameTable (vm/lua/frames.hpp): functions to frame numbers.
// The session holds them by value (the hook and the handler reach each at
// a fixed offset from the session, no pointer to follow), with the
// configuration they share, and wires the events that cross them: start
// and stop (session.cpp), a coroutine switch (on_resume/on_return), the
// signal (on_sample_signal) and the hook (lf_hook and its slow path
// Session::hook and hook_rest in session_hooks.cpp).
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

#include <sys/types.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/cycles.hpp"
#include "core/profile.hpp"
#include "core/tree.hpp"
#include "luaflame/collector.hpp"
#include "vm/lua/frames.hpp"
#include "vm/puc/coroutines.hpp"
#include "vm/puc/hookchain.hpp"
#include "vm/puc/luaint.hpp"
#include "vm/puc/sampler.hpp"
#include "vm/puc/sampling.hpp"
#include "vm/puc/stackwalk.hpp"
#include "vm/puc/tracer.hpp"

extern "C" {
#include <lua.h>
}

namespace lfc {

class Streamer;
struct AllocState;

class Session : private Profile {
 public:
  Session(lua_State* L, const Options& o);
  ~Session();

  // ---- its life (session.cpp) ----
  /// The API's start(): a session for L's state, in the table of live
  /// sessions (sessions.hpp) when true; false with `err`, nothing left.
  static bool start(lua_State* L, const Options& o, std::string& err);
  /// Ends the run and deletes the session: with L (on the Lua thread) the
  /// hooks, wrappers and allocator are given back first; then the files,
  /// the stream and the summary.
  Summary stop(lua_State* L);
  /// The API's flush() and folded(): the files and the stream now, one
  /// metric's folded text now.
  void flush();
  bool folded(const std::string& metric, std::string& out, std::string& err);
  /// The thread that ran the state is this one or has ended: nothing of the
  /// state runs beside a stop() from here (at exit).
  bool stoppable_here() const;
  /// Out of the table, never stopped, written or streamed: its hooks and
  /// handler find nothing and give the program its own back (a forked
  /// child, an abandoned session). Under ending_mutex or in the child.
  void leave_behind(bool in_child);
  /// Profiling ends where it failed (abandon_session below).
  void abandon(const char* why, const char* where) noexcept;
  /// L's lua_close is the end of this session's state (its closer's).
  bool closes_with(lua_State* L) const;
  /// The run, for the core's ending (core/profile.hpp: finish_outside_all).
  Profile& run() { return *this; }

  // ---- the events its entry points forward ----
  /// L resumes co / co yielded, returned or failed back to L (the
  /// coroutine.resume wrappers): the switch, in one critical section, for
  /// the coroutine tracking, the new thread's hook and the tracer (session.cpp).
  void on_resume(lua_State* L, lua_State* co);
  void on_return(lua_State* L, lua_State* co);
  /// A host's own lua_resume of co, or its return (attach.hpp's host_resume;
  /// session_coroutines.cpp): told as a switch when it is one.
  bool host_resume(lua_State* co, bool entering) noexcept;
  /// The host's own lua_sethook / lua_gethook* on T from C (attach.hpp's
  /// host_sethook, host_gethook; session_coroutines.cpp): false off the
  /// thread that runs the state.
  bool host_sethook(lua_State* T, lua_Hook f, int mask, int count) noexcept;
  bool host_gethook(lua_State* T, lua_Hook& f, int& mask, int& count) noexcept;
  /// The state runs on the calling thread now, not the one it ran on (a
  /// host made it on one thread and runs it on another: HAProxy's
  /// per-thread states, or a state shared by threads in turn). The timers,
  /// the CPU clock and the coroutine tracking's owner follow; the clock the
  /// summary reports adds the time of each thread (session.cpp).
  void follow_thread() noexcept;
  /// The sampler's signal, in its handler (session_common.cpp): a sample on
  /// the thread that runs the state, nothing elsewhere.
  void on_signal() noexcept;
  /// lf_hook's common trace event, inline in session_hooks.cpp, its only
  /// user (Tracer::trace_fast: it allocates and throws nothing); false
  /// sends the event to hook().
  bool trace_fast(lua_State* L, lua_Debug* ar) noexcept;
  /// Every event trace_fast leaves: the tracer's event, then hook_rest
  /// (session_hooks.cpp, with lf_hook).
  void hook(lua_State* L, lua_Debug* ar);
  /// A call or return event on a yielded thread (Lua 5.2, 5.3: the host runs a
  /// function there), traced as on a running one (session_hooks.cpp).
  void trace_yielded(lua_State* L, lua_Debug* ar) noexcept;
  bool tracing() const { return opt.trace; }
  /// The program's hook on T, behind luaflame's or the one-shot armed over
  /// it (debug.gethook's answer).
  HookChain::Chained chained_for(lua_State* T) const { return hooks.chained_for(T); }
  bool program_set(lua_State* T, lua_Hook h, int mask, int count) {
    return hooks.program_set(T, h, mask, count);
  }
  HookChain::Chained program_hook(lua_State* T) {
    hooks.begin_critical();
    const HookChain::Chained c = hooks.program_hook(T);
    hooks.end_critical();
    return c;
  }
  /// After the program's debug.sethook on T while tracing: its hook is
  /// chained (by program_set when `chained`), luaflame's goes back, T is
  /// remembered for stop (session_hooks.cpp).
  void adopt_program_hook(lua_State* L, lua_State* T, bool chained);
  /// The hook a host set from C on co before resuming it, chained behind
  /// luaflame's while tracing (session_coroutines.cpp). False: profiling
  /// ended there (abandoned).
  bool adopt_host_hook(lua_State* co) noexcept;
  /// A thread made by L while tracing, at the top of L's stack: it chains
  /// L's program hook, as lua_newthread copies L's (session_hooks.cpp).
  void inherit_program_hook(lua_State* L);

 private:
  // ---- the run (core/profile.hpp: options, metrics, names, tree, counts,
  // outputs) is the base; below, what a PUC Lua adds ----
  FrameTable frames{names};
  lua_State* start_L;
  lua_State* main_L;
  std::uint64_t closer_id = 0;  ///< the serial of this run's closer (vm/lua/closer.hpp)
  luaint::Layout layout;        ///< which direct reads of Lua's structures this Lua allows
  bool ci_walk_ok = false;      ///< ci_prev verified on this build of Lua (layout.ci_prev_ok)

  // ---- coroutine tracking (coroutines.hpp): the running thread, the resume chain ----
  Coroutines coroutines;  ///< before `hooks`, which reads its `current`

  // ---- hooks: the program's, chained behind ours, and the one-shot (hookchain.hpp) ----
  HookChain hooks{coroutines.current(), layout, opt.trace};
  void restore_program_hooks(lua_State* L);        ///< at stop (session_hooks.cpp)
  void give_back_program_hooks(lua_State* L);      ///< its part for tracing
  bool move_line_sample_on(lua_State* L, int ev);  ///< --lines on 5.4 (session_hooks.cpp)
  /// An armed thread or a chained hook (lf_hook's slow part).
  void hook_rest(lua_State* L, lua_Debug* ar, int ev);
  void forward_c_hook(lua_State* L, lua_Debug* ar, const HookChain::Chained& own);
  void install_thread_hook(lua_State* L, lua_State* co);

  // ---- sampling: the signal (sampler.hpp), the sample (sampling.hpp), the walk ----
  std::atomic<bool> alloc_pending{false};  ///< the allocator armed: take_alloc at the hook
  Sampler sampler;
  StackWalker walker{coroutines, frames, tree, opt.lines, ci_walk_ok};
  Sampling sampling{sampler, hooks, walker, frames, tree, col_samples, acct, tracer, opt};
  /// On the Lua thread, in the handler: the parts handed straight to it.
  void on_sample_signal() { Sampling::on_signal(sampler, hooks, coroutines, layout, ci_walk_ok); }

  // ---- tracer: its state and events (tracer.hpp) ----
  Tracer tracer{tree, frames, acct, alloc, opt, layout, ci_walk_ok, col_time, col_calls};

  // ---- allocation profiler (alloc.hpp; the session's side: session_alloc.cpp) ----
  std::unique_ptr<AllocState> alloc;
  uint64_t alloc_total_bytes = 0, alloc_total_count = 0;  ///< exact, for the report
  bool start_alloc(std::string& err);
  void take_alloc(lua_State* L);
  void stop_alloc(lua_State* L, bool collect);

  // ---- the thread and clock of the state ----
  pid_t tid = 0;              ///< the thread that runs the state (at exit: still there?)
  int slot = -1;              ///< its slot in the table of live sessions (sessions.hpp)
  clockid_t lua_cpu_clock{};  ///< the CPU clock of the thread that runs the state (opt.cpu_clock)
  uint64_t clock_before_ns = 0;  ///< the sampled clock's time on the threads it ran on before
  uint64_t clock_ns_read() const;
  /// clock_ns_read, or, when the state's thread has ended (its CPU clock
  /// is gone), the sampler's last reading of it.
  uint64_t clock_ns_last() const;
  std::size_t memory_bytes() const;

  // ---- start and stop's steps (session.cpp) ----
  bool configure(lua_State* L, std::string& err);
  bool publish(lua_State* L, std::string& err);
  bool trace_refused(std::string& err) const;
  bool begin(lua_State* L, std::string& err);
  bool start_step(lua_State* L, lua_CFunction body);
  static int start_frames_body(lua_State* L) noexcept;
  static int start_install_body(lua_State* L) noexcept;
  void fill_summary(SamplerKind sampler_kind, Summary& sum) const;
};

/// Ends the profiling of s where it failed (a hook's std::bad_alloc): said
/// once on stderr with `why`; the session is left as a forked child leaves
/// it (nothing written or streamed from here on), the program's hooks given
/// back at its next event, the allocator passing through. Lua thread.
void abandon_session(Session* s, const char* why,
                     const char* where = "the profiler's hook") noexcept;

/// coroutine.create/resume/wrap swapped for the session's, which tell it of each
/// switch, and back; their frames' names (session_coroutines.cpp).
void install_coroutine_wrappers(lua_State* L);
void restore_coroutine_wrappers(lua_State* L);
void preset_coroutine_frames(FrameTable& frames);

/// Wraps debug.sethook/gethook while profiling (session_hooks.cpp).
void install_hook_wrappers(lua_State* L);

/// A library function swapped for luaflame's while profiling; the
/// original is kept in the registry under `key`.
struct LibSwap {
  const char* name;
  const char* key;
  lua_CFunction ours;
};
/// Swaps lib.NAME for ours, keeping the originals (session_libswap.cpp).
void swap_library(lua_State* L, const char* lib, const LibSwap* swaps, std::size_t n);
/// Puts the originals back where ours still are (the program may have
/// replaced them since: theirs stays).
void restore_library(lua_State* L, const char* lib, const LibSwap* swaps, std::size_t n);
/// The hook lf_hook_after_stop gives back on the threads of the state
/// keyed `key` (sessions::key_of) once its session is gone (session_hooks.cpp).
/// `in_child`: from a forked child's handler (no lock: the only thread).
void set_hook_after_stop(std::uintptr_t key, lua_Hook h, int mask, int count,
                         bool in_child = false);
/// The hook kept for the state keyed `key`, none when none is.
HookChain::Chained hook_after_stop(std::uintptr_t key);

}  // namespace lfc
