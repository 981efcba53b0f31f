// luaflame engine: the pprof profile format (google/pprof's profile.proto),
// read and written with Debian's libprotobuf over engine/proto/luaflame_pprof.proto.
//
// Reading turns a profile into folded stacks with one value per sample type;
// writing turns engine trees (one per metric) into a profile. Both are pure
// functions: no files, no HTTP, no metric names of the server.
//
// Frames and pprof functions: a frame "NAME SOURCE:LINE" (luaflame's Lua
// frames, LINE = where the function is defined) is the function NAME in file
// SOURCE starting at LINE; any other frame is a function with that name and
// no file. Reading makes the same frames back (a function without start line
// but with a file: "NAME FILE"; without a name: the hex address).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "luaflame/svg.hpp"
#include "luaflame/tree.hpp"

namespace lf {

/// Hard limits of read_pprof: a body over any of them is refused (with the
/// limit named in the error), never obeyed.
struct PprofLimits {
  /// Largest profile after gunzip, in bytes. Default: 64 MiB.
  std::size_t max_decoded_bytes = 64u << 20;
  /// Most samples, locations, functions, mappings and strings (each). Default: 1,000,000.
  std::size_t max_messages = 1000000;
  /// Most sample types (values per sample). Default: 32.
  std::size_t max_sample_types = 32;
  /// Longest string in the string table, in bytes. Default: 64 KiB.
  std::size_t max_string_bytes = 64u << 10;
  /// Deepest stack, in frames (inlined lines count). Default: 1024.
  std::size_t max_depth = 1024;
  /// Deepest message nesting protobuf may follow (pprof needs 3). Default: 8.
  int max_nesting = 8;
};

struct PprofValueType {
  std::string type;  ///< e.g. "cpu", "alloc_space"
  std::string unit;  ///< e.g. "nanoseconds", "bytes"
};

/// One distinct stack with its values (one per sample type).
struct PprofStack {
  std::vector<uint32_t> frames;  ///< frame ids (PprofProfile::frames), root first
  std::vector<int64_t> values;   ///< index = sample type
};

/// A profile read as stacks of frame ids: each frame name is held once,
/// however many stacks it appears in.
struct PprofProfile {
  std::vector<PprofValueType> sample_types;
  std::vector<std::string> frames;  ///< distinct frame names, by id
  std::vector<PprofStack> stacks;   ///< samples of the same stack merged, in first-seen order
  int64_t time_nanos = 0;           ///< when it was taken (0: not said)
  int64_t duration_nanos = 0;
  int64_t period = 0;
  PprofValueType period_type;
  std::size_t samples = 0;  ///< samples read (before merging)
};

/// Whether `body` looks like a pprof profile: gzip, or a protobuf that opens
/// with a sample type. Folded text never does (it holds no bytes below 0x09).
bool looks_like_pprof(std::string_view body);

/// Reads a profile, gzipped or plain. False with `error` set (e.g. "pprof:
/// 1200000 samples, limit 1000000", "pprof: sample 3 has 1 values for 2
/// sample types") when the body is not a valid profile within `limits`.
/// Frame names have ';' replaced by ':' (';' separates folded frames).
bool read_pprof(std::string_view body, const PprofLimits& limits, PprofProfile& out,
                std::string& error);

/// A stack's frames joined by ';', root first (folded text).
std::string stack_text(const PprofProfile& p, const PprofStack& s);

/// One metric of the profile to write: a finalized tree and its column.
struct PprofSeries {
  PprofValueType type;  ///< e.g. {"cpu", "nanoseconds"}
  const Tree* tree = nullptr;
  int col = 0;  ///< column of a differential tree (0: the only one)
};

/// Options of write_pprof.
struct PprofWriteOptions {
  int64_t time_nanos = 0;      ///< Profile.time_nanos; default 0
  int64_t duration_nanos = 0;  ///< Profile.duration_nanos; default 0
  int64_t period = 0;          ///< Profile.period; default 0 (with period_type empty: none)
  PprofValueType period_type;  ///< default none
  bool gzip = true;            ///< gzip the output, as pprof files are; default true
};

/// Writes every series as one sample type of one profile: a sample per
/// distinct stack with self value in any series (values rounded to integers),
/// one location and function per distinct frame, file and line from
/// "NAME SOURCE:LINE" frames.
std::string write_pprof(const std::vector<PprofSeries>& series, const PprofWriteOptions& opts);

/// Splits "NAME SOURCE:LINE" (NAME up to the first space, a ':' and digits at
/// the end) or "NAME PATH" (PATH holding a '/', line 0). False, with name =
/// frame, when the frame has no such location ("[C] string.rep").
bool split_frame_location(std::string_view frame, std::string_view& name, std::string_view& file,
                          int64_t& line);

/// Titles for a drawn sample type, in its unit: nanoseconds as time
/// (o.unit "ns": "700.00 ms"), bytes as KiB/MiB (o.unit "bytes"), any other
/// count by its type's name (o.count_name "goroutine"), not as "samples".
void svg_units_of(const PprofValueType& type, SvgOptions& o);

/// Decompresses gzip data, at most `max_bytes` of output. False (with
/// `error`) on bad data or when the output would be larger.
bool gunzip_bounded(std::string_view in, std::size_t max_bytes, std::string& out,
                    std::string& error);

}  // namespace lf
