// The front loop of luaflame-server: one epoll thread owns every connection
// while it is idle or still sending its request head, and hands it to a
// worker only once a whole head has arrived. Why: cpp-httplib 0.11 gives each
// accepted connection a worker thread for its whole life and has per-read
// timeouts only, so 16 connections sending a byte every 3 s held all 16
// workers (issue 12). Here idle and trickling connections cost a few hundred
// bytes each and no thread; a head must arrive within --header-timeout, a
// whole request (head, body, answer) within --request-timeout; connections
// are counted in all and per client address; a head is bounded in bytes and
// lines before httplib parses (and stores) a single header. Kept-alive and
// pipelined requests keep their bytes in the connection's buffer between
// requests (httplib's own loop dropped pipelined requests).
#pragma once

#include <httplib.h>

#include <cstddef>
#include <memory>

#include "config.hpp"

namespace lfs {

/// What the front loop enforces; every figure comes from Config (see from()).
struct FrontOptions {
  std::size_t workers = 16;                 ///< --threads
  int header_timeout_seconds = 10;          ///< --header-timeout
  int keep_alive_seconds = 2;               ///< --keep-alive: idle time between requests
  int request_timeout_seconds = 120;        ///< --request-timeout
  std::size_t max_header_bytes = 32 << 10;  ///< --max-header-bytes
  std::size_t max_headers = 100;            ///< --max-headers
  std::size_t max_connections = 512;        ///< --max-connections
  std::size_t max_client_connections = 64;  ///< --max-client-connections
  std::size_t max_client_workers = 0;       ///< --max-client-workers; 0 = workers / 4
  std::size_t max_body = 64u << 20;         ///< --max-body: a larger declared body is refused (413)
  std::vector<Cidr> trusted_proxies;        ///< --trusted-proxy
  std::size_t min_body_rate = 1024;         ///< --min-body-rate, bytes/s after 10 s; 0 = none
  static FrontOptions from(const Config& c);
};

/// Worker thread, inside a route handler: moves the current request's body out
/// of the connection's buffer when all `length` bytes of it are there (the
/// loop read the body whole before handing the request over), so that a large
/// body is held once, not also copied by httplib's reader. False otherwise
/// (then read it with httplib's ContentReader); never on another thread.
bool take_buffered_body(std::size_t length, std::string& out);

/// An httplib::Server whose connections are owned by the front loop.
/// Use it like httplib::Server (routes, bind_to_port, listen_after_bind, stop);
/// do not replace new_task_queue.
class FrontServer : public httplib::Server {
 public:
  explicit FrontServer(const FrontOptions& opts);
  ~FrontServer() override;
  FrontServer(const FrontServer&) = delete;
  FrontServer& operator=(const FrontServer&) = delete;

  struct Impl;

 private:
  // httplib's accept loop calls this (through an inline task queue, on the
  // accept thread) for every accepted socket: it adopts the socket and returns.
  bool process_and_close_socket(socket_t sock) override;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lfs
