// luaflame engine, stage 3: differential profiles (difffolded.pl).
#pragma once

#include <string_view>

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

}  // namespace lf
