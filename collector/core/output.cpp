// The `output` files and luaflame.folded()'s text (output.hpp).
#include "core/output.hpp"

#include <cstdio>
#include <ctime>
#include <memory>

#include "core/clock.hpp"
#include "core/out_formats.hpp"
#include "core/summary.hpp"  // human_bytes
#include "core/tree.hpp"

namespace lfc {

namespace {

uint64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Room kept out of the size cut's budget for what does not grow with the
// nodes: the SVG's header and script, speedscope's frame table.
uint64_t fixed_room(const FrameNames& f) {
  uint64_t names = 0;
  for (uint32_t i = 0; i < f.size(); ++i) names += f[i].size();
  return (1u << 20) + 8 * names;
}

}  // namespace

// One file per metric (folded, SVG) or one for all (speedscope), from one
// snapshot of the tree cut to the size limit. Each file's fate is recorded:
// written (with what it holds), cut, or not written and why.
void Output::write(Summary& sum) const {
  if (opt_.output.empty()) return;
  const uint64_t t0 = now_ns(), c0 = thread_cpu_ns();
  const Format fmt = format_of(opt_.output);
  const int nm = static_cast<int>(metrics_.size());
  const uint64_t limit = output_limit(opt_.output, static_cast<uint64_t>(opt_.max_output));
  const uint64_t room = fixed_room(names_);
  const uint64_t budget = limit > 2 * room ? limit - room : limit / 2;
  OutTree t = snapshot(
      tree_, names_, [&tree = tree_](uint32_t n, int m) { return tree.value(n, m); },
      [&](std::size_t len, std::string_view name) { return node_cost(fmt, nm, len, name); },
      budget);
  std::string cut;
  if (t.dropped)
    cut = ": cut at the output limit of " + human_bytes(limit) + ": " + std::to_string(t.dropped) +
          " of " + std::to_string(tree_.size() - 1) + " call paths folded into '" +
          std::string(kTruncatedFrame) + "' (max_output raises the limit)";
  auto finish = [&](OutFile& f, const std::string& path, const std::string& what) {
    if (f.commit()) {
      sum.files.push_back(path);
      sum.file_notes.push_back(what + ", " + human_bytes(f.bytes()));
      if (!cut.empty()) sum.file_errors.push_back(path + cut);
    } else {
      sum.file_errors.push_back(path + ": " + f.error());
      ++sum.files_failed;
    }
  };
  if (one_file(fmt)) {
    OutFile f(opt_.output, limit);
    if (f.ok() && fmt == Format::pprof)
      write_pprof_file(t, metrics_, f);
    else if (f.ok())
      write_speedscope(t, metrics_, opt_.name.empty() ? "lua" : opt_.name, f);
    std::string all;
    for (const auto& m : metrics_) all += (all.empty() ? "" : " ") + m;
    finish(f, opt_.output, (fmt == Format::pprof ? "pprof: " : "speedscope: ") + all);
  } else {
    std::unique_ptr<SvgWriter> svg;
    if (fmt == Format::svg) svg = std::make_unique<SvgWriter>(t);
    for (int m = 0; m < nm; ++m) {
      const std::string& metric = metrics_[static_cast<std::size_t>(m)];
      std::string path = output_path(opt_.output, metric, m == 0);
      OutFile f(path, limit);
      if (f.ok()) {
        if (svg)
          svg->write(m, metric,
                     "luaflame: " + (opt_.name.empty() ? "lua" : opt_.name) + " (" + metric + ")",
                     f);
        else
          write_folded_file(t, m, f);
      }
      finish(f, path, metric);
    }
  }
  sum.output_ns += now_ns() - t0;
  sum.output_cpu_ns += thread_cpu_ns() - c0;
}

std::string Output::folded_text(int col) const {
  std::string out;
  OutTree t = snapshot(
      tree_, names_, [&tree = tree_](uint32_t n, int m) { return tree.value(n, m); },
      [](std::size_t, std::string_view) { return uint64_t{0}; }, 0);
  write_folded_text(t, col, [&](std::string_view line) { out.append(line); });
  return out;
}

}  // namespace lfc
