// Request bodies -> store batches (see ingest.hpp).
#include "ingest.hpp"

#include <cctype>
#include <unordered_map>

#include "app.hpp"

namespace lfs {

std::size_t parse_folded_batch(std::string_view text, const lf::ParseOptions& opts, Batch& batch) {
  // A stack may repeat (uncollapsed input): the store merges repeats.
  bool differential_line = false;
  std::size_t first_diff_line = 0;
  lf::ParseResult r = lf::parse_folded(text, opts, [&](const lf::FoldedLine& l) {
    if (l.differential && !differential_line) { differential_line = true; first_diff_line = l.line; }
    batch.stacks.push_back({std::string(l.stack), {l.value}});
  });
  if (!r.ok()) {
    const lf::ParseError& e = r.errors.front();
    throw HttpError(400, "bad folded input: line " + std::to_string(e.line) + ": " + e.reason +
                             (r.rejected > 1 ? " (and " + std::to_string(r.rejected - 1) + " more bad lines)" : ""),
                    {{"line", e.line}, {"reason", e.reason}, {"bad_lines", r.rejected}});
  }
  if (differential_line)
    throw HttpError(400, "line " + std::to_string(first_diff_line) +
                             ": two count columns (a differential profile) cannot be stored; upload each side",
                    {{"line", first_diff_line}, {"reason", "two count columns"}});
  return r.accepted;
}

std::string lines_to_folded(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    bool blank = line.find_first_not_of(" \t") == std::string_view::npos;
    if (!blank) { out.append(line); out += " 1"; }
    out += '\n';
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  return out;
}

lfw::Chunk decode_chunk(std::string_view body, const lf::ParseOptions& opts, Batch& batch) {
  lfw::Chunk chunk;
  std::string err;
  if (!lfw::decode(body, chunk, err)) throw HttpError(400, "bad chunk: " + err, {{"reason", err}});
  for (const std::string& m : chunk.metrics) {
    int idx = metric_index(m);
    if (idx < 0) throw HttpError(422, "bad chunk: unknown metric '" + m + "'");
    batch.metrics.push_back(idx);
  }
  for (std::size_t i = 0; i < chunk.frames.size(); ++i) {
    std::string why = lf::check_frame(chunk.frames[i], opts);
    if (!why.empty())
      throw HttpError(400, "bad chunk: frame " + std::to_string(i) + ": " + why, {{"reason", why}});
  }
  // Depth of every node, checked before building the (possibly long) paths.
  std::vector<std::size_t> depth(chunk.nodes.size());
  for (std::size_t i = 0; i < chunk.nodes.size(); ++i) {
    const lfw::Node& n = chunk.nodes[i];
    depth[i] = n.parent < 0 ? 1 : depth[static_cast<std::size_t>(n.parent)] + 1;
    if (depth[i] > opts.max_depth)
      throw HttpError(400, "bad chunk: node " + std::to_string(i) + " is deeper than " +
                               std::to_string(opts.max_depth) + " frames", {{"reason", "stack too deep"}});
    if (n.values.size() != chunk.metrics.size())
      throw HttpError(400, "bad chunk: node " + std::to_string(i) + " has " + std::to_string(n.values.size()) +
                               " values for " + std::to_string(chunk.metrics.size()) + " metrics");
  }
  lfw::for_each_stack(chunk, [&](const std::string& stack, const std::vector<uint64_t>& values) {
    std::vector<double> v(values.begin(), values.end());
    batch.stacks.push_back({stack, std::move(v)});
  });
  return chunk;
}

int upload_metric(const std::string& units, const std::string& metric) {
  if (!metric.empty()) {
    int idx = metric_index(metric);
    if (idx < 0) throw HttpError(422, "unknown metric '" + metric + "' (samples time calls alloc_bytes alloc_count live_bytes live_count)");
    return idx;
  }
  if (units.empty() || units == "samples") return metric_index("samples");
  if (units == "ns" || units == "nanoseconds" || units == "time") return metric_index("time");
  if (units == "calls") return metric_index("calls");
  if (units == "bytes") return metric_index("alloc_bytes");
  if (units == "count" || units == "objects") return metric_index("alloc_count");
  throw HttpError(422, "unknown units '" + units + "' (samples ns calls bytes count)");
}

PyroscopeName parse_pyroscope_name(const std::string& name) {
  PyroscopeName out;
  auto brace = name.find('{');
  std::string head = name.substr(0, brace);
  if (head.empty()) throw HttpError(400, "name wants APP.KIND{k=v,...}, got '" + name + "'");
  for (unsigned char c : head)
    if (!(std::isalnum(c) || c == '.' || c == '_' || c == '-' || c == '/' || c == ':'))
      throw HttpError(400, "application name holds letters, digits and . _ - / : only: '" + head + "'");
  auto dot = head.rfind('.');
  if (dot != std::string::npos && dot > 0 && dot + 1 < head.size()) {
    out.app = head.substr(0, dot);
    out.kind = head.substr(dot + 1);
  } else {
    out.app = head;
  }
  if (brace == std::string::npos) return out;
  if (name.back() != '}') throw HttpError(400, "name: labels must end with '}': '" + name + "'");
  std::string labels = name.substr(brace + 1, name.size() - brace - 2);
  std::size_t pos = 0;
  while (pos < labels.size()) {
    std::size_t comma = labels.find(',', pos);
    std::string kv = labels.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? labels.size() : comma + 1;
    if (kv.empty()) continue;
    auto eq = kv.find('=');
    if (eq == std::string::npos) throw HttpError(400, "name: a label is k=v, got '" + kv + "'");
    std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
    check_tag(k, v);
    out.labels[k] = v;
  }
  return out;
}

int pyroscope_metric(const std::string& units, const std::string& aggregation, const std::string& kind) {
  if (!aggregation.empty() && aggregation != "sum" && aggregation != "average")
    throw HttpError(422, "aggregationType is sum or average, got '" + aggregation + "'");
  bool average = aggregation == "average";
  std::string u = units;
  if (u.empty()) {  // Pyroscope's default is samples; the KIND can say more
    if (kind == "alloc_space" || kind == "inuse_space") u = "bytes", average = kind == "inuse_space";
    else if (kind == "alloc_objects" || kind == "inuse_objects") u = "objects", average = kind == "inuse_objects";
    else u = "samples";
  }
  if (u == "samples") return metric_index("samples");
  if (u == "nanoseconds") return metric_index("time");
  if (u == "bytes") return metric_index(average ? "live_bytes" : "alloc_bytes");
  if (u == "objects") return metric_index(average ? "live_count" : "alloc_count");
  throw HttpError(422, "unknown units '" + units + "' (samples objects bytes nanoseconds)");
}

}  // namespace lfs
