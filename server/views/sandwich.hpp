// Engine glue for the views of issue 17: the sandwich of a function (its
// callers merged into one tree, its callees into another) and the line heat
// of a source file. Pure functions over a Store and the engine; no HTTP.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "luaflame/tree.hpp"
#include "store/store.hpp"
#include "views/render.hpp"

namespace lfs {

struct SandwichSide;
enum class Side { callers, callees };

/// A view's stacks as flat arrays of the run's frame ids: what a sandwich is
/// cut from. About 4 bytes per frame of each distinct stack (a 200,000-stack
/// run: ~20 MB), far less than the merged tree, so large runs stay cached.
struct PathSet {
  std::vector<std::string> names;  ///< frame names by the run's frame id
  std::vector<uint32_t> ids;       ///< every path, root first, one after another
  std::vector<uint32_t> offs;      ///< path i is ids[offs[i], offs[i+1])
  std::vector<double> values;      ///< value of path i
  std::size_t bytes() const;
  /// Frame id of `name`, or UINT32_MAX.
  uint32_t find(std::string_view name) const;

  /// One side of `fn`'s sandwich cut at kFineFraction of its total, made once and
  /// kept with these paths (the last kMemoSides of them; not counted by bytes(),
  /// bounded by that count): every width the page draws at renders from it
  /// (the renderer drops what is too narrow), so a click walks no stacks again.
  std::shared_ptr<const SandwichSide> side(std::string_view fn, Side side) const;
  static constexpr double kFineFraction = 1.0 / 2000;  ///< a 2,020 px drawing at minwidth 1
  static constexpr std::size_t kMemoSides = 16;
  /// The frame most stacks start with (the root function), or UINT32_MAX: what
  /// the warm-up makes the sandwich of, its callees being the whole graph.
  uint32_t root_frame() const;

  /// Makes side() keep what it makes (load_paths does; a PathSet made by hand does not).
  void keep_sides();
  struct Memo;
  std::shared_ptr<Memo> memo;  ///< the kept sides; shared by copies
};

/// Loads the paths of `run` for `view` (metric, from, until; focus ignored).
PathSet load_paths(Store& store, int64_t run, const View& view);

/// Path sets of finished runs per view, bounded in bytes, loaded once per key
/// even when several requests ask at the same time.
class PathCache {
 public:
  explicit PathCache(std::size_t max_bytes) : max_bytes_(max_bytes) {}
  std::shared_ptr<const PathSet> get(Store& store, const RunInfo& run, const View& view);
  void forget(int64_t run);

 private:
  struct Entry {
    int64_t run;
    std::string key;
    std::shared_ptr<const PathSet> paths;
  };
  std::shared_ptr<const PathSet> find(const std::string& key);
  std::mutex mu_;
  std::list<Entry> entries_;  // most recent first
  std::size_t bytes_ = 0, max_bytes_;
  Flights<PathSet> flights_;
};

/// One side of a sandwich: a tree whose root has one child, the function,
/// with its callers (side callers, nearest first) or callees below it.
/// Recursion is merged: each stack counts once, callers are what is above the
/// outermost call of the function, callees what is below the innermost one.
struct SandwichSide {
  lf::Tree tree;
  double total = 0;  ///< the function's total (stacks holding it)
  double self = 0;   ///< stacks where it is the leaf
  bool found = false;
  bool pruned = false;  ///< some nodes were left out (their values are in their parent's self)
};
/// Nodes whose value is under `min_fraction` of the function's total, or deeper than
/// `max_depth` below it, are left out and their value kept in the parent (0, UINT32_MAX: all).
SandwichSide make_sandwich(const PathSet& paths, std::string_view fn, Side side,
                           double min_fraction = 0, uint32_t max_depth = UINT32_MAX);

/// What the sandwich's head shows, from one pass over the stacks (no tree):
/// the function's total and self, the view's total, and its direct callers
/// (the frame above its outermost call) and callees (below its innermost call)
/// with the value of the stacks through each, largest first.
struct SandwichInfo {
  bool found = false;
  double total = 0, self = 0, view_total = 0;
  std::vector<std::pair<std::string, double>> callers, callees;
};
SandwichInfo sandwich_info(const PathSet& paths, std::string_view fn);

/// Per-line self values of frames `NAME SOURCE:LINE` (or `NAME (SOURCE:LINE)`)
/// whose SOURCE is `file`, from a function table: line -> value.
struct LineHeat {
  std::vector<std::pair<int64_t, double>> lines;  ///< sorted by line, values summed
  /// Functions of the file, keyed by their frame's line: {line, name, self, total}.
  struct Fn {
    int64_t line;
    std::string name;
    double self, total;
  };
  std::vector<Fn> functions;
};
LineHeat line_heat(const FunctionTable& table, std::string_view file);

/// SOURCE and LINE of a frame name, false when it has none.
bool frame_source(std::string_view frame, std::string_view& source, int64_t& line);

}  // namespace lfs
