// luaflame engine, stage 1: parsing folded stacks.
//
// Input grammar (as flamegraph.pl and difffolded.pl read it):
//   line   = stack WS count [WS count] [CR]     ; one white space character before each count
//                                               ; (more stay in the stack, as in flamegraph.pl)
//   stack  = frame *(";" frame)
//   count  = integer or decimal, finite, >= 0
// Blank lines are skipped. A second count column makes the input differential
// (STACK BEFORE AFTER).
//
// Two modes: strict (every bad line is reported with its number and reason,
// and the caller accepts nothing), lenient (bad lines are skipped and counted).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace lf {

/// Options of the parse stage.
struct ParseOptions {
  /// Strict: collect every bad line as an error (the caller then rejects the
  /// whole input). Lenient: skip bad lines and count them. Default: false.
  bool strict = false;
  /// Longest frame name accepted, in bytes. Default: 4096.
  std::size_t max_frame_bytes = 4096;
  /// Longest line accepted, in bytes. Default: 1 MiB.
  std::size_t max_line_bytes = 1 << 20;
  /// Deepest stack accepted, in frames. Default: 1024.
  std::size_t max_depth = 1024;
  /// Reject frames that are not valid UTF-8 or hold control characters.
  /// Default: true in strict mode; lenient mode never checks (flamegraph.pl
  /// renders whatever bytes it gets, and so does the renderer, safely).
  bool check_text = true;
  /// Accept empty and blank (white-space only) frames and draw them as
  /// flamegraph.pl does: "a;;b", ";a", "write0; " (perf's unresolved symbol);
  /// trailing empty fields are dropped as Perl's split drops them ("a;b;" is
  /// "a;b") and a line with an empty stack counts at the root. false refuses
  /// such lines by name ("empty frame (frame N)", "blank frame (frame N)",
  /// "empty stack"): `luaflame svg --strict`. Default: true (also the server's).
  bool blank_frames = true;
  /// Most errors kept in ParseResult::errors (the count goes on). Default: 100.
  std::size_t max_errors = 100;
  /// Line number of the first line of `text`, for callers that parse a long
  /// input in pieces (the CLI reads in blocks). Default: 1.
  std::size_t first_line = 1;
};

/// One bad line.
struct ParseError {
  std::size_t line = 0;  ///< 1-based line number
  std::string reason;    ///< e.g. "no count", "negative count", "empty frame"
};

/// One good line, handed to the sink. Views point into the input text.
struct FoldedLine {
  std::string_view stack;  ///< "a;b;c" without the counts
  double value = 0;        ///< the (first) count
  double value2 = 0;       ///< the second count, when differential
  bool differential = false;
  std::size_t line = 0;  ///< 1-based line number
};

/// What a parse saw.
struct ParseResult {
  std::size_t lines = 0;           ///< non-blank lines read
  std::size_t accepted = 0;        ///< lines handed to the sink
  std::size_t rejected = 0;        ///< bad lines (all of them, even past max_errors)
  bool differential = false;       ///< any line had two counts
  std::size_t last_line = 0;       ///< number of the last line read, blank or not (0: none)
  std::vector<ParseError> errors;  ///< the first max_errors bad lines
  bool ok() const { return rejected == 0; }
};

/// Parses `text`, calling `sink` for every good line in order. In strict mode
/// the sink is still called for good lines; a caller that must accept nothing
/// on error collects first and commits only when result.ok().
ParseResult parse_folded(std::string_view text, const ParseOptions& opts,
                         const std::function<void(const FoldedLine&)>& sink);

/// Splits a stack into frames on ';' (views into `stack`).
std::vector<std::string_view> split_stack(std::string_view stack);

/// Checks one frame name the way strict parsing does; empty string if fine,
/// else the reason.
std::string check_frame(std::string_view frame, const ParseOptions& opts);

/// The same stack with its frames in reverse order (flamegraph.pl --reverse).
std::string reverse_stack(std::string_view stack);

/// Adds the counts of `more` to `into` (lines, accepted, rejected, errors up
/// to `max_errors`), for input parsed in pieces.
void merge_results(ParseResult& into, const ParseResult& more, std::size_t max_errors);

/// Formats a count the way write_folded does and parse_folded reads back:
/// an integer when the value is whole, else a plain decimal (never exponent).
void append_count(std::string& out, double value);

}  // namespace lf
