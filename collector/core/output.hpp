// The output files (`output`: folded, SVG, speedscope, pprof) and
// luaflame.folded()'s text, from the call tree. Internal. Lua thread only
// (stop, flush, folded): it reads the tree, as the streamer thread may at
// the same time (tree.hpp: readers never block the writer), and writes
// nothing the hooks or the handler read.
#pragma once

#include <string>
#include <vector>

#include "luaflame/collector.hpp"

namespace lfc {

class FrameNames;
class Tree;

class Output {
 public:
  Output(const Options& opt, const std::vector<std::string>& metrics, const Tree& tree,
         const FrameNames& names)
      : opt_(opt), metrics_(metrics), tree_(tree), names_(names) {}

  /// The files of option `output`, and what became of each in `sum`
  /// (written, cut at the size limit, or not written and why).
  void write(Summary& sum) const;
  /// The folded text of metric column `col`, uncut.
  std::string folded_text(int col) const;

 private:
  const Options& opt_;
  const std::vector<std::string>& metrics_;
  const Tree& tree_;
  const FrameNames& names_;
};

}  // namespace lfc
