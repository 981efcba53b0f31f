/* luaflame's pprof writer, version 1: the C interface between
 * libluaflame-pprof.so (writer.cpp, over the engine's write_pprof and
 * through it libprotobuf-lite and zlib) and the collector's output
 * (core/out_formats.cpp), which loads it when a run's output is a .pb.gz
 * file. Kept out of every profiled program that writes no pprof file:
 * linked into luaflame.so, libprotobuf-lite cost each start 2-3 ms of CPU
 * (the dynamic loader's relocations and page faults; docs/benchmarks.md).
 *
 *   table  := luaflame_pprof_v1()     one static luaflame_pprof_writer_v1, version = 1
 *   tree   := nodes parent[nodes] frame[nodes] names[frames] metric[metrics]
 *             values[nodes * metrics]
 *             node 0 is the root (no frame, no value read); parent[i] < i;
 *             frame[i] < frames; values[i * metrics + m] is node i's own
 *             value of metric m; names are UTF-8 or any bytes, with lengths
 *   write  := write(tree, out) -> 1: out->data, out->len (gzipped pprof,
 *             one sample type per metric, a sample per node with a value)
 *                             | 0: out->why (NUL-terminated)
 *   done   := free_bytes(out)  after a write that returned 1
 *
 * Contract: any thread, one write at a time per `out`. Nothing but the
 * declared C types crosses: no C++ exception (write catches everything and
 * reports it in why), no longjmp. out->data is the writer's (malloc),
 * given back by free_bytes. A new version is a new entry point and table;
 * this one never changes. */
#ifndef LUAFLAME_PPROF_WRITER_H
#define LUAFLAME_PPROF_WRITER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct luaflame_pprof_name {
  const char* data;
  size_t len;
};

struct luaflame_pprof_metric {
  const char* type; /* pprof's sample type, "cpu", "alloc_space" */
  const char* unit; /* "nanoseconds", "bytes", "count" */
};

struct luaflame_pprof_tree_v1 {
  size_t nodes;
  const uint32_t* parent;
  const uint32_t* frame;
  size_t frames;
  const struct luaflame_pprof_name* names;
  size_t metrics;
  const struct luaflame_pprof_metric* metric;
  const uint64_t* values;
};

struct luaflame_pprof_bytes {
  unsigned char* data;
  size_t len;
  char why[160];
};

struct luaflame_pprof_writer_v1 {
  int version; /* 1 */
  int (*write)(const struct luaflame_pprof_tree_v1* tree, struct luaflame_pprof_bytes* out);
  void (*free_bytes)(struct luaflame_pprof_bytes* out);
};

/* NOLINTNEXTLINE(modernize-redundant-void-arg): a C header */
typedef const struct luaflame_pprof_writer_v1* (*luaflame_pprof_v1_fn)(void);
const struct luaflame_pprof_writer_v1* luaflame_pprof_v1(void);

#ifdef __cplusplus
}
#endif

#endif
