// engine internals: frame colours.
//
// flamegraph.pl's palettes with its formulas. flamegraph.pl draws random
// colours unless --hash; we never do (output must be byte-identical for the
// same input), so without --hash the three "random" values come from a hash
// of the name: still stable per name, across graphs. --hash uses
// flamegraph.pl's namehash, which gives similar names similar colours.
//
// The "lua" palette (the default) tells three kinds of frames apart:
//   Lua functions "NAME SOURCE:LINE", main chunks, anything else: warm (red..yellow)
//   C functions "[C] NAME":                                      aqua..blue
//   interpreter frames in brackets "[GC]", "[alloc] table", ...: purple/grey
//   perf's annotated frames: _[k] orange, _[j] green, _[i] _[w] aqua
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "luaflame/hash.hpp"

namespace lf {
namespace detail {

enum class Palette {
  lua,
  hot,
  mem,
  io,
  red,
  green,
  blue,
  aqua,
  yellow,
  purple,
  orange,
  java,
  js,
  perl,
  wakeup,
  chain  // flamegraph.pl's multi palettes: a colour palette chosen per frame
};

inline bool palette_lookup(const std::string& name, Palette& p) {
  static const struct {
    const char* n;
    Palette p;
  } kAll[] = {
      {"lua", Palette::lua},       {"hot", Palette::hot},       {"mem", Palette::mem},
      {"io", Palette::io},         {"red", Palette::red},       {"green", Palette::green},
      {"blue", Palette::blue},     {"aqua", Palette::aqua},     {"yellow", Palette::yellow},
      {"purple", Palette::purple}, {"orange", Palette::orange}, {"java", Palette::java},
      {"js", Palette::js},         {"perl", Palette::perl},     {"wakeup", Palette::wakeup},
      {"chain", Palette::chain},
  };
  for (const auto& e : kAll)
    if (name == e.n) {
      p = e.p;
      return true;
    }
  return false;
}

inline bool palette_known(const std::string& name) {
  Palette p;
  return palette_lookup(name, p);
}

inline Palette palette_from_name(const std::string& name) {
  Palette p = Palette::lua;
  palette_lookup(name, p);
  return p;
}

// flamegraph.pl's namehash(): weights early characters over later ones.
inline double namehash(std::string_view name) {
  std::size_t tick = name.find('`');
  if (tick != std::string_view::npos && tick >= 1) name = name.substr(tick + 1);
  double vector = 0, weight = 1, max = 1;
  int mod = 10;
  for (unsigned char c : name) {
    int i = c % mod;
    vector += (double(i) / (mod++ - 1)) * weight;
    max += weight;
    weight *= 0.70;
    if (mod > 12) break;
  }
  return 1 - vector / max;
}

// stackcollapse-perf.pl's annotations: _[k] kernel, _[j] JIT, _[i] inlined,
// _[w] waker (flamegraph.pl's chain graphs). 0 when `name` has none.
inline char annotation(std::string_view name) {
  std::size_t n = name.size();
  if (n < 4 || name[n - 4] != '_' || name[n - 3] != '[' || name[n - 1] != ']') return 0;
  char c = name[n - 2];
  return c == 'k' || c == 'j' || c == 'i' || c == 'w' ? c : 0;
}

// The name as titles and labels show it: without its annotation (flamegraph.pl
// strips /_\[[kwij]\]$/ from both).
inline std::string_view strip_annotation(std::string_view name) {
  return annotation(name) ? name.substr(0, name.size() - 4) : name;
}

inline bool has(std::string_view s, std::string_view what) {
  return s.find(what) != s.npos;
}

// flamegraph.pl's java palette: /^L?(java|javax|jdk|net|org|com|io|sun)\//.
inline bool java_package(std::string_view name) {
  if (!name.empty() && name[0] == 'L') name.remove_prefix(1);
  for (const char* p : {"java/", "javax/", "jdk/", "net/", "org/", "com/", "io/", "sun/"})
    if (name.substr(0, std::char_traits<char>::length(p)) == p) return true;
  return false;
}

// flamegraph.pl's multi palettes pick a colour palette per frame from its
// annotation or, lacking one, from the look of the name (same tests, same order).
inline Palette pick_palette(Palette p, std::string_view name) {
  char a = annotation(name);
  switch (p) {
    case Palette::java:
      if (a == 'j') return Palette::green;
      if (a == 'i') return Palette::aqua;
      if (java_package(name) || has(name, ":::")) return Palette::green;
      if (has(name, "::")) return Palette::yellow;
      if (a == 'k') return Palette::orange;
      return Palette::red;
    case Palette::perl:
      if (has(name, "::")) return Palette::yellow;
      if (has(name, "Perl") || has(name, ".pl")) return Palette::green;
      if (a == 'k') return Palette::orange;
      return Palette::red;
    case Palette::js: {
      if (a == 'j') return has(name, "/") ? Palette::green : Palette::aqua;
      if (has(name, "::")) return Palette::yellow;
      std::size_t slash = name.find('/');
      if (slash != name.npos && name.find(".js", slash + 1) != name.npos) return Palette::green;
      if (has(name, ":")) return Palette::aqua;
      if (name == " ") return Palette::green;  // missing symbol
      if (has(name, "_[k]")) return Palette::orange;
      return Palette::red;
    }
    case Palette::wakeup:
      return Palette::aqua;
    case Palette::chain:
      return has(name, "_[w]") ? Palette::aqua : Palette::blue;
    default:
      return p;
  }
}

inline uint32_t rgb(int r, int g, int b) {
  return uint32_t(r) << 16 | uint32_t(g) << 8 | uint32_t(b);
}

inline uint32_t frame_color(Palette p, std::string_view name, bool hash) {
  double v1, v2, v3;
  if (hash) {
    std::string rev(name.rbegin(), name.rend());
    v1 = namehash(name);
    v2 = v3 = namehash(rev);
  } else {
    uint64_t h = lf::fnv1a(name);  // fixed: colours never change between builds
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    v1 = double(h & 0xFFFF) / 65536;
    v2 = double((h >> 16) & 0xFFFF) / 65536;
    v3 = double((h >> 32) & 0xFFFF) / 65536;
  }
  p = pick_palette(p, name);
  if (p == Palette::lua) {
    // Annotated frames (perf captures) keep their kind's colour, as in java/js.
    switch (annotation(name)) {
      case 'k':
        p = Palette::orange;
        break;
      case 'j':
        p = Palette::green;
        break;
      case 'i':
      case 'w':
        p = Palette::aqua;
        break;
      default:
        break;
    }
  }
  switch (p) {
    case Palette::hot:
      return rgb(205 + int(50 * v3), int(230 * v1), int(55 * v2));
    case Palette::mem:
      return rgb(0, 190 + int(50 * v2), int(210 * v1));
    case Palette::io: {
      int r = 80 + int(60 * v1);
      return rgb(r, r, 190 + int(55 * v2));
    }
    case Palette::red: {
      int x = 50 + int(80 * v1);
      return rgb(200 + int(55 * v1), x, x);
    }
    case Palette::green: {
      int x = 50 + int(60 * v1);
      return rgb(x, 200 + int(55 * v1), x);
    }
    case Palette::blue: {
      int x = 80 + int(60 * v1);
      return rgb(x, x, 205 + int(50 * v1));
    }
    case Palette::yellow: {
      int x = 175 + int(55 * v1);
      return rgb(x, x, 50 + int(20 * v1));
    }
    case Palette::purple: {
      int x = 190 + int(65 * v1);
      return rgb(x, 80 + int(60 * v1), x);
    }
    case Palette::aqua:
      return rgb(50 + int(60 * v1), 165 + int(55 * v1), 165 + int(55 * v1));
    case Palette::orange:
      return rgb(190 + int(65 * v1), 90 + int(65 * v1), 0);
    default:
      break;  // lua (the multi palettes were resolved above)
  }
  if (name.size() >= 4 && name.compare(0, 4, "[C] ") == 0)  // C function: aqua..blue
    return rgb(60 + int(50 * v1), 150 + int(60 * v2), 200 + int(50 * v3));
  if (!name.empty() && name[0] == '[')  // interpreter-internal: muted purple
    return rgb(170 + int(40 * v1), 140 + int(40 * v2), 200 + int(40 * v1));
  // Lua function: hot, kept warm (red..orange..yellow)
  return rgb(215 + int(40 * v3), 80 + int(150 * v1), int(60 * v2));
}

// flamegraph.pl's color_scale(): white, red as the frame grew, blue as it
// shrank, in proportion to the largest change.
inline uint32_t diff_color(double delta, double max, bool negate) {
  if (negate) delta = -delta;
  int r = 255, g = 255, b = 255;
  if (max > 0 && delta > 0)
    g = b = int(210 * (max - delta) / max);
  else if (max > 0 && delta < 0)
    r = g = int(210 * (max + delta) / max);
  return rgb(r, g, b);
}

// "#rgb" (4 bits a channel): a third of "rgb(r,g,b)" in every frame.
inline char* w_rgb(char* p, uint32_t c) {
  static const char kHex[] = "0123456789abcdef";
  *p++ = '#';
  for (int shift = 16; shift >= 0; shift -= 8)
    *p++ = kHex[(((c >> shift) & 0xFF) * 15 + 127) / 255];
  return p;
}

}  // namespace detail
}  // namespace lf
