#include "http/refusal_log.hpp"

#include <algorithm>
#include <vector>

namespace lfs {

namespace {
constexpr std::size_t kMaxKeys = 1000;  // distinct (peer, reason) kept; the rest as "others"
constexpr std::size_t kShown = 5;       // named in a summary line
}  // namespace

std::string RefusalLog::refused(const std::string& peer, const std::string& reason,
                                int64_t now_ns) {
  std::string before = tick(now_ns);
  if (quiet_) {
    quiet_ = false;
    last_line_ns_ = now_ns;
    std::string line = peer + ": " + reason + " (more refusals within " +
                       std::to_string(interval_ / 1'000'000'000) + " s: one summary line)";
    return before.empty() ? line : before + "\n" + line;
  }
  ++counted_;
  auto key = std::make_pair(peer, reason);
  if (counts_.size() < kMaxKeys || counts_.count(key))
    ++counts_[key];
  else
    ++counts_[{"others", "any reason"}];
  return before;
}

std::string RefusalLog::tick(int64_t now_ns) {
  if (quiet_ || now_ns - last_line_ns_ < interval_) return {};
  if (counted_ == 0) {  // a whole interval with no refusal: the next is logged in full
    quiet_ = true;
    return {};
  }
  last_line_ns_ = now_ns;
  return summary();
}

std::string RefusalLog::summary() {
  std::vector<std::pair<uint64_t, const std::pair<std::string, std::string>*>> top;
  for (const auto& [key, n] : counts_) top.emplace_back(n, &key);
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && *a.second < *b.second);
  });
  std::string s = std::to_string(counted_) + " more refusals in " +
                  std::to_string(interval_ / 1'000'000'000) + " s:";
  for (std::size_t i = 0; i < top.size() && i < kShown; ++i)
    s += (i ? ", " : " ") + std::to_string(top[i].first) + " " + top[i].second->first + " (" +
         top[i].second->second + ")";
  if (top.size() > kShown) s += ", and " + std::to_string(top.size() - kShown) + " more kinds";
  counted_ = 0;
  counts_.clear();
  return s;
}

}  // namespace lfs
