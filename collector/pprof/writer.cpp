// libluaflame-pprof.so: pprof_writer.h's table over the engine's
// write_pprof. write catches every exception (the contract in
// pprof_writer.h): a failure is a 0 with words, never something thrown
// into C.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "luaflame/pprof.hpp"
#include "luaflame/tree.hpp"
#include "plugin/c_entry.hpp"
#include "pprof/pprof_writer.h"

namespace {

using lfplugin::put_text;

uint64_t value(const luaflame_pprof_tree_v1& t, std::size_t node, std::size_t m) {
  return t.values[node * t.metrics + m];
}

// Metric m's tree in the engine's form: the nodes whose subtree holds a
// value of m (a parent precedes its children), their own values.
void build(const luaflame_pprof_tree_v1& t, std::size_t m, lf::Tree& out) {
  std::vector<char> live(t.nodes, 0);
  for (std::size_t i = t.nodes; i-- > 1;)
    if (live[i] || value(t, i, m)) live[i] = live[t.parent[i]] = 1;
  std::vector<uint32_t> map(t.nodes, lf::Tree::kNone), fmap(t.frames, lf::Tree::kNone);
  if (t.nodes) map[0] = lf::Tree::kRoot;
  for (std::size_t i = 1; i < t.nodes; ++i) {
    if (!live[i]) continue;
    uint32_t& f = fmap[t.frame[i]];
    if (f == lf::Tree::kNone) f = out.intern({t.names[t.frame[i]].data, t.names[t.frame[i]].len});
    map[i] = out.child(map[t.parent[i]], f);
    if (value(t, i, m)) out.add_self(map[i], static_cast<double>(value(t, i, m)));
  }
  out.finalize();
}

// Integers below 2^53 convert to the engine's doubles and back exactly.
std::string write(const luaflame_pprof_tree_v1& t) {
  std::vector<lf::Tree> trees(t.metrics);
  std::vector<lf::PprofSeries> series;
  for (std::size_t m = 0; m < t.metrics; ++m) {
    build(t, m, trees[m]);
    series.push_back({{t.metric[m].type, t.metric[m].unit}, &trees[m], 0});
  }
  return lf::write_pprof(series, lf::PprofWriteOptions{});
}

int write_entry(const luaflame_pprof_tree_v1* t, luaflame_pprof_bytes* out) {
  out->data = nullptr;
  out->len = 0;
  out->why[0] = '\0';
  return lfplugin::guarded(out->why, sizeof out->why, "unknown error", 0, [&] {
    const std::string bytes = write(*t);
    out->data = static_cast<unsigned char*>(std::malloc(bytes.empty() ? 1 : bytes.size()));
    if (!out->data) return put_text(out->why, sizeof out->why, "out of memory"), 0;
    std::memcpy(out->data, bytes.data(), bytes.size());
    out->len = bytes.size();
    return 1;
  });
}

void free_entry(luaflame_pprof_bytes* out) {
  std::free(out->data);
  out->data = nullptr;
  out->len = 0;
}

const luaflame_pprof_writer_v1 kTable = {1, write_entry, free_entry};

}  // namespace

extern "C" __attribute__((visibility("default"))) const luaflame_pprof_writer_v1* luaflame_pprof_v1(
    void) {
  return &kTable;
}
