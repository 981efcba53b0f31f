// luaflame-server: stores profile runs in SQLite and serves flame graphs.
//
// Startup: config, store (migrated), routes; then listen. SIGTERM/SIGINT:
// stop accepting, let in-flight requests finish, close the store cleanly.
// A retention thread deletes old runs as configured.
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <algorithm>
#include <condition_variable>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include "http/app.hpp"
#include "http/front.hpp"

extern char** environ;

namespace {

// Marks live runs that got no data for cfg.stale_minutes as finished (a
// collector that died, a Pyroscope series that stopped), so they are cached
// and fall under retention. "No data" is by when data arrived, not by its
// timestamps: a stream uploading yesterday's samples is not idle.
void finish_stale(lfs::App& app) {
  const int64_t cutoff = lfs::now_ns() - static_cast<int64_t>(app.cfg.stale_minutes * 60e9);
  for (int64_t id : app.store->finish_idle(cutoff))
    spdlog::info("run {} had no data for {} minutes: marked finished", id, app.cfg.stale_minutes);
}

// The disk reserve: a preallocated file (real blocks, fallocate) next to the
// store. When a write finds the disk full it is deleted, so that DELETE and
// retention (SQLite needs some space for its journal to delete) can still run;
// SQLite reuses the pages freed by deletes, so uploads succeed again without a
// restart. It is made again by the retention thread once the filesystem has
// room for it (plus 1 MiB). Threads: release() from any worker, refill() from
// the retention thread; `mu` orders them.
class DiskReserve {
 public:
  /// `spent`: set while the reserve is not in place for want of room (the
  /// server then refuses writes, App::reserve_spent); null: not tracked.
  DiskReserve(std::string path, uint64_t size, std::atomic<bool>* spent)
      : path_(std::move(path)), size_(size), spent_(spent) {}
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!held_) return;
    ::unlink(path_.c_str());
    held_ = false;
    set_spent(true);
    spdlog::warn(
        "disk full: released the {} byte reserve {} so deletes can run; writes are refused "
        "until deletes make room for it again",
        size_, path_);
  }
  void refill() {
    std::lock_guard<std::mutex> lock(mu_);
    if (held_ || size_ == 0) return;
    struct statvfs fs {};
    if (statvfs(path_.c_str(), &fs) != 0 && statvfs(dir().c_str(), &fs) != 0) return;
    if (uint64_t(fs.f_bavail) * fs.f_frsize < size_ + (1u << 20)) return set_spent(true);
    int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    int rc = posix_fallocate(fd, 0, static_cast<off_t>(size_));
    ::close(fd);
    if (rc != 0) {
      ::unlink(path_.c_str());
      if (rc == ENOSPC) set_spent(true);
      return;
    }
    held_ = true;
    set_spent(false);
    spdlog::info("disk reserve of {} bytes in place ({})", size_, path_);
  }

 private:
  std::string dir() const { return path_.substr(0, path_.rfind('/')); }
  void set_spent(bool v) {
    if (spent_) spent_->store(v);
  }
  std::mutex mu_;
  std::string path_;
  uint64_t size_;
  std::atomic<bool>* spent_;
  bool held_ = false;
};

void retention_loop(lfs::App& app, DiskReserve& reserve, std::mutex& mu,
                    std::condition_variable& cv, bool& stopping) {
  const lfs::Config& c = app.cfg;
  std::unique_lock<std::mutex> lock(mu);
  while (!stopping) {
    lock.unlock();
    reserve.refill();
    try {
      // On a shared database one server runs retention; the others skip the pass.
      if (app.store->leads_retention()) {
        if (c.stale_minutes > 0) finish_stale(app);
        int64_t older =
            c.keep_days > 0 ? lfs::now_ns() - static_cast<int64_t>(c.keep_days * 86400e9) : 0;
        lfs::RetainOptions ro;
        ro.now_ns = lfs::now_ns();
        ro.older_than_ns = older;
        ro.keep_runs = c.keep_runs;
        ro.budget_bytes = c.disk_budget;
        lfs::RetainResult rr = app.store->retain(ro);
        for (int64_t id : rr.trimmed) app.forget(id);
        for (int64_t id : rr.deleted) {
          app.forget(id);
          spdlog::info("retention: deleted run {}", id);
        }
      }
    } catch (const std::exception& e) {
      spdlog::error("retention: {}", e.what());
    }
    lock.lock();
    cv.wait_for(lock, std::chrono::seconds(c.retention_interval), [&] { return stopping; });
  }
}

// The bound port, written whole or not at all (a temporary file renamed over
// the name): a test that waits for the file never reads half a number.
bool write_port_file(const std::string& path, int port) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << "\n";
    if (!out.flush()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
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
    if (fd < 0) {
      err = errno;
      continue;
    }
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    err = bind(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    close(fd);
    if (err == 0) break;
  }
  freeaddrinfo(res);
  std::string where = host + ":" + std::to_string(port);
  if (err == EADDRINUSE)
    return where + " is in use (another luaflame-server or program listens there)";
  return "cannot listen on " + where +
         (err ? std::string(": ") + std::strerror(err) : std::string());
}

// Binds the listening socket (before the store opens: a second server on a
// taken port leaves the store alone) and writes --port-file. False after
// saying why on stderr.
bool bind_server(lfs::FrontServer& svr, lfs::Config& cfg) {
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a second
  // server binds the same port and the kernel splits connections between two stores.
  socket_t listen_fd = INVALID_SOCKET;  // the socket httplib binds (its last one)
  svr.set_socket_options([&listen_fd](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd = sock;
  });
  int bound = cfg.port == 0 ? svr.bind_to_any_port(cfg.host)
                            : (svr.bind_to_port(cfg.host, cfg.port) ? cfg.port : -1);
  if (bound <= 0) {
    std::cerr << "luaflame-server: " << bind_error(cfg.host, cfg.port) << "\n";
    return false;
  }
  // httplib listens with a backlog of 5: a burst of connections (a balancer
  // opening them for 70 clients) had SYNs dropped and retried after 1 s, which
  // nginx's 250 ms connect timeout answered with 504. Linux takes a second
  // listen() on a listening socket as a new backlog.
  if (listen_fd != INVALID_SOCKET) ::listen(listen_fd, SOMAXCONN);
  cfg.port = bound;  // links made from --listen name the port really bound
  if (!cfg.port_file.empty() && !write_port_file(cfg.port_file, bound)) {
    std::cerr << "luaflame-server: cannot write --port-file " << cfg.port_file << ": "
              << std::strerror(errno) << "\n";
    return false;
  }
  return true;
}

// The store of --store (default: SQLite in --data) and, for PostgreSQL, its
// source store (SQLite's is opened by App). False after saying why on stderr.
bool open_stores(const lfs::Config& cfg, std::unique_ptr<lfs::Store>& store,
                 std::unique_ptr<lfs::SourceStore>& sources) {
  try {
    lfs::StoreOptions so;
    so.max_stacks = cfg.max_stacks;
    so.sync_full = cfg.sync_full;
    if (!cfg.resolutions.empty()) lfs::parse_resolutions(cfg.resolutions, so.resolutions);
    store = lfs::open_store(cfg.store.empty() ? "sqlite:" + cfg.data_dir : cfg.store, so);
    if (!cfg.store.empty()) sources = lfs::open_store_sources(cfg.store);
    return true;
  } catch (const std::exception& e) {
    std::cerr << "luaflame-server: " << e.what() << "\n";
    return false;
  }
}

// Serves until SIGTERM or SIGINT (waited for by a thread of its own), with the
// disk reserve and the retention thread; then closes the store.
void serve(lfs::FrontServer& svr, lfs::App& app, const sigset_t& stop_signals) {
  const lfs::Config& cfg = app.cfg;
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
  // The reserve guards the disk of a store of this server's own (SQLite in
  // --data); a PostgreSQL store's disk is not this server's.
  DiskReserve reserve(cfg.data_dir + "/reserve.bin", cfg.disk_reserve,
                      cfg.store.empty() ? &app.reserve_spent : nullptr);
  reserve.refill();
  app.on_disk_full = [&reserve, &cv] {
    reserve.release();
    cv.notify_all();  // a retention pass now (--disk-budget, --keep-*)
  };
  app.after_delete = [&app, &reserve] {
    app.store->give_back_space();
    reserve.refill();
  };
  std::thread retention([&] { retention_loop(app, reserve, mu, cv, stopping); });
  spdlog::info("luaflame-server {} listening on http://{}:{} (store {}, web {})",
               LUAFLAME_SERVER_VERSION, cfg.host, cfg.port,
               lfs::describe_store(cfg.store.empty() ? cfg.data_dir : cfg.store), cfg.web_dir);
  svr.listen_after_bind();  // returns after stop(), once the workers are done
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
  }
  cv.notify_all();
  retention.join();
  app.store->close();
  spdlog::info("store closed; bye");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc), env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  lfs::ConfigResult parsed = lfs::parse_config(args, env);
  if (parsed.help) {
    std::cout << lfs::config_usage();
    return 0;
  }
  if (!parsed.error.empty()) {
    std::cerr << "luaflame-server: " << parsed.error << "\n";
    return 2;
  }
  lfs::Config cfg = parsed.config;
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
  if (!bind_server(svr, cfg)) return 1;
  std::unique_ptr<lfs::Store> store;
  std::unique_ptr<lfs::SourceStore> sources;  // PostgreSQL's; SQLite's is opened by App
  if (!open_stores(cfg, store, sources)) return 1;
  lfs::App app(cfg, store.get());
  app.sources_override = sources.get();
  lfs::setup(svr, app);
  serve(svr, app, stop_signals);
  return 0;
}
