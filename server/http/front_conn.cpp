// The front loop's connections (front_conn.hpp).
#include "http/front_conn.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "http/guard.hpp"

namespace lfs {

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

std::string address_text(const sockaddr_storage& a, int& port) {
  char text[INET6_ADDRSTRLEN] = {0};
  port = 0;
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    port = ntohs(in->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* in = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof text);
    port = ntohs(in->sin6_port);
  }
  return text;
}

bool take_expect_continue(std::string& buf, std::size_t pos, std::size_t& end) {
  std::size_t at = buf.find("\r\n", pos);
  while (at != std::string::npos && at + 2 < end) {
    const std::size_t from = at + 2, to = buf.find("\r\n", from);
    if (to == std::string::npos || to >= end) break;
    std::string line = ascii_lower(buf.substr(from, to - from));
    line.erase(std::remove(line.begin(), line.end(), ' '), line.end());
    if (line == "expect:100-continue") {
      buf.erase(from, to + 2 - from);
      end -= to + 2 - from;
      return true;
    }
    at = to;
  }
  return false;
}

}  // namespace lfs
