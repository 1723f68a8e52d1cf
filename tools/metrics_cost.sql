-- chrf() and bleu() cost per byte of hypothesis, in SQL (docs/security.md, "Limits: time and memory by input size"):
--   pg_virtualenv sh -c 'createdb m; psql -X -d m -f tools/metrics_cost.sql'   (from the repository root; reads ../shared/data)
\set QUIET 1
CREATE EXTENSION IF NOT EXISTS transformer;
CREATE TEMP TABLE l16 (t text); CREATE TEMP TABLE l17 (t text);
\copy l16 FROM PROGRAM 'zcat ../shared/data/multi30k/test_2016_flickr.en.gz' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02')
\copy l17 FROM PROGRAM 'zcat ../shared/data/multi30k/test_2017_flickr.en.gz' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02')
CREATE TEMP TABLE d AS SELECT (SELECT string_agg(t, E'\n') FROM l16) AS h, (SELECT string_agg(t, E'\n') FROM l17) AS r;
CREATE TEMP TABLE big AS SELECT left(repeat(h || E'\n', 20), 1048576) AS h, left(repeat(r || E'\n', 20), 1048576) AS r FROM d;
SET transformer.max_input_bytes = '64MB';
CREATE FUNCTION pg_temp.ns(q text, bytes bigint, n int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; best float8 := 'Infinity'; x float8;
BEGIN
  FOR i IN 1..n LOOP
    t0 := clock_timestamp(); EXECUTE q INTO x;
    best := least(best, extract(epoch FROM clock_timestamp() - t0) * 1e9 / bytes);
  END LOOP;
  RETURN best;
END $$;
\pset tuples_only on
SELECT 'per-line pairs (1,000 lines)', round(pg_temp.ns('SELECT chrf(a.t, b.t) FROM (SELECT t, row_number() over () n FROM l16) a JOIN (SELECT t, row_number() over () n FROM l17) b USING (n)', (SELECT sum(length(t)) FROM l16), 3)::numeric, 1) AS chrf_ns_per_byte,
       round(pg_temp.ns('SELECT bleu(a.t, b.t) FROM (SELECT t, row_number() over () n FROM l16) a JOIN (SELECT t, row_number() over () n FROM l17) b USING (n)', (SELECT sum(length(t)) FROM l16), 3)::numeric, 1) AS bleu;
SELECT '1 MB against 1 MB', round(pg_temp.ns('SELECT chrf(h, r) FROM big', 1048576, 3)::numeric, 1), round(pg_temp.ns('SELECT bleu(h, r) FROM big', 1048576, 3)::numeric, 1);
SELECT '1 MB against itself', round(pg_temp.ns('SELECT chrf(h, h) FROM big', 1048576, 3)::numeric, 1), round(pg_temp.ns('SELECT bleu(h, h) FROM big', 1048576, 3)::numeric, 1);
SELECT 'per row, 1,000 rows', round(pg_temp.ns('SELECT count(chrf) FROM (SELECT chrf(a.t, b.t) OVER (ROWS CURRENT ROW) FROM (SELECT t, row_number() over () n FROM l16) a JOIN (SELECT t, row_number() over () n FROM l17) b USING (n)) x', (SELECT sum(length(t)) FROM l16), 3)::numeric, 1), 0;
