// Server metrics in Prometheus text format: request counts and latencies per
// route, ingested bytes and lines; store figures are read at scrape time.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace lfs {

struct StoreStats;

class Metrics {
 public:
  /// One finished request.
  void request(const std::string& route, const std::string& method, int status, double seconds);
  /// Accepted input: body bytes (after decoding) and stack lines.
  void ingested(uint64_t bytes, uint64_t lines);
  /// The text for GET /metrics.
  std::string prometheus(const StoreStats& store, uint64_t cache_hits, uint64_t cache_misses,
                         std::size_t cache_bytes) const;

 private:
  static constexpr std::array<double, 12> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                      0.1,   0.25,   0.5,   1,    2.5,   10};
  struct Histogram {
    std::array<uint64_t, 12> counts{};
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  std::map<std::tuple<std::string, std::string, int>, uint64_t> requests_;
  std::map<std::string, Histogram> latency_;
  uint64_t bytes_ = 0, lines_ = 0;
};

}  // namespace lfs
