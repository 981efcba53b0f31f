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

Session::Session(lua_State* L, const Options& o)
    : opt(o),
      metrics(metrics_of(o)),
      tree(static_cast<int>(metrics.size())),
      start_L(L),
      main_L(L) {
  if (opt.sources && !opt.server.empty()) frames.sources = &source_files;
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    const std::string& m = metrics[i];
    const int c = static_cast<int>(i);
    if (m == "samples")
      col_samples = c;
    else if (m == "time")
      col_time = c;
    else if (m == "calls")
      col_calls = c;
    else if (m == "alloc_bytes")
      col_abytes = c;
    else if (m == "alloc_count")
      col_acount = c;
    else if (m == "live_bytes")
      col_live = c;
  }
  tree.overflow_frame = frames.named("[luaflame] too many stacks");
}

Session::~Session() = default;  // alloc.hpp and streamer.hpp included: both complete

}  // namespace lfc
