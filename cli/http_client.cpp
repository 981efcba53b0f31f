#include "http_client.hpp"

#include <cctype>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "luaflame/http.hpp"

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

}  // namespace

ClientOptions default_client_options() {
  ClientOptions o;
  o.server = env_or("LUAFLAME_SERVER", "http://127.0.0.1:8080");
  o.token = env_or("LUAFLAME_TOKEN", "");
  return o;
}

struct HttpClient::Impl {
  lfhttp::Client client;

  static Reply answer(lfhttp::Answer a, const std::string& base) {
    Reply out;
    if (a.status == 0) {
      out.error = "cannot reach " + base + ": " + a.error;
      return out;
    }
    out.status = a.status;
    out.body = std::move(a.body);
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
  impl_ = std::make_unique<Impl>();
  if (!impl_->client.open(origin_, why)) return false;
  impl_->client.timeouts(o.timeout_s, o.timeout_s, o.timeout_s);
  if (!o.token.empty()) impl_->client.header("Authorization", "Bearer " + o.token);
  impl_->client.header("User-Agent", "luaflame-cli");
  return true;
}

Reply HttpClient::get(const std::string& path, const Query& query) {
  return Impl::answer(impl_->client.get(with_query(prefix_ + path, query)), base());
}

Reply HttpClient::post(const std::string& path, const Query& query, const std::string& body,
                       const std::string& type, bool gzip) {
  impl_->client.compress(gzip);
  return Impl::answer(impl_->client.post(with_query(prefix_ + path, query), body, type), base());
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
