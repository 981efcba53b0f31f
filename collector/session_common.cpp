// What every build of the session shares (Lua 5.4's session.cpp and
// LuaJIT's jit/jsession.cpp): the process-wide session pointer and flags,
// the clocks, and Session's construction (the metric columns).
#include <time.h>

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
