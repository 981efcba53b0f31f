// CORS: --cors-origin ORIGIN (repeatable; "*" = any) lets pages on those
// origins (speedscope's hosted app, dashboards) read runs. Preflights are
// answered here; read responses get Access-Control-Allow-Origin. A write from
// another origin (a browser's Origin header that is not this server's) is
// refused unless it carries the token: with no --token configured, browsers
// on other origins cannot write at all (no CSRF through a victim's browser).
#pragma once

#include <httplib.h>

#include <string>
#include <vector>

namespace lfs {

struct App;

/// Called before routing. Answers preflights (OPTIONS with an Origin) and
/// refuses cross-origin writes without the token (403); true when it answered.
bool cors_before(const App& app, const httplib::Request& req, httplib::Response& res);

/// Called after a handler: adds the CORS headers when the request's origin is allowed.
void cors_after(const App& app, const httplib::Request& req, httplib::Response& res);

/// Whether `origin` is one of `allowed` ("*" allows every origin).
bool origin_allowed(const std::vector<std::string>& allowed, const std::string& origin);

}  // namespace lfs
