-- The runs of `store_bench list` (bench/server/store_bench.cpp, list()) written into a
-- PostgreSQL store in bulk: one million create_run calls take too long on a shared machine for
-- a listing benchmark. Same names, tags, status, stream keys and times as list() makes, run ids
-- 1..N; each run's metrics row (samples, total 1) too. Not the runs' buckets and dictionaries,
-- which no listing reads. Run on a store whose schema exists (store_bench ... list --runs 0):
--   psql URL -v n=1000000 -f bench/server/pg_list_seed.sql
--   store_bench --store URL list --runs 1000000      (finds N runs: creates none, times lists)
\set ON_ERROR_STOP on
BEGIN;
INSERT INTO runs(id, name, source, status, stream, started_ns, ended_ns, created_ns, hz)
  SELECT i + 1, 'app' || (i % 100),
         CASE WHEN i % 100 = 7 THEN 'stream' ELSE 'upload' END,
         CASE WHEN i % 100 = 7 THEN 'live' ELSE 'finished' END,
         CASE WHEN i % 100 = 7 THEN 's' || i END,
         1700000000000000000 + i * 1000000000, 1700000000000000000 + i * 1000000000,
         1700000000000000000, 0
  FROM generate_series(0::int8, :n - 1) AS i;
INSERT INTO tags(run, key, value, name)
  SELECT i + 1, 'branch', CASE WHEN i % 10 = 0 THEN 'main' ELSE 'dev' || (i % 1000) END,
         'app' || (i % 100)
  FROM generate_series(0::int8, :n - 1) AS i;
INSERT INTO tags(run, key, value, name)
  SELECT i + 1, 'host', 'h' || (i % 37), 'app' || (i % 100) FROM generate_series(0::int8, :n - 1) AS i;
INSERT INTO metrics(run, metric, total)
  SELECT i + 1, 0, CASE WHEN i % 100 = 7 THEN 0 ELSE 1 END FROM generate_series(0::int8, :n - 1) AS i;
SELECT setval('runs_id_seq', :n);
COMMIT;
VACUUM ANALYZE runs, tags, metrics;
