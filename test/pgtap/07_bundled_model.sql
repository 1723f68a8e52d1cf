-- The bundled German->English model: installed with the extension, loaded
-- by name, translating as PyTorch decodes the same weights
-- (test/fixtures/bundled_multi30k_de_en.json, tools/gen_bundled_fixtures.py).
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(12);

SELECT cmp_ok(import_model('multi30k_de_en'), '>', 1000000::bigint, 'import_model(name) loads the bundled model without a path');
SELECT throws_ok($$SELECT import_model('no_such_bundle')$$, '42704', 'no bundled model "no_such_bundle"', 'an unknown bundled model');
SELECT throws_ok($$SELECT import_model('../etc')$$, '42704', 'no bundled model "../etc"', 'no paths in bundled model names');

CREATE TEMP TABLE expected AS
SELECT c->>'de' AS de, c->>'greedy' AS greedy, c->>'beam4' AS beam4
FROM jsonb_array_elements(pg_read_file(:'root' || '/test/fixtures/bundled_multi30k_de_en.json')::jsonb->'sentences') c;
SET LOCAL transformer.default_model = 'multi30k_de_en';

SELECT is((SELECT array_agg(de) FROM expected WHERE translate(de, 'multi30k_de_en', 1) <> greedy), NULL,
  'greedy translations as PyTorch decodes them: ' || (SELECT string_agg(greedy, ' | ') FROM expected));
SELECT is((SELECT array_agg(de) FROM expected WHERE translate(de) <> beam4), NULL,
  'beam-4 translations (the default) as PyTorch decodes them: ' || (SELECT string_agg(beam4, ' | ') FROM expected));
SELECT is(translate(ARRAY(SELECT de FROM expected), 'multi30k_de_en'), ARRAY(SELECT beam4 FROM expected),
  'the batch form translates the same');
-- 40 sentences: two groups decoded together (32 + 8), beams finishing at different steps
SELECT is(translate(ARRAY(SELECT de FROM expected, generate_series(1, 5) ORDER BY generate_series, de), 'multi30k_de_en', 1),
  ARRAY(SELECT greedy FROM expected, generate_series(1, 5) ORDER BY generate_series, de),
  'greedy batch of 40 as PyTorch decodes each sentence');
SELECT is(translate(ARRAY(SELECT de FROM expected, generate_series(1, 5) ORDER BY generate_series, de), 'multi30k_de_en', 4),
  ARRAY(SELECT beam4 FROM expected, generate_series(1, 5) ORDER BY generate_series, de),
  'beam-4 batch of 40 as PyTorch decodes each sentence');

-- validation sentences on which beam search differs from greedy, with every
-- option set, against Hugging Face's rules (tools/marian_torch.py), no guard
CREATE FUNCTION pg_temp.ints(j jsonb) RETURNS int[] LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(array_agg(x::int ORDER BY i), '{}') FROM jsonb_array_elements_text(j) WITH ORDINALITY t(x, i) $$;
SET LOCAL transformer.max_length_factor = 0;
CREATE TEMP TABLE decoded AS
SELECT n, k, o, pg_temp.ints(d->'ids') AS want,
       generate(c->>'de', 'multi30k_de_en', beam_size => (o->>'num_beams')::int, max_length => (o->>'max_length')::int,
                early_stopping => (o->>'early_stopping')::boolean, length_penalty => (o->>'length_penalty')::float8,
                no_repeat_ngram_size => (o->>'no_repeat_ngram_size')::int, repetition_penalty => (o->>'repetition_penalty')::float8,
                min_length => (o->>'min_length')::int, max_new_tokens => (o->>'max_new_tokens')::int) AS got
FROM jsonb_array_elements(pg_read_file(:'root' || '/test/fixtures/bundled_multi30k_de_en.json')::jsonb->'search') WITH ORDINALITY AS s(c, n),
     jsonb_array_elements(c->'decode') WITH ORDINALITY AS e(d, k), LATERAL (SELECT d->'options' AS o) x;
SELECT is((SELECT string_agg('sentence ' || n || ' with ' || o::text, '; ' ORDER BY n, k) FROM decoded WHERE got <> want), NULL,
  'bundled model: generate() identical to Hugging Face''s rules in ' || (SELECT count(*) FROM decoded) || ' cases (greedy, beam 4 and 5, every option)');
SELECT is((SELECT count(*)::int FROM decoded a JOIN decoded b USING (n) WHERE a.o = '{"num_beams": 1}' AND b.o = '{}' AND a.want <> b.want),
  (SELECT count(DISTINCT n)::int FROM decoded), 'on each of them beam 4 differs from greedy');
SELECT cmp_ok((SELECT count(*)::int FROM decoded a JOIN decoded b USING (n) WHERE a.o = '{"num_beams": 4, "length_penalty": 0.6}'
               AND b.o = '{"num_beams": 4, "length_penalty": 2.0}' AND a.want <> b.want), '>', 0, 'and the length penalty changes some');

SELECT is(translate(ARRAY(SELECT c->>'de' FROM jsonb_array_elements(pg_read_file(:'root' || '/test/fixtures/bundled_multi30k_de_en.json')::jsonb->'search') c),
                    'multi30k_de_en', 4, no_repeat_ngram_size => 2, repetition_penalty => 1.3, min_length => 12, length_penalty => 0.8),
          ARRAY(SELECT translate(c->>'de', 'multi30k_de_en', 4, no_repeat_ngram_size => 2, repetition_penalty => 1.3, min_length => 12, length_penalty => 0.8)
                FROM jsonb_array_elements(pg_read_file(:'root' || '/test/fixtures/bundled_multi30k_de_en.json')::jsonb->'search') c),
  'the batch form decodes with the options as the one-row form');

SELECT * FROM finish();
ROLLBACK;
