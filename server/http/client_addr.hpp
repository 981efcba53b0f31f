// The client behind a trusted proxy (issue 31). Behind a reverse proxy every
// client is the proxy's one address, so the per-client limits (connections,
// workers) and the logs lumped every client together. A connection from a
// --trusted-proxy address is keyed on the client its proxy names in
// X-Forwarded-For or Forwarded (for=); from any other address those headers
// are ignored (a client could name anyone). Pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lfs {

/// An address range: 16 bytes (IPv4 as ::ffff:a.b.c.d) and a prefix length.
struct Cidr {
  std::array<uint8_t, 16> net{};
  int bits = 0;
};

/// "ADDR[/BITS],..." (IPv4 or IPv6) into `out`; false with `err` naming the bad part.
bool parse_cidrs(std::string_view list, std::vector<Cidr>& out, std::string& err);

/// Whether `addr` (textual IPv4 or IPv6) is in one of `ranges`.
bool in_ranges(std::string_view addr, const std::vector<Cidr>& ranges);

/// The client of a request whose connection comes from `peer`: when `peer`
/// is trusted, the nearest address in X-Forwarded-For (then Forwarded's
/// for=) that is not itself a trusted proxy, read from the right; else, or
/// when the head names none that is a valid address, `peer`. `head`: the
/// request line and header lines.
std::string client_of(std::string_view head, const std::string& peer,
                      const std::vector<Cidr>& trusted);

}  // namespace lfs
