// The streamer: a background thread that sends the call tree's deltas to
// luaflame-server as wire chunks (wire/include/luaflame/wire.hpp), every
// flush_interval and at stop. It never blocks the Lua thread: it only reads
// the tree (see tree.hpp). A delta is cut into chunks of at most kChunkNodes
// nodes (plus the ancestors of the first, so each chunk stands alone: the
// nodes are taken in depth-first order, where every parent outside a run of
// nodes is an ancestor of the run's first node). Chunks go one at a time,
// each keeping its seq until acknowledged, so a retry never counts twice;
// the timeouts grow with the chunk. What cannot be delivered by the end
// goes to a local folded file; a run the server did not mark finished is
// reported as an error.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "luaflame/collector.hpp"
#include "luaflame/wire.hpp"

namespace lfhttp {
class Client;
}

namespace lfc {

class Profile;

class Streamer {
 public:
  /// Seconds the final flush may take at stop before giving up, plus one
  /// per MiB still to send; each chunk the server acknowledges extends the
  /// wait by the next one's timeout (at most kFinishMaxSeconds in all), so a
  /// stalled server is cut early and a slow one is given the time it needs.
  static constexpr double kFinishSeconds = 3.0, kFinishMaxSeconds = 30.0;
  /// Nodes with values per chunk (a chunk also carries its first node's ancestors).
  static constexpr uint32_t kChunkNodes = 16384;

  /// The session's exit handler (at_process_exit), set at start(): registered again with
  /// std::atexit after the process's first HTTP answer, so that exit() runs it before
  /// cpp-httplib's statics (in the transport, luaflame/http.hpp) are destroyed (see the
  /// contract in streamer.cpp).
  static void set_exit_handler(void (*fn)());

  explicit Streamer(Profile& s);
  ~Streamer();
  void start();
  /// Asks for a chunk now (luaflame.flush()).
  void flush_now();
  /// Sends what is left, finishes the run, writes the fallback file if
  /// needed; fills the streaming fields of `sum`. Call once the Lua thread
  /// no longer records.
  void finish(Summary& sum);

 private:
  using Clock = std::chrono::steady_clock;
  template <class Body>
  void guarded(Body&& body) noexcept;  ///< runs body; what it throws ends streaming
  void run() noexcept;                 ///< the streaming thread's function
  void stream_loop();
  void deliver_rest(const Summary& sum, Clock::time_point t0, std::atomic<double>& allowed);
  bool create_run();
  struct Cut;
  struct ChunkMaker;
  void build_chunks(uint64_t until_ns);
  bool take_deltas(std::vector<uint64_t>& delta, std::vector<char>& keep);
  void fold_deep(const std::vector<uint64_t>& delta, std::vector<char>& keep, Cut& cut);
  std::vector<uint32_t> preorder(const std::vector<char>& keep) const;
  bool send_chunk();
  bool finish_run(const Summary& sum);
  static double timeout_for(std::size_t body_bytes);  ///< seconds a request of this size may take
  void set_timeouts(std::size_t body_bytes);
  std::size_t queued_bytes() const;
  void send_sources();  ///< option `sources`: POST /api/runs/ID/sources (best effort)
  void write_fallback(Summary& sum);
  bool post(const std::string& path, const std::string& body, const char* type, int& status,
            std::string& answer);

  Profile& s_;
  std::thread th_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, flush_req_ = false;
  std::unique_ptr<lfhttp::Client> cli_;  ///< null: the transport failed to load or open (error_)
  std::string uuid_;
  long long run_id_ = -1;
  std::string run_url_;
  uint64_t seq_ = 0;  ///< the next chunk's seq
  uint64_t last_until_ = 0;
  std::vector<uint64_t> sent_;  ///< node * nmetrics: values put into chunks so far
  struct Pending {
    std::string body;  ///< the encoded chunk (its seq fixed)
    std::vector<std::pair<uint32_t, std::vector<uint64_t>>> deltas;  ///< its tree nodes and values
  };
  /// Nodes deeper than the server takes, by the ancestor they are folded into.
  struct Cut {
    std::unordered_map<uint32_t, std::vector<uint32_t>> under;
    std::unordered_map<uint32_t, std::vector<uint64_t>> values;  ///< their deltas summed
  };
  /// Builds one chunk at a time (build_chunks).
  struct ChunkMaker {
    ChunkMaker(Streamer& st, const std::vector<uint64_t>& d, const Cut& c, uint32_t n);
    std::size_t make(const std::vector<uint32_t>& order, std::size_t at, uint64_t until_ns);
    void add(uint32_t i, bool with_values);
    void add_cut(uint32_t i);
    Streamer& s;
    const std::vector<uint64_t>& delta;
    const Cut& cut;
    std::vector<uint32_t> stamp, index, fstamp, findex, chain;
    uint32_t piece = 0, cut_frame = 0, cut_frame_piece = 0;
    lfw::Chunk c;
    Pending pend;
  };
  /// The deepest stack the server takes (its create answer's limits.max_depth).
  static constexpr uint32_t kDefaultMaxDepth = 1024;
  uint32_t max_depth_ = kDefaultMaxDepth;
  std::deque<Pending> queue_;         ///< built, not yet acknowledged; the front is in flight
  bool finished_ = false;             ///< the server answered the finish request
  bool given_up_ = false;             ///< a 4xx answer: the server will not take this run
  std::atomic<bool> aborted_{false};  ///< the final wait ran out
  std::string error_;
  uint64_t chunks_sent_ = 0;
  std::size_t bytes_sent_ = 0;  ///< chunk bodies acknowledged
  double backoff_ = 0.25;
  double timeout_s_ = 2.0;  ///< the read/write timeout set now (the thread doing requests)
  bool answering_ = false;  ///< the last request had an answer (any status)
  /// steady_clock ns by which the last request started ends by its own timeouts, when the
  /// server was answering (else 0). The final wait does not cut it before (see finish()).
  /// Left set after the request: a time past, or soon past.
  std::atomic<int64_t> inflight_end_ns_{0};
};

}  // namespace lfc
