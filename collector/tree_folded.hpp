// write_folded: a depth-first walk of the call tree with one path buffer, so
// the folded export never builds one string per stack in memory.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace lfc {

template <class ValueFn, class Sink>
void write_folded(const Tree& t, const FrameNames& f, ValueFn&& value, Sink&& sink) {
  const uint32_t n = t.size();
  if (n <= 1) return;
  // Children lists from the parent links (a parent always precedes its child).
  std::vector<uint32_t> first(n, 0), next(n, 0), last(n, 0);
  for (uint32_t i = 1; i < n; ++i) {
    uint32_t p = t.parent(i);
    if (!first[p])
      first[p] = i;
    else
      next[last[p]] = i;
    last[p] = i;
  }
  // Whether a subtree holds any value, so empty branches are skipped.
  std::vector<char> live(n, 0);
  for (uint32_t i = n - 1; i >= 1; --i) {
    if (live[i] || value(i) != 0) {
      live[i] = 1;
      live[t.parent(i)] = 1;
    }
  }
  std::string path, line;
  std::vector<std::pair<uint32_t, std::size_t>> stack;  // node, path length before it
  for (uint32_t c = first[0]; c; c = next[c])
    if (live[c]) stack.push_back({c, 0});
  // Depth first, children in order of creation: push them reversed.
  std::vector<uint32_t> kids;
  while (!stack.empty()) {
    auto [node, len] = stack.back();
    stack.pop_back();
    path.resize(len);
    if (len) path += ';';
    path += f[t.frame(node)];
    uint64_t v = value(node);
    if (v) {
      line.assign(path);
      line += ' ';
      line += std::to_string(v);
      line += '\n';
      sink(line);
    }
    kids.clear();
    for (uint32_t c = first[node]; c; c = next[c])
      if (live[c]) kids.push_back(c);
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.push_back({*it, path.size()});
  }
}

}  // namespace lfc
