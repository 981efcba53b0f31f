// An HTTP client over luaflame's transport (collector/http/transport.h),
// which is loaded on first use: the collector's stream and the `luaflame`
// command's push and compare reach the server through it, and a program
// that never sends anything never loads cpp-httplib or OpenSSL.
#pragma once

#include <memory>
#include <string>

namespace lfhttp {

/// What a request got: an HTTP answer, or why there was none.
struct Answer {
  int status = 0;  ///< 0: no answer
  std::string body;
  int code = 0;       ///< transport.h's luaflame_http_error when status is 0
  std::string error;  ///< in words ("connection refused or host unreachable")
};

class Client {
 public:
  Client();
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  /// False, with why, when the transport cannot be loaded (its path and
  /// dlerror's words) or refuses `origin` ("http[s]://host[:port]").
  bool open(const std::string& origin, std::string& why);
  void header(const std::string& name, const std::string& value);
  void timeouts(double connect_s, double read_s, double write_s);
  void compress(bool on);
  Answer get(const std::string& path);
  Answer post(const std::string& path, const std::string& body, const std::string& type);
  /// From any thread: the request in flight ends (unanswered).
  void stop();

 private:
  Answer request(const char* method, const std::string& path, const std::string& body,
                 const char* type);
  void* c_ = nullptr;
};

}  // namespace lfhttp
