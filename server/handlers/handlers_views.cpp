// The views of issue 17: a function's sandwich (JSON summary and the two
// SVG halves), a source file with its line heat, and the run's source texts
// (listed, read, uploaded). Handlers only translate; sandwich.cpp computes.
#include <algorithm>
#include <cmath>
#include <functional>

#include "http/app.hpp"
#include "http/guard.hpp"
#include "luaflame/frames.hpp"
#include "luaflame/svg.hpp"
#include "views/sandwich.hpp"

namespace lfs {
namespace {

// Limits of an upload of source texts: they are for reading, not archiving.
constexpr std::size_t kMaxSourceFiles = 1000;
constexpr std::size_t kMaxSourceBytes = 1u << 20;    // one file
constexpr std::size_t kMaxSourcesBytes = 16u << 20;  // one upload
constexpr std::size_t kMaxSourcePath = 1024;

std::string fn_param(const httplib::Request& req) {
  std::string fn = req.get_param_value("fn");
  if (fn.empty()) throw HttpError(422, "fn=NAME (a frame name) is required");
  if (fn.size() > 65536) throw HttpError(422, "fn is too long");
  return fn;
}

// Cache key of a finished run's answer: the route and every parameter (sorted by httplib).
std::string cache_key(const char* kind, const httplib::Request& req) {
  std::string key = kind + req.path + "?";
  for (const auto& [k, v] : req.params) key += k + "=" + v + "&";
  return key;
}

// GET /api/runs/{id}/sandwich?fn=&metric=&from=&until=
// Without fn: loads the view's paths (a page warms the cache) and says how big they are.
void sandwich_json(App& app, const httplib::Request& req, httplib::Response& res) {
  RunInfo run = run_from_path(app, req);
  View view = view_param(req, run);
  auto paths = app.paths.get(*app.store, run, view);
  if (!req.has_param("fn")) {
    // The warm-up (the page asks in idle time): also the root function's sides,
    // the costliest sandwich (its callees are the whole graph: every stack walked).
    const uint32_t root = paths->root_frame();
    if (root != UINT32_MAX) {
      paths->side(paths->names[root], Side::callers);
      paths->side(paths->names[root], Side::callees);
    }
    send_json(res, 200, {{"stacks", paths->values.size()}, {"bytes", paths->bytes()}});
    return;
  }
  std::string fn = fn_param(req);
  std::string key;
  if (run.status == "finished") {
    key = cache_key("sandwich.json|", req);
    if (auto hit = app.cache.get(key)) return send_payload(req, res, hit, "application/json");
  }
  SandwichInfo info = sandwich_info(*paths, fn);
  auto list = [](const std::vector<std::pair<std::string, double>>& xs) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [name, total] : xs) out.push_back({{"name", name}, {"total", total}});
    return out;
  };
  nlohmann::json body = {{"fn", fn},
                         {"metric", metric_name(view.metric)},
                         {"units", metric_units(view.metric)},
                         {"found", info.found},
                         {"total", info.total},
                         {"self", info.self},
                         {"view_total", info.view_total},
                         {"callers", list(info.callers)},
                         {"callees", list(info.callees)}};
  auto out = std::make_shared<Payload>();
  out->raw = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (!key.empty()) app.cache.put(run.id, key, out);
  send_payload(req, res, out, "application/json");
}

// GET /api/runs/{id}/sandwich.svg?fn=&side=callers|callees&metric=&from=&until=&width=&minwidth=...
// and sandwich.json: the same half's frames as data (the run page's)
void sandwich_graph(App& app, const httplib::Request& req, httplib::Response& res) {
  RunInfo run = run_from_path(app, req);
  View view = view_param(req, run);
  std::string fn = fn_param(req);
  std::string side_name = req.has_param("side") ? req.get_param_value("side") : "callees";
  if (side_name != "callers" && side_name != "callees")
    throw HttpError(422, "side is callers or callees, got '" + side_name + "'");
  const Side side = side_name == "callers" ? Side::callers : Side::callees;
  const Drawing drawing = drawing_of(req.path);
  const char* type = drawing_type(drawing);
  lf::SvgOptions opts;
  bool reverse = false;
  std::string err = svg_options_from(req.params, view.metric, opts, reverse);
  if (!err.empty()) throw HttpError(422, err);
  if (!req.has_param("inverted"))
    opts.inverted = side == Side::callees;  // callees hang below the function
  if (!req.has_param("title"))
    opts.title = (side == Side::callers ? "Callers of " : "Callees of ") + fn;
  std::string key;
  if (run.status == "finished") {
    key = cache_key("sandwich|", req);
    if (auto hit = app.cache.get(key)) return send_payload(req, res, hit, type);
  }
  // Frames too narrow to draw are not built: the share of the width one pixel of minwidth is.
  double min_fraction = opts.min_width_percent ? opts.min_width / 100.0
                                               : opts.min_width / std::max(1.0, opts.width - 20.0);
  // At most maxframes frames: past that, the narrowest are left out too (a rare
  // function's stacks are each wide, so its halves can hold ten thousand frames).
  const std::size_t max_frames =
      static_cast<std::size_t>(int_param(req, "maxframes", 4000, 10, 1000000));
  auto paths = app.paths.get(*app.store, run, view);
  // Drawings up to ~2,000 px wide render from the side kept with the paths (cut
  // finer than they draw; the renderer drops what is narrower than minwidth).
  std::shared_ptr<const SandwichSide> s =
      min_fraction >= PathSet::kFineFraction
          ? paths->side(fn, side)
          : std::make_shared<const SandwichSide>(make_sandwich(*paths, fn, side, min_fraction));
  if (s->found && s->total != 0) {
    // Nodes this drawing keeps; past max_frames, only the widest max_frames.
    const double keep = std::fabs(s->total) * min_fraction;
    std::vector<double> totals;
    for (uint32_t i = 2; i < s->tree.size(); ++i)
      if (std::fabs(s->tree.total_at(i)) >= keep) totals.push_back(std::fabs(s->tree.total_at(i)));
    double fraction = min_fraction;
    if (totals.size() > max_frames) {
      std::nth_element(totals.begin(), totals.begin() + static_cast<std::ptrdiff_t>(max_frames),
                       totals.end(), std::greater<double>());
      // Just above the (max_frames+1)-th largest (a relative step: scaled back by the total).
      fraction = std::max(min_fraction, totals[max_frames] * (1 + 1e-9) / std::fabs(s->total));
    }
    // The renderer's minwidth in pixels for that fraction of the function's total.
    if (fraction > min_fraction || opts.min_width_percent) {
      opts.min_width_percent = false;
      opts.min_width = fraction * std::max(1.0, opts.width - 20.0);
    }
    if (s->pruned || fraction > min_fraction)
      opts.show_self = false;  // a node's self holds hidden children: show totals only
  }
  auto graph = std::make_shared<Payload>();
  if (drawing == Drawing::frames)
    lf::render_frames(s->found ? s->tree : lf::Tree(), opts, graph->raw);
  else if (!s->found)
    lf::render_empty_svg(opts, "No stack of this view holds " + fn, graph->raw);
  else
    lf::render_svg(s->tree, opts, graph->raw);
  if (!key.empty()) app.cache.put(run.id, key, graph);
  send_payload(req, res, graph, type);
}

// GET /api/runs/{id}/sources -> {"files": [{"path", "bytes"}]}
void list_sources(App& app, const httplib::Request& req, httplib::Response& res) {
  RunInfo run = run_from_path(app, req);
  nlohmann::json files = nlohmann::json::array();
  for (const auto& [path, bytes] : app.sources().list_sources(run.id))
    files.push_back({{"path", path}, {"bytes", bytes}});
  send_json(res, 200, {{"files", files}});
}

// GET /api/runs/{id}/source?file=PATH&from=&until=
// -> {"file", "text" (null when not stored), "metrics": {M: {"units", "total", "lines": [[line,
// self]...]}},
//     "functions": [{"name", "line", "metric", "self", "total"}], "executed": [lines seen in any
//     metric]}
void source_view(App& app, const httplib::Request& req, httplib::Response& res) {
  RunInfo run = run_from_path(app, req);
  std::string file = req.get_param_value("file");
  if (file.empty()) throw HttpError(422, "file=PATH is required");
  View base = view_param(req, run);
  nlohmann::json metrics = nlohmann::json::object(), functions = nlohmann::json::array();
  std::map<int64_t, bool> executed;
  for (const auto& [m, total] : run.totals) {
    View v = base;
    v.metric = m;
    auto table = app.tables.get(app.trees, *app.store, run, v);
    LineHeat heat = line_heat(*table, file);
    nlohmann::json lines = nlohmann::json::array();
    for (const auto& [line, value] : heat.lines) {
      lines.push_back({line, value});
      executed[line] = true;
    }
    for (const LineHeat::Fn& f : heat.functions)
      functions.push_back({{"name", f.name},
                           {"line", f.line},
                           {"metric", metric_name(m)},
                           {"self", f.self},
                           {"total", f.total}});
    metrics[std::string(metric_name(m))] = {
        {"units", metric_units(m)}, {"total", table->total}, {"lines", lines}};
  }
  nlohmann::json lines_seen = nlohmann::json::array();
  for (const auto& [line, _] : executed) lines_seen.push_back(line);
  std::optional<std::string> text = app.sources().get_source(run.id, file);
  nlohmann::json body = {{"file", file},
                         {"text", text ? nlohmann::json(*text) : nlohmann::json(nullptr)},
                         {"metrics", metrics},
                         {"functions", functions},
                         {"executed", lines_seen}};
  send_text(req, res, body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
            "application/json");
}

// POST /api/runs/{id}/sources  JSON {"files": {"PATH": "TEXT", ...}} (or the object itself)
void upload_sources(App& app, const httplib::Request& req, httplib::Response& res) {
  RunInfo run = run_from_path(app, req);
  // One depth limit for every JSON body (issue 31: 5,000,000 nested objects
  // were parsed here, +632 MiB, before the 400). Its size: kMaxSourcesBytes.
  check_json_depth(req.body, static_cast<std::size_t>(app.cfg.max_json_depth));
  nlohmann::json j = nlohmann::json::parse(req.body, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw HttpError(400,
                    "the body must be a JSON object {\"files\": {\"path\": \"text\"}} (UTF-8)");
  const nlohmann::json& files = j.contains("files") ? j["files"] : j;
  if (!files.is_object()) throw HttpError(400, "files must be an object {\"path\": \"text\"}");
  if (files.size() > kMaxSourceFiles)
    throw HttpError(413, "more than " + std::to_string(kMaxSourceFiles) + " source files");
  std::vector<SourceFile> out;
  std::size_t total = 0;
  for (const auto& [path, text] : files.items()) {
    if (path.empty() || path.size() > kMaxSourcePath)
      throw HttpError(400, "bad source path (empty or over 1024 bytes)");
    for (unsigned char c : path)
      if (c < 0x20) throw HttpError(400, "control character in source path");
    if (!text.is_string()) throw HttpError(400, "the text of '" + path + "' must be a string");
    const std::string& t = text.get_ref<const std::string&>();
    if (t.size() > kMaxSourceBytes)
      throw HttpError(
          413, "'" + path + "' is larger than " + std::to_string(kMaxSourceBytes) + " bytes");
    total += t.size();
    if (total > kMaxSourcesBytes)
      throw HttpError(
          413, "source texts larger than " + std::to_string(kMaxSourcesBytes) + " bytes in all");
    out.push_back({path, t});
  }
  app.sources().put_sources(run.id, out);
  send_json(res, 200, {{"id", run.id}, {"files", out.size()}, {"bytes", total}});
}

}  // namespace

void App::forget_sources(int64_t run) {
  try {
    sources().drop_sources(run);
  } catch (const std::exception&) {
    // No source store (it could not be opened): nothing to drop.
  }
}

void setup_view_routes(httplib::Server& svr, App& app) {
  auto route = [&](const char* pattern, const char* name,
                   void (*fn)(App&, const httplib::Request&, httplib::Response&)) {
    add_route(svr, app, "GET", pattern, name,
              [&app, fn](const httplib::Request& q, httplib::Response& r) { fn(app, q, r); });
  };
  route(R"(/api/runs/([^/]+)/sandwich)", "/api/runs/{id}/sandwich", sandwich_json);
  route(R"(/api/runs/([^/]+)/sandwich\.svg)", "/api/runs/{id}/sandwich.svg", sandwich_graph);
  route(R"(/api/runs/([^/]+)/sandwich\.json)", "/api/runs/{id}/sandwich.json", sandwich_graph);
  route(R"(/api/runs/([^/]+)/sources)", "/api/runs/{id}/sources", list_sources);
  route(R"(/api/runs/([^/]+)/source)", "/api/runs/{id}/source", source_view);
  add_body_route(
      svr, app, R"(/api/runs/([^/]+)/sources)", "/api/runs/{id}/sources",
      [&app](const httplib::Request& q, httplib::Response& r) { upload_sources(app, q, r); });
}

}  // namespace lfs
