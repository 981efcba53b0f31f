// luaflame-server configuration: one struct, filled from LUAFLAME_* environment
// variables first and command-line flags second (flags win).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "http/client_addr.hpp"

namespace lfs {

/// Every setting of the server, with its default.
struct Config {
  /// --listen / LUAFLAME_LISTEN: HOST:PORT. Default 127.0.0.1:8080 (loopback only).
  std::string host = "127.0.0.1";
  int port = 8080;
  /// --port-file / LUAFLAME_PORT_FILE: once listening, the bound port is written there (with
  /// --listen HOST:0 the system chooses it: how tests start servers that cannot collide).
  std::string port_file;
  /// --data / LUAFLAME_DATA: folder holding luaflame.db. Default "data".
  std::string data_dir = "data";
  /// --store / LUAFLAME_STORE: "postgresql://..." (a database several servers share) or
  /// "sqlite:DIR". Default "": SQLite in data_dir.
  std::string store;
  /// --token / LUAFLAME_TOKEN, or --token-file / LUAFLAME_TOKEN_FILE (the file's first line,
  /// kept out of `ps`): when set, writes need "Authorization: Bearer TOKEN". Default none.
  std::string token;
  /// --cors-origin ORIGIN (repeatable; "*" = any) / LUAFLAME_CORS_ORIGIN (comma-separated): pages
  /// on these origins may read runs; their writes need the token. Default none (same origin only).
  std::vector<std::string> cors_origins;
  /// --read-token / --read-token-file: when set, reads (the API, pages, /metrics; not /healthz)
  /// need "Authorization: Bearer T" or HTTP Basic with T as the password (or the write token).
  /// Default none: reads are open.
  std::string read_token;
  /// --public-url / LUAFLAME_PUBLIC_URL: scheme://host[:port] of the server as clients reach it,
  /// used in returned links and as the accepted Origin of browser writes. Default: none (links
  /// are made from --listen when it names one address, else relative; the Host header is never
  /// trusted).
  std::string public_url;
  /// --max-body / LUAFLAME_MAX_BODY: largest request body (after gzip decoding), bytes
  /// (suffixes K, M, G). Default 64 MiB.
  std::size_t max_body = 64u << 20;
  /// --keep-days / LUAFLAME_KEEP_DAYS: delete finished runs older than this; 0 = forever. Default
  /// 0.
  double keep_days = 0;
  /// --keep-runs / LUAFLAME_KEEP_RUNS: keep only the newest N runs; 0 = all. Default 0.
  int64_t keep_runs = 0;
  /// --disk-budget / LUAFLAME_DISK_BUDGET: delete the oldest finished runs while the store uses
  /// more than this many bytes (suffixes K, M, G); 0 = unlimited. Default 0.
  uint64_t disk_budget = 0;
  /// --log-level / LUAFLAME_LOG_LEVEL: trace debug info warn error off. Default info.
  std::string log_level = "info";
  /// --web / LUAFLAME_WEB: folder of the pages (index.html, run.html, ...). Default: the
  /// source tree's web/ (compile definition LUAFLAME_WEB_DIR).
  std::string web_dir;
  /// --threads / LUAFLAME_THREADS: request worker threads. httplib gives each open connection a
  /// worker, and a browser keeps up to 6 open: default 16.
  int threads = 16;
  /// --keep-alive / LUAFLAME_KEEP_ALIVE: seconds an idle kept-alive connection may hold its worker.
  /// Default 2 (httplib's 5 s let a browser's idle connections stall the next page).
  int keep_alive_seconds = 2;
  /// --cache-mb / LUAFLAME_CACHE_MB: memory for cached SVGs of finished runs. Default 64.
  std::size_t cache_bytes = 64u << 20;
  /// Limits on input (flags --max-frame, --max-depth, --max-stacks, --max-tags). Defaults:
  /// frame 4096 bytes, depth 1024 frames, 1,000,000 distinct stacks per run, 32 tags per run.
  std::size_t max_frame_bytes = 4096;
  std::size_t max_depth = 1024;
  std::size_t max_stacks = 1000000;
  std::size_t max_tags = 32;
  /// Limits on what a client controls (one source of truth: docs/server.md lists these).
  /// --max-json / LUAFLAME_MAX_JSON: largest JSON request body (/api/streams, /finish). 1 MiB.
  std::size_t max_json_bytes = 1u << 20;
  /// --max-json-depth / LUAFLAME_MAX_JSON_DEPTH: deepest nesting of a JSON body. 32.
  std::size_t max_json_depth = 32;
  /// --max-header-bytes / LUAFLAME_MAX_HEADER_BYTES: request line + headers, bytes. 32 KiB.
  std::size_t max_header_bytes = 32u << 10;
  /// --max-headers / LUAFLAME_MAX_HEADERS: header lines per request. 100.
  std::size_t max_headers = 100;
  /// --header-timeout / LUAFLAME_HEADER_TIMEOUT: seconds to send a whole request head. 10.
  int header_timeout_seconds = 10;
  /// --request-timeout / LUAFLAME_REQUEST_TIMEOUT: seconds for one whole request: head, body
  /// and the answer taken by the client. 120.
  int request_timeout_seconds = 120;
  /// --max-connections / LUAFLAME_MAX_CONNECTIONS: open connections in all. 512.
  std::size_t max_connections = 512;
  /// --max-client-connections / LUAFLAME_MAX_CLIENT_CONNECTIONS: open connections per client
  /// address. 64.
  std::size_t max_client_connections = 64;
  /// --max-client-workers / LUAFLAME_MAX_CLIENT_WORKERS: workers serving one client address at a
  /// time; 0 = a quarter of --threads (at least 1). Raise it behind a proxy, where every client
  /// has the proxy's address. Default 0.
  std::size_t max_client_workers = 0;
  /// --trusted-proxy / LUAFLAME_TRUSTED_PROXY: addresses or ranges (CIDR) of reverse proxies
  /// whose X-Forwarded-For / Forwarded names the client: the per-client limits and the logs
  /// key on that client; a proxy's own connections count only against --max-connections.
  /// Default none (those headers are ignored).
  std::vector<Cidr> trusted_proxies;
  /// --min-body-rate / LUAFLAME_MIN_BODY_RATE: a request body that has come slower than this
  /// many bytes a second, on average, 10 s after its head, is cut off (408). 1K; 0 = no floor.
  std::size_t min_body_rate = 1024;
  /// --disk-reserve / LUAFLAME_DISK_RESERVE: bytes kept preallocated next to the store and
  /// released when the disk fills, so deletes and retention can still run. 16 MiB; 0 = none.
  uint64_t disk_reserve = 16u << 20;
  /// --sync / LUAFLAME_SYNC: "full" (each commit fsynced: survives power loss) or "normal"
  /// (survives a crash or kill -9 of the server, not power loss; faster writes). Default full.
  bool sync_full = true;
  /// --retention-interval / LUAFLAME_RETENTION_INTERVAL: seconds between retention passes.
  /// Default 60.
  int retention_interval = 60;
  /// --stale-minutes / LUAFLAME_STALE_MINUTES: a live run with no new data for this long is marked
  /// finished (its collector died, or a Pyroscope series stopped); 0 = never. "No new data" is by
  /// when data arrived, not by its timestamps. Minutes, fractions allowed. Default 60.
  double stale_minutes = 60;
  /// --resolutions / LUAFLAME_RESOLUTIONS: time buckets of streamed runs and how long each is
  /// kept, WIDTH:KEEP,... finest first (units s m h d; KEEP 0 = forever).
  /// Default "1s:1d,10s:1d,1m:7d,10m:7d,1h:30d,1d:30d" (lfs::default_resolutions()).
  std::string resolutions;
};

/// Outcome of parsing: `error` non-empty when the arguments are wrong,
/// `help` when --help was asked.
struct ConfigResult {
  Config config;
  std::string error;
  bool help = false;
};

/// Parses `args` (without argv[0]) over the environment `env` ("NAME=VALUE" strings).
ConfigResult parse_config(const std::vector<std::string>& args,
                          const std::vector<std::string>& env);

/// The --help text.
std::string config_usage();

/// "64M" -> 67108864; false on a bad size.
bool parse_size(const std::string& text, uint64_t& out);

}  // namespace lfs
