// Wire chunks (POST /api/runs/{id}/chunks): lfw::decode, then the server's
// own decode_chunk (depth and value checks, stacks). A chunk that decodes
// must encode to text that decodes to the same chunk.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "http/app.hpp"
#include "ingest/ingest.hpp"
#include "luaflame/wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  lfw::Chunk c;
  std::string error;
  if (lfw::decode(text, c, error)) {
    std::string again;
    lfw::encode(c, again);
    lfw::Chunk d;
    if (!lfw::decode(again, d, error) || d.seq != c.seq || d.frames != c.frames ||
        d.metrics != c.metrics || d.nodes.size() != c.nodes.size())
      std::abort();
  }
  lf::ParseOptions o;
  o.strict = true;
  o.check_text = true;
  o.max_frame_bytes = 64;
  o.max_depth = 16;
  try {
    lfs::Batch batch;
    lfs::decode_chunk(text, o, batch);
  } catch (const lfs::HttpError& e) {
    if (e.status < 400 || e.status >= 500) std::abort();  // a refusal is a 4xx, never a 5xx
  }
  return 0;
}
