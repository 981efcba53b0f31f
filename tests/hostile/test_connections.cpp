// Slow and many clients against the real server (issue 12): 200 idle or
// trickling connections must not delay a new request past 1 s; a head has a
// deadline, a whole request has one, and one client address gets a bounded
// number of connections.
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "common.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr long kMiB = 1 << 20;

long ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

}  // namespace

TEST_CASE("200 idle and trickling connections: a new request is answered within 1 s") {
  lft::TempDir dir;
  lft::ServerProc s(dir.path, {"--header-timeout", "30"});
  lfh::reset_peak(s.pid());
  long before = lfh::rss_bytes(s.pid());
  std::vector<int> idle, trickle;
  // From four other loopback addresses, 50 each: under the per-client limit of 64.
  for (int i = 0; i < 200; ++i) {
    int fd = lfh::connect_from(s.port(), "127.0.0." + std::to_string(2 + i % 4));
    REQUIRE(fd >= 0);
    (i % 2 ? idle : trickle).push_back(fd);
  }
  for (int fd : trickle) lfh::send_all(fd, "POST /api/runs?name=slow HTTP/1.1\r\n");
  long worst = 0;
  for (int round = 0; round < 8; ++round) {
    for (int fd : trickle) lfh::send_all(fd, "X");  // one byte each, every 300 ms
    auto t0 = Clock::now();
    lfh::check_healthz_prompt(s, 1000);
    worst = std::max(worst, ms_since(t0));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  MESSAGE("slowest /healthz with 200 slow connections open: " << worst << " ms");
  // An upload and a read go through too.
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(lfh::scaled_ms(2000) / 1000);
  auto t0 = Clock::now();
  auto r = c.Post("/api/runs?name=fast", "main;a 1\n", "text/plain");
  REQUIRE(r);
  CHECK(r->status == 201);
  CHECK(ms_since(t0) < lfh::scaled_ms(1000));
  long rise = lfh::peak_rss_bytes(s.pid()) - before;
  CAPTURE(rise);
  CHECK(rise < 16 * kMiB);
  for (int fd : idle) close(fd);
  for (int fd : trickle) close(fd);
  lfh::check_healthz_prompt(s);
}

TEST_CASE("a head not complete within --header-timeout gets 408 and is closed") {
  lft::TempDir dir;
  lft::ServerProc s(dir.path, {"--header-timeout", "2"});
  int fd = lfh::connect_from(s.port(), "127.0.0.2");
  REQUIRE(fd >= 0);
  lfh::send_all(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n");
  auto t0 = Clock::now();
  std::string raw;
  for (int i = 0; i < 10 && raw.empty(); ++i) {  // trickle a byte every 500 ms
    lfh::send_all(fd, "X");
    raw = lfh::read_all(fd, 500);
  }
  close(fd);
  long took = ms_since(t0);
  CAPTURE(raw);
  CAPTURE(took);
  CHECK(lfh::status_of(raw) == 408);
  CHECK(raw.find("--header-timeout") != std::string::npos);
  CHECK(took < lfh::scaled_ms(4000));
  lfh::check_healthz_prompt(s);
}

// Issue 31: bodies are read in the loop, so a trickled body holds no worker:
// all four are cut at the deadline together (408), not one worker at a time.
TEST_CASE("a body trickled past --request-timeout is cut off (408) and never held a worker") {
  lft::TempDir dir;
  lft::ServerProc s(dir.path, {"--request-timeout", "2", "--threads", "2"});
  std::vector<int> fds;
  for (int i = 0; i < 4; ++i) {  // more slow bodies than workers
    int fd = lfh::connect_from(s.port(), "127.0.0.3");
    REQUIRE(fd >= 0);
    lfh::send_all(
        fd,
        "POST /api/runs?name=slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nmain;a 1\n");
    fds.push_back(fd);
  }
  // One client gets at most a quarter of the workers (here 1 of 2): others are served meanwhile.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  lfh::check_healthz_prompt(s, 1000);
  auto t0 = Clock::now();
  for (int fd : fds) {
    std::string raw = lfh::read_all(fd, 6000);  // a 408 once the deadline passes
    CAPTURE(raw);
    CHECK(lfh::status_of(raw) == 408);
    CHECK(raw.find("request body not complete within 2 s") != std::string::npos);
    close(fd);
  }
  long took = ms_since(t0);
  CAPTURE(took);
  CHECK(took < lfh::scaled_ms(4000));  // together at the 2 s deadline
  CHECK(s.log().find("--request-timeout") != std::string::npos);
  auto c = s.client();
  auto runs = c.Get("/api/runs?name=slow");
  REQUIRE(runs);
  CHECK(runs->body.find("\"id\"") == std::string::npos);  // nothing stored
  lfh::check_healthz_prompt(s);
}

TEST_CASE("one client address gets at most --max-client-connections; others are still served") {
  lft::TempDir dir;
  lft::ServerProc s(dir.path, {"--max-client-connections", "8"});
  std::vector<int> mine;
  for (int i = 0; i < 8; ++i) {
    int fd = lfh::connect_from(s.port(), "127.0.0.9");
    REQUIRE(fd >= 0);
    mine.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  int extra = lfh::connect_from(s.port(), "127.0.0.9");
  REQUIRE(extra >= 0);
  std::string raw = lfh::read_all(extra, 3000);
  close(extra);
  CAPTURE(raw);
  CHECK(lfh::status_of(raw) == 503);
  CHECK(raw.find("too many connections from 127.0.0.9 (at most 8, --max-client-connections)") !=
        std::string::npos);
  lfh::check_healthz_prompt(s);  // from 127.0.0.1
  for (int fd : mine) close(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int again = lfh::connect_from(s.port(), "127.0.0.9");
  REQUIRE(again >= 0);
  lfh::send_all(again, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  CHECK(lfh::status_of(lfh::read_all(again, 3000)) == 200);
  close(again);
}

namespace {
std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}
}  // namespace

// Issue 31: behind a proxy every client is one address, and each refusal was
// a log line of its own (79,070 lines in 60 s). Now: the first in full, the
// rest summed in one line per interval (10 s).
TEST_CASE("refusals are logged in rate-limited summaries, not one line each") {
  lft::TempDir dir;
  lft::ServerProc s(dir.path, {"--max-client-connections", "2"});
  std::vector<int> mine;
  for (int i = 0; i < 2; ++i) mine.push_back(lfh::connect_from(s.port(), "127.0.0.9"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (int i = 0; i < 300; ++i) {
    int fd = lfh::connect_from(s.port(), "127.0.0.9");
    REQUIRE(fd >= 0);
    CHECK(lfh::status_of(lfh::read_all(fd, 3000)) == 503);
    close(fd);
  }
  for (int fd : mine) close(fd);
  const std::string log = s.log();
  CAPTURE(log.substr(log.size() > 3000 ? log.size() - 3000 : 0));
  CHECK(count_of(log, "connection refused: too many from this client") == 1);
  CHECK(count_of(log, "more refusals within 10 s: one summary line") == 1);
  lfh::check_healthz_prompt(s);
}

// Issue 31: behind a reverse proxy every client had the proxy's address, so
// the per-address limits refused everyone together (78,874 answers 503 in
// 60 s through one nginx). A --trusted-proxy's connections count only against
// --max-connections, and each request is keyed (and logged) by the client
// its X-Forwarded-For names; from any other address the header means nothing.
TEST_CASE("--trusted-proxy: its clients are keyed by X-Forwarded-For, others by their address") {
  lft::TempDir dir;
  lft::ServerProc s(dir.path, {"--max-client-connections", "4", "--trusted-proxy", "127.0.0.9"});
  std::vector<int> held;
  for (int i = 0; i < 10; ++i) held.push_back(lfh::connect_from(s.port(), "127.0.0.9"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (int i = 0; i < 10; ++i) {
    CAPTURE(i);
    REQUIRE(held[i] >= 0);
    lfh::send_all(held[i], "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113." +
                               std::to_string(i + 1) + "\r\nConnection: close\r\n\r\n");
    CHECK(lfh::status_of(lfh::read_all(held[i], 3000)) == 200);
    close(held[i]);
  }
  // Not a trusted proxy: its own address, capped, whatever it claims.
  std::vector<int> other;
  for (int i = 0; i < 4; ++i) other.push_back(lfh::connect_from(s.port(), "127.0.0.10"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  int fifth = lfh::connect_from(s.port(), "127.0.0.10");
  CHECK(lfh::status_of(lfh::read_all(fifth, 3000)) == 503);
  close(fifth);
  lfh::send_all(other[0],
                "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 198.51.100.1\r\n"
                "Connection: close\r\n\r\n");
  CHECK(lfh::status_of(lfh::read_all(other[0], 3000)) == 200);
  for (int fd : other) close(fd);
  const std::string log = s.log();
  CHECK(log.find("203.0.113.7 GET /healthz 200") != std::string::npos);
  CHECK(log.find("127.0.0.10 GET /healthz 200") != std::string::npos);
  CHECK(log.find("198.51.100.1") == std::string::npos);
}

// Issue 31: 16 connections from 4 addresses, each a POST declaring 100000
// bytes and then sending one byte at a time, held all 16 workers: /healthz
// and an upload from a fresh address timed out after 15 s. Bodies are now
// read in the loop: neither waits, and a body slower than --min-body-rate
// (1 KiB/s by default) is cut off 10 s after its head (408).
TEST_CASE(
    "trickled bodies hold no worker: others answered within 100 ms; the rate floor cuts them") {
  lft::TempDir dir;
  lft::ServerProc s(dir.path);
  std::vector<int> slow;
  for (int i = 0; i < 16; ++i) {
    int fd = lfh::connect_from(s.port(), "127.0.1." + std::to_string(1 + i % 4));
    REQUIRE(fd >= 0);
    lfh::send_all(fd,
                  "POST /api/runs?name=slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n"
                  "\r\nm");
    slow.push_back(fd);
  }
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    while (!done)
      for (int fd : slow) {
        (void)!::send(fd, "a", 1, MSG_NOSIGNAL);
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
      }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  long slowest = 0;
  for (int i = 0; i < 8; ++i) {
    auto t0 = Clock::now();
    CHECK(lfh::status_of(lfh::exchange(s.port(),
                                       "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: "
                                       "close\r\n\r\n")) == 200);
    slowest = std::max(slowest, ms_since(t0));
  }
  auto t0 = Clock::now();
  const std::string body = "main;a 1\n";
  int up = lfh::connect_from(s.port(), "127.0.0.20");
  lfh::send_all(up, "POST /api/runs?name=fresh HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
  CHECK(lfh::status_of(lfh::read_all(up, 5000)) == 201);
  close(up);
  const long upload = ms_since(t0);
  MESSAGE("with 16 trickled bodies: slowest /healthz " << slowest << " ms, an upload " << upload
                                                       << " ms");
  CHECK(slowest < lfh::scaled_ms(100));
  CHECK(upload < lfh::scaled_ms(100));
  // About 2 bytes a second each: under the floor, cut 10 s after the head.
  for (int fd : slow) {
    std::string raw = lfh::read_all(fd, 15000);
    CAPTURE(raw);
    CHECK(lfh::status_of(raw) == 408);
    CHECK(raw.find("slower than 1024 bytes/s (--min-body-rate)") != std::string::npos);
  }
  done = true;
  trickle.join();
  for (int fd : slow) close(fd);
  lfh::check_healthz_prompt(s);
}
