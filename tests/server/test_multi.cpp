// Several luaflame-server processes on one PostgreSQL database (the test starts
// its own, pg_harness.hpp): what one server acknowledges the other reads at
// once; a deletion on one is seen by the other (caches included); exactly one
// runs retention, and another takes over when it dies; kill -9 of a server
// while chunks stream loses no acknowledged chunk.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "harness.hpp"
#include "luaflame/wire.hpp"
#include "pg_harness.hpp"
#include "store/store.hpp"

using nlohmann::json;

namespace {

// A server on the shared database `url` (its --data folder holds only its log).
struct Server {
  lft::TempDir dir;
  std::unique_ptr<lft::ServerProc> proc;
  Server(const std::string& url, std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--store", url});
    proc = std::make_unique<lft::ServerProc>(dir.path, extra);
  }
  httplib::Client client() const { return proc->client(); }
};

std::map<std::string, std::string> folded_map(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    auto sp = l.rfind(' ');
    if (sp != std::string::npos) out[l.substr(0, sp)] = l.substr(sp + 1);
  }
  return out;
}

// Chunk `seq` of a stream: one stack of its own, "main;c<seq>", with value seq + 1.
std::string chunk(uint64_t seq) {
  lfw::Chunk c;
  c.seq = seq;
  c.metrics = {"samples"};
  c.frames = {"main", "c" + std::to_string(seq)};
  c.nodes = {{-1, 0, {0}}, {0, 1, {seq + 1}}};
  std::string out;
  lfw::encode(c, out);
  return out;
}

int64_t open_stream(httplib::Client& c, const std::string& key) {
  auto r =
      c.Post("/api/streams", R"({"stream":")" + key + R"(","name":"svc","metrics":["samples"]})",
             "application/json");
  REQUIRE(r);
  REQUIRE((r->status == 200 || r->status == 201));
  return json::parse(r->body)["id"].get<int64_t>();
}

std::string path_of(int64_t id, const char* rest = "") {
  return "/api/runs/" + std::to_string(id) + rest;
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("two servers on one database: written through one, read through the other at once") {
  const std::string url = lft::Postgres::shared().new_database();
  Server a(url), b(url);
  auto ca = a.client(), cb = b.client();

  // An upload acknowledged by A is readable from B at once: details, folded, listing.
  const std::string body = "main;a;b 3\nmain;a;c 2\nmain;d 5\n";
  auto up = ca.Post("/api/runs?name=shared&tag=branch=main", body, "text/plain");
  REQUIRE(up);
  REQUIRE(up->status == 201);
  const int64_t id = json::parse(up->body)["id"];
  auto details = cb.Get(path_of(id).c_str());
  REQUIRE(details);
  REQUIRE(details->status == 200);
  CHECK(json::parse(details->body)["metrics"]["samples"]["total"] == 10);
  CHECK(folded_map(cb.Get(path_of(id, "/profile.folded").c_str())->body) == folded_map(body));
  CHECK(json::parse(cb.Get("/api/runs?name=shared&tag=branch=main")->body)["runs"][0]["id"] == id);

  // Source texts shipped through A are served by B (they live in the database, not a server's
  // folder: issue 17's source view on PostgreSQL).
  auto src = ca.Post(path_of(id, "/sources").c_str(), R"({"files": {"app.lua": "print(1)\n"}})",
                     "application/json");
  REQUIRE(src);
  CHECK(src->status / 100 == 2);
  auto listed = cb.Get(path_of(id, "/sources").c_str());
  REQUIRE(listed);
  REQUIRE(listed->status == 200);
  CHECK(json::parse(listed->body)["files"] == json::parse(R"([{"path": "app.lua", "bytes": 9}])"));

  // A stream created through B, its chunks sent to either: each read from the other server
  // holds every chunk acknowledged so far, live.
  const int64_t sid = open_stream(cb, "multi-1");
  CHECK(open_stream(ca, "multi-1") == sid);  // idempotent across servers
  std::map<std::string, std::string> expect;
  for (uint64_t seq = 0; seq < 12; ++seq) {
    auto& writer = seq % 2 ? cb : ca;
    auto& reader = seq % 2 ? ca : cb;
    auto r = writer.Post(path_of(sid, "/chunks").c_str(), chunk(seq), "application/octet-stream");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    expect["main;c" + std::to_string(seq)] = std::to_string(seq + 1);
    CAPTURE(seq);
    CHECK(folded_map(reader.Get(path_of(sid, "/profile.folded").c_str())->body) == expect);
  }
  // A chunk already stored through A is a duplicate through B.
  CHECK(json::parse(cb.Post(path_of(sid, "/chunks").c_str(), chunk(0), "application/octet-stream")
                        ->body)["duplicate"] == true);
  REQUIRE(ca.Post(path_of(sid, "/finish").c_str(), "{}", "application/json")->status == 200);
  CHECK(cb.Post(path_of(sid, "/chunks").c_str(), chunk(99), "application/octet-stream")->status ==
        409);
  CHECK(json::parse(cb.Get(path_of(sid).c_str())->body)["status"] == "finished");

  // B caches the finished run's graph (ETag, 304); a delete through A is seen by B at once.
  auto svg = cb.Get(path_of(id, "/flamegraph.svg").c_str());
  REQUIRE(svg);
  REQUIRE(svg->status == 200);
  const std::string etag = svg->get_header_value("ETag");
  REQUIRE_FALSE(etag.empty());
  CHECK(cb.Get(path_of(id, "/flamegraph.svg").c_str(), {{"If-None-Match", etag}})->status == 304);
  // The same view through A has the same ETag: a load balancer may send the next request anywhere.
  CHECK(ca.Get(path_of(id, "/flamegraph.svg").c_str())->get_header_value("ETag") == etag);
  REQUIRE(ca.Delete(path_of(id).c_str())->status == 204);
  CHECK(cb.Get(path_of(id).c_str())->status == 404);
  CHECK(cb.Get(path_of(id, "/flamegraph.svg").c_str())->status == 404);
  CHECK(cb.Get(path_of(id, "/flamegraph.svg").c_str(), {{"If-None-Match", etag}})->status == 404);
  CHECK(cb.Get(path_of(id, "/functions").c_str())->status == 404);
  CHECK(json::parse(cb.Get("/api/runs?name=shared")->body)["runs"].empty());
  auto dropped = lfs::open_store_sources(url);  // the delete took the run's sources too
  CHECK(dropped->list_sources(id).empty());
  CHECK(a.proc->stop(15) == 0);
  CHECK(b.proc->stop(15) == 0);
}

TEST_CASE("exactly one server runs retention; another takes over when it dies") {
  const std::string url = lft::Postgres::shared().new_database();
  const std::vector<std::string> opts = {"--keep-runs",     "2", "--retention-interval", "1",
                                         "--stale-minutes", "0"};
  auto a = std::make_unique<Server>(url, opts);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // A takes the lock first
  Server b(url, opts);
  auto ca = a->client(), cb = b.client();
  auto wait_for_total = [&](httplib::Client& c, int want) {
    for (int i = 0; i < 200; ++i) {
      if (json::parse(c.Get("/api/runs")->body)["runs"].size() == static_cast<std::size_t>(want))
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  // Uploads spread over several passes of both servers: were both running retention, each
  // would delete some of them.
  for (int i = 0; i < 8; ++i) {
    REQUIRE((i % 2 ? cb : ca).Post("/api/runs?name=r", "main;f 1\n", "text/plain")->status == 201);
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
  }
  CHECK(wait_for_total(cb, 2));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // a second pass of each server
  const std::string la = a->proc->log(), lb = b.proc->log();
  CHECK(count_of(la, "retention: deleted run") == 6);  // the leader, each run once
  CHECK(count_of(lb, "retention: deleted run") == 0);

  CHECK(a->proc->stop(9) == 128 + 9);  // the leader dies: its session, and lock, end with it
  a.reset();
  for (int i = 0; i < 3; ++i)
    REQUIRE(cb.Post("/api/runs?name=r", "main;g 1\n", "text/plain")->status == 201);
  CHECK(wait_for_total(cb, 2));
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  CHECK(count_of(b.proc->log(), "retention: deleted run") == 3);
}

TEST_CASE(
    "kill -9 of a server while chunks stream to two servers: every acknowledged chunk is there") {
  const std::string url = lft::Postgres::shared().new_database();
  auto a = std::make_unique<Server>(url);
  Server b(url);
  auto cb = b.client();
  const int64_t sid = open_stream(cb, "crash-multi");
  std::mutex mu;
  std::set<uint64_t> acked, sent;
  std::atomic<bool> stop{false};
  // Two senders on one run, one per server (writes to one run from two servers at once):
  // seqs 0.. to A, 1000000.. to B.
  auto sender = [&](lft::ServerProc& srv, uint64_t first) {
    auto c = srv.client();
    for (uint64_t seq = first; !stop; ++seq) {
      {
        std::lock_guard<std::mutex> lock(mu);
        sent.insert(seq);
      }
      auto r = c.Post(path_of(sid, "/chunks").c_str(), chunk(seq), "application/octet-stream");
      if (!r) break;  // the server died
      if (r->status == 200) {
        std::lock_guard<std::mutex> lock(mu);
        acked.insert(seq);
      }
    }
  };
  std::thread ta(sender, std::ref(*a->proc), 0), tb(sender, std::ref(*b.proc), 1000000);
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  CHECK(a->proc->stop(9) == 128 + 9);
  ta.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // B keeps going alone
  stop = true;
  tb.join();
  std::size_t acked_a = 0;
  for (uint64_t s : acked) acked_a += s < 1000000;
  MESSAGE("acknowledged chunks: " << acked_a << " through A (killed), " << acked.size() - acked_a
                                  << " through B");
  REQUIRE(acked_a > 10);

  // Through B: every acknowledged chunk once, with its value; nothing that was never sent.
  auto stored = folded_map(cb.Get(path_of(sid, "/profile.folded").c_str())->body);
  std::size_t missing = 0, wrong = 0, unknown = 0;
  for (uint64_t s : acked) {
    auto it = stored.find("main;c" + std::to_string(s));
    if (it == stored.end())
      ++missing;
    else if (it->second != std::to_string(s + 1))
      ++wrong;
  }
  for (const auto& [stack, v] : stored)
    if (!sent.count(std::stoull(stack.substr(6)))) ++unknown;
  CHECK(missing == 0);
  CHECK(wrong == 0);
  CHECK(unknown == 0);
  CHECK(stored.size() <= acked.size() + 1);  // at most the one chunk in flight to A at the kill

  // A restarted on the same database: a retried chunk counts once.
  a = std::make_unique<Server>(url);
  auto ca = a->client();
  const uint64_t last = *std::prev(acked.lower_bound(1000000));
  CHECK(
      json::parse(ca.Post(path_of(sid, "/chunks").c_str(), chunk(last), "application/octet-stream")
                      ->body)["duplicate"] == true);
  auto again = folded_map(ca.Get(path_of(sid, "/profile.folded").c_str())->body);
  CHECK(again["main;c" + std::to_string(last)] == std::to_string(last + 1));
}

namespace {

// The compose balancer on the host: docker/lb/start.sh running nginx with
// docker/lb/nginx.conf, its names (server-a, server-b) resolved by a hosts
// file of the test's own (LB_RESOLVE) instead of DNS; stopped at the end.
class Nginx {
 public:
  struct Backend {
    std::string name;
    const lft::ServerProc* server;
  };
  Nginx(const std::string& conf_path, const std::vector<Backend>& backends)
      : port_(lft::free_port()) {
    std::ifstream in(conf_path);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string conf = ss.str();
    auto replace = [&conf](const std::string& from, const std::string& to) {
      auto p = conf.find(from);
      REQUIRE(p != std::string::npos);
      conf.replace(p, from.size(), to);
    };
    replace("listen 8080;", "listen 127.0.0.1:" + std::to_string(port_) + ";");
    // Files of our own instead of the system's (the workers run as nobody: open folders).
    const std::string d = dir_.path;
    chmod(d.c_str(), 0777);
    replace("access_log /dev/stdout;", "access_log " + d +
                                           "/access.log;\n  client_body_temp_path " + d +
                                           "/body;\n  proxy_temp_path " + d + "/proxy;");
    std::ofstream(d + "/nginx.conf") << conf;
    std::string servers;
    for (const Backend& b : backends) {
      servers += b.name + ":" + std::to_string(b.server->port()) + " ";
      point(b.name, b.server->host());
    }
    std::ofstream(d + "/resolve.sh") << "awk -v n=\"$1\" '$1 == n {print $2}' " + d + "/hosts\n";
    // Made before fork: the child of a process with threads may not allocate.
    std::vector<std::string> args = {
        "/bin/sh", kStart, "-p",
        d + "/",   "-g",   "daemon off; pid " + d + "/nginx.pid; error_log " + d + "/error.log;"};
    std::vector<std::string> env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LB_SERVERS=" + servers,
                                    "LB_CONF_DIR=" + d, "LB_RESOLVE=/bin/sh " + d + "/resolve.sh",
                                    "LB_RESOLVE_SECONDS=0.2"};
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    for (auto& e : env) envp.push_back(e.data());
    argv.push_back(nullptr);
    envp.push_back(nullptr);
    const int log_fd = ::open((d + "/start.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(log_fd, 2);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    ::close(log_fd);
    for (int i = 0; i < 200; ++i) {
      if (auto r = client().Get("/healthz"); r && r->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL("nginx did not start: " << error_log());
  }
  ~Nginx() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  // Where `name` resolves from now on (as a container restarted at a new address).
  void point(const std::string& name, const std::string& address) {
    hosts_[name] = address;
    std::ofstream out(dir_.path + "/hosts.new");
    for (const auto& [n, a] : hosts_) out << n << " " << a << "\n";
    out.close();
    std::rename((dir_.path + "/hosts.new").c_str(), (dir_.path + "/hosts").c_str());
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(5);
    c.set_read_timeout(60);
    return c;
  }
  std::string error_log() const {
    std::ifstream in(dir_.path + "/error.log"), start(dir_.path + "/start.log");
    std::stringstream ss;
    ss << in.rdbuf() << start.rdbuf();
    return ss.str();
  }
  static constexpr const char* kStart = LUAFLAME_LB_START;
  static constexpr const char* kNginx = "/usr/sbin/nginx";

 private:
  lft::TempDir dir_;
  int port_;
  pid_t pid_ = -1;
  std::map<std::string, std::string> hosts_;
};

// True when the host has no nginx: the case is skipped (in CI it fails instead).
bool nginx_missing() {
  if (access(Nginx::kNginx, X_OK) == 0) return false;
  if (lft::in_ci())
    FAIL("nginx is not installed: CI must run this test (scripts/install-deps.sh --test)");
  MESSAGE("skipped: nginx is not installed (scripts/install-deps.sh --test installs it)");
  ++lft::skipped_cases();
  return true;
}

}  // namespace

TEST_CASE("nginx (docker/lb/nginx.conf) in front of two servers: any server answers, one may die") {
  if (nginx_missing()) return;
  const std::string url = lft::Postgres::shared().new_database();
  auto a = std::make_unique<Server>(url);
  Server b(url);
  Nginx lb(LUAFLAME_LB_CONF, {{"server-a", a->proc.get()}, {"server-b", b.proc.get()}});
  auto c = lb.client();
  auto up = c.Post("/api/runs?name=lb", "main;x 4\nmain;y 6\n", "text/plain");
  REQUIRE(up);
  REQUIRE(up->status == 201);
  const int64_t id = json::parse(up->body)["id"];
  const int64_t sid = open_stream(c, "lb-1");
  std::map<std::string, std::string> expect;
  auto send = [&](uint64_t seq) {
    auto r = c.Post(path_of(sid, "/chunks").c_str(), chunk(seq), "application/octet-stream");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    expect["main;c" + std::to_string(seq)] = std::to_string(seq + 1);
    CAPTURE(seq);
    // Round robin: this read goes to the other server than the write did.
    CHECK(folded_map(c.Get(path_of(sid, "/profile.folded").c_str())->body) == expect);
    CHECK(json::parse(c.Get(path_of(id).c_str())->body)["metrics"]["samples"]["total"] == 10);
  };
  for (uint64_t seq = 0; seq < 10; ++seq) send(seq);
  const int via_a = count_of(a->proc->log(), "/chunks"), via_b = count_of(b.proc->log(), "/chunks");
  MESSAGE("chunks through nginx: " << via_a << " to A, " << via_b << " to B");
  CHECK(via_a > 0);
  CHECK(via_b > 0);
  CHECK(via_a + via_b == 10);

  // A server dies: nginx passes requests to the other (a refused connection is retried).
  CHECK(a->proc->stop(9) == 128 + 9);
  for (uint64_t seq = 10; seq < 16; ++seq) send(seq);
  CHECK(count_of(b.proc->log(), "/chunks") == via_b + 6);
}

// Issue 31: nginx resolved server-a/server-b once; a server container that
// restarted came back at a new address and got no traffic until the balancer
// was restarted. start.sh resolves them again (here every 0.2 s).
TEST_CASE("nginx (docker/lb/start.sh) follows a server that restarts at a new address") {
  if (nginx_missing()) return;
  const std::string url = lft::Postgres::shared().new_database();
  Server a(url);
  auto b = std::make_unique<Server>(url, std::vector<std::string>{"--listen", "127.0.0.2:0"});
  const int port_b = b->proc->port();
  Nginx lb(LUAFLAME_LB_CONF, {{"server-a", a.proc.get()}, {"server-b", b->proc.get()}});
  auto c = lb.client();
  auto up = c.Post("/api/runs?name=lb", "main;x 4\n", "text/plain");
  REQUIRE(up);
  REQUIRE(up->status == 201);
  const std::string run = path_of(json::parse(up->body)["id"].get<int64_t>());
  // Reads for `ms`: every one answered 200; returns the slowest, in ms.
  auto reads = [&](int ms) {
    long slowest = 0;
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
      auto t0 = std::chrono::steady_clock::now();
      auto r = c.Get(run.c_str());
      REQUIRE(r);
      CHECK(r->status == 200);
      slowest = std::max<long>(slowest, std::chrono::duration_cast<std::chrono::milliseconds>(
                                            std::chrono::steady_clock::now() - t0)
                                            .count());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return slowest;
  };
  // B's container stops: its name no longer resolves; then it comes back elsewhere.
  CHECK(b->proc->stop(9) == 128 + 9);
  lb.point("server-b", "");
  long down = reads(1000);
  auto b2 = std::make_unique<Server>(
      url, std::vector<std::string>{"--listen", "127.0.0.3:" + std::to_string(port_b)});
  lb.point("server-b", "127.0.0.3");
  long back = reads(1500);
  MESSAGE("slowest read: " << down << " ms with B gone, " << back << " ms once B is back");
  CHECK(down < 500);
  CHECK(back < 500);
  const int to_b2 = count_of(b2->proc->log(), "GET " + run);
  MESSAGE("reads the restarted B answered: " << to_b2);
  CHECK(to_b2 > 0);
  CHECK(lb.error_log().find("lb: servers now:") != std::string::npos);
}
