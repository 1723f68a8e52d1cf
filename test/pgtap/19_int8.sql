-- int8 (issue 14): quantize_model() against PyTorch's own quantizer
-- (tools/gen_int8_fixtures.py: torch.quantize_per_channel for the weights
-- and for each linear product's input rows), what it stores, export and
-- import bit for bit, errors.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(25);

SELECT import_model(m, :'root' || '/test/fixtures/models/' || m) FROM unnest(ARRAY['marian_swish', 'paper_relu', 'prenorm_gelu']) m \g /dev/null
SELECT is(quantize_model(m, m || '_i8'), p::bigint, 'quantize_model ' || m || ': ' || p || ' parameters, as the original')
FROM (VALUES ('marian_swish', 49385), ('paper_relu', 55616), ('prenorm_gelu', 60041)) v(m, p);

-- what is stored: weight matrices I8 with F32 scales per row, the rest F32
SELECT is((SELECT string_agg(t.name, ', ') FROM transformer_tensors t JOIN transformer_tensors o ON o.model = 'paper_relu' AND o.name = t.name
           WHERE t.model = 'paper_relu_i8' AND t.dtype <> CASE WHEN cardinality(o.shape) = 2 AND o.shape[1] > 1 AND o.name NOT LIKE '%embed_positions%' THEN 'I8' ELSE 'F32' END),
  NULL, 'weight matrices are I8, biases, norms and final_logits_bias F32');
SELECT is((SELECT string_agg(t.name, ', ') FROM transformer_tensors t WHERE t.model = 'prenorm_gelu_i8' AND t.dtype = 'I8'
           AND NOT EXISTS (SELECT FROM transformer_tensors s WHERE s.model = t.model AND s.name = t.name || '_scale' AND s.dtype = 'F32' AND s.shape = t.shape[1:1])),
  NULL, 'each I8 matrix has an F32 scale per row');
SELECT is((SELECT dtype FROM transformer_tensors WHERE model = 'prenorm_gelu_i8' AND name = 'model.decoder.embed_positions.weight'), 'F32',
  'learned positions stay F32');
SELECT is((SELECT count(*)::int FROM transformer_tensors WHERE model = 'marian_swish_i8'),
  (SELECT (count(*) + count(*) FILTER (WHERE cardinality(shape) = 2 AND shape[1] > 1))::int FROM transformer_tensors WHERE model = 'marian_swish'),
  'one scale tensor more per matrix');

-- against PyTorch's quantizer
CREATE TEMP TABLE expected AS
SELECT m, n, c FROM unnest(ARRAY['marian_swish', 'paper_relu', 'prenorm_gelu']) m,
  jsonb_array_elements(pg_read_file(:'root' || '/test/fixtures/models/' || m || '/expected_int8.json')::jsonb) WITH ORDINALITY AS e(c, n);
CREATE FUNCTION pg_temp.ints(j jsonb) RETURNS int[] LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(array_agg(x::int ORDER BY i), '{}') FROM jsonb_array_elements_text(j) WITH ORDINALITY t(x, i) $$;
CREATE FUNCTION pg_temp.maxdiff(a real[], j jsonb) RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN cardinality(a) <> jsonb_array_length(j) THEN 'Infinity'::float8
    ELSE (SELECT max(abs(x::float8 - y::float8)) FROM unnest(a, ARRAY(SELECT jsonb_array_elements_text(j)::float8)) u(x, y)) END $$;
SELECT cmp_ok((SELECT max(pg_temp.maxdiff(input_embeddings(c->>'input', m || '_i8'), c->'embed')) FROM expected WHERE m = mm),
  '<=', 1e-5::float8, mm || '_i8: input_embeddings() within 1e-5 of PyTorch''s int8 rows') FROM unnest(ARRAY['marian_swish', 'paper_relu', 'prenorm_gelu']) mm;
SELECT cmp_ok((SELECT max(pg_temp.maxdiff(encoder_output(c->>'input', m || '_i8'), c->'encode')) FROM expected WHERE m = mm),
  '<=', 1e-5::float8, mm || '_i8: encoder_output() within 1e-5 of PyTorch quantizing each product''s input') FROM unnest(ARRAY['marian_swish', 'paper_relu', 'prenorm_gelu']) mm;
SELECT diag('largest int8 encoder_output() difference: ' || max(pg_temp.maxdiff(encoder_output(c->>'input', m || '_i8'), c->'encode'))) FROM expected;
SET LOCAL transformer.max_length_factor = 0;
CREATE TEMP TABLE decoded AS
SELECT m, n, k, o, pg_temp.ints(d->'ids') AS want,
       generate(c->>'input', m || '_i8', beam_size => (o->>'num_beams')::int, max_length => (o->>'max_length')::int,
                early_stopping => (o->>'early_stopping')::boolean, length_penalty => (o->>'length_penalty')::float8,
                no_repeat_ngram_size => (o->>'no_repeat_ngram_size')::int, repetition_penalty => (o->>'repetition_penalty')::float8,
                min_length => (o->>'min_length')::int, max_new_tokens => (o->>'max_new_tokens')::int) AS got
FROM expected, jsonb_array_elements(c->'decode') WITH ORDINALITY AS e(d, k), LATERAL (SELECT d->'options' AS o) x;
SELECT is((SELECT string_agg('input ' || n || ' with ' || o::text, '; ' ORDER BY n, k) FROM decoded WHERE m = mm AND got <> want), NULL,
  mm || '_i8: generate() identical to PyTorch''s int8 reference, ' || (SELECT count(*) FROM decoded WHERE m = mm) || ' cases')
FROM unnest(ARRAY['marian_swish', 'paper_relu', 'prenorm_gelu']) mm;
-- a sentence decodes the same alone and in a batch
SELECT is((SELECT translate(array_agg(c->>'input' ORDER BY n), 'marian_swish_i8', 3) FROM expected WHERE m = 'marian_swish'),
  (SELECT array_agg(translate(c->>'input', 'marian_swish_i8', 3) ORDER BY n) FROM expected WHERE m = 'marian_swish'),
  'int8: the batch form gives each sentence''s own translation');

-- export and import: bit for bit
SELECT lives_ok(format('SELECT export_model(%L, %L)', 'prenorm_gelu_i8', '/tmp/transformer_tap_i8_' || pg_backend_pid()), 'export_model of an int8 model');
SELECT lives_ok(format('SELECT import_model(%L, %L)', 'prenorm_gelu_i8b', '/tmp/transformer_tap_i8_' || pg_backend_pid()), 'import_model reads it back');
SELECT is((SELECT count(*)::int FROM transformer_tensors a FULL JOIN (SELECT * FROM transformer_tensors WHERE model = 'prenorm_gelu_i8b') b USING (name)
           WHERE a.model = 'prenorm_gelu_i8' AND (a.data IS DISTINCT FROM b.data OR a.dtype IS DISTINCT FROM b.dtype OR a.shape IS DISTINCT FROM b.shape)), 0,
  'every tensor bit for bit');
SELECT is(encoder_output('a', 'prenorm_gelu_i8b'), encoder_output('a', 'prenorm_gelu_i8'), 'and it computes the same');

-- errors
SELECT throws_ok($$SELECT quantize_model('marian_swish', 'x', 'int4')$$, '22023', 'unsupported quantization dtype "int4"', 'only int8');
SELECT throws_ok($$SELECT quantize_model('marian_swish_i8', 'x')$$, '22023', 'model "marian_swish_i8" is already quantized', 'not twice');
SELECT throws_ok($$SELECT quantize_model('no_such_model', 'x')$$, '42704', 'model "no_such_model" does not exist', 'an unknown model');
SELECT throws_ok($$SELECT quantize_model('marian_swish', 'marian_swish')$$, '22023', NULL, 'a copy needs a name of its own');
SELECT * FROM finish();
ROLLBACK;
