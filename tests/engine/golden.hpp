// Shared by the engine tests: tests as data (tests/data/<stage>/<case>.*) and
// a small XML well-formedness check for when no XML library is at hand, and
// the tree helpers every stage test uses.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../support/paths.hpp"
#include "luaflame/svg.hpp"
#include "luaflame/tree.hpp"

namespace golden {

namespace fs = std::filesystem;

inline fs::path data_dir(const char* stage) {
  return fs::path(lft::test_data_dir()) / stage;
}

inline std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline bool regenerate() {
  const char* v = std::getenv("LUAFLAME_REGENERATE");
  return v && *v && std::string(v) != "0";
}

// Compares `actual` with the file `expected`, byte for byte; rewrites the
// file instead when LUAFLAME_REGENERATE=1.
inline void check(const fs::path& expected, const std::string& actual) {
  CAPTURE(expected.string());
  if (regenerate()) {
    std::ofstream(expected, std::ios::binary) << actual;
    return;
  }
  REQUIRE_MESSAGE(fs::exists(expected), "missing expected output; run with LUAFLAME_REGENERATE=1");
  std::string want = read(expected);
  if (want != actual) {
    std::size_t i = 0;
    while (i < want.size() && i < actual.size() && want[i] == actual[i]) ++i;
    CAPTURE(i);
    std::string want_near = want.substr(i > 40 ? i - 40 : 0, 120);
    std::string got_near = actual.substr(i > 40 ? i - 40 : 0, 120);
    CAPTURE(want_near);
    CAPTURE(got_near);
    CHECK(want == actual);
  }
}

// Every SVG embeds the same script (engine/src/svg_script.hpp) after a line of
// per-graph parameters ("var FS=...;"). Golden SVGs store the parameters but
// not the script: it is stored once, as tests/data/svg/script.js, and checked
// once (test_svg.cpp). cli_test.sh's strip_script does the same in awk.
constexpr const char* kScriptMark = "/* the script: tests/data/svg/script.js */\n";

// `svg` with the script's body replaced by kScriptMark; the body goes to
// `script` when given. An SVG without a script comes back unchanged.
inline std::string strip_script(const std::string& svg, std::string* script = nullptr) {
  const std::size_t open = svg.find("<script type=\"text/ecmascript\"><![CDATA[\n");
  if (open == std::string::npos) return svg;
  const std::size_t params = svg.find("\nvar FS=", open);
  const std::size_t eol = params == std::string::npos ? params : svg.find('\n', params + 1);
  const std::size_t close = eol == std::string::npos ? eol : svg.find("\n]]></script>", eol - 1);
  if (close == std::string::npos) return svg;
  if (script) *script = svg.substr(eol + 1, close + 1 - (eol + 1));
  return svg.substr(0, eol + 1) + kScriptMark + svg.substr(close + 1);
}

// check() for an SVG: compared (and regenerated) without its script.
inline void check_svg(const fs::path& expected, const std::string& svg) {
  const std::string stripped = strip_script(svg);
  if (svg.find("<script") != std::string::npos)
    CHECK_MESSAGE(stripped.find(kScriptMark) != std::string::npos,
                  "the script is not where strip_script looks");
  check(expected, stripped);
}

// Input files of a stage with the given suffix, sorted (deterministic order).
inline std::vector<fs::path> cases(const char* stage, const std::string& suffix) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(data_dir(stage))) {
    std::string name = e.path().filename().string();
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Well-formedness (XML 1.0) of a document: UTF-8 with only allowed
// characters, balanced tags, quoted attributes, known entities, comments
// without "--", CDATA closed. Returns an empty string or what is wrong.
inline std::string xml_problem(const std::string& s) {
  std::vector<std::string> open;
  std::size_t i = 0, n = s.size();
  auto valid_char_at = [&](std::size_t& k) -> bool {
    unsigned char c = static_cast<unsigned char>(s[k]);
    if (c < 0x80) {
      ++k;
      return c >= 0x20 || c == 0x9 || c == 0xA || c == 0xD;
    }
    std::size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (!len || k + len > n) return false;
    uint32_t cp = c & (0xFF >> (len + 1));
    for (std::size_t j = 1; j < len; ++j) {
      unsigned char d = static_cast<unsigned char>(s[k + j]);
      if ((d & 0xC0) != 0x80) return false;
      cp = cp << 6 | (d & 0x3F);
    }
    k += len;
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF) return false;
    if (cp >= 0xD800 && cp <= 0xDFFF) return false;
    return cp != 0xFFFE && cp != 0xFFFF;
  };
  for (std::size_t k = 0; k < n;)
    if (!valid_char_at(k)) return "invalid character at byte " + std::to_string(k);
  auto entity_ok = [&](std::size_t k) {
    static const char* kKnown[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
    for (const char* e : kKnown)
      if (s.compare(k, std::strlen(e), e) == 0) return true;
    if (s.compare(k, 2, "&#") == 0) {
      std::size_t semi = s.find(';', k);
      return semi != std::string::npos && semi - k < 10;
    }
    return false;
  };
  while (i < n) {
    if (s[i] == '&') {
      if (!entity_ok(i)) return "bad entity at byte " + std::to_string(i);
      ++i;
      continue;
    }
    if (s[i] == '>' && i >= 2 && s.compare(i - 2, 3, "]]>") == 0)
      return "']]>' in text at byte " + std::to_string(i);
    if (s[i] != '<') {
      ++i;
      continue;
    }
    if (s.compare(i, 4, "<!--") == 0) {
      std::size_t end = s.find("--", i + 4);
      if (end == std::string::npos || s.compare(end, 3, "-->") != 0)
        return "bad comment at " + std::to_string(i);
      i = end + 3;
    } else if (s.compare(i, 9, "<![CDATA[") == 0) {
      std::size_t end = s.find("]]>", i + 9);
      if (end == std::string::npos) return "unclosed CDATA";
      i = end + 3;
    } else if (s.compare(i, 2, "<?") == 0 || s.compare(i, 2, "<!") == 0) {
      std::size_t end = s.find('>', i);
      if (end == std::string::npos) return "unclosed declaration";
      i = end + 1;
    } else if (s.compare(i, 2, "</") == 0) {
      std::size_t end = s.find('>', i);
      if (end == std::string::npos) return "unclosed end tag";
      std::string name = s.substr(i + 2, end - i - 2);
      if (open.empty() || open.back() != name)
        return "mismatched </" + name + "> at " + std::to_string(i);
      open.pop_back();
      i = end + 1;
    } else {
      std::size_t j = i + 1;
      while (j < n &&
             (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == ':' || s[j] == '-'))
        ++j;
      std::string name = s.substr(i + 1, j - i - 1);
      if (name.empty()) return "bad '<' at byte " + std::to_string(i);
      // attributes: name="value" with no '<' in the value
      for (;;) {
        while (j < n && std::isspace(static_cast<unsigned char>(s[j]))) ++j;
        if (j >= n) return "unclosed tag " + name;
        if (s[j] == '>') {
          open.push_back(name);
          ++j;
          break;
        }
        if (s.compare(j, 2, "/>") == 0) {
          j += 2;
          break;
        }
        std::size_t a = j;
        while (j < n && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == ':' ||
                         s[j] == '-' || s[j] == '_'))
          ++j;
        if (j == a || j + 1 >= n || s[j] != '=' || (s[j + 1] != '"' && s[j + 1] != '\''))
          return "bad attribute in <" + name + "> at byte " + std::to_string(j);
        char q = s[j + 1];
        std::size_t close = s.find(q, j + 2);
        if (close == std::string::npos) return "unclosed attribute";
        for (std::size_t k = j + 2; k < close; ++k) {
          if (s[k] == '<') return "'<' in attribute at byte " + std::to_string(k);
          if (s[k] == '&' && !entity_ok(k))
            return "bad entity in attribute at byte " + std::to_string(k);
        }
        j = close + 1;
      }
      i = j;
    }
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  return {};
}

// A finalized tree of folded text (lenient parse), as every stage test needs.
inline lf::Tree tree_of(const std::string& folded, bool flamechart = false) {
  lf::Tree t;
  t.set_flamechart(flamechart);
  lf::parse_folded(folded, lf::ParseOptions{}, [&](const lf::FoldedLine& l) { t.add(l); });
  t.finalize();
  return t;
}

// The tree written back as folded text, in flamegraph.pl's order.
inline std::string folded_of(lf::Tree& t) {
  t.sort_children();
  std::string out;
  lf::write_folded(t, out);
  return out;
}

// Options from a <case>.opts file: one "name=value" a line.
inline lf::SvgOptions options_from(const std::string& text) {
  lf::SvgOptions o;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    if (k == "title")
      o.title = v;
    else if (k == "subtitle")
      o.subtitle = v;
    else if (k == "width")
      o.width = std::stoi(v);
    else if (k == "height")
      o.frame_height = std::stoi(v);
    else if (k == "minwidth")
      o.min_width = std::stod(v);
    else if (k == "minwidth_percent")
      o.min_width_percent = v == "1";
    else if (k == "colors")
      o.colors = v;
    else if (k == "hash")
      o.hash = v == "1";
    else if (k == "inverted")
      o.inverted = v == "1";
    else if (k == "flamechart")
      o.flamechart = v == "1";
    else if (k == "countname")
      o.count_name = v;
    else if (k == "nametype")
      o.name_type = v;
    else if (k == "unit")
      o.unit = v;
    else if (k == "factor")
      o.factor = std::stod(v);
    else if (k == "total")
      o.total = std::stod(v);
    else if (k == "negate")
      o.negate = v == "1";
    else if (k == "notes")
      o.notes = v;
    else
      FAIL("unknown option in .opts: " << k);
  }
  return o;
}

}  // namespace golden
