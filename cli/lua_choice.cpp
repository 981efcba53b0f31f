// Choosing the Lua a script runs on (lua_choice.hpp).
#include "lua_choice.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <vector>

#include "luaflame/collector.hpp"

namespace lfcli {

const char* const kLuaNames[] = {"5.4", "5.3", "5.2", "5.1", "luajit", nullptr};

namespace {

// The folder this program lives in (its runners are installed beside it).
std::string own_dir() {
  std::vector<char> buf(4096);
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return "";
  std::string self(buf.data(), static_cast<std::size_t>(n));
  const std::size_t slash = self.rfind('/');
  return slash == std::string::npos ? "." : self.substr(0, slash);
}

// The first of `paths` (relative to this program's folder) that exists.
std::string first_beside(std::initializer_list<std::string> paths) {
  const std::string dir = own_dir();
  if (dir.empty()) return "";
  for (const std::string& p : paths) {
    const std::string path = dir + "/" + p;
    if (access(path.c_str(), R_OK) != 0) continue;
    // Without the "bin/.." (what --env prints goes into service files).
    char* real = realpath(path.c_str(), nullptr);
    std::string out = real ? real : path;
    std::free(real);
    return out;
  }
  return "";
}

// One runner's "NAME\tRELEASE" (LUAFLAME_PRINT_VM), "" when it fails.
std::string ask_runner(const std::string& path) {
  int fds[2];
  if (pipe(fds) != 0) return "";
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    setenv("LUAFLAME_PRINT_VM", "1", 1);
    execl(path.c_str(), path.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return "";
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

std::string lua_name(const std::string& v) {
  std::string s = v;
  if (s.rfind("lua", 0) == 0 && s != "luajit") s = s.substr(3);
  if (s == "jit" || s == "luajit" || s == "luajit2" || s == "luajit2.1") return "luajit";
  if (s.size() == 2 && s[0] == '5' && s[1] >= '1' && s[1] <= '4') s = "5." + s.substr(1);
  for (const char* const* p = kLuaNames; *p; ++p)
    if (s == *p) return s;
  return "";
}

std::string shebang_lua(const std::string& script) {
  std::ifstream in(script);
  std::string line;
  if (!in || !std::getline(in, line) || line.rfind("#!", 0) != 0) return "";
  // The interpreter: the first word, or the word after env (and its options).
  std::vector<std::string> words;
  std::size_t i = 2;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
    if (j > i) words.push_back(line.substr(i, j - i));
    i = j;
  }
  std::size_t k = 0;
  auto base = [](const std::string& w) { return w.substr(w.rfind('/') + 1); };
  if (k < words.size() && base(words[k]) == "env")
    for (++k; k < words.size() && words[k][0] == '-';) ++k;
  if (k >= words.size()) return "";
  const std::string prog = base(words[k]);
  return prog == "lua" ? "" : lua_name(prog);
}

// Build tree (build/cli/luaflame): build/collector/...; installed
// (PREFIX/bin/luaflame): PREFIX/lib/lua/5.X, 5.1's in lib/luaflame/lua5.1
// (LuaJIT's owns lib/lua/5.1), as docker/install.sh places them.
std::string module_for(const std::string& name) {
  if (name == "luajit")
    return first_beside({"../collector/vm/luajit/luaflame.so", "../lib/lua/5.1/luaflame.so"});
  if (name == "5.4")
    return first_beside({"../collector/luaflame.so", "../lib/lua/5.4/luaflame.so"});
  if (name == "5.1")
    return first_beside({"../collector/lua5.1/luaflame.so", "../lib/luaflame/lua5.1/luaflame.so"});
  return first_beside(
      {"../collector/lua" + name + "/luaflame.so", "../lib/lua/" + name + "/luaflame.so"});
}

std::string attach_shim() {
  return first_beside(
      {"../collector/libluaflame-attach.so", "../lib/luaflame/libluaflame-attach.so"});
}

std::string runner_for(const std::string& name) {
  const std::string dir = own_dir();
  if (dir.empty()) return "";
  std::string path = dir + (name == "luajit" ? "/luaflame-luajit" : "/luaflame-lua" + name);
  if (access(path.c_str(), X_OK) == 0) return path;
  if (name == lfc::vm_name()) return dir + "/luaflame";  // this program runs it
  return "";
}

void exec_runner(const std::string& path, int argc, char** argv, std::string& err) {
  std::vector<char*> args;
  args.push_back(const_cast<char*>(path.c_str()));
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(path.c_str(), args.data());
  err = path + ": " + std::strerror(errno);
}

int list_luas() {
  int found = 0;
  for (const char* const* p = kLuaNames; *p; ++p) {
    const char* n = *p;
    std::string release;
    if (n == std::string(lfc::vm_name())) {
      release = lfc::vm_release();
    } else {
      const std::string path = runner_for(n);
      const std::string line = path.empty() ? "" : ask_runner(path);
      const std::size_t tab = line.find('\t');
      if (tab != std::string::npos && line.substr(0, tab) == n) release = line.substr(tab + 1);
    }
    if (release.empty()) continue;
    ++found;
    const bool dflt = n == std::string("5.4");  // what `luaflame run` runs without --lua
    std::printf("%-7s %s%s\n", n, release.c_str(), dflt ? "  (default)" : "");
  }
  return found ? 0 : 1;
}

bool print_vm_if_asked() {
  const char* v = std::getenv("LUAFLAME_PRINT_VM");
  if (!v || std::strcmp(v, "1") != 0) return false;
  std::printf("%s\t%s\n", lfc::vm_name(), lfc::vm_release());
  return true;
}

}  // namespace lfcli
