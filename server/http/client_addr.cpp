#include "http/client_addr.hpp"

#include "http/ascii.hpp"

#include <arpa/inet.h>

namespace lfs {

namespace {

// Textual IPv4 or IPv6 into 16 bytes (IPv4 mapped into ::ffff:0:0/96).
bool to_bytes(std::string_view text, std::array<uint8_t, 16>& out) {
  const std::string s(text);
  in_addr v4{};
  if (inet_pton(AF_INET, s.c_str(), &v4) == 1) {
    out = {};
    out[10] = out[11] = 0xff;
    const auto* b = reinterpret_cast<const uint8_t*>(&v4.s_addr);
    for (int i = 0; i < 4; ++i) out[12 + i] = b[i];
    return true;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, s.c_str(), &v6) != 1) return false;
  for (int i = 0; i < 16; ++i) out[i] = v6.s6_addr[i];
  return true;
}

bool matches(const std::array<uint8_t, 16>& a, const Cidr& c) {
  for (int bit = 0; bit < c.bits; ++bit) {
    const uint8_t mask = static_cast<uint8_t>(0x80 >> (bit % 8));
    if ((a[bit / 8] & mask) != (c.net[bit / 8] & mask)) return false;
  }
  return true;
}

constexpr auto trim = trim_ows;
constexpr auto same_name = ascii_iequal;

// The values of every header line named `name`, joined with ',' in order.
std::string header_values(std::string_view head, std::string_view name) {
  std::string out;
  std::size_t at = head.find("\r\n");
  while (at != std::string_view::npos && at + 2 < head.size()) {
    const std::size_t from = at + 2, end = head.find("\r\n", from);
    std::string_view line = head.substr(from, end == std::string_view::npos ? end : end - from);
    const std::size_t colon = line.find(':');
    if (colon != std::string_view::npos && same_name(line.substr(0, colon), name)) {
      if (!out.empty()) out += ',';
      out += trim(line.substr(colon + 1));
    }
    at = end;
  }
  return out;
}

// Forwarded's for= of one element: 1.2.3.4, "[2001:db8::1]:80", "1.2.3.4:80".
std::string_view forwarded_for(std::string_view element) {
  std::size_t p = 0;
  while (p < element.size()) {
    std::size_t semi = element.find(';', p);
    std::string_view pair =
        trim(element.substr(p, semi == std::string_view::npos ? semi : semi - p));
    if (pair.size() > 4 && same_name(pair.substr(0, 4), "for=")) {
      std::string_view v = pair.substr(4);
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      if (!v.empty() && v.front() == '[') return v.substr(1, v.find(']') - 1);
      if (v.find(':') == v.rfind(':') && v.find(':') != std::string_view::npos)
        v = v.substr(0, v.find(':'));  // IPv4 with a port
      return v;
    }
    if (semi == std::string_view::npos) break;
    p = semi + 1;
  }
  return {};
}

// From the right: the first address of `list` (comma-separated, each
// element through `pick`) that is valid and not a trusted proxy.
template <class Pick>
std::string nearest(std::string_view list, const std::vector<Cidr>& trusted, Pick pick) {
  while (!list.empty()) {
    const std::size_t comma = list.rfind(',');
    std::string_view element = comma == std::string_view::npos ? list : list.substr(comma + 1);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(0, comma);
    const std::string_view addr = trim(pick(trim(element)));
    std::array<uint8_t, 16> b{};
    if (!to_bytes(addr, b)) return {};  // garbage: trust none of what is left of it
    if (!in_ranges(addr, trusted)) return std::string(addr);
  }
  return {};
}

}  // namespace

bool parse_cidrs(std::string_view list, std::vector<Cidr>& out, std::string& err) {
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    std::string_view part = trim(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (part.empty()) continue;
    Cidr c;
    const std::size_t slash = part.find('/');
    if (!to_bytes(part.substr(0, slash), c.net))
      return err = "not an IP address: '" + std::string(part) + "'", false;
    const bool v4 = part.substr(0, slash).find(':') == std::string_view::npos;
    c.bits = 128;
    if (slash != std::string_view::npos) {
      const std::string n(part.substr(slash + 1));
      const int max = v4 ? 32 : 128;
      if (n.empty() || n.size() > 3 || n.find_first_not_of("0123456789") != std::string::npos ||
          std::stoi(n) > max)
        return err = "bad prefix length in '" + std::string(part) + "'", false;
      c.bits = std::stoi(n) + (v4 ? 96 : 0);
    }
    out.push_back(c);
  }
  return true;
}

bool in_ranges(std::string_view addr, const std::vector<Cidr>& ranges) {
  std::array<uint8_t, 16> a{};
  if (ranges.empty() || !to_bytes(addr, a)) return false;
  for (const Cidr& c : ranges)
    if (matches(a, c)) return true;
  return false;
}

std::string client_of(std::string_view head, const std::string& peer,
                      const std::vector<Cidr>& trusted) {
  if (!in_ranges(peer, trusted)) return peer;
  std::string got = nearest(header_values(head, "X-Forwarded-For"), trusted,
                            [](std::string_view e) { return e; });
  if (got.empty()) got = nearest(header_values(head, "Forwarded"), trusted, forwarded_for);
  return got.empty() ? peer : got;
}

}  // namespace lfs
