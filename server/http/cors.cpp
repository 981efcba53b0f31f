// CORS (see cors.hpp).
#include "http/cors.hpp"

#include "http/app.hpp"

namespace lfs {

namespace {

// The request comes from a page of this very server (or not from a browser).
bool same_origin(const App& app, const httplib::Request& req) {
  return !req.has_header("Origin") || req.get_header_value("Origin") == own_origin(app, req);
}

void allow_origin(const App& app, const httplib::Request& req, httplib::Response& res) {
  const std::string origin = req.get_header_value("Origin");
  bool any = false;
  for (const std::string& o : app.cfg.cors_origins) any = any || o == "*";
  // "*" answers "*" (no credentials are used: the token is a header the page sets).
  res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
  if (!any) res.set_header("Vary", "Origin");
  res.set_header("Access-Control-Expose-Headers", "ETag, Content-Disposition");
}

}  // namespace

bool origin_allowed(const std::vector<std::string>& allowed, const std::string& origin) {
  for (const std::string& o : allowed)
    if (o == "*" || o == origin) return true;
  return false;
}

bool cors_before(const App& app, const httplib::Request& req, httplib::Response& res) {
  if (same_origin(app, req)) return false;
  const std::string origin = req.get_header_value("Origin");
  if (req.method == "OPTIONS") {
    res.status = 204;
    if (origin_allowed(app.cfg.cors_origins, origin)) {
      allow_origin(app, req, res);
      res.set_header("Access-Control-Allow-Methods", "GET, HEAD, POST, DELETE, OPTIONS");
      res.set_header("Access-Control-Allow-Headers",
                     "Authorization, Content-Type, Content-Encoding, If-None-Match");
      res.set_header("Access-Control-Max-Age", "600");
    }
    return true;
  }
  return false;  // writes: the CSRF rule (cross_site_refused) and the token decide
}

void cors_after(const App& app, const httplib::Request& req, httplib::Response& res) {
  if (same_origin(app, req) ||
      !origin_allowed(app.cfg.cors_origins, req.get_header_value("Origin")))
    return;
  if (res.has_header("Access-Control-Allow-Origin"))
    return;  // a preflight, answered before routing
  allow_origin(app, req, res);
}

}  // namespace lfs
