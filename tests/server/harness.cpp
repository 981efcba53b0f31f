#include "harness.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace lft {

TempDir::TempDir() {
  char tmpl[] = "/tmp/luaflame-server-test-XXXXXX";
  const char* p = mkdtemp(tmpl);
  if (!p) throw std::runtime_error("mkdtemp failed");
  path = p;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    throw std::runtime_error("bind");
  }
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

int connect_loopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
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

ServerProc::ServerProc(const std::string& data_dir, const std::vector<std::string>& extra) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = free_port();
    log_path_ = data_dir + "/server-" + std::to_string(port_) + ".log";
    std::filesystem::create_directories(data_dir);
    std::vector<std::string> args = {LUAFLAME_SERVER_BIN, "--listen",
                                     "127.0.0.1:" + std::to_string(port_), "--data", data_dir};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::fopen(log_path_.c_str(), "a");
      if (f) {
        dup2(fileno(f), 1);
        dup2(fileno(f), 2);
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }  // exited: port taken? retry
      httplib::Client c("127.0.0.1", port_);
      c.set_connection_timeout(1);
      if (auto r = c.Get("/healthz"); r && r->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (pid_ > 0) stop(9);
  }
  throw std::runtime_error("luaflame-server did not start; log: " + log());
}

ServerProc::~ServerProc() {
  if (pid_ > 0) stop(9);
}

httplib::Client ServerProc::client() const {
  httplib::Client c("127.0.0.1", port_);
  c.set_connection_timeout(5);
  c.set_read_timeout(60);
  c.set_write_timeout(60);
  return c;
}

int ServerProc::stop(int sig) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, sig);
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

std::string ServerProc::log() const {
  std::ifstream in(log_path_);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace lft
