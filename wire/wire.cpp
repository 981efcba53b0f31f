// luaflame wire format: encoder and decoder. The grammar is in wire.hpp.
#include "luaflame/wire.hpp"

#include <charconv>
#include <cstdint>

namespace lfw {

bool is_metric(std::string_view name) {
  for (std::string_view m : kMetrics)
    if (m == name) return true;
  return false;
}

static void put_uint(std::string& out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void encode(const Chunk& c, std::string& out) {
  out += kMagic;
  out += ' ';
  put_uint(out, kVersion);
  out += "\nseq ";
  put_uint(out, c.seq);
  out += '\n';
  if (c.from_ns) {
    out += "from ";
    put_uint(out, c.from_ns);
    out += '\n';
  }
  if (c.until_ns) {
    out += "until ";
    put_uint(out, c.until_ns);
    out += '\n';
  }
  out += "metrics";
  for (const auto& m : c.metrics) {
    out += ' ';
    out += m;
  }
  out += '\n';
  for (const auto& f : c.frames) {
    out += "f ";
    out += f;
    out += '\n';
  }
  for (const Node& n : c.nodes) {
    out += "n ";
    if (n.parent < 0)
      out += '-';
    else
      put_uint(out, static_cast<uint64_t>(n.parent));
    out += ' ';
    put_uint(out, n.frame);
    for (uint64_t v : n.values) {
      out += ' ';
      put_uint(out, v);
    }
    out += '\n';
  }
  out += "end ";
  put_uint(out, c.nodes.size());
  out += '\n';
}

namespace {

// A cursor over the chunk's lines, keeping the line number for messages.
struct Reader {
  std::string_view text;
  std::size_t pos = 0;
  std::size_t lineno = 0;
  bool next(std::string_view& line) {
    if (pos >= text.size()) return false;
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++lineno;
    return true;
  }
};

// Every number on the wire fits a signed 64-bit integer: the server stores
// seq, times and values as int64, and a uint64 above 2^63-1 would wrap
// negative there (a resent chunk with seq 2^63 counted twice).
constexpr uint64_t kMaxWireInt = static_cast<uint64_t>(INT64_MAX);

bool parse_uint(std::string_view s, uint64_t& v) {
  if (s.empty()) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && v <= kMaxWireInt;
}

// Splits off the first space-separated word of `s`.
std::string_view word(std::string_view& s) {
  std::size_t sp = s.find(' ');
  std::string_view w = s.substr(0, sp);
  s = sp == std::string_view::npos ? std::string_view() : s.substr(sp + 1);
  return w;
}

bool fail(std::string& error, std::size_t line, const std::string& msg) {
  error = "line " + std::to_string(line) + ": " + msg;
  return false;
}

bool check_magic(std::string_view line, std::string& error) {
  std::string_view rest = line;
  if (word(rest) != kMagic) return fail(error, 1, "not a luaflame-wire chunk");
  if (rest != std::to_string(kVersion))
    return fail(error, 1,
                "luaflame-wire " + std::string(rest) +
                    " is not supported; this reader reads version " + std::to_string(kVersion));
  return true;
}

bool decode_node(std::string_view rest, Chunk& c, std::size_t ln, std::string& error) {
  Node n;
  std::string_view p = word(rest), f = word(rest);
  uint64_t v = 0;
  if (p == "-")
    n.parent = -1;
  else if (parse_uint(p, v) && v < c.nodes.size())
    n.parent = static_cast<int64_t>(v);
  else
    return fail(error, ln, "node parent '" + std::string(p) + "' is not an earlier node");
  if (!parse_uint(f, v) || v >= c.frames.size())
    return fail(error, ln, "node frame '" + std::string(f) + "' is not a defined frame");
  n.frame = static_cast<uint32_t>(v);
  while (!rest.empty()) {
    if (!parse_uint(word(rest), v))
      return fail(error, ln, "bad node value (a whole number up to 2^63-1)");
    n.values.push_back(v);
  }
  if (n.values.size() != c.metrics.size())
    return fail(error, ln,
                "node has " + std::to_string(n.values.size()) + " values for " +
                    std::to_string(c.metrics.size()) + " metrics");
  c.nodes.push_back(std::move(n));
  return true;
}

bool decode_frame(std::string_view rest, Chunk& c, std::size_t ln, std::string& error) {
  if (rest.empty()) return fail(error, ln, "empty frame");
  for (char ch : rest)
    if (ch == ';' || ch == '\r') return fail(error, ln, "frame holds ';' or CR");
  c.frames.emplace_back(rest);
  return true;
}

bool decode_metrics(std::string_view rest, Chunk& c, std::size_t ln, std::string& error) {
  c.metrics.clear();
  while (!rest.empty()) {
    std::string_view m = word(rest);
    if (!is_metric(m)) return fail(error, ln, "unknown metric '" + std::string(m) + "'");
    // A metric listed twice would count its values twice.
    for (const std::string& seen : c.metrics)
      if (seen == m) return fail(error, ln, "metric '" + std::string(m) + "' listed twice");
    c.metrics.emplace_back(m);
  }
  if (c.metrics.empty()) return fail(error, ln, "no metrics");
  return true;
}

}  // namespace

bool decode(std::string_view text, Chunk& c, std::string& error) {
  c = Chunk{};
  Reader r{text};
  std::string_view line;
  if (!r.next(line)) return fail(error, 1, "empty chunk");
  if (!check_magic(line, error)) return false;
  bool have_seq = false, have_metrics = false;
  while (r.next(line)) {
    std::string_view rest = line;
    std::string_view key = word(rest);
    uint64_t v = 0;
    if (key == "f") {
      if (!decode_frame(rest, c, r.lineno, error)) return false;
    } else if (key == "n") {
      if (!have_metrics) return fail(error, r.lineno, "node before metrics");
      if (!decode_node(rest, c, r.lineno, error)) return false;
    } else if (key == "seq" || key == "from" || key == "until" || key == "end") {
      if (!parse_uint(rest, v))
        return fail(error, r.lineno,
                    "bad number after " + std::string(key) + " (a whole number up to 2^63-1)");
      if (key == "seq") {
        c.seq = v;
        have_seq = true;
      } else if (key == "from")
        c.from_ns = v;
      else if (key == "until")
        c.until_ns = v;
      else {
        if (v != c.nodes.size()) return fail(error, r.lineno, "end count does not match nodes");
        if (!have_seq) return fail(error, r.lineno, "no seq header");
        // Required by the grammar; a chunk without it decoded, and did not
        // encode back (found by fuzz/fuzz_wire).
        if (!have_metrics) return fail(error, r.lineno, "no metrics header");
        if (r.pos < text.size()) return fail(error, r.lineno + 1, "data after end");
        return true;
      }
    } else if (key == "metrics") {
      if (have_metrics) return fail(error, r.lineno, "metrics listed twice");
      if (!decode_metrics(rest, c, r.lineno, error)) return false;
      have_metrics = true;
    } else {
      return fail(error, r.lineno, "unknown record '" + std::string(key) + "'");
    }
  }
  return fail(error, r.lineno, "truncated chunk: no end line");
}

namespace {

bool control(unsigned char c) {
  return c < 0x20 || c == 0x7f;
}

bool key_byte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.' || c == '/';
}

}  // namespace

std::string name_error(std::string_view name) {
  if (name.empty()) return "a run needs a name";
  if (name.size() > kMaxNameBytes)
    return "a run name is at most 200 bytes (got " + std::to_string(name.size()) + ")";
  for (unsigned char c : name)
    if (control(c)) return "a run name holds no control characters";
  return {};
}

std::string tag_error(std::string_view key, std::string_view value) {
  const std::string k(key.substr(0, kMaxTagKeyBytes + 1));
  if (key.empty() || key.size() > kMaxTagKeyBytes) return "a tag key is 1 to 64 bytes: '" + k + "'";
  for (unsigned char c : key)
    if (!key_byte(c)) return "a tag key holds letters, digits and _ - . / only: '" + k + "'";
  if (value.size() > kMaxTagValueBytes) return "a tag value is at most 256 bytes";
  for (unsigned char c : value)
    if (control(c)) return "a tag value holds no control characters";
  return {};
}

std::string fit_text(std::string_view text, std::size_t max) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (!control(c)) {
      out += static_cast<char>(c);
      continue;
    }
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  if (out.size() <= max) return out;
  std::size_t cut = max;  // back to the first byte of a character (not 10xxxxxx)
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
  out.resize(cut);
  return out;
}

std::string fit_tag_key(std::string_view key) {
  std::string out(key.substr(0, kMaxTagKeyBytes));
  for (char& c : out)
    if (!key_byte(static_cast<unsigned char>(c))) c = '_';
  return out.empty() ? "_" : out;
}

}  // namespace lfw
