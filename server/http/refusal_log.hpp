// Refusals in rate-limited summaries (issue 31). Behind a reverse proxy
// every client is one address, and a busy one is refused thousands of times
// a second: one log line each (79,070 lines in 60 s) buried everything else.
// Here the first refusal of a quiet spell is logged in full, the rest are
// counted by client and reason and logged as one summary line per interval.
// Pure (the caller gives the clock and logs the lines); not thread-safe: the
// front loop calls it under its lock.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace lfs {

class RefusalLog {
 public:
  explicit RefusalLog(int64_t interval_ns = 10'000'000'000) : interval_(interval_ns) {}

  /// `peer` was refused for `reason` at `now_ns`. Returns the line to log
  /// now ("" when it is counted for the next summary).
  std::string refused(const std::string& peer, const std::string& reason, int64_t now_ns);

  /// The summary of the refusals counted since the last line, once an
  /// interval has passed since it ("" otherwise). Called periodically.
  std::string tick(int64_t now_ns);

 private:
  std::string summary();

  int64_t interval_;
  int64_t last_line_ns_ = 0;
  bool quiet_ = true;  ///< no line within the last interval
  uint64_t counted_ = 0;
  std::map<std::pair<std::string, std::string>, uint64_t> counts_;  ///< (peer, reason) -> n
};

}  // namespace lfs
