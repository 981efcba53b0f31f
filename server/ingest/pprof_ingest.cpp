// pprof bodies -> store batches (see pprof_ingest.hpp).
#include "ingest/pprof_ingest.hpp"

#include <nlohmann/json.hpp>

#include <iterator>
#include <unordered_map>

#include "http/error.hpp"
#include "ingest/ingest.hpp"
#include "luaflame/wire.hpp"
#include "store/batch.hpp"

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

namespace {

std::string stack_key(const std::vector<uint32_t>& frames) {
  return {reinterpret_cast<const char*>(frames.data()), frames.size() * sizeof(uint32_t)};
}

// The previous profile's values of cumulative types by stack, keyed by the
// stack's frame ids in `p` (a stack with a frame `p` lacks matches none of p's).
using Before = std::unordered_map<std::string, std::vector<int64_t>>;

Before read_before(const lf::PprofProfile& p, std::string_view prev, const lf::ParseOptions& opts) {
  Before before;
  if (prev.empty()) return before;
  lf::PprofProfile q = read(prev, opts, "prev_profile");
  if (q.sample_types.size() != p.sample_types.size()) return before;
  std::unordered_map<std::string_view, uint32_t> id;
  for (std::size_t i = 0; i < p.frames.size(); ++i) id.emplace(p.frames[i], uint32_t(i));
  std::vector<uint32_t> ids;
  for (lf::PprofStack& s : q.stacks) {
    ids.clear();
    for (uint32_t f : s.frames) {
      auto it = id.find(q.frames[f]);
      if (it == id.end()) break;
      ids.push_back(it->second);
    }
    if (ids.size() == s.frames.size()) before.emplace(stack_key(ids), std::move(s.values));
  }
  return before;
}

// Adds a profile's stacks to a batch. Each profile frame is checked like strict
// folded input once, copied into the batch once, and then given back.
// What a cumulative count gained since `prev`: a count that went down (a
// counter reset) gained nothing new; a negative previous count is no count
// and subtracts nothing (x - prev could overflow: prev may be -2^63).
int64_t since(int64_t x, int64_t prev) {
  if (prev <= 0) return x;
  return x >= prev ? x - prev : 0;
}

class StackAdder {
 public:
  StackAdder(lf::PprofProfile& p, const Choice& c, const std::vector<std::size_t>& cols,
             const lf::ParseOptions& opts, Batch& batch)
      : p_(p),
        c_(c),
        cols_(cols),
        opts_(opts),
        batch_(batch),
        builder_(batch),
        batch_frame_(p.frames.size(), kNone) {}

  void add(const lf::PprofStack& s, const Before& before) {
    v_.clear();
    bool any = false;
    auto b = before.empty() ? before.end() : before.find(stack_key(s.frames));
    for (std::size_t col : cols_) {
      int64_t x = s.values[col];
      if (c_.cumulative[col] && b != before.end()) x = since(x, b->second[col]);
      if (x < 0 && !c_.cumulative[col])
        throw HttpError(400, "profile: negative value " + std::to_string(x) + " (" +
                                 type_name(p_.sample_types[col]) + ") for stack '" + text(s) + "'");
      if (x < 0) x = 0;  // a cumulative count went down (counter reset): nothing new
      any = any || x != 0;
      v_.push_back(x);
    }
    if (!any) return;
    int32_t node = s.frames.empty() ? builder_.child(-1, builder_.frame("[no stack]")) : -1;
    for (std::size_t d = 0; d < s.frames.size(); ++d) node = builder_.child(node, frame(s, d));
    // A sum past 2^63-1 throws ValueError: a 400, nothing stored.
    for (std::size_t k = 0; k < v_.size(); ++k) builder_.add(node, k, v_[k]);
  }

 private:
  static constexpr uint32_t kNone = 0xffffffffu;
  lf::PprofProfile& p_;
  const Choice& c_;
  const std::vector<std::size_t>& cols_;
  const lf::ParseOptions& opts_;
  Batch& batch_;
  BatchBuilder builder_;
  std::vector<uint32_t> batch_frame_;  // profile frame id -> batch frame id
  std::vector<int64_t> v_;

  uint32_t frame(const lf::PprofStack& s, std::size_t depth) {
    uint32_t f = s.frames[depth];
    if (batch_frame_[f] != kNone) return batch_frame_[f];
    std::string why = lf::check_frame(p_.frames[f], opts_);
    if (!why.empty())
      throw HttpError(
          400,
          "profile: frame " + std::to_string(depth + 1) + " of stack '" + text(s) + "': " + why,
          {{"reason", why}});
    batch_frame_[f] = builder_.frame(p_.frames[f]);
    std::string().swap(p_.frames[f]);  // the batch holds it now
    return batch_frame_[f];
  }

  // The stack's text for an error, at most 200 bytes.
  std::string text(const lf::PprofStack& s) const {
    std::string out;
    for (uint32_t f : s.frames) {
      if (!out.empty()) out += ';';
      out += batch_frame_[f] == kNone ? p_.frames[f] : batch_.frames[batch_frame_[f]];
      if (out.size() >= 200) break;
    }
    return out.substr(0, 200);
  }
};

}  // namespace

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
  Before before = read_before(p, prev, opts);
  StackAdder adder(p, c, cols, opts, out.batch);
  for (const lf::PprofStack& s : p.stacks) adder.add(s, before);
  return out;
}

}  // namespace lfs
