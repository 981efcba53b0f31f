// `luaflame svg` and `luaflame diff`: the engine behind flamegraph.pl's and
// difffolded.pl's command lines.
//
// Input is read in blocks and parsed as it arrives, so a big profile never
// sits in memory twice (text + tree); the SVG is written out in pieces.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "luaflame/diff.hpp"
#include "luaflame/folded.hpp"
#include "luaflame/pprof.hpp"
#include "luaflame/svg.hpp"
#include "luaflame/tree.hpp"

namespace lfcli {

namespace {

const char* kSvgUsage =
    "usage: luaflame svg [options] [FILE...] > graph.svg\n"
    "Renders folded stacks (files, or standard input) as an SVG flame graph.\n"
    "Options have flamegraph.pl's names (--opt VALUE, --opt=VALUE, -opt VALUE):\n"
    "  --title TEXT      title (default \"Flame Graph\", \"Icicle Graph\" with --inverted)\n"
    "  --subtitle TEXT   second title line (default none)\n"
    "  --width NUM       image width in pixels (default 1200)\n"
    "  --height NUM      frame height in pixels (default 16)\n"
    "  --fontsize NUM    font size (default 12)\n"
    "  --fonttype FONT   font family (default Verdana)\n"
    "  --fontwidth NUM   average glyph width / font size (default 0.59)\n"
    "  --minwidth NUM    omit frames narrower than NUM pixels, or NUM% of the total (default 0.1)\n"
    "  --countname TEXT  what the counts are (default samples)\n"
    "  --nametype TEXT   what the names are, in the details bar (default \"Function:\")\n"
    "  --colors PALETTE  lua (default) hot mem io red green blue aqua yellow purple orange\n"
    "                    java js perl wakeup chain (by _[k] _[j] _[i] _[w] and names)\n"
    "  --hash            colour by name hash, similar names alike (flamegraph.pl's namehash)\n"
    "  --inverted        icicle graph (root at the top)\n"
    "  --reverse         reverse every stack before merging\n"
    "  --flamechart      keep input order (x is time), merge only consecutive stacks\n"
    "  --total NUM       total for widths and percentages (default: the sum of the counts)\n"
    "  --factor NUM      multiply the counts shown in titles (default 1)\n"
    "  --negate          swap red and blue in differential graphs\n"
    "  --notes TEXT      notes, kept in a comment in the SVG\n"
    "  --unit UNIT       counts are ns (titles show us/ms/s) or bytes (KiB/MiB); default none\n"
    "  --strict          reject the input when any line is bad (default: skip bad lines);\n"
    "                    also checks UTF-8 and control characters, and limits frames to\n"
    "                    4096 bytes, lines to 1 MiB, stacks to 1024 frames (the server's limits)\n"
    "  -o, --output FILE write to FILE instead of standard output\n"
    "Exit status: 0, 1 on bad usage or unreadable input, 2 when no stack counts were found\n"
    "(an SVG saying so is still written), 3 when --strict found bad lines.\n";

const char* kDiffUsage =
    "usage: luaflame diff [options] BEFORE AFTER > diff.svg\n"
    "Renders a differential flame graph of two folded files (difffolded.pl + flamegraph.pl):\n"
    "widths from AFTER, red where a frame's self count grew, blue where it shrank.\n"
    "  -n, --normalize   scale BEFORE to the total of AFTER first (difffolded.pl -n)\n"
    "  --folded          print the two-column folded stacks (STACK BEFORE AFTER) instead\n"
    "and every option of 'luaflame svg' (see luaflame svg --help).\n";

struct Args {
  lf::SvgOptions svg;
  lf::ParseOptions parse;
  std::vector<std::string> files;
  std::string output;
  bool reverse = false;
  bool normalize = false;
  bool folded = false;
  bool help = false;
};

bool to_double(const std::string& s, double& v) {
  char* end = nullptr;
  errno = 0;
  v = std::strtod(s.c_str(), &end);
  return !s.empty() && end && *end == 0 && errno == 0;
}

// Parses argv; returns false (after saying why) on bad usage.
bool parse_args(int argc, char** argv, bool diff, Args& a) {
  // Lenient like flamegraph.pl, which takes any frame length and depth:
  // limits far above real profiles (C++ template names run to kilobytes).
  // --strict puts back the server's limits.
  a.parse.strict = false;
  a.parse.check_text = false;
  const lf::ParseOptions server_limits;
  a.parse.max_frame_bytes = 1 << 20;
  a.parse.max_line_bytes = std::size_t(256) << 20;
  a.parse.max_depth = 65535;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) a.files.push_back(argv[i]);
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      a.files.push_back(arg);
      continue;
    }
    std::string name = arg.substr(arg[1] == '-' ? 2 : 1), value;
    bool has_value = false;
    std::size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto flag = [&](const char* n) { return name == n; };
    auto need = [&](const char* n) -> bool {
      if (name != n) return false;
      if (!has_value) {
        if (i + 1 >= argc) {
          std::fprintf(stderr, "%s: option --%s needs a value\n", argv[0], n);
          std::exit(1);
        }
        value = argv[++i];
      }
      return true;
    };
    auto number = [&](double& v) {
      if (!to_double(value, v)) {
        std::fprintf(stderr, "%s: --%s: not a number: '%s'\n", argv[0], name.c_str(), value.c_str());
        std::exit(1);
      }
    };
    double d = 0;
    if (flag("h") || flag("help")) a.help = true;
    else if (need("title")) a.svg.title = value;
    else if (need("subtitle")) a.svg.subtitle = value;
    else if (need("width")) { number(d); a.svg.width = int(d); }
    else if (need("height")) { number(d); a.svg.frame_height = int(d); }
    else if (need("fontsize")) number(a.svg.font_size);
    else if (need("fonttype")) a.svg.font_type = value;
    else if (need("fontwidth")) number(a.svg.font_width);
    else if (need("minwidth")) {
      a.svg.min_width_percent = !value.empty() && value.back() == '%';
      if (a.svg.min_width_percent) value.pop_back();
      number(a.svg.min_width);
    }
    else if (need("countname")) a.svg.count_name = value;
    else if (need("nametype")) a.svg.name_type = value;
    else if (need("colors")) a.svg.colors = value;
    else if (need("total")) number(a.svg.total);
    else if (need("factor")) number(a.svg.factor);
    else if (need("notes")) a.svg.notes = value;
    else if (need("unit")) a.svg.unit = value;
    else if (need("output") || need("o")) a.output = value;
    else if (flag("hash")) a.svg.hash = true;
    else if (flag("inverted")) a.svg.inverted = true;
    else if (flag("reverse")) a.reverse = true;
    else if (flag("flamechart")) a.svg.flamechart = true;
    else if (flag("negate")) a.svg.negate = true;
    else if (flag("strict")) {
      a.parse.strict = a.parse.check_text = true;
      a.parse.blank_frames = false;  // refused by name: "empty frame (frame N)", "blank frame (frame N)"
      a.parse.max_frame_bytes = server_limits.max_frame_bytes;
      a.parse.max_line_bytes = server_limits.max_line_bytes;
      a.parse.max_depth = server_limits.max_depth;
    }
    else if (diff && (flag("n") || flag("normalize"))) a.normalize = true;
    else if (diff && flag("folded")) a.folded = true;
    else {
      std::fprintf(stderr, "%s: unknown option '%s' (see --help)\n", argv[0], arg.c_str());
      return false;
    }
  }
  if (a.help) return true;
  if (!lf::known_palette(a.svg.colors)) {
    std::fprintf(stderr, "%s: unknown palette '%s' (lua hot mem io red green blue aqua yellow purple orange java js perl wakeup chain)\n",
                 argv[0], a.svg.colors.c_str());
    return false;
  }
  if (!a.svg.unit.empty() && a.svg.unit != "ns" && a.svg.unit != "bytes") {
    std::fprintf(stderr, "%s: unknown unit '%s' (ns or bytes)\n", argv[0], a.svg.unit.c_str());
    return false;
  }
  if (a.svg.width <= 0 || a.svg.frame_height <= 0 || !(a.svg.font_size > 0) || a.svg.min_width < 0 ||
      a.svg.total < 0) {
    std::fprintf(stderr, "%s: width, height and fontsize must be positive, minwidth and total not negative\n",
                 argv[0]);
    return false;
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
    std::fprintf(stderr, "%s: %s:%zu: %s\n", prog, where, r.errors[i].line, r.errors[i].reason.c_str());
  std::fprintf(stderr, "%s: %s: %s %zu line%s with invalid format\n", prog, where,
               strict ? "rejected:" : "Ignored", r.rejected, r.rejected == 1 ? "" : "s");
}

// A pprof file (gzipped or plain, e.g. from Go's runtime/pprof) is read with
// the engine's pprof codec; its last sample type is drawn, as go tool pprof
// draws by default (cpu/nanoseconds, inuse_space). False when `path` is not
// a pprof file; `ok` false when it is one but unreadable.
bool pprof_input(const char* prog, const std::string& path, lf::Tree& tree, bool& ok) {
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
  for (const lf::PprofStack& s : p.stacks)
    if (s.values[k] > 0) tree.add(s.stack, double(s.values[k]));
  return true;
}

// Parses a list of inputs into one tree; false on unreadable input or, in
// strict mode, bad lines.
bool load(const char* prog, const std::vector<std::string>& files, const Args& a, lf::Tree& tree) {
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
  if (bytes) tree.reserve(std::min<std::size_t>(bytes / 32, std::size_t(32) << 20));  // capped: virtual, not free
  for (const std::string& f : inputs) {
    if (pprof_input(prog, f, tree, ok)) continue;
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
    if (!f) std::fprintf(stderr, "%s: cannot write %s: %s\n", prog, path.c_str(), std::strerror(errno));
    return f != nullptr;
  }
  bool failed = false;
  // Straight to the file descriptor: the pieces are a megabyte each.
  void write(std::string_view s) {
    int fd = ::fileno(f);
    while (!s.empty() && !failed) {
      ssize_t n = ::write(fd, s.data(), s.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) failed = true;
      else s.remove_prefix(std::size_t(n));
    }
  }
  bool close(const char* prog) {
    bool ok = !failed && std::fflush(f) == 0 && !std::ferror(f);
    if (f != stdout) ok = std::fclose(f) == 0 && ok;
    if (!ok) std::fprintf(stderr, "%s: write error\n", prog);
    return ok;
  }
};

// Renders `tree`, or the "no data" image with status 2 when it holds nothing.
int render(const char* prog, const lf::Tree& tree, const Args& a) {
  Output out;
  if (!out.open(prog, a.output)) return 1;
  int col = tree.differential() ? 1 : 0;
  int status = 0;
  if (!(tree.total(col) > 0)) {
    std::fprintf(stderr, "%s: ERROR: No stack counts found\n", prog);
    std::string svg;
    lf::render_empty_svg(a.svg, "ERROR: No valid input provided to luaflame.", svg);
    out.write(svg);
    status = 2;
  } else {
    lf::render_svg(tree, a.svg, [&](std::string_view s) { out.write(s); });
  }
  return out.close(prog) ? status : 1;
}

}  // namespace

namespace {

int svg_main(int argc, char** argv) {
  Args a;
  if (!parse_args(argc, argv, false, a)) return 1;
  if (a.help) {
    std::fputs(kSvgUsage, stdout);
    return 0;
  }
  lf::Tree tree;
  if (!load(argv[0], a.files, a, tree)) return a.parse.strict ? 3 : 1;
  return render(argv[0], tree, a);
}

int diff_main(int argc, char** argv) {
  Args a;
  if (!parse_args(argc, argv, true, a)) return 1;
  if (a.help) {
    std::fputs(kDiffUsage, stdout);
    return 0;
  }
  if (a.files.size() != 2) {
    std::fprintf(stderr, "%s: need two folded files, BEFORE and AFTER (see --help)\n", argv[0]);
    return 1;
  }
  lf::Tree before, after;
  Args one = a;
  one.svg.flamechart = false;
  if (!load(argv[0], {a.files[0]}, one, before) || !load(argv[0], {a.files[1]}, one, after))
    return a.parse.strict ? 3 : 1;
  lf::DiffOptions dopts;
  dopts.normalize = a.normalize;
  lf::Tree diff = lf::diff_trees(before, after, dopts);
  if (a.folded) {
    diff.sort_children();
    std::string text;
    lf::write_folded(diff, text);
    Output out;
    if (!out.open(argv[0], a.output)) return 1;
    out.write(text);
    return out.close(argv[0]) ? 0 : 1;
  }
  return render(argv[0], diff, a);
}

// Runs a command, turning an exception (out of memory on a huge input)
// into a message and status 1.
int guarded(const char* name, int (*fn)(int, char**), int argc, char** argv) {
  argv[0] = const_cast<char*>(name);
  try {
    return fn(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace

int cmd_svg(int argc, char** argv) { return guarded("luaflame svg", svg_main, argc, argv); }
int cmd_diff(int argc, char** argv) { return guarded("luaflame diff", diff_main, argc, argv); }

}  // namespace lfcli
