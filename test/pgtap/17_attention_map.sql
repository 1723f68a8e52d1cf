-- attention_map() against torch.nn.MultiheadAttention(need_weights=True,
-- average_attn_weights=False) in a teacher-forced pass over the same output
-- tokens (tools/gen_attention_fixtures.py), on the bundled model and the
-- three random fixture models: every weight within 1e-5, every row sums to 1.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(6);
SELECT import_model('multi30k_de_en') \g /dev/null
SELECT import_model(m, :'root' || '/test/fixtures/models/' || m) FROM unnest(ARRAY['marian_swish', 'paper_relu', 'prenorm_gelu']) m \g /dev/null
SET LOCAL transformer.max_length_factor = 0;

CREATE TEMP TABLE fx AS SELECT c, n FROM jsonb_array_elements(pg_read_file(:'root' || '/test/fixtures/attention_maps.json')::jsonb) WITH ORDINALITY AS e(c, n);
-- the maps first: unnested in one query with the fixtures, each element re-read its
-- document (13.7 s; 0.25 s so)
CREATE TEMP TABLE maps AS
SELECT n, c->>'model' AS model, mp->>'stack' AS stack, (mp->>'layer')::int AS layer, mp->'weights' AS weights
FROM fx, jsonb_array_elements(c->'maps') mp;
CREATE TEMP TABLE want AS
SELECT n, model, stack, layer, h::int AS head, q::int AS query_pos, k::int AS key_pos, w::text::float8 AS weight
FROM maps, jsonb_array_elements(weights) WITH ORDINALITY AS hh(hw, h),
     jsonb_array_elements(hw) WITH ORDINALITY AS qq(qw, q), jsonb_array_elements(qw) WITH ORDINALITY AS kk(w, k);
CREATE TEMP TABLE got AS
SELECT n, c->>'model' AS model, a.* FROM fx, attention_map(c->>'input', c->>'model') a;

SELECT is((SELECT count(*)::int FROM fx f WHERE (SELECT count(DISTINCT query_pos) FROM got g WHERE g.n = f.n AND stack = 'cross')
           <> jsonb_array_length(f.c->'tokens')), 0, 'the output tokens are those of the reference''s decoding');
SELECT cmp_ok((SELECT max(abs(g.weight - w.weight)) FROM got g JOIN want w USING (n, stack, layer, head, query_pos, key_pos) WHERE g.model = mm),
  '<=', 1e-5::float8, mm || ': attention_map() within 1e-5 of nn.MultiheadAttention (max difference '
  || (SELECT max(abs(g.weight - w.weight)) FROM got g JOIN want w USING (n, stack, layer, head, query_pos, key_pos) WHERE g.model = mm) || ')')
FROM unnest(ARRAY['multi30k_de_en', 'marian_swish', 'paper_relu', 'prenorm_gelu']) mm;
SELECT is((SELECT count(*)::int FROM (SELECT n, stack, layer, head, query_pos, sum(weight) s FROM got GROUP BY 1, 2, 3, 4, 5) x WHERE abs(s - 1) > 1e-5)
          + (SELECT count(*)::int FROM want w WHERE w.stack = 'decoder' AND w.key_pos > w.query_pos AND w.weight <> 0)
          + (SELECT count(*)::int FROM want w LEFT JOIN got g USING (n, stack, layer, head, query_pos, key_pos) WHERE g.weight IS NULL AND w.weight <> 0),
  0, 'every row sums to 1; nothing the reference weighs is missing');

SELECT * FROM finish();
ROLLBACK;
