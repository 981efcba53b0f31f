// luaflame run [options] [--] script.lua [args...]: runs the script as
// lua5.X would, under the collector, on the Lua that --lua or the script's
// #! line chooses (lua_choice.hpp). Options: the collector's (see
// collector/include/luaflame/collector.hpp), as --NAME VALUE or
// --NAME=VALUE, after LUAFLAME_* from the environment.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "lua_choice.hpp"
#include "luaflame/collector.hpp"

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

// The command line: every collector option as --NAME VALUE (also --NAME=VALUE,
// and --flush-interval for --flush_interval), then the script and its
// arguments, which are the script's, untouched, whatever they look like.
struct RunArgs {
  std::map<std::string, std::string> values;  // option -> value as given
  std::map<std::string, bool> flags;          // flag option -> value
  std::vector<std::string> tag;               // --tag K=V, repeatable
  std::string lua;                            // --lua V
};

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
  app.add_option("--lua", r.lua,
                 "the Lua to run on: 5.1, 5.2, 5.3, 5.4 or luajit (default: the script's #! "
                 "line, else 5.4); 'list' prints those installed");
  app.footer(
      "Runs the script exactly as 'lua5.X script.lua args...' would, under the profiler.\n"
      "Options are also LUAFLAME_<NAME> environment variables and luaflame.start{} fields.\n"
      "Exit status: the script's; 2 on bad usage.\n");
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

bool g_runner = false;  // run_here: this program is one Lua's runner, whatever the #! line says

// Runs the script on another Lua's runner when --lua or its #! line asks
// for one: returns only on failure (the exit status), or -1 to run here.
int run_elsewhere(const CLI::App& app, const std::string& lua_opt, const std::string& script,
                  int argc, char** argv) {
  std::string want = !lua_opt.empty() ? lua_name(lua_opt) : g_runner ? "" : shebang_lua(script);
  if (!lua_opt.empty() && want.empty())
    return usage_error(app, "--lua " + lua_opt + ": not a Lua (5.1, 5.2, 5.3, 5.4, luajit, list)");
  if (want.empty() || want == lfc::vm_name()) return -1;
  const std::string path = runner_for(want);
  const std::string why = lua_opt.empty() ? " (the script's #! line; --lua chooses another)" : "";
  if (path.empty())
    return fail(app,
                "Lua " + want + " is not installed for luaflame" + why +
                    " ('luaflame run --lua list' shows what is)",
                kExitUsage);
  std::string err;
  exec_runner(path, argc, argv, err);
  return fail(app, "cannot run " + err, kExitUsage);
}

}  // namespace

int run_here(int argc, char** argv) {
  g_runner = true;
  return cmd_run(argc, argv);
}

int cmd_run(int argc, char** argv) {
  if (print_vm_if_asked()) return 0;
  CLI::App app(
      "Runs a Lua script under the profiler: luaflame run [options] [--] script.lua [args...]",
      "luaflame run");
  house_style(app);
  RunArgs r;
  add_run_options(app, r);
  const int rc = parse_args(app, argc, argv);
  if (rc >= 0) return rc;
  if (r.lua == "list") return list_luas();
  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
  if (rest.empty()) return usage_error(app, "no script given");
  if (const int moved = run_elsewhere(app, r.lua, rest.front(), argc, argv); moved >= 0)
    return moved;
  if (rest.front().size() > 1 && rest.front()[0] == '-')
    return usage_error(app, "unknown option '" + rest.front() + "'");
  lfc::Options o;
  std::string err;
  if (!lfc::apply_env(o, err)) return fail(app, err, kExitUsage);
  bool output_given = !o.output.empty(), name_given = std::getenv("LUAFLAME_NAME") != nullptr;
  if (!apply_args(app, r, o, output_given, name_given, err)) return fail(app, err, kExitUsage);
  const int i = argc - static_cast<int>(rest.size());  // the script's index in argv
  if (i < 1 || rest.front() != argv[i])
    return fail(app, "cannot find the script in the command line", kExitUsage);
  if (!output_given && o.server.empty()) o.output = "luaflame.svg";
  if (!name_given) {
    std::string s = argv[i];
    std::size_t slash = s.rfind('/');
    if (slash != std::string::npos) s = s.substr(slash + 1);
    if (s.size() > 4 && s.compare(s.size() - 4, 4, ".lua") == 0) s.resize(s.size() - 4);
    o.name = s.empty() || s == "-" ? "lua" : s;
  }
  return lfc::run_script(o, argc, argv, i);
}

}  // namespace lfcli
