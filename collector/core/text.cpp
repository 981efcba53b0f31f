// Frame text and JSON text made safe (text.hpp).
#include "core/text.hpp"

#include "luaflame/utf8.hpp"

namespace lfc {

void sanitize_frame(std::string& s) {
  // Nearly every name is printable ASCII without ';': left as it is, not
  // copied (every new frame comes here; a state's start names ~170 C
  // functions of the standard library).
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t n = s.size(), i = 0;
  while (i < n && p[i] >= 0x20 && p[i] < 0x7f && p[i] != ';') ++i;
  if (i == n) return;
  std::string out;
  out.reserve(s.size());
  out.append(s, 0, i);
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      out += (c == ';' || c < 0x20 || c == 0x7f) ? '_' : static_cast<char>(c);
      ++i;
      continue;
    }
    // A UTF-8 sequence, checked by the engine's validator (the one the
    // server's strict parser uses, so what the collector sends is accepted).
    const std::size_t len = lf::utf8_len(p, n, i);
    const bool ok = len > 1;
    if (ok) {
      out.append(s, i, len);
      i += len;
    } else {
      out += '?';
      ++i;
    }
  }
  s.swap(out);
}

std::string visible_utf8(std::string_view s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t n = s.size(), i = 0;
  while (i < n) {
    if (p[i] < 0x80) {
      out += static_cast<char>(p[i++]);
      continue;
    }
    const std::size_t len = lf::utf8_len(p, n, i);
    if (len > 1) {
      out.append(s.data() + i, len);
      i += len;
    } else {
      out += "\\x";
      out += kHex[p[i] >> 4];
      out += kHex[p[i] & 15];
      ++i;
    }
  }
  return out;
}

}  // namespace lfc
