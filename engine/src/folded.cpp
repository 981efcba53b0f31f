// engine, stage 1: parsing folded stacks the way flamegraph.pl reads them.
//
// flamegraph.pl matches each line against /^(.*)\s+?(\d+(?:\.\d*)?)$/ and,
// when the stack part matches again, takes the two columns as BEFORE AFTER.
// We do the same by scanning back from the end of the line, which is one
// pass over the bytes and no regex. Unlike flamegraph.pl we also accept CRLF
// and trailing white space after the count, and we say *why* a line is bad.
#include "luaflame/folded.hpp"
#include "luaflame/utf8.hpp"
#include "walk.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace lf {

namespace {

bool is_space(char c) {
  // Perl's \s: space, \t, \n, \v, \f, \r.
  return c == ' ' || (c >= '\t' && c <= '\r');
}

// A count as flamegraph.pl accepts it: \d+(\.\d*)?. Returns false when `tok`
// is not of that form.
bool parse_number(std::string_view tok, double& out) {
  std::size_t i = 0, n = tok.size();
  if (n == 0 || tok[0] < '0' || tok[0] > '9') return false;
  double v = 0;
  while (i < n && tok[i] >= '0' && tok[i] <= '9') v = v * 10 + (tok[i++] - '0');
  if (i < n && tok[i] == '.') {
    ++i;
    double scale = 0.1;
    // Decimal digits: accumulate exactly as an integer, divide once, so
    // "0.3" reads as the nearest double like strtod would.
    std::size_t start = i;
    while (i < n && tok[i] >= '0' && tok[i] <= '9') ++i;
    if (i - start > 0 && i - start <= 18) {
      double frac = 0, div = 1;
      for (std::size_t k = start; k < i; ++k) {
        frac = frac * 10 + (tok[k] - '0');
        div *= 10;
      }
      v += frac / div;
    } else {
      for (std::size_t k = start; k < i; ++k) {
        v += (tok[k] - '0') * scale;
        scale /= 10;
      }
    }
  }
  if (i != n) return false;
  out = v;
  return true;
}

bool ieq(std::string_view a, const char* b) {
  std::size_t n = std::strlen(b);
  if (a.size() != n) return false;
  for (std::size_t i = 0; i < n; ++i) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
    if (c != b[i]) return false;
  }
  return true;
}

// Why a last field that is not a count is bad: "negative count" and
// "non-finite count" are worth telling apart from a missing count.
const char* bad_count_reason(std::string_view tok) {
  std::string_view t = tok;
  if (!t.empty() && (t[0] == '-' || t[0] == '+')) t.remove_prefix(1);
  if (ieq(t, "inf") || ieq(t, "infinity") || ieq(t, "nan")) return "non-finite count";
  double dummy;
  if (!tok.empty() && tok[0] == '-' && parse_number(tok.substr(1), dummy)) return "negative count";
  return "no count";
}

// Empty, or white space only (perf's unresolved symbols).
bool is_blank(std::string_view frame) {
  for (char c : frame)
    if (!is_space(c)) return false;
  return true;
}

// Checks the text of a whole stack (UTF-8 and control characters) in one
// pass; returns nullptr when fine.
const char* check_text(std::string_view s) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t n = s.size();
  for (std::size_t i = 0; i < n;) {
    unsigned char c = p[i];
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7F) return "control character";
      ++i;
      continue;
    }
    std::size_t len = utf8_len(p, n, i);
    if (!len) return "invalid UTF-8";
    // C1 controls U+0080..U+009F are encoded C2 80..C2 9F.
    if (c == 0xC2 && p[i + 1] < 0xA0) return "control character";
    i += len;
  }
  return nullptr;
}

struct LineParser {
  const ParseOptions& opts;
  ParseResult& res;
  const std::function<void(const FoldedLine&)>& sink;
  std::string reason;  // scratch for reasons with figures in them

  void fail(std::size_t line_no, std::string why) {
    ++res.rejected;
    if (res.errors.size() < opts.max_errors) res.errors.push_back({line_no, std::move(why)});
  }

  // Checks the frames of `stack` (empty, too long, too many); false with
  // the reason in `why` when one is bad.
  bool check_frames(std::string_view stack, std::string& why) {
    std::size_t depth = 0, pos = 0, n = stack.size();
    const char* base = stack.data();
    for (;;) {
      const char* stop = detail::find_semi(base + pos, base + n);
      const char* semi = stop < base + n ? stop : nullptr;
      std::size_t end = std::size_t(stop - base);
      std::size_t len = end - pos;
      ++depth;
      if (!opts.blank_frames && is_blank(stack.substr(pos, len))) {
        why = std::string(len ? "blank" : "empty") + " frame (frame " + std::to_string(depth) + ")";
        return false;
      }
      if (len > opts.max_frame_bytes) {
        why = "frame too long (" + std::to_string(len) + " bytes, limit " +
              std::to_string(opts.max_frame_bytes) + ")";
        return false;
      }
      if (depth > opts.max_depth) {
        why = "stack too deep (more than " + std::to_string(opts.max_depth) + " frames)";
        return false;
      }
      if (!semi) return true;
      pos = end + 1;
    }
  }

  void line(std::string_view s, std::size_t line_no) {
    if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
    // Trailing white space is not part of the count.
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    if (s.empty()) return;  // blank line
    ++res.lines;
    if (s.size() > opts.max_line_bytes) {
      fail(line_no, "line too long (" + std::to_string(s.size()) + " bytes, limit " +
                        std::to_string(opts.max_line_bytes) + ")");
      return;
    }
    FoldedLine fl;
    fl.line = line_no;
    std::string_view stack;
    if (!split_count(s, stack, fl.value)) return fail(line_no, bad_count_reason(last_field(s)));
    // A second count column makes the line differential (BEFORE AFTER).
    std::string_view stack2;
    double first;
    if (split_count(stack, stack2, first)) {
      fl.differential = true;
      fl.value2 = fl.value;
      fl.value = first;
      stack = stack2;
    }
    if (!std::isfinite(fl.value) || !std::isfinite(fl.value2))
      return fail(line_no, "non-finite count");
    // Perl's split drops trailing empty fields: flamegraph.pl draws "a;b;" as "a;b".
    if (opts.blank_frames)
      while (!stack.empty() && stack.back() == ';') stack.remove_suffix(1);
    if (stack.empty() && !opts.blank_frames) return fail(line_no, "empty stack");
    if (!stack.empty() && !check_frames(stack, reason)) return fail(line_no, reason);
    if (opts.strict && opts.check_text) {
      if (const char* why = check_text(stack)) return fail(line_no, why);
    }
    fl.stack = stack;
    if (fl.differential) res.differential = true;
    ++res.accepted;
    sink(fl);
  }

  static std::string_view last_field(std::string_view s) {
    std::size_t i = s.size();
    while (i > 0 && !is_space(s[i - 1])) --i;
    return s.substr(i);
  }

  // Splits "STACK<ws>COUNT": true when the last field is a count and white
  // space precedes it. As flamegraph.pl's /^(.*)\s+?(COUNT)$/, only one white
  // space character goes: the rest stays in the stack, so "write0;  3" (perf's
  // unresolved symbol) is the frames "write0" and " ".
  static bool split_count(std::string_view s, std::string_view& stack, double& value) {
    std::size_t i = s.size();
    while (i > 0 && !is_space(s[i - 1])) --i;
    if (i == 0 || i == s.size()) return false;
    if (!parse_number(s.substr(i), value)) return false;
    stack = s.substr(0, i - 1);
    return true;
  }
};

}  // namespace

ParseResult parse_folded(std::string_view text, const ParseOptions& opts,
                         const std::function<void(const FoldedLine&)>& sink) {
  ParseResult res;
  LineParser lp{opts, res, sink, {}};
  const char* p = text.data();
  const char* end = p + text.size();
  std::size_t line_no = opts.first_line;
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', std::size_t(end - p)));
    const char* stop = nl ? nl : end;
    lp.line(std::string_view(p, std::size_t(stop - p)), line_no++);
    p = nl ? nl + 1 : end;
  }
  res.last_line = line_no - 1;
  return res;
}

std::vector<std::string_view> split_stack(std::string_view stack) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  for (;;) {
    std::size_t semi = stack.find(';', pos);
    if (semi == std::string_view::npos) {
      out.push_back(stack.substr(pos));
      return out;
    }
    out.push_back(stack.substr(pos, semi - pos));
    pos = semi + 1;
  }
}

std::string check_frame(std::string_view frame, const ParseOptions& opts) {
  if (frame.empty()) return "empty frame";
  if (frame.size() > opts.max_frame_bytes) return "frame too long";
  if (frame.find(';') != std::string_view::npos) return "frame contains ';'";
  if (opts.check_text)
    if (const char* why = check_text(frame)) return why;
  return {};
}

std::string reverse_stack(std::string_view stack) {
  std::vector<std::string_view> frames = split_stack(stack);
  std::string out;
  out.reserve(stack.size());
  for (std::size_t i = frames.size(); i-- > 0;) {
    out.append(frames[i].data(), frames[i].size());
    if (i) out += ';';
  }
  return out;
}

void merge_results(ParseResult& into, const ParseResult& more, std::size_t max_errors) {
  into.lines += more.lines;
  into.accepted += more.accepted;
  into.rejected += more.rejected;
  into.differential = into.differential || more.differential;
  if (more.last_line) into.last_line = more.last_line;
  for (const ParseError& e : more.errors)
    if (into.errors.size() < max_errors) into.errors.push_back(e);
}

void append_count(std::string& out, double value) {
  char buf[512];
  int n;
  if (value == std::floor(value) && std::fabs(value) < 1e17) {
    n = std::snprintf(buf, sizeof buf, "%.0f", value);
  } else {
    // Plain decimal, trailing zeros dropped: parse_folded (and
    // flamegraph.pl) read no exponents.
    n = std::snprintf(buf, sizeof buf, "%.9f", value);
    if (n < 0 || n >= int(sizeof buf))
      n = std::snprintf(buf, sizeof buf, "%.0f", value);
    else {
      while (n > 0 && buf[n - 1] == '0') --n;
      if (n > 0 && buf[n - 1] == '.') --n;
    }
  }
  if (n > 0) out.append(buf, std::size_t(n));
}

}  // namespace lf
