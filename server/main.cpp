// luaflame-server: stores profile runs in SQLite and serves flame graphs.
//
// Startup: config, store (migrated), routes; then listen. SIGTERM/SIGINT:
// stop accepting, let in-flight requests finish, close the store cleanly.
// A retention thread deletes old runs as configured.
#include <netdb.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <condition_variable>
#include <iostream>
#include <thread>

#include "app.hpp"
#include "front.hpp"

extern char** environ;

namespace {

// Marks live runs that got no data for cfg.stale_minutes as finished (a
// collector that died, a Pyroscope series that stopped), so they are cached
// and fall under retention.
void finish_stale(lfs::App& app) {
  const int64_t cutoff = lfs::now_ns() - static_cast<int64_t>(app.cfg.stale_minutes) * 60000000000LL;
  lfs::RunFilter f;
  f.status = "live";
  f.limit = 1000;
  for (const lfs::RunInfo& r : app.store->list_runs(f).runs) {
    if (std::max(r.ended_ns, r.started_ns) >= cutoff) continue;
    app.store->finish(r.id, "", r.ended_ns);
    spdlog::info("run {} had no data for {} minutes: marked finished", r.id, app.cfg.stale_minutes);
  }
}

void retention_loop(lfs::App& app, std::mutex& mu, std::condition_variable& cv, bool& stopping) {
  const lfs::Config& c = app.cfg;
  std::unique_lock<std::mutex> lock(mu);
  while (!stopping) {
    lock.unlock();
    try {
      if (c.stale_minutes > 0) finish_stale(app);
      int64_t older = c.keep_days > 0 ? lfs::now_ns() - static_cast<int64_t>(c.keep_days * 86400e9) : 0;
      for (int64_t id : app.store->retain(older, c.keep_runs, c.disk_budget)) {
        app.forget(id);
        spdlog::info("retention: deleted run {}", id);
      }
    } catch (const std::exception& e) {
      spdlog::error("retention: {}", e.what());
    }
    lock.lock();
    cv.wait_for(lock, std::chrono::seconds(c.retention_interval), [&] { return stopping; });
  }
}

// Why binding host:port fails: a probe bind with the server's own socket
// options, so the message names the real cause ("in use", "cannot assign").
std::string bind_error(const std::string& host, int port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0)
    return "cannot listen on " + host + ":" + std::to_string(port) + ": " + gai_strerror(rc);
  int err = 0;
  for (addrinfo* a = res; a; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) { err = errno; continue; }
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    err = bind(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    close(fd);
    if (err == 0) break;
  }
  freeaddrinfo(res);
  std::string where = host + ":" + std::to_string(port);
  if (err == EADDRINUSE) return where + " is in use (another luaflame-server or program listens there)";
  return "cannot listen on " + where + (err ? std::string(": ") + std::strerror(err) : std::string());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc), env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  lfs::ConfigResult parsed = lfs::parse_config(args, env);
  if (parsed.help) { std::cout << lfs::config_usage(); return 0; }
  if (!parsed.error.empty()) { std::cerr << "luaflame-server: " << parsed.error << "\n"; return 2; }
  const lfs::Config& cfg = parsed.config;
  spdlog::set_level(spdlog::level::from_str(cfg.log_level));

  // Block the stop signals in every thread; one thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // Connections live in the front loop until a whole request head has come
  // (front.hpp): idle and slow clients hold no worker.
  lfs::FrontServer svr(lfs::FrontOptions::from(cfg));
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a second
  // server binds the same port and the kernel splits connections between two stores.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // Bind before opening the store: a second server on a taken port leaves the store alone.
  if (!svr.bind_to_port(cfg.host.c_str(), cfg.port)) {
    std::cerr << "luaflame-server: " << bind_error(cfg.host, cfg.port) << "\n";
    return 1;
  }
  std::unique_ptr<lfs::Store> store;
  try {
    lfs::StoreOptions so;
    so.max_stacks = cfg.max_stacks;
    so.sync_full = cfg.sync_full;
    store = lfs::open_sqlite_store(cfg.data_dir, so);
  } catch (const std::exception& e) {
    std::cerr << "luaflame-server: " << e.what() << "\n";
    return 1;
  }
  lfs::App app(cfg, store.get());
  lfs::setup(svr, app);
  std::thread signals([&svr, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    spdlog::info("signal {}: finishing requests in flight", sig);
    svr.stop();
  });
  signals.detach();
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::thread retention([&] { retention_loop(app, mu, cv, stopping); });

  spdlog::info("luaflame-server {} listening on http://{}:{} (data {}, web {})", LUAFLAME_SERVER_VERSION, cfg.host,
               cfg.port, cfg.data_dir, cfg.web_dir);
  svr.listen_after_bind();  // returns after stop(), once the workers are done

  { std::lock_guard<std::mutex> lock(mu); stopping = true; }
  cv.notify_all();
  retention.join();
  store->close();
  spdlog::info("store closed; bye");
  return 0;
}
