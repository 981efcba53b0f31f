// The `luaflame` command's subcommands. Each is a thin front over a library:
// svg/diff over the engine, run over the collector, push/compare over HTTP.
#pragma once

namespace lfcli {

int cmd_svg(int argc, char** argv);      // cmd_svg.cpp: folded -> SVG (flamegraph.pl drop-in)
int cmd_diff(int argc, char** argv);     // cmd_svg.cpp: two folded files -> differential SVG
int cmd_run(int argc, char** argv);      // cmd_run.cpp: run a Lua script under the collector
int run_here(int argc, char** argv);     // cmd_run.cpp: the same on this Lua only (the runners)
int cmd_attach(int argc, char** argv);   // cmd_attach.cpp: profile the Lua states of a program
int cmd_push(int argc, char** argv);     // cmd_push.cpp: upload a folded file to a server
int cmd_compare(int argc, char** argv);  // cmd_push.cpp: compare two runs on a server

}  // namespace lfcli
