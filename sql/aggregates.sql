-- softmax_weighted_sum and attend: streaming attention over table rows
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS transformer;
RESET client_min_messages;
SET extra_float_digits = -2;

-- equal scores: the mean
SELECT softmax_weighted_sum(s, v) FROM (VALUES (0::float8, '{1,2}'::real[]), (0, '{3,4}')) t(s, v);
-- scores 0 and ln 3: weights 1/4 and 3/4
SELECT softmax_weighted_sum(s, v) FROM (VALUES (0::float8, '{0,4}'::real[]), (ln(3), '{4,0}')) t(s, v);
-- one row: its value
SELECT softmax_weighted_sum(42, '{7,8,9}');
-- scores of ±1e4 neither overflow nor lose precision
SELECT softmax_weighted_sum(s, v) FROM (VALUES (1e4::float8, '{1,2}'::real[]), (-1e4, '{100,100}'), (1e4, '{3,4}')) t(s, v);
SELECT softmax_weighted_sum(s, v) FROM (VALUES (-1e4::float8, '{1,2}'::real[]), (-1e4 + ln(3), '{5,6}')) t(s, v);
-- the rising maximum is rescaled: the order of rows does not matter
SELECT softmax_weighted_sum(s, v ORDER BY s) = softmax_weighted_sum(s, v ORDER BY s DESC) AS order_free
FROM (VALUES (1::float8, '{1}'::real[]), (2, '{2}'), (3, '{3}'), (400, '{4}')) t(s, v);
-- rows with a NULL score or value are skipped
SELECT softmax_weighted_sum(s, v) FROM (VALUES (0::float8, '{1}'::real[]), (NULL, '{100}'), (0, NULL), (0, '{3}')) t(s, v);
-- no rows, or only NULL ones: NULL
SELECT softmax_weighted_sum(s, v) IS NULL AS no_rows FROM (VALUES (0::float8, '{1}'::real[])) t(s, v) WHERE false;
SELECT softmax_weighted_sum(NULL, '{1}') IS NULL AS only_nulls;
-- per group
SELECT g, softmax_weighted_sum(s, v) FROM (VALUES (1, 0::float8, '{1}'::real[]), (1, 0, '{3}'), (2, 5, '{10}')) t(g, s, v) GROUP BY g ORDER BY g;
-- as a window aggregate: a running softmax-weighted mean
SELECT i, softmax_weighted_sum(0, ARRAY[i::real]) OVER (ORDER BY i) FROM generate_series(1, 4) i;

-- attend: score = query·key/√d per row
SELECT attend('{1,0}', k, v) FROM (VALUES ('{1,0}'::real[], '{1,2}'::real[]), ('{0,1}', '{3,4}')) t(k, v);
SELECT attend(q, k, v) IS NULL AS null_query FROM (VALUES (NULL::real[], '{1}'::real[], '{1}'::real[])) t(q, k, v);

-- attend equals self_attention for one query over the same rows
CREATE TABLE memory (id int, k real[], v real[]);
INSERT INTO memory
SELECT i, ARRAY[sin(i), cos(i * 0.7), sin(i * 1.3), cos(i * 0.1)]::real[],
          ARRAY[i % 7, (i * 3) % 11, sin(i)]::real[]
FROM generate_series(1, 20000) i;
ANALYZE memory;
SELECT max(abs(a - b)) < 1e-5 AS attend_equals_self_attention FROM unnest(
  (SELECT attend('{0.5,-1,2,0.25}', k, v) FROM memory),
  (SELECT self_attention('{{0.5,-1,2,0.25}}', array_agg(k ORDER BY id), array_agg(v ORDER BY id)) FROM memory)) u(a, b);
-- softmax_weighted_sum with the same scores gives the same result
SELECT max(abs(a - b)) < 1e-6 AS same_as_attend FROM unnest(
  (SELECT attend('{0.5,-1,2,0.25}', k, v) FROM memory),
  (SELECT softmax_weighted_sum((0.5 * k[1] - k[2] + 2 * k[3] + 0.25 * k[4]) / 2, v) FROM memory)) u(a, b);

-- a parallel plan gives the same result as a serial one
CREATE TEMP TABLE serial AS
  SELECT attend('{0.5,-1,2,0.25}', k, v) AS a, softmax_weighted_sum(k[1] * 50, v) AS s FROM memory;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT attend('{0.5,-1,2,0.25}', k, v), softmax_weighted_sum(k[1] * 50, v) FROM memory;
CREATE TEMP TABLE parallel AS
  SELECT attend('{0.5,-1,2,0.25}', k, v) AS a, softmax_weighted_sum(k[1] * 50, v) AS s FROM memory;
SELECT (SELECT max(abs(x - y)) FROM unnest(serial.a, parallel.a) u(x, y)) < 1e-6 AS attend_same,
       (SELECT max(abs(x - y)) FROM unnest(serial.s, parallel.s) u(x, y)) < 1e-6 AS softmax_weighted_sum_same
FROM serial, parallel;
RESET ALL;

-- declared volatility and parallel safety
SELECT proname, prokind, provolatile, proisstrict, proparallel FROM pg_proc
WHERE proname IN ('softmax_weighted_sum', 'attend') OR proname LIKE 'softmax_weighted_sum\_%' OR proname = 'attend_accum'
ORDER BY 1;
SELECT aggfnoid, aggcombinefn, agginitval FROM pg_aggregate WHERE aggfnoid::text IN ('softmax_weighted_sum', 'attend') ORDER BY 1;
DROP TABLE memory;
