// gzip request bodies: Gunzip over the input split at a point chosen by the
// first byte (bodies arrive in pieces), under a 1 MiB limit. The output never
// passes the limit, and a body called complete decodes the same in one piece.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "guard.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::size_t limit = 1u << 20;
  const char* in = reinterpret_cast<const char*>(data + 1);
  std::size_t n = size - 1, cut = n ? data[0] % (n + 1) : 0;
  lfs::Gunzip split(limit);
  std::string a;
  auto st = split.feed(in, cut, a);
  if (st == lfs::Gunzip::Status::ok) st = split.feed(in + cut, n - cut, a);
  if (a.size() > limit) std::abort();
  if (st == lfs::Gunzip::Status::ok && split.complete()) {
    lfs::Gunzip whole(limit);
    std::string b;
    if (whole.feed(in, n, b) != lfs::Gunzip::Status::ok || !whole.complete() || a != b) std::abort();
  }
  (void)split.error();
  return 0;
}
