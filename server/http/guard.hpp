// Checks on what a client controls, as pure functions (the fuzz targets in
// fuzz/ call them directly): gzip bodies, JSON bodies, query strings, tokens,
// cross-site writes, log text and static file paths. The limits they apply
// come from Config (docs/server.md lists them).
#pragma once

#include <httplib.h>
#include <zlib.h>

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace lfs {

/// Streaming gzip decoder for request bodies: one or more members (RFC 1952
/// allows concatenated members; `cat a.gz b.gz` is valid), output bounded by
/// `limit`, and complete only when the last member ended with its CRC and
/// length checked (a body cut after a flush point is refused, not stored half).
class Gunzip {
 public:
  explicit Gunzip(std::size_t limit);
  ~Gunzip();
  Gunzip(const Gunzip&) = delete;
  Gunzip& operator=(const Gunzip&) = delete;
  enum class Status { ok, too_big, bad };
  /// Decodes `n` more bytes, appending to `out`. After too_big or bad, stop.
  Status feed(const char* data, std::size_t n, std::string& out);
  /// After the last byte: whether the input ended exactly at the end of a member.
  bool complete() const { return ended_ && !bad_; }
  /// Why feed() said bad, or why the body is not complete.
  std::string error() const;

 private:
  z_stream z_{};
  std::size_t limit_;
  std::size_t total_ = 0;
  bool ended_ = false;  // the last member reached Z_STREAM_END
  bool bad_ = false;
  bool any_ = false;  // any input seen
  std::string error_;
};

/// Deepest bracket nesting of JSON text (brackets inside strings ignored);
/// stops scanning once past `limit` (returns limit + 1).
std::size_t json_depth(std::string_view text, std::size_t limit);

/// Throws HttpError 400 when JSON text nests deeper than `max_depth`
/// (--max-json-depth): every JSON a request carries is checked here first.
void check_json_depth(std::string_view text, std::size_t max_depth);

/// A JSON object request body, within `max_bytes` and `max_depth`
/// (deeper bodies overflowed the stack of the recursive dump). An empty body
/// is {} when `optional`. Throws HttpError 400 (bad or too deep) or 413.
nlohmann::json parse_json_request(std::string_view body, std::size_t max_bytes,
                                  std::size_t max_depth, bool optional);

/// %XX and '+' decoding of one query component.
std::string url_decode(std::string_view s);
/// The query of `target` split at '&', each part at its first '=' (so tag=K=V keeps its '=').
std::multimap<std::string, std::string> parse_query(std::string_view target);

/// `s` with ASCII letters in lower case (header values: gzip, chunked, ...).
std::string ascii_lower(std::string s);

/// `s` for one log line: bytes below 0x20, 0x7f and '\' as \xNN, cut at `max` bytes.
std::string log_safe(std::string_view s, std::size_t max = 1024);

/// Whether an Authorization header value carries `token`, as "Bearer TOKEN" or,
/// when `basic`, HTTP Basic with TOKEN as the password (browsers prompt for
/// Basic, for reads). Writes take Bearer only: a browser attaches Basic
/// credentials it has cached by itself, also to a cross-site page's request.
/// Compares in time independent of where the values differ.
bool carries_token(const std::string& authorization, const std::string& token, bool basic);

/// The Content-Security-Policy for an answer of this Content-Type: pages run
/// their own scripts only (no inline script, no eval; workers and fetches to
/// this server); a standalone flame graph (SVG) runs its own inline script in
/// a sandbox, with nothing to load; everything else may run nothing.
const char* content_security_policy(const std::string& content_type);

/// X-Content-Type-Options: nosniff and the CSP above, on every answer.
void security_headers(httplib::Response& res);

/// Whether a write looks like a cross-site request from a browser that this
/// server must refuse (CSRF): the browser said so (Origin not `own_origin`,
/// or Sec-Fetch-Site cross-site/same-site) and the request is "simple" (a page
/// can send it without a CORS preflight: no X-Luaflame header, and a form or
/// text/plain content type or none). curl, the collector, `luaflame push`
/// and Pyroscope agents send no Origin and are never refused. An Origin named in
/// `trusted` (--cors-origin; "*" names none) counts as the server's own.
bool cross_site_simple_write(const httplib::Request& req, const std::string& own_origin,
                             const std::vector<std::string>& trusted = {});

/// The file under `root` named by the request path part `rel`, or "" when it
/// is not a regular file inside `root` after resolving symlinks, or the name
/// holds a NUL, a control byte, a backslash or a "..".
std::string safe_static_path(const std::string& root, const std::string& rel);

}  // namespace lfs
