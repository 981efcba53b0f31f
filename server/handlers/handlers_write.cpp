// Writing: CI uploads, collector streams, Pyroscope /ingest, DELETE. Each
// handler validates everything first and then makes one store call (one
// transaction), so a refused request stores nothing.
#include <spdlog/spdlog.h>

#include <ctime>

#include "http/app.hpp"
#include "http/guard.hpp"
#include "http/multipart.hpp"
#include "ingest/ingest.hpp"
#include "ingest/pprof_ingest.hpp"

namespace lfs {
namespace {

// The latest time accepted anywhere: 2261-12-31, well inside int64 ns.
constexpr int64_t kMaxTimeNs = 9200000000000000000LL;

lf::ParseOptions parse_options(const App& app) {
  lf::ParseOptions o;
  o.strict = true;
  o.check_text = true;
  o.max_frame_bytes = app.cfg.max_frame_bytes;
  o.max_depth = app.cfg.max_depth;
  return o;
}

nlohmann::json run_links(const httplib::Request& req, int64_t id) {
  std::string base = base_url(req), sid = std::to_string(id);
  return {{"id", id},
          {"url", base + "/runs/" + sid},
          {"svg", base + "/api/runs/" + sid + "/flamegraph.svg"},
          {"folded", base + "/api/runs/" + sid + "/profile.folded"}};
}

nlohmann::json parse_json_body(const App& app, const std::string& body, bool optional) {
  return parse_json_request(body, app.cfg.max_json_bytes, app.cfg.max_json_depth, optional);
}

// A JSON whole number that fits int64 (a float or a larger number is refused:
// a cast of 1e300 to int64 is undefined).
int64_t json_int64(const nlohmann::json& v, const char* name) {
  if (v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
    return v.get<int64_t>();
  throw HttpError(400, std::string(name) + " must be a whole number from 0 to 2^63-1");
}

// A write body: raw, or the parts of a multipart one (Pyroscope's Go and Java
// agents: profile, prev_profile, sample_type_config); pprof when said so
// (format=pprof, a protobuf Content-Type) or when it looks like one.
struct Body {
  std::string_view text, prev, config;
  bool pprof = false;
};

Body body_of(const httplib::Request& req) {
  Body b;
  std::string format = req.get_param_value("format");
  if (req.is_multipart_form_data()) {
    bool found = false;
    b.text = part(req, "profile", &found);
    if (!found)
      throw HttpError(400,
                      "a multipart body needs a 'profile' part (and may have prev_profile, "
                      "sample_type_config)");
    b.prev = part(req, "prev_profile");
    b.config = part(req, "sample_type_config");
  } else {
    b.text = req.body;
  }
  std::string type = req.get_header_value("Content-Type");
  b.pprof = format == "pprof" || type.find("protobuf") != std::string::npos ||
            type.find("pprof") != std::string::npos || lf::looks_like_pprof(b.text);
  return b;
}

// Gives back a parsed body's memory before its batch is stored (issue 31: a
// 62.5 MB body was held through the store's own copies); returns its size.
std::size_t release_body(const httplib::Request& req) {
  auto& r = const_cast<httplib::Request&>(req);  // httplib owns it; nothing reads it after
  const std::size_t bytes = r.body.size();
  std::string().swap(r.body);
  r.files.clear();
  return bytes;
}

// POST /api/runs?name=&tag=K=V&units=&metric=  (folded body, or pprof)
void upload(App& app, const httplib::Request& req, httplib::Response& res) {
  NewRun run;
  run.name = req.get_param_value("name");
  check_name(run.name);
  run.tags = tag_params(req, "tag", app.cfg.max_tags);
  Batch batch;
  std::size_t lines = 0;
  Body body = body_of(req);
  if (body.pprof) {  // every sample type a metric
    check_json_depth(body.config, static_cast<std::size_t>(app.cfg.max_json_depth));
    PprofBatch pb = pprof_to_batch(body.text, body.prev, body.config, parse_options(app));
    batch = std::move(pb.batch);
    lines = pb.samples;
  } else {
    batch.metrics = {upload_metric(req.get_param_value("units"), req.get_param_value("metric"))};
    lines = parse_folded_batch(body.text, parse_options(app), batch);
  }
  if (batch.nodes.empty())
    throw HttpError(400, "the body holds no stacks", {{"line", 0}, {"reason", "empty input"}});
  run.source = "upload";
  run.started_ns = run.ended_ns = now_ns();
  run.metrics = batch.metrics;
  batch.from_ns = batch.until_ns = run.started_ns;
  const std::size_t bytes = release_body(req);
  int64_t id = app.store->create_run(run, std::move(batch));
  app.metrics.ingested(bytes, lines);
  send_json(res, 201, run_links(req, id));
}

// POST /api/streams  JSON {"stream", "name", "tags", "metrics", "started_ns", "hz"}
void open_stream(App& app, const httplib::Request& req, httplib::Response& res) {
  nlohmann::json j = parse_json_body(app, req.body, false);
  NewRun run;
  try {
    run.stream = j.value("stream", "");
    run.name = j.value("name", "");
    if (j.contains("tags")) {
      if (!j["tags"].is_object()) throw HttpError(400, "tags must be an object {\"k\": \"v\"}");
      for (auto& [k, v] : j["tags"].items()) {
        std::string value = v.is_string() ? v.get<std::string>() : v.dump();
        check_tag(k, value);
        run.tags[k] = value;
      }
    }
    for (const auto& m : j.value("metrics", nlohmann::json::array())) {
      int idx = m.is_string() ? metric_index(m.get<std::string>()) : -1;
      if (idx < 0) throw HttpError(422, "unknown metric " + m.dump());
      run.metrics.push_back(idx);
    }
    const char* start_key = j.contains("started_ns") ? "started_ns" : "started";
    run.started_ns = j.contains(start_key) ? json_int64(j[start_key], start_key) : now_ns();
    if (j.contains("hz")) {
      // Samples per second: positive and at most 1 MHz (a -5 or 1e300 was stored).
      const auto& hz = j["hz"];
      if (!hz.is_number() || !(hz.get<double>() > 0) || hz.get<double>() > 1e6)
        throw HttpError(400,
                        "hz must be a number of samples per second above 0 and at most 1000000");
      run.hz = hz.get<double>();
    }
  } catch (const nlohmann::json::exception& e) {
    throw HttpError(400, std::string("bad stream JSON: ") + e.what());
  }
  if (run.stream.empty() || run.stream.size() > 128)
    throw HttpError(400, "stream must be a uuid (1 to 128 bytes)");
  check_name(run.name);
  if (run.tags.size() > app.cfg.max_tags)
    throw HttpError(400, "too many tags (at most " + std::to_string(app.cfg.max_tags) +
                             " per run, --max-tags)");
  if (run.started_ns < 0 || run.started_ns > kMaxTimeNs)
    throw HttpError(400, "started_ns must be Unix time in ns, from 1970 to 2261");
  run.source = "stream";
  run.finished = false;
  run.ended_ns = run.started_ns;
  bool created = false;
  run.stream = "stream:" + run.stream;
  int64_t id = app.store->open_stream(run, created);
  nlohmann::json body = run_links(req, id);
  // The limits a chunk must keep, so that a collector cuts a deeper stack
  // (with a marker frame) instead of losing the chunk to a 400.
  body["limits"] = {{"max_depth", app.cfg.max_depth}};
  send_json(res, created ? 201 : 200, body);
}

// POST /api/runs/{id}/chunks  (a wire chunk)
void append_chunk(App& app, const httplib::Request& req, httplib::Response& res) {
  RunInfo run = run_from_path(app, req);
  if (run.status != "live")
    throw HttpError(409, "run " + std::to_string(run.id) + " is finished; it takes no more chunks");
  Batch batch;
  lfw::Chunk chunk = decode_chunk(req.body, parse_options(app), batch);
  if (chunk.from_ns > uint64_t(kMaxTimeNs) || chunk.until_ns > uint64_t(kMaxTimeNs))
    throw HttpError(400, "bad chunk: from/until after the year 2261");
  int64_t now = now_ns();
  batch.from_ns = chunk.from_ns ? static_cast<int64_t>(chunk.from_ns) : now;
  batch.until_ns = chunk.until_ns ? static_cast<int64_t>(chunk.until_ns) : now;
  if (batch.until_ns < batch.from_ns) throw HttpError(400, "bad chunk: until is before from");
  AppendStatus st = app.store->append(run.id, static_cast<int64_t>(chunk.seq), batch);
  if (st == AppendStatus::not_found) throw HttpError(404, "no run " + std::to_string(run.id));
  if (st == AppendStatus::finished)
    throw HttpError(409, "run " + std::to_string(run.id) + " is finished; it takes no more chunks");
  if (st == AppendStatus::ok) app.metrics.ingested(req.body.size(), batch.nodes.size());
  send_json(res, 200, {{"seq", chunk.seq}, {"duplicate", st == AppendStatus::duplicate}});
}

// POST /api/runs/{id}/finish  optional JSON {"stats": {...}}
void finish(App& app, const httplib::Request& req, httplib::Response& res) {
  RunInfo run = run_from_path(app, req);
  nlohmann::json j = parse_json_body(app, req.body, true);
  std::string stats;
  if (j.contains("stats")) stats = j["stats"].dump();
  if (stats.size() > 65536) throw HttpError(413, "stats larger than 64 KiB");
  if (run.status == "live") {
    int64_t ended = run.source == "stream" ? std::max(run.ended_ns, now_ns()) : run.ended_ns;
    app.store->finish(run.id, stats, ended);
  }
  send_json(res, 200, {{"id", run.id}, {"status", "finished"}});
}

// The run of a Pyroscope series for the UTC day of `from_ns`.
std::string ingest_key(const PyroscopeName& n, int64_t from_ns) {
  std::time_t t = static_cast<std::time_t>(from_ns / 1000000000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char day[16];
  std::strftime(day, sizeof day, "%Y-%m-%d", &tm);
  std::string key = std::string("ingest:") + day + ":" + n.app + "{";
  for (const auto& [k, v] : n.labels) key += k + "=" + v + ",";
  return key + "}";
}

// Pyroscope's from/until: Unix seconds (ms/us/ns accepted by magnitude, as Pyroscope does).
int64_t pyroscope_time(const httplib::Request& req, const char* name, int64_t def) {
  if (!req.has_param(name)) return def;
  std::string v = req.get_param_value(name);
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || n < 0)
    throw HttpError(422, std::string(name) + " must be Unix time in seconds, got '" + v + "'");
  int64_t scale = 1;  // nanoseconds
  if (n < 100000000000LL)
    scale = 1000000000LL;  // seconds
  else if (n < 100000000000000LL)
    scale = 1000000LL;  // milliseconds
  else if (n < 100000000000000000LL)
    scale = 1000LL;  // microseconds
  // Seconds from 9,223,372,037 overflowed int64 ns (a run "started" in 1702).
  long long ns = 0;
  if (__builtin_mul_overflow(n, scale, &ns) || ns > kMaxTimeNs)
    throw HttpError(422, std::string(name) + " is after the year 2261: '" + v + "'");
  return ns;
}

// POST /ingest?name=APP.KIND{k=v}&from=&until=&format=&sampleRate=&spyName=&units=&aggregationType=
void ingest(App& app, const httplib::Request& req, httplib::Response& res) {
  if (!req.has_param("name")) throw HttpError(400, "name is required (APP.KIND{k=v,...})");
  PyroscopeName pn = parse_pyroscope_name(req.get_param_value("name"));
  std::string format = req.has_param("format") ? req.get_param_value("format") : "folded";
  if (format != "folded" && format != "lines" && format != "pprof")  // e.g. the Java agent's jfr
    throw HttpError(422, "format '" + format + "' is not supported here (folded, lines or pprof)");
  Body body = body_of(req);
  std::string aggregation = req.has_param("aggregationType")
                                ? req.get_param_value("aggregationType")
                                : req.get_param_value("aggregrationType");
  int metric =
      body.pprof ? 0 : pyroscope_metric(req.get_param_value("units"), aggregation, pn.kind);
  double hz = 100;  // Pyroscope's default sampleRate
  if (req.has_param("sampleRate")) {
    hz = static_cast<double>(int_param(req, "sampleRate", 100, 1, 1000000));
  }
  std::string spy = req.get_param_value("spyName");
  if (spy.size() > 64) throw HttpError(422, "spyName is at most 64 bytes");
  int64_t now = now_ns();
  int64_t until = pyroscope_time(req, "until", now);
  int64_t from = pyroscope_time(req, "from", until - 10000000000LL);
  if (until < from) throw HttpError(422, "until is before from");
  Batch batch;
  batch.metrics = {metric};
  batch.from_ns = from;
  batch.until_ns = until;
  std::size_t lines = 0;
  if (body.pprof) {
    check_json_depth(body.config, static_cast<std::size_t>(app.cfg.max_json_depth));
    PprofBatch pb = pprof_to_batch(body.text, body.prev, body.config, parse_options(app));
    batch.metrics = std::move(pb.batch.metrics);
    batch.frames = std::move(pb.batch.frames);
    batch.nodes = std::move(pb.batch.nodes);
    batch.values = std::move(pb.batch.values);
    lines = pb.samples;
  } else {
    std::string folded = format == "lines" ? lines_to_folded(body.text) : std::string();
    lines = parse_folded_batch(format == "lines" ? std::string_view(folded) : body.text,
                               parse_options(app), batch);
  }
  NewRun run;
  run.name = pn.app;
  check_name(run.name);
  run.tags = pn.labels;
  if (!spy.empty()) {
    check_tag("spy", spy);
    run.tags["spy"] = spy;
  }
  if (!pn.kind.empty()) run.tags["kind"] = pn.kind;
  if (run.tags.size() > app.cfg.max_tags)
    throw HttpError(400, "too many labels (at most " + std::to_string(app.cfg.max_tags) + ")");
  run.source = "ingest";
  run.finished = false;
  run.stream = ingest_key(pn, from);
  run.started_ns = from;
  run.ended_ns = until;
  run.hz = hz;
  run.metrics = batch.metrics;
  const std::size_t bytes = release_body(req);
  bool created = false;
  int64_t id = app.store->open_stream(run, created);
  if (!batch.nodes.empty()) {
    AppendStatus st = app.store->append(id, -1, batch);
    if (st == AppendStatus::finished)
      throw HttpError(409, "the run of this series for that day is finished");
  }
  app.metrics.ingested(bytes, lines);
  send_json(res, 200, run_links(req, id));
}

// DELETE /api/runs/{id}
void remove(App& app, const httplib::Request& req, httplib::Response& res) {
  RunInfo run = run_from_path(app, req);
  app.store->delete_run(run.id);
  app.forget(run.id);
  if (app.reserve_spent.load() && app.after_delete) app.after_delete();
  res.status = 204;
}

}  // namespace

void setup_write_routes(httplib::Server& svr, App& app) {
  add_body_route(
      svr, app, R"(/api/runs)", "/api/runs POST",
      [&app](const httplib::Request& q, httplib::Response& r) { upload(app, q, r); }, true);
  add_body_route(
      svr, app, R"(/api/streams)", "/api/streams",
      [&app](const httplib::Request& q, httplib::Response& r) { open_stream(app, q, r); });
  add_body_route(
      svr, app, R"(/api/runs/([^/]+)/chunks)", "/api/runs/{id}/chunks",
      [&app](const httplib::Request& q, httplib::Response& r) { append_chunk(app, q, r); });
  add_body_route(svr, app, R"(/api/runs/([^/]+)/finish)", "/api/runs/{id}/finish",
                 [&app](const httplib::Request& q, httplib::Response& r) { finish(app, q, r); });
  add_body_route(
      svr, app, R"(/ingest)", "/ingest",
      [&app](const httplib::Request& q, httplib::Response& r) { ingest(app, q, r); }, true);
  add_route(svr, app, "DELETE", R"(/api/runs/([^/]+))", "/api/runs/{id} DELETE",
            [&app](const httplib::Request& q, httplib::Response& r) { remove(app, q, r); });
}

}  // namespace lfs
