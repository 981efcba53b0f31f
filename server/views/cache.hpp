// The server's memory caches: one LRU (RunLru) of values made from finished
// runs, for rendered SVGs here and for trees and function tables (render.hpp).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace lfs {

/// A response body, with its gzip form made once, when a client first asks
/// for it (most API clients never do; browsers always do).
struct Payload {
  std::string raw;
  int gzip_level = 1;  ///< zlib level for gz: 6 for cached graphs (made once), 1 otherwise
  /// The gzip form, made on first use (thread-safe).
  const std::string& gz() const;
  std::size_t size() const { return raw.size(); }  ///< what the cache counts

 private:
  mutable std::once_flag once_;
  mutable std::string gz_;
};

/// The server's one LRU: shared, immutable values made from one run (or two,
/// for a comparison), bounded by a cost (bytes, tree nodes) that `Cost` gives;
/// thread-safe. A value costing more than 1/`largest` of the budget is not
/// kept, so one huge entry never flushes the rest. Finished runs never change,
/// so an entry stays valid until its run is deleted (forget()); a live run's entries are
/// keyed by its revision and replaced when a newer revision is kept.
template <class T, std::size_t (*Cost)(const T&)>
class RunLru {
 public:
  using Ptr = std::shared_ptr<const T>;
  RunLru(std::size_t max_cost, std::size_t largest) : max_cost_(max_cost), largest_(largest) {}

  /// The value for `key`, or null; a hit becomes the most recent entry.
  Ptr get(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) {
      ++misses_;
      return nullptr;
    }
    order_.splice(order_.begin(), order_, it->second);
    ++hits_;
    return it->second->value;
  }

  /// Keeps `value` for `key`, made from `run` at `revision` (and `run2`, for a comparison
  /// of two runs). Entries of `run` at another revision (a live run's older states) go.
  void put(int64_t run, const std::string& key, Ptr value, int64_t run2 = -1,
           int64_t revision = 0) {
    std::lock_guard<std::mutex> lock(mu_);
    if (Cost(*value) > max_cost_ / largest_) return;
    auto it = index_.find(key);
    if (it != index_.end()) drop(it->second);
    for (auto e = order_.begin(); e != order_.end();) {
      auto next = std::next(e);
      if (e->run == run && e->revision != revision) drop(e);
      e = next;
    }
    order_.push_front({run, run2, revision, key, std::move(value)});
    index_[key] = order_.begin();
    cost_ += Cost(*order_.front().value);
    while (cost_ > max_cost_ && !order_.empty()) drop(std::prev(order_.end()));
  }

  /// Forgets every entry made from `run` (deleted).
  void forget(int64_t run) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = order_.begin(); it != order_.end();) {
      auto next = std::next(it);
      if (it->run == run || it->run2 == run) drop(it);
      it = next;
    }
  }

  uint64_t hits() const {
    std::lock_guard<std::mutex> l(mu_);
    return hits_;
  }
  uint64_t misses() const {
    std::lock_guard<std::mutex> l(mu_);
    return misses_;
  }
  std::size_t cost() const {
    std::lock_guard<std::mutex> l(mu_);
    return cost_;
  }  ///< sum of Cost over entries

 private:
  struct Entry {
    int64_t run;
    int64_t run2;      ///< the other run of a comparison, or -1
    int64_t revision;  ///< the run's revision the value was made from
    std::string key;
    Ptr value;
  };
  void drop(typename std::list<Entry>::iterator it) {
    cost_ -= Cost(*it->value);
    index_.erase(it->key);
    order_.erase(it);
  }

  mutable std::mutex mu_;
  std::size_t max_cost_, largest_;
  std::size_t cost_ = 0;
  uint64_t hits_ = 0, misses_ = 0;
  std::list<Entry> order_;  // most recent first
  std::unordered_map<std::string, typename std::list<Entry>::iterator> index_;
};

inline std::size_t payload_bytes(const Payload& p) {
  return p.size();
}

/// Rendered SVGs of finished runs (and comparisons), bounded in bytes.
class SvgCache : public RunLru<Payload, payload_bytes> {
 public:
  explicit SvgCache(std::size_t max_bytes) : RunLru(max_bytes, 4) {}
  std::size_t bytes() const { return cost(); }
};

}  // namespace lfs
