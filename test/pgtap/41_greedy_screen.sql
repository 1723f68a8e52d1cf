-- Greedy decoding's screen (src/core/greedy_screen.c): an fp32 output layer
-- read in bf16 first, the few tokens that could win computed in fp32.  The
-- tokens are Hugging Face's (the PyTorch fixtures of tools/gen_model_fixtures.py,
-- every greedy case: repetition penalty, no-repeat n-grams, min_length,
-- max_length, bad_words_ids), the same with transformer.greedy_screen off,
-- from the backend's own load and from the shared weights file.  The
-- bound itself is tested in test_core (test_greedy_screen), where the
-- mutants of make mutation are caught.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`

SET client_min_messages = warning;
DROP EXTENSION IF EXISTS transformer CASCADE;
CREATE EXTENSION transformer;
-- committed first: a shared weights file is only built from committed rows
SELECT import_model('swish', :'root' || '/test/fixtures/models/marian_swish') \g /dev/null
SELECT quantize_model('swish', 'swish_int8') \g /dev/null

BEGIN;
SELECT plan(8);

CREATE TEMP TABLE expected AS
SELECT n, c FROM jsonb_array_elements(pg_read_file(:'root' || '/test/fixtures/models/marian_swish/expected.json')::jsonb)
  WITH ORDINALITY AS e(c, n);
CREATE FUNCTION pg_temp.ints(j jsonb) RETURNS int[] LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(array_agg(x::int ORDER BY i), '{}') FROM jsonb_array_elements_text(j) WITH ORDINALITY t(x, i) $$;
-- reload this backend's models: a relcache invalidation of our tables
CREATE FUNCTION pg_temp.reload() RETURNS void LANGUAGE sql AS $$ ALTER TABLE transformer_tensors SET (fillfactor = 100) $$;
CREATE FUNCTION pg_temp.decode(m text) RETURNS TABLE (n bigint, k bigint, want int[], got int[]) LANGUAGE sql AS $$
  SELECT n, k, pg_temp.ints(d->'ids'),
         generate(c->>'input', m, beam_size => 1, max_length => (o->>'max_length')::int,
                  no_repeat_ngram_size => (o->>'no_repeat_ngram_size')::int,
                  repetition_penalty => (o->>'repetition_penalty')::float8,
                  min_length => (o->>'min_length')::int, max_new_tokens => (o->>'max_new_tokens')::int)
  FROM expected, jsonb_array_elements(c->'decode') WITH ORDINALITY AS e(d, k), LATERAL (SELECT d->'options' AS o) x
  WHERE (o->>'num_beams')::int = 1 $$;
SET LOCAL transformer.max_length_factor = 0;

SELECT is(current_setting('transformer.greedy_screen'), 'on', 'transformer.greedy_screen is on by default');

CREATE TEMP TABLE screened AS SELECT * FROM pg_temp.decode('swish');
SELECT cmp_ok((SELECT count(*)::int FROM screened), '>=', 10, 'greedy cases of the fixture: ' || (SELECT count(*) FROM screened));
SELECT is((SELECT string_agg(n || '/' || k, ', ') FROM screened WHERE got <> want), NULL,
  'screened: every greedy case as Hugging Face''s (the fp32 fixture model)');

SET LOCAL transformer.greedy_screen = off;
SELECT is((SELECT string_agg(n || '/' || k, ', ') FROM pg_temp.decode('swish') d JOIN screened s USING (n, k) WHERE d.got <> s.got), NULL,
  'off: the same tokens, the whole fp32 layer read at every step');
RESET transformer.greedy_screen;

-- the screen comes back from the shared file (the weights file's optional fields)
SELECT pg_temp.reload();
SELECT is((SELECT count(*)::int FROM transformer_weight_files() WHERE kind = 'weights' AND name = 'swish' AND state = 'current'
             AND database = (SELECT oid FROM pg_database WHERE datname = current_database())), 1,
  'the model has a shared weights file');
SELECT is((SELECT string_agg(n || '/' || k, ', ') FROM pg_temp.decode('swish') d JOIN screened s USING (n, k) WHERE d.got <> s.got), NULL,
  'mapped from the shared file: the same tokens');

-- translate(text[]) of several sentences: up to 4 greedy rows a step are screened, more are not
SELECT is((SELECT array_agg(translate(c->>'input', 'swish', beam_size => 1) ORDER BY n) FROM expected),
          (SELECT translate(array_agg(c->>'input' ORDER BY n), 'swish', beam_size => 1) FROM expected),
  'a batch translates as its sentences one by one');

-- int8 has no fp32 layer to screen: unchanged
SELECT is((SELECT string_agg(generate(c->>'input', 'swish_int8', beam_size => 1)::text, ';' ORDER BY n) FROM expected),
          (SELECT string_agg(generate(c->>'input', 'swish_int8', beam_size => 1)::text, ';' ORDER BY n) FROM expected, (SELECT set_config('transformer.greedy_screen', 'off', true)) s),
  'an int8 model decodes the same with the setting either way');

SELECT * FROM finish();
ROLLBACK;

SET client_min_messages = warning;
SELECT drop_model('swish_int8') \g /dev/null
SELECT drop_model('swish') \g /dev/null
DROP EXTENSION transformer CASCADE;
