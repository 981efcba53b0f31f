// Request bodies of the POST routes (add_body_route): read with the size
// limit after gzip decoding and the token check, the parts of a multipart one
// read as they come, a body the front loop read whole handed over rather than
// copied, and the heap given back after a large one.
#include <malloc.h>

#include <charconv>
#include <memory>

#include "http/app.hpp"
#include "http/front.hpp"
#include "http/guard.hpp"
#include "http/multipart.hpp"

namespace lfs {
namespace {

// The body of a Content-Length request, moved out of the front loop's buffer
// when it is all there and within `max` (front.hpp, take_buffered_body).
bool take_whole_body(const httplib::Request& req, std::size_t max, std::string& body) {
  if (req.has_header("Transfer-Encoding") || !req.has_header("Content-Length")) return false;
  const std::string v = req.get_header_value("Content-Length");
  std::size_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n == 0 || n > max) return false;
  return take_buffered_body(n, body);
}

// After a large body: the heap pages its parse freed go back to the system
// (issue 31: 341 MiB stayed resident after one 62.5 MB upload; glibc keeps
// freed memory, and raises its mmap threshold after a large free).
void give_back_heap(std::size_t body_bytes) {
  if (body_bytes >= (8u << 20)) malloc_trim(0);
}

}  // namespace

namespace {

void refuse_body(httplib::Response& res, int status, const std::string& error) {
  send_json(res, status, {{"error", error}});
  close_after_response(res);
}

std::string too_big_error(const App& app) {
  return "request body larger than the limit of " + std::to_string(app.cfg.max_body) +
         " bytes (--max-body)";
}

// A multipart body: its parts read as they come into req.files, then the route.
// httplib hands multipart bodies only to a multipart reader (the plain one
// throws bad_function_call).
void serve_multipart(App& app, const char* route, const Handler& h, bool takes, bool ok_token,
                     const httplib::Request& req, httplib::Response& res,
                     const httplib::ContentReader& reader) {
  if (!ok_token)
    return refuse_body(res, 401, "missing or wrong token: send 'Authorization: Bearer TOKEN'");
  if (!takes)
    return refuse_body(res, 415,
                       std::string("multipart/form-data is not taken here (") + route +
                           "); send the body as it is");
  if (request_body_gzip())  // the parts are read as they come: a gzip multipart body is not decoded
    return refuse_body(res, 415,
                       "a multipart/form-data body cannot be gzip-encoded; gzip the parts");
  auto& files = const_cast<httplib::Request&>(req).files;  // httplib owns req; files were empty
  MultipartRead r = read_multipart(reader, app.cfg.max_body, files);
  if (r == MultipartRead::too_big) return refuse_body(res, 413, too_big_error(app));
  if (r == MultipartRead::bad)
    return refuse_body(res, 400,
                       "could not read the multipart/form-data body (malformed or truncated)");
  run_guarded(route, h, req, res);
  give_back_heap(app.cfg.max_body);
}

// A plain body as read: decoded from gzip, cut at --max-body.
struct BodyRead {
  std::string body;
  bool too_big = false, bad_gzip = false, ok = false;
  std::unique_ptr<Gunzip> gunzip;
};

// Reads the body. The limit applies after gzip decoding, so a small compressed
// bomb is cut off too. A refused body is read on and discarded up to kDrain
// bytes, so that a client still sending it gets the answer rather than a
// reset; then the connection is closed. A plain body the front loop read whole
// is taken, not copied (issue 31).
BodyRead read_body(const App& app, bool ok_token, const httplib::Request& req,
                   const httplib::ContentReader& reader) {
  constexpr std::size_t kDrain = 8u << 20;
  BodyRead b;
  if (request_body_gzip()) b.gunzip = std::make_unique<Gunzip>(app.cfg.max_body);
  if (!b.gunzip && ok_token && take_whole_body(req, app.cfg.max_body, b.body)) {
    b.ok = true;
    return b;
  }
  std::size_t discarded = 0;
  b.ok = reader([&](const char* data, std::size_t n) {
    if (!ok_token || b.too_big || b.bad_gzip) {
      discarded += n;
      return discarded <= kDrain;
    }
    if (b.gunzip) {
      Gunzip::Status st = b.gunzip->feed(data, n, b.body);
      b.too_big = st == Gunzip::Status::too_big;
      b.bad_gzip = st == Gunzip::Status::bad;
      if (b.too_big || b.bad_gzip) std::string().swap(b.body);
      return true;
    }
    if (b.body.size() + n > app.cfg.max_body) {
      b.too_big = true;
      discarded = b.body.size() + n;
      std::string().swap(b.body);
      return true;
    }
    b.body.append(data, n);
    return true;
  });
  return b;
}

// A plain body: read, refused with the status its fault calls for, or served.
void serve_plain(App& app, const char* route, const Handler& h, bool ok_token,
                 const httplib::Request& req, httplib::Response& res,
                 const httplib::ContentReader& reader) {
  BodyRead b = read_body(app, ok_token, req, reader);
  if (b.too_big || res.status == 413) return refuse_body(res, 413, too_big_error(app));
  if (!ok_token) {
    send_json(res, 401, {{"error", "missing or wrong token: send 'Authorization: Bearer TOKEN'"}});
    if (!b.ok) close_after_response(res);
    return;
  }
  if (!b.ok)
    return refuse_body(res, 400,
                       "could not read the request body (truncated, or bad Content-Encoding)");
  if (b.gunzip && !b.gunzip->complete()) {
    send_json(res, 400, {{"error", b.gunzip->error()}});
    return b.bad_gzip ? close_after_response(res) : void();
  }
  const std::size_t size = b.body.size();
  const_cast<httplib::Request&>(req).body = std::move(b.body);  // httplib owns req; it was empty
  run_guarded(route, h, req, res);
  give_back_heap(size);
}

}  // namespace

void add_body_route(httplib::Server& svr, App& app, const char* pattern, const char* route,
                    Handler h, bool multipart) {
  app.body_routes.emplace_back(pattern);
  svr.Post(pattern, [&app, route, h = std::move(h), multipart](
                        const httplib::Request& req, httplib::Response& res,
                        const httplib::ContentReader& reader) {
    set_request_route(route);  // for the access log of a refusal
    const bool ok_token = authorized(app, req);
    if (ok_token && cross_site_refused(app, req))  // refused before reading: not decoded
      return refuse_body(res, 403, kCrossSite);
    if (req.is_multipart_form_data())
      return serve_multipart(app, route, h, multipart, ok_token, req, res, reader);
    serve_plain(app, route, h, ok_token, req, res, reader);
  });
}

}  // namespace lfs
