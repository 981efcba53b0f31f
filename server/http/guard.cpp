// Checks on what a client controls (see guard.hpp).
#include "http/guard.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "http/app.hpp"

namespace lfs {

Gunzip::Gunzip(std::size_t limit) : limit_(limit) {
  // 15 + 16: gzip wrapper only (zlib checks the CRC-32 and ISIZE trailer).
  if (inflateInit2(&z_, 15 + 16) != Z_OK) {
    bad_ = true;
    error_ = "cannot start gzip decoding";
  }
}

Gunzip::~Gunzip() {
  inflateEnd(&z_);
}

Gunzip::Status Gunzip::feed(const char* data, std::size_t n, std::string& out) {
  if (bad_) return Status::bad;
  if (n > 0) any_ = true;
  z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
  z_.avail_in = static_cast<uInt>(n);
  char buf[16384];
  while (z_.avail_in > 0) {
    if (ended_) {
      // Another member follows (RFC 1952 2.2: a gzip file is a series of members).
      inflateReset(&z_);
      ended_ = false;
    }
    z_.next_out = reinterpret_cast<Bytef*>(buf);
    z_.avail_out = sizeof buf;
    int rc = inflate(&z_, Z_NO_FLUSH);
    std::size_t got = sizeof buf - z_.avail_out;
    if (got > limit_ - std::min(total_, limit_)) return Status::too_big;
    total_ += got;
    out.append(buf, got);
    if (rc == Z_STREAM_END) {
      ended_ = true;
      continue;
    }
    if (rc == Z_BUF_ERROR && z_.avail_in == 0) break;
    if (rc != Z_OK) {
      bad_ = true;
      error_ =
          std::string("bad gzip data (") + (z_.msg ? z_.msg : "error " + std::to_string(rc)) + ")";
      return Status::bad;
    }
  }
  return Status::ok;
}

std::string Gunzip::error() const {
  if (bad_) return error_;
  if (!any_) return "empty gzip body";
  if (!ended_)
    return "gzip body is truncated: it ends without the end of its last member (CRC and length)";
  return {};
}

std::size_t json_depth(std::string_view text, std::size_t limit) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char ch : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (ch == '\\')
        escaped = true;
      else if (ch == '"')
        in_string = false;
      continue;
    }
    if (ch == '"')
      in_string = true;
    else if (ch == '[' || ch == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return limit + 1;
    } else if ((ch == ']' || ch == '}') && depth > 0)
      --depth;
  }
  return deepest;
}

void check_json_depth(std::string_view text, std::size_t max_depth) {
  if (json_depth(text, max_depth) > max_depth)
    throw HttpError(400, "JSON body nested deeper than " + std::to_string(max_depth) +
                             " levels (--max-json-depth)");
}

nlohmann::json parse_json_request(std::string_view body, std::size_t max_bytes,
                                  std::size_t max_depth, bool optional) {
  if (body.empty() && optional) return nlohmann::json::object();
  if (body.size() > max_bytes)
    throw HttpError(413,
                    "JSON body larger than " + std::to_string(max_bytes) + " bytes (--max-json)");
  check_json_depth(body, max_depth);
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw HttpError(400, "the body must be a JSON object");
  return j;
}

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool base64_decode(std::string_view in, std::string& out) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  unsigned acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = value(c);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return true;
}

bool same_secret(const std::string& got, const std::string& want) {
  unsigned diff = got.size() != want.size();
  for (std::size_t i = 0; i < want.size(); ++i)
    diff |= static_cast<unsigned char>(want[i] ^ (i < got.size() ? got[i] : 0));
  return diff == 0;
}

}  // namespace

std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string url_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
      continue;
    }
    if (s[i] == '%' && i + 2 < s.size()) {
      int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

std::multimap<std::string, std::string> parse_query(std::string_view target) {
  std::multimap<std::string, std::string> params;
  auto q = target.find('?');
  if (q == std::string_view::npos) return params;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (part.empty()) continue;
    auto eq = part.find('=');
    std::string key = url_decode(part.substr(0, eq));
    std::string value =
        eq == std::string_view::npos ? std::string() : url_decode(part.substr(eq + 1));
    params.emplace(std::move(key), std::move(value));
  }
  return params;
}

std::string log_safe(std::string_view s, std::size_t max) {
  std::string out;
  for (unsigned char c : s.substr(0, max)) {
    if (c < 0x20 || c == 0x7f || c == '\\') {
      char esc[5];
      std::snprintf(esc, sizeof esc, "\\x%02x", c);
      out += esc;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > max) out += "...";
  return out;
}

bool carries_token(const std::string& authorization, const std::string& token, bool basic) {
  if (token.empty()) return false;
  std::string got;
  if (authorization.rfind("Bearer ", 0) == 0) {
    got = authorization.substr(7);
  } else if (basic && authorization.rfind("Basic ", 0) == 0) {
    std::string userpass;
    if (!base64_decode(authorization.substr(6), userpass)) return false;
    auto colon = userpass.find(':');
    if (colon == std::string::npos) return false;
    got = userpass.substr(colon + 1);
  } else {
    return false;
  }
  return same_secret(got, token);
}

const char* content_security_policy(const std::string& content_type) {
  const std::string type = ascii_lower(content_type.substr(0, content_type.find(';')));
  if (type == "text/html")
    return "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
           "img-src 'self' data: blob:; object-src 'none'; base-uri 'none'; "
           "form-action 'self'; frame-ancestors 'none'";
  if (type == "text/javascript" || type == "application/javascript")
    return "default-src 'self'";  // a worker's own policy: fetches to this server
  if (type == "image/svg+xml")
    return "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
           "sandbox allow-scripts";
  return "default-src 'none'; frame-ancestors 'none'; sandbox";
}

void security_headers(httplib::Response& res) {
  res.set_header("X-Content-Type-Options", "nosniff");
  if (!res.has_header("Content-Security-Policy"))
    res.set_header("Content-Security-Policy",
                   content_security_policy(res.get_header_value("Content-Type")));
}

bool cross_site_simple_write(const httplib::Request& req, const std::string& own_origin,
                             const std::vector<std::string>& trusted) {
  const std::string origin = req.get_header_value("Origin");
  // A trusted origin is exact: "*" lets any page read, never write without the token.
  if (!origin.empty() && std::find(trusted.begin(), trusted.end(), origin) != trusted.end())
    return false;
  const std::string site = ascii_lower(req.get_header_value("Sec-Fetch-Site"));
  bool cross =
      (!origin.empty() && origin != own_origin) || site == "cross-site" || site == "same-site";
  if (!cross) return false;
  if (req.has_header("X-Luaflame")) return false;  // a custom header needs a preflight
  std::string type = ascii_lower(req.get_header_value("Content-Type"));
  type = type.substr(0, type.find(';'));
  while (!type.empty() && type.back() == ' ') type.pop_back();
  return type.empty() || type == "text/plain" || type == "application/x-www-form-urlencoded" ||
         type == "multipart/form-data";
}

std::string safe_static_path(const std::string& root, const std::string& rel) {
  if (rel.empty() || rel.find("..") != std::string::npos) return {};
  for (unsigned char c : rel)
    if (c < 0x20 || c == 0x7f || c == '\\') return {};
  std::error_code ec;
  std::filesystem::path base = std::filesystem::canonical(root, ec);
  if (ec) return {};
  std::filesystem::path file =
      std::filesystem::canonical(base / std::filesystem::path(rel).relative_path(), ec);
  if (ec || !std::filesystem::is_regular_file(file, ec)) return {};
  // Inside base after resolving every symlink: base must be a prefix by path components.
  auto b = base.begin(), f = file.begin();
  for (; b != base.end(); ++b, ++f)
    if (f == file.end() || *b != *f) return {};
  return file.string();
}

}  // namespace lfs
