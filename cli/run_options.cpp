// The collector's options on a command line (run_options.hpp).
#include "run_options.hpp"

namespace lfcli {

namespace {

// What --help says of each collector option (collector/include/luaflame/collector.hpp
// documents them); an option the collector adds later still works, described by name.
const char* option_help(const std::string& name) {
  static const std::map<std::string, const char*> kHelp = {
      {"mode", "sample (default), trace, both, alloc; joined with '+' (sample+alloc)"},
      {"hz", "samples per second (default 999)"},
      {"clock", "cpu (default: the Lua thread's CPU time) or wall"},
      {"output",
       "profile file, format by extension (default luaflame.svg unless --server): .svg flame "
       "graph, .folded text, .json speedscope (every metric in one file); .svg/.folded: other "
       "metrics go to FILE.METRIC.EXT"},
      {"max_output", "largest output file; a bigger profile is cut (default 512 MiB)"},
      {"server", "stream to luaflame-server (http://127.0.0.1:8080)"},
      {"token", "bearer token for the server"},
      {"name", "run name (default: the script's name)"},
      {"tags", "run tags K=V,K=V (--tag K=V adds one)"},
      {"flush_interval", "seconds between streamed chunks (default 5)"},
      {"lines", "leaf frames carry the current line"},
      {"sources", "send the profiled .lua files' text to the server (source view)"},
      {"quiet", "no report on stderr"},
      {"show_profiler",
       "keep samples of luaflame's own hook as \"[luaflame] hook\" frames (default: only "
       "counted, as the profiler's cost)"},
      {"alloc_rate", "mean bytes between allocation samples, 0 = all (default 524288)"},
  };
  auto it = kHelp.find(name);
  return it == kHelp.end() ? "a collector option (docs/collector.md)" : it->second;
}

}  // namespace

void add_run_options(CLI::App& app, RunArgs& r) {
  app.prefix_command();  // stop at the script: what follows is its own
  for (const char* const* n = lfc::kOptionNames; *n; ++n) {
    const std::string name = *n;
    std::string spec = "--" + name, dashed = name;
    for (char& c : dashed) c = c == '_' ? '-' : c;
    if (dashed != name) spec += ",--" + dashed;
    if (name == "output") spec += ",-o";
    if (name == "quiet") spec += ",-q";
    if (lfc::option_is_flag(name))
      app.add_flag(spec, r.flags[name], option_help(name));
    else
      app.add_option(spec, r.values[name], option_help(name));
  }
  app.add_option("--tag", r.tag, "add a run tag K=V (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->expected(1)  // one K=V per --tag: the script after it is not a tag
      ->allow_extra_args(false);
}

// Applies what the command line gave, over the environment's options.
bool apply_args(const CLI::App& app, RunArgs& r, lfc::Options& o, bool& output_given,
                bool& name_given, std::string& err) {
  for (const char* const* n = lfc::kOptionNames; *n; ++n) {
    const std::string name = *n;
    if (!app.count("--" + name)) continue;
    const std::string value =
        lfc::option_is_flag(name) ? (r.flags[name] ? "true" : "false") : r.values[name];
    if (!lfc::set_option(o, name, value, err)) return false;
    output_given |= name == "output";
    name_given |= name == "name";
  }
  for (const std::string& t : r.tag) {
    std::string all;
    for (const auto& kv : o.tags) all += kv.first + "=" + kv.second + ",";
    if (!lfc::set_option(o, "tags", all + t, err)) return false;
  }
  return true;
}

}  // namespace lfcli
