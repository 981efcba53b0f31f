/* luaflame's HTTP transport, version 1: the C interface between
 * libluaflame-http.so (transport.cpp, over cpp-httplib and through it
 * OpenSSL, zlib and brotli) and the code that loads it on first use
 * (client.cpp: the collector's stream, the `luaflame` command's push and
 * compare). Kept out of every profiled program until it streams: linked in,
 * those libraries cost each process about 9 ms of CPU at start (the dynamic
 * loader's relocations, mostly libcrypto's) and put a second OpenSSL beside
 * any the host has.
 *
 *   table    := luaflame_http_v1()        one static luaflame_http_transport_v1, version = 1
 *   client   := open(origin, why, why_len)  NULL: `why` says why
 *   client   -> header* timeouts? compress? (request free_answer)* close
 *   stop     := any thread, any time before close: requests in flight end
 *
 * Contract: a client is used by one thread at a time, except stop. Nothing
 * but the declared C types crosses: no C++ exception (each entry catches
 * everything and reports it as a failed open or request), no longjmp. The
 * answer's body is the transport's (malloc), given back by free_answer. A
 * new version is a new entry point and table; this one never changes. */
#ifndef LUAFLAME_HTTP_TRANSPORT_H
#define LUAFLAME_HTTP_TRANSPORT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Why a request got no answer. */
enum luaflame_http_error {
  LUAFLAME_HTTP_NONE = 0,       /* answered */
  LUAFLAME_HTTP_CONNECTION = 1, /* refused, unreachable, or the name does not resolve */
  LUAFLAME_HTTP_READ = 2,       /* timed out or closed while reading */
  LUAFLAME_HTTP_WRITE = 3,      /* closed while sending */
  LUAFLAME_HTTP_TLS_CONNECT = 4,
  LUAFLAME_HTTP_TLS_VERIFY = 5, /* certificate not trusted */
  LUAFLAME_HTTP_CANCELED = 6,   /* stop() */
  LUAFLAME_HTTP_OTHER = 7       /* see error_text */
};

struct luaflame_http_answer {
  int status; /* HTTP status; 0: no answer */
  char* body; /* malloc'd, NUL-terminated, body_len bytes before the NUL */
  size_t body_len;
  int error;            /* enum luaflame_http_error */
  char error_text[160]; /* the transport's own words when status is 0 */
};

struct luaflame_http_transport_v1 {
  int version; /* 1 */
  /* origin: "http[s]://host[:port]", no path. */
  void* (*open)(const char* origin, char* why, size_t why_len);
  void (*header)(void* client, const char* name, const char* value);
  void (*timeouts)(void* client, double connect_s, double read_s, double write_s);
  void (*compress)(void* client, int on); /* gzip the request bodies */
  /* method: "GET" or "POST" (body, body_len, type). Returns 1 when answered. */
  int (*request)(void* client, const char* method, const char* path, const char* body,
                 size_t body_len, const char* type, struct luaflame_http_answer* out);
  void (*free_answer)(struct luaflame_http_answer* answer);
  void (*stop)(void* client);
  void (*close)(void* client);
};

/* NOLINTNEXTLINE(modernize-redundant-void-arg): a C header */
typedef const struct luaflame_http_transport_v1* (*luaflame_http_v1_fn)(void);
const struct luaflame_http_transport_v1* luaflame_http_v1(void);

#ifdef __cplusplus
}
#endif

#endif
