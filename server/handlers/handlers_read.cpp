// Reading: run lists and details, flame graphs (cached with ETags for
// finished runs), folded text, speedscope, timeline, functions, and the
// comparisons (diff.svg and diff JSON with a threshold for CI).
#include <algorithm>
#include <limits>

#include "http/app.hpp"
#include "ingest/pprof_ingest.hpp"
#include "luaflame/diff.hpp"
#include "luaflame/hash.hpp"
#include "luaflame/pprof.hpp"
#include "views/render.hpp"

namespace lfs {
namespace {

nlohmann::json run_json(const RunInfo& r) {
  nlohmann::json metrics = nlohmann::json::object();
  for (const auto& [m, total] : r.totals)
    metrics[std::string(metric_name(m))] = {{"total", total}, {"units", metric_units(m)}};
  nlohmann::json j = {{"id", r.id},
                      {"name", r.name},
                      {"tags", r.tags},
                      {"status", r.status},
                      {"source", r.source},
                      {"started_ns", r.started_ns},
                      {"ended_ns", r.ended_ns},
                      {"duration_ns", std::max<int64_t>(0, r.ended_ns - r.started_ns)},
                      {"hz", r.hz},
                      {"stacks", r.stack_count},
                      {"metrics", metrics},
                      {"url", "/runs/" + std::to_string(r.id)}};
  if (!r.stats_json.empty()) {
    nlohmann::json stats = nlohmann::json::parse(r.stats_json, nullptr, false);
    if (!stats.is_discarded()) j["stats"] = stats;
  }
  return j;
}

View view_from(const httplib::Request& req, const RunInfo& run) {
  View v = view_param(req, run);
  v.focus = req.get_param_value("focus");
  if (v.focus.size() > 1 << 20) throw HttpError(422, "focus path too long");
  return v;
}

// Canonical key of a request for the cache and the ETag: path plus sorted parameters.
std::string cache_key(const httplib::Request& req) {
  std::string key = req.path + "?";
  for (const auto& [k, v] : req.params) key += k + "=" + v + "&";  // multimap: sorted by key
  return key;
}

std::string etag_of(const std::string& key, const RunInfo& run) {
  uint64_t h = lf::fnv1a(key);
  h = lf::fnv1a(std::to_string(run.ended_ns), h);
  h = lf::fnv1a(std::to_string(run.revision), h);
  h = lf::fnv1a(LUAFLAME_SERVER_VERSION, h);
  char buf[24];
  std::snprintf(buf, sizeof buf, "\"%016llx\"", static_cast<unsigned long long>(h));
  return buf;
}

void send_graph(const httplib::Request& req, httplib::Response& res,
                std::shared_ptr<const Payload> graph, const std::string& etag) {
  res.status = 200;
  if (!etag.empty()) {
    res.set_header("ETag", etag);
    res.set_header("Cache-Control", "no-cache");  // revalidate: cheap with the ETag
  }
  send_payload(req, res, std::move(graph), drawing_type(drawing_of(req.path)));
}

// GET /api/runs/{id}/flamegraph.svg, and .json: the same graph's frames as data (the pages')
void flamegraph(App& app, const httplib::Request& req, httplib::Response& res) {
  RunInfo run = run_from_path(app, req);
  View view = view_from(req, run);
  lf::SvgOptions opts;
  std::string err = svg_options_from(req.params, view.metric, opts, view.reverse);
  if (!err.empty()) throw HttpError(422, err);
  view.flamechart = opts.flamechart;
  if (!req.has_param("title")) {
    opts.title = run.name + " (" + std::string(metric_name(view.metric)) + ")";
    if (opts.inverted) opts.title += ", icicle";
  }
  if (!req.has_param("subtitle") && !view.focus.empty()) opts.subtitle = "focus: " + view.focus;
  // A live run's graph is valid until its next chunk: cached per revision too.
  const bool cacheable = !view.flamechart || run.status == "finished";
  std::string key, etag;
  if (cacheable) {
    key = cache_key(req) + "@" + std::to_string(run.revision);
    etag = etag_of(key, run);
    if (req.get_header_value("If-None-Match") == etag) {
      res.status = 304;
      res.set_header("ETag", etag);
      return;
    }
    if (auto hit = app.cache.get(key)) return send_graph(req, res, hit, etag);
  }
  auto graph = std::make_shared<Payload>();
  graph->raw =
      render_run_graph(*app.trees.get(*app.store, run, view), view, opts, drawing_of(req.path));
  if (cacheable) {
    graph->gzip_level = 6;  // made once, at the first browser's request, then reused
    app.cache.put(run.id, key, graph);
  }
  send_graph(req, res, graph, etag);
}

// GET /api/runs
void list_runs(App& app, const httplib::Request& req, httplib::Response& res) {
  RunFilter f;
  f.name = req.get_param_value("name");
  f.tags = tag_params(req, "tag", 64);
  f.status = req.get_param_value("status");
  if (!f.status.empty() && f.status != "live" && f.status != "finished")
    throw HttpError(422, "status is live or finished, got '" + f.status + "'");
  f.limit = int_param(req, "limit", 50, 1, 1000);
  f.offset = int_param(req, "offset", 0, 0, std::numeric_limits<int32_t>::max());
  f.before_id = int_param(req, "cursor", 0, 0, std::numeric_limits<int64_t>::max());
  RunList list = app.store->list_runs(f);
  nlohmann::json runs = nlohmann::json::array();
  for (const RunInfo& r : list.runs) runs.push_back(run_json(r));
  nlohmann::json next =
      list.next_cursor ? nlohmann::json(list.next_cursor) : nlohmann::json(nullptr);
  send_json(res, 200,
            {{"runs", runs},
             {"total", list.total},
             {"total_exact", list.total_exact},
             {"next_cursor", next},
             {"limit", f.limit},
             {"offset", f.offset}});
}

// GET /api/runs/{id}
void get_run(App& app, const httplib::Request& req, httplib::Response& res) {
  RunInfo run = run_from_path(app, req);
  View view;
  view.metric = metric_param(req, &run);
  auto table = app.tables.get(app.trees, *app.store, run, view);
  nlohmann::json j = run_json(run);
  j["metric"] = metric_name(view.metric);
  j["top"] = top_functions(*table, static_cast<std::size_t>(int_param(req, "top", 20, 1, 1000)));
  send_json(res, 200, j);
}

// GET /api/runs/{id}/functions
void functions(App& app, const httplib::Request& req, httplib::Response& res) {
  RunInfo run = run_from_path(app, req);
  View view = view_from(req, run);
  std::size_t limit = static_cast<std::size_t>(int_param(req, "limit", 1000, 1, 1000000));
  send_text(req, res,
            run_functions(*app.tables.get(app.trees, *app.store, run, view), view.metric, limit)
                .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
            "application/json");
}

// GET /api/runs/{id}/profile.folded
void folded(App& app, const httplib::Request& req, httplib::Response& res) {
  RunInfo run = run_from_path(app, req);
  View view = view_from(req, run);
  if (req.has_param("reverse")) {  // documented in api.md; was ignored (issue 12)
    const std::string r = req.get_param_value("reverse");
    if (r != "0" && r != "1" && r != "true" && r != "false")
      throw HttpError(422, "bad value for reverse: '" + r + "' (0 or 1)");
    view.reverse = r == "1" || r == "true";
  }
  send_text(req, res, run_folded(*app.trees.get(*app.store, run, view)),
            "text/plain; charset=utf-8");
  res.set_header("Content-Disposition", "attachment; filename=\"run-" + std::to_string(run.id) +
                                            "." + std::string(metric_name(view.metric)) +
                                            ".folded\"");
}

// GET /api/runs/{id}/profile.pb.gz?from=&until=&focus=  (pprof: every metric a sample type)
void pprof(App& app, const httplib::Request& req, httplib::Response& res) {
  RunInfo run = run_from_path(app, req);
  View view = view_from(req, run);
  std::vector<std::shared_ptr<const lf::Tree>> trees;  // kept alive while writing
  std::vector<lf::PprofSeries> series;
  for (const auto& [metric, total] : run.totals) {
    View v = view;
    v.metric = metric;
    trees.push_back(app.trees.get(*app.store, run, v));
    series.push_back({metric_pprof_type(metric), trees.back().get(), 0});
  }
  lf::PprofWriteOptions o;
  o.time_nanos = run.started_ns;
  o.duration_nanos = std::max<int64_t>(0, run.ended_ns - run.started_ns);
  if (run.hz > 0) {
    o.period_type = {"cpu", "nanoseconds"};
    o.period = int64_t(1e9 / run.hz);
  }
  res.status = 200;
  res.set_content(lf::write_pprof(series, o), "application/octet-stream");
  res.set_header("Content-Disposition",
                 "attachment; filename=\"run-" + std::to_string(run.id) + ".pb.gz\"");
}

// GET /api/runs/{id}/speedscope.json
void speedscope(App& app, const httplib::Request& req, httplib::Response& res) {
  RunInfo run = run_from_path(app, req);
  View view = view_from(req, run);
  send_text(req, res,
            run_speedscope(*app.trees.get(*app.store, run, view), run, view.metric)
                .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
            "application/json");
  res.set_header("Content-Disposition",
                 "attachment; filename=\"run-" + std::to_string(run.id) + ".speedscope.json\"");
}

// GET /api/runs/{id}/timeline?metric=&step=SECONDS
void timeline(App& app, const httplib::Request& req, httplib::Response& res) {
  RunInfo run = run_from_path(app, req);
  int metric = metric_param(req, &run);
  int64_t from = time_param(req, "from", run.started_ns);
  int64_t until = time_param(req, "until", std::max(run.ended_ns, run.started_ns + 1));
  if (until <= from) throw HttpError(422, "until must be after from");
  int64_t step_s = int_param(req, "step", 0, 0, 86400 * 365);
  int64_t step = step_s * 1000000000LL;
  if (step == 0) {  // about 100 points, whole seconds
    step = std::max<int64_t>(1000000000LL,
                             ((until - from) / 100 + 999999999LL) / 1000000000LL * 1000000000LL);
  }
  if ((until - from) / step > 100000)
    throw HttpError(422, "step too small: more than 100000 intervals");
  // The store answers in buckets of its own widths (1 s, 10 s, 1 min ...; coarser where
  // the fine ones have expired). A step that is not a multiple of the widest would get
  // two buckets in one step and three in the next (a saw-tooth that never happened),
  // and a bucket that starts before `from` would be dropped: so the step is rounded up
  // to a multiple of the widest bucket and the origin is aligned to it (a bucket never
  // straddles two steps; the store's buckets are aligned to their widths).
  int64_t origin = from - from % 1000000000LL;
  std::vector<TimePoint> points;
  for (int round = 0; round < 8; ++round) {  // widths are few: a coarser step settles at once
    points = app.store->timeline(run.id, metric, origin, until, step);
    int64_t widest = 1;
    for (const TimePoint& p : points) widest = std::max(widest, p.width_ns);
    if (step % widest == 0 && origin % widest == 0) break;
    step = (step + widest - 1) / widest * widest;
    origin = from - from % widest;
  }
  std::size_t n = static_cast<std::size_t>((until - origin + step - 1) / step);
  std::vector<int64_t> values(std::max<std::size_t>(n, 1), 0);
  for (const TimePoint& p : points) {
    if (p.t_ns < origin) continue;
    std::size_t i = static_cast<std::size_t>((p.t_ns - origin) / step);
    if (i < values.size()) values[i] += p.value;
  }
  send_json(res, 200,
            {{"metric", metric_name(metric)},
             {"units", metric_units(metric)},
             {"from_ns", origin},
             {"until_ns", origin + static_cast<int64_t>(values.size()) * step},
             {"step_ns", step},
             {"values", values}});
}

// head_name=NAME&head_tag=K=V: the newest run of NAME with those tags, any status
// (what GET /api/runs?name=&tag=&limit=1 lists first), so a CI job needs one request.
RunInfo newest_run(App& app, const httplib::Request& req) {
  if (req.has_param("head")) throw HttpError(422, "head=ID and head_name=NAME exclude each other");
  RunFilter f;
  f.name = req.get_param_value("head_name");
  if (f.name.empty()) throw HttpError(422, "head_name must not be empty");
  f.tags = tag_params(req, "head_tag", 64);
  f.limit = 1;
  RunList list = app.store->list_runs(f);
  if (list.runs.empty())
    throw HttpError(404, "head_name=" + f.name + ": no run with that name and those tags");
  return list.runs.front();
}

// Base and head of a comparison: base=ID, or base_name=NAME&base_tag=K=V
// (latest finished); head=ID, or head_name=NAME&head_tag=K=V (newest).
std::pair<RunInfo, RunInfo> diff_runs(App& app, const httplib::Request& req) {
  auto by_id = [&](const char* name) {
    std::string v = req.get_param_value(name);
    char* end = nullptr;
    long long id = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || id <= 0)
      throw HttpError(422, std::string(name) + " must be a run id, got '" + v + "'");
    auto r = app.store->get_run(id);
    if (!r) throw HttpError(404, std::string("no run ") + v + " (" + name + ")");
    return *r;
  };
  if (!req.has_param("head") && !req.has_param("head_name"))
    throw HttpError(422, "head=ID or head_name=NAME (with head_tag=K=V) is required");
  RunInfo head = req.has_param("head_name") ? newest_run(app, req) : by_id("head");
  if (req.has_param("base")) return {by_id("base"), head};
  if (!req.has_param("base_name"))
    throw HttpError(422, "base=ID or base_name=NAME (with base_tag=K=V) is required");
  Tags tags = tag_params(req, "base_tag", 64);
  auto id = app.store->latest_run(req.get_param_value("base_name"), tags, head.id);
  if (!id)
    throw HttpError(
        404, "no finished run named '" + req.get_param_value("base_name") + "' with those tags");
  auto base = app.store->get_run(*id);
  if (!base) throw HttpError(404, "base run vanished");
  return {*base, head};
}

View diff_view(const httplib::Request& req, const RunInfo& head) {
  View v;
  v.metric = metric_param(req, &head);
  v.profiler = req.get_param_value("profiler") == "1";
  v.focus = req.get_param_value("focus");  // zoom: the same subtree of both runs
  if (v.focus.size() > 1 << 20) throw HttpError(422, "focus path too long");
  return v;
}

bool normalize_param(const httplib::Request& req) {
  std::string v = req.has_param("normalize") ? req.get_param_value("normalize") : "1";
  if (v == "1" || v == "true") return true;
  if (v == "0" || v == "false") return false;
  throw HttpError(422, "normalize is 1 or 0, got '" + v + "'");
}

// GET /api/diff.svg, and /api/diff/flamegraph.json: its frames as data (the compare page's)
void diff_graph(App& app, const httplib::Request& req, httplib::Response& res) {
  auto [base, head] = diff_runs(app, req);
  View view = diff_view(req, head);
  bool normalize = normalize_param(req);
  lf::SvgOptions opts;
  bool reverse = false;
  std::string err = svg_options_from(req.params, view.metric, opts, reverse);
  if (!err.empty()) throw HttpError(422, err);
  view.reverse = reverse;
  if (opts.colors == "mem") opts.colors = "lua";  // a differential graph colours by change
  // invert=1: widths from the base, so what shrank or vanished (got faster) is wide enough
  // to see; colours keep their meaning (red grew, blue shrank).
  std::string inv = req.get_param_value("invert");
  if (!inv.empty() && inv != "0" && inv != "1")
    throw HttpError(422, "invert is 1 or 0, got '" + inv + "'");
  opts.differential_as_after = inv != "1";
  if (!req.has_param("title"))
    opts.title = "Differential: " + head.name + " #" + std::to_string(head.id) + " vs #" +
                 std::to_string(base.id);
  if (!req.has_param("subtitle"))
    opts.subtitle =
        std::string(metric_name(view.metric)) + (normalize ? ", normalised to equal totals" : "") +
        (opts.differential_as_after ? "" : ", widths of the base") + "; red grew, blue shrank" +
        (view.focus.empty() ? "" : "; focus: " + view.focus);
  // Two finished runs never change: their comparison is cached like a graph,
  // under both ids (a deleted run drops it) and its resolved base (base_name=).
  const bool cacheable = base.status == "finished" && head.status == "finished";
  std::string key, etag;
  if (cacheable) {
    key = "diff|" + std::to_string(base.id) + "|" + std::to_string(base.ended_ns) + "|" +
          cache_key(req);
    etag = etag_of(key, head);
    if (req.get_header_value("If-None-Match") == etag) {
      res.status = 304;
      res.set_header("ETag", etag);
      return;
    }
    if (auto hit = app.cache.get(key)) return send_graph(req, res, hit, etag);
  }
  auto b = app.trees.get(*app.store, base, view), h = app.trees.get(*app.store, head, view);
  auto graph = std::make_shared<Payload>();
  graph->raw = render_diff_graph(*b, *h, normalize, opts, drawing_of(req.path));
  if (cacheable) {
    graph->gzip_level = 6;
    app.cache.put(head.id, key, graph, base.id);
  }
  send_graph(req, res, graph, etag);
}

// GET /api/diff
void diff_json(App& app, const httplib::Request& req, httplib::Response& res) {
  auto [base, head] = diff_runs(app, req);
  View view = diff_view(req, head);
  double threshold = -1;
  if (req.has_param("threshold")) {
    std::string v = req.get_param_value("threshold");
    if (!lf::parse_threshold(v, threshold))
      throw HttpError(422, "threshold is percentage points from 0 to 100, got '" + v + "'");
  }
  std::size_t limit = static_cast<std::size_t>(int_param(req, "limit", 20, 1, 10000));
  auto b = app.trees.get(*app.store, base, view), h = app.trees.get(*app.store, head, view);
  DiffReport rep = diff_report(*b, *h, base, head, view.metric, threshold, limit);
  send_json(res, rep.failed ? 412 : 200, rep.json);
}

}  // namespace

void setup_read_routes(httplib::Server& svr, App& app) {
  auto route = [&](const char* pattern, const char* name,
                   void (*fn)(App&, const httplib::Request&, httplib::Response&)) {
    add_route(svr, app, "GET", pattern, name,
              [&app, fn](const httplib::Request& q, httplib::Response& r) { fn(app, q, r); });
  };
  route(R"(/api/runs)", "/api/runs", list_runs);
  route(R"(/api/runs/([^/]+))", "/api/runs/{id}", get_run);
  route(R"(/api/runs/([^/]+)/flamegraph\.svg)", "/api/runs/{id}/flamegraph.svg", flamegraph);
  route(R"(/api/runs/([^/]+)/flamegraph\.json)", "/api/runs/{id}/flamegraph.json", flamegraph);
  route(R"(/api/runs/([^/]+)/functions)", "/api/runs/{id}/functions", functions);
  route(R"(/api/runs/([^/]+)/profile\.folded)", "/api/runs/{id}/profile.folded", folded);
  route(R"(/api/runs/([^/]+)/speedscope\.json)", "/api/runs/{id}/speedscope.json", speedscope);
  route(R"(/api/runs/([^/]+)/profile\.pb\.gz)", "/api/runs/{id}/profile.pb.gz", pprof);
  route(R"(/api/runs/([^/]+)/timeline)", "/api/runs/{id}/timeline", timeline);
  route(R"(/api/diff\.svg)", "/api/diff.svg", diff_graph);
  route(R"(/api/diff/flamegraph\.json)", "/api/diff/flamegraph.json", diff_graph);
  route(R"(/api/diff)", "/api/diff", diff_json);
  setup_view_routes(svr, app);
}

}  // namespace lfs
