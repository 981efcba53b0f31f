// luaflame-server: stores profile runs in SQLite and serves flame graphs.
//
// Startup: config, store (migrated), routes; then listen. SIGTERM/SIGINT:
// stop accepting, let in-flight requests finish, close the store cleanly.
// A retention thread deletes old runs as configured.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <iostream>
#include <thread>

#include "app.hpp"

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
        app.cache.forget(id);
        app.trees.forget(id);
        spdlog::info("retention: deleted run {}", id);
      }
    } catch (const std::exception& e) {
      spdlog::error("retention: {}", e.what());
    }
    lock.lock();
    cv.wait_for(lock, std::chrono::seconds(c.retention_interval), [&] { return stopping; });
  }
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
  httplib::Server svr;
  svr.new_task_queue = [n = cfg.threads] { return new httplib::ThreadPool(static_cast<std::size_t>(n)); };
  svr.set_keep_alive_timeout(cfg.keep_alive_seconds);
  svr.set_keep_alive_max_count(100);
  lfs::setup(svr, app);

  if (!svr.bind_to_port(cfg.host.c_str(), cfg.port)) {
    std::cerr << "luaflame-server: cannot listen on " << cfg.host << ":" << cfg.port << "\n";
    return 1;
  }
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
