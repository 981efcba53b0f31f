// Sandwich and line heat (see sandwich.hpp).
#include "views/sandwich.hpp"

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

struct PathSet::Memo {
  std::mutex mu;
  struct Entry {
    std::string key;  // side + function
    std::shared_ptr<const SandwichSide> value;
  };
  std::list<Entry> entries;  // most recent first
  Flights<SandwichSide> flights;
};

std::shared_ptr<const SandwichSide> PathSet::side(std::string_view fn, Side which) const {
  if (!memo)  // a PathSet made by hand (tests): nothing kept
    return std::make_shared<const SandwichSide>(make_sandwich(*this, fn, which, kFineFraction));
  std::string key = (which == Side::callers ? "<" : ">") + std::string(fn);
  auto find = [&]() -> std::shared_ptr<const SandwichSide> {
    std::lock_guard<std::mutex> lock(memo->mu);
    for (auto it = memo->entries.begin(); it != memo->entries.end(); ++it)
      if (it->key == key) {
        memo->entries.splice(memo->entries.begin(), memo->entries, it);
        return it->value;
      }
    return nullptr;
  };
  if (auto hit = find()) return hit;
  return memo->flights.run(key, [&]() -> std::shared_ptr<const SandwichSide> {
    if (auto hit = find()) return hit;
    auto made =
        std::make_shared<const SandwichSide>(make_sandwich(*this, fn, which, kFineFraction));
    std::lock_guard<std::mutex> lock(memo->mu);
    memo->entries.push_front({key, made});
    if (memo->entries.size() > kMemoSides) memo->entries.pop_back();
    return made;
  });
}

void PathSet::keep_sides() {
  if (!memo) memo = std::make_shared<Memo>();
}

uint32_t PathSet::root_frame() const {
  std::vector<double> first(names.size());
  for (std::size_t s = 0; s + 1 < offs.size(); ++s)
    if (offs[s] != offs[s + 1]) first[ids[offs[s]]] += std::fabs(values[s]);
  auto best = std::max_element(first.begin(), first.end());
  return best == first.end() || *best == 0 ? UINT32_MAX
                                           : static_cast<uint32_t>(best - first.begin());
}

PathSet load_paths(Store& store, int64_t run, const View& view) {
  PathSet p;
  p.keep_sides();
  p.offs.push_back(0);
  StoredTree st;
  read_view(store, run, view, st);
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
// node as hidden self. Groups are made by a counting sort on the frame id (one
// pass to count, one to place), so a level costs its items plus its distinct
// frames, not a comparison sort: the root's callees (every stack, 45 levels
// deep) is the worst case. Work is proportional to the frames of drawn nodes.
struct Builder {
  const PathSet& p;
  SandwichSide& out;
  Side side;
  double min_value;
  uint32_t max_depth;
  std::vector<uint32_t> local;  // run frame id -> tree frame id
  struct Item {
    uint32_t s, pos;
  };
  std::vector<Item> items, scratch;
  std::vector<uint32_t> keys;   // next frame of items[i] (none: p.names.size())
  std::vector<uint32_t> count;  // per key, zero between calls of build()
  std::vector<double> sums;     // per key, zero between calls of build()
  struct Group {
    uint32_t key;
    std::size_t begin, end;
    double sum;
  };

  uint32_t next(const Item& it) const {
    const auto none = static_cast<uint32_t>(p.names.size());
    if (side == Side::callees) return it.pos == p.offs[it.s + 1] ? none : p.ids[it.pos];
    return it.pos == p.offs[it.s] ? none : p.ids[it.pos - 1];
  }
  uint32_t frame(uint32_t id) {
    if (local[id] == UINT32_MAX) local[id] = out.tree.intern(p.names[id]);
    return local[id];
  }
  // Orders items[begin, end) by next frame; returns the groups, counts and sums reset.
  std::vector<Group> group(std::size_t begin, std::size_t end) {
    std::vector<uint32_t> seen;  // distinct keys, in first-seen order
    for (std::size_t i = begin; i < end; ++i) {
      const uint32_t k = keys[i] = next(items[i]);
      if (count[k]++ == 0) seen.push_back(k);
      sums[k] += p.values[items[i].s];
    }
    std::vector<Group> groups;
    groups.reserve(seen.size());
    std::size_t at = begin;
    for (uint32_t k : seen) {
      groups.push_back({k, at, at + count[k], sums[k]});
      at += count[k];
      count[k] = static_cast<uint32_t>(groups.back().begin);  // now: the next free slot
      sums[k] = 0;
    }
    if (groups.size() == 1) {
      count[seen[0]] = 0;
      return groups;  // one group: already in place
    }
    for (std::size_t i = begin; i < end; ++i) scratch[count[keys[i]]++] = items[i];
    std::copy(scratch.begin() + static_cast<std::ptrdiff_t>(begin),
              scratch.begin() + static_cast<std::ptrdiff_t>(end),
              items.begin() + static_cast<std::ptrdiff_t>(begin));
    for (uint32_t k : seen) count[k] = 0;
    return groups;
  }
  void build(uint32_t node, std::size_t begin, std::size_t end, uint32_t depth) {
    const auto none = static_cast<uint32_t>(p.names.size());
    double kept_self = 0;
    for (const Group& g : group(begin, end)) {
      if (g.key == none) {
        kept_self += g.sum;
      } else if (g.sum >= min_value && depth < max_depth) {
        for (std::size_t k = g.begin; k < g.end; ++k)
          items[k].pos += side == Side::callees ? 1 : -1;
        build(out.tree.child(node, frame(g.key)), g.begin, g.end, depth + 1);
      } else {
        kept_self += g.sum;
        out.pruned = true;
      }
    }
    if (kept_self != 0) out.tree.add_self(node, kept_self);
  }
};

/// A stack holding the function: its frames [begin, end), the outermost call
/// `first` and the innermost `last` (the same frame unless it recurses).
struct Call {
  uint32_t stack;
  double value;
  const uint32_t* begin;
  const uint32_t* first;
  const uint32_t* last;
  const uint32_t* end;
};

// The one walk over the view's stacks for a function (the sandwich's sides and
// its head): each stack holding f is visited once, so recursion is merged.
template <class Visit>
void for_each_stack_with(const PathSet& p, uint32_t f, Visit visit) {
  for (uint32_t s = 0; s + 1 < p.offs.size(); ++s) {
    const uint32_t* a = p.ids.data() + p.offs[s];
    const uint32_t* e = p.ids.data() + p.offs[s + 1];
    const uint32_t* first = std::find(a, e, f);
    if (first == e) continue;
    const uint32_t* last = e - 1;
    while (*last != f) --last;
    visit(Call{s, p.values[s], a, first, last, e});
  }
}

}  // namespace

SandwichSide make_sandwich(const PathSet& p, std::string_view fn, Side side, double min_fraction,
                           uint32_t max_depth) {
  SandwichSide out;
  const uint32_t f = p.find(fn);
  if (f == UINT32_MAX) return out;
  Builder b{p,  out, side, 0,  max_depth, std::vector<uint32_t>(p.names.size(), UINT32_MAX),
            {}, {},  {},   {}, {}};
  // Callers start above its outermost call, callees below its innermost.
  for_each_stack_with(p, f, [&](const Call& c) {
    out.total += c.value;
    if (c.last + 1 == c.end) out.self += c.value;
    const uint32_t* start = side == Side::callers ? c.first : c.last + 1;
    b.items.push_back({c.stack, static_cast<uint32_t>(start - p.ids.data())});
  });
  out.found = !b.items.empty();
  if (!out.found) return out;
  b.min_value = std::fabs(out.total) * min_fraction;
  b.scratch.resize(b.items.size());
  b.keys.resize(b.items.size());
  b.count.assign(p.names.size() + 1, 0);
  b.sums.assign(p.names.size() + 1, 0);
  b.build(out.tree.child(lf::Tree::kRoot, b.frame(f)), 0, b.items.size(), 0);
  out.tree.finalize();
  out.tree.sort_children();
  return out;
}

SandwichInfo sandwich_info(const PathSet& p, std::string_view fn) {
  SandwichInfo out;
  for (double v : p.values) out.view_total += v;
  const uint32_t f = p.find(fn);
  if (f == UINT32_MAX) return out;
  // Sums per frame id, and the ids touched, so only those are read back.
  std::vector<double> up(p.names.size()), down(p.names.size());
  std::vector<char> seen_up(p.names.size()), seen_down(p.names.size());
  std::vector<uint32_t> ups, downs;
  auto add = [](uint32_t id, double v, std::vector<double>& sums, std::vector<char>& seen,
                std::vector<uint32_t>& ids) {
    if (!seen[id]) {
      seen[id] = 1;
      ids.push_back(id);
    }
    sums[id] += v;
  };
  for_each_stack_with(p, f, [&](const Call& c) {
    out.found = true;
    out.total += c.value;
    if (c.last + 1 == c.end)
      out.self += c.value;
    else
      add(c.last[1], c.value, down, seen_down, downs);
    if (c.first != c.begin) add(c.first[-1], c.value, up, seen_up, ups);
  });
  auto collect = [&](const std::vector<uint32_t>& ids, const std::vector<double>& sums,
                     std::vector<std::pair<std::string, double>>& list) {
    for (uint32_t id : ids) list.emplace_back(p.names[id], sums[id]);
    std::sort(list.begin(), list.end(), [](const auto& x, const auto& y) {
      return std::fabs(x.second) > std::fabs(y.second) ||
             (std::fabs(x.second) == std::fabs(y.second) && x.first < y.first);
    });
  };
  collect(ups, up, out.callers);
  collect(downs, down, out.callees);
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
