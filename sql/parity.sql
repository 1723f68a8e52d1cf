-- parity with PyTorch: fixtures from tools/gen_fixtures.py (torch ops and
-- nn.MultiheadAttention with identity projections); max abs diff <= 1e-5
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS transformer;
RESET client_min_messages;

CREATE TABLE attention_cases (
  id int PRIMARY KEY, op text, source text, heads int, causal boolean,
  q real[], k real[], v real[], expected real[]);
\set ECHO none
\set QUIET on
\i test/fixtures/attention_cases.sql
\set QUIET off
\set ECHO all

CREATE FUNCTION pg_temp.max_abs_diff(a real[], b real[]) RETURNS double precision
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN array_dims(a) IS DISTINCT FROM array_dims(b) THEN 'Infinity'
              ELSE (SELECT max(abs(x::float8 - y::float8)) FROM unnest(a, b) u(x, y)) END
$$;

CREATE TABLE parity AS
SELECT id, op, source, pg_temp.max_abs_diff(
  CASE op WHEN 'self_attention' THEN self_attention(q, k, v, causal)
          WHEN 'attention_weights' THEN attention_weights(q, k, causal)
          WHEN 'multihead_attention' THEN multihead_attention(q, k, v, heads, causal) END,
  expected) AS diff
FROM attention_cases;

SELECT op, source, count(*) AS cases, max(diff) <= 1e-5 AS within_1e_5
FROM parity GROUP BY op, source ORDER BY op, source;
-- every case checked, none failed
SELECT count(*) AS cases, count(*) FILTER (WHERE NOT diff <= 1e-5) AS failing FROM parity;
DROP TABLE parity, attention_cases;
