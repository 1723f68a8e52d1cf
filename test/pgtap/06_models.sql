-- Models: parity with PyTorch (tools/gen_model_fixtures.py: three random-
-- weight Transformers built from torch.nn modules in the Marian layout, in
-- fp32, fp16 and bf16), batch and default-model forms, export round trip,
-- the cache.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(35);

SELECT is(import_model(m, :'root' || '/test/fixtures/models/' || m), p::bigint, 'import_model ' || m || ': ' || p || ' parameters')
FROM (VALUES ('marian_swish', 49385), ('paper_relu', 55616), ('prenorm_gelu', 60041)) v(m, p);

CREATE TEMP TABLE expected AS
SELECT m, n, c FROM unnest(ARRAY['marian_swish', 'paper_relu', 'prenorm_gelu']) m,
  jsonb_array_elements(pg_read_file(:'root' || '/test/fixtures/models/' || m || '/expected.json')::jsonb) WITH ORDINALITY AS e(c, n);
CREATE FUNCTION pg_temp.ints(j jsonb) RETURNS int[] LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(array_agg(x::int ORDER BY i), '{}') FROM jsonb_array_elements_text(j) WITH ORDINALITY t(x, i) $$;
CREATE FUNCTION pg_temp.maxdiff(a real[], j jsonb) RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN cardinality(a) <> jsonb_array_length(j) THEN 'Infinity'::float8
    ELSE (SELECT max(abs(x::float8 - y::float8)) FROM unnest(a, ARRAY(SELECT jsonb_array_elements_text(j)::float8)) u(x, y)) END $$;

SELECT cmp_ok((SELECT max(pg_temp.maxdiff(input_embeddings(c->>'input', m), c->'embed')) FROM expected WHERE m = mm),
  '<=', 1e-5::float8, mm || ': input_embeddings() within 1e-5 of PyTorch') FROM unnest(ARRAY['marian_swish', 'paper_relu', 'prenorm_gelu']) mm;
SELECT cmp_ok((SELECT max(pg_temp.maxdiff(encoder_output(c->>'input', m), c->'encode')) FROM expected WHERE m = mm),
  '<=', 1e-4::float8, mm || ': encoder_output() within 1e-4 of PyTorch') FROM unnest(ARRAY['marian_swish', 'paper_relu', 'prenorm_gelu']) mm;
SELECT diag('largest encoder_output() difference: ' || max(pg_temp.maxdiff(encoder_output(c->>'input', m), c->'encode'))) FROM expected;
-- every input with every option set of tools/gen_model_fixtures.py, against
-- Hugging Face's generate() rules as tools/marian_torch.py ports them (no
-- runaway guard: transformer.max_length_factor = 0)
SET LOCAL transformer.max_length_factor = 0;
CREATE TEMP TABLE decoded AS
SELECT m, n, k, o, pg_temp.ints(d->'ids') AS want,
       generate(c->>'input', m, beam_size => (o->>'num_beams')::int, max_length => (o->>'max_length')::int,
                early_stopping => (o->>'early_stopping')::boolean, length_penalty => (o->>'length_penalty')::float8,
                no_repeat_ngram_size => (o->>'no_repeat_ngram_size')::int, repetition_penalty => (o->>'repetition_penalty')::float8,
                min_length => (o->>'min_length')::int, max_new_tokens => (o->>'max_new_tokens')::int) AS got
FROM expected, jsonb_array_elements(c->'decode') WITH ORDINALITY AS e(d, k), LATERAL (SELECT d->'options' AS o) x;
SELECT is((SELECT string_agg('input ' || n || ' with ' || o::text, '; ' ORDER BY n, k) FROM decoded WHERE m = mm AND got <> want), NULL,
  mm || ': generate() identical to Hugging Face''s rules, ' || (SELECT count(*) FROM decoded WHERE m = mm) || ' cases (greedy, beam 3-5, length penalties, early stopping, no-repeat n-grams, repetition penalty, min_length, max_length, max_new_tokens)')
FROM unnest(ARRAY['marian_swish', 'paper_relu', 'prenorm_gelu']) mm;
SELECT cmp_ok((SELECT count(*)::int FROM decoded WHERE cardinality(want) BETWEEN 1 AND 30), '>=', 10, 'some outputs end with EOS well before max_length');
SELECT cmp_ok((SELECT count(*)::int FROM decoded a JOIN decoded b USING (m, n) WHERE a.o = '{"num_beams": 1}' AND b.o = '{"num_beams": 3}' AND a.want <> b.want), '>=', 5,
  'beam search differs from greedy on some inputs');
-- pad (decoder_start_token_id) has a logit high enough to win in marian_swish: bad_words_ids bans it
SELECT is((SELECT count(*)::int FROM decoded WHERE m = 'marian_swish' AND 200 = ANY(got)), 0, 'pad is never emitted, though it would win');
SELECT load_model('swish_pad_allowed',
  convert_to((convert_from(pg_read_binary_file(:'root' || '/test/fixtures/models/marian_swish/config.json'), 'UTF8')::jsonb - 'bad_words_ids')::text, 'UTF8'),
  pg_read_binary_file(:'root' || '/test/fixtures/models/marian_swish/model.safetensors'),
  pg_read_binary_file(:'root' || '/test/fixtures/models/marian_swish/source.spm'),
  pg_read_binary_file(:'root' || '/test/fixtures/models/marian_swish/target.spm'),
  pg_read_binary_file(:'root' || '/test/fixtures/models/marian_swish/vocab.json')) \g /dev/null
SELECT ok(200 = ANY(generate('a', 'swish_pad_allowed', 1)), 'without bad_words_ids pad wins, as in Hugging Face''s generate()');
-- the generation config comes from generation_config.json when there is one (prenorm_gelu's)
SELECT is((SELECT generation_config->>'early_stopping' FROM transformer_models WHERE name = 'prenorm_gelu'), 'never', 'generation_config.json is stored');

-- a length penalty of 0.6: the same weights, loaded from bytes with another config
SELECT load_model('swish_lp06',
  convert_to(jsonb_set(convert_from(pg_read_binary_file(:'root' || '/test/fixtures/models/marian_swish/config.json'), 'UTF8')::jsonb,
                       '{length_penalty}', '0.6')::text, 'UTF8'),
  pg_read_binary_file(:'root' || '/test/fixtures/models/marian_swish/model.safetensors'),
  pg_read_binary_file(:'root' || '/test/fixtures/models/marian_swish/source.spm'),
  pg_read_binary_file(:'root' || '/test/fixtures/models/marian_swish/target.spm'),
  pg_read_binary_file(:'root' || '/test/fixtures/models/marian_swish/vocab.json')) \g /dev/null
SELECT is((SELECT string_agg(n::text, ',') FROM decoded WHERE m = 'marian_swish' AND o = '{"num_beams": 3, "length_penalty": 0.6}'
           AND generate((SELECT c->>'input' FROM expected e WHERE e.m = 'marian_swish' AND e.n = decoded.n), 'swish_lp06', 3) <> want),
  NULL, 'load_model from bytes; the configuration''s length penalty 0.6 as the per-call one');

-- translate() is generate() decoded by the target tokenizer
SELECT is((SELECT array_agg(n ORDER BY n) FROM decoded d WHERE m = 'paper_relu' AND o = '{"num_beams": 3}'
           AND (SELECT c->>'input' = btrim(c->>'input', E' \t') FROM expected e WHERE e.m = d.m AND e.n = d.n)
           AND translate((SELECT c->>'input' FROM expected e WHERE e.m = d.m AND e.n = d.n), m, 3) IS DISTINCT FROM detokenize(want, 'paper_relu/target')), NULL,
  'translate() decodes the generated ids (of inputs without leading or trailing whitespace)');
SELECT is(translate(E'  tokens   and\tpositions  ', 'paper_relu', 3), '  ' || translate(E'tokens   and\tpositions', 'paper_relu', 3) || '  ',
  'translate() keeps leading and trailing whitespace');
SELECT is(translate(ARRAY(SELECT c->>'input' FROM expected WHERE m = 'paper_relu' ORDER BY n), 'paper_relu', 2),
          ARRAY(SELECT translate(c->>'input', 'paper_relu', 2) FROM expected WHERE m = 'paper_relu' ORDER BY n),
  'the batch form gives the one-row form''s outputs');
SELECT is(translate(ARRAY['Transformer', NULL], 'paper_relu'), ARRAY[translate('Transformer', 'paper_relu'), NULL], 'NULL elements stay NULL');
SELECT is(translate(ARRAY['a', NULL, 'SELECT attention FROM memory', NULL, 'Transformer'], 'marian_swish', 3),
          ARRAY[translate('a', 'marian_swish', 3), NULL, translate('SELECT attention FROM memory', 'marian_swish', 3), NULL, translate('Transformer', 'marian_swish', 3)],
  'NULL elements in the middle keep the other outputs in place');
SELECT is(generate('SELECT attention FROM memory', 'paper_relu', 2, max_new_tokens => 4, no_repeat_ngram_size => 1),
          generate('SELECT attention FROM memory', 'paper_relu', 2, max_length => 5, no_repeat_ngram_size => 1), 'max_new_tokens n is max_length n + 1');
SET LOCAL transformer.default_model = 'prenorm_gelu';
SELECT is(translate('Transformer'), translate('Transformer', 'prenorm_gelu'), 'translate(input) uses transformer.default_model');
SELECT is(translate('Transformer', 'prenorm_gelu'), translate('Transformer', 'prenorm_gelu', 3), 'beam_size defaults to the config''s num_beams');
SELECT is(translate(NULL::text, 'prenorm_gelu'), NULL, 'NULL input gives NULL');

-- export writes the five files back, byte for byte
SELECT is(export_model('paper_relu', '/tmp/transformer_tap_export_' || pg_backend_pid()), (SELECT count(*)::int FROM transformer_tensors WHERE model = 'paper_relu'), 'export_model writes every tensor');
SELECT is((SELECT count(*)::int FROM unnest(ARRAY['config.json', 'model.safetensors', 'source.spm', 'target.spm', 'vocab.json']) f
           WHERE md5(pg_read_binary_file('/tmp/transformer_tap_export_' || pg_backend_pid() || '/' || f))
               = md5(pg_read_binary_file(:'root' || '/test/fixtures/models/paper_relu/' || f))), 5,
  'the exported directory is identical to the imported one');

-- tensors are stored without compression, in the file's dtype
SELECT is((SELECT attstorage FROM pg_attribute WHERE attrelid = 'transformer_tensors'::regclass AND attname = 'data'), 'e', 'tensor data is stored EXTERNAL (no TOAST compression)');
SELECT is((SELECT array_agg(DISTINCT dtype) FROM transformer_tensors WHERE model = 'prenorm_gelu'), '{BF16}', 'bf16 tensors kept as bf16');

-- the cache follows re-imports and drops
SELECT is(drop_model('swish_lp06'), true, 'drop_model');
SELECT is((SELECT count(*)::int FROM transformer_tensors WHERE model = 'swish_lp06') + (SELECT count(*)::int FROM transformer_tokenizers WHERE name LIKE 'swish_lp06/%'), 0,
  'drop_model removes tensors and tokenizers');
SELECT throws_ok($$SELECT translate('a', 'swish_lp06')$$, '42704', 'model "swish_lp06" does not exist', 'a dropped model is gone from the cache');
SELECT translate('Transformer', 'marian_swish') AS before \gset
SELECT import_model('marian_swish', :'root' || '/test/fixtures/models/paper_relu') \g /dev/null
SELECT is(translate('Transformer', 'marian_swish'), translate('Transformer', 'paper_relu'), 're-importing a model replaces the cached one');

SELECT * FROM finish();
ROLLBACK;
