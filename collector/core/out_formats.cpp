// Output formats (see out_formats.hpp).
#include "core/out_formats.hpp"

#include <algorithm>
#include <charconv>

#include "luaflame/svg.hpp"
#include "luaflame/tree.hpp"
#include "luaflame/wire.hpp"
#include "plugin/plugin.hpp"
#include "pprof/pprof_writer.h"

namespace lfc {

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() > suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void append_uint(std::string& out, uint64_t v) {
  char num[24];
  auto r = std::to_chars(num, num + sizeof num, v);
  out.append(num, r.ptr);
}

// A JSON string. Frame names are valid UTF-8 without control bytes (frames.cpp
// sanitizes them); quotes, backslashes and any control byte are escaped anyway.
void append_json_string(std::string& out, std::string_view s) {
  static const char hex[] = "0123456789abcdef";
  out += '"';
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else
      out += ch;
  }
  out += '"';
}

// "NAME SOURCE:LINE" -> SOURCE and LINE, for speedscope's file and line.
bool split_location(std::string_view name, std::string_view& file, uint64_t& line) {
  std::size_t sp = name.rfind(' '), colon = name.rfind(':');
  if (sp == std::string_view::npos || colon == std::string_view::npos || colon < sp ||
      colon + 1 == name.size())
    return false;
  std::string_view num = name.substr(colon + 1);
  auto r = std::from_chars(num.data(), num.data() + num.size(), line);
  if (r.ec != std::errc() || r.ptr != num.data() + num.size()) return false;
  file = name.substr(sp + 1, colon - sp - 1);
  return !file.empty();
}

}  // namespace

Format format_of(const std::string& path) {
  if (ends_with(path, ".svg")) return Format::svg;
  if (ends_with(path, ".json")) return Format::speedscope;
  if (ends_with(path, ".pb.gz")) return Format::pprof;
  return Format::folded;
}

const char* metric_unit(const std::string& metric) {
  if (metric == "time") return "ns";
  if (metric == "alloc_bytes" || metric == "live_bytes") return "bytes";
  if (metric == "alloc_count") return "allocations";
  if (metric == "calls") return "calls";
  return "samples";
}

uint64_t node_cost(Format f, int nm, std::size_t path_len, std::string_view name) {
  switch (f) {
    case Format::folded:
      return path_len + 22;  // path, ' ', 20 digits, '\n'
    case Format::svg:
      return 512 + 12 * name.size();  // <g>, <title>, <rect>, <text>, escaped
    case Format::speedscope:
      return static_cast<uint64_t>(nm) * 2 * 56;  // an open and a close event
    case Format::pprof:  // a function, a location and a sample: ids, strings, one value per metric
      return 48 + name.size() + static_cast<uint64_t>(nm) * 10;
  }
  return 0;
}

SvgWriter::SvgWriter(const OutTree& t) : t_(t), map_(t.size(), lf::Tree::kNone) {
  std::vector<char> live(t.size(), 0);
  for (int m = 0; m < t.nm; ++m) {
    std::vector<char> l = t.live(m);
    for (std::size_t i = 0; i < l.size(); ++i) live[i] |= l[i];
  }
  std::size_t nlive = 0;
  for (char c : live) nlive += c != 0;
  lt_.reserve(nlive + 1);
  std::vector<uint32_t> fmap(t.names.size(), lf::Tree::kNone);
  map_[0] = lf::Tree::kRoot;
  for (uint32_t i = 1; i < t.size(); ++i) {
    if (!live[i]) continue;
    uint32_t& f = fmap[t.frame[i]];
    if (f == lf::Tree::kNone) f = lt_.intern(t.name(i));
    map_[i] = lt_.child(map_[t.parent[i]], f);
  }
  cur_.assign(lt_.size(), 0);
}

void SvgWriter::write(int m, const std::string& metric, const std::string& title, OutFile& out) {
  // Integers below 2^53 (counts, ns, bytes): the swap is exact.
  for (uint32_t i = 1; i < t_.size(); ++i) {
    if (map_[i] == lf::Tree::kNone) continue;
    double v = static_cast<double>(t_.value(i, m));
    if (v != cur_[map_[i]]) {
      lt_.add_self(map_[i], v - cur_[map_[i]]);
      cur_[map_[i]] = v;
    }
  }
  lt_.finalize();  // totals; the renderer orders children by name itself
  lf::SvgOptions o;
  o.title = title;
  std::string unit = metric_unit(metric);
  o.count_name = unit;
  if (unit == "ns") o.unit = "ns";
  if (unit == "bytes") {
    o.unit = "bytes";
    o.colors = "mem";
  }
  if (lt_.total() <= 0) {
    std::string s;
    lf::render_empty_svg(o, "no " + metric + " recorded", s);
    out.write(s);
    return;
  }
  lf::render_svg(lt_, o, [&](std::string_view piece) { out.write(piece); });
}

void write_svg(const OutTree& t, int m, const std::string& metric, const std::string& title,
               OutFile& out) {
  SvgWriter(t).write(m, metric, title, out);
}

void write_speedscope(const OutTree& t, const std::vector<std::string>& metrics,
                      const std::string& name, OutFile& out) {
  std::string& b = out.buffer();
  b += "{\"$schema\":\"https://www.speedscope.app/"
       "file-format-schema.json\",\"exporter\":\"luaflame\",\"name\":";
  append_json_string(b, name);
  b += ",\"activeProfileIndex\":0,\"shared\":{\"frames\":[";
  for (std::size_t f = 0; f < t.names.size(); ++f) {
    if (f) b += ',';
    b += "{\"name\":";
    append_json_string(b, t.names[f]);
    std::string_view file;
    uint64_t line = 0;
    if (split_location(t.names[f], file, line)) {
      b += ",\"file\":";
      append_json_string(b, file);
      b += ",\"line\":";
      append_uint(b, line);
    }
    b += '}';
    out.maybe_spill();
  }
  b += "]},\"profiles\":[";
  const std::size_t n = t.size();
  for (int m = 0; m < static_cast<int>(metrics.size()) && m < t.nm; ++m) {
    std::vector<char> live = t.live(m);
    std::vector<uint64_t> tot = t.totals(m);
    std::string unit = metric_unit(metrics[m]);
    if (m) b += ',';
    b += "{\"type\":\"evented\",\"name\":";
    append_json_string(b, name + " (" + metrics[m] + ")");
    b += ",\"unit\":";
    b += unit == "ns" ? "\"nanoseconds\"" : unit == "bytes" ? "\"bytes\"" : "\"none\"";
    b += ",\"startValue\":0,\"endValue\":";
    append_uint(b, tot[0]);
    b += ",\"events\":[";
    // Depth first: a node opens at `at`, its children follow, then its own
    // value, then it closes. Each stack entry: node, next child to open.
    auto next_live = [&](uint32_t c) {
      while (c != OutTree::kNone && !live[c]) c = t.next[c];
      return c;
    };
    uint64_t at = 0;
    bool first_event = true;
    auto event = [&](char type, uint32_t node) {
      b += first_event ? "{\"type\":\"" : ",{\"type\":\"";
      first_event = false;
      b += type;
      b += "\",\"frame\":";
      append_uint(b, t.frame[node]);
      b += ",\"at\":";
      append_uint(b, at);
      b += '}';
      out.maybe_spill();
    };
    std::vector<std::pair<uint32_t, uint32_t>> st;
    if (n > 1) st.push_back({0, next_live(t.first[0])});
    while (!st.empty()) {
      auto& top = st.back();
      if (top.second != OutTree::kNone) {
        uint32_t k = top.second;
        top.second = next_live(t.next[k]);
        event('O', k);
        st.push_back({k, next_live(t.first[k])});
        continue;
      }
      uint32_t node = top.first;
      st.pop_back();
      if (!node) break;
      at += t.value(node, m);
      event('C', node);
    }
    b += "]}";
  }
  b += "]}\n";
}

namespace {

const luaflame_pprof_writer_v1* pprof_writer(std::string& why) {
  const auto* w = lfplugin::table<luaflame_pprof_writer_v1>(
      "libluaflame-pprof.so", "LUAFLAME_PPROF_LIB", "luaflame_pprof_v1", why);
  if (!w) why = "cannot write pprof: " + why;
  return w;
}

}  // namespace

bool pprof_writer_loads(std::string& why) {
  return pprof_writer(why) != nullptr;
}

void write_pprof_file(const OutTree& t, const std::vector<std::string>& metrics, OutFile& out) {
  std::string why;
  const luaflame_pprof_writer_v1* w = pprof_writer(why);
  if (!w) return out.fail(why);
  // Each metric's pprof type and unit, as the wire format names them.
  const std::size_t nm = std::min(metrics.size(), static_cast<std::size_t>(t.nm));
  std::vector<luaflame_pprof_metric> types(nm, luaflame_pprof_metric{nullptr, "count"});
  for (std::size_t m = 0; m < nm; ++m) {
    types[m].type = metrics[m].c_str();
    for (const lfw::Metric& wm : lfw::kMetricList)
      if (wm.name == metrics[m]) types[m] = {wm.pprof_type.data(), wm.pprof_unit.data()};
  }
  std::vector<luaflame_pprof_name> names(t.names.size());
  for (std::size_t i = 0; i < names.size(); ++i) names[i] = {t.names[i].data(), t.names[i].size()};
  // OutTree's values are node-major already: copied only when fewer
  // metrics are named than the tree has columns (never today).
  std::vector<uint64_t> fewer;
  const uint64_t* values = t.val.data();
  if (nm < static_cast<std::size_t>(t.nm)) {
    fewer.resize(t.size() * nm);
    for (uint32_t i = 0; i < t.size(); ++i)
      for (std::size_t m = 0; m < nm; ++m) fewer[i * nm + m] = t.value(i, static_cast<int>(m));
    values = fewer.data();
  }
  const luaflame_pprof_tree_v1 tree{t.size(),     t.parent.data(), t.frame.data(),
                                    names.size(), names.data(),    nm,
                                    types.data(), values};
  luaflame_pprof_bytes bytes{};
  if (!w->write(&tree, &bytes)) return out.fail(std::string("cannot write pprof: ") + bytes.why);
  out.write({reinterpret_cast<const char*>(bytes.data), bytes.len});
  w->free_bytes(&bytes);
}

}  // namespace lfc
