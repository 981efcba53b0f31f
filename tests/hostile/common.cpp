#include "common.hpp"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace lfh {

int connect_from(int port, const std::string& from) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in src{};
  src.sin_family = AF_INET;
  inet_pton(AF_INET, from.c_str(), &src.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) {
    close(fd);
    return -1;
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t w = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (w <= 0) return false;
    done += static_cast<std::size_t>(w);
  }
  return true;
}

std::string read_all(int fd, int timeout_ms) {
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[65536];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r <= 0) break;
    out.append(buf, static_cast<std::size_t>(r));
  }
  return out;
}

std::string exchange(int port, const std::string& request, int timeout_ms) {
  int fd = connect_from(port);
  REQUIRE(fd >= 0);
  send_all(fd, request);
  std::string out = read_all(fd, timeout_ms);
  close(fd);
  return out;
}

int status_of(const std::string& raw) {
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || raw.size() < 12) return 0;
  return std::atoi(raw.substr(9, 3).c_str());
}

namespace {
long proc_status_kb(pid_t pid, const char* key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + std::strlen(key));
  return -1;
}
}  // namespace

long rss_bytes(pid_t pid) {
  return proc_status_kb(pid, "VmRSS:") * 1024;
}
long peak_rss_bytes(pid_t pid) {
  return proc_status_kb(pid, "VmHWM:") * 1024;
}

void reset_peak(pid_t pid) {
  std::ofstream out("/proc/" + std::to_string(pid) + "/clear_refs");
  out << "5";
}

long scaled_ms(long ms) {
  // The latency goals are for the normal build; .ci/sanitizers.sh runs an
  // ASan server (2-3x slower, on a shared machine) and sets
  // LUAFLAME_TEST_TIME_FACTOR to scale them.
  if (const char* f = std::getenv("LUAFLAME_TEST_TIME_FACTOR"); f && std::atoi(f) > 1)
    return ms * std::atoi(f);
  return ms;
}

void check_healthz_prompt(const lft::ServerProc& s, int ms) {
  ms = static_cast<int>(scaled_ms(ms));
  auto t0 = std::chrono::steady_clock::now();
  httplib::Client c("127.0.0.1", s.port());
  const time_t limit_s = std::max(5, ms / 1000 + 1);  // past the goal: fail on it, not on a timeout
  c.set_connection_timeout(limit_s);
  c.set_read_timeout(limit_s);
  auto r = c.Get("/healthz");
  auto took =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  CAPTURE(took);
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(took < ms);
}

}  // namespace lfh
