// multipart/form-data uploads (the Go and Java Pyroscope agents) as the server
// takes them: a whole HTTP request through httplib's request processing (its
// multipart parser), the server's pre-routing checks, read_multipart's body
// limit and the real /ingest and /api/runs handlers over a SQLite store in
// /dev/shm (recreated every kRecycle inputs so it stays small).
// Input: [route][unused] then the body after the request line and headers made
// here (boundary "B", Content-Length of the body as given). The fuzzer finds
// the "--B" delimiters from the seed corpus (.ci/fuzz.sh).
// Checks: every request gets an answer with a status below 500 (a malformed
// body is a 4xx with a reason, never a crash or an internal error).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "http/app.hpp"
#include "store/store.hpp"

namespace {

// An HTTP connection held in memory: reads the request, keeps the answer.
class MemStream : public httplib::Stream {
 public:
  explicit MemStream(std::string in) : in_(std::move(in)) {}
  bool is_readable() const override { return pos_ < in_.size(); }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    size_t n = std::min(size, in_.size() - pos_);
    in_.copy(ptr, n, pos_);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    out.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 40000;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 8080;
  }
  socket_t socket() const override { return INVALID_SOCKET; }
  std::string out;

 private:
  std::string in_;
  size_t pos_ = 0;
};

// httplib::Server with its one-request entry point reachable.
struct FuzzServer : httplib::Server {
  using httplib::Server::process_request;
};

constexpr int kRecycle = 500;
constexpr std::size_t kMaxBody = 1u << 16;

struct World {
  std::string dir;
  std::unique_ptr<lfs::Store> store;
  std::unique_ptr<lfs::App> app;
  std::unique_ptr<FuzzServer> svr;
  int uses = 0;

  World() {
    spdlog::set_level(spdlog::level::warn);  // a line per request would flood the log
    const char* base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    dir = std::string(base) + "/luaflame-fuzz-multipart-" + std::to_string(getpid());
    open();
  }
  ~World() { close(); }
  void open() {
    std::filesystem::create_directories(dir);
    lfs::StoreOptions so;
    so.sync_full = false;
    store = lfs::open_sqlite_store(dir, so);
    lfs::Config cfg;
    cfg.data_dir = dir;
    cfg.max_body = kMaxBody;
    app = std::make_unique<lfs::App>(cfg, store.get());
    svr = std::make_unique<FuzzServer>();
    lfs::setup(*svr, *app);
  }
  void close() {
    svr.reset();
    app.reset();
    store.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  FuzzServer& server() {
    if (++uses > kRecycle) {
      close();
      open();
      uses = 1;
    }
    return *svr;
  }
};

const char* const kTargets[] = {
    "/ingest?name=fuzz.cpu%7Bhost%3Da%7D&from=1700000000&until=1700000010",
    "/ingest?name=fuzz.alloc_objects&format=pprof",
    "/ingest?name=fuzz.cpu&format=lines&units=samples",
    "/api/runs?name=fuzz&tag=k%3Dv",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > kMaxBody) return 0;
  static World world;
  std::string body(reinterpret_cast<const char*>(data + 2), size - 2);
  std::string req = std::string("POST ") + kTargets[data[0] & 3] +
                    " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    "Content-Type: multipart/form-data; boundary=B\r\n"
                    "Content-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body;
  MemStream s(std::move(req));
  bool closed = false;
  FuzzServer& svr = world.server();
  svr.process_request(s, true, closed, [](httplib::Request&) {});
  // "HTTP/1.1 NNN ..."
  if (s.out.size() < 12 || s.out.compare(0, 9, "HTTP/1.1 ") != 0) std::abort();
  int status = std::atoi(s.out.c_str() + 9);
  if (status < 200 || status >= 500) {
    std::fprintf(stderr, "fuzz_multipart: status %d\n%.2000s\n", status, s.out.c_str());
    std::abort();
  }
  return 0;
}
