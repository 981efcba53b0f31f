// luaflame run [options] [--] script.lua [args...]: runs the script as
// lua5.4 would, under the collector. Options: the collector's (see
// collector/include/luaflame/collector.hpp), as --NAME VALUE or
// --NAME=VALUE, after LUAFLAME_* from the environment.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "commands.hpp"
#include "luaflame/collector.hpp"

namespace lfcli {

namespace {

void run_usage(FILE* to) {
  std::fprintf(to,
               "usage: luaflame run [options] [--] script.lua [args...]\n"
               "Runs the script exactly as 'lua5.4 script.lua args...' would, under the profiler.\n\n"
               "options (also LUAFLAME_<NAME> environment variables and luaflame.start{} fields):\n"
               "  --mode M            sample (default), trace, both, alloc; joined with '+' (sample+alloc)\n"
               "  --hz N              samples per second (default 999)\n"
               "  --clock C           cpu (default: the Lua thread's CPU time) or wall\n"
               "  -o, --output FILE   folded output (default luaflame.folded unless --server);\n"
               "                      other metrics go to FILE-without-.folded.METRIC.folded\n"
               "  --server URL        stream to luaflame-server (http://127.0.0.1:8080)\n"
               "  --token T           bearer token for the server\n"
               "  --name NAME         run name (default: the script's name)\n"
               "  --tags K=V,K=V      run tags; --tag K=V adds one\n"
               "  --flush_interval S  seconds between streamed chunks (default 5)\n"
               "  --lines             leaf frames carry the current line\n"
               "  --sources           send the profiled .lua files' text to the server (source view)\n"
               "  --alloc_rate BYTES  mean bytes between allocation samples, 0 = all (default 524288)\n"
               "  -q, --quiet         no report on stderr\n");
}

bool is_flag(const std::string& name) { return name == "lines" || name == "quiet" || name == "sources"; }

}  // namespace

int cmd_run(int argc, char** argv) {
  lfc::Options o;
  std::string err;
  if (!lfc::apply_env(o, err)) {
    std::fprintf(stderr, "luaflame run: %s\n", err.c_str());
    return 2;
  }
  bool output_given = !o.output.empty(), name_given = std::getenv("LUAFLAME_NAME") != nullptr;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") { ++i; break; }
    if (a == "-h" || a == "--help") { run_usage(stdout); return 0; }
    if (a == "-" || a.empty() || a[0] != '-') break;
    std::string name, value;
    bool has_value = false;
    if (a == "-o") name = "output";
    else if (a == "-q") name = "quiet";
    else if (a.rfind("--", 0) == 0) name = a.substr(2);
    else { std::fprintf(stderr, "luaflame run: unknown option '%s'\n", a.c_str()); run_usage(stderr); return 2; }
    std::size_t eq = name.find('=');
    if (eq != std::string::npos) { value = name.substr(eq + 1); name.resize(eq); has_value = true; }
    for (char& c : name) if (c == '-') c = '_';
    if (!has_value && is_flag(name)) { value = "true"; has_value = true; }
    if (!has_value) {
      if (i + 1 >= argc) { std::fprintf(stderr, "luaflame run: option '--%s' needs a value\n", name.c_str()); return 2; }
      value = argv[++i];
    }
    if (name == "tag") {
      std::string all;
      for (const auto& kv : o.tags) all += kv.first + "=" + kv.second + ",";
      name = "tags";
      value = all + value;
    }
    if (!lfc::set_option(o, name, value, err)) { std::fprintf(stderr, "luaflame run: %s\n", err.c_str()); return 2; }
    if (name == "output") output_given = true;
    if (name == "name") name_given = true;
  }
  if (i >= argc) {
    std::fprintf(stderr, "luaflame run: no script given\n");
    run_usage(stderr);
    return 2;
  }
  if (!output_given && o.server.empty()) o.output = "luaflame.folded";
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
