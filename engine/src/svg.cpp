// engine, stage 4: the SVG flame graph.
//
// Layout and titles follow flamegraph.pl (same paddings, same pruning by
// --minwidth, same "NAME (COUNT COUNTNAME, PCT%)" titles) so the output can
// replace it. What differs is how: frames are laid out from the tree in one
// depth-first pass, only frames at least --minwidth wide are visited, and
// each frame is written compactly into one buffer (no printf):
//   <g><title>..</title><rect x=".." y=".." width=".." fill="#rgb"/><text ..>..</text></g>
// (an empty <text/> when the frame is too narrow for a label).
// Rect height and corner radius are shared, so they live in the stylesheet.
// Frames are written in depth-first pre-order, which the script relies on.
#include "luaflame/svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "svg_colors.hpp"
#include "svg_script.hpp"
#include "svg_text.hpp"

namespace lf {

using namespace detail;

namespace {

constexpr double kXPad = 10;     // left and right padding
constexpr double kFramePad = 1;  // vertical gap between frames
constexpr std::size_t kFlushBytes = 1 << 20;

// Where frames are written: one growing buffer, handed to the sink every
// megabyte or appended to the caller's string at the end. Frames are written
// with raw pointers into room made beforehand (no per-piece appends).
class Writer {
 public:
  Writer(std::string* whole, const std::function<void(std::string_view)>* sink)
      : whole_(whole), sink_(sink) {}
  char* room(std::size_t n) {
    if (buf_.size() - len_ < n) buf_.resize(std::max(buf_.size() * 2, len_ + n + kFlushBytes));
    return buf_.data() + len_;
  }
  void done(char* end) { len_ = std::size_t(end - buf_.data()); }
  void put(std::string_view s) { done(w_str(room(s.size()), s)); }
  void maybe_flush() {
    if (sink_ && len_ >= kFlushBytes) flush();
  }
  void flush() {
    if (!len_) return;
    if (sink_)
      (*sink_)(std::string_view(buf_.data(), len_));
    else
      whole_->append(buf_.data(), len_);
    len_ = 0;
  }

 private:
  std::string* whole_;
  const std::function<void(std::string_view)>* sink_;
  std::vector<char> buf_;
  std::size_t len_ = 0;
};

struct Layout {
  double width, height;
  double ypad1, ypad2, ypad3;
  double frame_h;
};

Layout layout(const SvgOptions& o, uint32_t depth_max) {
  Layout l;
  l.width = o.width > 0 ? o.width : 1200;
  l.frame_h = o.frame_height > 0 ? o.frame_height : 16;
  l.ypad1 = o.font_size * 3;
  l.ypad2 = o.font_size * 2 + 10;
  l.ypad3 = o.subtitle.empty() ? 0 : o.font_size * 2;
  l.height = (depth_max + 1) * l.frame_h + l.ypad1 + l.ypad2 + l.ypad3;
  return l;
}

std::string safe_font(const std::string& f) {
  std::string out;
  for (char c : f)
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ' ' ||
        c == ',' || c == '-' || c == '_' || c == '.')
      out += c;
  return out.empty() ? "Verdana" : out;
}

// An XML comment may not hold "--" nor end in "-".
void put_comment_text(std::string& out, const std::string& text) {
  std::string clean;
  sanitize(text, clean, 1 << 16);
  std::string safe;
  for (char c : clean) {
    if (c == '-' && !safe.empty() && safe.back() == '-') safe += ' ';
    safe += c;
  }
  if (!safe.empty() && safe.back() == '-') safe += ' ';
  out += safe;
}

void put_num(std::string& out, double v) {
  put_fixed(out, v, 2, true);
}

void put_text_el(std::string& out, const char* id, double x, double y, const std::string& text,
                 const char* extra = "") {
  out += "<text id=\"";
  out += id;
  out += "\" x=\"";
  put_num(out, x);
  out += "\" y=\"";
  put_num(out, y);
  out += '"';
  out += extra;
  out += '>';
  safe_text(text, out);
  out += "</text>\n";
}

void put_header(std::string& out, const SvgOptions& o, const Layout& l, const char* bg1,
                const char* bg2) {
  out +=
      "<?xml version=\"1.0\" standalone=\"no\"?>\n"
      "<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" "
      "\"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\">\n"
      "<svg version=\"1.1\" width=\"";
  put_num(out, l.width);
  out += "\" height=\"";
  put_num(out, l.height);
  out += "\" onload=\"init(evt)\" viewBox=\"0 0 ";
  put_num(out, l.width);
  out += ' ';
  put_num(out, l.height);
  out +=
      "\" xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\">\n"
      "<!-- Flame graph stack visualization by luaflame, after "
      "https://github.com/brendangregg/FlameGraph -->\n";
  if (!o.notes.empty()) {
    out += "<!-- NOTES: ";
    put_comment_text(out, o.notes);
    out += " -->\n";
  }
  out +=
      "<defs><linearGradient id=\"background\" y1=\"0\" y2=\"1\" x1=\"0\" x2=\"0\">"
      "<stop stop-color=\"";
  out += bg1;
  out += "\" offset=\"5%\"/><stop stop-color=\"";
  out += bg2;
  out +=
      "\" offset=\"95%\"/></linearGradient></defs>\n<style type=\"text/css\">\ntext{font-family:";
  out += safe_font(o.font_type);
  out += ";font-size:";
  put_num(out, o.font_size);
  out +=
      "px;fill:#000}\n"
      "#search,#ignorecase{opacity:0.1;cursor:pointer}\n"
      "#search:hover,#search.show,#ignorecase:hover,#ignorecase.show{opacity:1}\n"
      "#subtitle{text-anchor:middle;fill:#a0a0a0}\n#title{text-anchor:middle;font-size:";
  put_num(out, o.font_size + 5);
  out += "px}\n#unzoom{cursor:pointer}\n#frames rect{height:";
  put_num(out, l.frame_h - kFramePad);
  out +=
      "px;rx:2px;ry:2px}\n"
      "#frames>*:hover{stroke:black;stroke-width:0.5;cursor:pointer}\n"
      ".hide{display:none}\n.parent{opacity:0.5}\n</style>\n"
      "<script type=\"text/ecmascript\"><![CDATA[\n\"use strict\";\nvar FS=";
  put_num(out, o.font_size);
  out += ",FW=";
  put_num(out, o.font_width > 0 ? o.font_width : 0.59);
  out += ",XP=";
  put_num(out, kXPad);
  out += ",TY=";
  put_num(out, 3 + (l.frame_h - kFramePad) / 2);
  out += ",FH=";
  put_num(out, l.frame_h - kFramePad);
  out += o.inverted ? ",INV=true;" : ",INV=false;";
  out += kSvgScript;
  out += "]]></script>\n<rect x=\"0\" y=\"0\" width=\"";
  put_num(out, l.width);
  out += "\" height=\"";
  put_num(out, l.height);
  out += "\" fill=\"url(#background)\"/>\n";
  std::string title = o.title;
  if (title == "Flame Graph" && o.inverted) title = "Icicle Graph";
  put_text_el(out, "title", std::floor(l.width / 2), o.font_size * 2, title);
  if (!o.subtitle.empty())
    put_text_el(out, "subtitle", std::floor(l.width / 2), o.font_size * 4, o.subtitle);
  put_text_el(out, "details", kXPad, l.height - l.ypad2 / 2, " ");
  put_text_el(out, "unzoom", kXPad, o.font_size * 2, "Reset Zoom", " class=\"hide\"");
  put_text_el(out, "search", l.width - kXPad - 100, o.font_size * 2, "Search");
  put_text_el(out, "ignorecase", l.width - kXPad - 16, o.font_size * 2, "ic");
  put_text_el(out, "matched", l.width - kXPad - 100, l.height - l.ypad2 / 2, " ",
              " class=\"hide\"");
}

// A frame to draw: its node, depth, and where it starts (in count units).
struct Item {
  uint32_t node;
  uint32_t depth;
  double start;
};

struct Renderer {
  const Tree& tree;
  const SvgOptions& o;
  Writer& w;
  int col = 0;
  double timemax = 0, wpt = 0, min_time = 0, max_delta = 0, char_w = 0;
  Layout l{};
  std::vector<std::string> names;  // sanitized+escaped title name per frame ("" = not yet)
  std::vector<std::string> plain;  // sanitized name per frame (for labels)
  std::vector<bool> named;         // names[f] and plain[f] are filled in
  std::vector<uint32_t> colors;    // 0xRRGGBB + 1 per frame (0 = not yet)
  std::string count_name;          // " COUNTNAME", escaped
  Palette pal;
  bool exact_attr = false;  // titles show other than the count: give the script the exact value
  std::size_t frames_written = 0;

  Renderer(const Tree& t, const SvgOptions& opts, Writer& writer)
      : tree(t), o(opts), w(writer), pal(palette_from_name(opts.colors)) {}

  bool drawn(uint32_t n) const {
    double v = tree.total_at(n, col);
    return v > 0 && v >= min_time;
  }

  // The deepest frame that will be drawn. Totals only shrink going up the
  // stack, so every ancestor of a drawn frame is drawn too: a linear pass
  // over the nodes (parents come first) finds it without a traversal.
  uint32_t depth_max() const {
    std::vector<uint16_t> depth(tree.size(), 0);
    uint32_t best = 0;
    for (uint32_t i = 1; i < tree.size(); ++i) {
      uint32_t d = depth[tree.parent_of(i)] + 1u;
      depth[i] = uint16_t(std::min<uint32_t>(d, 65535));
      if (drawn(i)) best = std::max(best, d);
    }
    return best;
  }

  // Depth-first pre-order with flamegraph.pl's pruning: a frame narrower
  // than --minwidth is dropped with everything above it, but still takes its
  // place on the x axis. Children go in flamegraph.pl's order (see
  // Tree::frame_ranks) unless this is a flame chart.
  void emit_all() {
    const std::vector<uint32_t>& rank = tree.frame_ranks();
    std::vector<Item> stack{{Tree::kRoot, 0, 0}};
    std::vector<uint32_t> kids;
    bool sort = !(tree.flamechart() || o.flamechart);
    while (!stack.empty()) {
      Item it = stack.back();
      stack.pop_back();
      put_frame(it);
      w.maybe_flush();
      kids.clear();
      bool sorted = true;
      for (uint32_t c = tree.first_child(it.node); c != Tree::kNone; c = tree.next_sibling(c)) {
        if (sort && !kids.empty() && rank[tree.frame_of(kids.back())] > rank[tree.frame_of(c)])
          sorted = false;
        kids.push_back(c);
      }
      if (!sorted)
        std::stable_sort(kids.begin(), kids.end(), [&](uint32_t a, uint32_t b) {
          return rank[tree.frame_of(a)] < rank[tree.frame_of(b)];
        });
      // flamegraph.pl sorts the lines, and "A;B N" (B's self) sorts before
      // "A;B;C N": a frame's self time comes first, its children after.
      std::size_t mark = stack.size();
      double x = it.start + std::max(0.0, tree.self_at(it.node, col));
      for (uint32_t c : kids) {
        if (drawn(c)) stack.push_back({c, it.depth + 1, x});
        x += tree.total_at(c, col);
      }
      std::reverse(stack.begin() + std::ptrdiff_t(mark), stack.end());
    }
  }

  const std::string& name(uint32_t f) {
    if (names.size() <= f) {
      names.resize(tree.frame_count());
      plain.resize(tree.frame_count());
      named.resize(tree.frame_count(), false);
    }
    if (!named[f]) {
      // Titles and labels drop stackcollapse-perf.pl's _[k] _[j] _[i] _[w]
      // (the colour keeps them); an empty frame keeps its empty title.
      sanitize(strip_annotation(tree.frame_name(f)), plain[f], o.max_name_bytes);
      escape(plain[f], names[f]);
      named[f] = true;
    }
    return names[f];
  }

  uint32_t color(uint32_t f) {
    if (colors.size() <= f) colors.resize(tree.frame_count(), 0);
    if (!colors[f]) colors[f] = frame_color(pal, tree.frame_name(f), o.hash) + 1;
    return colors[f] - 1;
  }

  double delta(uint32_t n) const { return tree.self_at(n, 1) - tree.self_at(n, 0); }

  char* put_value(char* p, double v) {
    if (o.unit.empty()) return w_str(w_count(p, v), count_name);
    std::string tmp;
    put_unit(tmp, v, o.unit);
    return w_str(p, tmp);
  }

  // "NAME (COUNT COUNTNAME, PCT%[; DELTA%])[, self N]"
  char* put_title(char* p, uint32_t n, double total, const std::string& nm) {
    p = w_lit(p, "<title>");
    p = w_str(p, nm);
    p = w_lit(p, " (");
    p = put_value(p, total * o.factor);
    if (n == Tree::kRoot) {
      p = w_lit(p, ", 100%");
    } else {
      // The share of the exact value. (flamegraph.pl takes the share of the
      // rounded count, the same for whole counts but past 100% for some
      // fractional ones.)
      p = w_lit(p, ", ");
      p = w_fixed2(p, timemax > 0 ? 100 * total / timemax : 0);
      *p++ = '%';
      if (tree.differential()) {
        double d = o.negate ? -delta(n) : delta(n);
        p = w_lit(p, "; ");
        if (d > 0) *p++ = '+';
        // A shrink too small to show prints "-0.00", as Perl's sprintf does.
        double pct = timemax > 0 ? 100 * d / (timemax * o.factor) : 0;
        if (d < 0 && round_printf(pct, 100) == 0) p = w_lit(p, "-");
        p = w_fixed2(p, pct);
        *p++ = '%';
      }
    }
    *p++ = ')';
    double self = tree.self_at(n, col);
    if (o.show_self && self > 0 && self < total && n != Tree::kRoot) {
      p = w_lit(p, ", self ");
      if (o.unit.empty())
        p = w_count(p, self * o.factor);
      else
        p = put_value(p, self * o.factor);
    }
    return w_lit(p, "</title>");
  }

  // The first `chars` characters of the name; ".." replaces the last two
  // when it is cut (flamegraph.pl's label).
  char* put_label(char* p, const std::string& text, std::size_t chars) {
    std::size_t count = 0, i = 0, cut = std::string::npos, cut2 = 0;
    while (i < text.size()) {
      if (count == chars - 2) cut2 = i;
      if (count == chars) {
        cut = i;
        break;
      }
      unsigned char c = static_cast<unsigned char>(text[i]);
      i += c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
      ++count;
    }
    std::string esc;
    if (cut == std::string::npos) {
      escape(text, esc);
      return w_str(p, esc);
    }
    escape(std::string_view(text).substr(0, cut2), esc);
    return w_lit(w_str(p, esc), "..");
  }

  void put_frame(const Item& it) {
    ++frames_written;
    uint32_t n = it.node;
    uint32_t f = n == Tree::kRoot ? 0 : tree.frame_of(n);
    static const std::string kAll = "all";
    const std::string& nm = n == Tree::kRoot ? kAll : name(f);
    // The root spans --total when that is larger, and says so (flamegraph.pl).
    double total = n == Tree::kRoot ? timemax : tree.total_at(n, col);
    double x1 = kXPad + it.start * wpt;
    double x2 = n == Tree::kRoot ? l.width - kXPad : kXPad + (it.start + total) * wpt;
    double y1 = o.inverted ? l.ypad1 + l.ypad3 + it.depth * l.frame_h
                           : l.height - l.ypad2 - (it.depth + 1) * l.frame_h + kFramePad;
    // Room: the name twice (title, label) plus the fixed parts and numbers.
    char* p = w.room(2 * nm.size() + count_name.size() * 2 + 400);
    p = w_lit(p, "<g");
    if (exact_attr || total != std::floor(total)) {  // titles show whole counts
      std::string v;
      append_count(v, total);
      p = w_str(w_str(w_lit(p, " v=\""), v), "\"");
    }
    *p++ = '>';
    p = put_title(p, n, total, nm);
    p = w_lit(p, "<rect x=\"");
    p = w_fixed1(p, x1);
    p = w_lit(p, "\" y=\"");
    p = w_fixed1(p, y1);
    p = w_lit(p, "\" width=\"");
    // flamegraph.pl: width = rounded x2 - rounded x1, so frames tile without gaps
    p = w_fixed1(p, double(round_printf(x2, 10) - round_printf(x1, 10)) / 10);
    p = w_lit(p, "\" fill=\"");
    uint32_t rgb = tree.differential() ? diff_color(delta(n), max_delta, o.negate) : color(f);
    p = w_rgb(p, rgb);
    p = w_lit(p, "\"/>");
    double chars = std::floor((x2 - x1) / char_w);
    if (chars >= 3) {
      p = w_lit(p, "<text x=\"");
      p = w_fixed1(p, x1 + 3);
      p = w_lit(p, "\" y=\"");
      p = w_fixed1(p, y1 + 3 + (l.frame_h - kFramePad) / 2);
      p = w_lit(p, "\">");
      p = n == Tree::kRoot ? w_lit(p, "all") : put_label(p, plain[f], std::size_t(chars));
      p = w_lit(p, "</text></g>\n");
    } else {
      p = w_lit(p, "<text/></g>\n");  // too narrow for a label; the script fills it in when zoomed
    }
    w.done(p);
  }

  std::size_t run() {
    col = tree.differential() && o.differential_as_after ? 1 : 0;
    double time = tree.total(col);
    timemax = o.total > time ? o.total : time;
    double width = o.width > 0 ? o.width : 1200;
    wpt = timemax > 0 ? (width - 2 * kXPad) / timemax : 0;
    min_time =
        o.min_width_percent ? timemax * o.min_width / 100 : (wpt > 0 ? o.min_width / wpt : 0);
    char_w = o.font_size * (o.font_width > 0 ? o.font_width : 0.59);
    exact_attr = !o.unit.empty() || o.factor != 1;
    count_name = " ";
    safe_text(o.count_name.empty() ? "samples" : o.count_name, count_name, 256);
    // flamegraph.pl's $maxdelta starts at 1: changes below one count stay pale.
    if (tree.differential()) {
      max_delta = 1;
      for (uint32_t i = 1; i < tree.size(); ++i)
        max_delta = std::max(max_delta, std::fabs(delta(i)));
    }
    l = layout(o, depth_max());
    const char* bg1 = "#eeeeee";
    const char* bg2 = "#eeeeb0";
    if (tree.differential())
      bg2 = "#eeeeee";
    else if (pal == Palette::mem || pal == Palette::io)
      bg2 = "#e0e0ff";
    std::string head;
    put_header(head, o, l, bg1, bg2);
    head += "<g id=\"frames\" data-nametype=\"";
    safe_text(o.name_type, head, 1024);
    head += "\">\n";
    w.put(head);
    emit_all();
    w.put("</g>\n</svg>\n");
    w.flush();
    return frames_written;
  }
};

}  // namespace

bool known_palette(const std::string& name) {
  return palette_known(name);
}

std::size_t render_svg(const Tree& tree, const SvgOptions& opts, std::string& out) {
  Writer w(&out, nullptr);
  Renderer r(tree, opts, w);
  return r.run();
}

std::size_t render_svg(const Tree& tree, const SvgOptions& opts,
                       const std::function<void(std::string_view)>& sink) {
  Writer w(nullptr, &sink);
  Renderer r(tree, opts, w);
  return r.run();
}

void render_empty_svg(const SvgOptions& opts, const std::string& message, std::string& out) {
  // flamegraph.pl's error image: five font sizes high, the message centred.
  double width = opts.width > 0 ? opts.width : 1200;
  double height = opts.font_size * 5;
  out +=
      "<?xml version=\"1.0\" standalone=\"no\"?>\n"
      "<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" "
      "\"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\">\n"
      "<svg version=\"1.1\" width=\"";
  put_num(out, width);
  out += "\" height=\"";
  put_num(out, height);
  out += "\" viewBox=\"0 0 ";
  put_num(out, width);
  out += ' ';
  put_num(out, height);
  out += "\" xmlns=\"http://www.w3.org/2000/svg\">\n<text x=\"";
  put_num(out, std::floor(width / 2));
  out += "\" y=\"";
  put_num(out, opts.font_size * 2);
  out += "\" style=\"text-anchor:middle;font-family:";
  out += safe_font(opts.font_type);
  out += ";font-size:";
  put_num(out, opts.font_size);
  out += "px\">";
  safe_text(message.empty() ? std::string("ERROR: No valid input provided.") : message, out);
  out += "</text>\n</svg>\n";
}

}  // namespace lf
