// Folded export: the `output` files, luaflame.folded(), and the report.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "session.hpp"

namespace lfc {

namespace {

bool write_file(const std::string& path, const Tree& t, const FrameNames& f, int col, std::string& err) {
  std::string tmp = path + ".tmp";
  FILE* out = std::fopen(tmp.c_str(), "wb");
  if (!out) return err = "cannot write " + tmp + ": " + std::strerror(errno), false;
  write_folded(t, f, [&](uint32_t n) { return t.value(n, col); },
               [&](const std::string& line) { std::fwrite(line.data(), 1, line.size(), out); });
  bool ok = std::fflush(out) == 0;
  ok = std::fclose(out) == 0 && ok;
  // Renamed into place only when whole: a reader never sees half a file.
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = "cannot write " + path + ": " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

std::string human_bytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

}  // namespace

void Session::write_outputs(std::vector<std::string>& files, std::string& err) {
  if (opt.output.empty()) return;
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    std::string path = output_path(opt.output, metrics[i], i == 0);
    if (write_file(path, tree, names, static_cast<int>(i), err)) files.push_back(path);
  }
}

std::string Session::folded_text(int col) const {
  std::string out;
  write_folded(tree, names, [&](uint32_t n) { return tree.value(n, col); },
               [&](const std::string& line) { out += line; });
  return out;
}

std::string format_summary(const Summary& s) {
  std::string r = "luaflame: " + s.mode + " mode";
  char buf[512];
  std::snprintf(buf, sizeof buf, ", %.2f s wall", static_cast<double>(s.wall_ns) / 1e9);
  r += buf;
  if (s.samples_asked || s.sample_events) {
    std::snprintf(buf, sizeof buf,
                  "; samples: %.0f Hz asked, %.0f Hz delivered (%llu events, %llu asked, %llu recorded over %.3f s of %s)",
                  s.hz_asked, s.hz_delivered, static_cast<unsigned long long>(s.sample_events),
                  static_cast<unsigned long long>(s.samples_asked), static_cast<unsigned long long>(s.samples),
                  static_cast<double>(s.clock_ns) / 1e9, "clock");
    r += buf;
  }
  if (s.calls) {
    std::snprintf(buf, sizeof buf, "; %llu calls traced", static_cast<unsigned long long>(s.calls));
    r += buf;
  }
  if (s.alloc_count) {
    r += "; allocated " + human_bytes(s.alloc_bytes) + " in " + std::to_string(s.alloc_count) +
         " allocations, live at stop " + human_bytes(s.live_bytes);
  }
  std::snprintf(buf, sizeof buf, "; collector: %.1f ms in %llu hooks, %s for %llu stacks and %llu frames",
                static_cast<double>(s.hook_ns) / 1e6, static_cast<unsigned long long>(s.hook_calls),
                human_bytes(s.memory_bytes).c_str(), static_cast<unsigned long long>(s.nodes),
                static_cast<unsigned long long>(s.frames));
  r += buf;
  r += "\n";
  if (!s.fast_paths_off.empty()) r += "luaflame: slower path: " + s.fast_paths_off + "\n";
  for (const auto& f : s.files) r += "luaflame: wrote " + f + "\n";
  if (!s.run_url.empty()) r += "luaflame: streamed " + std::to_string(s.chunks_sent) + " chunks to " + s.run_url + "\n";
  if (!s.stream_error.empty()) r += "luaflame: streaming failed: " + s.stream_error + "\n";
  if (!s.fallback_file.empty()) r += "luaflame: undelivered profile written to " + s.fallback_file + "\n";
  return r;
}

}  // namespace lfc
