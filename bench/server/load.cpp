// Loopback load generator for luaflame-server, bounded in time.
//
//   server_load --port P --mode upload --file F [--seconds S] [--threads N]
//   server_load --port P --mode svg-cached|svg-304|svg-uncached|svg-cold --run ID [--seconds S]
//   [--threads N]
//
// upload:       POST F to /api/runs repeatedly; prints MB/s of folded text acknowledged (201).
// svg-cached:   GET the same flame graph of a finished run (served from the cache).
// svg-304:      the same with If-None-Match (revalidation, no body).
// svg-uncached: GET the graph with a new title each time (rendered every time; the
//               run's loaded tree is reused from the tree cache).
// svg-cold:     GET the graph with a new from= each time (loaded from SQLite and rendered).
// --clients-from N: thread t says it forwards for client 10.N.(t/256).(t%256)
//               (X-Forwarded-For, as a proxy's clients: bench/server/behind_proxy.sh).
// Prints one line: mode, requests, failures, seconds, requests/s, MB/s; with
// failures, the statuses that failed and how often.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Args {
  int port = 8080;
  std::string mode = "upload", file;
  long run = 1;
  double seconds = 5;
  int threads = 2;
  int clients_from = -1;  ///< --clients-from N: one X-Forwarded-For client per thread
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--port")
      a.port = std::atoi(v.c_str());
    else if (k == "--mode")
      a.mode = v;
    else if (k == "--file")
      a.file = v;
    else if (k == "--run")
      a.run = std::atol(v.c_str());
    else if (k == "--seconds")
      a.seconds = std::atof(v.c_str());
    else if (k == "--threads")
      a.threads = std::atoi(v.c_str());
    else if (k == "--clients-from")
      a.clients_from = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  std::string body;
  if (a.mode == "upload") {
    std::ifstream in(a.file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", a.file.c_str());
      return 2;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    body = ss.str();
  }
  const std::string svg = "/api/runs/" + std::to_string(a.run) + "/flamegraph.svg";
  std::string etag;
  if (a.mode == "svg-304") {
    httplib::Client c("127.0.0.1", a.port);
    auto r = c.Get(svg.c_str());
    if (!r) return 1;
    etag = r->get_header_value("ETag");
  }
  std::atomic<long> ok{0}, failed{0}, bytes{0}, counter{0};
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(a.seconds);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(a.threads));
  std::mutex mu;
  std::map<int, long> statuses;  // failed requests by status (0: no answer)
  for (int t = 0; t < a.threads; ++t)
    threads.emplace_back([&, t] {
      httplib::Client c("127.0.0.1", a.port);
      c.set_keep_alive(true);
      c.set_read_timeout(120);
      if (a.clients_from >= 0)
        c.set_default_headers(
            {{"X-Forwarded-For", "10." + std::to_string(a.clients_from) + "." +
                                     std::to_string(t / 256) + "." + std::to_string(t % 256)}});
      while (std::chrono::steady_clock::now() < deadline) {
        int want = a.mode == "upload" ? 201 : a.mode == "svg-304" ? 304 : 200;
        auto send = [&]() {
          if (a.mode == "upload")
            return c.Post("/api/runs?name=bench&tag=bench=upload", body, "text/plain");
          if (a.mode == "svg-cached") return c.Get(svg.c_str());
          if (a.mode == "svg-304") return c.Get(svg.c_str(), {{"If-None-Match", etag}});
          if (a.mode == "svg-cold")
            return c.Get((svg + "?from=" + std::to_string(++counter)).c_str());
          return c.Get((svg + "?title=t" + std::to_string(counter++)).c_str());
        };
        httplib::Result r = send();
        if (r && r->status == want) {
          ++ok;
          bytes += static_cast<long>(a.mode == "upload" ? body.size() : r->body.size());
        } else {
          ++failed;
          std::lock_guard<std::mutex> lock(mu);
          ++statuses[r ? r->status : 0];
        }
      }
    });
  for (auto& th : threads) th.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%-13s requests %6ld failures %ld seconds %.2f  %9.1f req/s  %8.1f MB/s",
              a.mode.c_str(), ok.load(), failed.load(), secs, ok / secs, bytes / secs / 1e6);
  for (const auto& [status, n] : statuses) std::printf("  %d: %ld", status, n);
  std::printf("\n");
  return failed > 0 ? 1 : 0;
}
