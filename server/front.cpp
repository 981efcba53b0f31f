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
#include "front.hpp"

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

#include "framing.hpp"
#include "guard.hpp"
#include "refusal_log.hpp"

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
  return o;
}

namespace {

using Clock = std::chrono::steady_clock;

struct Conn {
  int fd = -1;
  std::string peer;
  int peer_port = 0;
  std::string client;   // peer, or the client its trusted proxy names (client_addr.hpp)
  std::string buf;      // received bytes not yet consumed by httplib
  std::size_t pos = 0;  // consumed prefix of buf
  bool busy = false;
  bool head_started = false;   // a byte of the next request has arrived
  bool draining = false;       // refused from its head: the rest is read and dropped, then closed
  Clock::time_point deadline;  // waiting: head or idle deadline; busy: request deadline
};

// Where the head ends in buf (after pos), or npos. Leading empty lines are
// allowed before a request line (RFC 9112 2.2).
std::size_t head_end(const Conn& c) {
  std::size_t p = c.pos;
  while (p + 1 < c.buf.size() && c.buf[p] == '\r' && c.buf[p + 1] == '\n') p += 2;
  std::size_t e = c.buf.find("\r\n\r\n", p);
  return e == std::string::npos ? e : e + 4;
}

std::size_t header_lines(const Conn& c, std::size_t end) {
  std::size_t n = 0;
  for (std::size_t i = c.pos; i + 1 < end; ++i)
    if (c.buf[i] == '\r' && c.buf[i + 1] == '\n') ++n;
  return n >= 2 ? n - 2 : 0;  // minus the request line and the empty line
}

// A refusal sent before httplib sees the request; best effort (non-blocking).
void refuse(int fd, int status, const char* reason, const std::string& message) {
  std::string body = "{\"error\":\"" + message + "\"}\n";
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                    "\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff"
                    "\r\nContent-Security-Policy: " +
                    content_security_policy("application/json") +
                    "\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\n\r\n" + body;
  (void)!::send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// httplib's view of a busy connection: bytes the front loop already read
// come first, then the socket, every wait bounded by the request deadline.
class ConnStream : public httplib::Stream {
 public:
  ConnStream(Conn& c, Clock::time_point deadline) : c_(c), deadline_(deadline) {}
  bool timed_out() const { return timed_out_; }

  bool is_readable() const override { return c_.pos < c_.buf.size() || wait(POLLIN); }
  bool is_writable() const override { return wait(POLLOUT); }

  ssize_t read(char* ptr, size_t size) override {
    if (c_.pos < c_.buf.size()) {
      std::size_t n = std::min(size, c_.buf.size() - c_.pos);
      std::memcpy(ptr, c_.buf.data() + c_.pos, n);
      c_.pos += n;
      if (c_.pos == c_.buf.size()) {
        c_.buf.clear();
        c_.pos = 0;
      }
      return static_cast<ssize_t>(n);
    }
    for (;;) {
      ssize_t r = ::recv(c_.fd, ptr, size, 0);
      if (r >= 0) return r;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      if (!wait(POLLIN)) return -1;
    }
  }

  ssize_t write(const char* ptr, size_t size) override {
    std::size_t done = 0;
    while (done < size) {
      ssize_t w = ::send(c_.fd, ptr + done, size - done, MSG_NOSIGNAL);
      if (w > 0) {
        done += static_cast<std::size_t>(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait(POLLOUT)) continue;
      return -1;
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = c_.client;
    port = c_.peer_port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    ip.clear();
    port = 0;
    if (getsockname(c_.fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return;
    char text[INET6_ADDRSTRLEN] = {0};
    if (a.ss_family == AF_INET) {
      auto* in = reinterpret_cast<sockaddr_in*>(&a);
      inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
      port = ntohs(in->sin_port);
    } else if (a.ss_family == AF_INET6) {
      auto* in = reinterpret_cast<sockaddr_in6*>(&a);
      inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof text);
      port = ntohs(in->sin6_port);
    }
    ip = text;
  }
  socket_t socket() const override { return c_.fd; }

 private:
  // Waits for `events` until the request deadline; false on timeout or error.
  bool wait(short events) const {
    for (;;) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
      if (left <= 0) {
        timed_out_ = true;
        return false;
      }
      pollfd p{c_.fd, events, 0};
      int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
      if (r > 0) return (p.revents & (events | POLLHUP)) != 0 && !(p.revents & POLLNVAL);
      if (r < 0 && errno != EINTR) return false;
    }
  }
  Conn& c_;
  Clock::time_point deadline_;
  mutable bool timed_out_ = false;
};

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
  RefusalLog refusals;  // under mu: refusals in rate-limited summaries
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
    auto it = per_client.find(c->peer);
    if (it != per_client.end() && --it->second == 0) per_client.erase(it);
    ::close(c->fd);  // also leaves the epoll set
    conns.erase(c->fd);
  }

  void adopt(int fd) {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    char text[INET6_ADDRSTRLEN] = {0};
    int port = 0;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      if (a.ss_family == AF_INET) {
        auto* in = reinterpret_cast<sockaddr_in*>(&a);
        inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
        port = ntohs(in->sin_port);
      } else if (a.ss_family == AF_INET6) {
        auto* in = reinterpret_cast<sockaddr_in6*>(&a);
        inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof text);
        port = ntohs(in->sin6_port);
      }
    }
    std::string peer = text;
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
        if (c->buf.size() - c->pos > opt.max_header_bytes + sizeof tmp) break;  // judged below
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

  // Under mu, for a waiting connection: dispatches it when its head is
  // complete, refuses it when the head breaks a limit, else re-arms it.
  // Returns false when the connection is still waiting for bytes.
  bool judge(Conn* c) {
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
    c->busy = true;
    c->deadline = Clock::now() + std::chrono::seconds(opt.request_timeout_seconds);
    queue.push_back(c);
    work_cv.notify_one();
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
    for (auto& [fd, c] : conns)
      if (!c->busy && (c->deadline <= now || stopping)) late.push_back(c.get());
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
        if (stopping) return;
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
        if (stopping && queue.empty()) return;
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
    bool ok = svr.process_request(strm, last, closed, nullptr);
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

bool FrontServer::process_and_close_socket(socket_t sock) {
  impl_->adopt(sock);
  return true;
}

}  // namespace lfs
