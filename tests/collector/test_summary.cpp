// The summary's text (collector/core/summary.cpp): format_summary, a pure
// function of a Summary, pinned part by part.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "luaflame/collector.hpp"

// The summary's samples part comes from one format: the signal's source and
// the samples that fell in luaflame's own hooks inside one parenthesis.
TEST_CASE("summary: the samples part, with the sampler and the hook samples inside it") {
  struct Case {
    lfc::SamplerKind sampler;
    uint64_t in_hooks;
    const char* want;
    bool shown = false;  ///< option show_profiler
  };
  const Case cases[] = {
      {lfc::SamplerKind::timer, 0,
       "(12 events, 10 asked, 11 recorded over 0.010 s of clock; kernel timer)"},
      {lfc::SamplerKind::thread, 0,
       "(12 events, 10 asked, 11 recorded over 0.010 s of clock; polling thread)"},
      {lfc::SamplerKind::timer, 3,
       "(12 events, 10 asked, 11 recorded over 0.010 s of clock; kernel timer; 3 in luaflame's "
       "hooks, the profiler's cost, left out (--show-profiler keeps them)); 5 calls traced"},
      {lfc::SamplerKind::timer, 4,
       "(12 events, 10 asked, 11 recorded over 0.010 s of clock; kernel timer; 4 in luaflame's "
       "hooks); 5 calls traced",
       true},
  };
  for (const Case& c : cases) {
    const std::string sampler = lfc::sampler_name(c.sampler);
    CAPTURE(sampler);
    CAPTURE(c.in_hooks);
    lfc::Summary s;
    s.mode = "both";
    s.hz_asked = 1000;
    s.hz_delivered = 1200;
    s.sample_events = 12;
    s.samples_asked = 10;
    s.samples = 11;
    s.clock_ns = 10000000;
    s.sampler = c.sampler;
    s.samples_in_hooks = c.in_hooks;
    s.profiler_shown = c.shown;
    s.calls = c.in_hooks ? 5 : 0;
    const std::string line = lfc::format_summary(s);
    CAPTURE(line);
    CHECK(line.find("; samples: 1000 Hz asked, 1200 Hz delivered " + std::string(c.want)) !=
          std::string::npos);
  }
}

// What Lua users see of the sampler kinds: `sampler` in luaflame.stop()'s
// table and LUAFLAME_SAMPLER's value (docs/collector.md), spelled in one table.
TEST_CASE("summary: the sampler kinds' short names, as luaflame.stop() returns them") {
  CHECK(std::string(lfc::sampler_name(lfc::SamplerKind::timer)) == "timer");
  CHECK(std::string(lfc::sampler_name(lfc::SamplerKind::thread)) == "thread");
  CHECK(std::string(lfc::sampler_name(lfc::SamplerKind::none)).empty());
}
