#include "http_client.hpp"

#include <cctype>
#include <cstdlib>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace lfcli {

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

// Percent-encodes a query component (RFC 3986 unreserved characters pass).
std::string url_encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// Why a request got no answer at all: the server is down, the name does not resolve...
std::string transport_error(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
      return "connection refused or host unreachable";
    case httplib::Error::Read:
      return "no answer (timed out or connection closed while reading)";
    case httplib::Error::Write:
      return "connection closed while sending";
    case httplib::Error::SSLConnection:
      return "TLS handshake failed";
    case httplib::Error::SSLServerVerification:
      return "TLS certificate not trusted";
    default:
      return httplib::to_string(e);
  }
}

}  // namespace

ClientOptions default_client_options() {
  ClientOptions o;
  o.server = env_or("LUAFLAME_SERVER", "http://127.0.0.1:8080");
  o.token = env_or("LUAFLAME_TOKEN", "");
  return o;
}

struct HttpClient::Impl {
  explicit Impl(const std::string& origin) : client(origin) {}
  httplib::Client client;
  httplib::Headers headers;

  Reply answer(const httplib::Result& r, const std::string& base) {
    Reply out;
    if (!r) {
      out.error = "cannot reach " + base + ": " + transport_error(r.error());
      return out;
    }
    out.status = r->status;
    out.body = r->body;
    return out;
  }
};

HttpClient::HttpClient() = default;
HttpClient::~HttpClient() = default;

bool HttpClient::open(const ClientOptions& o, std::string& why) {
  const std::string& url = o.server;
  const std::string::size_type sep = url.find("://");
  if (sep == std::string::npos) {
    why = "must start with http:// or https://";
    return false;
  }
  const std::string scheme = url.substr(0, sep);
  if (scheme != "http" && scheme != "https") {
    why = "scheme '" + scheme + "' is not http or https";
    return false;
  }
  const std::string rest = url.substr(sep + 3);
  const std::string::size_type slash = rest.find('/');
  const std::string hostport = rest.substr(0, slash);
  std::string prefix = slash == std::string::npos ? "" : rest.substr(slash);
  if (hostport.empty()) {
    why = "has no host";
    return false;
  }
  if (prefix.find_first_of("?#") != std::string::npos) {
    why = "must not have a query or fragment";
    return false;
  }
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  origin_ = scheme + "://" + hostport;
  prefix_ = prefix;
  try {
    impl_ = std::make_unique<Impl>(origin_);
  } catch (const std::exception& e) {  // httplib throws on URLs it cannot use
    why = e.what();
    return false;
  }
  impl_->client.set_connection_timeout(o.timeout_s, 0);
  impl_->client.set_read_timeout(o.timeout_s, 0);
  impl_->client.set_write_timeout(o.timeout_s, 0);
  if (!o.token.empty()) impl_->headers.emplace("Authorization", "Bearer " + o.token);
  impl_->headers.emplace("User-Agent", "luaflame-cli");
  return true;
}

Reply HttpClient::get(const std::string& path, const Query& query) {
  return impl_->answer(impl_->client.Get(with_query(prefix_ + path, query), impl_->headers),
                       base());
}

Reply HttpClient::post(const std::string& path, const Query& query, const std::string& body,
                       const std::string& type, bool gzip) {
  impl_->client.set_compress(gzip);
  return impl_->answer(
      impl_->client.Post(with_query(prefix_ + path, query), impl_->headers, body, type), base());
}

std::string HttpClient::link(const std::string& path) const {
  if (path.rfind("http://", 0) == 0 || path.rfind("https://", 0) == 0) return path;
  return base() + path;
}

std::string with_query(const std::string& path, const Query& q) {
  std::string out = path;
  char sep = '?';
  for (const auto& kv : q) {
    out += sep;
    out += url_encode(kv.first) + "=" + url_encode(kv.second);
    sep = '&';
  }
  return out;
}

std::string http_error(const Reply& r, const std::string& file) {
  if (r.status == 0) return r.error;
  using Json = nlohmann::json;
  std::string msg = "server answered HTTP " + std::to_string(r.status);
  const Json j = Json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("error")) {
    const Json& e = j["error"];
    msg += ": " + (e.is_string() ? e.get<std::string>() : e.dump());
    if (j.contains("line") && j["line"].is_number_integer()) {
      const bool reason = j.contains("reason") && j["reason"].is_string();
      msg = (file.empty() ? std::string("line ") : file + ":") +
            std::to_string(j["line"].get<long long>()) + ": " +
            (reason ? j["reason"].get<std::string>() : "bad line") + " (" + msg + ")";
    }
  } else if (!r.body.empty()) {
    msg += ": " + r.body.substr(0, 300);
  }
  if (r.status == 401) msg += " (set --token or LUAFLAME_TOKEN)";
  return msg;
}

}  // namespace lfcli
