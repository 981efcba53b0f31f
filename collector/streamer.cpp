// The streamer (see streamer.hpp). httplib's client is used here only, on
// the streamer's own thread.
#include "streamer.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "luaflame/wire.hpp"
#include "session.hpp"

namespace lfc {

namespace {

std::string make_uuid() {
  std::random_device rd;
  std::mt19937_64 g((static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(getpid()));
  char buf[40];
  uint64_t a = g(), b = g();
  std::snprintf(buf, sizeof buf, "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                static_cast<unsigned>(0x8000 | ((b >> 48) & 0x3fff)),
                static_cast<unsigned long long>(b & 0xffffffffffffull));
  return buf;
}

using Clock = std::chrono::steady_clock;

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

Streamer::Streamer(Session& s) : s_(s), uuid_(make_uuid()) {
  cli_ = std::make_unique<httplib::Client>(s_.opt.server);
  cli_->set_connection_timeout(1, 0);
  cli_->set_read_timeout(2, 0);
  cli_->set_write_timeout(2, 0);
  if (!s_.opt.token.empty()) cli_->set_bearer_token_auth(s_.opt.token);
}

Streamer::~Streamer() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (th_.joinable()) th_.join();
}

void Streamer::start() {
  last_until_ = s_.start_unix;
  th_ = std::thread([this] { run(); });
}

void Streamer::flush_now() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    flush_req_ = true;
  }
  cv_.notify_all();
}

bool Streamer::post(const std::string& path, const std::string& body, const char* type, int& status,
                    std::string& answer) {
  if (aborted_.load()) {
    error_ = "gave up waiting for " + s_.opt.server;
    status = 0;
    return false;
  }
  auto res = cli_->Post(path, body, type);
  if (!res) {
    error_ = "cannot reach " + s_.opt.server + " (" + httplib::to_string(res.error()) + " error)";
    status = 0;
    return false;
  }
  status = res->status;
  answer = res->body;
  if (status >= 200 && status < 300) return true;
  error_ = "POST " + path + " answered " + std::to_string(status) + ": " + answer.substr(0, 200);
  // A refusal (4xx other than timeouts and rate limits) will not change on retry.
  if (status >= 400 && status < 500 && status != 408 && status != 429) given_up_ = true;
  return false;
}

bool Streamer::create_run() {
  nlohmann::json j;
  j["stream"] = uuid_;
  j["name"] = s_.opt.name.empty() ? "lua" : s_.opt.name;
  j["tags"] = s_.opt.tags;
  j["metrics"] = s_.metrics;
  j["started_ns"] = s_.start_unix;
  if (s_.opt.sample) j["hz"] = s_.opt.hz;
  int status = 0;
  std::string answer;
  if (!post("/api/streams", j.dump(), "application/json", status, answer)) return false;
  auto r = nlohmann::json::parse(answer, nullptr, false);
  if (r.is_discarded() || !r.contains("id") || !r["id"].is_number_integer()) {
    error_ = "POST /api/streams: unexpected answer " + answer.substr(0, 200);
    given_up_ = true;
    return false;
  }
  run_id_ = r["id"].get<long long>();
  run_url_ = r.value("url", "");
  if (!run_url_.empty() && run_url_[0] == '/') run_url_ = s_.opt.server + run_url_;
  return true;
}

// The delta since the last chunk: nodes with a change, and their ancestors
// (a chunk names every node's parent), frames renumbered for the chunk.
void Streamer::build_chunk(uint64_t until_ns) {
  const Tree& t = s_.tree;
  const int nm = t.nmetrics();
  const uint32_t n = t.size();
  sent_.resize(static_cast<std::size_t>(n) * nm, 0);
  std::vector<uint64_t> delta(static_cast<std::size_t>(n) * nm, 0);
  std::vector<char> keep(n, 0);
  bool any = false;
  for (uint32_t i = 1; i < n; ++i) {
    for (int m = 0; m < nm; ++m) {
      std::size_t k = static_cast<std::size_t>(i) * nm + m;
      uint64_t v = t.value(i, m);
      if (v > sent_[k]) { delta[k] = v - sent_[k]; sent_[k] = v; keep[i] = 1; any = true; }
    }
  }
  if (!any) return;
  for (uint32_t i = n - 1; i >= 1; --i) if (keep[i]) keep[t.parent(i)] = 1;
  lfw::Chunk c;
  c.seq = seq_;
  c.from_ns = last_until_;
  c.until_ns = until_ns;
  c.metrics = s_.metrics;
  std::vector<int64_t> index(n, -1);
  std::vector<int64_t> frame_index(s_.names.size(), -1);
  chunk_deltas_.clear();
  for (uint32_t i = 1; i < n; ++i) {
    if (!keep[i]) continue;
    uint32_t f = t.frame(i);
    if (frame_index[f] < 0) { frame_index[f] = static_cast<int64_t>(c.frames.size()); c.frames.push_back(s_.names[f]); }
    lfw::Node node;
    uint32_t p = t.parent(i);
    node.parent = p == 0 ? -1 : index[p];
    node.frame = static_cast<uint32_t>(frame_index[f]);
    node.values.assign(delta.begin() + static_cast<long>(i) * nm, delta.begin() + static_cast<long>(i + 1) * nm);
    index[i] = static_cast<int64_t>(c.nodes.size());
    chunk_deltas_.push_back({i, node.values});
    c.nodes.push_back(std::move(node));
  }
  chunk_body_.clear();
  lfw::encode(c, chunk_body_);
  has_chunk_ = true;
  last_until_ = until_ns;
}

bool Streamer::send_chunk() {
  if (run_id_ < 0 && !create_run()) return false;
  int status = 0;
  std::string answer;
  if (!post("/api/runs/" + std::to_string(run_id_) + "/chunks", chunk_body_, "text/plain", status, answer))
    return false;
  has_chunk_ = false;
  chunk_deltas_.clear();
  ++seq_;
  ++chunks_sent_;
  return true;
}

void Streamer::run() {
  auto next_flush = after(s_.opt.flush_interval);
  auto next_try = Clock::now();
  for (;;) {
    bool stopping, flush;
    {
      std::unique_lock<std::mutex> lk(mu_);
      auto until = has_chunk_ ? std::min(next_flush, next_try) : next_flush;
      cv_.wait_until(lk, until, [&] { return stop_ || flush_req_; });
      stopping = stop_;
      flush = flush_req_ || Clock::now() >= next_flush;
      flush_req_ = false;
    }
    if (stopping) return;
    if (given_up_) continue;
    if (!has_chunk_ && flush) {
      build_chunk(unix_now_ns());
      next_flush = after(s_.opt.flush_interval);
    }
    if (has_chunk_ && Clock::now() >= next_try) {
      if (send_chunk()) {
        backoff_ = 0.25;
      } else {
        next_try = after(backoff_);
        backoff_ = std::min(backoff_ * 2, 30.0);
      }
    }
  }
}

void Streamer::finish(Summary& sum) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  // The last chunk and the finish call, on a thread of their own so the
  // bounded wait is the only thing the Lua thread sees: past the deadline
  // the request in flight is cut (a server that accepts and never answers).
  const auto deadline = after(kFinishSeconds);
  std::atomic<bool> done{false};
  std::thread last([&] {
    if (th_.joinable()) th_.join();
    double wait = 0.1;
    bool built = false;
    while (!given_up_) {
      if (!has_chunk_) {
        if (built) break;
        build_chunk(unix_now_ns());
        built = true;
        if (!has_chunk_) break;
      }
      if (send_chunk()) continue;
      if (given_up_ || aborted_.load() || after(wait) >= deadline) break;
      std::this_thread::sleep_for(std::chrono::duration<double>(wait));
      wait *= 2;
    }
    if (!given_up_ && !has_chunk_ && (run_id_ >= 0 || create_run())) {
      finish_run(sum);
      if (s_.opt.sources) send_sources();
    }
    done.store(true);
  });
  while (!done.load() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (!done.load()) {
    aborted_.store(true);
    cli_->stop();
  }
  last.join();
  sum.chunks_sent = chunks_sent_;
  sum.run_url = run_url_;
  if (has_chunk_ || given_up_ || run_id_ < 0) {
    sum.stream_error = error_.empty() ? "not delivered" : error_;
    write_fallback(sum);
  }
}

void Streamer::finish_run(const Summary& sum) {
  nlohmann::json st;
  st["wall_ns"] = sum.wall_ns;
  st["clock_ns"] = sum.clock_ns;
  st["hz_asked"] = sum.hz_asked;
  st["hz_delivered"] = sum.hz_delivered;
  st["samples_asked"] = sum.samples_asked;
  st["sample_events"] = sum.sample_events;
  st["hook_ns"] = sum.hook_ns;
  st["hook_calls"] = sum.hook_calls;
  st["memory_bytes"] = sum.memory_bytes;
  st["nodes"] = sum.nodes;
  nlohmann::json j;
  j["stats"] = st;
  int status = 0;
  std::string answer;
  post("/api/runs/" + std::to_string(run_id_) + "/finish", j.dump(), "application/json", status, answer);
}

void Streamer::send_sources() {
  std::string body = s_.source_files.json();
  if (body.empty()) return;
  int status = 0;
  std::string answer;
  if (!post("/api/runs/" + std::to_string(run_id_) + "/sources", body, "application/json", status, answer) ||
      status != 200)
    error_ = "sources not stored (" + std::to_string(status) + ")";
}

// Undelivered = everything not yet put in a chunk, plus the chunk in flight.
void Streamer::write_fallback(Summary& sum) {
  const Tree& t = s_.tree;
  const int nm = t.nmetrics();
  const uint32_t n = t.size();
  sent_.resize(static_cast<std::size_t>(n) * nm, 0);
  std::vector<uint64_t> left(static_cast<std::size_t>(n) * nm, 0);
  for (uint32_t i = 1; i < n; ++i)
    for (int m = 0; m < nm; ++m) {
      std::size_t k = static_cast<std::size_t>(i) * nm + m;
      left[k] = t.value(i, m) - sent_[k];
    }
  if (has_chunk_)
    for (const auto& [node, vals] : chunk_deltas_)
      for (int m = 0; m < nm; ++m) left[static_cast<std::size_t>(node) * nm + m] += vals[static_cast<std::size_t>(m)];
  std::string base = s_.opt.output.empty() ? "luaflame-" + std::to_string(getpid()) + ".folded" : s_.opt.output;
  if (base.size() > 7 && base.compare(base.size() - 7, 7, ".folded") == 0) base.resize(base.size() - 7);
  base += ".undelivered.folded";
  bool wrote = false;
  for (int m = 0; m < nm; ++m) {
    std::string path = output_path(base, s_.metrics[static_cast<std::size_t>(m)], m == 0);
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) continue;
    write_folded(t, s_.names, [&](uint32_t i) { return left[static_cast<std::size_t>(i) * nm + m]; },
                 [&](const std::string& line) { std::fwrite(line.data(), 1, line.size(), f); });
    wrote = std::fclose(f) == 0 || wrote;
  }
  if (wrote) sum.fallback_file = base;
}

}  // namespace lfc
