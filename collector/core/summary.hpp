// The summary's text (format_summary, declared in luaflame/collector.hpp)
// and the byte sizes it shares with the output files' notes. Pure functions
// of their arguments: no Lua, no session.
#pragma once

#include <cstdint>
#include <string>

namespace lfc {

/// A byte count for people: "512 B", "1.5 KiB", "3.2 MiB".
std::string human_bytes(uint64_t b);

}  // namespace lfc
