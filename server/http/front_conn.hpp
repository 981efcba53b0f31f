// A connection of the front loop (front.cpp) and what reads and writes it:
// where its request head ends, a refusal sent before httplib sees the
// request, and httplib's view of it while a worker serves it (ConnStream).
// Thread rules: see front.cpp.
#pragma once

#include <arpa/inet.h>
#include <httplib.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "http/framing.hpp"

namespace lfs {

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
  Clock::time_point deadline;  // waiting: head, body or idle deadline; busy: request deadline
  // Reading the body in the loop (issue 31): the head ends at body_at; the
  // body ends at body_end (Content-Length) or where `chunks` finds it.
  bool in_body = false;
  bool chunked = false;
  std::size_t body_at = 0, body_end = 0;
  ChunkScan chunks;
  std::size_t reserved = 0;      // bytes of the loop's body budget this body holds
  Clock::time_point body_since;  // when the head was complete (the rate floor's start)
};

/// A socket address as text (IPv4 or IPv6) and its port; "" and 0 for other families.
std::string address_text(const sockaddr_storage& a, int& port);

/// Where the head ends in buf (after pos), or npos. Leading empty lines are
/// allowed before a request line (RFC 9112 2.2).
std::size_t head_end(const Conn& c);
/// Header lines of the head that ends at `end`.
std::size_t header_lines(const Conn& c, std::size_t end);
/// A refusal sent before httplib sees the request; best effort (non-blocking).
void refuse(int fd, int status, const char* reason, const std::string& message);
/// Removes an "Expect: 100-continue" line from the head in buf[pos, end)
/// (`end` moves with it); true when there was one. The loop answers it,
/// as it reads the body before httplib sees the request.
bool take_expect_continue(std::string& buf, std::size_t pos, std::size_t& end);

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
      if (c_.pos == c_.buf.size()) release();
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
    ip = address_text(a, port);
  }
  socket_t socket() const override { return c_.fd; }

  /// Moves the next `length` bytes out of the buffer when they are all in it
  /// (a body the loop read whole): the handler then owns the only copy.
  bool take(std::size_t length, std::string& out) {
    if (c_.buf.size() - c_.pos < length) return false;
    if (c_.buf.size() - c_.pos > length) {  // a pipelined request follows: copy
      out.assign(c_.buf, c_.pos, length);
      c_.pos += length;
      return true;
    }
    c_.buf.erase(0, c_.pos);
    out = std::move(c_.buf);
    c_.buf = std::string();
    c_.pos = 0;
    return true;
  }

 private:
  // All buffered bytes consumed: a large buffer is given back, not kept.
  void release() {
    if (c_.buf.capacity() > (1u << 16))
      std::string().swap(c_.buf);
    else
      c_.buf.clear();
    c_.pos = 0;
  }

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

}  // namespace lfs
