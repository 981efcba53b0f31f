// Sandwich and line heat (see sandwich.hpp).
#include "sandwich.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace lfs {

std::size_t PathSet::bytes() const {
  std::size_t n = sizeof *this + ids.size() * 4 + offs.size() * 4 + values.size() * 8;
  for (const std::string& s : names) n += sizeof(std::string) + s.size();
  return n;
}

uint32_t PathSet::find(std::string_view name) const {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<uint32_t>(i);
  return UINT32_MAX;
}

PathSet load_paths(Store& store, int64_t run, const View& view) {
  PathSet p;
  p.offs.push_back(0);
  StoredTree st;
  store.read_tree(run, view.metric, view.from_ns, view.until_ns, st);
  p.names = std::move(st.frames);
  std::vector<uint32_t> path;
  for (const auto& [id, v] : st.values) {
    if (v == 0) continue;
    path.clear();  // root first: walk up from the node, then reverse
    for (int64_t n = id; n >= 0; n = st.nodes[static_cast<std::size_t>(n)].parent)
      path.push_back(st.nodes[static_cast<std::size_t>(n)].frame);
    p.ids.insert(p.ids.end(), path.rbegin(), path.rend());
    p.offs.push_back(static_cast<uint32_t>(p.ids.size()));
    p.values.push_back(static_cast<double>(v));
  }
  p.ids.shrink_to_fit();
  return p;
}

std::shared_ptr<const PathSet> PathCache::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->key == key) {
      entries_.splice(entries_.begin(), entries_, it);
      return entries_.front().paths;
    }
  return nullptr;
}

std::shared_ptr<const PathSet> PathCache::get(Store& store, const RunInfo& run, const View& view) {
  if (run.status != "finished")
    return std::make_shared<const PathSet>(load_paths(store, run.id, view));
  View v = view;
  v.focus.clear();
  const std::string key = view_key(run, v);
  if (auto hit = find(key)) return hit;
  return flights_.run(key, [&]() -> std::shared_ptr<const PathSet> {
    if (auto hit = find(key)) return hit;
    auto paths = std::make_shared<const PathSet>(load_paths(store, run.id, v));
    std::lock_guard<std::mutex> lock(mu_);
    if (paths->bytes() <= max_bytes_ / 2) {
      entries_.push_front({run.id, key, paths});
      bytes_ += paths->bytes();
      while (bytes_ > max_bytes_ && !entries_.empty()) {
        bytes_ -= entries_.back().paths->bytes();
        entries_.pop_back();
      }
    }
    return paths;
  });
}

void PathCache::forget(int64_t run) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->run == run) {
      bytes_ -= it->paths->bytes();
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

namespace {

// Builds one side from the stacks holding the function: `items` are (stack,
// position of the next frame away from the function). Items are grouped by
// their next frame; a group becomes a child when its value reaches `min_value`
// (frames narrower than that would not be drawn), else its value stays in the
// node as hidden self. Work is proportional to the frames of drawn nodes.
struct Builder {
  const PathSet& p;
  SandwichSide& out;
  Side side;
  double min_value;
  uint32_t max_depth;
  std::vector<uint32_t> local;  // run frame id -> tree frame id
  struct Item {
    uint32_t s, pos, key;
  };  // key: the next frame (UINT32_MAX: none), cached for the sort
  std::vector<Item> items;

  uint32_t next(const Item& it) const {
    if (side == Side::callees) return it.pos == p.offs[it.s + 1] ? UINT32_MAX : p.ids[it.pos];
    return it.pos == p.offs[it.s] ? UINT32_MAX : p.ids[it.pos - 1];
  }
  uint32_t frame(uint32_t id) {
    if (local[id] == UINT32_MAX) local[id] = out.tree.intern(p.names[id]);
    return local[id];
  }
  void build(uint32_t node, std::size_t begin, std::size_t end, uint32_t depth) {
    for (std::size_t i = begin; i < end; ++i) items[i].key = next(items[i]);
    std::sort(items.begin() + static_cast<std::ptrdiff_t>(begin),
              items.begin() + static_cast<std::ptrdiff_t>(end),
              [](const Item& a, const Item& b) { return a.key < b.key; });
    double kept_self = 0;
    for (std::size_t i = begin; i < end;) {
      const uint32_t id = items[i].key;
      std::size_t j = i;
      double sum = 0;
      while (j < end && items[j].key == id) sum += p.values[items[j++].s];
      if (id == UINT32_MAX) {
        kept_self += sum;
      } else if (sum >= min_value && depth < max_depth) {
        for (std::size_t k = i; k < j; ++k) items[k].pos += side == Side::callees ? 1 : -1;
        build(out.tree.child(node, frame(id)), i, j, depth + 1);
      } else {
        kept_self += sum;
        out.pruned = true;
      }
      i = j;
    }
    if (kept_self != 0) out.tree.add_self(node, kept_self);
  }
};

}  // namespace

SandwichSide make_sandwich(const PathSet& p, std::string_view fn, Side side, double min_fraction,
                           uint32_t max_depth) {
  SandwichSide out;
  const uint32_t f = p.find(fn);
  if (f == UINT32_MAX) return out;
  Builder b{p, out, side, 0, max_depth, std::vector<uint32_t>(p.names.size(), UINT32_MAX), {}};
  // Stacks holding f: callers start above its outermost call, callees below its innermost.
  for (uint32_t s = 0; s + 1 < p.offs.size(); ++s) {
    const uint32_t* a = p.ids.data() + p.offs[s];
    const uint32_t* e = p.ids.data() + p.offs[s + 1];
    const uint32_t* first = std::find(a, e, f);
    if (first == e) continue;
    const double v = p.values[s];
    out.total += v;
    if (e[-1] == f) out.self += v;
    if (side == Side::callers) {
      b.items.push_back({s, static_cast<uint32_t>(first - p.ids.data()), 0});
    } else {
      const uint32_t* last = e - 1;
      while (*last != f) --last;
      b.items.push_back({s, static_cast<uint32_t>(last + 1 - p.ids.data()), 0});
    }
  }
  out.found = !b.items.empty();
  if (!out.found) return out;
  b.min_value = std::fabs(out.total) * min_fraction;
  b.build(out.tree.child(lf::Tree::kRoot, b.frame(f)), 0, b.items.size(), 0);
  out.tree.finalize();
  out.tree.sort_children();
  return out;
}

bool frame_source(std::string_view frame, std::string_view& source, int64_t& line) {
  std::size_t sp = frame.rfind(' ');
  if (sp == std::string_view::npos) return false;
  std::string_view loc = frame.substr(sp + 1);
  if (loc.size() > 2 && loc.front() == '(' && loc.back() == ')')
    loc = loc.substr(1, loc.size() - 2);
  std::size_t colon = loc.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 >= loc.size()) return false;
  int64_t v = 0;
  for (char c : loc.substr(colon + 1)) {
    if (c < '0' || c > '9' || v > 100000000) return false;
    v = v * 10 + (c - '0');
  }
  source = loc.substr(0, colon);
  line = v;
  return true;
}

LineHeat line_heat(const FunctionTable& table, std::string_view file) {
  LineHeat h;
  std::map<int64_t, double> lines;
  for (const lf::FunctionStat& f : table.functions) {
    std::string_view src;
    int64_t line = 0;
    if (!frame_source(f.name, src, line) || src != file) continue;
    if (f.self != 0) lines[line] += f.self;
    h.functions.push_back({line, f.name, f.self, f.total});
  }
  h.lines.assign(lines.begin(), lines.end());
  std::sort(h.functions.begin(), h.functions.end(),
            [](const LineHeat::Fn& a, const LineHeat::Fn& b) {
              return a.line < b.line || (a.line == b.line && a.name < b.name);
            });
  return h;
}

}  // namespace lfs
