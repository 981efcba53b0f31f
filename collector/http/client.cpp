// lfhttp::Client (luaflame/http.hpp): transport.h's table, loaded once per
// process on first use. Never unloaded: cpp-httplib's statics and a
// client's sockets may outlive any one user.
#include "luaflame/http.hpp"

#include "http/transport.h"
#include "plugin/plugin.hpp"

namespace lfhttp {

namespace {

const luaflame_http_transport_v1* table(std::string& why) {
  return lfplugin::table<luaflame_http_transport_v1>("libluaflame-http.so", "LUAFLAME_HTTP_LIB",
                                                     "luaflame_http_v1", why);
}

// The transport of an opened client (loaded then, never unloaded).
const luaflame_http_transport_v1* opened() {
  std::string unused;
  return table(unused);
}

std::string words(int code, const char* text) {
  switch (code) {
    case LUAFLAME_HTTP_CONNECTION:
      return "connection refused or host unreachable";
    case LUAFLAME_HTTP_READ:
      return "no answer (timed out or connection closed while reading)";
    case LUAFLAME_HTTP_WRITE:
      return "connection closed while sending";
    case LUAFLAME_HTTP_TLS_CONNECT:
      return "TLS handshake failed";
    case LUAFLAME_HTTP_TLS_VERIFY:
      return "TLS certificate not trusted";
    case LUAFLAME_HTTP_CANCELED:
      return "canceled";
    default:
      return text && *text ? text : "failed";
  }
}

}  // namespace

Client::Client() = default;

Client::~Client() {
  if (c_) opened()->close(c_);
}

bool Client::open(const std::string& origin, std::string& why) {
  const luaflame_http_transport_v1* t = table(why);
  if (!t) return false;
  char buf[200] = "";
  c_ = t->open(origin.c_str(), buf, sizeof buf);
  if (!c_) why = buf;
  return c_ != nullptr;
}

// Before a successful open() there is no client: settings do nothing and a
// request is unanswered.
void Client::header(const std::string& name, const std::string& value) {
  if (c_) opened()->header(c_, name.c_str(), value.c_str());
}

void Client::timeouts(double connect_s, double read_s, double write_s) {
  if (c_) opened()->timeouts(c_, connect_s, read_s, write_s);
}

void Client::compress(bool on) {
  if (c_) opened()->compress(c_, on ? 1 : 0);
}

Answer Client::get(const std::string& path) {
  return request("GET", path, "", nullptr);
}

Answer Client::post(const std::string& path, const std::string& body, const std::string& type) {
  return request("POST", path, body, type.c_str());
}

void Client::stop() {
  if (c_) opened()->stop(c_);
}

Answer Client::request(const char* method, const std::string& path, const std::string& body,
                       const char* type) {
  luaflame_http_answer a{};
  Answer out;
  if (!c_) {
    out.code = LUAFLAME_HTTP_OTHER;
    out.error = "no HTTP client (not opened)";
  } else if (opened()->request(c_, method, path.c_str(), body.data(), body.size(), type, &a)) {
    out.status = a.status;
    out.body.assign(a.body, a.body_len);
    opened()->free_answer(&a);
  } else {
    out.code = a.error;
    out.error = words(a.error, a.error_text);
  }
  return out;
}

}  // namespace lfhttp
