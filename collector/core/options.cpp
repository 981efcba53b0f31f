// Options: one parser for the three ways to give them (Lua table, command
// line, LUAFLAME_* environment), so a name means the same thing everywhere.
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/out_formats.hpp"
#include "luaflame/collector.hpp"

namespace lfc {

const char* const kOptionNames[] = {"mode",           "hz",      "clock",         "output",
                                    "server",         "token",   "name",          "tags",
                                    "flush_interval", "lines",   "quiet",         "alloc_rate",
                                    "max_output",     "sources", "show_profiler", nullptr};

bool option_is_flag(std::string_view name) {
  return name == "lines" || name == "quiet" || name == "sources" || name == "show_profiler";
}

namespace {

bool parse_number(std::string_view v, double lo, double hi, double& out) {
  std::string s(v);
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  double d = std::strtod(s.c_str(), &end);
  if (errno || *end || !std::isfinite(d) || d < lo || d > hi) return false;
  out = d;
  return true;
}

bool parse_bool(std::string_view v, bool& out) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return out = true, true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return out = false, true;
  return false;
}

// mode = sample | trace | both | alloc, or several joined by '+' or ','.
bool parse_mode(std::string_view v, Options& o) {
  bool sample = false, trace = false, alloc = false;
  while (!v.empty()) {
    std::size_t cut = v.find_first_of("+,");
    std::string_view part = v.substr(0, cut);
    if (part == "sample")
      sample = true;
    else if (part == "trace")
      trace = true;
    else if (part == "both")
      sample = trace = true;
    else if (part == "alloc")
      alloc = true;
    else
      return false;
    if (cut == std::string_view::npos) break;
    v.remove_prefix(cut + 1);
  }
  if (!sample && !trace && !alloc) return false;
  o.sample = sample, o.trace = trace, o.alloc = alloc;
  return true;
}

// tags = "k=v,k=v": keys and values may not be empty nor contain ',' or '='.
bool parse_tags(std::string_view v, Options& o, std::string& err) {
  std::map<std::string, std::string> tags;
  while (!v.empty()) {
    std::size_t cut = v.find(',');
    std::string_view part = v.substr(0, cut);
    std::size_t eq = part.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == part.size()) {
      err = "option 'tags': expected KEY=VALUE[,KEY=VALUE...], got '" + std::string(part) + "'";
      return false;
    }
    tags[std::string(part.substr(0, eq))] = std::string(part.substr(eq + 1));
    if (cut == std::string_view::npos) break;
    v.remove_prefix(cut + 1);
  }
  o.tags = std::move(tags);
  return true;
}

std::string bad(std::string_view name, std::string_view value, const char* want) {
  return "option '" + std::string(name) + "': " + want + ", got '" + std::string(value) + "'";
}

}  // namespace

constexpr double kMaxHz = 10000;

bool set_option(Options& o, std::string_view name, std::string_view value, std::string& err) {
  if (name == "mode") {
    if (!parse_mode(value, o))
      return err = bad(name, value, "expected sample, trace, both or alloc (joined by '+')"), false;
  } else if (name == "hz") {
    // 10 kHz at most: each sample is a signal, which costs a thread 2-30 us of
    // CPU (bench/jit/signal_cost.sh); at 50 kHz a 0.02 s program took 4.4 s,
    // at 100 kHz it made no progress. A rate the machine cannot deliver is
    // refused here rather than slowing the program down to nothing.
    if (!parse_number(value, 1, kMaxHz, o.hz))
      return err = bad(name, value,
                       "expected a number from 1 to 10000 (each sample is a signal to the "
                       "program: a faster rate would cost more than the program itself)"),
             false;
  } else if (name == "clock") {
    if (value == "cpu")
      o.cpu_clock = true;
    else if (value == "wall")
      o.cpu_clock = false;
    else
      return err = bad(name, value, "expected cpu or wall"), false;
  } else if (name == "output") {
    o.output = std::string(value);
    if (std::string why; format_of(o.output) == Format::pprof && !pprof_writer_loads(why))
      return err = bad(name, value, why.c_str()), false;
  } else if (name == "server") {
    if (!value.empty() && value.rfind("http://", 0) != 0 && value.rfind("https://", 0) != 0)
      return err = bad(name, value, "expected a URL starting with http:// or https://"), false;
    o.server = std::string(value);
    while (!o.server.empty() && o.server.back() == '/') o.server.pop_back();
  } else if (name == "token") {
    o.token = std::string(value);
  } else if (name == "name") {
    if (value.empty()) return err = bad(name, value, "expected a non-empty name"), false;
    o.name = std::string(value);
  } else if (name == "tags") {
    return parse_tags(value, o, err);
  } else if (name == "flush_interval") {
    if (!parse_number(value, 0.05, 86400, o.flush_interval))
      return err = bad(name, value, "expected seconds from 0.05 to 86400"), false;
  } else if (name == "lines") {
    if (!parse_bool(value, o.lines)) return err = bad(name, value, "expected true or false"), false;
  } else if (name == "sources") {
    if (!parse_bool(value, o.sources))
      return err = bad(name, value, "expected true or false"), false;
  } else if (name == "show_profiler") {
    if (!parse_bool(value, o.show_profiler))
      return err = bad(name, value, "expected true or false"), false;
  } else if (name == "quiet") {
    if (!parse_bool(value, o.quiet)) return err = bad(name, value, "expected true or false"), false;
  } else if (name == "alloc_rate") {
    if (!parse_number(value, 0, 1e12, o.alloc_rate))
      return err = bad(name, value, "expected bytes, 0 or more"), false;
  } else if (name == "max_output") {
    if (!parse_number(value, 4096, 1e15, o.max_output))
      return err = bad(name, value, "expected bytes, 4096 or more"), false;
  } else {
    err = "unknown option '" + std::string(name) +
          "' (known: mode, hz, clock, output, server, token, name, tags, "
          "flush_interval, lines, quiet, alloc_rate, max_output, sources)";
    return false;
  }
  return true;
}

bool apply_env(Options& o, std::string& err) {
  for (const char* const* n = kOptionNames; *n; ++n) {
    std::string var = "LUAFLAME_";
    for (const char* c = *n; *c; ++c)
      var += static_cast<char>(std::toupper(static_cast<unsigned char>(*c)));
    const char* v = std::getenv(var.c_str());
    if (!v) continue;
    if (!set_option(o, *n, v, err)) {
      err = var + ": " + err;
      return false;
    }
  }
  return true;
}

std::vector<std::string> metrics_of(const Options& o) {
  std::vector<std::string> m;
  if (o.sample) m.push_back("samples");
  if (o.trace) {
    m.push_back("time");
    m.push_back("calls");
  }
  if (o.alloc) {
    m.push_back("alloc_bytes");
    m.push_back("alloc_count");
    m.push_back("live_bytes");
  }
  return m;
}

std::string output_path(const std::string& output, const std::string& metric, bool first) {
  if (first) return output;
  std::string base = output, ext = ".folded";
  for (std::string e : {".folded", ".svg"})
    if (base.size() > e.size() && base.compare(base.size() - e.size(), e.size(), e) == 0) {
      base.resize(base.size() - e.size());
      ext = e;
    }
  return base + "." + metric + ext;
}

}  // namespace lfc
