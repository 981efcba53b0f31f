// Starts the real luaflame-server on a free 127.0.0.1 port for integration
// tests, and stops it (SIGTERM, or kill -9 for crash tests).
#pragma once

#include <httplib.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace lft {

/// A fresh folder under /tmp, removed by the destructor.
struct TempDir {
  std::string path;
  TempDir();
  ~TempDir();
};

class ServerProc {
 public:
  /// Starts luaflame-server with --data `data_dir` and `extra` flags, and
  /// waits (at most 15 s) until /healthz answers.
  ServerProc(const std::string& data_dir, const std::vector<std::string>& extra = {});
  ~ServerProc();
  ServerProc(const ServerProc&) = delete;
  ServerProc& operator=(const ServerProc&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url() const { return "http://" + host_ + ":" + std::to_string(port_); }
  /// The address it listens on: 127.0.0.1, or the host of a `--listen HOST:PORT` in `extra`.
  const std::string& host() const { return host_; }
  /// A client with timeouts, for this server.
  httplib::Client client() const;
  /// Sends `sig` and waits (at most 20 s); returns the exit status, or 128+signal.
  int stop(int sig = 15);
  /// The server's log so far.
  std::string log() const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string host_ = "127.0.0.1";
  std::string log_path_;
};

/// A free TCP port on 127.0.0.1 (bound and released).
int free_port();

/// A new TCP connection to 127.0.0.1:port, or -1 (for tests that write raw
/// bytes: half bodies, over-limit bodies).
int connect_loopback(int port);

}  // namespace lft
