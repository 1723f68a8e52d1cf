-- softmax_weighted_sum and attend over table rows: equal to self_attention,
-- stable for extreme scores, and the same in parallel plans.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(13);

CREATE FUNCTION pg_temp.max_abs_diff(a real[], b real[]) RETURNS double precision
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN array_dims(a) IS DISTINCT FROM array_dims(b) THEN 'Infinity'
              ELSE (SELECT max(abs(x::float8 - y::float8)) FROM unnest(a, b) u(x, y)) END
$$;

-- 50000 rows of 16-dimensional keys and 8-dimensional values
CREATE TABLE memory AS
SELECT i AS id,
       (SELECT array_agg(sin(i * 0.37 + j * 1.7)::real ORDER BY j) FROM generate_series(1, 16) j) AS k,
       (SELECT array_agg(cos(i * 0.11 + j * 0.5)::real ORDER BY j) FROM generate_series(1, 8) j) AS v
FROM generate_series(1, 50000) i;
ANALYZE memory;

CREATE TABLE queries AS
SELECT qid, (SELECT array_agg((sin(qid * 3.1 + j) * 2)::real ORDER BY j) FROM generate_series(1, 16) j) AS q
FROM generate_series(1, 4) qid;
ANALYZE queries;

-- attend = self_attention for one query over the same rows
SELECT cmp_ok(pg_temp.max_abs_diff(
  (SELECT attend(qu.q, k, v) FROM memory),
  (SELECT array_agg(x) FROM unnest((SELECT self_attention(ARRAY[qu.q], array_agg(k ORDER BY id), array_agg(v ORDER BY id)) FROM memory)) x)
  ), '<', 1e-5::float8, format('attend equals self_attention for query %s', qu.qid))
FROM queries qu ORDER BY qid;

SELECT is(array_dims((SELECT attend(q, k, v) FROM memory, queries WHERE qid = 1)), '[1:8]', 'attend returns a d_v vector');

-- softmax_weighted_sum with explicit scores equals attend
SELECT cmp_ok(pg_temp.max_abs_diff(
  (SELECT attend(q, k, v) FROM memory, queries WHERE qid = 2),
  (SELECT softmax_weighted_sum((SELECT sum(a * b) FROM unnest(q, k) u(a, b)) / 4, v) FROM memory, queries WHERE qid = 2)),
  '<', 1e-6::float8, 'softmax_weighted_sum(q·k/√d, v) equals attend(q, k, v)');

-- scores of ±1e4: the result is the mean of the rows at the maximum
SELECT cmp_ok(pg_temp.max_abs_diff(
  (SELECT softmax_weighted_sum(CASE WHEN id % 100 = 0 THEN 1e4 ELSE -1e4 + id % 7 END, v) FROM memory),
  (SELECT array_agg(m ORDER BY j) FROM (SELECT j, avg(x)::real AS m FROM memory, unnest(v) WITH ORDINALITY u(x, j)
    WHERE id % 100 = 0 GROUP BY j) t)),
  '<', 1e-6::float8, 'scores of ±1e4 neither overflow nor lose precision');
SELECT cmp_ok(pg_temp.max_abs_diff(
  (SELECT softmax_weighted_sum(-1e4 + (id % 2) * ln(3), v) FROM memory WHERE id <= 2),
  (SELECT array_agg((0.25 * a + 0.75 * b)::real ORDER BY j) FROM
     unnest((SELECT v FROM memory WHERE id = 2), (SELECT v FROM memory WHERE id = 1)) WITH ORDINALITY u(a, b, j))),
  '<', 1e-6::float8, 'scores near -1e4 keep their relative weights');

-- serial results
CREATE TEMP TABLE serial AS
SELECT qid, attend(q, k, v) AS a, softmax_weighted_sum(k[1] * 30, v) AS s FROM memory, queries GROUP BY qid;
SELECT is((SELECT count(*)::int FROM serial), 4, 'four groups');

-- force a parallel plan
SET LOCAL parallel_setup_cost = 0;
SET LOCAL min_parallel_table_scan_size = 0;
SET LOCAL max_parallel_workers_per_gather = 2;
SET LOCAL jit = off;

CREATE FUNCTION pg_temp.explain_json(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE plan json;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || query INTO plan;
  RETURN plan::text;
END $$;

\set grouped 'SELECT qid, attend(q, k, v) AS a, softmax_weighted_sum(k[1] * 30, v) AS s FROM memory, queries GROUP BY qid'
SELECT matches(pg_temp.explain_json(:'grouped'), '"Partial Mode": "Partial"', 'EXPLAIN shows a Partial Aggregate');
SELECT matches(pg_temp.explain_json(:'grouped'), '"Workers Launched": [12]', 'parallel workers ran the aggregates');
CREATE TEMP TABLE parallel AS :grouped;

SELECT cmp_ok((SELECT max(pg_temp.max_abs_diff(s.a, p.a)) FROM serial s JOIN parallel p USING (qid)),
  '<', 1e-6::float8, 'attend: the same result with and without a parallel plan');
SELECT cmp_ok((SELECT max(pg_temp.max_abs_diff(s.s, p.s)) FROM serial s JOIN parallel p USING (qid)),
  '<', 1e-6::float8, 'softmax_weighted_sum: the same result with and without a parallel plan');

SELECT * FROM finish();
ROLLBACK;
