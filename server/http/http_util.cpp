// Shared HTTP helpers and the setup that ties the areas together: access
// log, request metrics, error JSON, and the guarantee that no input ends in a
// 500 (every handler runs inside one try/catch).
#include <spdlog/spdlog.h>
#include <zlib.h>

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <limits>

#include "http/app.hpp"
#include "http/cors.hpp"
#include "http/guard.hpp"
#include "luaflame/wire.hpp"

namespace lfs {
namespace {

const char* const kAcceptEncoding = "X-Luaflame-Accept-Encoding";
const char* const kCrossSiteText =
    "cross-site write refused: a page of another origin cannot write here without the token "
    "(send Authorization: Bearer TOKEN, an X-Luaflame header, or a JSON Content-Type)";

// Per request, on the worker thread that serves it.
thread_local std::chrono::steady_clock::time_point t_start;
thread_local const char* t_route = nullptr;
thread_local App* t_app = nullptr;
// The request body is gzip: its Content-Encoding header was taken away before
// httplib could decode it (httplib 0.11 stores a body cut after a flush point
// and refuses a second member), and add_body_route decodes it (Gunzip).
thread_local bool t_gzip = false;

// httplib splits "tag=k=v" at the last '=': re-parse the raw query, splitting
// each parameter at its first '=' so tag=K=V and focus paths with '=' survive.
void reparse_query(httplib::Request& req) {
  if (req.target.find('?') == std::string::npos) return;
  req.params.clear();
  for (auto& kv : parse_query(req.target)) req.params.emplace(kv.first, kv.second);
}

// SQLite says "database or disk is full" (SQLITE_FULL); the OS says ENOSPC.
bool is_disk_full(const std::string& what) {
  return what.find("disk is full") != std::string::npos ||
         what.find("No space left") != std::string::npos;
}

// Runs `h`, turning every exception into a JSON error.
void guarded(const char* route, const Handler& h, const httplib::Request& in,
             httplib::Response& res) {
  t_route = route;
  try {
    // httplib owns the request object (not const); fixing params in place
    // avoids copying a body of up to --max-body bytes.
    reparse_query(const_cast<httplib::Request&>(in));
    if (in.method == "POST" && t_app && t_app->reserve_spent.load())
      throw HttpError(507,
                      "insufficient storage: the disk holding the store is full and its reserve "
                      "for deletes is spent; writes resume once deletes have freed "
                      "--disk-reserve (delete runs, or free space)");
    h(in, res);
  } catch (const HttpError& e) {
    nlohmann::json body = e.extra;
    body["error"] = e.what();
    send_json(res, e.status, body);
  } catch (const LimitError& e) {
    send_json(res, 413, {{"error", e.what()}});
  } catch (const ValueError& e) {  // a sum over 64 bits: refused, nothing stored
    send_json(res, 400, {{"error", e.what()}, {"reason", "value too large"}});
  } catch (const std::exception& e) {
    if (is_disk_full(e.what())) {
      spdlog::error("{} {}: disk full: {}", in.method, log_safe(in.path), e.what());
      if (t_app && t_app->on_disk_full) t_app->on_disk_full();
      send_json(
          res, 507,
          {{"error", std::string("insufficient storage: the disk holding the store is full (") +
                         e.what() + "); delete runs or free space, then retry"}});
      return;
    }
    spdlog::error("{} {}: {}", in.method, log_safe(in.path), e.what());
    send_json(res, 500, {{"error", std::string("internal error: ") + e.what()}});
  } catch (...) {
    send_json(res, 500, {{"error", "internal error"}});
  }
}

}  // namespace

const char* const kCrossSite = kCrossSiteText;

void run_guarded(const char* route, const Handler& h, const httplib::Request& req,
                 httplib::Response& res) {
  guarded(route, h, req, res);
}
void set_request_route(const char* route) {
  t_route = route;
}
bool request_body_gzip() {
  return t_gzip;
}

bool authorized(const App& app, const httplib::Request& req) {
  if (app.cfg.token.empty()) return true;
  return carries_token(req.get_header_value("Authorization"), app.cfg.token, false);
}

// The origin a same-site page of this server has: --public-url, else the
// address the browser used (its Host), which a cross-site page cannot choose
// for a request that carries its own Origin.
std::string own_origin(const App& app, const httplib::Request& req) {
  if (!app.cfg.public_url.empty()) return app.cfg.public_url;
  return "http://" + req.get_header_value("Host");
}

bool cross_site_refused(const App& app, const httplib::Request& req) {
  return app.cfg.token.empty() &&
         cross_site_simple_write(req, own_origin(app, req), app.cfg.cors_origins);
}

// httplib 0.11 keeps a connection open whatever the response headers say, and
// closes it only when writing the response fails. After a refusal that left
// part of the body unread, it would read the rest of the body as the next
// request (a stray 400). So the answer is sent by a provider that writes it
// whole and then reports failure, and httplib closes the connection.
void close_after_response(httplib::Response& res) {
  auto body = std::make_shared<std::string>(std::move(res.body));
  res.body.clear();
  std::string type = res.get_header_value("Content-Type");
  res.headers.erase("Content-Type");  // set_content_provider adds it again
  res.set_header("Connection", "close");
  if (body->empty()) *body = "\n";  // a provider needs a length > 0
  res.set_content_provider(body->size(), type.empty() ? "text/plain" : type,
                           [body](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
                             sink.write(body->data() + offset, length);
                             return false;  // written: now close
                           });
}

namespace {

// Checks made on the head alone, before any body byte is read or decoded.
// Returns true (and fills `res`) when the request is refused.
bool refuse_early(const App& app, httplib::Request& req, httplib::Response& res) {
  t_gzip = false;
  // Ranges are ignored (a 200 with the whole body is a valid answer): on a
  // generated body 400 ranges once built a 913 MB multipart answer.
  req.ranges.clear();
  auto refuse = [&](int status, const std::string& why,
                    nlohmann::json extra = nlohmann::json::object()) {
    extra["error"] = why;
    send_json(res, status, extra);
    return true;
  };
  if (req.get_header_value_count("Content-Length") > 1)
    return refuse(400, "more than one Content-Length header");
  const bool chunked = req.has_header("Transfer-Encoding");
  if (chunked && req.has_header("Content-Length"))
    return refuse(400, "both Content-Length and Transfer-Encoding");
  if (chunked && ascii_lower(req.get_header_value("Transfer-Encoding")) != "chunked")
    return refuse(400, "Transfer-Encoding '" +
                           log_safe(req.get_header_value("Transfer-Encoding"), 64) +
                           "' is not supported (chunked or none)");
  if (req.has_header("Content-Encoding")) {
    if (req.get_header_value_count("Content-Encoding") > 1)
      return refuse(415, "more than one Content-Encoding header");
    std::string enc = ascii_lower(req.get_header_value("Content-Encoding"));
    if (enc == "gzip" || enc == "x-gzip")
      t_gzip = true;
    else if (enc != "identity")
      return refuse(415,
                    "Content-Encoding '" + log_safe(enc, 64) + "' is not supported (gzip or none)");
    req.headers.erase("Content-Encoding");  // decoded by add_body_route, never by httplib
  }
  const bool has_body = chunked || (req.has_header("Content-Length") &&
                                    req.get_header_value("Content-Length") != "0");
  if (has_body) {
    if (req.method != "POST")
      return refuse(400, req.method + " " + log_safe(req.path, 200) + " takes no request body");
    bool takes = false;
    for (const std::regex& re : app.body_routes) takes = takes || std::regex_match(req.path, re);
    if (!takes) return refuse(404, "no such endpoint: POST " + log_safe(req.path, 200));
  }
  if (!app.cfg.read_token.empty() && (req.method == "GET" || req.method == "HEAD") &&
      req.path != "/healthz") {
    const std::string auth = req.get_header_value("Authorization");
    if (!carries_token(auth, app.cfg.read_token, true) &&
        !carries_token(auth, app.cfg.token, true)) {
      res.set_header("WWW-Authenticate", "Basic realm=\"luaflame\", charset=\"UTF-8\"");
      return refuse(401,
                    "reads need the read token: 'Authorization: Bearer TOKEN' (or any user name "
                    "and the token "
                    "as the password)");
    }
  }
  return false;
}

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                  "application/json");
}

std::string gzip_text(const std::string& text, int level) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  std::string out(deflateBound(&z, text.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return rc == Z_STREAM_END ? out : std::string();
}

bool accepts_gzip(const httplib::Request& req) {
  return req.get_header_value(kAcceptEncoding).find("gzip") != std::string::npos;
}

const std::string& Payload::gz() const {
  std::call_once(once_, [this] { gz_ = gzip_text(raw, gzip_level); });
  return gz_;
}

void send_payload(const httplib::Request& req, httplib::Response& res,
                  std::shared_ptr<const Payload> body, const std::string& type) {
  if (res.status == -1 || res.status == 0) res.status = 200;
  const std::string* data = &body->raw;
  if (accepts_gzip(req) && body->raw.size() > 1024 && !body->gz().empty()) {
    data = &body->gz();
    res.set_header("Content-Encoding", "gzip");
  }
  res.set_header("Vary", "Accept-Encoding");
  // A copy into res.body, not a content provider: httplib stops writing a
  // provider's body when the server shuts down, and SIGTERM must let the
  // responses in flight finish. (The copy costs about 1 ms per MB.)
  res.set_content(*data, type);
}

void send_text(const httplib::Request& req, httplib::Response& res, std::string text,
               const std::string& type) {
  auto p = std::make_shared<Payload>();
  p->raw = std::move(text);
  send_payload(req, res, std::move(p), type);
}

void add_route(httplib::Server& svr, App& app, const char* method, const char* pattern,
               const char* route, Handler h) {
  auto wrapped = [&app, route, h = std::move(h)](const httplib::Request& req,
                                                 httplib::Response& res) {
    std::string m = req.method;
    t_route = route;
    if ((m == "DELETE" || m == "POST") && !authorized(app, req)) {
      send_json(res, 401,
                {{"error", "missing or wrong token: send 'Authorization: Bearer TOKEN'"}});
      return;
    }
    if ((m == "DELETE" || m == "POST") && cross_site_refused(app, req)) {
      send_json(res, 403, {{"error", kCrossSiteText}});
      return;
    }
    guarded(route, h, req, res);
  };
  std::string mth = method;
  if (mth == "GET")
    svr.Get(pattern, wrapped);
  else if (mth == "DELETE")
    svr.Delete(pattern, wrapped);
  else if (mth == "POST")
    svr.Post(pattern, wrapped);
}

void setup(httplib::Server& svr, App& app) {
  svr.set_payload_max_length(app.cfg.max_body);
  svr.set_pre_routing_handler([&app](const httplib::Request& req, httplib::Response& res) {
    t_start = std::chrono::steady_clock::now();
    t_route = nullptr;
    t_app = &app;
    auto& r = const_cast<httplib::Request&>(req);  // httplib owns it, not const
    if (refuse_early(app, r, res)) {
      close_after_response(res);  // part of a body may be unread: never read it as the next request
      return httplib::Server::HandlerResponse::Handled;
    }
    if (cors_before(app, req, res)) return httplib::Server::HandlerResponse::Handled;
    // httplib's own response compression takes seconds on a large SVG: hide
    // Accept-Encoding from it; send_payload compresses (once, for cached graphs).
    if (r.has_header("Accept-Encoding")) {
      r.headers.emplace(kAcceptEncoding, r.get_header_value("Accept-Encoding"));
      r.headers.erase("Accept-Encoding");
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  svr.set_post_routing_handler([&app](const httplib::Request& req, httplib::Response& res) {
    cors_after(app, req, res);
    security_headers(res);  // every answer httplib writes, errors included
  });
  svr.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        send_json(res, 500, {{"error", "internal error: " + what}});
      });
  svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.content_provider_) return;  // a handler already said why
    if (res.status == 404)
      send_json(res, 404, {{"error", "no such endpoint: " + req.method + " " + req.path}});
    else if (res.status == 413)
      send_json(res, 413, {{"error", "request body larger than the limit (--max-body)"}});
    else
      send_json(res, res.status,
                {{"error", "request refused (HTTP " + std::to_string(res.status) + ")"}});
    // httplib refused the request itself (a body over the limit, a malformed
    // request or body): what follows on the connection may be the rest of it.
    if (res.status == 413 || res.status == 400) close_after_response(res);
  });
  svr.set_logger([&app](const httplib::Request& req, const httplib::Response& res) {
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    if (t_start == std::chrono::steady_clock::time_point{}) secs = 0;
    const char* route = t_route ? t_route : (res.status == 404 ? "unmatched" : "static");
    app.metrics.request(route, req.method, res.status, secs);
    spdlog::info("{} {} {} {} {}B {:.2f}ms", req.remote_addr, log_safe(req.method, 16),
                 log_safe(req.path), res.status,
                 res.body.empty() ? res.content_length_ : res.body.size(), secs * 1e3);
    t_start = {};
  });
  setup_write_routes(svr, app);
  setup_read_routes(svr, app);
  setup_web_routes(svr, app);
}

RunInfo run_from_path(App& app, const httplib::Request& req, std::size_t group) {
  const std::string s =
      req.matches.size() > group ? std::string(req.matches[group]) : std::string();
  // Digits only, all of them (strtoll stopped at a NUL: "1%00x" was run 1); the
  // id shown visibly (an exception's text ends at a NUL: the error was cut there).
  int64_t id = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || id <= 0)
    throw HttpError(404, "no run '" + log_safe(s, 200) + "'");
  auto run = app.store->get_run(id);
  if (!run) throw HttpError(404, "no run " + s);
  return *run;
}

int metric_param(const httplib::Request& req, const RunInfo* run, const char* name) {
  if (req.has_param(name)) {
    std::string m = req.get_param_value(name);
    int idx = metric_index(m);
    if (idx < 0)
      throw HttpError(422, "unknown metric '" + m + "'",
                      {{"metrics",
                        {"samples", "time", "calls", "alloc_bytes", "alloc_count", "live_bytes",
                         "live_count"}}});
    return idx;
  }
  if (run && !run->totals.empty()) return run->totals.begin()->first;
  return 0;
}

int64_t int_param(const httplib::Request& req, const char* name, int64_t def, int64_t lo,
                  int64_t hi) {
  if (!req.has_param(name)) return def;
  std::string v = req.get_param_value(name);
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || n < lo || n > hi)
    throw HttpError(422, std::string("bad value for ") + name + ": '" + v +
                             "' (a whole number from " + std::to_string(lo) + " to " +
                             std::to_string(hi) + ")");
  return n;
}

View view_param(const httplib::Request& req, const RunInfo& run) {
  View v;
  v.metric = metric_param(req, &run);
  v.from_ns = time_param(req, "from", std::numeric_limits<int64_t>::min());
  v.until_ns = time_param(req, "until", std::numeric_limits<int64_t>::max());
  if (v.until_ns <= v.from_ns) throw HttpError(422, "until must be after from");
  v.profiler = req.get_param_value("profiler") == "1";
  return v;
}

int64_t time_param(const httplib::Request& req, const char* name, int64_t def) {
  if (!req.has_param(name) || req.get_param_value(name).empty()) return def;
  std::string v = req.get_param_value(name);
  char* end = nullptr;
  errno = 0;
  double d = std::strtod(v.c_str(), &end);
  if (*end != '\0' || errno != 0 || !(d >= 0) || d > 9.2e18)
    throw HttpError(422, std::string("bad value for ") + name + ": '" + v +
                             "' (Unix time in ns, or in seconds when below 1e11)");
  if (d < 1e11) d *= 1e9;
  // Seconds from 9,223,372,037 on overflow int64 ns (a run "started" in 1702).
  if (d > 9.2e18)
    throw HttpError(422,
                    std::string("bad value for ") + name + ": '" + v + "' (after the year 2261)");
  return static_cast<int64_t>(d);
}

// The rules are the wire format's (lfw::name_error, tag_error): the collector and the CLI
// apply the same ones before they send.
void check_name(const std::string& name) {
  if (name.empty()) throw HttpError(400, "a run needs a name (name=...)");
  if (std::string why = lfw::name_error(name); !why.empty()) throw HttpError(400, why);
}

void check_tag(const std::string& key, const std::string& value) {
  if (std::string why = lfw::tag_error(key, value); !why.empty())
    throw HttpError(400, log_safe(why, 300));
}

Tags tag_params(const httplib::Request& req, const char* name, std::size_t max_tags) {
  Tags tags;
  std::size_t n = req.get_param_value_count(name);
  for (std::size_t i = 0; i < n; ++i) {
    std::string kv = req.get_param_value(name, i);
    auto eq = kv.find('=');
    if (eq == std::string::npos) throw HttpError(400, "a tag is KEY=VALUE, got '" + kv + "'");
    std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    check_tag(k, v);
    tags[k] = v;
  }
  if (tags.size() > max_tags)
    throw HttpError(400, "too many tags: " + std::to_string(tags.size()) + " (at most " +
                             std::to_string(max_tags) + " per run, --max-tags)");
  return tags;
}

std::string base_url(const httplib::Request&) {
  static const Config fallback;
  const Config& c = t_app ? t_app->cfg : fallback;
  if (!c.public_url.empty()) return c.public_url;
  // The Host header is the client's word: never put it in a link. The listen
  // address is used when it names one address; a wildcard gives relative links.
  if (c.host.empty() || c.host == "0.0.0.0" || c.host == "::") return {};
  bool v6 = c.host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + c.host + "]" : c.host) + ":" + std::to_string(c.port);
}

}  // namespace lfs
