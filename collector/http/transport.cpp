// libluaflame-http.so: transport.h's table over cpp-httplib. Each entry
// catches every exception (the contract in transport.h): a failure is a
// NULL client or an unanswered request, never something thrown into C.
#include "http/transport.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <httplib.h>

#include "plugin/c_entry.hpp"

namespace {

struct Client {
  explicit Client(const char* origin) : cli(origin) {}
  httplib::Client cli;
  httplib::Headers headers;
};

using lfplugin::put_text;

int error_code(httplib::Error e) {
  switch (e) {
    case httplib::Error::Success:
      return LUAFLAME_HTTP_NONE;
    case httplib::Error::Connection:
      return LUAFLAME_HTTP_CONNECTION;
    case httplib::Error::Read:
      return LUAFLAME_HTTP_READ;
    case httplib::Error::Write:
      return LUAFLAME_HTTP_WRITE;
    case httplib::Error::SSLConnection:
      return LUAFLAME_HTTP_TLS_CONNECT;
    case httplib::Error::SSLServerVerification:
      return LUAFLAME_HTTP_TLS_VERIFY;
    case httplib::Error::Canceled:
      return LUAFLAME_HTTP_CANCELED;
    default:
      return LUAFLAME_HTTP_OTHER;
  }
}

// httplib throws on URLs it cannot use.
void* open_client(const char* origin, char* why, std::size_t why_len) {
  return lfplugin::guarded(why, why_len, "the HTTP client failed", static_cast<void*>(nullptr),
                           [&]() -> void* {
                             auto c = std::make_unique<Client>(origin);
                             if (c->cli.is_valid()) return c.release();
                             put_text(why, why_len, std::string("cannot use ") + origin);
                             return nullptr;
                           });
}

void set_header(void* c, const char* name, const char* value) {
  try {
    static_cast<Client*>(c)->headers.emplace(name, value);
  } catch (...) {  // out of memory: the request goes without it
  }
}

void set_timeouts(void* c, double connect_s, double read_s, double write_s) {
  auto split = [](double s, time_t& whole, time_t& usec) {
    whole = static_cast<time_t>(s);
    usec = static_cast<time_t>((s - static_cast<double>(whole)) * 1e6);
  };
  time_t w = 0, u = 0;
  httplib::Client& cli = static_cast<Client*>(c)->cli;
  split(connect_s, w, u), cli.set_connection_timeout(w, u);
  split(read_s, w, u), cli.set_read_timeout(w, u);
  split(write_s, w, u), cli.set_write_timeout(w, u);
}

void set_compress(void* c, int on) {
  static_cast<Client*>(c)->cli.set_compress(on != 0);
}

// The answer's body copied out with malloc (the caller's C side frees it
// through free_answer).
int fill(const httplib::Result& r, luaflame_http_answer* out) {
  out->status = 0, out->body = nullptr, out->body_len = 0, out->error_text[0] = '\0';
  out->error = error_code(r.error());
  if (!r) {
    put_text(out->error_text, sizeof out->error_text, httplib::to_string(r.error()));
    return 0;
  }
  out->body = static_cast<char*>(std::malloc(r->body.size() + 1));
  if (!out->body) {
    out->error = LUAFLAME_HTTP_OTHER;
    put_text(out->error_text, sizeof out->error_text, "out of memory for the answer");
    return 0;
  }
  std::memcpy(out->body, r->body.data(), r->body.size());
  out->body[r->body.size()] = '\0';
  out->body_len = r->body.size();
  out->status = r->status;
  return 1;
}

int request(void* cv, const char* method, const char* path, const char* body, std::size_t body_len,
            const char* type, luaflame_http_answer* out) {
  const int answered =
      lfplugin::guarded(out->error_text, sizeof out->error_text, "the HTTP client failed", -1, [&] {
        Client& c = *static_cast<Client*>(cv);
        if (std::strcmp(method, "GET") == 0) return fill(c.cli.Get(path, c.headers), out);
        return fill(c.cli.Post(path, c.headers, body, body_len, type), out);
      });
  if (answered >= 0) return answered;
  out->status = 0, out->body = nullptr, out->body_len = 0, out->error = LUAFLAME_HTTP_OTHER;
  return 0;
}

void free_answer(luaflame_http_answer* a) {
  std::free(a->body);
  a->body = nullptr;
  a->body_len = 0;
}

void stop(void* c) {
  static_cast<Client*>(c)->cli.stop();
}

void close_client(void* c) {
  delete static_cast<Client*>(c);
}

const luaflame_http_transport_v1 kTable = {
    1,       open_client, set_header, set_timeouts, set_compress,
    request, free_answer, stop,       close_client};

}  // namespace

extern "C" __attribute__((visibility("default"))) const luaflame_http_transport_v1*
luaflame_http_v1() {
  return &kTable;
}
