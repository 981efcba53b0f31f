// engine, stage 4: the frames as data (luaflame/frames.hpp holds the
// format). The layout is place.hpp's, the one the SVG is drawn from; this
// file only writes it down: names and colours once each in a table, every
// frame as a row of numbers.
#include "luaflame/frames.hpp"

#include <charconv>
#include <cmath>
#include <unordered_map>
#include <vector>

#include "place.hpp"
#include "svg_text.hpp"

namespace lf {

using namespace detail;

namespace {

// A JSON string of sanitized text (valid UTF-8, no control characters
// left but the ones sanitize() replaced): only '"' and '\\' to escape.
void put_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

void put_number(std::string& out, double v) {
  if (!std::isfinite(v)) v = 0;  // JSON has no NaN or infinity
  if (v == 0) v = 0;             // no "-0"
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void put_bool(std::string& out, const char* key, bool v) {
  out += key;
  out += v ? "true," : "false,";
}

// The header of the document, up to the tables.
void put_header(std::string& out, const SvgOptions& o, const Placer& place, bool differential,
                uint32_t depth) {
  out += "{\"format\":\"luaflame-frames\",\"version\":";
  out += std::to_string(kFramesVersion);
  out += ",\"width\":";
  put_number(out, o.width > 0 ? o.width : 1200);
  out += ",\"frame_height\":";
  put_number(out, o.frame_height > 0 ? o.frame_height : 16);
  out += ",\"font_size\":";
  put_number(out, o.font_size);
  out += ",\"font_width\":";
  put_number(out, o.font_width > 0 ? o.font_width : 0.59);
  out += ',';
  put_bool(out, "\"inverted\":", o.inverted);
  put_bool(out, "\"differential\":", differential);
  put_bool(out, "\"negate\":", o.negate);
  put_bool(out, "\"show_self\":", o.show_self);
  out += "\"unit\":";
  put_json_string(out, o.unit == "ns" || o.unit == "bytes" ? o.unit : "");
  out += ",\"count_name\":";
  std::string count;
  sanitize(o.count_name.empty() ? "samples" : o.count_name, count, 256);
  put_json_string(out, count);
  out += ",\"factor\":";
  put_number(out, o.factor);
  out += ",\"total\":";
  put_number(out, place.timemax());
  out += ",\"depth\":";
  out += std::to_string(depth);
  out += ",\"stride\":";
  out += differential ? "8" : "7";
}

// Names and colours, each written once and referred to by index.
struct Tables {
  std::vector<uint32_t> name_of;  // frame -> index + 1 (0 = not yet)
  std::unordered_map<uint32_t, uint32_t> color_of;
  std::string names = "\"all\"";
  std::string colors;
  uint32_t name_count = 1;

  uint32_t name(const Tree& tree, uint32_t node, std::size_t max_bytes) {
    if (node == Tree::kRoot) return 0;
    uint32_t f = tree.frame_of(node);
    if (name_of.size() <= f) name_of.resize(tree.frame_count(), 0);
    if (!name_of[f]) {
      std::string plain;
      sanitize(strip_annotation(tree.frame_name(f)), plain, max_bytes);
      names += ',';
      put_json_string(names, plain);
      name_of[f] = ++name_count;
    }
    return name_of[f] - 1;
  }

  uint32_t color(uint32_t rgb) {
    auto [it, added] = color_of.emplace(rgb, uint32_t(color_of.size()));
    if (added) {
      char buf[16];
      char* p = buf;
      if (!colors.empty()) *p++ = ',';
      *p++ = '"';
      p = w_rgb(p, rgb);
      *p++ = '"';
      colors.append(buf, p);
    }
    return it->second;
  }
};

}  // namespace

std::size_t render_frames(const Tree& tree, const SvgOptions& opts, std::string& out) {
  Placer place(tree, opts);
  bool diff = tree.differential();
  uint32_t depth = place.timemax() > 0 ? place.depth_max() : 0;
  put_header(out, opts, place, diff, depth);
  Tables t;
  std::string rows;
  std::size_t count = 0;
  if (place.timemax() > 0) {
    place.walk([&](const Placed& it) {
      if (count) rows += ',';
      ++count;
      rows += std::to_string(it.depth);
      rows += ',';
      char buf[32];
      rows.append(buf, w_fixed1(buf, it.x1));
      rows += ',';
      // As the SVG: rounded right edge less rounded left edge, so frames tile.
      double w = double(round_printf(it.x2, 10) - round_printf(it.x1, 10)) / 10;
      rows.append(buf, w_fixed1(buf, w));
      rows += ',';
      rows += std::to_string(t.name(tree, it.node, opts.max_name_bytes));
      rows += ',';
      rows += std::to_string(t.color(place.rgb(it.node)));
      rows += ',';
      put_number(rows, it.total);
      rows += ',';
      put_number(rows, it.node == Tree::kRoot ? 0 : tree.self_at(it.node, place.col()));
      if (diff) {
        rows += ',';
        put_number(rows, place.delta(it.node));
      }
    });
  }
  out += ",\"names\":[";
  out += t.names;
  out += "],\"colors\":[";
  out += t.colors;
  out += "],\"frames\":[";
  out += rows;
  out += "]}\n";
  return count;
}

}  // namespace lf
