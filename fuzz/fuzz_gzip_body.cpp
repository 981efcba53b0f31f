// gzip request bodies: Gunzip over the input split at a point chosen by the
// first byte (bodies arrive in pieces), under a small limit. Half the inputs
// are made valid first (the rest compressed as one or two members, then cut
// or flipped at a chosen byte) so the fuzzer reaches member ends, CRCs and
// truncation, not only bad headers. The output never passes the limit; a body
// called complete decodes the same in one piece; an untouched valid body is
// complete and decodes to its text.

#include <cstdint>
#include <cstdlib>
#include <string>

#include "gzip.hpp"
#include "http/guard.hpp"

using lft::gzip;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const std::size_t limit = 4096;
  const unsigned mode = data[0], at = data[1] | (data[2] << 8);
  std::string text(reinterpret_cast<const char*>(data + 3), size - 3), body = text;
  bool valid = false;
  if (mode & 1) {
    std::size_t half = (mode & 2) ? text.size() / 2 : text.size();
    body = gzip(text.substr(0, half)) + ((mode & 2) ? gzip(text.substr(half)) : std::string());
    valid = true;
    if ((mode & 12) == 4) {
      body.resize(at % (body.size() + 1));
      valid = false;
    }  // cut
    if ((mode & 12) == 8) {
      body[at % body.size()] ^= 0x20;
      valid = false;
    }  // flip
  }
  std::size_t cut = body.empty() ? 0 : (mode >> 4) * body.size() / 16;
  lfs::Gunzip split(limit);
  std::string a;
  auto st = split.feed(body.data(), cut, a);
  if (st == lfs::Gunzip::Status::ok) st = split.feed(body.data() + cut, body.size() - cut, a);
  if (a.size() > limit) std::abort();
  if (st == lfs::Gunzip::Status::ok && split.complete()) {
    lfs::Gunzip whole(limit);
    std::string b;
    if (whole.feed(body.data(), body.size(), b) != lfs::Gunzip::Status::ok || !whole.complete() ||
        a != b)
      std::abort();
  }
  if (valid && text.size() <= limit && !text.empty() &&
      (st != lfs::Gunzip::Status::ok || !split.complete() || a != text))
    std::abort();
  (void)split.error();
  return 0;
}
