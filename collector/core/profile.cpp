// The run (profile.hpp): its construction (the metric columns), the clocks,
// and who ends it: the adapter's stop() on the Lua thread or finish_outside
// on a termination signal's watcher thread (vm/lua/run_common.cpp), once.
#include "core/profile.hpp"

#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <thread>

#include "core/streamer.hpp"

namespace lfc {

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

// The run's lua=... tag: which Lua it came from (docs/collector.md, "Every
// Lua"). A tag the program set wins; a run already at the server's default
// limit of 32 tags is left as it is rather than refused.
Options tag_vm(Options o, const char* vm) {
  if (vm && *vm && o.tags.size() < 32) o.tags.emplace("lua", vm);
  return o;
}

}  // namespace

Profile::Profile(const Options& o, const char* vm)
    : opt(tag_vm(o, vm)),
      metrics(metrics_of(opt)),
      col_samples(column(metrics, "samples")),
      col_time(column(metrics, "time")),
      col_calls(column(metrics, "calls")),
      col_abytes(column(metrics, "alloc_bytes")),
      col_acount(column(metrics, "alloc_count")),
      col_live(column(metrics, "live_bytes")),
      tree(static_cast<int>(metrics.size())) {}

Profile::~Profile() = default;  // streamer.hpp included: Streamer is complete

void Profile::start_streaming() {
  if (opt.server.empty()) return;
  streamer = std::make_unique<Streamer>(*this);
  streamer->start();
}

Summary Profile::outside_summary() const {
  Summary sum;
  sum.mode = mode_name(opt);
  sum.metrics = metrics;
  sum.wall_ns = now_ns() - acct.start_wall;
  sum.hz_asked = opt.hz;
  sum.profiler_shown = opt.show_profiler;
  sum.nodes = tree.size();
  sum.frames = names.size();
  return sum;
}

int Profile::column_of(const std::string& metric, std::string& err) const {
  if (metric.empty()) return 0;
  const int col = column(metrics, metric.c_str());
  if (col >= 0) return col;
  err = "metric '" + metric + "' is not recorded in this mode (recorded:";
  for (const auto& m : metrics) err += " " + m;
  err += ")";
  return -1;
}

std::string mode_name(const Options& o) {
  std::string m = o.trace ? (o.sample ? "both" : "trace") : (o.sample ? "sample" : "");
  if (o.alloc) m += m.empty() ? "alloc" : "+alloc";
  return m;
}

namespace {

std::mutex g_ending_mu;             // orders a run's end against finish_outside_all's visit
std::atomic<int> g_stops_going{0};  // stop()s between ending_begin_stop and ending_stopped

void finish_outside(Profile& p) {
  Summary sum = p.outside_summary();
  p.output.write(sum);
  for (const auto& e : sum.file_errors) std::fprintf(stderr, "luaflame: %s\n", e.c_str());
  if (p.streamer) p.streamer->finish(sum);
}

}  // namespace

std::mutex& ending_mutex() {
  return g_ending_mu;
}

void ending_begin_stop(Profile& p) {
  int expect = Profile::kRunning;
  {
    std::lock_guard<std::mutex> lock(g_ending_mu);
    if (p.ending.compare_exchange_strong(expect, Profile::kStopping)) ++g_stops_going;
  }
  if (expect == Profile::kFinishing)
    for (;;) pause();  // finish_outside has the run: the process ends with it
}

void ending_stopped(Profile& p) {
  if (p.ending.exchange(Profile::kStopped) == Profile::kStopping) --g_stops_going;
}

bool finish_outside_all(const std::function<void(const std::function<void(Profile&)>&)>& visit) {
  std::vector<Profile*> taken;
  bool stopping = false;
  {
    std::lock_guard<std::mutex> lock(g_ending_mu);
    visit([&](Profile& p) {
      int expect = Profile::kRunning;
      if (p.ending.compare_exchange_strong(expect, Profile::kFinishing))
        taken.push_back(&p);
      else if (expect == Profile::kStopping)
        stopping = true;
    });
  }
  for (Profile* p : taken) finish_outside(*p);
  // A Lua thread's stop() writes and sends: its own bounded wait, plus a second.
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration<double>(Streamer::kFinishMaxSeconds + 1);
  while (stopping && g_stops_going.load() > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return !taken.empty();
}

}  // namespace lfc
