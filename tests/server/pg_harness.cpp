#include "pg_harness.hpp"

#define DOCTEST_CONFIG_IMPLEMENT
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "store/postgres/pg_client.hpp"

namespace lft {
namespace {

namespace fs = std::filesystem;

int free_loopback_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    throw std::runtime_error("bind");
  }
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// The user PostgreSQL runs as: initdb refuses root.
struct RunAs {
  bool drop = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

RunAs run_as() {
  RunAs r;
  if (geteuid() != 0) return r;
  for (const char* name : {"postgres", "nobody"})
    if (passwd* pw = getpwnam(name)) {
      r.drop = true;
      r.uid = pw->pw_uid;
      r.gid = pw->pw_gid;
      return r;
    }
  throw std::runtime_error("running as root and neither user postgres nor nobody exists");
}

// Runs argv as `who`, output appended to `log`; waits at most `seconds`. Returns the exit status.
int run(const std::vector<std::string>& argv, const RunAs& who, const std::string& log,
        int seconds) {
  // Made before fork: the child of a process with threads may not allocate.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    if (who.drop && (setgroups(0, nullptr) != 0 || setgid(who.gid) != 0 || setuid(who.uid) != 0))
      _exit(126);
    execv(args[0], args.data());
    _exit(127);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Stops PostgreSQL in `dir` (immediate: the data is thrown away) and removes the folder.
void stop_and_remove(const std::string& dir, const RunAs& who) {
  run({pg_bindir() + "/pg_ctl", "-D", dir + "/data", "-m", "immediate", "-w", "-t", "20", "stop"},
      who, "/dev/null", 30);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace

std::string pg_bindir() {
  if (const char* env = std::getenv("LUAFLAME_PG_BINDIR"); env && *env)
    return fs::exists(fs::path(env) / "initdb") ? env : "";
  std::string best;
  int best_version = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    int v = std::atoi(e.path().filename().c_str());
    fs::path bin = e.path() / "bin";
    if (v > best_version && fs::exists(bin / "initdb") && fs::exists(bin / "pg_ctl")) {
      best_version = v;
      best = bin.string();
    }
  }
  return best;
}

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && (std::string(ci) == "true" || std::string(ci) == "1");
}

Postgres& Postgres::shared() {
  static Postgres instance;
  return instance;
}

Postgres::Postgres() {
  const std::string bin = pg_bindir();
  if (bin.empty())
    throw std::runtime_error("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb)");
  const RunAs who = run_as();
  char tmpl[] = "/tmp/luaflame-pg-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  if (who.drop && chown(dir_.c_str(), who.uid, who.gid) != 0)
    throw std::runtime_error("chown " + dir_);

  // The watchdog: its own session (a signal to the test's process group spares it), it waits
  // for the pipe to close (this process exiting in any way), then stops PostgreSQL.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  pid_t pid = fork();
  if (pid == 0) {
    setsid();
    close(fds[1]);
    char c;
    for (;;) {
      ssize_t n = read(fds[0], &c, 1);
      if (n == 0 || (n < 0 && errno != EINTR)) break;
    }
    stop_and_remove(dir_, who);
    _exit(0);
  }
  close(fds[0]);
  watchdog_fd_ = fds[1];
  watchdog_pid_ = pid;

  const std::string log = dir_ + "/setup.log";
  if (run({bin + "/initdb", "-D", dir_ + "/data", "-U", "luaflame", "-A", "trust", "-E", "UTF8",
           "--locale=C", "-N"},
          who, log, 120) != 0)
    throw std::runtime_error("initdb failed: " + read_file(log));
  // Loopback TCP only, the socket in our folder; fsync off: the tests kill servers, not machines.
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = free_loopback_port();
    std::string opts = "-p " + std::to_string(port_) + " -k " + dir_ +
                       " -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
                       " -c shared_buffers=64MB";
    if (run({bin + "/pg_ctl", "-D", dir_ + "/data", "-l", dir_ + "/postgres.log", "-w", "-t", "60",
             "-o", opts, "start"},
            who, log, 90) == 0)
      return;
  }
  throw std::runtime_error("pg_ctl start failed: " + read_file(log) +
                           read_file(dir_ + "/postgres.log"));
}

Postgres::~Postgres() {
  if (watchdog_fd_ >= 0)
    close(watchdog_fd_);  // the watchdog stops PostgreSQL and removes the folder
  if (watchdog_pid_ > 0) waitpid(watchdog_pid_, nullptr, 0);
}

std::string Postgres::new_database() {
  const std::string base = "postgresql://luaflame@127.0.0.1:" + std::to_string(port_) + "/";
  const std::string name = "t" + std::to_string(getpid()) + "_" + std::to_string(++databases_);
  lfs::pg::Conn c(base + "postgres");
  c.exec(("CREATE DATABASE " + name).c_str());  // name made here from digits: no quoting needed
  return base + name;
}

int run_pg_tests(int argc, char** argv) {
  if (pg_bindir().empty()) {
    std::cerr << "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb; "
                 "scripts/install-deps.sh --test installs it)";
    if (in_ci()) {
      std::cerr << ": FAILED, CI must run these tests\n";
      return 1;
    }
    std::cerr << ": skipped\n";
    return 77;
  }
  doctest::Context ctx(argc, argv);
  int rc = ctx.run();
  // A case that could not run (note_skipped) makes the program a skip, not a
  // pass, unless another failed: CTest then shows it as skipped.
  return rc == 0 && skipped_cases() > 0 ? 77 : rc;
}

int& skipped_cases() {
  static int n = 0;
  return n;
}

}  // namespace lft
