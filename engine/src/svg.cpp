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

#include "place.hpp"
#include "svg_colors.hpp"
#include "svg_script.hpp"
#include "svg_text.hpp"

namespace lf {

using namespace detail;

namespace {

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

struct Renderer {
  const Tree& tree;
  const SvgOptions& o;
  Writer& w;
  Placer place;
  double char_w = 0;
  Layout l{};
  std::vector<std::string> names;  // sanitized+escaped title name per frame ("" = not yet)
  std::vector<std::string> plain;  // sanitized name per frame (for labels)
  std::vector<bool> named;         // names[f] and plain[f] are filled in
  std::string count_name;          // " COUNTNAME", escaped
  bool exact_attr = false;  // titles show other than the count: give the script the exact value
  std::size_t frames_written = 0;

  Renderer(const Tree& t, const SvgOptions& opts, Writer& writer)
      : tree(t), o(opts), w(writer), place(t, opts) {}

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
      double timemax = place.timemax();
      p = w_fixed2(p, timemax > 0 ? 100 * total / timemax : 0);
      *p++ = '%';
      if (tree.differential()) {
        double d = o.negate ? -place.delta(n) : place.delta(n);
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
    double self = tree.self_at(n, place.col());
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

  void put_frame(const Placed& it) {
    ++frames_written;
    uint32_t n = it.node;
    uint32_t f = n == Tree::kRoot ? 0 : tree.frame_of(n);
    static const std::string kAll = "all";
    const std::string& nm = n == Tree::kRoot ? kAll : name(f);
    // The root spans --total when that is larger, and says so (flamegraph.pl).
    double total = it.total;
    double x1 = it.x1;
    double x2 = it.x2;
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
    p = w_rgb(p, place.rgb(n));
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
    char_w = o.font_size * (o.font_width > 0 ? o.font_width : 0.59);
    exact_attr = !o.unit.empty() || o.factor != 1;
    count_name = " ";
    safe_text(o.count_name.empty() ? "samples" : o.count_name, count_name, 256);
    l = layout(o, place.depth_max());
    const char* bg1 = "#eeeeee";
    const char* bg2 = "#eeeeb0";
    if (tree.differential())
      bg2 = "#eeeeee";
    else if (place.palette() == Palette::mem || place.palette() == Palette::io)
      bg2 = "#e0e0ff";
    std::string head;
    put_header(head, o, l, bg1, bg2);
    head += "<g id=\"frames\" data-nametype=\"";
    safe_text(o.name_type, head, 1024);
    head += "\">\n";
    w.put(head);
    place.walk([&](const Placed& it) {
      put_frame(it);
      w.maybe_flush();
    });
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
