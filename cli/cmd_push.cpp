// luaflame push / luaflame compare: the CI side of the HTTP API (docs/api.md).
//
//   push:    POST /api/runs?name=&tag=&units=&metric=   body: folded text
//   compare: GET /api/diff?base=|base_name=&base_tag=&head=|head_name=&head_tag=&threshold=&metric=
//
// Both are thin: every request they make is a plain HTTP call that curl can
// make as well (docs/ship.md lists the curl equivalents), so a pipeline never
// needs this binary to talk to the server. What they add is the error
// handling a CI step wants: clear messages, the server's line number for a
// bad upload, and exit codes a job can branch on. The HTTP plumbing is
// http_client.cpp's; the threshold's syntax is the engine's (lf::parse_threshold).
//
// Exit codes. push: 0 uploaded, 2 anything else. compare: 0 within the
// threshold, 1 past it (the server answered 412), 2 on any error.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "args.hpp"
#include "commands.hpp"
#include "http_client.hpp"
#include "luaflame/diff.hpp"
#include "luaflame/pprof.hpp"
#include "luaflame/wire.hpp"

namespace lfcli {
namespace {

using Json = nlohmann::json;

constexpr int kExitRegression = 1;
constexpr int kExitError = 2;

void add_client_options(CLI::App& app, ClientOptions& o) {
  o = default_client_options();
  app.add_option("--server", o.server,
                 "server URL (default $LUAFLAME_SERVER, else http://127.0.0.1:8080)");
  app.add_option("--token", o.token, "bearer token (default $LUAFLAME_TOKEN)");
  app.add_option("--timeout", o.timeout_s, "seconds to wait for the server (default 60)")
      ->check(CLI::Range(1, 86400));
}

// KEY=VALUE by the server's rule (lfw::tag_error), checked before anything is sent;
// "why" says what is wrong otherwise.
bool valid_tag(const std::string& t, std::string& why) {
  const std::string::size_type eq = t.find('=');
  if (eq == std::string::npos || eq == 0) {
    why = "tag '" + t + "' is not KEY=VALUE";
    return false;
  }
  why = lfw::tag_error(std::string_view(t).substr(0, eq), std::string_view(t).substr(eq + 1));
  return why.empty();
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

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// ---------------------------------------------------------------- push

// luaflame push: what to upload and how to label it.
struct PushOptions {
  ClientOptions client;
  std::string file;               // the folded file; "-" reads standard input (required)
  std::string name;               // --name: the run's name (required)
  std::vector<std::string> tags;  // --tag K=V (repeatable) and --tags K=V,K=V (default none)
  std::string tag_list;           // --tags as given
  std::string units;     // --units: samples, ns, bytes, ... (default: the server's, samples)
  std::string metric;    // --metric: samples, time, calls, ... (default: from units)
  bool no_gzip = false;  // --no-gzip: never compress (default: gzip bodies of 64 KiB and more)
  bool json = false;     // --json: print the server's JSON answer instead of the URL
};

void push_options(CLI::App& app, PushOptions& o) {
  app.add_option("FILE", o.file, "the folded profile, or - for standard input");
  app.add_option("--name", o.name, "the run's name (required)");
  app.add_option("--tag", o.tags, "a tag K=V, repeatable")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--tags", o.tag_list, "tags K=V,K=V");
  app.add_option("--units", o.units, "samples (default), ns, bytes, ...");
  app.add_option("--metric", o.metric,
                 "samples, time, calls, alloc_bytes, ... (default: from units)");
  add_client_options(app, o.client);
  app.add_flag("--no-gzip", o.no_gzip, "send the body uncompressed (default: gzip from 64 KiB)");
  app.add_flag("--json", o.json, "print the server's JSON answer instead of the URL");
  app.footer(
      "Uploads a folded profile as a new run and prints its URL.\nExit status: 0 uploaded, 2 on "
      "any error.\n");
}

bool read_input(const std::string& file, std::string& body, std::string& why) {
  if (file == "-") {
    body.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return true;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    why = "cannot read " + file + ": " + std::strerror(errno);
    return false;
  }
  body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) {
    why = "error reading " + file;
    return false;
  }
  return true;
}

int run_push(const CLI::App& app, PushOptions& o) {
  std::string why;
  for (const std::string& t : o.tags)
    if (!valid_tag(t, why)) return usage_error(app, why);
  if (!o.tag_list.empty() && !add_tag_list(o.tag_list, o.tags, why)) return usage_error(app, why);
  if (o.file.empty()) return usage_error(app, "which folded file? (FILE or - for stdin)");
  if (o.name.empty()) return usage_error(app, "--name is required");
  if (std::string bad = lfw::name_error(o.name); !bad.empty()) return usage_error(app, bad);
  HttpClient http;
  if (!http.open(o.client, why)) return usage_error(app, "--server " + o.client.server + " " + why);
  std::string body;
  if (!read_input(o.file, body, why)) return fail(app, why, kExitError);
  const std::string shown = o.file == "-" ? std::string("<stdin>") : o.file;
  if (body.find_first_not_of(" \t\r\n") == std::string::npos)
    return fail(
        app,
        (o.file == "-" ? std::string("standard input") : o.file) + " is empty: no stacks to upload",
        kExitError);

  Query q{{"name", o.name}};
  for (const std::string& t : o.tags) q.emplace_back("tag", t);
  if (!o.units.empty()) q.emplace_back("units", o.units);
  if (!o.metric.empty()) q.emplace_back("metric", o.metric);
  // Large profiles compress about tenfold; small ones are not worth it.
  // A pprof file (gzipped or not) goes as it is: the server reads every sample type.
  const bool pprof = lf::looks_like_pprof(body);
  const Reply r =
      http.post("/api/runs", q, body, pprof ? "application/vnd.google.protobuf" : "text/plain",
                !pprof && !o.no_gzip && body.size() >= 64 * 1024);
  if (r.status != 201 && r.status != 200) return fail(app, http_error(r, shown), kExitError);
  const Json j = Json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("url") || !j["url"].is_string())
    return fail(app, "the server's answer has no run URL: " + r.body.substr(0, 300), kExitError);
  std::printf("%s\n", o.json ? j.dump().c_str() : http.link(j["url"].get<std::string>()).c_str());
  return kExitOk;
}

// ---------------------------------------------------------------- compare

// luaflame compare: which two runs and what counts as a regression.
struct CompareOptions {
  ClientOptions client;
  std::string base;  // --base: a run id, or NAME[,K=V...] = the latest finished run of NAME with
                     // those tags (required)
  std::string head;  // --head: a run id, or NAME[,K=V...] = the newest run of NAME with those tags
                     // (required)
  std::string threshold;  // --threshold PCT: fail when a function's share grew by more (default
                          // none: never fails)
  std::string metric;     // --metric (default: the server's, the run's first metric)
  unsigned limit = 0;     // --limit N: frames listed (default 0: the server's)
  bool allow_no_base = false;  // --allow-missing-base: no base run yet is a pass (exit 0), e.g. the
                               // first run on main
  bool json = false;           // --json: print the server's JSON answer instead of the Markdown
};

void compare_options(CLI::App& app, CompareOptions& o) {
  app.add_option(
      "--base", o.base,
      "a run id, or NAME[,K=V...]: the latest finished run of NAME with those tags (required)");
  app.add_option(
      "--head", o.head,
      "the run to judge: a run id, or NAME[,K=V...]: the newest run of NAME with those tags, "
      "e.g. myapp,commit=$SHA after luaflame run streamed it (required)");
  app.add_option("--threshold", o.threshold,
                 "fail when a function's share grew by more than PCT points (5 or 5%)");
  app.add_option("--metric", o.metric, "samples, time, calls, ... (default: the server's choice)");
  app.add_option("--limit", o.limit, "how many frames to list")->check(CLI::Range(1u, 10000u));
  app.add_flag("--allow-missing-base", o.allow_no_base,
               "exit 0 when no run matches the base selector yet");
  add_client_options(app, o.client);
  app.add_flag("--json", o.json, "print the server's JSON answer instead of the Markdown");
  app.footer(
      "Prints a Markdown summary of the functions whose share of the total changed most.\n"
      "Exit status: 0 within the threshold, 1 past it (a regression), 2 on any error.\n");
}

// A run id from field `key`: a number, a string, or an object with "id".
std::string run_id(const Json& j, const char* key) {
  if (!j.contains(key)) return "";
  const Json& v = j[key];
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("id") && v["id"].is_number_integer())
    return std::to_string(v["id"].get<long long>());
  return "";
}

// SIDE=ID, or SIDE_name=NAME and SIDE_tag=K=V... for NAME[,K=V...]; false with a reason.
bool selector_query(const std::string& sel, const std::string& side, Query& q, std::string& why) {
  if (all_digits(sel)) {
    q.emplace_back(side, sel);
    return true;
  }
  std::stringstream ss(sel);
  std::string part;
  std::getline(ss, part, ',');
  if (part.empty()) {
    why = "--" + side + " '" + sel + "' has no run name";
    return false;
  }
  q.emplace_back(side + "_name", part);
  while (std::getline(ss, part, ',')) {
    if (!valid_tag(part, why)) {
      why = "--" + side + ": " + why;
      return false;
    }
    q.emplace_back(side + "_tag", part);
  }
  return true;
}

// The Markdown summary plus links a CI comment wants: both runs and the differential graph.
std::string summary(const Json& j, const HttpClient& http, const CompareOptions& o) {
  std::string md =
      j.contains("markdown") && j["markdown"].is_string() ? j["markdown"].get<std::string>() : "";
  const std::string base = run_id(j, "base"), head = run_id(j, "head");
  if (!md.empty() && md.back() != '\n') md += '\n';
  if (base.empty() || head.empty() || md.find("diff.svg") != std::string::npos) return md;
  Query q{{"base", base}, {"head", head}};
  if (!o.metric.empty()) q.emplace_back("metric", o.metric);
  md += "\n[differential flame graph](" + http.link(with_query("/api/diff.svg", q)) +
        ") · [base run " + base + "](" + http.link("/runs/" + base) + ") · [head run " + head +
        "](" + http.link("/runs/" + head) + ")\n";
  return md;
}

// After a 404 (rare): true when the head run exists, so it was the base that was missing.
bool head_exists(HttpClient& http, const std::string& head) {
  Query q;
  std::string why;
  if (all_digits(head)) return http.get("/api/runs/" + head, {}).status == 200;
  if (!selector_query(head, "head", q, why)) return false;
  for (auto& kv : q) kv.first = kv.first == "head_name" ? "name" : "tag";
  q.emplace_back("limit", "1");
  const Reply r = http.get("/api/runs", q);
  const Json j = Json::parse(r.body, nullptr, false);
  return r.status == 200 && j.is_object() && j.contains("runs") && j["runs"].is_array() &&
         !j["runs"].empty();
}

int run_compare(const CLI::App& app, const CompareOptions& o) {
  if (o.base.empty() || o.head.empty())
    return usage_error(app, "--base and --head are both required");
  double threshold = -1;
  if (!o.threshold.empty() && !lf::parse_threshold(o.threshold, threshold))
    return usage_error(app,
                       "--threshold wants a percentage from 0 to 100, got '" + o.threshold + "'");
  std::string why;
  Query q;
  if (!selector_query(o.base, "base", q, why) || !selector_query(o.head, "head", q, why))
    return usage_error(app, why);
  if (threshold >= 0) q.emplace_back("threshold", o.threshold);
  if (!o.metric.empty()) q.emplace_back("metric", o.metric);
  if (o.limit) q.emplace_back("limit", std::to_string(o.limit));
  HttpClient http;
  if (!http.open(o.client, why)) return usage_error(app, "--server " + o.client.server + " " + why);

  const Reply r = http.get("/api/diff", q);
  if (r.status == 404 && o.allow_no_base && !all_digits(o.base) && head_exists(http, o.head)) {
    std::printf("No base run matches `%s` yet: nothing to compare %s against.\n", o.base.c_str(),
                o.head.c_str());
    return kExitOk;
  }
  if (r.status != 200 && r.status != 412) return fail(app, http_error(r, ""), kExitError);
  const Json j = Json::parse(r.body, nullptr, false);
  if (!j.is_object())
    return fail(app, "the server's answer is not JSON: " + r.body.substr(0, 300), kExitError);
  std::fputs(o.json ? (j.dump(2) + "\n").c_str() : summary(j, http, o).c_str(), stdout);
  if (r.status == 412)
    return fail(app, "regression: a function's share grew by more than " + o.threshold + " points",
                kExitRegression);
  return kExitOk;
}

}  // namespace

int cmd_push(int argc, char** argv) {
  CLI::App app("Uploads a folded profile (FILE or - for stdin) as a new run.", "luaflame push");
  house_style(app);
  PushOptions o;
  push_options(app, o);
  const int rc = parse_args(app, argc, argv);
  if (rc >= 0) return rc;
  try {
    return run_push(app, o);
  } catch (const std::exception& e) {  // out of memory reading a huge file
    return fail(app, e.what(), kExitError);
  }
}

int cmd_compare(int argc, char** argv) {
  CLI::App app("Compares two runs on a luaflame server; fails past a threshold.",
               "luaflame compare");
  house_style(app);
  CompareOptions o;
  compare_options(app, o);
  const int rc = parse_args(app, argc, argv);
  if (rc >= 0) return rc;
  try {
    return run_compare(app, o);
  } catch (const std::exception& e) {
    return fail(app, e.what(), kExitError);
  }
}

}  // namespace lfcli
