// luaflame attach [options] [--] PROGRAM [args...]: runs PROGRAM, unmodified,
// with the shim that profiles the Lua states it creates (docs/attach.md).
// This front only sets the environment the shim and the modules read
// (LUAFLAME_* options, LUAFLAME_ATTACH_LUA5X/LUAJIT, LD_PRELOAD) and execs
// the program: the process, its pid, its output and its exit status are
// the program's.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "lua_choice.hpp"
#include "luaflame/collector.hpp"
#include "run_options.hpp"

namespace lfcli {

namespace {

// LUAFLAME_ATTACH_LUA54 for "5.4", LUAFLAME_ATTACH_LUAJIT for "luajit".
std::string module_env(const std::string& lua) {
  std::string v = lua == "luajit" ? "LUAJIT" : "LUA" + lua.substr(0, 1) + lua.substr(2);
  return "LUAFLAME_ATTACH_" + v;
}

// LUAFLAME_FLUSH_INTERVAL for flush_interval.
std::string option_env(const std::string& name) {
  std::string v = "LUAFLAME_";
  for (char c : name) v += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return v;
}

// The variables that attach a program, in the order they are set.
using Env = std::vector<std::pair<std::string, std::string>>;

// The options the command line gave, for the modules to read in the host
// (the environment's own LUAFLAME_* stay as they are). The output, the
// default one too, is made absolute: a host may change its working directory.
void options_env(const CLI::App& app, RunArgs& r, const lfc::Options& o, Env& env) {
  for (const char* const* n = lfc::kOptionNames; *n; ++n) {
    const std::string name = *n;
    if (name == "tags" || name == "output" || !app.count("--" + name)) continue;
    const std::string value =
        lfc::option_is_flag(name) ? (r.flags[name] ? "true" : "false") : r.values[name];
    env.emplace_back(option_env(name), value);
  }
  std::string tags;
  for (const auto& kv : o.tags) tags += (tags.empty() ? "" : ",") + kv.first + "=" + kv.second;
  if (!tags.empty()) env.emplace_back("LUAFLAME_TAGS", tags);
  std::string out = o.output.empty() && o.server.empty() ? "luaflame.svg" : o.output;
  if (!out.empty() && out[0] != '/') {
    std::vector<char> cwd(4096);
    if (getcwd(cwd.data(), cwd.size())) out = std::string(cwd.data()) + "/" + out;
  }
  if (!out.empty()) env.emplace_back("LUAFLAME_OUTPUT", out);
}

// PROGRAM as execvp finds it: itself when it has a '/', else on PATH.
std::string find_program(const std::string& prog) {
  if (prog.find('/') != std::string::npos) return prog;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (std::size_t i = 0; i <= dirs.size();) {
    std::size_t j = dirs.find(':', i);
    if (j == std::string::npos) j = dirs.size();
    std::string f = (j > i ? dirs.substr(i, j - i) : ".") + "/" + prog;
    if (access(f.c_str(), X_OK) == 0) return f;
    i = j + 1;
  }
  return "";
}

// The loader ignores LD_PRELOAD for a set-user-ID or set-group-ID program.
bool runs_privileged(const std::string& path) {
  struct stat st {};
  return !path.empty() && stat(path.c_str(), &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID));
}

// What the shim needs: each Lua's module and the shim in LD_PRELOAD.
bool shim_env(Env& env, std::string& err) {
  const std::string shim = attach_shim();
  if (shim.empty()) return err = "libluaflame-attach.so is not installed beside luaflame", false;
  for (const char* const* n = kLuaNames; *n; ++n) {
    const std::string name = module_env(*n), path = module_for(*n);
    const char* set = std::getenv(name.c_str());  // a set one is the user's choice
    if (set && *set)
      env.emplace_back(name, set);
    else if (!path.empty())
      env.emplace_back(name, path);
  }
  // After what is preloaded already (a sanitizer's runtime must come first,
  // an allocator keeps its place); the shim still comes before the host's Lua.
  const char* old = std::getenv("LD_PRELOAD");
  env.emplace_back("LD_PRELOAD", (old && *old ? std::string(old) + ":" : "") + shim);
  return true;
}

// --env: the variables one a line, NAME=VALUE as they are (an
// EnvironmentFile's lines; a shell reads them with `export "$line"`).
int print_env(const CLI::App& app, const Env& env) {
  for (const auto& kv : env)
    if (kv.second.find('\n') != std::string::npos)
      return fail(app, kv.first + " would hold a newline: not printed", kExitUsage);
  for (const auto& kv : env) std::printf("%s=%s\n", kv.first.c_str(), kv.second.c_str());
  return 0;
}

}  // namespace

int cmd_attach(int argc, char** argv) {
  CLI::App app(
      "Profiles the Lua states of a program that embeds Lua, unmodified: luaflame attach "
      "[options] [--] PROGRAM [args...]",
      "luaflame attach");
  house_style(app);
  RunArgs r;
  add_run_options(app, r);
  bool print = false;
  app.add_flag("--env", print,
               "print the variables that attach a program (NAME=VALUE, one a line: for a "
               "service manager, a container or a shell) and run nothing");
  app.footer(
      "Runs PROGRAM as it would run alone, with every Lua state it creates through a shared\n"
      "Lua library (liblua5.1-5.4, libluajit-5.1) profiled from luaL_openlibs to lua_close:\n"
      "one run per state, named PROGRAM#N. Options are also LUAFLAME_<NAME> variables\n"
      "(docs/attach.md). Exit status: the program's; 2 on bad usage, 127 when it cannot run.\n");
  const int rc = parse_args(app, argc, argv);
  if (rc >= 0) return rc;
  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
  if (rest.empty() && !print) return usage_error(app, "no program given");
  if (!rest.empty() && rest.front().size() > 1 && rest.front()[0] == '-')
    return usage_error(app, "unknown option '" + rest.front() + "'");
  lfc::Options o;
  std::string err;
  bool output_given = false, name_given = false;
  if (!lfc::apply_env(o, err) || !apply_args(app, r, o, output_given, name_given, err))
    return fail(app, err, kExitUsage);
  Env env;
  options_env(app, r, o, env);
  if (print) return shim_env(env, err) ? print_env(app, env) : fail(app, err, kExitUsage);
  const std::string path = find_program(rest.front());
  if (path.empty()) return fail(app, "cannot run " + rest.front() + ": not found", 127);
  if (runs_privileged(path)) {
    fail(app,
         path +
             " is set-user-ID or set-group-ID: the loader ignores the profiler for it; it runs "
             "unprofiled",
         0);
  } else {
    if (!shim_env(env, err)) return fail(app, err, kExitUsage);
    // The pid the program will have (exec keeps it), for the shim's last word.
    env.emplace_back("LUAFLAME_ATTACH_PID", std::to_string(getpid()));
    for (const auto& kv : env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
  }
  std::vector<char*> args;
  for (std::string& a : rest) args.push_back(a.data());
  args.push_back(nullptr);
  execv(path.c_str(), args.data());
  return fail(app, "cannot run " + path + ": " + std::strerror(errno), 127);
}

}  // namespace lfcli
