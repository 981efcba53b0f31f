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
#include "run_options.hpp"

namespace lfcli {

namespace {

void add_lua_option(CLI::App& app, std::string& lua) {
  app.add_option("--lua", lua,
                 "the Lua to run on: 5.1, 5.2, 5.3, 5.4 or luajit (default: the script's #! "
                 "line, else 5.4); 'list' prints those installed");
  app.footer(
      "Runs the script exactly as 'lua5.X script.lua args...' would, under the profiler.\n"
      "Options are also LUAFLAME_<NAME> environment variables and luaflame.start{} fields.\n"
      "Exit status: the script's; 2 on bad usage.\n");
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
  std::string lua;
  add_run_options(app, r);
  add_lua_option(app, lua);
  const int rc = parse_args(app, argc, argv);
  if (rc >= 0) return rc;
  if (lua == "list") return list_luas();
  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
  if (rest.empty()) return usage_error(app, "no script given");
  if (const int moved = run_elsewhere(app, lua, rest.front(), argc, argv); moved >= 0) return moved;
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
