// The run: the VM-neutral half of a profiling session, the one thing every
// VM adapter (vm/puc, vm/luajit; docs/architecture.md, "Adding a VM")
// fills and the core's outputs read. It owns the configuration, the frame
// names, the call tree, the summary's counts, the output files and the
// stream to the server; it knows no lua_State (the core is built without
// Lua's headers: a Lua include here does not compile).
//
// Who writes what: the adapter's Lua thread writes the tree, the names and
// `acct` (its hooks, signal arm and allocator); the streamer thread only
// reads the tree and the names (tree.hpp says how readers never block the
// writer); a termination watcher thread may call finish_outside once, after
// which the adapter's stop() neither writes nor sends (see ending_*).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/output.hpp"
#include "core/sources.hpp"
#include "core/tree.hpp"
#include "luaflame/collector.hpp"

namespace lfc {

class Streamer;

/// What a run counts for its summary: written on the Lua thread (the
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

class Profile {
 public:
  /// `vm`: the Lua that runs the program ("Lua 5.3.6", "LuaJIT 2.1.0-beta3"),
  /// tagged on the run as lua=... unless the program set that tag itself.
  Profile(const Options& o, const char* vm);
  ~Profile();
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  // ---- configuration: fixed at start (cpu_clock turned off there when the
  // thread has no CPU clock) ----
  Options opt;
  const std::vector<std::string> metrics;
  /// The tree's column of each metric, -1 when not recorded.
  const int col_samples, col_time, col_calls;
  const int col_abytes, col_acount, col_live;

  // ---- the profile: the adapter writes, the outputs read ----
  FrameNames names;
  SourceFiles source_files;  ///< option `sources`: files of the profiled functions
  Tree tree;
  Accounting acct;

  // ---- where it goes: the files (output.hpp), the server (streamer.hpp) ----
  Output output{opt, metrics, tree, names};
  std::unique_ptr<Streamer> streamer;  ///< set by start_streaming, when opt.server is set

  /// Starts the stream to opt.server (the streamer's thread). Lua thread, at start.
  void start_streaming();
  /// The Summary of a run still going, from what other threads may read:
  /// the clocks, the options, the tree's and names' published sizes.
  Summary outside_summary() const;
  /// The tree's column of `metric` ("" = the first), or -1 with `err` set
  /// (luaflame.folded's message).
  int column_of(const std::string& metric, std::string& err) const;

  /// Who ends this run (ending_* below): none yet, stop() on the Lua
  /// thread, finish_outside on another thread, stop() done.
  enum Ending : int { kRunning, kStopping, kFinishing, kStopped };
  std::atomic<int> ending{kRunning};
};

/// Print the whole summary when the run ends at exit or lua_close (the runner sets it).
extern bool g_report_at_exit;
/// A run of this process could not write an output file (the runner's exit status).
extern bool g_output_failed;

/// The summary's name of a mode: "sample", "both", "trace+alloc"...
std::string mode_name(const Options& o);

/// Who ends a run (each run on its own: a process may hold several). The
/// adapter's stop() calls ending_begin_stop first (which never returns when
/// finish_outside_all has the run: the process is ending) and
/// ending_stopped last, and takes a run out of its table of live runs (to
/// delete it) only under ending_mutex(). finish_outside_all, from a thread
/// that is not a Lua thread (finish_for_exit in collector.hpp), calls
/// `visit` under that mutex; the adapter's visit hands it each live run.
/// Runs still going are written and their streams finished, once; runs
/// whose stop() runs already are waited for (bounded). True when it wrote
/// some run.
std::mutex& ending_mutex();
void ending_begin_stop(Profile& p);
void ending_stopped(Profile& p);
bool finish_outside_all(const std::function<void(const std::function<void(Profile&)>&)>& visit);

}  // namespace lfc
