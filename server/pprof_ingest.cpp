// pprof bodies -> store batches (see pprof_ingest.hpp).
#include "pprof_ingest.hpp"

#include <nlohmann/json.hpp>

#include <iterator>
#include <unordered_map>

#include "app.hpp"
#include "batch.hpp"
#include "ingest.hpp"
#include "luaflame/wire.hpp"

namespace lfs {

namespace {

struct TypeName {
  const char* type;
  const char* unit;
  const char* metric;
};
// Sample types read as each metric (what they are written as: lfw::kMetricList).
constexpr TypeName kTypes[] = {
    {"samples", "count", "samples"},
    {"sample", "count", "samples"},
    {"cpu", "nanoseconds", "time"},
    {"wall", "nanoseconds", "time"},
    {"calls", "count", "calls"},
    {"alloc_space", "bytes", "alloc_bytes"},
    {"alloc_objects", "count", "alloc_count"},
    {"inuse_space", "bytes", "live_bytes"},
    {"space", "bytes", "live_bytes"},
    {"inuse_objects", "count", "live_count"},
    {"objects", "count", "live_count"},
};

lf::PprofLimits limits_for(const lf::ParseOptions& opts) {
  lf::PprofLimits lim;
  lim.max_depth = opts.max_depth;
  lim.max_string_bytes = std::max<std::size_t>(opts.max_frame_bytes, 256);
  return lim;
}

lf::PprofProfile read(std::string_view body, const lf::ParseOptions& opts, const char* what) {
  lf::PprofProfile p;
  std::string err;
  if (!lf::read_pprof(body, limits_for(opts), p, err))
    throw HttpError(400, std::string(what) + ": " + err, {{"reason", err}});
  return p;
}

std::string type_name(const lf::PprofValueType& t) {
  return t.type + "/" + t.unit;
}

// Column of each sample type: its metric, or -1 when not taken.
struct Choice {
  std::vector<int> metric;
  std::vector<bool> cumulative;
};

Choice choose(const lf::PprofProfile& p, std::string_view config) {
  Choice c;
  std::vector<bool> used(std::size(lfw::kMetrics), false);
  nlohmann::json cfg;
  if (!config.empty()) {
    cfg = nlohmann::json::parse(config, nullptr, false);
    if (cfg.is_discarded() || !cfg.is_object())
      throw HttpError(400,
                      "sample_type_config must be a JSON object {\"TYPE\": {\"units\": ..., "
                      "\"aggregation\": ...}}");
  }
  for (const lf::PprofValueType& t : p.sample_types) {
    int m = -1;
    bool cumulative = false;
    if (!config.empty()) {
      if (!cfg.contains(t.type)) {  // Pyroscope takes only the configured types
        c.metric.push_back(-1);
        c.cumulative.push_back(false);
        continue;
      }
      const nlohmann::json& e = cfg[t.type];
      if (!e.is_object())
        throw HttpError(400, "sample_type_config: '" + t.type + "' must be an object");
      auto str = [&](const char* k) {
        return e.contains(k) && e[k].is_string() ? e[k].get<std::string>() : "";
      };
      std::string units = str("units");
      if (units.empty()) units = t.unit == "count" ? "" : t.unit;
      if (units == "count") units = "objects";
      m = pyroscope_metric(units, str("aggregation"), t.type);
      cumulative =
          e.contains("cumulative") && e["cumulative"].is_boolean() && e["cumulative"].get<bool>();
    } else {
      m = pprof_type_metric(t.type, t.unit);
      if (m < 0)
        throw HttpError(
            422,
            "pprof sample type '" + type_name(t) +
                "' has no metric here (samples, cpu, wall, alloc_space, alloc_objects, "
                "inuse_space, inuse_objects, space, objects; or send a sample_type_config)",
            {{"sample_type", type_name(t)}});
      cumulative = t.type == "alloc_space" || t.type == "alloc_objects";
    }
    // Two types for one metric (Node's wall next to cpu): the first is kept.
    if (used[std::size_t(m)])
      m = -1;
    else
      used[std::size_t(m)] = true;
    c.metric.push_back(m);
    c.cumulative.push_back(cumulative);
  }
  return c;
}

}  // namespace

int pprof_type_metric(const std::string& type, const std::string& unit) {
  for (const TypeName& t : kTypes)
    if (type == t.type && unit == t.unit) return metric_index(t.metric);
  return -1;
}

lf::PprofValueType metric_pprof_type(int metric) {
  if (metric < 0 || metric >= static_cast<int>(lfw::kMetricCount)) return {"unknown", "count"};
  const lfw::Metric& m = lfw::kMetricList[metric];
  return {std::string(m.pprof_type), std::string(m.pprof_unit)};
}

PprofBatch pprof_to_batch(std::string_view profile, std::string_view prev, std::string_view config,
                          const lf::ParseOptions& opts) {
  lf::PprofProfile p = read(profile, opts, "profile");
  Choice c = choose(p, config);
  PprofBatch out;
  out.samples = p.samples;
  out.time_nanos = p.time_nanos;
  out.duration_nanos = p.duration_nanos;
  out.period = p.period;
  out.period_unit = p.period_type.unit;
  std::vector<std::size_t> cols;  // sample type index of each batch column
  for (std::size_t i = 0; i < c.metric.size(); ++i)
    if (c.metric[i] >= 0) {
      cols.push_back(i);
      out.batch.metrics.push_back(c.metric[i]);
    }
  if (cols.empty())
    throw HttpError(422, "no sample type of the profile is taken (see sample_type_config)");
  // The previous profile of cumulative types, by stack, to subtract.
  std::unordered_map<std::string, std::vector<int64_t>> before;
  if (!prev.empty()) {
    lf::PprofProfile q = read(prev, opts, "prev_profile");
    for (lf::PprofStack& s : q.stacks)
      if (q.sample_types.size() == p.sample_types.size())
        before.emplace(std::move(s.stack), std::move(s.values));
  }
  BatchBuilder builder(out.batch);
  std::vector<int64_t> v;
  for (const lf::PprofStack& s : p.stacks) {
    v.clear();
    bool any = false;
    auto b = before.find(s.stack);
    for (std::size_t col : cols) {
      int64_t x = s.values[col];
      if (c.cumulative[col] && b != before.end()) x = x >= b->second[col] ? x - b->second[col] : 0;
      if (x < 0 && !c.cumulative[col])
        throw HttpError(400, "profile: negative value " + std::to_string(x) + " (" +
                                 type_name(p.sample_types[col]) + ") for stack '" +
                                 s.stack.substr(0, 200) + "'");
      if (x < 0) x = 0;  // a cumulative count went down (counter reset): nothing new
      any = any || x != 0;
      v.push_back(x);
    }
    if (!any) continue;
    // The stack as a path of nodes; each frame checked like strict folded input.
    int32_t node = -1;
    std::size_t depth = 0;
    for (std::string_view f :
         lf::split_stack(s.stack.empty() ? std::string_view("[no stack]") : s.stack)) {
      ++depth;
      std::string why = f.empty() ? std::string() : lf::check_frame(f, opts);
      if (!why.empty())
        throw HttpError(400,
                        "profile: frame " + std::to_string(depth) + " of stack '" +
                            s.stack.substr(0, 200) + "': " + why,
                        {{"reason", why}});
      node = builder.child(node, builder.frame(f));
    }
    // A sum past 2^63-1 throws ValueError: a 400, nothing stored.
    for (std::size_t k = 0; k < v.size(); ++k) builder.add(node, k, v[k]);
  }
  return out;
}

}  // namespace lfs
