// The pages (web/*.html for /, /runs/{id}, /compare, /upload), their static
// files under /static/, /healthz and /metrics.
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "app.hpp"

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
    res.set_content(std::string("web page ") + file + " is missing from " + app.cfg.web_dir + " (--web)\n",
                    "text/plain; charset=utf-8");
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  send_text(req, res, std::move(body), "text/html; charset=utf-8");
}

}  // namespace

void setup_web_routes(httplib::Server& svr, App& app) {
  struct Page { const char* pattern; const char* route; const char* file; };
  static const Page pages[] = {
      {R"(/)", "/", "index.html"},
      {R"(/runs/(\d+))", "/runs/{id}", "run.html"},
      {R"(/compare)", "/compare", "compare.html"},
      {R"(/upload)", "/upload", "upload.html"},
  };
  for (const Page& p : pages) {
    const char* file = p.file;
    add_route(svr, app, "GET", p.pattern, p.route,
              [&app, file](const httplib::Request& req, httplib::Response& res) { page(app, file, req, res); });
  }
  // Static files: httplib's mount point refuses paths that leave the folder and sets the content type.
  svr.set_file_extension_and_mimetype_mapping("js", "text/javascript; charset=utf-8");
  svr.set_file_extension_and_mimetype_mapping("mjs", "text/javascript; charset=utf-8");
  svr.set_file_extension_and_mimetype_mapping("css", "text/css; charset=utf-8");
  svr.set_file_extension_and_mimetype_mapping("html", "text/html; charset=utf-8");
  svr.set_file_extension_and_mimetype_mapping("svg", "image/svg+xml");
  svr.set_file_extension_and_mimetype_mapping("json", "application/json");
  svr.set_file_extension_and_mimetype_mapping("woff2", "font/woff2");
  svr.set_file_extension_and_mimetype_mapping("ico", "image/x-icon");
  if (!svr.set_mount_point("/static", app.cfg.web_dir, {{"Cache-Control", "no-cache"}}))
    spdlog::warn("web folder {} not found: pages will answer 404 (--web)", app.cfg.web_dir);

  add_route(svr, app, "GET", R"(/healthz)", "/healthz", [&app](const httplib::Request&, httplib::Response& res) {
    StoreStats s = app.store->stats();
    send_json(res, 200, {{"status", "ok"}, {"runs", s.runs}, {"version", LUAFLAME_SERVER_VERSION}});
  });
  add_route(svr, app, "GET", R"(/metrics)", "/metrics", [&app](const httplib::Request&, httplib::Response& res) {
    std::string text = app.metrics.prometheus(app.store->stats(), app.cache.hits(), app.cache.misses(),
                                              app.cache.bytes());
    res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
  });
}

}  // namespace lfs
