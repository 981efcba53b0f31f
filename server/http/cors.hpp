// CORS: --cors-origin ORIGIN (repeatable; "*" = any) lets pages on those
// origins (speedscope's hosted app, dashboards) read runs. Preflights are
// answered here; read responses get Access-Control-Allow-Origin. Writes from
// other origins are the CSRF rule's (cross_site_refused in app.hpp): a named
// --cors-origin counts as the server's own there, "*" does not.
#pragma once

#include <httplib.h>

#include <string>
#include <vector>

namespace lfs {

struct App;

/// Called before routing. Answers preflights (OPTIONS with an Origin); true when it answered.
bool cors_before(const App& app, const httplib::Request& req, httplib::Response& res);

/// Called after a handler: adds the CORS headers when the request's origin is allowed.
void cors_after(const App& app, const httplib::Request& req, httplib::Response& res);

/// Whether `origin` is one of `allowed` ("*" allows every origin).
bool origin_allowed(const std::vector<std::string>& allowed, const std::string& origin);

}  // namespace lfs
