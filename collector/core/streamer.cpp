// The streamer (see streamer.hpp). Its HTTP client (luaflame/http.hpp, which
// loads the transport) is used here only, on the streamer's own thread, but
// for stop() at the final wait.
#include "core/streamer.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "core/out_formats.hpp"
#include "core/profile.hpp"
#include "core/text.hpp"
#include "luaflame/http.hpp"
#include "luaflame/wire.hpp"

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

// JSON text of `j`: bytes that are not UTF-8 become U+FFFD instead of an
// exception (every string put in `j` went through visible_utf8 already).
std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Clock::time_point after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// The session's exit handler (its at_process_exit), see Streamer::set_exit_handler.
std::atomic<void (*)()> g_exit_handler{nullptr};
std::once_flag g_exit_rearmed;

}  // namespace

// Contract: exit() runs atexit handlers and static destructors in the reverse order of their
// registration. The session registers its handler (which finishes the stream) at the first
// start(); cpp-httplib (in the transport) builds the regex that parses a response's status line (a
// function-local static in read_response_line) at the first answer, later, so exit() destroyed it
// before the handler ran and every request of the final flush failed on a valid answer ("Read
// error", and once a crash): a run ended by os.exit() lost its last chunks. Registering the handler
// again once an answer has been parsed makes it run before that destructor. It may race with
// nothing that matters: std::atexit is thread-safe, a registration made while exit() already runs
// handlers is run too, and the handler does nothing once the session is stopped (it runs twice).
void Streamer::set_exit_handler(void (*fn)()) {
  g_exit_handler.store(fn);
}

Streamer::Streamer(Profile& s) : s_(s), uuid_(make_uuid()) {
  auto cli = std::make_unique<lfhttp::Client>();
  std::string why;
  if (!cli->open(s_.opt.server, why)) {
    error_ = "cannot stream to " + s_.opt.server + ": " + why;
    return;
  }
  cli->timeouts(1, 2, 2);
  if (!s_.opt.token.empty()) cli->header("Authorization", "Bearer " + s_.opt.token);
  cli_ = std::move(cli);
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
  last_until_ = s_.acct.start_unix;
  th_ = std::thread([this]() noexcept { run(); });
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
  // While the server answers (slowly, perhaps), a request may take its own timeouts
  // (connection 1 s, then read/write): the final wait does not cut it before that. A server
  // that stopped answering gets no such time: the final wait's bound holds.
  inflight_end_ns_.store(answering_ ? std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          after(1.0 + timeout_s_).time_since_epoch())
                                          .count()
                                    : 0);
  if (!cli_) {  // the transport failed to load or open: error_ says why
    status = 0;
    return false;
  }
  const lfhttp::Answer res = cli_->post(path, body, type);
  answering_ = res.status != 0;
  if (answering_)  // httplib's response parser exists now: the exit handler must run before its end
    std::call_once(g_exit_rearmed, [] {
      if (auto fn = g_exit_handler.load()) std::atexit(fn);
    });
  if (!answering_) {
    error_ = "cannot reach " + s_.opt.server + ": " + res.error;
    status = 0;
    return false;
  }
  status = res.status;
  answer = res.body;
  if (status >= 200 && status < 300) return true;
  error_ = "POST " + path + " answered " + std::to_string(status) + ": " + answer.substr(0, 200);
  // A refusal (4xx other than timeouts and rate limits) will not change on retry. Said
  // now, not only in the summary at exit: a server process (nginx) may run for days.
  if (status >= 400 && status < 500 && status != 408 && status != 429) {
    given_up_ = true;
    std::fprintf(stderr, "luaflame: streaming to %s stopped: %s\n", s_.opt.server.c_str(),
                 visible_utf8(error_).c_str());
  }
  return false;
}

// The run's name and tags come from file names, --name, --tag and the
// environment: any bytes. JSON holds UTF-8 only (nlohmann's dump throws on
// anything else, which aborted the program), so bytes that are not UTF-8 go
// as visible \xNN text (visible_utf8, core/text.hpp); then they are made to pass
// the server's rule for names and tags (lfw::fit_text, fit_tag_key: control
// characters as \xNN, lengths cut, a key's other bytes as '_'), which refused
// such a run with 400 and left its profile in the fallback file.
bool Streamer::create_run() {
  nlohmann::json j;
  j["stream"] = uuid_;
  std::string name = lfw::fit_text(visible_utf8(s_.opt.name), lfw::kMaxNameBytes);
  j["name"] = name.empty() ? std::string("lua") : name;
  nlohmann::json tags = nlohmann::json::object();
  for (const auto& [k, v] : s_.opt.tags)
    tags[lfw::fit_tag_key(visible_utf8(k))] =
        lfw::fit_text(visible_utf8(v), lfw::kMaxTagValueBytes);
  j["tags"] = std::move(tags);
  j["metrics"] = s_.metrics;
  j["started_ns"] = s_.acct.start_unix;
  if (s_.opt.sample) j["hz"] = s_.opt.hz;
  int status = 0;
  std::string answer;
  if (!post("/api/streams", dump_json(j), "application/json", status, answer)) return false;
  // Whatever the server answers (garbage, null or wrongly typed fields), no
  // exception: an answer without an integer id is a refusal.
  auto r = nlohmann::json::parse(answer, nullptr, false);
  if (r.is_discarded() || !r.is_object() || !r.contains("id") || !r["id"].is_number_integer()) {
    error_ = "POST /api/streams: unexpected answer " + visible_utf8(answer.substr(0, 200));
    given_up_ = true;
    return false;
  }
  run_id_ = r["id"].get<long long>();
  auto url = r.find("url");
  run_url_ = url != r.end() && url->is_string() ? url->get<std::string>() : std::string();
  if (!run_url_.empty() && run_url_[0] == '/') run_url_ = s_.opt.server + run_url_;
  // The server's deepest stack (servers that do not say take kDefaultMaxDepth).
  auto lim = r.find("limits");
  if (lim != r.end() && lim->is_object() && lim->contains("max_depth") &&
      (*lim)["max_depth"].is_number_unsigned()) {
    const uint64_t d = (*lim)["max_depth"].get<uint64_t>();
    if (d >= 2 && d <= (1u << 20)) max_depth_ = static_cast<uint32_t>(d);
  }
  return true;
}

// Timeouts that grow with the request: 2 s, plus 1 s per 64 KiB of body
// (a loaded server ingests a big chunk more slowly than a small one: on a
// 2-core machine at load 15 a 16k-node chunk, ~400 KB, took over 3 s).
double Streamer::timeout_for(std::size_t body_bytes) {
  return 2.0 + static_cast<double>(body_bytes) / (64.0 * 1024);
}

void Streamer::set_timeouts(std::size_t body_bytes) {
  double secs = timeout_for(body_bytes);
  timeout_s_ = secs;
  if (cli_) cli_->timeouts(1, secs, secs);
}

std::size_t Streamer::queued_bytes() const {
  std::size_t b = 0;
  for (const auto& p : queue_) b += p.body.size();
  return b;
}

bool Streamer::send_chunk() {
  if (run_id_ < 0 && !create_run()) return false;
  int status = 0;
  std::string answer;
  set_timeouts(queue_.front().body.size());
  bool ok = post("/api/runs/" + std::to_string(run_id_) + "/chunks", queue_.front().body,
                 "text/plain", status, answer);
  set_timeouts(0);
  if (!ok) return false;
  bytes_sent_ += queue_.front().body.size();
  queue_.pop_front();
  ++chunks_sent_;
  return true;
}

// Runs `body` on one of the streamer's threads. Nothing may leave a
// thread's function (an exception there is std::terminate, which aborts the
// program): a fault ends streaming, and finish() writes what was not sent
// locally.
template <class Body>
void Streamer::guarded(Body&& body) noexcept {
  try {
    body();
  } catch (const std::exception& e) {
    error_ = std::string("streaming stopped: ") + e.what();
    given_up_ = true;
  } catch (...) {
    error_ = "streaming stopped: unknown error";
    given_up_ = true;
  }
}

void Streamer::run() noexcept {
  guarded([this] { stream_loop(); });
}

void Streamer::stream_loop() {
  auto next_flush = after(s_.opt.flush_interval);
  auto next_try = Clock::now();
  for (;;) {
    bool stopping, flush;
    {
      std::unique_lock<std::mutex> lk(mu_);
      auto until = !queue_.empty() ? std::min(next_flush, next_try) : next_flush;
      cv_.wait_until(lk, until, [&] { return stop_ || flush_req_; });
      stopping = stop_;
      flush = flush_req_ || Clock::now() >= next_flush;
      flush_req_ = false;
    }
    if (stopping) return;
    if (given_up_) continue;
    if (queue_.empty() && flush) {
      build_chunks(unix_now_ns());
      next_flush = after(s_.opt.flush_interval);
    }
    // Every chunk of the delta in a row, unless stop is asked (finish sends the rest).
    while (!queue_.empty() && Clock::now() >= next_try) {
      if (send_chunk()) {
        backoff_ = 0.25;
      } else {
        next_try = after(backoff_);
        backoff_ = std::min(backoff_ * 2, 30.0);
      }
      std::lock_guard<std::mutex> lk(mu_);
      if (stop_) return;
    }
  }
}

// The last chunks and the finish request, on finish()'s helper thread:
// sends while the bounded wait allows (`allowed` seconds from `t0`, grown
// while the server answers), then marks the run finished.
void Streamer::deliver_rest(const Summary& sum, Clock::time_point t0,
                            std::atomic<double>& allowed) {
  auto deadline = [&] {
    return t0 + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(allowed.load()));
  };
  double wait = 0.1;
  bool built = false;
  while (!given_up_) {
    if (queue_.empty()) {
      if (built) break;
      build_chunks(unix_now_ns());
      built = true;
      // More to send, more time: one second per MiB, within the cap.
      allowed.store(
          std::min(kFinishMaxSeconds,
                   std::max(allowed.load(),
                            kFinishSeconds + static_cast<double>(queued_bytes()) / (1 << 20))));
      if (queue_.empty()) break;
    }
    if (send_chunk()) {
      // A server that answers keeps the wait going (it is slow, not
      // stalled): time for the next chunk's own timeout, within the cap.
      double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
      double next = queue_.empty() ? 0 : timeout_for(queue_.front().body.size());
      allowed.store(std::min(kFinishMaxSeconds, std::max(allowed.load(), elapsed + next + 0.5)));
      continue;
    }
    if (given_up_ || aborted_.load() || after(wait) >= deadline()) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    wait *= 2;
  }
  // The server closes the run over everything it was sent: the finish
  // request's timeout (and the wait for it) grow with that too.
  const double finish_secs = timeout_for(bytes_sent_ / 8);
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  allowed.store(std::min(kFinishMaxSeconds, std::max(allowed.load(), elapsed + finish_secs + 0.5)));
  set_timeouts(bytes_sent_ / 8);
  wait = 0.1;
  while (!given_up_ && queue_.empty() && !aborted_.load() && (run_id_ >= 0 || create_run())) {
    if ((finished_ = finish_run(sum)) || given_up_ || after(wait) >= deadline()) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    wait *= 2;
  }
  if (finished_ && s_.opt.sources) send_sources();
}

void Streamer::finish(Summary& sum) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  // The last chunks and the finish call, on a thread of their own so the
  // bounded wait is the only thing the Lua thread sees: past the deadline
  // the request in flight is cut (a server that accepts and never answers).
  const auto t0 = Clock::now();
  std::atomic<double> allowed{kFinishSeconds};
  auto deadline = [&] {
    return t0 + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(allowed.load()));
  };
  std::atomic<bool> done{false};
  std::thread last([&]() noexcept {
    if (th_.joinable()) th_.join();
    guarded([&] { deliver_rest(sum, t0, allowed); });
    done.store(true);
  });
  // A request to a server that answers is not cut before its own timeout (within
  // kFinishMaxSeconds): the wait used to count from stop() only, so a chunk sent late in it
  // (after joining a slow request of the streaming thread) was cut while the server was still
  // answering ("Read error"), and the run stayed live with its last chunks missing.
  auto wait_until = [&] {
    const auto inflight = Clock::time_point(std::chrono::nanoseconds(inflight_end_ns_.load()));
    const auto cap = t0 + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(kFinishMaxSeconds));
    return std::min(cap, std::max(deadline(), inflight));
  };
  while (!done.load() && Clock::now() < wait_until())
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (!done.load()) {
    aborted_.store(true);
    if (cli_) cli_->stop();
  }
  last.join();
  sum.chunks_sent = chunks_sent_;
  sum.run_url = run_url_;
  if (!queue_.empty() || given_up_ || run_id_ < 0) {
    sum.stream_error = error_.empty() ? "not delivered" : error_;
    write_fallback(sum);
  } else if (!finished_) {
    // Every chunk arrived, but the run stays "live" on the server.
    sum.stream_error =
        "the run was not marked finished on the server: " + (error_.empty() ? "no answer" : error_);
  }
}

bool Streamer::finish_run(const Summary& sum) {
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
  // The profiler's own cost, for the run page: samples that fell in
  // luaflame's hook (in the run only when profiler_shown, --show-profiler).
  st["samples_in_hooks"] = sum.samples_in_hooks;
  st["profiler_shown"] = sum.profiler_shown;
  st["nodes"] = sum.nodes;
  nlohmann::json j;
  j["stats"] = st;
  int status = 0;
  std::string answer;
  return post("/api/runs/" + std::to_string(run_id_) + "/finish", dump_json(j), "application/json",
              status, answer);
}

void Streamer::send_sources() {
  std::string body = s_.source_files.json();
  if (body.empty()) return;
  int status = 0;
  std::string answer;
  if (!post("/api/runs/" + std::to_string(run_id_) + "/sources", body, "application/json", status,
            answer) ||
      status != 200)
    error_ = "sources not stored (" + std::to_string(status) + ")";
}

// Undelivered = everything not yet put in a chunk, plus the chunks not acknowledged.
// Written as folded files (bounded like every output file).
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
  for (const Pending& p : queue_)
    for (const auto& [node, vals] : p.deltas)
      for (int m = 0; m < nm; ++m)
        left[static_cast<std::size_t>(node) * nm + m] += vals[static_cast<std::size_t>(m)];
  std::string base =
      s_.opt.output.empty() ? "luaflame-" + std::to_string(getpid()) + ".folded" : s_.opt.output;
  for (std::string_view ext : {".folded", ".svg", ".json", ".pb.gz"})
    if (base.size() > ext.size() && base.compare(base.size() - ext.size(), ext.size(), ext) == 0)
      base.resize(base.size() - ext.size());
  base += ".undelivered.folded";
  const uint64_t limit = output_limit(base, static_cast<uint64_t>(s_.opt.max_output));
  OutTree out = snapshot(
      t, s_.names, [&](uint32_t i, int m) { return left[static_cast<std::size_t>(i) * nm + m]; },
      [&](std::size_t len, std::string_view name) {
        return node_cost(Format::folded, nm, len, name);
      },
      limit);
  bool wrote = false;
  for (int m = 0; m < nm; ++m) {
    std::string path = output_path(base, s_.metrics[static_cast<std::size_t>(m)], m == 0);
    OutFile f(path, limit);
    if (f.ok()) write_folded_file(out, m, f);
    if (f.commit())
      wrote = true;
    else
      sum.file_errors.push_back(path + ": " + f.error());
  }
  if (wrote) sum.fallback_file = base;
}

}  // namespace lfc
