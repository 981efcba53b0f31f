// engine internals: text that goes into the SVG, made safe, and numbers
// written without printf in the per-frame path.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "luaflame/utf8.hpp"

namespace lf {
namespace detail {

// Makes `in` valid XML character data: invalid UTF-8, C0/C1 controls, DEL
// and the non-characters U+FFFE/U+FFFF become U+FFFD. At most `max_bytes`
// bytes of input are used; a longer input ends in "...". Not escaped yet.
inline void sanitize(std::string_view in, std::string& out, std::size_t max_bytes) {
  const unsigned char* s = reinterpret_cast<const unsigned char*>(in.data());
  std::size_t n = in.size();
  bool cut = n > max_bytes;
  if (cut) n = max_bytes;
  static const char kBad[] = "\xEF\xBF\xBD";
  for (std::size_t i = 0; i < n;) {
    unsigned char c = s[i];
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7F)
        out.append(kBad, 3);
      else
        out += char(c);
      ++i;
      continue;
    }
    std::size_t len = utf8_len(s, n, i);
    bool ok = len != 0;
    if (ok && c == 0xC2 && s[i + 1] < 0xA0) ok = false;                       // C1 controls
    if (ok && c == 0xEF && s[i + 1] == 0xBF && s[i + 2] >= 0xBE) ok = false;  // U+FFFE, U+FFFF
    if (!ok) {
      out.append(kBad, 3);
      ++i;
      continue;
    }
    out.append(in.data() + i, len);
    i += len;
  }
  if (cut) out += "...";
}

// Escapes sanitized text for element content and attribute values.
inline void escape(std::string_view in, std::string& out) {
  std::size_t start = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char* rep;
    switch (in[i]) {
      case '&':
        rep = "&amp;";
        break;
      case '<':
        rep = "&lt;";
        break;
      case '>':
        rep = "&gt;";
        break;
      case '"':
        rep = "&quot;";
        break;
      case '\'':
        rep = "&#39;";
        break;
      default:
        continue;
    }
    out.append(in.data() + start, i - start);
    out += rep;
    start = i + 1;
  }
  out.append(in.data() + start, in.size() - start);
}

inline void safe_text(std::string_view in, std::string& out, std::size_t max_bytes = 1 << 20) {
  std::string tmp;
  sanitize(in, tmp, max_bytes);
  escape(tmp, out);
}

inline void put_uint(std::string& out, uint64_t v) {
  char buf[24];
  char* p = buf + sizeof buf;
  do {
    *--p = char('0' + v % 10);
    v /= 10;
  } while (v);
  out.append(p, std::size_t(buf + sizeof buf - p));
}

// v with `decimals` decimals (0..4); trailing ".0"s dropped when `trim`.
inline void put_fixed(std::string& out, double v, int decimals, bool trim) {
  static const double kScale[] = {1, 10, 100, 1000, 10000};
  if (!std::isfinite(v) || std::fabs(v) > 9e15) {
    char buf[400];
    int n = std::snprintf(buf, sizeof buf, "%.*f", decimals, std::isfinite(v) ? v : 0.0);
    out.append(buf, std::size_t(n > 0 ? n : 0));
    return;
  }
  double scaled = std::round(v * kScale[decimals]);
  if (scaled < 0) {
    if (scaled != 0) out += '-';
    scaled = -scaled;
  }
  uint64_t r = uint64_t(scaled);
  uint64_t div = uint64_t(kScale[decimals]);
  put_uint(out, r / div);
  uint64_t frac = r % div;
  if (decimals == 0 || (trim && frac == 0)) return;
  char buf[8];
  for (int k = decimals - 1; k >= 0; --k) {
    buf[k] = char('0' + frac % 10);
    frac /= 10;
  }
  int len = decimals;
  if (trim)
    while (len > 0 && buf[len - 1] == '0') --len;
  out += '.';
  out.append(buf, std::size_t(len));
}

// A whole count with thousands separators, as flamegraph.pl prints them.
inline void put_count(std::string& out, double v) {
  std::string digits;
  if (std::fabs(v) < 9e18) {
    int64_t r = int64_t(std::llround(v));
    if (r < 0) {
      out += '-';
      r = -r;
    }
    put_uint(digits, uint64_t(r));
  } else {
    char buf[400];
    int n = std::snprintf(buf, sizeof buf, "%.0f", std::fabs(v));
    if (v < 0) out += '-';
    digits.assign(buf, std::size_t(n > 0 ? n : 0));
  }
  std::size_t n = digits.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (i && (n - i) % 3 == 0) out += ',';
    out += digits[i];
  }
}

// A count in a unit: "ns" as ns/us/ms/s, "bytes" as B/KiB/MiB/GiB/TiB.
inline void put_unit(std::string& out, double v, const std::string& unit) {
  static const char* kTime[] = {"ns", "us", "ms", "s"};
  static const char* kBytes[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  const char** names = unit == "ns" ? kTime : kBytes;
  int last = unit == "ns" ? 3 : 4;
  double base = unit == "ns" ? 1000 : 1024;
  int k = 0;
  double a = std::fabs(v);
  while (k < last && a >= base) {
    a /= base;
    v /= base;
    ++k;
  }
  if (k == 0)
    put_count(out, v);
  else
    put_fixed(out, v, 2, false);
  out += ' ';
  out += names[k];
}

// v * scale rounded to an integer exactly as printf("%.Nf") rounds: on the
// exact binary value, ties to even. (The product is exact in long double:
// 53 + 7 bits fit its 64-bit mantissa.) So coordinates and percentages come
// out digit for digit like flamegraph.pl's sprintf. |v * scale| < 9e18.
inline int64_t round_printf(double v, int scale) {
  long double t = static_cast<long double>(v) * scale;
  long double f = std::floor(t);
  long double d = t - f;
  int64_t r = static_cast<int64_t>(f);
  if (d > 0.5L || (d == 0.5L && (r & 1))) ++r;
  return r;
}

// ---- raw writers for the per-frame path: the caller made room ----

template <std::size_t N>
inline char* w_lit(char* p, const char (&s)[N]) {
  std::memcpy(p, s, N - 1);
  return p + N - 1;
}

inline char* w_str(char* p, std::string_view s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

inline char* w_uint(char* p, uint64_t v) {
  char buf[24];
  char* e = buf + sizeof buf;
  char* b = e;
  do {
    *--b = char('0' + v % 10);
    v /= 10;
  } while (v);
  std::memcpy(p, b, std::size_t(e - b));
  return p + (e - b);
}

// One decimal, ".0" dropped: pixel coordinates. Falls back to put_fixed
// for values too large to scale.
inline char* w_fixed1(char* p, double v) {
  if (!(std::fabs(v) < 1e15)) {
    std::string tmp;
    put_fixed(tmp, v, 1, true);
    return w_str(p, tmp);
  }
  int64_t r = round_printf(v, 10);
  if (r < 0) {
    *p++ = '-';
    r = -r;
  }
  p = w_uint(p, uint64_t(r) / 10);
  unsigned d = unsigned(uint64_t(r) % 10);
  if (d) {
    *p++ = '.';
    *p++ = char('0' + d);
  }
  return p;
}

// Two decimals, always shown (percentages, as flamegraph.pl's "%.2f").
inline char* w_fixed2(char* p, double v) {
  if (!(std::fabs(v) < 1e15)) {
    std::string tmp;
    put_fixed(tmp, v, 2, false);
    return w_str(p, tmp);
  }
  int64_t r = round_printf(v, 100);
  if (r < 0) {
    *p++ = '-';
    r = -r;
  }
  p = w_uint(p, uint64_t(r) / 100);
  unsigned d = unsigned(uint64_t(r) % 100);
  *p++ = '.';
  *p++ = char('0' + d / 10);
  *p++ = char('0' + d % 10);
  return p;
}

// A whole count with thousands separators.
inline char* w_count(char* p, double v) {
  if (!(std::fabs(v) < 9e18)) {
    std::string tmp;
    put_count(tmp, v);
    return w_str(p, tmp);
  }
  int64_t r = round_printf(v, 1);
  if (r < 0) {
    *p++ = '-';
    r = -r;
  }
  char digits[24];
  char* e = w_uint(digits, uint64_t(r));
  std::size_t n = std::size_t(e - digits);
  for (std::size_t i = 0; i < n; ++i) {
    if (i && (n - i) % 3 == 0) *p++ = ',';
    *p++ = digits[i];
  }
  return p;
}

}  // namespace detail
}  // namespace lf
