// Request bodies -> store batches (see ingest.hpp).
#include "ingest/ingest.hpp"

#include <cctype>
#include <charconv>
#include <limits>
#include <unordered_map>

#include "http/error.hpp"
#include "store/batch.hpp"

namespace lfs {

namespace {

// The count of a good line, as an exact 64-bit integer read from the text after the stack
// (the engine's double would round counts above 2^53). "" or the reason it is refused.
std::string integer_count(std::string_view text, const lf::FoldedLine& l, int64_t& out) {
  const char* end = text.data() + text.size();
  const char* p = l.stack.data() + l.stack.size();
  if (p >= text.data() && p <= end) {
    while (p < end && (*p == ' ' || *p == '\t')) ++p;
    auto r = std::from_chars(p, end, out);
    if (r.ec == std::errc::result_out_of_range)
      return "count over 9223372036854775807 (counts are 64-bit integers)";
    if (r.ec == std::errc() && (r.ptr == end || !(*r.ptr == '.' || *r.ptr == 'e' || *r.ptr == 'E')))
      return {};
  }
  // 1.0 or 1e3: whole after all
  if (l.value >= 0 && l.value < 9.2e18 &&
      l.value == static_cast<double>(static_cast<int64_t>(l.value))) {
    out = static_cast<int64_t>(l.value);
    return {};
  }
  return "fractional count (luaflame stores integer counts: samples, ns, bytes; scale the values, "
         "e.g. to ns)";
}

}  // namespace

std::size_t parse_folded_batch(std::string_view text, const lf::ParseOptions& opts, Batch& batch) {
  // The tree is built as lines arrive: each frame name interned once, each stack a walk
  // from the root that reuses the previous line's common prefix (sorted input shares much).
  BatchBuilder builder(batch);
  bool differential_line = false;
  std::size_t first_diff_line = 0, bad_count_line = 0;
  std::string bad_count;
  std::vector<std::pair<std::string_view, int32_t>> prev;  // previous line: frame, node
  lf::ParseResult r = lf::parse_folded(text, opts, [&](const lf::FoldedLine& l) {
    if (l.differential && !differential_line) {
      differential_line = true;
      first_diff_line = l.line;
    }
    int64_t count = 0;
    std::string why = integer_count(text, l, count);
    if (!why.empty()) {
      if (bad_count.empty()) {
        bad_count = why;
        bad_count_line = l.line;
      }
      return;
    }
    int32_t node = -1;
    std::size_t depth = 0, pos = 0;
    const std::string_view stack = l.stack;
    while (pos <= stack.size()) {
      std::size_t semi = stack.find(';', pos);
      if (semi == std::string_view::npos) semi = stack.size();
      std::string_view f = stack.substr(pos, semi - pos);
      if (depth < prev.size() && prev[depth].first == f && prev[depth].second >= 0) {
        node = prev[depth].second;
      } else {
        node = builder.child(node, builder.frame(f));
        if (depth < prev.size())
          prev[depth] = {f, node};
        else
          prev.emplace_back(f, node);
        for (std::size_t k = depth + 1; k < prev.size(); ++k)
          prev[k].second = -1;  // no longer a prefix
      }
      ++depth;
      pos = semi + 1;
    }
    prev.resize(depth);
    try {
      builder.add(node, 0, count);
    } catch (const ValueError&) {
      if (bad_count.empty()) {
        bad_count = "the stack's counts sum past 9223372036854775807 (64-bit)";
        bad_count_line = l.line;
      }
    }
  });
  if (!r.ok()) {
    const lf::ParseError& e = r.errors.front();
    throw HttpError(
        400,
        "bad folded input: line " + std::to_string(e.line) + ": " + e.reason +
            (r.rejected > 1 ? " (and " + std::to_string(r.rejected - 1) + " more bad lines)" : ""),
        {{"line", e.line}, {"reason", e.reason}, {"bad_lines", r.rejected}});
  }
  if (differential_line)
    throw HttpError(
        400,
        "line " + std::to_string(first_diff_line) +
            ": two count columns (a differential profile) cannot be stored; upload each side",
        {{"line", first_diff_line}, {"reason", "two count columns"}});
  if (!bad_count.empty())
    throw HttpError(400,
                    "bad folded input: line " + std::to_string(bad_count_line) + ": " + bad_count,
                    {{"line", bad_count_line}, {"reason", bad_count}, {"bad_lines", 1}});
  return r.accepted;
}

std::string lines_to_folded(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    bool blank = line.find_first_not_of(" \t") == std::string_view::npos;
    if (!blank) {
      out.append(line);
      out += " 1";
    }
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
  // Depth of every node, checked; the tree is kept as it came (no path strings).
  std::vector<uint32_t> depth(chunk.nodes.size());
  const std::size_t cols = chunk.metrics.size();
  batch.nodes.reserve(chunk.nodes.size());
  batch.values.reserve(chunk.nodes.size() * cols);
  for (std::size_t i = 0; i < chunk.nodes.size(); ++i) {
    const lfw::Node& n = chunk.nodes[i];
    depth[i] = n.parent < 0 ? 1 : depth[static_cast<std::size_t>(n.parent)] + 1;
    if (depth[i] > opts.max_depth)
      throw HttpError(400,
                      "bad chunk: node " + std::to_string(i) + " is deeper than " +
                          std::to_string(opts.max_depth) + " frames",
                      {{"reason", "stack too deep"}});
    if (n.values.size() != cols)
      throw HttpError(400, "bad chunk: node " + std::to_string(i) + " has " +
                               std::to_string(n.values.size()) + " values for " +
                               std::to_string(cols) + " metrics");
    if (chunk.nodes.size() > static_cast<std::size_t>(std::numeric_limits<int32_t>::max()))
      throw HttpError(413, "bad chunk: too many nodes");
    batch.nodes.push_back({static_cast<int32_t>(n.parent), n.frame});
    for (uint64_t v : n.values) {
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw HttpError(400, "bad chunk: node " + std::to_string(i) + " has a value over 2^63-1",
                        {{"reason", "value too large"}});
      batch.values.push_back(static_cast<int64_t>(v));
    }
  }
  batch.frames = std::move(chunk.frames);
  chunk.frames.clear();
  chunk.nodes = {};
  return chunk;
}

int upload_metric(const std::string& units, const std::string& metric) {
  if (!metric.empty()) {
    int idx = metric_index(metric);
    if (idx < 0)
      throw HttpError(422,
                      "unknown metric '" + metric +
                          "' (samples time calls alloc_bytes alloc_count live_bytes live_count)");
    return idx;
  }
  // The first metric in lfw::kMetricList with these units (bytes -> alloc_bytes), after the
  // spellings other tools use.
  std::string u = units.empty() ? "samples" : units;
  if (u == "nanoseconds" || u == "time") u = "ns";
  if (u == "objects") u = "count";
  for (std::size_t i = 0; i < lfw::kMetricCount; ++i)
    if (lfw::kMetricList[i].units == u) return static_cast<int>(i);
  throw HttpError(422, "unknown units '" + units + "' (samples ns calls bytes count)");
}

PyroscopeName parse_pyroscope_name(const std::string& name) {
  PyroscopeName out;
  auto brace = name.find('{');
  std::string head = name.substr(0, brace);
  if (head.empty()) throw HttpError(400, "name wants APP.KIND{k=v,...}, got '" + name + "'");
  for (unsigned char c : head)
    if (!(std::isalnum(c) || c == '.' || c == '_' || c == '-' || c == '/' || c == ':'))
      throw HttpError(400,
                      "application name holds letters, digits and . _ - / : only: '" + head + "'");
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
    std::string kv =
        labels.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
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

int pyroscope_metric(const std::string& units, const std::string& aggregation,
                     const std::string& kind) {
  if (!aggregation.empty() && aggregation != "sum" && aggregation != "average")
    throw HttpError(422, "aggregationType is sum or average, got '" + aggregation + "'");
  bool average = aggregation == "average";
  std::string u = units;
  if (u.empty()) {  // Pyroscope's default is samples; the KIND can say more
    if (kind == "alloc_space" || kind == "inuse_space")
      u = "bytes", average = kind == "inuse_space";
    else if (kind == "alloc_objects" || kind == "inuse_objects")
      u = "objects", average = kind == "inuse_objects";
    else
      u = "samples";
  }
  if (u == "samples") return metric_index("samples");
  if (u == "nanoseconds") return metric_index("time");
  if (u == "bytes") return metric_index(average ? "live_bytes" : "alloc_bytes");
  if (u == "objects") return metric_index(average ? "live_count" : "alloc_count");
  throw HttpError(422, "unknown units '" + units + "' (samples objects bytes nanoseconds)");
}

}  // namespace lfs
