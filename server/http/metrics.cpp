#include "http/metrics.hpp"

#include <cstdio>

#include "store/store.hpp"

namespace lfs {

void Metrics::request(const std::string& route, const std::string& method, int status,
                      double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{route, method, status}];
  Histogram& h = latency_[route];
  for (std::size_t i = 0; i < kBuckets.size(); ++i)
    if (seconds <= kBuckets[i]) ++h.counts[i];
  ++h.count;
  h.sum += seconds;
}

void Metrics::ingested(uint64_t bytes, uint64_t lines) {
  std::lock_guard<std::mutex> lock(mu_);
  bytes_ += bytes;
  lines_ += lines;
}

namespace {
std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
// Label values are route patterns and methods, but escape anyway.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}
}  // namespace

std::string Metrics::prometheus(const StoreStats& s, uint64_t hits, uint64_t misses,
                                std::size_t cache_bytes) const {
  std::string o;
  o += "# HELP luaflame_runs Runs in the store.\n# TYPE luaflame_runs gauge\n";
  o += "luaflame_runs{status=\"live\"} " + std::to_string(s.live_runs) + "\n";
  o += "luaflame_runs{status=\"finished\"} " + std::to_string(s.runs - s.live_runs) + "\n";
  o += "# HELP luaflame_stored_bytes Bytes of the database in use.\n# TYPE luaflame_stored_bytes "
       "gauge\n";
  o += "luaflame_stored_bytes " + std::to_string(s.stored_bytes) + "\n";
  o += "# HELP luaflame_disk_bytes Bytes of the database and its WAL on disk.\n# TYPE "
       "luaflame_disk_bytes gauge\n";
  o += "luaflame_disk_bytes " + std::to_string(s.file_bytes) + "\n";
  o += "# HELP luaflame_svg_cache_bytes Bytes of cached SVGs.\n# TYPE luaflame_svg_cache_bytes "
       "gauge\n";
  o += "luaflame_svg_cache_bytes " + std::to_string(cache_bytes) + "\n";
  o += "# HELP luaflame_svg_cache_hits_total SVG requests served from the cache.\n# TYPE "
       "luaflame_svg_cache_hits_total counter\n";
  o += "luaflame_svg_cache_hits_total " + std::to_string(hits) + "\n";
  o += "# HELP luaflame_svg_cache_misses_total SVG requests rendered.\n# TYPE "
       "luaflame_svg_cache_misses_total counter\n";
  o += "luaflame_svg_cache_misses_total " + std::to_string(misses) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  o += "# HELP luaflame_ingested_bytes_total Profile bytes accepted (after gzip decoding).\n";
  o += "# TYPE luaflame_ingested_bytes_total counter\nluaflame_ingested_bytes_total " +
       std::to_string(bytes_) + "\n";
  o += "# HELP luaflame_ingested_lines_total Stack lines accepted.\n";
  o += "# TYPE luaflame_ingested_lines_total counter\nluaflame_ingested_lines_total " +
       std::to_string(lines_) + "\n";
  o += "# HELP luaflame_http_requests_total HTTP requests by route, method and status.\n";
  o += "# TYPE luaflame_http_requests_total counter\n";
  for (const auto& [k, n] : requests_)
    o += "luaflame_http_requests_total{route=\"" + label(std::get<0>(k)) + "\",method=\"" +
         label(std::get<1>(k)) + "\",status=\"" + std::to_string(std::get<2>(k)) + "\"} " +
         std::to_string(n) + "\n";
  o += "# HELP luaflame_http_request_duration_seconds Request latency by route.\n";
  o += "# TYPE luaflame_http_request_duration_seconds histogram\n";
  for (const auto& [route, h] : latency_) {
    std::string r = label(route);
    for (std::size_t i = 0; i < kBuckets.size(); ++i)
      o += "luaflame_http_request_duration_seconds_bucket{route=\"" + r + "\",le=\"" +
           num(kBuckets[i]) + "\"} " + std::to_string(h.counts[i]) + "\n";
    o += "luaflame_http_request_duration_seconds_bucket{route=\"" + r + "\",le=\"+Inf\"} " +
         std::to_string(h.count) + "\n";
    o += "luaflame_http_request_duration_seconds_sum{route=\"" + r + "\"} " + num(h.sum) + "\n";
    o += "luaflame_http_request_duration_seconds_count{route=\"" + r + "\"} " +
         std::to_string(h.count) + "\n";
  }
  return o;
}

}  // namespace lfs
