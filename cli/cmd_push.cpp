// luaflame push / luaflame compare: the CI side of the HTTP API (docs/api.md).
//
//   push:    POST /api/runs?name=&tag=&units=&metric=   body: folded text
//   compare: GET  /api/diff?base=|base_name=&base_tag=&head=&threshold=&metric=
//
// Both are thin: every request they make is a plain HTTP call that curl can
// make as well (docs/ship.md lists the curl equivalents), so a pipeline never
// needs this binary to talk to the server. What they add is the error
// handling a CI step wants: clear messages, the server's line number for a
// bad upload, and exit codes a job can branch on.
//
// Exit codes. push: 0 uploaded, 2 anything else. compare: 0 within the
// threshold, 1 past it (the server answered 412), 2 on any error.
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "luaflame/pprof.hpp"

namespace lfcli {
namespace {

using Json = nlohmann::json;
using Query = std::vector<std::pair<std::string, std::string>>;

constexpr int kExitOk = 0;
constexpr int kExitRegression = 1;
constexpr int kExitError = 2;

// Options both commands share: where the server is and how to reach it.
struct ClientOptions {
  std::string server;   // --server, else $LUAFLAME_SERVER, else "http://127.0.0.1:8080"
  std::string token;    // --token, else $LUAFLAME_TOKEN, else none (sent as a Bearer token)
  int timeout_s = 60;   // --timeout SECONDS: connect, read and write timeout (default 60)
};

// A server URL split into what httplib::Client takes (scheme://host:port)
// and a path prefix, so a server behind a reverse proxy at /luaflame works.
struct ServerUrl {
  std::string origin;  // "http://host:port"
  std::string prefix;  // "" or "/luaflame" (no trailing slash)
};

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

// Parses http[s]://host[:port][/prefix]; false with a reason when it is not one.
bool parse_server_url(const std::string& url, ServerUrl& out, std::string& why) {
  const std::string::size_type sep = url.find("://");
  if (sep == std::string::npos) { why = "must start with http:// or https://"; return false; }
  const std::string scheme = url.substr(0, sep);
  if (scheme != "http" && scheme != "https") { why = "scheme '" + scheme + "' is not http or https"; return false; }
  std::string rest = url.substr(sep + 3);
  const std::string::size_type slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  std::string prefix = slash == std::string::npos ? "" : rest.substr(slash);
  if (hostport.empty()) { why = "has no host"; return false; }
  if (prefix.find_first_of("?#") != std::string::npos) { why = "must not have a query or fragment"; return false; }
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  out.origin = scheme + "://" + hostport;
  out.prefix = prefix;
  return true;
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

// A connected-on-demand client plus the URL pieces to build links with.
struct Server {
  ServerUrl url;
  httplib::Client client;
  httplib::Headers headers;

  Server(const ServerUrl& u, const ClientOptions& o) : url(u), client(u.origin) {
    client.set_connection_timeout(o.timeout_s, 0);
    client.set_read_timeout(o.timeout_s, 0);
    client.set_write_timeout(o.timeout_s, 0);
    if (!o.token.empty()) headers.emplace("Authorization", "Bearer " + o.token);
    headers.emplace("User-Agent", "luaflame-cli");
  }
  // An absolute link for a path the server answered with (absolute or not).
  std::string link(const std::string& path) const {
    if (path.rfind("http://", 0) == 0 || path.rfind("https://", 0) == 0) return path;
    return url.origin + url.prefix + path;
  }
};

// Why a request got no answer at all: the server is down, the name does not resolve...
std::string transport_error(const httplib::Result& r, const Server& s) {
  std::string why;
  switch (r.error()) {
    case httplib::Error::Connection: why = "connection refused or host unreachable"; break;
    case httplib::Error::Read: why = "no answer (timed out or connection closed while reading)"; break;
    case httplib::Error::Write: why = "connection closed while sending"; break;
    case httplib::Error::SSLConnection: why = "TLS handshake failed"; break;
    case httplib::Error::SSLServerVerification: why = "TLS certificate not trusted"; break;
    default: why = httplib::to_string(r.error()); break;
  }
  return "cannot reach " + s.url.origin + s.url.prefix + ": " + why;
}

// The server's error body ({"error", "line", "reason"} or anything else) as one line.
std::string http_error(int status, const std::string& body, const std::string& file) {
  std::string msg = "server answered HTTP " + std::to_string(status);
  Json j = Json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error")) {
    const Json& e = j["error"];
    msg += ": " + (e.is_string() ? e.get<std::string>() : e.dump());
    if (j.contains("line") && j["line"].is_number_integer()) {
      msg = (file.empty() ? std::string("line ") : file + ":") + std::to_string(j["line"].get<long long>()) +
            ": " + (j.contains("reason") && j["reason"].is_string() ? j["reason"].get<std::string>() : "bad line") +
            " (" + msg + ")";
    }
  } else if (!body.empty()) {
    msg += ": " + body.substr(0, 300);
  }
  if (status == 401) msg += " (set --token or LUAFLAME_TOKEN)";
  return msg;
}

// ---------------------------------------------------------------- arguments

// Walks argv accepting "--opt value" and "--opt=value"; a tiny shared parser.
struct Args {
  Args(int c, char** v) : argc(c), argv(v) {}
  int argc;
  char** argv;
  int i = 1;
  std::string error;

  bool done() const { return i >= argc; }
  // If argv[i] is OPT (either form), stores its value in out and advances.
  bool take(const char* opt, std::string& out) {
    const std::string a = argv[i];
    const std::string o = opt;
    if (a == o) {
      if (i + 1 >= argc) { error = "option " + o + " needs a value"; return true; }
      out = argv[i + 1];
      i += 2;
      return true;
    }
    if (a.rfind(o + "=", 0) == 0) { out = a.substr(o.size() + 1); ++i; return true; }
    return false;
  }
  bool flag(const char* opt) {
    if (std::strcmp(argv[i], opt) != 0) return false;
    ++i;
    return true;
  }
};

bool take_client_option(Args& a, ClientOptions& o) {
  std::string v;
  if (a.take("--server", o.server) || a.take("--token", o.token)) return true;
  if (a.take("--timeout", v)) {
    char* end = nullptr;
    long t = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end || t <= 0 || t > 86400) a.error = "--timeout wants whole seconds, got '" + v + "'";
    o.timeout_s = static_cast<int>(t);
    return true;
  }
  return false;
}

ClientOptions default_client_options() {
  ClientOptions o;
  o.server = env_or("LUAFLAME_SERVER", "http://127.0.0.1:8080");
  o.token = env_or("LUAFLAME_TOKEN", "");
  return o;
}

// k=v, with a non-empty key; "why" says what is wrong otherwise.
bool valid_tag(const std::string& t, std::string& why) {
  const std::string::size_type eq = t.find('=');
  if (eq == std::string::npos || eq == 0) { why = "tag '" + t + "' is not KEY=VALUE"; return false; }
  return true;
}

// Splits "a=1,b=2" into tags.
bool add_tag_list(const std::string& list, std::vector<std::string>& tags, std::string& why) {
  std::stringstream ss(list);
  std::string t;
  while (std::getline(ss, t, ',')) {
    if (!valid_tag(t, why)) return false;
    tags.push_back(t);
  }
  return true;
}

// A failure that is not about the arguments: the message alone.
int fail(const char* cmd, const std::string& msg) {
  std::fprintf(stderr, "luaflame %s: %s\n", cmd, msg.c_str());
  return kExitError;
}

int usage_error(const char* cmd, const std::string& msg) {
  std::fprintf(stderr, "luaflame %s: %s\n(luaflame %s --help describes the options)\n", cmd, msg.c_str(), cmd);
  return kExitError;
}

// ---------------------------------------------------------------- push

// luaflame push: what to upload and how to label it.
struct PushOptions {
  ClientOptions client;
  std::string file;               // the folded file; "-" reads standard input (required)
  std::string name;               // --name: the run's name (required)
  std::vector<std::string> tags;  // --tag K=V (repeatable) or --tags K=V,K=V (default none)
  std::string units;              // --units: samples, ns, bytes, ... (default: the server's, samples)
  std::string metric;             // --metric: samples, time, calls, ... (default: from units)
  bool gzip = true;               // --no-gzip: never compress (default: gzip bodies of 64 KiB and more)
  bool json = false;              // --json: print the server's JSON answer instead of the URL
};

const char* kPushHelp =
    "usage: luaflame push FILE.folded --name NAME [--tag K=V ...] [options]\n"
    "Uploads a folded profile (FILE or - for stdin) as a new run and prints its URL.\n"
    "  --server URL     server (default $LUAFLAME_SERVER, else http://127.0.0.1:8080)\n"
    "  --name NAME      the run's name (required)\n"
    "  --tag K=V        a tag, repeatable (also --tags K=V,K=V)\n"
    "  --units U        samples (default), ns, bytes, ...\n"
    "  --metric M       samples, time, calls, alloc_bytes, ... (default: from units)\n"
    "  --token T        bearer token (default $LUAFLAME_TOKEN)\n"
    "  --timeout S      seconds to wait for the server (default 60)\n"
    "  --no-gzip        send the body uncompressed\n"
    "  --json           print the server's JSON answer instead of the URL\n"
    "Exit status: 0 uploaded, 2 on any error.\n";

// Parses push's arguments; returns -1 to go on, else an exit status.
int parse_push(int argc, char** argv, PushOptions& o) {
  o.client = default_client_options();
  Args a(argc, argv);
  std::string v;
  while (!a.done() && a.error.empty()) {
    const std::string arg = argv[a.i];
    if (arg == "--help" || arg == "-h") { std::fputs(kPushHelp, stdout); return kExitOk; }
    if (take_client_option(a, o.client) || a.take("--name", o.name) || a.take("--units", o.units) ||
        a.take("--metric", o.metric)) continue;
    if (a.take("--tag", v)) {
      if (valid_tag(v, a.error)) o.tags.push_back(v);
    } else if (a.take("--tags", v)) {
      add_tag_list(v, o.tags, a.error);
    } else if (a.flag("--no-gzip")) {
      o.gzip = false;
    } else if (a.flag("--json")) {
      o.json = true;
    } else if (arg.size() > 1 && arg[0] == '-') {
      a.error = "unknown option " + arg;
    } else if (o.file.empty()) {
      o.file = arg;
      ++a.i;
    } else {
      a.error = "one file at a time (got '" + o.file + "' and '" + arg + "')";
    }
  }
  if (!a.error.empty()) return usage_error("push", a.error);
  if (o.file.empty()) return usage_error("push", "which folded file? (FILE or - for stdin)");
  if (o.name.empty()) return usage_error("push", "--name is required");
  return -1;
}

bool read_input(const std::string& file, std::string& body, std::string& why) {
  if (file == "-") {
    body.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return true;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) { why = "cannot read " + file + ": " + std::strerror(errno); return false; }
  body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) { why = "error reading " + file; return false; }
  return true;
}

int run_push(const PushOptions& o) {
  ServerUrl url;
  std::string why;
  if (!parse_server_url(o.client.server, url, why)) return usage_error("push", "--server " + o.client.server + " " + why);
  std::string body;
  if (!read_input(o.file, body, why)) return fail("push", why);
  if (body.find_first_not_of(" \t\r\n") == std::string::npos)
    return fail("push", (o.file == "-" ? std::string("standard input") : o.file) + " is empty: no stacks to upload");

  Query q{{"name", o.name}};
  for (const std::string& t : o.tags) q.emplace_back("tag", t);
  if (!o.units.empty()) q.emplace_back("units", o.units);
  if (!o.metric.empty()) q.emplace_back("metric", o.metric);

  Server s(url, o.client);
  // Large profiles compress about tenfold; small ones are not worth it.
  // A pprof file (gzipped or not) goes as it is: the server reads every sample type.
  const bool pprof = lf::looks_like_pprof(body);
  s.client.set_compress(o.gzip && !pprof && body.size() >= 64 * 1024);
  const httplib::Result r = s.client.Post(with_query(url.prefix + "/api/runs", q), s.headers, body,
                                          pprof ? "application/vnd.google.protobuf" : "text/plain");
  if (!r) { std::fprintf(stderr, "luaflame push: %s\n", transport_error(r, s).c_str()); return kExitError; }
  if (r->status != 201 && r->status != 200) {
    std::fprintf(stderr, "luaflame push: %s\n", http_error(r->status, r->body, o.file == "-" ? "<stdin>" : o.file).c_str());
    return kExitError;
  }
  const Json j = Json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("url") || !j["url"].is_string()) {
    std::fprintf(stderr, "luaflame push: the server's answer has no run URL: %s\n", r->body.substr(0, 300).c_str());
    return kExitError;
  }
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s\n", s.link(j["url"].get<std::string>()).c_str());
  }
  return kExitOk;
}

// ---------------------------------------------------------------- compare

// luaflame compare: which two runs and what counts as a regression.
struct CompareOptions {
  ClientOptions client;
  std::string base;         // --base: a run id, or NAME[,K=V...] = the latest finished run of NAME with those tags (required)
  std::string head;         // --head: a run id, or NAME[,K=V...] = the newest run of NAME with those tags (required)
  std::string threshold;    // --threshold PCT: fail when a function's share grew by more (default none: never fails)
  std::string metric;       // --metric (default: the server's, the run's first metric)
  std::string limit;        // --limit N: frames listed (default: the server's)
  bool allow_no_base = false;  // --allow-missing-base: no base run yet is a pass (exit 0), e.g. the first run on main
  bool json = false;        // --json: print the server's JSON answer instead of the Markdown
};

const char* kCompareHelp =
    "usage: luaflame compare --base SELECTOR --head SELECTOR [--threshold PCT] [options]\n"
    "Prints a Markdown summary of the functions whose share of the total changed most.\n"
    "  --base SELECTOR  a run id, or NAME[,K=V...]: the latest finished run of NAME with those tags\n"
    "  --head SELECTOR  the run to judge: a run id, or NAME[,K=V...]: the newest run of NAME\n"
    "                   with those tags (e.g. myapp,commit=$SHA after luaflame run streamed it)\n"
    "  --threshold PCT  fail when a function's share grew by more than PCT points (5 or 5%)\n"
    "  --metric M       samples, time, calls, ... (default: the server's choice)\n"
    "  --limit N        how many frames to list\n"
    "  --allow-missing-base  exit 0 when no run matches the base selector yet\n"
    "  --server URL --token T --timeout S   as for push\n"
    "  --json           print the server's JSON answer instead of the Markdown\n"
    "Exit status: 0 within the threshold, 1 past it (a regression), 2 on any error.\n";

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

int parse_compare(int argc, char** argv, CompareOptions& o) {
  o.client = default_client_options();
  Args a(argc, argv);
  while (!a.done() && a.error.empty()) {
    const std::string arg = argv[a.i];
    if (arg == "--help" || arg == "-h") { std::fputs(kCompareHelp, stdout); return kExitOk; }
    if (take_client_option(a, o.client) || a.take("--base", o.base) || a.take("--head", o.head) ||
        a.take("--threshold", o.threshold) || a.take("--metric", o.metric) || a.take("--limit", o.limit)) continue;
    if (a.flag("--allow-missing-base")) { o.allow_no_base = true; continue; }
    if (a.flag("--json")) { o.json = true; continue; }
    a.error = "unexpected argument " + arg;
  }
  if (!a.error.empty()) return usage_error("compare", a.error);
  if (o.base.empty() || o.head.empty()) return usage_error("compare", "--base and --head are both required");
  if (!o.threshold.empty() && o.threshold.back() == '%') o.threshold.pop_back();  // "5%" reads as 5
  if (!o.threshold.empty()) {
    char* end = nullptr;
    const double t = std::strtod(o.threshold.c_str(), &end);
    if (*end || !(t >= 0)) return usage_error("compare", "--threshold wants a percentage >= 0, got '" + o.threshold + "'");
  }
  if (!o.limit.empty() && !all_digits(o.limit)) return usage_error("compare", "--limit wants a count, got '" + o.limit + "'");
  return -1;
}

// A run id from field `key`: a number, a string, or an object with "id".
std::string run_id(const Json& j, const char* key) {
  if (!j.contains(key)) return "";
  const Json& v = j[key];
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("id") && v["id"].is_number_integer()) return std::to_string(v["id"].get<long long>());
  return "";
}

// NAME[,K=V...] as query parameters NAME_KEY=NAME and TAG_KEY=K=V...; `opt` names the option in errors.
bool named_selector(const std::string& sel, const char* opt, const char* name_key, const char* tag_key, Query& q,
                    std::string& why) {
  std::stringstream ss(sel);
  std::string part;
  std::getline(ss, part, ',');
  if (part.empty()) { why = std::string(opt) + " '" + sel + "' has no run name"; return false; }
  q.emplace_back(name_key, part);
  while (std::getline(ss, part, ',')) {
    if (!valid_tag(part, why)) { why = std::string(opt) + ": " + why; return false; }
    q.emplace_back(tag_key, part);
  }
  return true;
}

// The base selector as /api/diff parameters: base=ID, or base_name + base_tag....
bool base_query(const std::string& sel, Query& q, std::string& why) {
  if (all_digits(sel)) { q.emplace_back("base", sel); return true; }
  return named_selector(sel, "--base", "base_name", "base_tag", q, why);
}

// The head selector as a run id: as given, or the newest run that GET /api/runs
// lists for NAME with those tags. False with a reason (exit 2) otherwise.
bool resolve_head(Server& s, const std::string& sel, std::string& id, std::string& why) {
  if (all_digits(sel)) { id = sel; return true; }
  Query q;
  if (!named_selector(sel, "--head", "name", "tag", q, why)) return false;
  q.emplace_back("limit", "1");
  const httplib::Result r = s.client.Get(with_query(s.url.prefix + "/api/runs", q), s.headers);
  if (!r) { why = transport_error(r, s); return false; }
  if (r->status != 200) { why = "--head " + sel + ": " + http_error(r->status, r->body, ""); return false; }
  const Json j = Json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("runs") || !j["runs"].is_array()) {
    why = "--head " + sel + ": unexpected answer from /api/runs: " + r->body.substr(0, 200);
    return false;
  }
  if (j["runs"].empty()) { why = "--head " + sel + ": no run with that name and those tags"; return false; }
  id = run_id(j["runs"][0], "id");
  if (id.empty()) { why = "--head " + sel + ": the run listed has no id"; return false; }
  return true;
}

// The Markdown summary plus links a CI comment wants: both runs and the differential graph.
std::string summary(const Json& j, const Server& s, const CompareOptions& o) {
  std::string md = j.contains("markdown") && j["markdown"].is_string() ? j["markdown"].get<std::string>() : "";
  const std::string base = run_id(j, "base"), head = run_id(j, "head");
  if (!md.empty() && md.back() != '\n') md += '\n';
  if (base.empty() || head.empty() || md.find("diff.svg") != std::string::npos) return md;
  Query q{{"base", base}, {"head", head}};
  if (!o.metric.empty()) q.emplace_back("metric", o.metric);
  md += "\n[differential flame graph](" + s.link(with_query("/api/diff.svg", q)) + ") · [base run " + base + "](" +
        s.link("/runs/" + base) + ") · [head run " + head + "](" + s.link("/runs/" + head) + ")\n";
  return md;
}

// After a 404: true when the head run exists, so it was the base that was missing.
bool head_exists(Server& s, const std::string& head) {
  const httplib::Result r = s.client.Get(s.url.prefix + "/api/runs/" + head, s.headers);
  return r && r->status == 200;
}

int run_compare(const CompareOptions& o) {
  ServerUrl url;
  std::string why;
  if (!parse_server_url(o.client.server, url, why)) return usage_error("compare", "--server " + o.client.server + " " + why);
  Query q;
  if (!base_query(o.base, q, why)) return usage_error("compare", why);
  Server s(url, o.client);
  std::string head;
  if (!resolve_head(s, o.head, head, why)) return fail("compare", why);
  q.emplace_back("head", head);
  if (!o.threshold.empty()) q.emplace_back("threshold", o.threshold);
  if (!o.metric.empty()) q.emplace_back("metric", o.metric);
  if (!o.limit.empty()) q.emplace_back("limit", o.limit);

  const httplib::Result r = s.client.Get(with_query(url.prefix + "/api/diff", q), s.headers);
  if (!r) { std::fprintf(stderr, "luaflame compare: %s\n", transport_error(r, s).c_str()); return kExitError; }
  if (r->status == 404 && o.allow_no_base && !all_digits(o.base) && head_exists(s, head)) {
    std::printf("No base run matches `%s` yet: nothing to compare run %s against.\n", o.base.c_str(), head.c_str());
    return kExitOk;
  }
  if (r->status != 200 && r->status != 412) {
    std::fprintf(stderr, "luaflame compare: %s\n", http_error(r->status, r->body, "").c_str());
    return kExitError;
  }
  const Json j = Json::parse(r->body, nullptr, false);
  if (!j.is_object()) {
    std::fprintf(stderr, "luaflame compare: the server's answer is not JSON: %s\n", r->body.substr(0, 300).c_str());
    return kExitError;
  }
  std::fputs(o.json ? (j.dump(2) + "\n").c_str() : summary(j, s, o).c_str(), stdout);
  if (r->status == 412) {
    std::fprintf(stderr, "luaflame compare: regression: a function's share grew by more than %s points\n",
                 o.threshold.c_str());
    return kExitRegression;
  }
  return kExitOk;
}

}  // namespace

int cmd_push(int argc, char** argv) {
  PushOptions o;
  const int rc = parse_push(argc, argv, o);
  if (rc >= 0) return rc;
  try {
    return run_push(o);
  } catch (const std::exception& e) {  // httplib throws on URLs it cannot use
    std::fprintf(stderr, "luaflame push: %s\n", e.what());
    return kExitError;
  }
}

int cmd_compare(int argc, char** argv) {
  CompareOptions o;
  const int rc = parse_compare(argc, argv, o);
  if (rc >= 0) return rc;
  try {
    return run_compare(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "luaflame compare: %s\n", e.what());
    return kExitError;
  }
}

}  // namespace lfcli
