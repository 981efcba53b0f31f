// luaflame collector: the profiler that lives inside a Lua program.
// The same core serves `require "luaflame"` (luaflame.so) and `luaflame run`.
// One profiling session per Lua state: a process may profile several states
// at once, on as many threads (docs/attach.md, "States and threads"; LuaJIT's
// profiler is one per process, so is its session).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

struct lua_State;

namespace lfc {

/// Every option of a session. The same names are used in the Lua table given
/// to luaflame.start{}, on the `luaflame run` command line (--hz 999) and in
/// LUAFLAME_* environment variables (LUAFLAME_HZ=999).
struct Options {
  bool sample =
      true;  ///< mode: "sample" (default), "trace", "both", "alloc", combinable "sample+alloc"
  bool trace = false;     ///< mode includes call/return timing
  bool alloc = false;     ///< mode includes the allocation profiler
  double hz = 999;        ///< hz: samples per second of the chosen clock (default 999)
  bool cpu_clock = true;  ///< clock: "cpu" (default, the Lua thread's CPU time) or "wall"
  std::string output;     ///< output: file, format by extension (.svg, .folded, .json); see
                          ///< output_path ("" = none)
  std::string server;     ///< server: http://host:port of luaflame-server ("" = do not stream)
  std::string token;      ///< token: bearer token for the server ("" = none)
  std::string name;  ///< name: the run's name on the server (default "lua", the runner uses the
                     ///< script's name)
  std::map<std::string, std::string> tags;  ///< tags: "k=v,k=v" or a Lua table (default none)
  double flush_interval = 5.0;  ///< flush_interval: seconds between streamed chunks (default 5)
  bool lines =
      false;  ///< lines: leaf frames carry the current line, not the line defined (default false)
  bool sources = false;        ///< sources: send the text of the profiled .lua files to the server
                               ///< (default false; sources.hpp)
  bool quiet = false;          ///< quiet: the runner prints no report on stderr (default false)
  bool show_profiler = false;  ///< show_profiler: keep samples of luaflame's own hook in the
                               ///< profile as "[luaflame] hook" (default false: only counted)
  double alloc_rate = 512 * 1024;  ///< alloc_rate: mean bytes between allocation samples; 0 = every
                                   ///< allocation (default 512 KiB)
  double max_output =
      512.0 * 1024 * 1024;  ///< max_output: bytes one output file may take; a bigger profile is cut
                            ///< with a "[luaflame] truncated" frame (default 512 MiB; also capped
                            ///< at half the free space of the file system)
};

/// The option names, in documentation order.
extern const char* const kOptionNames[];

/// True for the options that are true or false (a flag on the command line).
bool option_is_flag(std::string_view name);

/// Sets one option from its text form (command line, environment). On a bad
/// name or value returns false and says why in `err`.
bool set_option(Options& o, std::string_view name, std::string_view value, std::string& err);

/// Applies every LUAFLAME_<NAME> environment variable that is set.
bool apply_env(Options& o, std::string& err);

/// The metric columns a session with these options records, in order.
std::vector<std::string> metrics_of(const Options& o);

/// The file a metric is written to, given the `output` option: the first
/// metric goes to `output` itself, metric M to BASE.M.EXT (EXT = ".svg" or
/// ".folded" as `output` ends; BASE = output without it; any other name:
/// BASE = output, EXT = ".folded").
std::string output_path(const std::string& output, const std::string& metric, bool first);

/// Where a session's sample signals come from (Summary::sampler).
enum class SamplerKind : uint8_t {
  none,    ///< not sampling
  timer,   ///< per-thread kernel timers (Lua 5.4)
  thread,  ///< a thread of luaflame's own watching the clock (5.4's fallback; LuaJIT's sampler)
};

/// A sampler kind's short name: "timer", "thread", "" (none). `sampler` in
/// luaflame.stop()'s table; "thread" is also LUAFLAME_SAMPLER's value that
/// forces the polling thread. Its words in the summary come from the same
/// table (summary.cpp).
const char* sampler_name(SamplerKind k);

/// The collector's own account of a session, returned by stop().
struct Summary {
  std::string mode;
  std::string lua;  ///< the Lua the program ran on ("Lua 5.3.6", "LuaJIT 2.1.0-beta3")
  std::vector<std::string> metrics;
  double hz_asked = 0;         ///< the hz option
  double hz_delivered = 0;     ///< sample events per second of the sampled clock
  uint64_t samples_asked = 0;  ///< clock time / period
  uint64_t sample_events = 0;  ///< times the hook took a sample
  uint64_t samples = 0;        ///< samples recorded (events weighted by the periods they stand for)
  uint64_t clock_ns = 0;       ///< sampled clock (CPU or wall) elapsed while profiling
  /// Where the sample signals came from.
  SamplerKind sampler = SamplerKind::none;
  uint64_t wall_ns = 0;     ///< wall time profiled
  uint64_t hook_ns = 0;     ///< time spent inside the collector's hooks (trace and alloc: measured;
                            ///< sample: estimated)
  uint64_t hook_calls = 0;  ///< hook invocations
  uint64_t calls = 0;       ///< calls seen by the tracer
  uint64_t alloc_bytes = 0;   ///< bytes allocated while profiling
  uint64_t alloc_count = 0;   ///< allocations while profiling
  uint64_t live_bytes = 0;    ///< bytes still live at stop after a full collection (alloc mode)
  uint64_t nodes = 0;         ///< distinct call paths (call tree nodes)
  uint64_t frames = 0;        ///< distinct frames
  uint64_t memory_bytes = 0;  ///< the collector's own memory
  std::vector<std::string> files;  ///< output files written
  std::vector<std::string>
      file_notes;  ///< per file written: what it holds ("time, 1.2 MiB"), in files' order
  std::vector<std::string> file_errors;  ///< per file not written (or cut at max_output): why
  uint64_t files_failed = 0;   ///< files that could not be written (not counting cut ones)
  uint64_t output_ns = 0;      ///< wall time spent writing the output files
  uint64_t output_cpu_ns = 0;  ///< CPU time of the thread that wrote them
  std::string run_url;         ///< the run on the server, when streamed
  std::string stream_error;    ///< why streaming failed, if it did
  std::string fallback_file;   ///< undelivered data written here
  uint64_t chunks_sent = 0;
  /// Direct reads of Lua's structures in use (luaint.hpp), e.g. "ci_walk
  /// signal_position hook_count lua_ident c_ident"; and why any is off.
  std::string fast_paths;
  std::string fast_paths_off;
  uint64_t samples_moved = 0;  ///< samples whose recorded frame had returned by the hook
  /// Samples that fell in luaflame's own hook: the profiler's cost, left out
  /// of the profile unless `profiler_shown` (option show_profiler).
  uint64_t samples_in_hooks = 0;
  bool profiler_shown = false;
};

/// Starts profiling the Lua state of thread `L` (each state its own run: a
/// process may profile several at once, on as many threads, where the
/// adapter can tell states apart; docs/attach.md). Replaces
/// coroutine.resume and coroutine.wrap (to know which coroutine runs) until
/// stop. Returns false with a message when L's state is profiled already,
/// another state is and the adapter profiles one at a time, or the options
/// are bad.
bool start(lua_State* L, const Options& o, std::string& err);

/// True while a run profiles L's state.
bool running(lua_State* L);

/// Stops the run of L's state: restores hooks, signal handler, allocator
/// and coroutine functions, writes the output files, sends the rest to the
/// server (bounded wait), and reports. `L` null (process exit): every run.
Summary stop(lua_State* L);

/// The process is ending on a termination signal (the runners' SIGTERM
/// watcher, run_common.cpp). From a thread that is not the Lua thread:
/// writes the output files and finishes the streamed run with what the tree
/// holds now, while the Lua thread keeps running (what it records later is
/// lost; a stop() it calls from then on waits for the process to end). When
/// the Lua thread's own stop() runs already, waits (bounded) for it to end
/// instead. False when no session ran or stop() did the work. The caller
/// ends the process right after.
bool finish_for_exit();

/// Writes the output files of L's run now and asks its streamer to send a chunk now.
void flush(lua_State* L);

/// The folded text of one metric of L's run so far ("" = the first
/// metric). Returns false when L's state has no run or no such metric.
bool folded(lua_State* L, const std::string& metric, std::string& out, std::string& err);

/// A one-paragraph text report of a summary, for stderr.
std::string format_summary(const Summary& s);

/// Registers the `luaflame` module's functions in package.preload, so a
/// script run by `luaflame run` that requires "luaflame" gets this core.
void preload_module(lua_State* L);

/// The module opener (luaopen_luaflame calls it).
int open_module(lua_State* L);

/// The Lua this collector was built for: "Lua 5.3.6", "LuaJIT 2.1.0-beta3".
const char* vm_release();
/// Its name for `luaflame run --lua`: "5.1" ... "5.4", "luajit".
const char* vm_name();

/// `luaflame run`: runs argv like `lua5.X SCRIPT ARGS...` under a session.
/// `opts` are the parsed options, `script_index` the argv index of the
/// script. Returns the process exit status.
int run_script(const Options& opts, int argc, char** argv, int script_index);

}  // namespace lfc
