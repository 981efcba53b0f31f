// The `luaflame` command's HTTP plumbing, in one place: where the server is,
// how to reach it, and what a failed request means in words. push and
// compare (cmd_push.cpp) only say which request to make.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace lfcli {

using Query = std::vector<std::pair<std::string, std::string>>;

/// Where the server is and how to reach it (shared by push and compare).
struct ClientOptions {
  std::string server;  ///< --server, else $LUAFLAME_SERVER, else "http://127.0.0.1:8080"
  std::string token;   ///< --token, else $LUAFLAME_TOKEN, else none (sent as a Bearer token)
  int timeout_s = 60;  ///< --timeout SECONDS: connect, read and write timeout (default 60)
};

/// ClientOptions with the environment's defaults applied.
ClientOptions default_client_options();

/// What a request got: an HTTP answer, or why there was none.
struct Reply {
  int status = 0;  ///< 0: no answer (see `error`)
  std::string body;
  std::string error;  ///< "cannot reach URL: why" when status is 0
};

/// A server at http[s]://host[:port][/prefix] (a reverse proxy's prefix works).
class HttpClient {
 public:
  /// False, with a reason, when `options.server` is not such a URL.
  bool open(const ClientOptions& options, std::string& why);
  HttpClient();
  ~HttpClient();

  Reply get(const std::string& path, const Query& query);
  /// POSTs `body`; gzip-compresses it when `gzip`.
  Reply post(const std::string& path, const Query& query, const std::string& body,
             const std::string& type, bool gzip);

  /// An absolute link for a path the server answered with (absolute or not).
  std::string link(const std::string& path) const;
  /// "http://host:port/prefix", for messages.
  std::string base() const { return origin_ + prefix_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string origin_, prefix_;
};

/// `path` with `query` percent-encoded after it.
std::string with_query(const std::string& path, const Query& query);

/// The server's error answer ({"error", "line", "reason"} or anything else)
/// as one line; `file` names the upload whose line was bad ("" for none).
std::string http_error(const Reply& reply, const std::string& file);

}  // namespace lfcli
