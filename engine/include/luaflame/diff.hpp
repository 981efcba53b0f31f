// luaflame engine, stage 3: differential profiles (difffolded.pl).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "luaflame/tree.hpp"

namespace lf {

/// Options of the diff stage.
struct DiffOptions {
  /// Scale the "before" profile so both have equal totals (difffolded.pl -n).
  /// Default: false (the CLI); the server's diff endpoints default to true.
  bool normalize = false;
  /// Strip hex addresses / line numbers? Not done: Default none. Reserved.
};

/// Merges two trees into one differential tree: column 0 holds `before`,
/// column 1 `after`. Both inputs must be finalized; the result is finalized.
Tree diff_trees(const Tree& before, const Tree& after, const DiffOptions& opts);

/// One function's share of the total in two profiles, in percent: its self
/// value (what the gate judges) and its inclusive value.
struct ShareChange {
  std::string name;
  double base_self = 0, head_self = 0;
  double base_total = 0, head_total = 0;
  double delta() const { return head_self - base_self; }  ///< percentage points
};

/// The comparison behind `luaflame diff --threshold` and the server's
/// GET /api/diff: shares rather than raw counts, so profiles of different
/// lengths compare without normalising.
struct Comparison {
  std::vector<ShareChange> rows;  ///< every function, largest |delta| first, then by name
  double base_total = 0, head_total = 0;
  double threshold = -1;  ///< the gate in points; < 0: none (never fails)
  bool failed = false;    ///< some function's self share grew by more than the threshold
  std::string worst;      ///< the first function past the threshold (largest growth)
};

/// Compares two finalized trees function by function. `threshold` < 0: no gate.
Comparison compare_shares(const Tree& base, const Tree& head, double threshold = -1);

/// A threshold as users write it: "5", "5%" or "0.5" points, from 0 to 100.
/// False (with `out` untouched) for anything else.
bool parse_threshold(std::string_view text, double& out);

/// Changes smaller than this many points are neither regressions nor improvements.
constexpr double kShareNoise = 0.0005;

/// `v` rounded to 3 decimals, as reports show shares.
double round_share(double v);

/// Escapes Markdown table metacharacters (| ` \) in a function name.
std::string markdown_escape(std::string_view name);

/// A Markdown report a CI job can post: "### " + `heading`, the regressions
/// and the improvements (at most `limit` rows each), and the verdict when
/// there is a gate.
std::string comparison_markdown(const Comparison& c, const std::string& heading, std::size_t limit);

}  // namespace lf
