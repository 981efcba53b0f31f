// Engine glue: stored stacks -> lf::Tree -> SVG, folded text, function
// tables, speedscope JSON, and differential comparisons. Pure functions over
// a Store; nothing here knows HTTP.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "luaflame/svg.hpp"
#include "luaflame/tree.hpp"
#include "store/store.hpp"
#include "views/cache.hpp"

namespace lfs {

/// Which part of a run to look at.
struct View {
  int metric = 0;                                          ///< metric index; default samples
  int64_t from_ns = std::numeric_limits<int64_t>::min();   ///< buckets from here; default all
  int64_t until_ns = std::numeric_limits<int64_t>::max();  ///< buckets before this; default all
  std::string focus;     ///< "a;b;c": keep only stacks under this path; default none
  bool reverse = false;  ///< reverse each stack before merging (--reverse); default false
  bool flamechart =
      false;  ///< keep stored order, merge only neighbours (--flamechart); default false
  bool profiler = false;  ///< keep luaflame's own time (kProfilerFrame leaves); default false
};

/// The leaf frame of a sample that fell in luaflame's own hook: the
/// profiler's cost, not the program's (runs made with --show-profiler hold
/// it); views leave it out unless View::profiler.
inline constexpr std::string_view kProfilerFrame = "[luaflame] hook";

/// Query parameters as httplib gives them.
using Params = std::multimap<std::string, std::string>;

/// Reads a run's stored tree for `view`'s metric and window, without
/// luaflame's own hook values unless view.profiler (every view reads here).
void read_view(Store& store, int64_t run, const View& view, StoredTree& st);

/// Loads a run's stacks for `view` into a finalized tree (children sorted by
/// name unless view.flamechart).
lf::Tree load_tree(Store& store, int64_t run, const View& view);

/// Runs one computation per key at a time: callers that ask for a key whose
/// computation is under way wait for it and share its result (or its exception),
/// so a page's requests that arrive together load a large run once.
template <class T>
class Flights {
 public:
  using Ptr = std::shared_ptr<const T>;
  Ptr run(const std::string& key, const std::function<Ptr()>& make) {
    std::unique_lock<std::mutex> lock(mu_);
    if (auto it = inflight_.find(key); it != inflight_.end()) {
      std::shared_future<Ptr> f = it->second;
      lock.unlock();
      return f.get();
    }
    std::promise<Ptr> done;
    inflight_.emplace(key, done.get_future().share());
    lock.unlock();
    Ptr out;
    try {
      out = make();
      done.set_value(out);
    } catch (...) {
      done.set_exception(std::current_exception());
      lock.lock();
      inflight_.erase(key);
      throw;
    }
    lock.lock();
    inflight_.erase(key);
    return out;
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_future<Ptr>> inflight_;
};

/// Cache key of a run's view at its revision (flamechart views are never cached).
std::string view_key(const RunInfo& run, const View& view);

/// Loaded trees of runs per view and revision (a live run's tree is valid until its next
/// chunk; older revisions are dropped when a newer one is kept), shared by the endpoints a
/// page calls at once (details, functions, graph), bounded by their total node count.
/// Concurrent requests for the same view load it once.
class TreeCache {
 public:
  explicit TreeCache(std::size_t max_nodes) : lru_(max_nodes, 2) {}
  /// The tree of `run` for `view`: from the cache when the run is finished.
  std::shared_ptr<const lf::Tree> get(Store& store, const RunInfo& run, const View& view);
  void forget(int64_t run);

 private:
  static std::size_t nodes(const lf::Tree& t) { return t.size(); }
  RunLru<lf::Tree, nodes> lru_;  // a tree over half the budget is not kept
  Flights<lf::Tree> flights_;
};

/// A view's function table: lf::function_stats (sorted by self) and the total.
struct FunctionTable {
  std::vector<lf::FunctionStat> functions;
  double total = 0;
  std::size_t bytes() const;  ///< what the cache counts
};

/// Function tables of runs per view and revision, which the run details and
/// /functions are made from: a large run's tree (often too large for the tree
/// cache) is walked once, not at every request. Bounded in bytes; a table over
/// a quarter of the budget is not kept.
class TableCache {
 public:
  explicit TableCache(std::size_t max_bytes) : lru_(max_bytes, 4) {}
  /// The table of `run` for `view`, computed from trees.get() when not cached.
  std::shared_ptr<const FunctionTable> get(TreeCache& trees, Store& store, const RunInfo& run,
                                           const View& view);
  void forget(int64_t run);
  std::size_t bytes() const { return lru_.cost(); }

 private:
  static std::size_t table_bytes(const FunctionTable& t) { return t.bytes(); }
  RunLru<FunctionTable, table_bytes> lru_;
  Flights<FunctionTable> flights_;
};

/// The function table of a loaded tree.
FunctionTable function_table(const lf::Tree& tree);

/// Fills SVG options from flamegraph.pl-named query parameters (title, subtitle, width,
/// height, fontsize, fonttype, minwidth, countname, nametype, colors, hash, inverted,
/// reverse, flamechart, total, factor, negate, notes), after metric-based defaults
/// (time -> unit "ns"; bytes metrics -> unit "bytes" and the "mem" palette).
/// Returns "" or the message for a 422.
std::string svg_options_from(const Params& params, int metric, lf::SvgOptions& opts, bool& reverse);

/// What a flame graph endpoint sends: the standalone SVG (flamegraph.pl's, for downloads and
/// the CLI) or the laid-out frames as data for the pages (lf::render_frames, luaflame/frames.hpp).
enum class Drawing { svg, frames };

/// The drawing's content type.
const char* drawing_type(Drawing d);

/// The drawing a resource's name asks for: ".json" the frames, else the SVG.
inline Drawing drawing_of(std::string_view path) {
  return path.size() >= 5 && path.substr(path.size() - 5) == ".json" ? Drawing::frames
                                                                     : Drawing::svg;
}

/// Renders the flame graph of a loaded tree (an empty-input SVG, or no frames, when it is
/// empty).
std::string render_run_graph(const lf::Tree& tree, const View& view, const lf::SvgOptions& opts,
                             Drawing drawing);

/// Folded text of a loaded tree (sorted).
std::string run_folded(const lf::Tree& tree);

/// {"metric", "total", "functions": [{"name","self","total"}...]} sorted by self, at most `limit`.
nlohmann::json run_functions(const FunctionTable& table, int metric, std::size_t limit);
nlohmann::json run_functions(const lf::Tree& tree, int metric, std::size_t limit);

/// Top functions by self and by total: {"self": [...], "total": [...]}.
nlohmann::json top_functions(const FunctionTable& table, std::size_t limit);
nlohmann::json top_functions(const lf::Tree& tree, std::size_t limit);

/// The run's view as a speedscope file (https://www.speedscope.app/file-format-schema.json).
nlohmann::json run_speedscope(const lf::Tree& tree, const RunInfo& run, int metric);

/// Differential flame graph of base -> head.
std::string render_diff_graph(const lf::Tree& base, const lf::Tree& head, bool normalize,
                              const lf::SvgOptions& opts, Drawing drawing);

/// Comparison of function shares (self value as a percentage of the total).
// bugprone-exception-escape: the implicit move constructor is
// nlohmann::json's, noexcept; the check follows its `m_value = {}` into the
// json_value constructor's object branch, which a null value never takes.
struct DiffReport {  // NOLINT(bugprone-exception-escape)
  nlohmann::json json;
  bool failed = false;
};
DiffReport diff_report(const lf::Tree& base, const lf::Tree& head, const RunInfo& base_run,
                       const RunInfo& head_run, int metric, double threshold, std::size_t limit);

}  // namespace lfs
