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
SELECT plan(33);

SELECT is(import_model(m, :'root' || '/test/fixtures/models/' || m), p::bigint, 'import_model ' || m || ': ' || p || ' parameters')
FROM (VALUES ('marian_swish', 49385), ('paper_relu', 55817), ('prenorm_gelu', 66473)) v(m, p);

CREATE TEMP TABLE expected AS
SELECT m, n, c FROM unnest(ARRAY['marian_swish', 'paper_relu', 'prenorm_gelu']) m,
  jsonb_array_elements(pg_read_file(:'root' || '/test/fixtures/models/' || m || '/expected.json')::jsonb) WITH ORDINALITY AS e(c, n);
CREATE FUNCTION pg_temp.ints(j jsonb) RETURNS int[] LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(array_agg(x::int ORDER BY i), '{}') FROM jsonb_array_elements_text(j) WITH ORDINALITY t(x, i) $$;
CREATE FUNCTION pg_temp.maxdiff(a real[], j jsonb) RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN cardinality(a) <> jsonb_array_length(j) THEN 'Infinity'::float8
    ELSE (SELECT max(abs(x::float8 - y::float8)) FROM unnest(a, ARRAY(SELECT jsonb_array_elements_text(j)::float8)) u(x, y)) END $$;

SELECT cmp_ok((SELECT max(pg_temp.maxdiff(embed(c->>'input', m), c->'embed')) FROM expected WHERE m = mm),
  '<=', 1e-5::float8, mm || ': embed() within 1e-5 of PyTorch') FROM unnest(ARRAY['marian_swish', 'paper_relu', 'prenorm_gelu']) mm;
SELECT cmp_ok((SELECT max(pg_temp.maxdiff(encode(c->>'input', m), c->'encode')) FROM expected WHERE m = mm),
  '<=', 1e-4::float8, mm || ': encode() within 1e-4 of PyTorch') FROM unnest(ARRAY['marian_swish', 'paper_relu', 'prenorm_gelu']) mm;
SELECT diag('largest encode() difference: ' || max(pg_temp.maxdiff(encode(c->>'input', m), c->'encode'))) FROM expected;
SELECT is((SELECT array_agg(n ORDER BY n) FROM expected WHERE m = mm AND generate(c->>'input', m, 1) <> pg_temp.ints(c->'greedy')),
  NULL, mm || ': greedy ids identical to the PyTorch greedy loop') FROM unnest(ARRAY['marian_swish', 'paper_relu', 'prenorm_gelu']) mm;
SELECT is((SELECT array_agg(n ORDER BY n) FROM expected WHERE m = mm AND generate(c->>'input', m, 3) <> pg_temp.ints(c->'beam3')),
  NULL, mm || ': beam search (3) identical to PyTorch''s') FROM unnest(ARRAY['marian_swish', 'paper_relu', 'prenorm_gelu']) mm;
SELECT is((SELECT array_agg(n ORDER BY n) FROM expected WHERE m = mm AND generate(c->>'input', m, 5, 7) <> pg_temp.ints(c->'beam5_max7')),
  NULL, mm || ': beam search (5, max_length 7) identical to PyTorch''s') FROM unnest(ARRAY['marian_swish', 'paper_relu', 'prenorm_gelu']) mm;

-- a length penalty of 0.6: the same weights, loaded from bytes with another config
SELECT load_model('swish_lp06',
  convert_to(jsonb_set(convert_from(pg_read_binary_file(:'root' || '/test/fixtures/models/marian_swish/config.json'), 'UTF8')::jsonb,
                       '{length_penalty}', '0.6')::text, 'UTF8'),
  pg_read_binary_file(:'root' || '/test/fixtures/models/marian_swish/model.safetensors'),
  pg_read_binary_file(:'root' || '/test/fixtures/models/marian_swish/source.spm'),
  pg_read_binary_file(:'root' || '/test/fixtures/models/marian_swish/target.spm'),
  pg_read_binary_file(:'root' || '/test/fixtures/models/marian_swish/vocab.json')) \g /dev/null
SELECT is((SELECT array_agg(n ORDER BY n) FROM expected WHERE m = 'marian_swish' AND generate(c->>'input', 'swish_lp06', 3) <> pg_temp.ints(c->'beam3_lp06')),
  NULL, 'load_model from bytes; beam search with length penalty 0.6 identical to PyTorch''s');

-- translate() is generate() decoded by the target tokenizer
SELECT is((SELECT array_agg(n ORDER BY n) FROM expected WHERE m = 'paper_relu'
           AND translate(c->>'input', m, 3) IS DISTINCT FROM detokenize(pg_temp.ints(c->'beam3'), 'paper_relu/target')), NULL,
  'translate() decodes the generated ids');
SELECT is(translate(ARRAY(SELECT c->>'input' FROM expected WHERE m = 'paper_relu' ORDER BY n), 'paper_relu', 2),
          ARRAY(SELECT translate(c->>'input', 'paper_relu', 2) FROM expected WHERE m = 'paper_relu' ORDER BY n),
  'the batch form gives the one-row form''s outputs');
SELECT is(translate(ARRAY['Transformer', NULL], 'paper_relu'), ARRAY[translate('Transformer', 'paper_relu'), NULL], 'NULL elements stay NULL');
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
