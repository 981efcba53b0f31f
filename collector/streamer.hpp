// The streamer: a background thread that sends the call tree's deltas to
// luaflame-server as wire chunks (wire/include/luaflame/wire.hpp), every
// flush_interval and at stop. It never blocks the Lua thread: it only reads
// the tree (see tree.hpp). One chunk is in flight at a time and keeps its
// seq until acknowledged, so a retry never counts twice and the buffer is
// bounded (one chunk; the rest waits in the tree). What cannot be
// delivered by the end goes to a local folded file.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "luaflame/collector.hpp"

namespace httplib { class Client; }

namespace lfc {

class Session;

class Streamer {
 public:
  /// Seconds the final flush may take at stop before giving up.
  static constexpr double kFinishSeconds = 3.0;

  explicit Streamer(Session& s);
  ~Streamer();
  void start();
  /// Asks for a chunk now (luaflame.flush()).
  void flush_now();
  /// Sends what is left, finishes the run, writes the fallback file if
  /// needed; fills the streaming fields of `sum`. Call once the Lua thread
  /// no longer records.
  void finish(Summary& sum);

 private:
  void run();
  bool create_run();
  void build_chunk(uint64_t until_ns);
  bool send_chunk();
  void finish_run(const Summary& sum);
  void send_sources();  ///< option `sources`: POST /api/runs/ID/sources (best effort)
  void write_fallback(Summary& sum);
  bool post(const std::string& path, const std::string& body, const char* type, int& status,
            std::string& answer);

  Session& s_;
  std::thread th_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, flush_req_ = false;
  std::unique_ptr<httplib::Client> cli_;
  std::string uuid_;
  long long run_id_ = -1;
  std::string run_url_;
  uint64_t seq_ = 0;
  uint64_t last_until_ = 0;
  std::vector<uint64_t> sent_;  ///< node * nmetrics: values put into chunks so far
  bool has_chunk_ = false;      ///< a chunk waits for its acknowledgement
  std::string chunk_body_;
  std::vector<std::pair<uint32_t, std::vector<uint64_t>>> chunk_deltas_;  ///< its nodes and values
  bool given_up_ = false;       ///< a 4xx answer: the server will not take this run
  std::atomic<bool> aborted_{false};  ///< the final wait ran out
  std::string error_;
  uint64_t chunks_sent_ = 0;
  double backoff_ = 0.25;
};

}  // namespace lfc
