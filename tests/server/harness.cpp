#include "harness.hpp"

#include "../support/paths.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
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

namespace {

// The port a server wrote to its --port-file, or 0 while there is none yet.
int read_port_file(const std::string& path) {
  std::ifstream in(path);
  int port = 0;
  return (in >> port) ? port : 0;
}

}  // namespace

// The server listens on port 0 and writes the port the system gave it to a
// file of its own: no other test's server can answer in its place, and no
// port is picked and then lost to another process before the bind.
ServerProc::ServerProc(const std::string& data_dir, const std::vector<std::string>& extra) {
  static int started = 0;
  std::filesystem::create_directories(data_dir);
  const std::string tag = std::to_string(getpid()) + "-" + std::to_string(++started);
  const std::string port_file = data_dir + "/server-" + tag + ".port";
  log_path_ = data_dir + "/server-" + tag + ".log";
  std::filesystem::remove(port_file);
  std::vector<std::string> args = {server_bin(), "--listen", "127.0.0.1:0", "--port-file",
                                   port_file,    "--data",   data_dir};
  args.insert(args.end(), extra.begin(), extra.end());
  for (std::size_t i = 0; i + 1 < extra.size(); ++i)  // the last --listen is the server's
    if (extra[i] == "--listen") host_ = extra[i + 1].substr(0, extra[i + 1].rfind(':'));
  // Everything the child needs is made before fork: a child of a process
  // with threads may not allocate (another thread may have held the
  // allocator's lock at fork: clang 14's ASan child then waits forever).
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int log_fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  pid_ = fork();
  if (pid_ == 0) {
    if (log_fd >= 0) {
      dup2(log_fd, 1);
      dup2(log_fd, 2);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (log_fd >= 0) ::close(log_fd);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
    if (port_ == 0) port_ = read_port_file(port_file);
    if (port_ != 0) {
      httplib::Client c(host_, port_);
      c.set_connection_timeout(1);
      if (auto r = c.Get("/healthz"); r && r->status == 200) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (pid_ > 0) stop(9);
  throw std::runtime_error("luaflame-server did not start; log: " + log());
}

ServerProc::~ServerProc() {
  if (pid_ > 0) stop(9);
}

httplib::Client ServerProc::client() const {
  httplib::Client c(host_, port_);
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
