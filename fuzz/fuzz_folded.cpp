// Folded text as the server parses uploads and /ingest bodies: strict mode
// with every check on, then lenient mode; the two must agree on good input.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "luaflame/folded.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  lf::ParseOptions strict;
  strict.strict = true;
  strict.check_text = true;
  strict.max_frame_bytes = 64;
  strict.max_depth = 16;
  std::size_t strict_lines = 0;
  lf::ParseResult a =
      lf::parse_folded(text, strict, [&](const lf::FoldedLine&) { ++strict_lines; });
  lf::ParseOptions lenient = strict;
  lenient.strict = false;
  std::size_t lenient_lines = 0;
  lf::ParseResult b =
      lf::parse_folded(text, lenient, [&](const lf::FoldedLine&) { ++lenient_lines; });
  // Input strict mode accepts whole is accepted line for line by lenient mode.
  if (a.rejected == 0 && (b.rejected != 0 || a.accepted != b.accepted)) std::abort();
  return 0;
}
