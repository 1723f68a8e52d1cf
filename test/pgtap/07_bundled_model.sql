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
SELECT plan(8);

SELECT cmp_ok(import_model('multi30k_de_en'), '>', 1000000::bigint, 'import_model(name) loads the bundled model without a path');
SELECT throws_ok($$SELECT import_model('no_such_bundle')$$, '42704', 'no bundled model "no_such_bundle"', 'an unknown bundled model');
SELECT throws_ok($$SELECT import_model('../etc')$$, '42704', 'no bundled model "../etc"', 'no paths in bundled model names');

CREATE TEMP TABLE expected AS
SELECT c->>'de' AS de, c->>'greedy' AS greedy, c->>'beam4' AS beam4
FROM jsonb_array_elements(pg_read_file(:'root' || '/test/fixtures/bundled_multi30k_de_en.json')::jsonb) c;
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

SELECT * FROM finish();
ROLLBACK;
