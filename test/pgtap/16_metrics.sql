-- bleu() and chrf() against tools/bleu.py (sacreBLEU's defaults; chrF from
-- its definition): hand-written hard cases per line and as a corpus, and
-- the bundled model's test_2016 translations (with ../shared/data), to
-- 0.01; in parallel workers (the combine function) the same.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`
\set data `cd ../shared/data 2>/dev/null && pwd || echo missing`

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(10);
CREATE TEMP TABLE fx AS SELECT pg_read_file(:'root' || '/test/fixtures/metrics/synthetic.json')::jsonb AS j;
CREATE TEMP TABLE pairs AS
SELECT n, p->>'hyp' AS hyp, p->>'ref' AS ref, (p->>'bleu')::float8 AS bleu_ref, (p->>'chrf')::float8 AS chrf_ref
FROM fx, jsonb_array_elements(j->'pairs') WITH ORDINALITY AS e(p, n);

CREATE TEMP TABLE per_line AS
SELECT n, bleu_ref, chrf_ref,
       bleu_final(bleu_accum('{0,0,0,0,0,0,0,0,0,0}', hyp, ref)) AS b,
       chrf_final(chrf_accum(array_fill(0::float8, ARRAY[18]), hyp, ref)) AS c
FROM pairs;
SELECT is((SELECT string_agg(n || ': ' || round(b::numeric, 4) || ' vs ' || round(bleu_ref::numeric, 4), '; ' ORDER BY n)
           FROM per_line WHERE abs(b - bleu_ref) > 0.01), NULL,
  'BLEU of each of the ' || (SELECT count(*) FROM per_line) || ' hard cases within 0.01 of tools/bleu.py');
SELECT is((SELECT string_agg(n || ': ' || round(c::numeric, 4) || ' vs ' || round(chrf_ref::numeric, 4), '; ' ORDER BY n)
           FROM per_line WHERE abs(c - chrf_ref) > 0.01), NULL,
  'chrF of each hard case within 0.01 of the reference');
SELECT cmp_ok(abs((SELECT bleu(hyp, ref) FROM pairs) - (SELECT (j->>'bleu')::float8 FROM fx)), '<=', 0.01::float8,
  'corpus bleu() of the hard cases: ' || round((SELECT bleu(hyp, ref) FROM pairs)::numeric, 4) || ', tools/bleu.py ' || round((SELECT (j->>'bleu')::numeric FROM fx), 4));
SELECT cmp_ok(abs((SELECT chrf(hyp, ref) FROM pairs) - (SELECT (j->>'chrf')::float8 FROM fx)), '<=', 0.01::float8,
  'corpus chrf() of the hard cases: ' || round((SELECT chrf(hyp, ref) FROM pairs)::numeric, 4) || ', reference ' || round((SELECT (j->>'chrf')::numeric FROM fx), 4));
SELECT is((SELECT bleu(hyp, ref) FROM pairs WHERE false), 0::float8, 'no rows: 0');

-- the combine function, in parallel workers over many rows
CREATE TABLE public.metric_rows AS SELECT hyp, ref FROM pairs, generate_series(1, 200);
SET LOCAL parallel_setup_cost = 0;
SET LOCAL parallel_tuple_cost = 0;
SET LOCAL min_parallel_table_scan_size = 0;
SET LOCAL max_parallel_workers_per_gather = 2;
-- on their own: a query that calls pgTAP (parallel unsafe) or reads a temp table plans no workers
CREATE FUNCTION pg_temp.plan_has(sql text, node text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  line text;
BEGIN
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || sql LOOP
    IF line LIKE '%' || node || '%' THEN
      RETURN true;
    END IF;
  END LOOP;
  RETURN false;
END $$;
SELECT ok(pg_temp.plan_has('SELECT bleu(hyp, ref), chrf(hyp, ref) FROM public.metric_rows', 'Partial Aggregate'),
  'bleu() and chrf() over the table plan a partial aggregation');
SELECT bleu(hyp, ref) AS bleu_parallel, chrf(hyp, ref) AS chrf_parallel FROM public.metric_rows \gset
SELECT cmp_ok(abs(:bleu_parallel - (SELECT bleu(hyp, ref) FROM pairs, generate_series(1, 200))), '<', 1e-9::float8,
  'bleu() with partial aggregation equals the serial one');
SELECT cmp_ok(abs(:chrf_parallel - (SELECT chrf(hyp, ref) FROM pairs, generate_series(1, 200))), '<', 1e-9::float8,
  'chrf() with partial aggregation equals the serial one');
RESET parallel_setup_cost;

SELECT :'data' <> 'missing' AS have_data \gset
\if :have_data
CREATE TEMP TABLE m (n serial, hyp text, ref text);
\copy m(hyp) FROM 'test/fixtures/metrics/multi30k_test_2016_beam4.txt' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02', NULL E'\x03')
CREATE TEMP TABLE r (n serial, ref text);
\copy r(ref) FROM PROGRAM 'zcat ../shared/data/multi30k/test_2016_flickr.en.gz' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02', NULL E'\x03')
UPDATE m SET ref = r.ref FROM r WHERE r.n = m.n;
SELECT cmp_ok(abs((SELECT bleu(hyp, ref) FROM m) - (SELECT (j->'multi30k_test_2016_beam4'->>'bleu')::float8 FROM fx)), '<=', 0.01::float8,
  'bleu() of the bundled model on test_2016: ' || round((SELECT bleu(hyp, ref) FROM m)::numeric, 2) || ', tools/bleu.py ' || round((SELECT (j->'multi30k_test_2016_beam4'->>'bleu')::numeric FROM fx), 2));
SELECT cmp_ok(abs((SELECT chrf(hyp, ref) FROM m) - (SELECT (j->'multi30k_test_2016_beam4'->>'chrf')::float8 FROM fx)), '<=', 0.01::float8,
  'chrf() of the bundled model on test_2016: ' || round((SELECT chrf(hyp, ref) FROM m)::numeric, 2) || ', reference ' || round((SELECT (j->'multi30k_test_2016_beam4'->>'chrf')::numeric FROM fx), 2));
\else
SELECT skip('../shared/data is not there', 2);
\endif

SELECT * FROM finish();
ROLLBACK;
