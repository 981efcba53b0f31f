// The HTTP side of luaflame-server: the state the handlers share, and the
// helpers that keep each handler a thin translation from HTTP to calls into
// the store and the engine (render.hpp).
#pragma once

#include <httplib.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "config.hpp"
#include "http/error.hpp"
#include "http/metrics.hpp"
#include "store/store.hpp"
#include "views/cache.hpp"
#include "views/render.hpp"
#include "views/sandwich.hpp"

namespace lfs {

/// What every handler can reach.
struct App {
  Config cfg;
  Store* store = nullptr;
  SvgCache cache;
  TreeCache trees{2000000};      ///< loaded trees of finished runs, at most 2M nodes in all
  TableCache tables{16u << 20};  ///< function tables of finished runs (details, /functions), 16 MiB
  PathCache paths{128u << 20};  ///< flat stacks of finished runs for sandwiches (issue 17), 128 MiB
  Metrics metrics;
  /// Paths of the routes that take a body (add_body_route): a body sent
  /// anywhere else is refused before a byte of it is read or decoded.
  std::vector<std::regex> body_routes;
  /// Called when a write failed because the disk is full (main releases the
  /// disk reserve so that deletes and retention can run).
  std::function<void()> on_disk_full;
  /// The disk reserve is not in place (released at a full disk, or no room
  /// for it): every POST is refused with 507 until deletes have given it room
  /// again, so the uploads that follow a full disk cannot spend the space
  /// deletes need (issue 31: after them every DELETE answered 507). Set and
  /// cleared by main's DiskReserve; false where it does not apply.
  std::atomic<bool> reserve_spent{false};
  /// Called after a DELETE while reserve_spent: gives the space back to the
  /// file system and makes the reserve again when it fits.
  std::function<void()> after_delete;
  explicit App(Config c, Store* s) : cfg(std::move(c)), store(s), cache(cfg.cache_bytes) {}
  /// Drops everything cached about a deleted run, and its source texts.
  void forget(int64_t run) {
    cache.forget(run);
    trees.forget(run);
    tables.forget(run);
    paths.forget(run);
    forget_sources(run);
  }
  /// Source texts of runs (issue 17): opened at first use, `cfg.data_dir`/sources.db.
  /// A store other than SQLite may set `sources_override` before serving.
  SourceStore& sources() {
    if (sources_override) return *sources_override;
    std::call_once(sources_once_, [this] { sources_ = open_sqlite_sources(cfg.data_dir); });
    return *sources_;
  }
  SourceStore* sources_override = nullptr;

 private:
  void forget_sources(int64_t run);  // handlers_views.cpp
  std::once_flag sources_once_;
  std::unique_ptr<SourceStore> sources_;
};

/// Registers every route on `svr` (the pages, the API, /healthz, /metrics),
/// the access log, and the error and exception handlers.
void setup(httplib::Server& svr, App& app);

// Route registration per area (handlers_*.cpp).
using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
void add_route(httplib::Server& svr, App& app, const char* method, const char* pattern,
               const char* route, Handler h);
/// Like add_route for POST bodies: the body is read here with the size limit
/// (after gzip decoding) and the token check, and handed over in req.body.
/// Multipart bodies are read into req.files on routes made with multipart =
/// true, and refused with 415 on the others.
void add_body_route(httplib::Server& svr, App& app, const char* pattern, const char* route,
                    Handler h, bool multipart = false);
/// The request carries the token (always true without --token).
bool authorized(const App& app, const httplib::Request& req);
/// The origin of this server's own pages: --public-url, else http://HOST.
std::string own_origin(const App& app, const httplib::Request& req);
/// A write to refuse as cross-site (CSRF, see cross_site_simple_write): no --token is set and a
/// browser sent it from a page that is neither this server's nor one of --cors-origin's.
bool cross_site_refused(const App& app, const httplib::Request& req);
/// Sends the response already in `res`, then closes the connection (for
/// refusals that leave the body unread).
void close_after_response(httplib::Response& res);
/// The answer to a cross-site write (CSRF).
extern const char* const kCrossSite;
/// Runs a route's handler, every exception turned into a JSON error (http_util.cpp).
void run_guarded(const char* route, const Handler& h, const httplib::Request& req,
                 httplib::Response& res);
/// The route the access log names for the request this thread serves.
void set_request_route(const char* route);
/// Whether this thread's request body is gzip: its Content-Encoding was taken
/// off before httplib could decode it, and add_body_route decodes it (Gunzip).
bool request_body_gzip();

void setup_write_routes(httplib::Server& svr, App& app);
void setup_read_routes(httplib::Server& svr, App& app);
void setup_web_routes(httplib::Server& svr, App& app);
void setup_view_routes(httplib::Server& svr, App& app);  ///< sandwich, source, sources (issue 17)

// Helpers.
void send_json(httplib::Response& res, int status, const nlohmann::json& body);
/// gzip of `text` (zlib `level`).
std::string gzip_text(const std::string& text, int level);
/// Whether the client takes gzip (Accept-Encoding).
bool accepts_gzip(const httplib::Request& req);
/// Sends `body`, gzip-compressed when the client accepts it
/// (using body->gz when present, else compressing now at a fast level).
/// httplib's own response compression is bypassed: it is very slow on large bodies.
void send_payload(const httplib::Request& req, httplib::Response& res,
                  std::shared_ptr<const Payload> body, const std::string& type);
void send_text(const httplib::Request& req, httplib::Response& res, std::string text,
               const std::string& type);
/// Id from the first regex group; 404 when it is not a stored run.
RunInfo run_from_path(App& app, const httplib::Request& req, std::size_t group = 1);
/// Metric from ?metric= (422 when unknown); default: the run's first metric, else samples.
int metric_param(const httplib::Request& req, const RunInfo* run, const char* name = "metric");
/// Integer query parameter with bounds (422 when bad).
int64_t int_param(const httplib::Request& req, const char* name, int64_t def, int64_t lo,
                  int64_t hi);
/// The view parameters every read of a run's stacks takes: metric=, from=,
/// until= (422 when bad), profiler=1 (View::profiler); not focus.
View view_param(const httplib::Request& req, const RunInfo& run);
/// Time bound in ns: from=/until= accept Unix ns, or seconds when < 1e11 (422 when bad).
int64_t time_param(const httplib::Request& req, const char* name, int64_t def);
/// "K=V" tags from repeated `name` parameters (400 when malformed).
Tags tag_params(const httplib::Request& req, const char* name, std::size_t max_tags);
/// "http://HOST" of the request, or "" without a Host header.
std::string base_url(const httplib::Request& req);
int64_t now_ns();

}  // namespace lfs
