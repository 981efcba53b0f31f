// pprof bodies as POST /api/runs and /ingest read them: the engine's
// read_pprof under small limits, then the server's pprof_to_batch (sample
// types to metrics, prev_profile subtraction, sample_type_config JSON).
// Input: [mode][at lo][at hi] then text. Half the inputs are made valid first
// (the text parsed as folded lines, written with write_pprof, gzipped or not)
// and then cut or flipped at `at`, so the fuzzer gets past the protobuf
// framing into samples, locations and the string table; the rest is raw bytes
// split at NULs into profile, prev_profile and config.
// Checks: an accepted profile has one value per sample type in every stack,
// no stack deeper than the limit, no ';' inside a frame; an untouched valid
// profile is accepted with its sample types; pprof_to_batch refuses only with
// a 4xx HttpError.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "http/app.hpp"
#include "ingest/pprof_ingest.hpp"
#include "luaflame/folded.hpp"
#include "luaflame/pprof.hpp"
#include "luaflame/tree.hpp"

namespace {

const char* const kConfigs[] = {
    "",
    R"({"alloc_objects":{"units":"objects","cumulative":true},"cpu":{"units":"samples"}})",
    R"({"samples":{"units":"samples","aggregation":"average"},"x":{"units":"lock_samples"}})",
    R"({"alloc_space":{"units":"bytes","cumulative":true,"display-name":"a"}})",
};

lf::Tree tree_of(std::string_view text) {
  lf::ParseOptions o;
  o.max_depth = 64;
  o.max_frame_bytes = 256;
  lf::Tree t;
  lf::parse_folded(text, o, [&](const lf::FoldedLine& l) { t.add(l); });
  t.finalize();
  return t;
}

// A valid profile of `text` (two sample types when `two`), then damaged.
std::string make_profile(std::string_view text, unsigned mode, unsigned at, bool& intact) {
  lf::Tree a = tree_of(text);
  lf::PprofWriteOptions w;
  w.gzip = mode & 2;
  w.period = at;
  w.period_type = {"cpu", "nanoseconds"};
  std::string body =
      (mode & 4)
          ? lf::write_pprof({{{"samples", "count"}, &a, 0}, {{"alloc_space", "bytes"}, &a, 0}}, w)
          : lf::write_pprof({{{"samples", "count"}, &a, 0}}, w);
  intact = true;
  if ((mode & 24) == 8) {  // cut
    body.resize(at % (body.size() + 1));
    intact = false;
  } else if ((mode & 24) == 16 && !body.empty()) {  // flip
    body[at % body.size()] ^= char(1u << (mode >> 5));
    intact = false;
  }
  return body;
}

void check_read(std::string_view body, bool intact, unsigned mode) {
  lf::PprofLimits lim;
  lim.max_decoded_bytes = 1u << 20;
  lim.max_messages = 20000;
  lim.max_string_bytes = 4096;
  lim.max_depth = 64;
  lf::PprofProfile p;
  std::string error;
  if (!lf::read_pprof(body, lim, p, error)) {
    if (intact || error.empty()) std::abort();
    return;
  }
  if (p.sample_types.size() > lim.max_sample_types) std::abort();
  if (intact && p.sample_types.size() != ((mode & 4) ? 2u : 1u)) std::abort();
  if (p.stacks.size() > p.samples) std::abort();
  for (const lf::PprofStack& s : p.stacks) {
    if (s.values.size() != p.sample_types.size()) std::abort();
    if (s.frames.size() > lim.max_depth) std::abort();
    for (uint32_t f : s.frames)
      if (f >= p.frames.size()) std::abort();
  }
}

void check_batch(std::string_view body, std::string_view prev, std::string_view config) {
  lf::ParseOptions strict;
  strict.strict = true;
  strict.max_depth = 64;
  strict.max_frame_bytes = 256;
  try {
    (void)lfs::pprof_to_batch(body, prev, config, strict);
  } catch (const lfs::HttpError& e) {
    if (e.status < 400 || e.status >= 500) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3 || size > 16384) return 0;
  const unsigned mode = data[0], at = data[1] | (data[2] << 8);
  std::string_view text(reinterpret_cast<const char*>(data + 3), size - 3);
  if (mode & 1) {
    bool intact = false;
    std::string body = make_profile(text, mode, at, intact);
    check_read(body, intact, mode);
    bool cut_prev = false;
    std::string prev = (mode & 64)
                           ? make_profile(text.substr(0, text.size() / 2), mode & 7, 0, cut_prev)
                           : std::string();
    check_batch(body, prev, kConfigs[(mode >> 6) & 3]);
    return 0;
  }
  std::size_t a = text.find('\0');
  std::string_view body = text.substr(0, a), prev, config;
  if (a != std::string_view::npos) {
    std::string_view rest = text.substr(a + 1);
    std::size_t b = rest.find('\0');
    prev = rest.substr(0, b);
    if (b != std::string_view::npos) config = rest.substr(b + 1);
  }
  check_read(body, false, mode);
  check_batch(body, prev, config);
  return 0;
}
