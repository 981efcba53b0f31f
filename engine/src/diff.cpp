// engine, stage 3: differential trees (what difffolded.pl feeds flamegraph.pl).
#include "luaflame/diff.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>
#include <vector>

namespace lf {

namespace {

// Adds every node of `src` to `out` by path, its self value into column
// `col`, scaled by num/den and rounded down when `scale` (difffolded.pl -n:
// int($count * $total2 / $total1), per stack; a node's self is the sum of its
// stack's lines). Nodes are numbered after their parents, so one pass in index
// order sees every parent mapped before its children.
void merge_into(Tree& out, const Tree& src, int col, bool scale, double num, double den) {
  int src_col = src.differential() ? 1 : 0;  // a differential input counts by its "after"
  std::vector<uint32_t> frame_map(src.frame_count(), Tree::kNone);
  std::vector<uint32_t> node_map(src.size(), Tree::kRoot);
  for (uint32_t i = 0; i < src.size(); ++i) {
    if (i != Tree::kRoot) {
      uint32_t f = src.frame_of(i);
      if (frame_map[f] == Tree::kNone) frame_map[f] = out.intern(src.frame_name(f));
      node_map[i] = out.child(node_map[src.parent_of(i)], frame_map[f]);
    }
    double v = src.self_at(i, src_col);
    if (scale) v = std::floor(v * num / den);  // in this order, as Perl evaluates it
    if (v != 0) out.add_self(node_map[i], v, col);
  }
}

}  // namespace

Tree diff_trees(const Tree& before, const Tree& after, const DiffOptions& opts) {
  Tree out;
  out.set_differential(true);
  double tb = before.total(before.differential() ? 1 : 0);
  double ta = after.total(after.differential() ? 1 : 0);
  // difffolded.pl -n: scale "before" to the total of "after" (only when they differ).
  bool scale = opts.normalize && tb > 0 && ta > 0 && ta != tb;
  merge_into(out, before, 0, scale, ta, tb);
  merge_into(out, after, 1, false, 1, 1);
  out.finalize();
  return out;
}

// ---------------------------------------------------------------- the gate

namespace {

double percent(double v, double total) {
  return total > 0 ? 100.0 * v / total : 0.0;
}

std::string fixed2(double v, bool sign) {
  char buf[64];
  std::snprintf(buf, sizeof buf, sign ? "%+.2f" : "%.2f", round_share(v));
  return buf;
}

void markdown_table(std::string& md, const char* title,
                    const std::vector<const ShareChange*>& rows) {
  md += std::string("**") + title + "**\n\n";
  if (rows.empty()) {
    md += "none\n\n";
    return;
  }
  md += "| function | base % | head % | change (points) |\n|---|---:|---:|---:|\n";
  for (const ShareChange* r : rows)
    md += "| " + markdown_escape(r->name) + " | " + fixed2(r->base_self, false) + " | " +
          fixed2(r->head_self, false) + " | " + fixed2(r->delta(), true) + " |\n";
  md += "\n";
}

}  // namespace

Comparison compare_shares(const Tree& base, const Tree& head, double threshold) {
  Comparison c;
  c.threshold = threshold;
  c.base_total = base.total();
  c.head_total = head.total();
  std::unordered_map<std::string, ShareChange> by_name;
  for (const FunctionStat& f : function_stats(base)) {
    ShareChange& s = by_name[f.name];
    s.base_self = percent(f.self, c.base_total);
    s.base_total = percent(f.total, c.base_total);
  }
  for (const FunctionStat& f : function_stats(head)) {
    ShareChange& s = by_name[f.name];
    s.head_self = percent(f.self, c.head_total);
    s.head_total = percent(f.total, c.head_total);
  }
  c.rows.reserve(by_name.size());
  for (auto& [name, s] : by_name) {
    s.name = name;
    c.rows.push_back(std::move(s));
  }
  std::sort(c.rows.begin(), c.rows.end(), [](const ShareChange& a, const ShareChange& b) {
    if (std::fabs(a.delta()) != std::fabs(b.delta()))
      return std::fabs(a.delta()) > std::fabs(b.delta());
    return a.name < b.name;
  });
  if (threshold < 0) return c;
  for (const ShareChange& r : c.rows) {
    if (r.delta() > threshold) {
      c.failed = true;
      c.worst = r.name;
      break;
    }
  }
  return c;
}

bool parse_threshold(std::string_view text, double& out) {
  std::string s(text);
  if (!s.empty() && s.back() == '%') s.pop_back();
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (*end != '\0' || !(v >= 0) || v > 100) return false;
  out = v;
  return true;
}

double round_share(double v) {
  return std::round(v * 1000.0) / 1000.0;
}

std::string markdown_escape(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char ch : name) {
    if (ch == '|' || ch == '`' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

std::string comparison_markdown(const Comparison& c, const std::string& heading,
                                std::size_t limit) {
  std::vector<const ShareChange*> grew, shrank;
  for (const ShareChange& r : c.rows) {
    if (r.delta() > kShareNoise && grew.size() < limit) grew.push_back(&r);
    if (r.delta() < -kShareNoise && shrank.size() < limit) shrank.push_back(&r);
  }
  std::string md = "### " + heading + "\n\n";
  markdown_table(md, "Regressions", grew);
  markdown_table(md, "Improvements", shrank);
  if (c.threshold >= 0) {
    const std::string t = fixed2(c.threshold, false);
    md += c.failed
              ? "**FAILED**: " + markdown_escape(c.worst) + " grew by more than " + t + " points\n"
              : "Passed: no function grew by more than " + t + " points\n";
  }
  return md;
}

}  // namespace lf
