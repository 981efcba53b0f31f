// Engine glue (see render.hpp).
#include "views/render.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "luaflame/diff.hpp"
#include "luaflame/folded.hpp"
#include "luaflame/frames.hpp"

namespace lfs {
namespace {

bool parse_bool(const std::string& v, bool& out) {
  if (v == "1" || v == "true" || v == "yes" || v == "on" || v.empty()) {
    out = true;
    return true;
  }
  if (v == "0" || v == "false" || v == "no" || v == "off") {
    out = false;
    return true;
  }
  return false;
}

bool parse_number(const std::string& v, double lo, double hi, double& out) {
  if (v.empty()) return false;
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (*end != '\0' || !std::isfinite(d) || d < lo || d > hi) return false;
  out = d;
  return true;
}

bool under_focus(std::string_view stack, std::string_view focus) {
  if (focus.empty()) return true;
  if (stack.size() < focus.size() || stack.compare(0, focus.size(), focus) != 0) return false;
  return stack.size() == focus.size() || stack[focus.size()] == ';';
}

// Leaves out the values whose node is luaflame's own hook (View::profiler).
void drop_profiler_values(StoredTree& st) {
  std::vector<uint8_t> own(st.frames.size(), 0);
  bool any = false;
  for (std::size_t i = 0; i < st.frames.size(); ++i)
    if (st.frames[i] == kProfilerFrame) own[i] = 1, any = true;
  if (!any) return;
  auto is_own = [&](const auto& kv) { return own[st.nodes[kv.first].frame] != 0; };
  st.values.erase(std::remove_if(st.values.begin(), st.values.end(), is_own), st.values.end());
}

}  // namespace

void read_view(Store& store, int64_t run, const View& view, StoredTree& st) {
  store.read_tree(run, view.metric, view.from_ns, view.until_ns, st);
  if (!view.profiler) drop_profiler_values(st);
}

lf::Tree load_tree(Store& store, int64_t run, const View& view) {
  StoredTree st;
  read_view(store, run, view, st);
  lf::Tree tree;
  auto path_of = [&](uint32_t id, std::vector<uint32_t>& path) {  // frame ids, root first
    path.clear();
    for (int64_t n = id; n >= 0; n = st.nodes[static_cast<std::size_t>(n)].parent)
      path.push_back(st.nodes[static_cast<std::size_t>(n)].frame);
    std::reverse(path.begin(), path.end());
  };
  std::vector<uint32_t> path;
  if (view.flamechart) {  // the engine keeps input order for text stacks (not sorted)
    tree.set_flamechart(true);
    std::string s;
    for (const auto& [id, v] : st.values) {
      path_of(id, path);
      if (view.reverse) std::reverse(path.begin(), path.end());
      s.clear();
      for (uint32_t f : path) {
        if (!s.empty()) s += ';';
        s += st.frames[f];
      }
      if (under_focus(s, view.focus)) tree.add(s, static_cast<double>(v));
    }
    tree.finalize();
    return tree;
  }
  std::vector<uint32_t> tree_frame(st.frames.size());
  for (std::size_t i = 0; i < st.frames.size(); ++i) tree_frame[i] = tree.intern(st.frames[i]);
  if (!view.reverse && view.focus.empty()) {
    // Walk the stored tree itself: only the nodes on a path to a value become tree nodes.
    std::vector<uint8_t> needed(st.nodes.size(), 0);
    for (const auto& [id, v] : st.values)
      for (int64_t n = id; n >= 0 && !needed[static_cast<std::size_t>(n)];
           n = st.nodes[static_cast<std::size_t>(n)].parent)
        needed[static_cast<std::size_t>(n)] = 1;
    std::vector<uint32_t> tnode(st.nodes.size(), lf::Tree::kRoot);
    for (std::size_t i = 0; i < st.nodes.size(); ++i) {
      if (!needed[i]) continue;
      const Batch::Node& n = st.nodes[i];
      tnode[i] =
          tree.child(n.parent < 0 ? lf::Tree::kRoot : tnode[static_cast<std::size_t>(n.parent)],
                     tree_frame[n.frame]);
    }
    for (const auto& [id, v] : st.values) tree.add_self(tnode[id], static_cast<double>(v));
  } else {
    std::vector<uint32_t> focus;
    bool focus_found = true;
    if (!view.focus.empty()) {
      std::unordered_map<std::string_view, uint32_t> by_name;
      for (std::size_t i = 0; i < st.frames.size(); ++i)
        by_name.emplace(st.frames[i], static_cast<uint32_t>(i));
      for (std::string_view f : lf::split_stack(view.focus)) {
        auto it = by_name.find(f);
        if (it == by_name.end()) {
          focus_found = false;
          break;
        }
        focus.push_back(it->second);
      }
    }
    for (const auto& [id, v] : st.values) {
      if (!focus_found) break;
      path_of(id, path);
      if (view.reverse) std::reverse(path.begin(), path.end());
      if (path.size() < focus.size() || !std::equal(focus.begin(), focus.end(), path.begin()))
        continue;
      uint32_t node = lf::Tree::kRoot;
      for (uint32_t f : path) node = tree.child(node, tree_frame[f]);
      tree.add_self(node, static_cast<double>(v));
    }
  }
  tree.finalize();
  tree.sort_children();  // flamegraph.pl's order; readers never change the tree after this
  return tree;
}

std::string view_key(const RunInfo& run, const View& view) {
  return std::to_string(run.id) + "@" + std::to_string(run.revision) + "|" +
         std::to_string(view.metric) + "|" + std::to_string(view.from_ns) + "|" +
         std::to_string(view.until_ns) + "|" + (view.reverse ? "r" : "") +
         (view.profiler ? "p" : "") + "|" + view.focus;
}

std::shared_ptr<const lf::Tree> TreeCache::get(Store& store, const RunInfo& run, const View& view) {
  if (view.flamechart) return std::make_shared<const lf::Tree>(load_tree(store, run.id, view));
  const std::string key = view_key(run, view);
  if (auto hit = lru_.get(key)) return hit;
  return flights_.run(key, [&]() -> std::shared_ptr<const lf::Tree> {
    if (auto hit = lru_.get(key)) return hit;  // loaded by a flight that just ended
    auto tree = std::make_shared<const lf::Tree>(load_tree(store, run.id, view));
    lru_.put(run.id, key, tree, -1, run.revision);
    return tree;
  });
}

void TreeCache::forget(int64_t run) {
  lru_.forget(run);
}

std::string svg_options_from(const Params& p, int metric, lf::SvgOptions& o, bool& reverse) {
  std::string_view units = metric_units(metric);
  o.count_name = std::string(units);
  if (units == "ns") o.unit = "ns";
  if (units == "bytes") {
    o.unit = "bytes";
    o.colors = "mem";
  }
  bool title_set = false;
  for (const auto& kv : p) {
    // Named references, not a structured binding: clang 14 (the fuzz build)
    // cannot capture a structured binding in the lambdas below.
    const std::string& key = kv.first;
    const std::string& v = kv.second;
    double d = 0;
    bool b = false;
    auto bad = [&](const std::string& want) {
      return "bad value for " + key + ": '" + v + "' (" + want + ")";
    };
    if (key == "title") {
      o.title = v;
      title_set = true;
    } else if (key == "subtitle")
      o.subtitle = v;
    else if (key == "countname")
      o.count_name = v;
    else if (key == "nametype")
      o.name_type = v;
    else if (key == "notes")
      o.notes = v;
    else if (key == "fonttype")
      o.font_type = v;
    else if (key == "width") {
      if (!parse_number(v, 100, 100000, d)) return bad("100..100000");
      o.width = static_cast<int>(d);
    } else if (key == "height") {
      if (!parse_number(v, 4, 200, d)) return bad("4..200");
      o.frame_height = static_cast<int>(d);
    } else if (key == "fontsize") {
      if (!parse_number(v, 1, 100, d)) return bad("1..100");
      o.font_size = d;
    } else if (key == "minwidth") {
      std::string num = v;
      bool percent = !num.empty() && num.back() == '%';
      if (percent) num.pop_back();
      if (!parse_number(num, 0, percent ? 100 : 100000, d)) return bad("pixels, or N%");
      o.min_width = d;
      o.min_width_percent = percent;
    } else if (key == "colors") {
      static const char* palettes[] = {"hot",  "mem",    "io",     "red",    "green", "blue",
                                       "aqua", "yellow", "purple", "orange", "lua"};
      if (std::none_of(std::begin(palettes), std::end(palettes),
                       [&](const char* s) { return v == s; }))
        return bad("hot mem io red green blue aqua yellow purple orange lua");
      o.colors = v;
    } else if (key == "total") {
      if (!parse_number(v, 0, 1e300, d)) return bad("a number >= 0");
      o.total = d;
    } else if (key == "factor") {
      if (!parse_number(v, 1e-300, 1e300, d)) return bad("a number > 0");
      o.factor = d;
    } else if (key == "hash" || key == "inverted" || key == "reverse" || key == "flamechart" ||
               key == "negate") {
      if (!parse_bool(v, b)) return bad("1 or 0");
      if (key == "hash") o.hash = b;
      if (key == "inverted") o.inverted = b;
      if (key == "reverse") {
        o.reverse = b;
        reverse = b;
      }
      if (key == "flamechart") o.flamechart = b;  // the caller copies it into View
      if (key == "negate") o.negate = b;
    }
  }
  if (o.inverted && !title_set) o.title = "Icicle Graph";
  return {};
}

const char* drawing_type(Drawing d) {
  return d == Drawing::svg ? "image/svg+xml" : "application/json";
}

std::string render_run_graph(const lf::Tree& tree, const View& view, const lf::SvgOptions& opts,
                             Drawing drawing) {
  std::string out;
  if (drawing == Drawing::frames) {
    lf::render_frames(tree, opts, out);  // an empty tree: no frames
    return out;
  }
  if (tree.total() <= 0) {
    lf::render_empty_svg(opts,
                         view.focus.empty() ? "No data in this run for this metric and time range"
                                            : "No data under the focused frame",
                         out);
    return out;
  }
  lf::render_svg(tree, opts, out);
  return out;
}

std::string run_folded(const lf::Tree& tree) {
  std::string out;
  lf::write_folded(tree, out);  // the tree's children are sorted: sorted lines
  return out;
}

std::size_t FunctionTable::bytes() const {
  std::size_t n = sizeof *this;
  for (const lf::FunctionStat& f : functions) n += sizeof f + f.name.size();
  return n;
}

FunctionTable function_table(const lf::Tree& tree) {
  FunctionTable t;
  t.functions = lf::function_stats(tree);
  t.total = tree.total();
  return t;
}

std::shared_ptr<const FunctionTable> TableCache::get(TreeCache& trees, Store& store,
                                                     const RunInfo& run, const View& view) {
  auto compute = [&] {
    return std::make_shared<const FunctionTable>(function_table(*trees.get(store, run, view)));
  };
  if (view.flamechart) return compute();
  const std::string key = view_key(run, view);
  if (auto hit = lru_.get(key)) return hit;
  return flights_.run(key, [&]() -> std::shared_ptr<const FunctionTable> {
    if (auto hit = lru_.get(key)) return hit;
    auto table = compute();
    lru_.put(run.id, key, table, -1, run.revision);
    return table;
  });
}

void TableCache::forget(int64_t run) {
  lru_.forget(run);
}

nlohmann::json run_functions(const FunctionTable& table, int metric, std::size_t limit) {
  nlohmann::json fns = nlohmann::json::array();
  const std::vector<lf::FunctionStat>& stats = table.functions;
  for (std::size_t i = 0; i < stats.size() && i < limit; ++i)
    fns.push_back({{"name", stats[i].name}, {"self", stats[i].self}, {"total", stats[i].total}});
  return {{"metric", metric_name(metric)}, {"total", table.total}, {"functions", fns}};
}

nlohmann::json run_functions(const lf::Tree& tree, int metric, std::size_t limit) {
  return run_functions(function_table(tree), metric, limit);
}

nlohmann::json top_functions(const FunctionTable& table, std::size_t limit) {
  const std::vector<lf::FunctionStat>& stats = table.functions;
  auto list = [&](auto&& better) {
    // Only the first `limit` in order: partial_sort over indices, not a copy of every name.
    std::vector<std::size_t> idx(stats.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::size_t n = std::min(limit, idx.size());
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(n), idx.end(),
                      [&](std::size_t a, std::size_t b) {
                        return better(stats[a], stats[b]) || (!better(stats[b], stats[a]) && a < b);
                      });
    nlohmann::json out = nlohmann::json::array();
    for (std::size_t i = 0; i < n; ++i)
      out.push_back({{"name", stats[idx[i]].name},
                     {"self", stats[idx[i]].self},
                     {"total", stats[idx[i]].total}});
    return out;
  };
  return {{"self", list([](const lf::FunctionStat& a, const lf::FunctionStat& b) {
             return a.self > b.self;
           })},
          {"total", list([](const lf::FunctionStat& a, const lf::FunctionStat& b) {
             return a.total > b.total;
           })}};
}

nlohmann::json top_functions(const lf::Tree& tree, std::size_t limit) {
  return top_functions(function_table(tree), limit);
}

nlohmann::json run_speedscope(const lf::Tree& tree, const RunInfo& run, int metric) {
  std::string_view units = metric_units(metric);
  const char* unit = units == "ns" ? "nanoseconds" : units == "bytes" ? "bytes" : "none";
  nlohmann::json frames = nlohmann::json::array();
  std::vector<int64_t> frame_map(tree.frame_count(), -1);  // tree frame -> speedscope frame
  nlohmann::json samples = nlohmann::json::array(), weights = nlohmann::json::array();
  std::vector<int64_t> path;
  for (uint32_t i = 1; i < tree.size(); ++i) {
    const lf::Tree::Node& n = tree.node(i);
    if (n.self[0] == 0) continue;
    path.clear();
    for (uint32_t j = i; j != lf::Tree::kRoot && j != lf::Tree::kNone; j = tree.node(j).parent) {
      uint32_t f = tree.node(j).frame;
      if (frame_map[f] < 0) {
        frame_map[f] = static_cast<int64_t>(frames.size());
        frames.push_back({{"name", tree.frame_name(f)}});
      }
      path.push_back(frame_map[f]);
    }
    std::reverse(path.begin(), path.end());
    samples.push_back(path);
    weights.push_back(n.self[0]);
  }
  std::string name = run.name + " (" + std::string(metric_name(metric)) + ")";
  return {{"$schema", "https://www.speedscope.app/file-format-schema.json"},
          {"shared", {{"frames", frames}}},
          {"profiles",
           {{{"type", "sampled"},
             {"name", name},
             {"unit", unit},
             {"startValue", 0},
             {"endValue", tree.total()},
             {"samples", samples},
             {"weights", weights}}}},
          {"name", name},
          {"activeProfileIndex", 0},
          {"exporter", "luaflame-server"}};
}

std::string render_diff_graph(const lf::Tree& base, const lf::Tree& head, bool normalize,
                              const lf::SvgOptions& opts, Drawing drawing) {
  lf::DiffOptions d;
  d.normalize = normalize;
  lf::Tree diff = lf::diff_trees(base, head, d);
  std::string out;
  if (drawing == Drawing::frames) {
    diff.sort_children();
    lf::render_frames(diff, opts, out);
    return out;
  }
  if (diff.total(0) <= 0 && diff.total(1) <= 0) {
    lf::render_empty_svg(opts, "Both runs are empty for this metric", out);
    return out;
  }
  diff.sort_children();
  lf::render_svg(diff, opts, out);
  return out;
}

DiffReport diff_report(const lf::Tree& base, const lf::Tree& head, const RunInfo& base_run,
                       const RunInfo& head_run, int metric, double threshold, std::size_t limit) {
  const lf::Comparison c = lf::compare_shares(base, head, threshold);  // the engine owns the gate
  auto row_json = [](const lf::ShareChange& r) {
    return nlohmann::json{{"name", r.name},
                          {"base_pct", lf::round_share(r.base_self)},
                          {"head_pct", lf::round_share(r.head_self)},
                          {"delta_pct", lf::round_share(r.delta())},
                          {"base_total_pct", lf::round_share(r.base_total)},
                          {"head_total_pct", lf::round_share(r.head_total)}};
  };
  nlohmann::json frames = nlohmann::json::array(), reg = nlohmann::json::array(),
                 imp = nlohmann::json::array();
  for (const lf::ShareChange& r : c.rows) {
    if (frames.size() < limit) frames.push_back(row_json(r));
    if (r.delta() > lf::kShareNoise && reg.size() < limit) reg.push_back(row_json(r));
    if (r.delta() < -lf::kShareNoise && imp.size() < limit) imp.push_back(row_json(r));
  }
  const std::string heading = "Profile comparison: " + lf::markdown_escape(head_run.name) + " #" +
                              std::to_string(head_run.id) + " vs " +
                              lf::markdown_escape(base_run.name) + " #" +
                              std::to_string(base_run.id) + " (" +
                              std::string(metric_name(metric)) + ", self share of total)";
  DiffReport rep;
  rep.failed = c.failed;
  rep.json = {{"base", base_run.id},
              {"head", head_run.id},
              {"metric", metric_name(metric)},
              {"base_total", base.total()},
              {"head_total", head.total()},
              {"frames", frames},
              {"regressions", reg},
              {"improvements", imp},
              {"markdown", lf::comparison_markdown(c, heading, std::min<std::size_t>(limit, 10))},
              {"threshold", threshold >= 0 ? nlohmann::json(threshold) : nlohmann::json(nullptr)},
              {"failed", c.failed}};
  return rep;
}

}  // namespace lfs
