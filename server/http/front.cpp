// The front loop (see front.hpp for why).
//
// Threads and what they share (all under Impl::mu, except as noted):
//  - the accept thread (httplib's listen loop) adopts sockets: counts, conns_;
//  - the loop thread reads request heads of WAITING connections. A waiting
//    connection is armed in epoll with EPOLLONESHOT, so at most one event for
//    it is in flight, and only the loop thread touches its buffer;
//  - workers serve BUSY connections, one request each, then hand the
//    connection back (re-armed) or close it. A busy connection is in no epoll
//    set, so only its worker touches its buffer.
// A connection is in exactly one state; its fd is closed only under mu, by
// whoever erases it from conns_, after which no one holds its pointer.
#include "http/front.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "http/framing.hpp"
#include "http/front_conn.hpp"
#include "http/guard.hpp"
#include "http/refusal_log.hpp"

namespace lfs {

FrontOptions FrontOptions::from(const Config& c) {
  FrontOptions o;
  o.workers = static_cast<std::size_t>(c.threads);
  o.header_timeout_seconds = c.header_timeout_seconds;
  o.keep_alive_seconds = c.keep_alive_seconds;
  o.request_timeout_seconds = c.request_timeout_seconds;
  o.max_header_bytes = c.max_header_bytes;
  o.max_headers = c.max_headers;
  o.max_connections = c.max_connections;
  o.max_client_connections = c.max_client_connections;
  o.max_client_workers = c.max_client_workers;
  o.max_body = c.max_body;
  o.trusted_proxies = c.trusted_proxies;
  o.min_body_rate = c.min_body_rate;
  return o;
}

namespace {

// The stream of the request a worker thread serves (take_buffered_body).
thread_local ConnStream* t_stream = nullptr;

struct InlineQueue : httplib::TaskQueue {
  explicit InlineQueue(std::function<void()> on_shutdown) : on_shutdown_(std::move(on_shutdown)) {}
  void enqueue(std::function<void()> fn) override { fn(); }  // adopt() only registers the socket
  void shutdown() override { on_shutdown_(); }
  std::function<void()> on_shutdown_;
};

}  // namespace

struct FrontServer::Impl {
  FrontServer& svr;
  FrontOptions opt;
  int ep = -1;
  std::mutex mu;
  std::condition_variable work_cv;
  std::unordered_map<int, std::unique_ptr<Conn>> conns;  // every open connection, by fd
  std::map<std::string, std::size_t> per_client;
  std::deque<Conn*> queue;  // busy connections whose head is complete, waiting for a worker
  std::size_t serving = 0;  // busy connections being served by a worker
  // Workers serving each client address: at most client_cap() (a quarter of
  // them by default), so one client trickling bodies cannot hold every worker.
  std::map<std::string, std::size_t> serving_by_client;
  RefusalLog refusals;         // under mu: refusals in rate-limited summaries
  std::size_t body_bytes = 0;  // under mu: the loop's body budget in use (Conn::reserved)
  std::size_t bodies = 0;      // under mu: connections whose body the loop is reading
  bool started = false, stopping = false;
  std::thread loop_thread;
  std::vector<std::thread> workers;

  Impl(FrontServer& s, const FrontOptions& o) : svr(s), opt(o) {}

  void start() {
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) throw std::runtime_error(std::string("epoll_create1: ") + std::strerror(errno));
    started = true;
    loop_thread = std::thread([this] { loop(); });
    for (std::size_t i = 0; i < opt.workers; ++i) workers.emplace_back([this] { work(); });
  }

  // Under mu. Closes and forgets `c`.
  void erase(Conn* c) {
    end_body(c);
    auto it = per_client.find(c->peer);
    if (it != per_client.end() && --it->second == 0) per_client.erase(it);
    ::close(c->fd);  // also leaves the epoll set
    conns.erase(c->fd);
  }

  void adopt(int fd) {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    int port = 0;
    std::string peer;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) peer = address_text(a, port);
    std::lock_guard<std::mutex> lock(mu);
    if (stopping || ep < 0) {
      ::close(fd);
      return;
    }
    // A trusted proxy's connections carry many clients: only the global cap.
    const bool proxy = in_ranges(peer, opt.trusted_proxies);
    std::size_t& mine = per_client[peer];
    if (conns.size() >= opt.max_connections || (!proxy && mine >= opt.max_client_connections)) {
      const bool all = conns.size() >= opt.max_connections;
      if (mine == 0) per_client.erase(peer);
      log_refusal(peer, all ? "connection refused: too many connections"
                            : "connection refused: too many from this client");
      refuse(fd, 503, "Service Unavailable",
             all ? "too many open connections (at most " + std::to_string(opt.max_connections) +
                       ", --max-connections)"
                 : "too many connections from " + peer + " (at most " +
                       std::to_string(opt.max_client_connections) + ", --max-client-connections)");
      ::close(fd);
      return;
    }
    ++mine;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    int yes = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->peer = peer;
    c->client = peer;
    c->peer_port = port;
    c->deadline = Clock::now() + std::chrono::seconds(opt.header_timeout_seconds);
    Conn* raw = c.get();
    conns.emplace(fd, std::move(c));
    arm(raw, EPOLL_CTL_ADD);
  }

  // Under mu (or before anyone else can see c).
  void arm(Conn* c, int op) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
    ev.data.ptr = c;
    if (epoll_ctl(ep, op, c->fd, &ev) != 0) erase(c);
  }

  // Loop thread, for a waiting connection that became readable.
  void on_readable(Conn* c) {
    char tmp[16384];
    bool eof = false;
    if (c->draining) return drain(c);
    for (;;) {
      ssize_t r = ::recv(c->fd, tmp, sizeof tmp, 0);
      if (r > 0) {
        if (!c->head_started) {
          c->head_started = true;
          c->deadline = Clock::now() + std::chrono::seconds(opt.header_timeout_seconds);
        }
        c->buf.append(tmp, static_cast<std::size_t>(r));
        if (c->buf.size() > read_cap(*c) + sizeof tmp) break;  // judged below
        continue;
      }
      if (r == 0)
        eof = true;
      else if (errno == EINTR)
        continue;
      else if (errno != EAGAIN && errno != EWOULDBLOCK)
        eof = true;
      break;
    }
    std::lock_guard<std::mutex> lock(mu);
    if (!judge(c) && eof) erase(c);
  }

  // Loop thread: how far a waiting connection's buffer may grow in one read.
  std::size_t read_cap(const Conn& c) const {
    if (!c.in_body) return c.pos + opt.max_header_bytes;
    return c.chunked ? c.body_at + 2 * opt.max_body + 65536 : c.body_end;
  }

  // Under mu, for a waiting connection: dispatches it when its request
  // (head and body) is complete, refuses it when the head breaks a limit,
  // else re-arms it. Returns false when it is still waiting for bytes.
  bool judge(Conn* c) {
    if (c->in_body) return body_step(c);
    std::size_t end = head_end(*c);
    std::size_t have = (end == std::string::npos ? c->buf.size() : end) - c->pos;
    if (have > opt.max_header_bytes) {
      refuse(c->fd, 431, "Request Header Fields Too Large",
             "request head larger than " + std::to_string(opt.max_header_bytes) +
                 " bytes (--max-header-bytes)");
      spdlog::warn("{}: request head over {} bytes: closed", c->peer, opt.max_header_bytes);
      erase(c);
      return true;
    }
    if (end == std::string::npos) {
      if (c->pos > 0 && c->pos == c->buf.size()) {
        c->buf.clear();
        c->pos = 0;
      }
      arm(c, EPOLL_CTL_MOD);
      return false;
    }
    if (std::size_t n = header_lines(*c, end); n > opt.max_headers) {
      refuse(c->fd, 431, "Request Header Fields Too Large",
             std::to_string(n) + " header lines (at most " + std::to_string(opt.max_headers) +
                 ", --max-headers)");
      spdlog::warn("{}: {} header lines: closed", c->peer, n);
      erase(c);
      return true;
    }
    // Framing (framing.hpp): refused from the head when ambiguous or too
    // large; a head that declares no body gets "Content-Length: 0", so
    // httplib does not read until the client closes (RFC 9112 6.3).
    const Framing f =
        judge_framing(std::string_view(c->buf).substr(c->pos, end - c->pos), opt.max_body);
    if (f.status) {
      refuse_framing(c, f);
      return true;
    }
    if (f.empty_body) c->buf.insert(end - 2, "Content-Length: 0\r\n");
    c->client = client_of(std::string_view(c->buf).substr(c->pos, end - c->pos), c->peer,
                          opt.trusted_proxies);
    if (!f.empty_body && begin_body(c, end, f)) return body_step(c);
    dispatch(c);
    return true;
  }

  // Under mu: hands a complete request to a worker.
  void dispatch(Conn* c) {
    c->busy = true;
    c->deadline = Clock::now() + std::chrono::seconds(opt.request_timeout_seconds);
    queue.push_back(c);
    work_cv.notify_one();
  }

  // ---- the body, read in the loop before a worker sees the request ------
  // (issue 31: a body trickled one byte a second held a worker for the whole
  // request timeout; 16 of them held them all). Bounded in all by
  // body_budget(): past it a body is read by its worker, as before.

  std::size_t body_budget() const { return 4 * opt.max_body; }

  // Under mu: starts reading the body of the head that ends at `end`; false
  // when the budget cannot hold a declared length (a worker reads it).
  bool begin_body(Conn* c, std::size_t end, const Framing& f) {
    if (!f.chunked && (f.length == 0 || body_bytes + f.length > body_budget())) return false;
    if (take_expect_continue(c->buf, c->pos, end)) {  // the client waits for it to send
      static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      (void)!::send(c->fd, kContinue, sizeof kContinue - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    c->in_body = true;
    ++bodies;
    c->chunked = f.chunked;
    c->body_at = end;
    c->body_end = end + f.length;
    c->chunks = ChunkScan{};
    c->reserved = f.length;
    c->buf.reserve(c->body_end);  // no doubling past the declared size, no copy while it grows
    body_bytes += f.length;
    c->body_since = Clock::now();
    c->deadline = c->body_since + std::chrono::seconds(opt.request_timeout_seconds);
    return true;
  }

  // Under mu: gives back the body's share of the budget.
  void end_body(Conn* c) {
    if (!c->in_body) return;
    body_bytes -= c->reserved;
    c->reserved = 0;
    c->in_body = false;
    --bodies;
  }

  // Under mu: the body so far; dispatched when complete (or a chunked one
  // outgrew the budget), refused when its chunking is malformed.
  bool body_step(Conn* c) {
    bool ready = c->buf.size() >= c->body_end;
    if (c->chunked) {
      c->chunks.feed(std::string_view(c->buf).substr(c->body_at), opt.max_body);
      if (c->chunks.status) {
        Framing f;
        f.status = c->chunks.status;
        f.message = c->chunks.message;
        end_body(c);
        refuse_framing(c, f);
        return true;
      }
      const std::size_t have = c->buf.size() - c->body_at;
      body_bytes += have - c->reserved;
      c->reserved = have;
      ready = c->chunks.done || body_bytes > body_budget();
    }
    if (!ready) {
      arm(c, EPOLL_CTL_MOD);
      return false;
    }
    end_body(c);
    dispatch(c);
    return true;
  }

  // Under mu: a body past its deadline, or arriving slower than
  // --min-body-rate after the first 10 s; true when it was refused.
  bool body_too_slow(Conn* c, Clock::time_point now) {
    const double secs = std::chrono::duration<double>(now - c->body_since).count();
    const double have = static_cast<double>(c->buf.size() - c->body_at);
    const bool late = c->deadline <= now;
    if (!late && (secs < 10 || opt.min_body_rate == 0 || have >= opt.min_body_rate * secs))
      return false;
    const std::string why =
        late ? "request body not complete within " + std::to_string(opt.request_timeout_seconds) +
                   " s (--request-timeout)"
             : "request body arriving slower than " + std::to_string(opt.min_body_rate) +
                   " bytes/s (--min-body-rate)";
    refuse(c->fd, 408, "Request Timeout", why);
    log_refusal(c->peer, why + ": closed");
    erase(c);
    return true;
  }

  // Loop thread, for a connection refused from its head (judge): what the
  // client still sends (the body it declared) is read and dropped until it
  // stops, 4 MiB or the deadline, then the socket is closed. Closing at once
  // with unread bytes makes the kernel send a reset, which can destroy the
  // refusal before the client reads it (RFC 9112 9.6, lingering close).
  void drain(Conn* c) {
    char tmp[16384];
    bool done = false;
    for (;;) {
      ssize_t r = ::recv(c->fd, tmp, sizeof tmp, 0);
      if (r > 0) {
        c->pos += static_cast<std::size_t>(r);  // counts what was dropped
        if (c->pos > (4u << 20)) done = true;
        if (!done) continue;
      } else if (r < 0 && errno == EINTR) {
        continue;
      } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      }
      done = true;
      break;
    }
    std::lock_guard<std::mutex> lock(mu);
    if (done)
      erase(c);
    else
      arm(c, EPOLL_CTL_MOD);
  }

  // Under mu: answers `f`'s refusal and starts the lingering close (drain).
  void refuse_framing(Conn* c, const Framing& f) {
    refuse(c->fd, f.status, f.status == 413 ? "Payload Too Large" : "Bad Request", f.message);
    spdlog::info("{}: {} from the request head: {}", c->peer, f.status, f.message);
    ::shutdown(c->fd, SHUT_WR);
    c->draining = true;
    c->buf.clear();
    c->pos = 0;
    c->deadline = Clock::now() + std::chrono::seconds(2);
    arm(c, EPOLL_CTL_MOD);
  }

  // Under mu: logs a refusal, or counts it for the next summary line.
  void log_refusal(const std::string& peer, const std::string& reason) {
    log_lines(refusals.refused(peer, reason, mono_ns()));
  }
  static void log_lines(const std::string& lines) {
    std::size_t from = 0;
    while (from < lines.size()) {
      std::size_t nl = lines.find('\n', from);
      if (nl == std::string::npos) nl = lines.size();
      spdlog::warn("{}", lines.substr(from, nl - from));
      from = nl + 1;
    }
  }
  static int64_t mono_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
        .count();
  }

  // Under mu: closes waiting connections past their deadline; the refusals'
  // summary line when one is due.
  void sweep() {
    log_lines(refusals.tick(mono_ns()));
    auto now = Clock::now();
    std::vector<Conn*> late;
    std::vector<Conn*> reading;  // a body in flight is finished at a stop too
    for (auto& [fd, c] : conns) {
      if (c->busy) continue;
      if (c->in_body)
        reading.push_back(c.get());
      else if (c->deadline <= now || stopping)
        late.push_back(c.get());
    }
    for (Conn* c : reading) body_too_slow(c, now);
    for (Conn* c : late) {
      if (c->head_started && !c->draining && !stopping) {
        refuse(c->fd, 408, "Request Timeout",
               "request head not received within " + std::to_string(opt.header_timeout_seconds) +
                   " s (--header-timeout)");
        log_refusal(c->peer, "request head not complete after " +
                                 std::to_string(opt.header_timeout_seconds) + " s: closed");
      }
      erase(c);
    }
  }

  void loop() {
    epoll_event evs[64];
    auto next_sweep = Clock::now();
    for (;;) {
      int n = epoll_wait(ep, evs, 64, 100);
      for (int i = 0; i < n; ++i) on_readable(static_cast<Conn*>(evs[i].data.ptr));
      if (Clock::now() >= next_sweep) {
        std::lock_guard<std::mutex> lock(mu);
        sweep();
        next_sweep = Clock::now() + std::chrono::milliseconds(100);
        if (stopping && bodies == 0) return;
      }
    }
  }

  std::size_t client_cap() const {
    return opt.max_client_workers ? opt.max_client_workers
                                  : std::max<std::size_t>(1, opt.workers / 4);
  }

  // Under mu: the first queued connection whose client is under its share.
  std::deque<Conn*>::iterator next_eligible() {
    return std::find_if(queue.begin(), queue.end(), [&](Conn* c) {
      auto it = serving_by_client.find(c->client);
      return it == serving_by_client.end() || it->second < client_cap();
    });
  }

  void work() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      work_cv.wait(lock, [&] { return stopping || next_eligible() != queue.end(); });
      auto it = next_eligible();
      if (it == queue.end()) {
        if (stopping && queue.empty() && bodies == 0) return;
        if (stopping) {
          work_cv.wait_for(lock, std::chrono::milliseconds(50));
          continue;
        }
        continue;
      }
      Conn* c = *it;
      queue.erase(it);
      ++serving;
      ++serving_by_client[c->client];
      const bool last = stopping;
      lock.unlock();
      bool keep = serve(*c, last);
      lock.lock();
      --serving;
      if (--serving_by_client[c->client] == 0) serving_by_client.erase(c->client);
      work_cv.notify_all();  // a connection held back by its client's share may go now
      if (!keep || stopping) {
        erase(c);
      } else {
        c->busy = false;
        c->head_started = c->pos < c->buf.size();
        c->deadline =
            Clock::now() + std::chrono::seconds(c->head_started ? opt.header_timeout_seconds
                                                                : opt.keep_alive_seconds);
        judge(c);  // a pipelined request already in the buffer goes straight back to the queue
      }
    }
  }

  // Worker: one request on `c`. True when the connection may carry another.
  bool serve(Conn& c, bool last) {
    ConnStream strm(c, c.deadline);
    bool closed = false;
    t_stream = &strm;
    bool ok = svr.process_request(strm, last, closed, nullptr);
    t_stream = nullptr;
    if (strm.timed_out())
      spdlog::warn("{}: request not done within {} s (--request-timeout): closed", c.peer,
                   opt.request_timeout_seconds);
    return ok && !closed && !last && !strm.timed_out();
  }

  void shutdown() {
    if (!started) return;
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;  // the loop closes waiting connections; queued ones are still served
      work_cv.notify_all();
    }
    loop_thread.join();
    for (auto& w : workers) w.join();
    std::lock_guard<std::mutex> lock(mu);
    std::vector<Conn*> rest;
    for (auto& [fd, c] : conns) rest.push_back(c.get());
    for (Conn* c : rest) erase(c);
    ::close(ep);
    ep = -1;
    started = false;
  }
};

FrontServer::FrontServer(const FrontOptions& opts) : impl_(std::make_unique<Impl>(*this, opts)) {
  new_task_queue = [this] {
    impl_->start();
    return new InlineQueue([this] { impl_->shutdown(); });
  };
}

FrontServer::~FrontServer() {
  impl_->shutdown();
}

bool take_buffered_body(std::size_t length, std::string& out) {
  return t_stream != nullptr && t_stream->take(length, out);
}

bool FrontServer::process_and_close_socket(socket_t sock) {
  impl_->adopt(sock);
  return true;
}

}  // namespace lfs
