// The pages (web/*.html for /, /runs/{id}, /compare, /upload), their static
// files under /static/, /healthz and /metrics.
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "http/app.hpp"
#include "http/guard.hpp"

namespace lfs {
namespace {

bool read_file(const std::filesystem::path& p, std::string& out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

// Serves web/<file> as HTML, read at each request so edits to web/ show at once.
void page(App& app, const char* file, const httplib::Request& req, httplib::Response& res) {
  std::string body;
  if (!read_file(std::filesystem::path(app.cfg.web_dir) / file, body)) {
    res.status = 404;
    res.set_content(
        std::string("web page ") + file + " is missing from " + app.cfg.web_dir + " (--web)\n",
        "text/plain; charset=utf-8");
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  send_text(req, res, std::move(body), "text/html; charset=utf-8");
}

// Content type by the extension of a checked file name.
std::string static_type(const std::string& file) {
  static const std::pair<const char*, const char*> types[] = {
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".html", "text/html; charset=utf-8"},
      {".svg", "image/svg+xml"},
      {".json", "application/json"},
      {".woff2", "font/woff2"},
      {".ico", "image/x-icon"},
      {".png", "image/png"},
      {".txt", "text/plain; charset=utf-8"}};
  for (const auto& [ext, type] : types) {
    std::string_view e = ext;
    if (file.size() >= e.size() && file.compare(file.size() - e.size(), e.size(), e) == 0)
      return type;
  }
  return "application/octet-stream";
}

}  // namespace

void setup_web_routes(httplib::Server& svr, App& app) {
  struct Page {
    const char* pattern;
    const char* route;
    const char* file;
  };
  static const Page pages[] = {
      {R"(/)", "/", "index.html"},
      {R"(/runs/(\d+))", "/runs/{id}", "run.html"},
      {R"(/compare)", "/compare", "compare.html"},
      {R"(/upload)", "/upload", "upload.html"},
  };
  for (const Page& p : pages) {
    const char* file = p.file;
    add_route(svr, app, "GET", p.pattern, p.route,
              [&app, file](const httplib::Request& req, httplib::Response& res) {
                page(app, file, req, res);
              });
  }
  // Static files, only from inside the web folder: httplib's mount point
  // followed symlinks out of it (/etc/passwd was served) and typed
  // app.css%00.js as JavaScript. safe_static_path resolves symlinks and
  // refuses NUL and control bytes; the type comes from the checked name.
  add_route(svr, app, "GET", R"(/static/(.+))", "/static",
            [&app](const httplib::Request& req, httplib::Response& res) {
              const std::string rel = req.matches[1];
              const std::string file = safe_static_path(app.cfg.web_dir, rel);
              std::string body;
              if (file.empty() || !read_file(file, body)) {
                send_json(res, 404, {{"error", "no such static file"}});
                return;
              }
              res.set_header("Cache-Control", "no-cache");
              send_text(req, res, std::move(body), static_type(file));
            });

  add_route(svr, app, "GET", R"(/healthz)", "/healthz",
            [&app](const httplib::Request&, httplib::Response& res) {
              StoreStats s = app.store->stats();
              send_json(res, 200,
                        {{"status", "ok"}, {"runs", s.runs}, {"version", LUAFLAME_SERVER_VERSION}});
            });
  add_route(svr, app, "GET", R"(/metrics)", "/metrics",
            [&app](const httplib::Request&, httplib::Response& res) {
              std::string text = app.metrics.prometheus(app.store->stats(), app.cache.hits(),
                                                        app.cache.misses(), app.cache.bytes());
              res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
            });
}

}  // namespace lfs
