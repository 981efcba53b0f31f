// Durability: kill -9 during uploads and streaming, restart, and every
// acknowledged run is there, whole; nothing half-written is visible; a
// half-received body leaves nothing behind.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "harness.hpp"
#include "luaflame/wire.hpp"

using nlohmann::json;

namespace {

constexpr int kStacks = 3000;

// The body of upload `i` of thread `t`: distinct stacks with known counts.
std::string body_of(int t, int i) {
  std::string s;
  for (int k = 0; k < kStacks; ++k)
    s += "main;t" + std::to_string(t) + ";r" + std::to_string(i) + ";f" + std::to_string(k) + " " +
         std::to_string(k % 7 + 1) + "\n";
  return s;
}

std::vector<std::string> sorted_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) lines.push_back(l);
  std::sort(lines.begin(), lines.end());
  return lines;
}

double total_of(int) {
  double sum = 0;
  for (int k = 0; k < kStacks; ++k) sum += k % 7 + 1;
  return sum;
}

std::string chunk(uint64_t seq) {
  lfw::Chunk c;
  c.seq = seq;
  c.metrics = {"samples"};
  c.frames = {"main", "step" + std::to_string(seq % 50)};
  c.nodes = {{-1, 0, {0}}, {0, 1, {seq + 1}}};
  std::string out;
  lfw::encode(c, out);
  return out;
}

}  // namespace

TEST_CASE("kill -9 during uploads: every acknowledged run is whole after restart") {
  lft::TempDir dir;
  std::map<int64_t, std::pair<int, int>> acked;  // id -> (thread, index)
  std::mutex mu;
  std::atomic<bool> stop{false};
  int64_t stream_id = 0;
  std::atomic<uint64_t> stream_acked_sum{0}, stream_sent{0};
  {
    lft::ServerProc srv(dir.path);
    auto c = srv.client();
    auto created =
        c.Post("/api/streams", R"({"stream":"crash-1","name":"streamed","metrics":["samples"]})",
               "application/json");
    REQUIRE(created);
    stream_id = json::parse(created->body)["id"];
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t)
      threads.emplace_back([&, t] {
        auto cl = srv.client();
        for (int i = 0; !stop; ++i) {
          auto r = cl.Post(("/api/runs?name=crash&tag=t=" + std::to_string(t)).c_str(),
                           body_of(t, i), "text/plain");
          if (!r) break;  // the server died
          if (r->status == 201) {
            std::lock_guard<std::mutex> lock(mu);
            acked[json::parse(r->body)["id"].get<int64_t>()] = {t, i};
          }
        }
      });
    threads.emplace_back([&] {
      auto cl = srv.client();
      for (uint64_t seq = 0; !stop; ++seq) {
        stream_sent = seq + 1;
        auto r = cl.Post(("/api/runs/" + std::to_string(stream_id) + "/chunks").c_str(), chunk(seq),
                         "text/plain");
        if (!r) break;
        if (r->status == 200) stream_acked_sum += seq + 1;
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    CHECK(srv.stop(9) == 128 + 9);
    stop = true;
    for (auto& th : threads) th.join();
  }
  MESSAGE("acknowledged uploads before kill -9: " << acked.size() << ", stream chunks sent: "
                                                  << stream_sent.load());
  REQUIRE(acked.size() > 3);

  lft::ServerProc again(dir.path);
  auto c = again.client();
  for (const auto& [id_ref, ti] : acked) {
    const auto& id = id_ref;  // CAPTURE's lambda: clang-tidy 14 rejects a binding there
    CAPTURE(id);
    auto r = c.Get(("/api/runs/" + std::to_string(id) + "/profile.folded").c_str());
    REQUIRE(r);
    REQUIRE(r->status == 200);
    CHECK(sorted_lines(r->body) == sorted_lines(body_of(ti.first, ti.second)));
  }
  // Every run present, acknowledged or not, is whole: nothing half-written.
  json all = json::parse(c.Get("/api/runs?name=crash&limit=1000")->body);
  CHECK(all["total"].get<std::size_t>() >= acked.size());
  CHECK(all["total"].get<std::size_t>() <= acked.size() + 3);  // at most one in flight per thread
  for (const auto& run : all["runs"]) {
    CAPTURE(run["id"]);
    CHECK(run["stacks"] == kStacks);
    CHECK(run["metrics"]["samples"]["total"] == total_of(0));
  }
  // The stream holds every acknowledged chunk, each whole (totals are sums of 1..n).
  json s = json::parse(c.Get(("/api/runs/" + std::to_string(stream_id)).c_str())->body);
  double total =
      s["metrics"].contains("samples") ? s["metrics"]["samples"]["total"].get<double>() : 0;
  CHECK(total >= static_cast<double>(stream_acked_sum.load()));
  uint64_t n = 0;
  while ((n * (n + 1)) / 2 < static_cast<uint64_t>(total)) ++n;
  CHECK((n * (n + 1)) / 2 == static_cast<uint64_t>(total));
  // A retried chunk after the restart still counts once.
  auto retry = c.Post(("/api/runs/" + std::to_string(stream_id) + "/chunks").c_str(), chunk(0),
                      "text/plain");
  CHECK(json::parse(retry->body)["duplicate"] == true);
  CHECK(again.stop(15) == 0);
}

TEST_CASE("a half-received body leaves nothing") {
  lft::TempDir dir;
  lft::ServerProc srv(dir.path);
  int fd = lft::connect_loopback(srv.port());
  REQUIRE(fd >= 0);
  std::string body = body_of(0, 0);
  std::string head = "POST /api/runs?name=half HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n";
  std::string half = head + body.substr(0, body.size() / 2);
  CHECK(write(fd, half.data(), half.size()) == static_cast<ssize_t>(half.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  close(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto c = srv.client();
  CHECK(json::parse(c.Get("/api/runs")->body)["total"] == 0);
  // and the server still works
  auto ok = c.Post("/api/runs?name=after", "a;b 1\n", "text/plain");
  REQUIRE(ok);
  CHECK(ok->status == 201);
}

TEST_CASE("SIGTERM lets a request in flight finish, then the store closes cleanly") {
  lft::TempDir dir;
  std::string body = body_of(1, 1);
  {
    lft::ServerProc srv(dir.path);
    int fd = lft::connect_loopback(srv.port());
    REQUIRE(fd >= 0);
    std::string head =
        "POST /api/runs?name=inflight HTTP/1.1\r\nHost: x\r\nConnection: "
        "close\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n";
    std::string first = head + body.substr(0, body.size() / 2);
    REQUIRE(write(fd, first.data(), first.size()) == static_cast<ssize_t>(first.size()));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::thread stopper([&] { CHECK(srv.stop(15) == 0); });  // SIGTERM while the body is half sent
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::string rest = body.substr(body.size() / 2);
    REQUIRE(write(fd, rest.data(), rest.size()) == static_cast<ssize_t>(rest.size()));
    std::string reply;
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;)
      reply.append(buf, static_cast<std::size_t>(n));
    close(fd);
    stopper.join();
    CAPTURE(reply);
    CHECK(reply.rfind("HTTP/1.1 201", 0) == 0);
    CHECK(srv.log().find("store closed") != std::string::npos);
  }
  lft::ServerProc again(dir.path);
  auto c = again.client();
  auto r = c.Get("/api/runs/1/profile.folded");
  REQUIRE(r);
  CHECK(sorted_lines(r->body) == sorted_lines(body));
}
