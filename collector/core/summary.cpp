// The summary's text (summary.hpp): a pure function of a Summary.
#include "core/summary.hpp"

#include <cstdio>
#include <iterator>

#include "luaflame/collector.hpp"

namespace lfc {

namespace {

// Each sampler kind's short name (sampler_name) and its words in the
// summary, indexed by SamplerKind.
struct SamplerText {
  const char* name;
  const char* words;
};
constexpr SamplerText kSamplerText[] = {
    {"", ""},  // none
    {"timer", "kernel timer"},
    {"thread", "polling thread"},
};

const SamplerText& text_of(SamplerKind k) {
  const auto i = static_cast<std::size_t>(k);
  return kSamplerText[i < std::size(kSamplerText) ? i : 0];
}

}  // namespace

const char* sampler_name(SamplerKind k) {
  return text_of(k).name;
}

std::string human_bytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

std::string format_summary(const Summary& s) {
  std::string r = "luaflame: " + s.mode + " mode";
  if (!s.lua.empty()) r += " on " + s.lua;
  char buf[512];
  std::snprintf(buf, sizeof buf, ", %.2f s wall", static_cast<double>(s.wall_ns) / 1e9);
  r += buf;
  if (s.samples_asked || s.sample_events) {
    const std::string source =
        s.sampler != SamplerKind::none ? std::string("; ") + text_of(s.sampler).words : "";
    const std::string in_hooks =
        !s.samples_in_hooks ? ""
        : s.profiler_shown  ? "; " + std::to_string(s.samples_in_hooks) + " in luaflame's hooks"
                            : "; " + std::to_string(s.samples_in_hooks) +
                                 " in luaflame's hooks, the profiler's cost, left out "
                                 "(--show-profiler keeps them)";
    std::snprintf(buf, sizeof buf,
                  "; samples: %.0f Hz asked, %.0f Hz delivered (%llu events, %llu asked, %llu "
                  "recorded over %.3f s of clock%s%s)",
                  s.hz_asked, s.hz_delivered, static_cast<unsigned long long>(s.sample_events),
                  static_cast<unsigned long long>(s.samples_asked),
                  static_cast<unsigned long long>(s.samples), static_cast<double>(s.clock_ns) / 1e9,
                  source.c_str(), in_hooks.c_str());
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
  std::snprintf(buf, sizeof buf,
                "; collector: %.1f ms in %llu hooks, %s for %llu stacks and %llu frames",
                static_cast<double>(s.hook_ns) / 1e6, static_cast<unsigned long long>(s.hook_calls),
                human_bytes(s.memory_bytes).c_str(), static_cast<unsigned long long>(s.nodes),
                static_cast<unsigned long long>(s.frames));
  r += buf;
  r += "\n";
  if (!s.fast_paths_off.empty()) r += "luaflame: slower path: " + s.fast_paths_off + "\n";
  for (std::size_t i = 0; i < s.files.size(); ++i) {
    r += "luaflame: wrote " + s.files[i];
    if (i < s.file_notes.size()) r += " (" + s.file_notes[i] + ")";
    r += "\n";
  }
  if (!s.files.empty()) {
    std::snprintf(buf, sizeof buf, "luaflame: output written in %.1f ms (%.1f ms of CPU)\n",
                  static_cast<double>(s.output_ns) / 1e6,
                  static_cast<double>(s.output_cpu_ns) / 1e6);
    r += buf;
  }
  // s.file_errors are printed by stop() itself, quiet or not.
  if (!s.run_url.empty())
    r += "luaflame: streamed " + std::to_string(s.chunks_sent) + " chunks to " + s.run_url + "\n";
  if (!s.stream_error.empty()) r += "luaflame: streaming failed: " + s.stream_error + "\n";
  if (!s.fallback_file.empty())
    r += "luaflame: undelivered profile written to " + s.fallback_file + "\n";
  return r;
}

}  // namespace lfc
