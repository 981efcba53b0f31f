// The streamer's chunks (streamer.hpp): what changed since the last chunks,
// stacks deeper than the server takes folded, cut into self-contained
// chunks. Runs on the streaming thread; reads the tree only (tree.hpp).
#include <string>

#include "core/profile.hpp"
#include "core/streamer.hpp"
#include "core/tree.hpp"

namespace lfc {

// The values each node gained since they were last put into a chunk
// (`delta`, recorded as sent), and which nodes have any (`keep`).
bool Streamer::take_deltas(std::vector<uint64_t>& delta, std::vector<char>& keep) {
  const Tree& t = s_.tree;
  const int nm = t.nmetrics();
  const uint32_t n = static_cast<uint32_t>(keep.size());
  sent_.resize(static_cast<std::size_t>(n) * nm, 0);
  bool any = false;
  for (uint32_t i = 1; i < n; ++i) {
    for (int m = 0; m < nm; ++m) {
      const std::size_t k = static_cast<std::size_t>(i) * nm + m;
      const uint64_t v = t.value(i, m);
      if (v > sent_[k]) {
        delta[k] = v - sent_[k];
        sent_[k] = v;
        keep[i] = 1;
        any = true;
      }
    }
  }
  return any;
}

// Stacks deeper than the server takes (max_depth_): each node below depth
// max_depth_ - 1 gives its values to one "[luaflame] deeper frames cut" node
// under its ancestor at that depth, and is not sent itself (a chunk with one
// node too deep was refused whole, and the stream lost). Parents come before
// their children in the tree, so one pass finds every node's depth.
void Streamer::fold_deep(const std::vector<uint64_t>& delta, std::vector<char>& keep, Cut& cut) {
  const Tree& t = s_.tree;
  const uint32_t n = static_cast<uint32_t>(keep.size());
  const uint32_t limit = max_depth_ - 1;
  std::vector<uint32_t> depth(n, 0), anc(n, 0);
  for (uint32_t i = 1; i < n; ++i) {
    const uint32_t p = t.parent(i);
    depth[i] = depth[p] + 1;
    if (depth[i] <= limit) continue;
    anc[i] = depth[p] == limit ? p : anc[p];
    if (!keep[i]) continue;
    keep[i] = 0;
    keep[anc[i]] = 1;
    cut.under[anc[i]].push_back(i);
  }
  if (cut.under.empty()) return;
  const int nm = t.nmetrics();
  for (auto& [a, nodes] : cut.under) {
    std::vector<uint64_t>& sum = cut.values[a];
    sum.assign(static_cast<std::size_t>(nm), 0);
    for (uint32_t i : nodes)
      for (int m = 0; m < nm; ++m) sum[m] += delta[static_cast<std::size_t>(i) * nm + m];
  }
}

// The kept nodes in depth-first order (a parent before its children).
std::vector<uint32_t> Streamer::preorder(const std::vector<char>& keep) const {
  const Tree& t = s_.tree;
  const uint32_t n = static_cast<uint32_t>(keep.size());
  // Children of kept nodes (0 = none: the root is nobody's child).
  std::vector<uint32_t> first(n, 0), next(n, 0), last(n, 0);
  for (uint32_t i = 1; i < n; ++i) {
    if (!keep[i]) continue;
    const uint32_t p = t.parent(i);
    if (!first[p])
      first[p] = i;
    else
      next[last[p]] = i;
    last[p] = i;
  }
  std::vector<uint32_t> order, st;
  if (first[0]) st.push_back(first[0]);
  while (!st.empty()) {
    const uint32_t node = st.back();
    order.push_back(node);
    if (first[node]) {
      st.push_back(first[node]);
      continue;
    }
    while (!st.empty()) {
      if (uint32_t sib = next[st.back()]) {
        st.back() = sib;
        break;
      }
      st.pop_back();
    }
  }
  return order;
}

// The delta since the last chunks: nodes with a change and their
// ancestors, in depth-first order, cut into chunks of kChunkNodes; each
// chunk opens with its first node's ancestors (zero values) and numbers its
// own frames, so it decodes alone.
void Streamer::build_chunks(uint64_t until_ns) {
  // The run first: its answer says how deep a stack the server takes (a
  // failure here is retried by send_chunk; these chunks then keep the default).
  if (run_id_ < 0 && !given_up_) create_run();
  const uint32_t n = s_.tree.size();
  const int nm = s_.tree.nmetrics();
  std::vector<uint64_t> delta(static_cast<std::size_t>(n) * nm, 0);
  std::vector<char> keep(n, 0);
  if (!take_deltas(delta, keep)) return;
  Cut cut;
  fold_deep(delta, keep, cut);
  for (uint32_t i = n - 1; i >= 1; --i)
    if (keep[i]) keep[s_.tree.parent(i)] = 1;
  const std::vector<uint32_t> order = preorder(keep);
  ChunkMaker mk{*this, delta, cut, n};
  for (std::size_t at = 0; at < order.size();) at = mk.make(order, at, until_ns);
  last_until_ = until_ns;
}

// One chunk from order[at]: its first node's ancestors, then up to
// kChunkNodes nodes with their deltas (and the cut node under each node
// deeper ones were folded into). Tree node -> chunk node and frame -> chunk
// frame are stamped per chunk, so nothing is cleared between chunks.
Streamer::ChunkMaker::ChunkMaker(Streamer& st, const std::vector<uint64_t>& d, const Cut& c,
                                 uint32_t n)
    : s(st),
      delta(d),
      cut(c),
      stamp(n, 0),
      index(n, 0),
      fstamp(st.s_.names.size(), 0),
      findex(st.s_.names.size(), 0) {}

void Streamer::ChunkMaker::add(uint32_t i, bool with_values) {
  const Tree& t = s.s_.tree;
  const int nm = t.nmetrics();
  const uint32_t f = t.frame(i);
  if (fstamp[f] != piece) {
    fstamp[f] = piece;
    findex[f] = static_cast<uint32_t>(c.frames.size());
    c.frames.push_back(s.s_.names[f]);
  }
  lfw::Node node;
  const uint32_t p = t.parent(i);
  node.parent = p == 0 ? -1 : static_cast<int64_t>(index[p]);
  node.frame = findex[f];
  if (with_values) {
    node.values.assign(delta.begin() + static_cast<long>(i) * nm,
                       delta.begin() + static_cast<long>(i + 1) * nm);
    pend.deltas.push_back({i, node.values});
  } else {
    node.values.assign(static_cast<std::size_t>(nm), 0);
  }
  stamp[i] = piece;
  index[i] = static_cast<uint32_t>(c.nodes.size());
  c.nodes.push_back(std::move(node));
  if (with_values) add_cut(i);
}

// The folded deeper nodes' values under `i`, as one marker node; each
// folded node's own delta stays in the pending list (the fallback file
// keeps the whole stack).
void Streamer::ChunkMaker::add_cut(uint32_t i) {
  auto it = cut.values.find(i);
  if (it == cut.values.end()) return;
  if (cut_frame_piece != piece) {
    cut_frame_piece = piece;
    cut_frame = static_cast<uint32_t>(c.frames.size());
    c.frames.push_back("[luaflame] deeper frames cut (server --max-depth " +
                       std::to_string(s.max_depth_) + ")");
  }
  lfw::Node node;
  node.parent = static_cast<int64_t>(index[i]);
  node.frame = cut_frame;
  node.values = it->second;
  c.nodes.push_back(std::move(node));
  const int nm = s.s_.tree.nmetrics();
  for (uint32_t d : cut.under.at(i))
    pend.deltas.push_back(
        {d, std::vector<uint64_t>(delta.begin() + static_cast<long>(d) * nm,
                                  delta.begin() + static_cast<long>(d + 1) * nm)});
}

std::size_t Streamer::ChunkMaker::make(const std::vector<uint32_t>& order, std::size_t at,
                                       uint64_t until_ns) {
  const Tree& t = s.s_.tree;
  ++piece;
  c = lfw::Chunk{};
  pend = Pending{};
  c.seq = s.seq_++;
  c.from_ns = s.last_until_;
  c.until_ns = until_ns;
  c.metrics = s.s_.metrics;
  chain.clear();
  for (uint32_t p = t.parent(order[at]); p != 0; p = t.parent(p)) chain.push_back(p);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) add(*it, false);
  for (uint32_t k = 0; k < kChunkNodes && at < order.size(); ++k, ++at) {
    const uint32_t i = order[at], p = t.parent(i);
    if (p != 0 && stamp[p] != piece) add(p, false);  // cannot happen in preorder; kept as a guard
    add(i, true);
  }
  lfw::encode(c, pend.body);
  s.queue_.push_back(std::move(pend));
  return at;
}

}  // namespace lfc
