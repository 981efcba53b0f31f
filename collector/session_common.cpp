// What every build of the session shares (Lua 5.4's session.cpp and
// LuaJIT's jit/jsession.cpp): the process-wide session pointer and flags,
// the clocks, Session's construction (the metric columns), and who ends
// a session: stop() on the Lua thread or finish_outside on a termination
// signal's watcher thread (run_common.cpp), once.
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "alloc.hpp"
#include "session.hpp"
#include "streamer.hpp"

namespace lfc {

std::atomic<Session*> g_session{nullptr};
bool g_report_at_exit = false;
bool g_output_failed = false;

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t unix_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

namespace {

// The tree's column of metric `m`, or -1.
int column(const std::vector<std::string>& metrics, const char* m) {
  for (std::size_t i = 0; i < metrics.size(); ++i)
    if (metrics[i] == m) return static_cast<int>(i);
  return -1;
}

}  // namespace

namespace {

// Who ends the session: none yet, stop() on the Lua thread,
// finish_outside on the signal watcher's thread, stop() done.
enum Ending : int { kRunning, kStopping, kFinishing, kStopped };
std::atomic<int> g_ending{kRunning};

// The Summary of a session still running, from what other threads may
// read: the clocks, the options, the tree's and names' published sizes.
Summary outside_summary(const Session& s) {
  Summary sum;
  sum.mode = mode_name(s.opt);
  sum.metrics = s.metrics;
  sum.wall_ns = now_ns() - s.acct.start_wall;
  sum.hz_asked = s.opt.hz;
  sum.profiler_shown = s.opt.show_profiler;
  sum.nodes = s.tree.size();
  sum.frames = s.names.size();
  return sum;
}

}  // namespace

std::string mode_name(const Options& o) {
  std::string m = o.trace ? (o.sample ? "both" : "trace") : (o.sample ? "sample" : "");
  if (o.alloc) m += m.empty() ? "alloc" : "+alloc";
  return m;
}

void ending_reset() {
  g_ending.store(kRunning);
}

void ending_begin_stop() {
  int expect = kRunning;
  if (!g_ending.compare_exchange_strong(expect, kStopping) && expect == kFinishing)
    for (;;) pause();  // finish_outside has the run: the process ends with it
}

void ending_stopped() {
  g_ending.store(kStopped);
}

bool finish_outside(Session* s) {
  int expect = kRunning;
  if (!s || !g_ending.compare_exchange_strong(expect, kFinishing)) {
    // The Lua thread's stop() writes and sends: its own bounded wait, plus a second.
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration<double>(Streamer::kFinishMaxSeconds + 1);
    while (expect == kStopping && g_ending.load() == kStopping &&
           std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return false;
  }
  Summary sum = outside_summary(*s);
  s->output.write(sum);
  for (const auto& e : sum.file_errors) std::fprintf(stderr, "luaflame: %s\n", e.c_str());
  if (s->streamer) s->streamer->finish(sum);
  return true;
}

Session::Session(lua_State* L, const Options& o)
    : opt(o),
      metrics(metrics_of(o)),
      col_samples(column(metrics, "samples")),
      col_time(column(metrics, "time")),
      col_calls(column(metrics, "calls")),
      col_abytes(column(metrics, "alloc_bytes")),
      col_acount(column(metrics, "alloc_count")),
      col_live(column(metrics, "live_bytes")),
      tree(static_cast<int>(metrics.size())),
      start_L(L),
      main_L(L) {
  if (opt.sources && !opt.server.empty()) frames.sources = &source_files;
  tree.overflow_frame = frames.named("[luaflame] too many stacks");
}

Session::~Session() = default;  // alloc.hpp and streamer.hpp included: both complete

}  // namespace lfc
