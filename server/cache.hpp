// A memory LRU of rendered SVGs of finished runs (finished runs never
// change, so an entry is valid until the run is deleted), bounded in bytes.
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

class SvgCache {
 public:
  explicit SvgCache(std::size_t max_bytes) : max_bytes_(max_bytes) {}

  /// The cached body for `key`, or null.
  std::shared_ptr<const Payload> get(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) { ++misses_; return nullptr; }
    order_.splice(order_.begin(), order_, it->second);
    ++hits_;
    return it->second->body;
  }

  /// Keeps `body` for `key`, made from `run` (and `run2`, for a comparison of two runs).
  void put(int64_t run, const std::string& key, std::shared_ptr<const Payload> body, int64_t run2 = -1) {
    std::lock_guard<std::mutex> lock(mu_);
    if (body->size() > max_bytes_ / 4) return;  // one huge graph must not flush the rest
    auto it = index_.find(key);
    if (it != index_.end()) drop(it->second);
    order_.push_front({run, run2, key, std::move(body)});
    index_[key] = order_.begin();
    bytes_ += order_.front().body->size();
    while (bytes_ > max_bytes_ && !order_.empty()) drop(std::prev(order_.end()));
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

  uint64_t hits() const { std::lock_guard<std::mutex> l(mu_); return hits_; }
  uint64_t misses() const { std::lock_guard<std::mutex> l(mu_); return misses_; }
  std::size_t bytes() const { std::lock_guard<std::mutex> l(mu_); return bytes_; }

 private:
  struct Entry {
    int64_t run;
    int64_t run2;  ///< the other run of a comparison, or -1
    std::string key;
    std::shared_ptr<const Payload> body;
  };
  void drop(std::list<Entry>::iterator it) {
    bytes_ -= it->body->size();
    index_.erase(it->key);
    order_.erase(it);
  }

  mutable std::mutex mu_;
  std::size_t max_bytes_;
  std::size_t bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0;
  std::list<Entry> order_;
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace lfs
