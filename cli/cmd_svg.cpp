// `luaflame svg` and `luaflame diff`: the engine behind flamegraph.pl's and
// difffolded.pl's command lines.
//
// Input is read in blocks and parsed as it arrives, so a big profile never
// sits in memory twice (text + tree); the SVG is written out in pieces.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "luaflame/diff.hpp"
#include "luaflame/folded.hpp"
#include "luaflame/pprof.hpp"
#include "luaflame/svg.hpp"
#include "luaflame/tree.hpp"

namespace lfcli {

namespace {

const char* kSvgFooter =
    "Options have flamegraph.pl's names, also as -opt VALUE and --opt=VALUE.\n"
    "Exit status: 0; 2 on bad usage, unreadable input, or when no stack counts were found\n"
    "(an SVG saying so is still written, as flamegraph.pl does); 3 when --strict found bad "
    "lines.\n";

const char* kDiffFooter =
    "Widths from AFTER, red where a frame's self count grew, blue where it shrank.\n"
    "With --threshold, the functions whose self share of the total changed most are reported\n"
    "(Markdown, on stderr or to --report) and a share grown by more than PCT points fails.\n"
    "Exit status: 0; 1 past the threshold (a regression); 2 on bad usage, unreadable input or\n"
    "no stack counts; 3 when --strict found bad lines.\n";

struct Args {
  lf::SvgOptions svg;
  lf::ParseOptions parse;
  std::vector<std::string> files;
  std::string output;
  std::string min_width = "0.1";  // --minwidth as given: pixels, or N%
  std::string threshold;          // diff --threshold as given
  std::string report;             // diff --report FILE ("" = stderr)
  bool reverse = false;
  bool normalize = false;
  bool folded = false;
  bool strict = false;
};

// The options of `luaflame svg`, and of `luaflame diff` with `diff`.
void add_options(CLI::App& app, bool diff, Args& a) {
  lf::SvgOptions& o = a.svg;
  app.add_option("FILE", a.files,
                 diff ? "BEFORE and AFTER folded files" : "folded files (default: standard input)");
  app.add_option("--title", o.title,
                 "title (default \"Flame Graph\", \"Icicle Graph\" with --inverted)");
  app.add_option("--subtitle", o.subtitle, "second title line (default none)");
  app.add_option("--width", o.width, "image width in pixels (default 1200)");
  app.add_option("--height", o.frame_height, "frame height in pixels (default 16)");
  app.add_option("--fontsize", o.font_size, "font size (default 12)");
  app.add_option("--fonttype", o.font_type, "font family (default Verdana)");
  app.add_option("--fontwidth", o.font_width, "average glyph width / font size (default 0.59)");
  app.add_option("--minwidth", a.min_width,
                 "omit frames narrower than NUM pixels, or NUM% of the total (default 0.1)");
  app.add_option("--countname", o.count_name, "what the counts are (default samples)");
  app.add_option("--nametype", o.name_type,
                 "what the names are, in the details bar (default \"Function:\")");
  app.add_option(
      "--colors", o.colors,
      "lua (default) hot mem io red green blue aqua yellow purple orange; java js perl wakeup "
      "chain (per frame, by _[k] _[j] _[i] _[w] and names)");
  app.add_flag("--hash", o.hash,
               "colour by name hash, similar names alike (flamegraph.pl's namehash)");
  app.add_flag("--inverted", o.inverted, "icicle graph (root at the top)");
  app.add_flag("--reverse", a.reverse, "reverse every stack before merging");
  app.add_flag("--flamechart", o.flamechart,
               "keep input order (x is time), merge only consecutive stacks");
  app.add_option("--total", o.total,
                 "total for widths and percentages (default: the sum of the counts)");
  app.add_option("--factor", o.factor, "multiply the counts shown in titles (default 1)");
  app.add_flag("--negate", o.negate, "swap red and blue in differential graphs");
  app.add_option("--notes", o.notes, "notes, kept in a comment in the SVG");
  app.add_option("--unit", o.unit,
                 "counts are ns (titles show us/ms/s) or bytes (KiB/MiB); default none")
      ->check(CLI::IsMember({"ns", "bytes"}));
  app.add_flag(
      "--strict", a.strict,
      "reject the input when any line is bad (default: skip bad lines); also checks UTF-8 and "
      "control characters and applies the server's limits (4096-byte frames, 1 MiB lines, "
      "1024 frames)");
  app.add_option("-o,--output", a.output, "write to FILE instead of standard output");
  if (!diff) return;
  app.add_flag("-n,--normalize", a.normalize,
               "scale BEFORE to the total of AFTER first (difffolded.pl -n)");
  app.add_flag("--folded", a.folded,
               "print the two-column folded stacks (STACK BEFORE AFTER) instead");
  app.add_option(
      "--threshold", a.threshold,
      "fail (exit 1) when a function's self share of the total grew by more than PCT points "
      "(5 or 5%)");
  app.add_option("--report", a.report,
                 "with --threshold: write the Markdown report to FILE (- for stdout; "
                 "default stderr)");
}

// flamegraph.pl's Getopt takes -title as --title: single-dash words become
// double-dash ones (not -o, -n, -h, a lone -, or anything after --).
std::vector<std::string> long_dashes(int argc, char** argv) {
  std::vector<std::string> out(argv, argv + argc);
  for (std::size_t i = 1; i < out.size(); ++i) {
    std::string& s = out[i];
    if (s == "--") break;
    if (s.size() > 2 && s[0] == '-' && std::isalpha(static_cast<unsigned char>(s[1])))
      s.insert(0, "-");
  }
  return out;
}

// What CLI11 cannot check alone; false (after saying why) on bad usage.
bool finish_args(const CLI::App& app, Args& a, int& status) {
  std::string mw = a.min_width;
  a.svg.min_width_percent = !mw.empty() && mw.back() == '%';
  if (a.svg.min_width_percent) mw.pop_back();
  char* end = nullptr;
  a.svg.min_width = std::strtod(mw.c_str(), &end);
  if (mw.empty() || *end || !(a.svg.min_width >= 0)) {
    status =
        usage_error(app, "--minwidth wants pixels or a percentage >= 0, got '" + a.min_width + "'");
    return false;
  }
  if (a.svg.width <= 0 || a.svg.frame_height <= 0 || !(a.svg.font_size > 0) ||
      !(a.svg.total >= 0)) {
    status = usage_error(app, "width, height and fontsize must be positive, total not negative");
    return false;
  }
  if (!lf::known_palette(a.svg.colors)) {
    status = usage_error(
        app, "unknown palette '" + a.svg.colors +
                 "' (lua hot mem io red green blue aqua yellow purple orange java js perl "
                 "wakeup chain)");
    return false;
  }
  // Lenient like flamegraph.pl, which takes any frame length and depth:
  // limits far above real profiles (C++ template names run to kilobytes).
  // --strict puts back the server's limits.
  if (!a.strict) {
    a.parse.strict = false;
    a.parse.check_text = false;
    a.parse.max_frame_bytes = 1 << 20;
    a.parse.max_line_bytes = std::size_t(256) << 20;
    a.parse.max_depth = 65535;
  } else {
    a.parse.strict = a.parse.check_text = true;
    a.parse.blank_frames =
        false;  // refused by name: "empty frame (frame N)", "blank frame (frame N)"
  }
  return true;
}

// Input is read and parsed on a second thread while this one builds the
// tree: a block of text travels with the lines parsed from it (views into
// it) and comes back to be refilled once the tree has them.
struct Block {
  std::vector<char> text;
  std::vector<lf::FoldedLine> lines;
  lf::ParseResult result;
  bool last = false;
  int error = 0;  // errno of a failed read
};

// A small blocking queue between the reader thread and the tree builder.
class BlockQueue {
 public:
  void push(std::unique_ptr<Block> b) {
    {
      std::lock_guard<std::mutex> lock(m_);
      q_.push_back(std::move(b));
    }
    cv_.notify_one();
  }
  std::unique_ptr<Block> pop() {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return !q_.empty(); });
    std::unique_ptr<Block> b = std::move(q_.front());
    q_.pop_front();
    return b;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Block>> q_;
};

// The reader thread: fills free blocks with whole lines (a partial last
// line moves to the next block), parses them, hands them over.
void read_blocks(int fd, lf::ParseOptions po, BlockQueue& free, BlockQueue& full) {
  const std::size_t kBlock = 4 << 20;
  std::string carry;
  for (;;) {
    std::unique_ptr<Block> b = free.pop();
    b->lines.clear();
    b->text.resize(std::max(kBlock, carry.size() + kBlock / 2));
    std::memcpy(b->text.data(), carry.data(), carry.size());
    std::size_t size = carry.size(), upto = 0;
    carry.clear();
    bool eof = false;
    for (;;) {  // read until the block holds at least one whole line
      if (size == b->text.size()) b->text.resize(b->text.size() * 2);  // a very long line
      ssize_t got = ::read(fd, b->text.data() + size, b->text.size() - size);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) b->error = errno;
      if (got <= 0) {
        eof = true;
        upto = size;
        break;
      }
      std::size_t old = size;
      size += std::size_t(got);
      const char* nl = static_cast<const char*>(memrchr(b->text.data() + old, '\n', size - old));
      if (nl) {
        upto = std::size_t(nl - b->text.data()) + 1;
        break;
      }
    }
    carry.assign(b->text.data() + upto, size - upto);
    b->result = lf::parse_folded(std::string_view(b->text.data(), upto), po,
                                 [&](const lf::FoldedLine& l) { b->lines.push_back(l); });
    if (upto) po.first_line = b->result.last_line + 1;
    b->last = eof;
    full.push(std::move(b));
    if (eof) return;
  }
}

// Reads `path` ("-" or empty: standard input), every good line into the tree.
bool read_into(const char* prog, const std::string& path, const Args& a, lf::Tree& tree,
               lf::ParseResult& total) {
  int fd = 0;
  if (!path.empty() && path != "-") {
    fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) {
      std::fprintf(stderr, "%s: cannot read %s: %s\n", prog, path.c_str(), std::strerror(errno));
      return false;
    }
  }
  BlockQueue free, full;
  for (int i = 0; i < 3; ++i) free.push(std::make_unique<Block>());
  std::thread reader([&] {
    try {
      read_blocks(fd, a.parse, free, full);
    } catch (const std::exception&) {  // out of memory: end the input with an error
      auto b = std::make_unique<Block>();
      b->error = ENOMEM;
      b->last = true;
      full.push(std::move(b));
    }
  });
  std::string rev;
  bool ok = true;
  bool last = false;
  try {
    while (!last) {
      std::unique_ptr<Block> b = full.pop();
      for (const lf::FoldedLine& line : b->lines) {
        if (!a.reverse) {
          tree.add(line);
          continue;
        }
        lf::FoldedLine copy = line;
        rev = lf::reverse_stack(line.stack);
        copy.stack = rev;
        tree.add(copy);
      }
      lf::merge_results(total, b->result, a.parse.max_errors);
      if (b->error) {
        std::fprintf(stderr, "%s: cannot read %s: %s\n", prog, fd == 0 ? "stdin" : path.c_str(),
                     std::strerror(b->error));
        ok = false;
      }
      last = b->last;
      free.push(std::move(b));
    }
  } catch (...) {
    // Let the reader finish (it waits for free blocks) before unwinding.
    while (!last) {
      std::unique_ptr<Block> b = full.pop();
      last = b->last;
      free.push(std::move(b));
    }
    reader.join();
    if (fd > 0) ::close(fd);
    throw;
  }
  reader.join();
  if (fd > 0) ::close(fd);
  return ok;
}

// Reports bad lines: all of them in strict mode, a count otherwise (as
// flamegraph.pl does), with the first few reasons.
void report(const char* prog, const std::string& path, const lf::ParseResult& r, bool strict) {
  if (!r.rejected) return;
  const char* where = path.empty() || path == "-" ? "stdin" : path.c_str();
  std::size_t show = strict ? r.errors.size() : std::min<std::size_t>(r.errors.size(), 3);
  for (std::size_t i = 0; i < show; ++i)
    std::fprintf(stderr, "%s: %s:%zu: %s\n", prog, where, r.errors[i].line,
                 r.errors[i].reason.c_str());
  std::fprintf(stderr, "%s: %s: %s %zu line%s with invalid format\n", prog, where,
               strict ? "rejected:" : "Ignored", r.rejected, r.rejected == 1 ? "" : "s");
}

// What the inputs of one tree were: the sample type drawn when every input
// was a pprof file of that one type, so titles can say "ms" or "MiB".
struct Drawn {
  int files = 0, pprof = 0;
  lf::PprofValueType type;
  bool same_type = true;
  void saw_pprof(const lf::PprofValueType& t) {
    if (pprof++ && (t.type != type.type || t.unit != type.unit)) same_type = false;
    type = t;
  }
  bool only_pprof() const { return files > 0 && pprof == files && same_type; }
};

// Titles in the drawn pprof type's unit (the engine's svg_units_of) unless
// --unit or --countname said otherwise: not "700,000,000 samples".
void units_from_pprof(const CLI::App& app, const Drawn& d, lf::SvgOptions& o) {
  if (d.only_pprof() && !app.count("--unit") && !app.count("--countname"))
    lf::svg_units_of(d.type, o);
}

// A pprof file (gzipped or plain, e.g. from Go's runtime/pprof) is read with
// the engine's pprof codec; its last sample type is drawn, as go tool pprof
// draws by default (cpu/nanoseconds, inuse_space). False when `path` is not
// a pprof file; `ok` false when it is one but unreadable.
bool pprof_input(const char* prog, const std::string& path, lf::Tree& tree, bool& ok,
                 Drawn& drawn) {
  if (path == "-") return false;
  std::ifstream in(path, std::ios::binary);
  char head[64];
  in.read(head, sizeof head);
  if (!lf::looks_like_pprof(std::string_view(head, std::size_t(in.gcount())))) return false;
  in.clear();
  in.seekg(0);
  std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  lf::PprofProfile p;
  std::string err;
  if (!lf::read_pprof(body, lf::PprofLimits{}, p, err)) {
    std::fprintf(stderr, "%s: %s: %s\n", prog, path.c_str(), err.c_str());
    ok = false;
    return true;
  }
  std::size_t k = p.sample_types.size() - 1;
  drawn.saw_pprof(p.sample_types[k]);
  for (const lf::PprofStack& s : p.stacks)
    if (s.values[k] > 0) tree.add(lf::stack_text(p, s), double(s.values[k]));
  return true;
}

// Parses a list of inputs into one tree; false on unreadable input or, in
// strict mode, bad lines.
bool load(const char* prog, const std::vector<std::string>& files, const Args& a, lf::Tree& tree,
          Drawn& drawn) {
  tree.set_flamechart(a.svg.flamechart);
  bool ok = true;
  std::vector<std::string> inputs = files;
  if (inputs.empty()) inputs.push_back("-");
  // Room for the nodes up front (a generous guess from the input size):
  // pages never touched cost no memory, while growing by copying would
  // briefly need the old and the new arrays at once.
  std::size_t bytes = 0;
  for (const std::string& f : inputs) {
    struct stat st;
    int r = f == "-" ? ::fstat(0, &st) : ::stat(f.c_str(), &st);  // stdin may be a file too
    if (r == 0 && S_ISREG(st.st_mode)) bytes += std::size_t(st.st_size);
  }
  if (bytes)
    tree.reserve(
        std::min<std::size_t>(bytes / 32, std::size_t(32) << 20));  // capped: virtual, not free
  for (const std::string& f : inputs) {
    ++drawn.files;
    if (pprof_input(prog, f, tree, ok, drawn)) continue;
    lf::ParseResult r;
    if (!read_into(prog, f, a, tree, r)) ok = false;
    report(prog, f, r, a.parse.strict);
    if (a.parse.strict && !r.ok()) ok = false;
  }
  tree.finalize();
  return ok;
}

struct Output {
  FILE* f = stdout;
  bool open(const char* prog, const std::string& path) {
    if (path.empty() || path == "-") return true;
    f = std::fopen(path.c_str(), "wb");
    if (!f)
      std::fprintf(stderr, "%s: cannot write %s: %s\n", prog, path.c_str(), std::strerror(errno));
    return f != nullptr;
  }
  bool failed = false;
  // Straight to the file descriptor: the pieces are a megabyte each.
  void write(std::string_view s) {
    int fd = ::fileno(f);
    while (!s.empty() && !failed) {
      ssize_t n = ::write(fd, s.data(), s.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        failed = true;
      else
        s.remove_prefix(std::size_t(n));
    }
  }
  bool close(const char* prog) {
    bool ok = !failed && std::fflush(f) == 0 && !std::ferror(f);
    if (f != stdout) ok = std::fclose(f) == 0 && ok;
    if (!ok) std::fprintf(stderr, "%s: write error\n", prog);
    return ok;
  }
};

constexpr int kExitRegression = 1;
constexpr int kExitError =
    2;  // unreadable input, no stack counts (flamegraph.pl's 2), a write error
constexpr int kExitStrict = 3;

// Renders `tree`, or the "no data" image with kExitError when it holds nothing.
int render(const char* prog, const lf::Tree& tree, const Args& a) {
  Output out;
  if (!out.open(prog, a.output)) return kExitError;
  int col = tree.differential() ? 1 : 0;
  int status = kExitOk;
  if (!(tree.total(col) > 0)) {
    std::fprintf(stderr, "%s: ERROR: No stack counts found\n", prog);
    std::string svg;
    lf::render_empty_svg(a.svg, "ERROR: No valid input provided to luaflame.", svg);
    out.write(svg);
    status = kExitError;
  } else {
    lf::render_svg(tree, a.svg, [&](std::string_view s) { out.write(s); });
  }
  return out.close(prog) ? status : kExitError;
}

// Parses argv for svg (diff = false) or diff; -1 to go on, else the exit status.
int parse(CLI::App& app, bool diff, int argc, char** argv, Args& a) {
  house_style(app);
  app.footer(diff ? kDiffFooter : kSvgFooter);
  add_options(app, diff, a);
  std::vector<std::string> args = long_dashes(argc, argv);
  std::vector<char*> ptrs;
  ptrs.reserve(args.size());
  for (std::string& s : args) ptrs.push_back(s.data());
  int status = parse_args(app, argc, ptrs.data());
  if (status >= 0) return status;
  return finish_args(app, a, status) ? -1 : status;
}

int svg_main(int argc, char** argv) {
  CLI::App app("Renders folded stacks (files, or standard input) as an SVG flame graph.",
               "luaflame svg");
  Args a;
  const int rc = parse(app, false, argc, argv, a);
  if (rc >= 0) return rc;
  lf::Tree tree;
  Drawn drawn;
  if (!load(argv[0], a.files, a, tree, drawn)) return a.parse.strict ? kExitStrict : kExitError;
  units_from_pprof(app, drawn, a.svg);
  return render(argv[0], tree, a);
}

// The threshold gate: the engine's comparison of self shares, its Markdown
// report to stderr or --report. kExitRegression past the threshold.
int gate(const char* prog, const lf::Tree& before, const lf::Tree& after, double threshold,
         const Args& a) {
  const lf::Comparison c = lf::compare_shares(before, after, threshold);
  const std::string md =
      lf::comparison_markdown(c,
                              "Profile comparison: " + lf::markdown_escape(a.files[1]) + " vs " +
                                  lf::markdown_escape(a.files[0]) + " (self share of total)",
                              10);
  if (a.report.empty()) {
    std::fputs(md.c_str(), stderr);
  } else {
    Output out;
    if (!out.open(prog, a.report)) return kExitError;
    out.write(md);
    if (!out.close(prog)) return kExitError;
  }
  return c.failed ? kExitRegression : kExitOk;
}

int diff_main(int argc, char** argv) {
  CLI::App app(
      "Renders a differential flame graph of two folded files (difffolded.pl + flamegraph.pl).",
      "luaflame diff");
  Args a;
  const int rc = parse(app, true, argc, argv, a);
  if (rc >= 0) return rc;
  if (a.files.size() != 2) return usage_error(app, "need two folded files, BEFORE and AFTER");
  double threshold = -1;
  if (!a.threshold.empty() && !lf::parse_threshold(a.threshold, threshold))
    return usage_error(app,
                       "--threshold wants a percentage from 0 to 100, got '" + a.threshold + "'");
  if (!a.report.empty() && a.threshold.empty())
    return usage_error(app, "--report needs --threshold");
  lf::Tree before, after;
  Args one = a;
  one.svg.flamechart = false;
  Drawn drawn;
  if (!load(argv[0], {a.files[0]}, one, before, drawn) ||
      !load(argv[0], {a.files[1]}, one, after, drawn))
    return a.parse.strict ? kExitStrict : kExitError;
  units_from_pprof(app, drawn, a.svg);
  lf::DiffOptions dopts;
  dopts.normalize = a.normalize;
  lf::Tree diff = lf::diff_trees(before, after, dopts);
  int status = kExitOk;
  if (a.folded) {
    diff.sort_children();
    std::string text;
    lf::write_folded(diff, text);
    Output out;
    if (!out.open(argv[0], a.output)) return kExitError;
    out.write(text);
    if (!out.close(argv[0])) return kExitError;
  } else {
    status = render(argv[0], diff, a);
  }
  if (status != kExitOk || threshold < 0) return status;
  return gate(argv[0], before, after, threshold, a);
}

// Runs a command, turning an exception (out of memory on a huge input)
// into a message and kExitError.
int guarded(const char* name, int (*fn)(int, char**), int argc, char** argv) {
  argv[0] = const_cast<char*>(name);
  try {
    return fn(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return kExitError;
  }
}

}  // namespace

int cmd_svg(int argc, char** argv) {
  return guarded("luaflame svg", svg_main, argc, argv);
}
int cmd_diff(int argc, char** argv) {
  return guarded("luaflame diff", diff_main, argc, argv);
}

}  // namespace lfcli
