-- Parity with PyTorch, case by case: the fixtures of tools/gen_fixtures.py
-- (torch ops, and nn.MultiheadAttention with identity projections).
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
CREATE EXTENSION transformer;

CREATE TEMP TABLE attention_cases (
  id int PRIMARY KEY, op text, source text, heads int, causal boolean,
  q real[], k real[], v real[], expected real[]);
\i test/fixtures/attention_cases.sql

CREATE FUNCTION pg_temp.max_abs_diff(a real[], b real[]) RETURNS double precision
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN array_dims(a) IS DISTINCT FROM array_dims(b) THEN 'Infinity'
              ELSE (SELECT max(abs(x::float8 - y::float8)) FROM unnest(a, b) u(x, y)) END
$$;

CREATE TEMP TABLE parity AS
SELECT id, op, source, causal, heads, array_dims(q) AS q_dims, array_dims(k) AS k_dims,
  pg_temp.max_abs_diff(
    CASE op WHEN 'self_attention' THEN self_attention(q, k, v, causal)
            WHEN 'attention_weights' THEN attention_weights(q, k, causal)
            WHEN 'multihead_attention' THEN multihead_attention(q, k, v, heads, causal) END,
    expected) AS diff
FROM attention_cases;

SELECT plan((SELECT count(*)::int + 2 FROM parity));

SELECT cmp_ok(diff, '<=', 1e-5::float8,
  format('%s vs %s: q %s, k %s%s%s: max abs diff %s', op, source, q_dims, k_dims,
         CASE WHEN causal THEN ', causal' ELSE '' END,
         CASE WHEN heads IS NOT NULL THEN ', ' || heads || ' heads' ELSE '' END,
         to_char(diff, '9.99EEEE')))
FROM parity ORDER BY id;

SELECT diag(format('largest parity difference over %s cases: %s', count(*), max(diff))) FROM parity;

-- the weights are a distribution: every row sums to 1
SELECT ok(bool_and(abs(s - 1) < 1e-5), 'attention_weights rows sum to 1 in every fixture') FROM (
  SELECT sum(w) AS s FROM attention_cases c,
    unnest(attention_weights(c.q, c.k, c.causal)) WITH ORDINALITY AS u(w, i)
  WHERE c.op = 'attention_weights'
  GROUP BY c.id, (i - 1) / array_length(c.k, 1)) t;

-- causal self_attention row i equals non-causal attention over keys 0..i
SELECT ok(bool_and(pg_temp.max_abs_diff(
    (SELECT array_agg(x) FROM unnest(self_attention(c.q, c.k, c.v, true)) WITH ORDINALITY u(x, j)
      WHERE (j - 1) / array_length(c.v, 2) = 1),
    (SELECT array_agg(x) FROM unnest(self_attention(c.q[2:2], c.k[1:2], c.v[1:2])) x)) < 1e-6),
  'causal row 2 equals attention over the first two keys')
FROM attention_cases c
WHERE c.op = 'self_attention' AND array_length(c.q, 1) >= 2 AND array_length(c.k, 1) >= 2;

SELECT * FROM finish();
ROLLBACK;
