// Generates realistic Lua-like folded stacks for the engine benchmark.
//
//   gen_folded [--stacks N] [--seed S] [--sorted] > profile.folded
//
// What makes it "Lua-like": frames are "NAME SOURCE:LINE" for Lua functions
// (module-style names and file paths), "[C] lib.fn" for C functions,
// "[GC]"/"[alloc] ..." for interpreter frames, and a main chunk at the root.
// Each function calls a few others (a fixed random call graph, callees picked
// with a skew), so names repeat the way they do in real programs. Stacks are
// 5 to 60 deep and share prefixes: each new stack keeps a random-length
// prefix of a recent one and grows a new tail. Counts are Zipf-distributed
// (a few hot stacks, a long tail of ones). Deterministic for a given seed.
// With the defaults (200,000 stacks) it writes about 116 MB.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_set>
#include <vector>

namespace {

struct Rng {  // splitmix64: fast, deterministic everywhere
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double unit() { return double(next() >> 11) / double(1ull << 53); }
  uint32_t below(uint32_t n) { return uint32_t(unit() * n); }
  // Index in [0, n) with probability ~ 1/(i+1)^s.
  uint32_t skewed(uint32_t n, double s) {
    double u = unit();
    double x = std::pow(double(n) + 1, 1 - s);
    double v = std::pow(u * (x - 1) + 1, 1 / (1 - s)) - 1;
    return std::min<uint32_t>(n - 1, uint32_t(v));
  }
};

const char* kModules[] = {"parser", "lexer", "gen", "vm",    "json",     "http", "router",
                          "db",     "orm",   "tpl", "cache", "auth",     "sess", "util",
                          "str",    "tbl",   "ev",  "sched", "net.sock", "log"};
const char* kVerbs[] = {"parse", "read",   "write",  "emit",     "check",  "resolve",
                        "visit", "encode", "decode", "load",     "store",  "find",
                        "match", "build",  "render", "dispatch", "handle", "apply",
                        "merge", "split",  "next",   "step",     "eval",   "call"};
const char* kNouns[] = {"expr",   "stmt",   "block", "token", "node",    "value",
                        "field",  "table",  "key",   "list",  "request", "response",
                        "header", "row",    "query", "state", "frame",   "scope",
                        "string", "number", "args",  "chunk", "buffer",  "item"};
const char* kCFuncs[] = {"[C] string.gsub",
                         "[C] string.find",
                         "[C] string.format",
                         "[C] string.sub",
                         "[C] string.rep",
                         "[C] string.byte",
                         "[C] table.insert",
                         "[C] table.concat",
                         "[C] table.sort",
                         "[C] table.remove",
                         "[C] ipairs",
                         "[C] pairs",
                         "[C] next",
                         "[C] select",
                         "[C] tostring",
                         "[C] tonumber",
                         "[C] setmetatable",
                         "[C] pcall",
                         "[C] error",
                         "[C] require",
                         "[C] io.read",
                         "[C] io.write",
                         "[C] math.floor",
                         "[C] coroutine.resume",
                         "[C] coroutine.yield",
                         "[C] type",
                         "[C] rawget"};
const char* kInternal[] = {"[GC]", "[alloc] table", "[alloc] string", "[alloc] closure", "[hook]"};

std::vector<std::string> make_functions(Rng& r, uint32_t lua_count) {
  std::vector<std::string> f;
  for (uint32_t i = 0; i < lua_count; ++i) {
    const char* mod = kModules[r.below(sizeof kModules / sizeof *kModules)];
    std::string name = std::string(kVerbs[r.below(sizeof kVerbs / sizeof *kVerbs)]) + "_" +
                       kNouns[r.below(sizeof kNouns / sizeof *kNouns)];
    if (r.below(8) == 0) name = std::string(mod) + "." + name;
    if (r.below(4) == 0) name = "<anon>";
    std::string file = std::string(mod) + ".lua";
    for (char& c : file)
      if (c == '.' && &c < &file.back() - 3) c = '/';
    f.push_back(name + " " + file + ":" + std::to_string(1 + r.below(900)));
  }
  for (const char* c : kCFuncs) f.push_back(c);
  for (const char* c : kInternal) f.push_back(c);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t stacks = 200000;
  uint64_t seed = 42;
  bool sorted = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--stacks") && i + 1 < argc)
      stacks = uint32_t(std::atol(argv[++i]));
    else if (!std::strcmp(argv[i], "--seed") && i + 1 < argc)
      seed = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--sorted"))
      sorted = true;
    else {
      std::fprintf(stderr, "usage: gen_folded [--stacks N] [--seed S] [--sorted]\n");
      return 2;
    }
  }
  Rng r{seed};
  std::vector<std::string> fn = make_functions(r, 2500);
  uint32_t nf = uint32_t(fn.size());
  // Call graph: each function calls up to 10 others; C and internal frames
  // are mostly leaves.
  std::vector<std::vector<uint32_t>> callees(nf);
  for (uint32_t i = 0; i < nf; ++i) {
    uint32_t k = fn[i][0] == '[' ? (r.below(4) == 0 ? 3 : 0) : 4 + r.below(7);
    for (uint32_t j = 0; j < k; ++j) {
      uint32_t c = r.skewed(nf, 0.6);
      if (c != i || r.below(8) == 0) callees[i].push_back(c);  // some recursion, not much
    }
  }
  const char* mains[] = {"main.lua", "server.lua", "worker.lua"};
  std::vector<std::vector<uint32_t>> recent;  // recent stacks, as function indices
  std::unordered_set<std::string> seen;
  std::vector<std::string> lines;
  std::string line;
  std::vector<uint32_t> cur;
  while (seen.size() < stacks) {
    // Keep a prefix of a recent stack (or start afresh), then grow a tail.
    cur.clear();
    std::size_t depth = 5 + std::size_t(55 * std::pow(r.unit(), 1.8));
    if (!recent.empty() && r.below(50) != 0) {
      // Keep a recent stack but its last ~14 frames (geometric), grow anew.
      const std::vector<uint32_t>& base =
          recent[recent.size() - 1 - r.skewed(uint32_t(recent.size()), 1.2)];
      std::size_t t = 1 + std::size_t(-std::log(1 - r.unit()) * 10);
      std::size_t keep = base.size() > t ? base.size() - t : 1;
      keep = std::max<std::size_t>(1, std::min(keep, depth - 1));
      cur.assign(base.begin(), base.begin() + std::ptrdiff_t(keep));
    } else {
      cur.push_back(nf + r.below(3));  // a main chunk
      cur.push_back(r.skewed(nf - 32, 0.8));
    }
    while (cur.size() < depth) {
      uint32_t last = cur.back() >= nf ? 0 : cur.back();
      if (callees[last].empty()) break;
      cur.push_back(callees[last][r.skewed(uint32_t(callees[last].size()), 0.3)]);
    }
    if (cur.size() < 5) continue;
    line.clear();
    for (std::size_t i = 0; i < cur.size(); ++i) {
      if (i) line += ';';
      line += cur[i] >= nf ? mains[cur[i] - nf] : fn[cur[i]];
    }
    if (!seen.insert(line).second) continue;
    lines.push_back(line);
    recent.push_back(cur);
    if (recent.size() > 64) recent.erase(recent.begin());
  }
  // Zipf counts over a shuffled rank order.
  std::vector<uint32_t> rank(lines.size());
  for (uint32_t i = 0; i < rank.size(); ++i) rank[i] = i;
  for (std::size_t i = rank.size(); i > 1; --i) std::swap(rank[i - 1], rank[r.below(uint32_t(i))]);
  if (sorted) std::sort(lines.begin(), lines.end());
  std::string out;
  out.reserve(1 << 20);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    uint64_t count = 1 + uint64_t(200000.0 / std::pow(double(rank[i]) + 1, 1.05));
    out += lines[i];
    out += ' ';
    out += std::to_string(count);
    out += '\n';
    if (out.size() > (1 << 20)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}
