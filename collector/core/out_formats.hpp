// The output formats the collector writes, all from an OutTree (see
// out_tree.hpp): folded text, an SVG flame graph rendered by the engine,
// and a speedscope JSON file. The format follows the file's extension.
#pragma once

#include <string>
#include <vector>

#include "core/out_tree.hpp"
#include "luaflame/tree.hpp"

namespace lfc {

enum class Format {
  folded,      ///< .folded (and any extension not listed here): one file per metric
  svg,         ///< .svg: one flame graph per metric
  speedscope,  ///< .json: every metric in one file (speedscope's evented profiles)
  pprof,       ///< .pb.gz: every metric in one file, a sample type each (the engine's write_pprof)
};

/// The format for an output path, by extension.
Format format_of(const std::string& path);
/// Whether a format holds every metric in one file.
inline bool one_file(Format f) {
  return f == Format::speedscope || f == Format::pprof;
}

/// The units of a metric as titles and viewers show them ("ns", "bytes"...).
const char* metric_unit(const std::string& metric);

/// What one node costs in a file of format `f` with `nm` metrics, at most
/// (the size cut's estimate), given its folded path length and name.
uint64_t node_cost(Format f, int nm, std::size_t path_len, std::string_view name);

/// SVG flame graphs (engine/include/luaflame/svg.hpp) of one snapshot: the
/// engine's tree is built once, with every node that holds a value of any
/// metric, and each metric only swaps the self values in (a node at zero is
/// not drawn), so a second graph costs the render, not another build.
class SvgWriter {
 public:
  explicit SvgWriter(const OutTree& t);
  void write(int m, const std::string& metric, const std::string& title, OutFile& out);

 private:
  const OutTree& t_;
  lf::Tree lt_;
  std::vector<uint32_t> map_;  ///< OutTree node -> engine node (kNone: no value in any metric)
  std::vector<double> cur_;    ///< the self value each engine node holds now
};

/// An SVG flame graph of metric m.
void write_svg(const OutTree& t, int m, const std::string& metric, const std::string& title,
               OutFile& out);

/// A speedscope file (https://www.speedscope.app/file-format-schema.json)
/// with one evented profile per metric: each node opens, its children
/// follow, its self value, then it closes, so the file grows with the
/// number of nodes and the viewer's "left heavy" view is the flame graph.
void write_speedscope(const OutTree& t, const std::vector<std::string>& metrics,
                      const std::string& name, OutFile& out);

/// A gzipped pprof profile (engine/include/luaflame/pprof.hpp) with one sample type per
/// metric, named as lfw::kMetricList says (time -> cpu/nanoseconds, live_bytes ->
/// inuse_space/bytes, ...), so `go tool pprof` and the server read it back. Written
/// by libluaflame-pprof.so (pprof/pprof_writer.h), loaded here on first use; when
/// it cannot be, `out` fails with why.
void write_pprof_file(const OutTree& t, const std::vector<std::string>& metrics, OutFile& out);
/// Whether the pprof writer loads (at the option's check: a .pb.gz output
/// that cannot be written is refused before the run); false with why.
bool pprof_writer_loads(std::string& why);

}  // namespace lfc
