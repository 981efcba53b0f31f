// Parsing of flags and LUAFLAME_* variables into Config. One table drives
// both, so a flag and its variable can never disagree.
#include "config.hpp"
#include "store/store.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>

namespace lfs {
namespace {

using Setter = std::function<std::string(Config&, const std::string&)>;

struct Option {
  const char* flag;  // --flag
  const char* env;   // LUAFLAME_...
  const char* help;
  Setter set;  // returns an error message, empty when fine
};

bool parse_int(const std::string& s, long long& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtoll(s.c_str(), &end, 10);
  return errno == 0 && *end == '\0';
}

bool parse_double(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtod(s.c_str(), &end);
  return errno == 0 && *end == '\0' && out >= 0 && out < 1e12;
}

std::string set_listen(Config& c, const std::string& v) {
  auto colon = v.rfind(':');
  long long port = 0;
  if (colon == std::string::npos || !parse_int(v.substr(colon + 1), port) || port < 0 ||
      port > 65535)
    return "--listen wants HOST:PORT, got '" + v + "'";
  c.host = v.substr(0, colon);
  if (c.host.size() > 2 && c.host.front() == '[' && c.host.back() == ']')
    c.host = c.host.substr(1, c.host.size() - 2);
  if (c.host.empty()) c.host = "127.0.0.1";
  c.port = static_cast<int>(port);
  return {};
}

// A secret from a file (its first line, without trailing spaces): keeps it out of `ps`.
Setter file_setter(std::string Config::*field, const char* name) {
  return [field, name](Config& c, const std::string& path) -> std::string {
    std::ifstream in(path);
    std::string line;
    if (!in || !std::getline(in, line)) return std::string(name) + ": cannot read '" + path + "'";
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (line.empty()) return std::string(name) + ": '" + path + "' is empty";
    c.*field = line;
    return {};
  };
}

std::string set_public_url(Config& c, const std::string& v) {
  std::string u = v;
  while (!u.empty() && u.back() == '/') u.pop_back();
  auto scheme = u.find("://");
  bool ok = (u.rfind("http://", 0) == 0 || u.rfind("https://", 0) == 0) && u.size() > scheme + 3 &&
            u.find('/', scheme + 3) == std::string::npos;
  for (unsigned char ch : u) ok = ok && ch > 0x20 && ch < 0x7f;
  if (!ok) return "--public-url wants http(s)://HOST[:PORT] without a path, got '" + v + "'";
  c.public_url = u;
  return {};
}

template <class T>
Setter size_setter(T Config::*field, const char* name) {
  return [field, name](Config& c, const std::string& v) -> std::string {
    uint64_t n = 0;
    if (!parse_size(v, n)) return std::string(name) + " wants a size like 64M, got '" + v + "'";
    c.*field = static_cast<T>(n);
    return {};
  };
}

template <class T>
Setter int_setter(T Config::*field, const char* name, long long lo, long long hi) {
  return [=](Config& c, const std::string& v) -> std::string {
    long long n = 0;
    if (!parse_int(v, n) || n < lo || n > hi)
      return std::string(name) + " wants a whole number from " + std::to_string(lo) + " to " +
             std::to_string(hi) + ", got '" + v + "'";
    c.*field = static_cast<T>(n);
    return {};
  };
}

// Where the server listens and stores, and who may read and write.
std::vector<Option> where_and_who() {
  return {
      {"--listen", "LUAFLAME_LISTEN",
       "HOST:PORT to listen on (default 127.0.0.1:8080; port 0: one the system chooses)",
       set_listen},
      {"--port-file", "LUAFLAME_PORT_FILE",
       "once listening, write the bound port to this file (with --listen HOST:0)",
       [](Config& c, const std::string& v) -> std::string {
         c.port_file = v;
         return {};
       }},
      {"--data", "LUAFLAME_DATA", "folder of the store (default data)",
       [](Config& c, const std::string& v) -> std::string {
         if (v.empty()) return "--data wants a folder";
         c.data_dir = v;
         return {};
       }},
      {"--store", "LUAFLAME_STORE",
       "postgresql://USER[:PASSWORD]@HOST[:PORT]/DB (shared by several servers) or sqlite:DIR"
       " (default: SQLite in --data)",
       [](Config& c, const std::string& v) -> std::string {
         if (v.empty()) return "--store wants postgresql://... or sqlite:DIR";
         c.store = v;
         return {};
       }},
      {"--token", "LUAFLAME_TOKEN", "writes need 'Authorization: Bearer TOKEN' (default none)",
       [](Config& c, const std::string& v) -> std::string {
         // `--token "$UNSET"` would leave writes open to anyone: refused.
         if (v.empty()) return "--token wants a token (empty: writes would need none)";
         c.token = v;
         return {};
       }},
      {"--cors-origin", "LUAFLAME_CORS_ORIGIN",
       "let pages on ORIGIN read runs (repeatable, or comma-separated; * = any; default none)",
       [](Config& c, const std::string& v) -> std::string {
         std::size_t pos = 0;
         while (pos <= v.size()) {
           std::size_t comma = v.find(',', pos);
           std::string o =
               v.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
           if (o.empty() ||
               (o != "*" && o.rfind("http://", 0) != 0 && o.rfind("https://", 0) != 0) ||
               o.back() == '/')
             return "--cors-origin wants * or an origin such as https://www.speedscope.app, got '" +
                    o + "'";
           c.cors_origins.push_back(o);
           if (comma == std::string::npos) break;
           pos = comma + 1;
         }
         return {};
       }},
      {"--token-file", "LUAFLAME_TOKEN_FILE",
       "the write token from a file's first line (kept out of ps)",
       file_setter(&Config::token, "--token-file")},
      {"--read-token", "LUAFLAME_READ_TOKEN",
       "reads need this token too (Bearer, or Basic password) (default none)",
       [](Config& c, const std::string& v) -> std::string {
         if (v.empty()) return "--read-token wants a token (empty: reads would need none)";
         c.read_token = v;
         return {};
       }},
      {"--read-token-file", "LUAFLAME_READ_TOKEN_FILE", "the read token from a file's first line",
       file_setter(&Config::read_token, "--read-token-file")},
      {"--public-url", "LUAFLAME_PUBLIC_URL",
       "http(s)://HOST[:PORT] clients use: links and allowed Origin", set_public_url},
  };
}

// What a client may send, how fast, and how long runs are kept.
std::vector<Option> limits_and_retention() {
  return {
      {"--max-json", "LUAFLAME_MAX_JSON", "largest JSON request body (default 1M)",
       size_setter(&Config::max_json_bytes, "--max-json")},
      {"--max-json-depth", "LUAFLAME_MAX_JSON_DEPTH", "deepest nesting of a JSON body (default 32)",
       int_setter(&Config::max_json_depth, "--max-json-depth", 1, 1000)},
      {"--max-header-bytes", "LUAFLAME_MAX_HEADER_BYTES",
       "request line and headers, bytes (default 32K)",
       size_setter(&Config::max_header_bytes, "--max-header-bytes")},
      {"--max-headers", "LUAFLAME_MAX_HEADERS", "header lines per request (default 100)",
       int_setter(&Config::max_headers, "--max-headers", 8, 10000)},
      {"--header-timeout", "LUAFLAME_HEADER_TIMEOUT", "seconds to send a request head (default 10)",
       int_setter(&Config::header_timeout_seconds, "--header-timeout", 1, 3600)},
      {"--request-timeout", "LUAFLAME_REQUEST_TIMEOUT",
       "seconds for a whole request and its answer (default 120)",
       int_setter(&Config::request_timeout_seconds, "--request-timeout", 1, 86400)},
      {"--max-connections", "LUAFLAME_MAX_CONNECTIONS", "open connections in all (default 512)",
       int_setter(&Config::max_connections, "--max-connections", 1, 900)},
      {"--max-client-connections", "LUAFLAME_MAX_CLIENT_CONNECTIONS",
       "open connections per client address (default 64)",
       int_setter(&Config::max_client_connections, "--max-client-connections", 1, 900)},
      {"--max-client-workers", "LUAFLAME_MAX_CLIENT_WORKERS",
       "workers per client address (default 0 = threads/4)",
       int_setter(&Config::max_client_workers, "--max-client-workers", 0, 256)},
      {"--trusted-proxy", "LUAFLAME_TRUSTED_PROXY",
       "ADDR[/BITS],...: proxies whose X-Forwarded-For names the client (default none)",
       [](Config& c, const std::string& v) -> std::string {
         std::string err;
         c.trusted_proxies.clear();
         if (!parse_cidrs(v, c.trusted_proxies, err) || c.trusted_proxies.empty())
           return "--trusted-proxy wants ADDR[/BITS],...: " + (err.empty() ? "none given" : err);
         return {};
       }},
      {"--min-body-rate", "LUAFLAME_MIN_BODY_RATE",
       "cut off a request body slower than this, bytes/s, after 10 s (default 1K; 0 = none)",
       size_setter(&Config::min_body_rate, "--min-body-rate")},
      {"--disk-reserve", "LUAFLAME_DISK_RESERVE",
       "space kept free for deletes when the disk fills (default 16M)",
       size_setter(&Config::disk_reserve, "--disk-reserve")},
      {"--max-body", "LUAFLAME_MAX_BODY", "largest request body after gzip decoding (default 64M)",
       size_setter(&Config::max_body, "--max-body")},
      {"--keep-days", "LUAFLAME_KEEP_DAYS",
       "delete finished runs older than DAYS (default 0 = keep)",
       [](Config& c, const std::string& v) -> std::string {
         double d = 0;
         if (!parse_double(v, d)) return "--keep-days wants a number of days, got '" + v + "'";
         c.keep_days = d;
         return {};
       }},
      {"--keep-runs", "LUAFLAME_KEEP_RUNS", "keep only the newest N runs (default 0 = all)",
       int_setter(&Config::keep_runs, "--keep-runs", 0, 1000000000000LL)},
      {"--disk-budget", "LUAFLAME_DISK_BUDGET",
       "delete oldest runs above this store size (default 0 = none)",
       size_setter(&Config::disk_budget, "--disk-budget")},
  };
}

// Logging, pages, threads, caches, the shape of stored runs.
std::vector<Option> running() {
  return {
      {"--log-level", "LUAFLAME_LOG_LEVEL", "trace|debug|info|warn|error|off (default info)",
       [](Config& c, const std::string& v) -> std::string {
         static const char* levels[] = {"trace", "debug",    "info", "warn",
                                        "error", "critical", "off"};
         for (const char* l : levels)
           if (v == l) {
             c.log_level = v;
             return {};
           }
         return "--log-level wants trace|debug|info|warn|error|off, got '" + v + "'";
       }},
      {"--web", "LUAFLAME_WEB", "folder of the web pages (default: the source tree's web/)",
       [](Config& c, const std::string& v) -> std::string {
         c.web_dir = v;
         return {};
       }},
      {"--threads", "LUAFLAME_THREADS", "request worker threads (default 16)",
       int_setter(&Config::threads, "--threads", 1, 256)},
      {"--keep-alive", "LUAFLAME_KEEP_ALIVE",
       "seconds an idle connection may hold a worker (default 2)",
       int_setter(&Config::keep_alive_seconds, "--keep-alive", 0, 300)},
      {"--cache-mb", "LUAFLAME_CACHE_MB", "memory for cached SVGs in MiB (default 64)",
       [](Config& c, const std::string& v) -> std::string {
         long long n = 0;
         if (!parse_int(v, n) || n < 0 || n > 65536)
           return "--cache-mb wants 0..65536, got '" + v + "'";
         c.cache_bytes = static_cast<std::size_t>(n) << 20;
         return {};
       }},
      {"--max-frame", "LUAFLAME_MAX_FRAME", "longest frame name in bytes (default 4096)",
       int_setter(&Config::max_frame_bytes, "--max-frame", 16, 1 << 20)},
      {"--max-depth", "LUAFLAME_MAX_DEPTH", "deepest stack in frames (default 1024)",
       int_setter(&Config::max_depth, "--max-depth", 1, 1 << 20)},
      {"--max-stacks", "LUAFLAME_MAX_STACKS", "distinct stacks per run (default 1000000)",
       int_setter(&Config::max_stacks, "--max-stacks", 1, 1LL << 32)},
      {"--max-tags", "LUAFLAME_MAX_TAGS", "tags per run (default 32)",
       int_setter(&Config::max_tags, "--max-tags", 0, 1024)},
      {"--resolutions", "LUAFLAME_RESOLUTIONS",
       "time buckets of streams and their retention, WIDTH:KEEP,... (default "
       "1s:1d,10s:1d,1m:7d,10m:7d,1h:30d,1d:30d)",
       [](Config& c, const std::string& v) -> std::string {
         std::vector<Resolution> r;
         std::string err = parse_resolutions(v, r);
         if (!err.empty()) return "--resolutions: " + err;
         c.resolutions = v;
         return {};
       }},
      {"--retention-interval", "LUAFLAME_RETENTION_INTERVAL",
       "seconds between retention passes (default 60)",
       int_setter(&Config::retention_interval, "--retention-interval", 1, 86400)},
      {"--sync", "LUAFLAME_SYNC",
       "full (fsync each commit) or normal (survives kill -9, not power loss)",
       [](Config& c, const std::string& v) -> std::string {
         if (v != "full" && v != "normal") return "--sync wants full or normal, got '" + v + "'";
         c.sync_full = v == "full";
         return {};
       }},
      {"--stale-minutes", "LUAFLAME_STALE_MINUTES",
       "mark live runs that got no data for this many minutes finished (default 60; 0.5 = 30 s)",
       [](Config& c, const std::string& v) -> std::string {
         double m = 0;
         if (!parse_double(v, m) || !(m >= 0 && m <= 1e6))
           return "--stale-minutes wants minutes from 0 to 1000000, got '" + v + "'";
         c.stale_minutes = m;
         return {};
       }},
  };
}

// Every option, in the order --help lists them.
const std::vector<Option>& options() {
  static const std::vector<Option> opts = [] {
    std::vector<Option> all = where_and_who();
    const std::vector<Option> limits = limits_and_retention(), rest = running();
    all.insert(all.end(), limits.begin(), limits.end());
    all.insert(all.end(), rest.begin(), rest.end());
    return all;
  }();
  return opts;
}

}  // namespace

bool parse_size(const std::string& text, uint64_t& out) {
  if (text.empty()) return false;
  std::string digits = text;
  uint64_t mult = 1;
  char last = static_cast<char>(std::toupper(static_cast<unsigned char>(digits.back())));
  if (last == 'B' && digits.size() > 1) {  // "64MB", "64MiB" read as "64M"
    digits.pop_back();
    if (digits.size() > 1 && (digits.back() == 'i' || digits.back() == 'I')) digits.pop_back();
    last = static_cast<char>(std::toupper(static_cast<unsigned char>(digits.back())));
  }
  if (last == 'K') mult = 1ull << 10;
  if (last == 'M') mult = 1ull << 20;
  if (last == 'G') mult = 1ull << 30;
  if (last == 'T') mult = 1ull << 40;
  if (mult != 1) digits.pop_back();
  long long n = 0;
  if (!parse_int(digits, n) || n < 0) return false;
  if (static_cast<uint64_t>(n) > UINT64_MAX / mult) return false;
  out = static_cast<uint64_t>(n) * mult;
  return true;
}

std::string config_usage() {
  std::string s =
      "usage: luaflame-server [options]\n"
      "Stores profile runs in SQLite and serves flame graphs over HTTP.\n"
      "Every option can also be given as the environment variable shown.\n\n";
  // One column for the flags, as wide as the widest and two spaces more: a fixed
  // width of 26 ran "--max-client-connections" into its text (issue 31).
  std::size_t width = std::string("  --help").size();
  for (const Option& o : options())
    width = std::max(width, std::string("  ").size() + std::strlen(o.flag) + 6);
  width += 2;
  for (const Option& o : options()) {
    std::string left = std::string("  ") + o.flag + " VALUE";
    left.resize(width, ' ');
    s += left + o.help + "  [" + o.env + "]\n";
  }
  std::string help = "  --help";
  help.resize(width, ' ');
  s += help + "this text\n";
  return s;
}

ConfigResult parse_config(const std::vector<std::string>& args,
                          const std::vector<std::string>& env) {
  ConfigResult r;
#ifdef LUAFLAME_WEB_DIR
  r.config.web_dir = LUAFLAME_WEB_DIR;
#endif
  for (const std::string& kv : env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
    // Empty is unset: compose's `LUAFLAME_TOKEN: ${LUAFLAME_TOKEN:-}` passes
    // an empty value when the host has none.
    if (value.empty()) continue;
    for (const Option& o : options()) {
      if (key != o.env) continue;
      std::string err = o.set(r.config, value);
      if (!err.empty()) {
        r.error = o.env + std::string(": ") + err;
        return r;
      }
    }
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      r.help = true;
      return r;
    }
    std::string flag = a, value;
    bool has_value = false;
    auto eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      flag = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_value = true;
    }
    const Option* found = nullptr;
    for (const Option& o : options())
      if (flag == o.flag) found = &o;
    if (!found) {
      r.error = "unknown option '" + a + "' (see --help)";
      return r;
    }
    if (!has_value) {
      if (i + 1 >= args.size()) {
        r.error = flag + " needs a value";
        return r;
      }
      value = args[++i];
    }
    std::string err = found->set(r.config, value);
    if (!err.empty()) {
      r.error = err;
      return r;
    }
  }
  return r;
}

}  // namespace lfs
