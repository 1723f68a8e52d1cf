-- The real OPUS-MT configurations (../shared/data/spm/*/config.json, read
-- there; skipped without them): every key, only the layer counts shrunk to
-- 1, weights of the configured shapes built here from the codebooks of
-- test/fixtures/opus (tools/gen_opus_fixtures.py, which also wrote the ids
-- Hugging Face's rules give).  opus-mt-en-mg has a generation_config.json
-- of the published kind, opus-mt-zh-en only its config.json (num_beams 6,
-- MarianConfig's default forced_eos_token_id).
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`
\set data `cd ../shared/data 2>/dev/null && pwd || echo missing`

BEGIN;
CREATE EXTENSION transformer;
SELECT :'data' <> 'missing' AS have_data \gset
\if :have_data
SELECT plan(6);
CREATE TEMP TABLE books AS
SELECT k, pg_read_binary_file(:'root' || '/test/fixtures/opus/' || k || '.f16') AS b FROM unnest(ARRAY['mat', 'emb', 'bias', 'lnw', 'flb']) k;
CREATE TEMP TABLE exp AS
SELECT key AS model, value AS e FROM jsonb_each(pg_read_file(:'root' || '/test/fixtures/opus/expected.json')::jsonb);

-- the t-th tensor: row r's chunk c is codebook row (r + c * (r div 257) + 11 t + 3 c) mod 257
CREATE FUNCTION pg_temp.tensor(book bytea, t int, shape bigint[]) RETURNS bytea LANGUAGE sql AS $$
  WITH d AS (SELECT CASE WHEN cardinality(shape) = 2 AND shape[1] > 1 THEN shape[1] ELSE 1 END AS rows,
                    (SELECT exp(sum(ln(x)))::bigint FROM unnest(shape) x) AS numel)
  SELECT string_agg(row_bytes, ''::bytea ORDER BY r) FROM (
    SELECT r, substring(string_agg(substring(book FROM ((r + c * (r / 257) + 11 * t + 3 * c) % 257)::int * 512 + 1 FOR 512),
                                   ''::bytea ORDER BY c) FROM 1 FOR (numel / rows * 2)::int) AS row_bytes
    FROM d, generate_series(0, rows - 1) r, generate_series(0, (numel / rows + 255) / 256 - 1) c
    GROUP BY r, numel, rows) x $$;
CREATE FUNCTION pg_temp.le64(n bigint) RETURNS bytea LANGUAGE sql AS $$
  SELECT string_agg(set_byte('\x00'::bytea, 0, ((n >> (8 * i)) & 255)::int), ''::bytea ORDER BY i) FROM generate_series(0, 7) i $$;
-- the safetensors file: header (name order, as the generator's), then the data
CREATE FUNCTION pg_temp.safetensors(m text) RETURNS bytea LANGUAGE sql AS $$
  WITH t AS (
    SELECT i - 1 AS t, x->>'name' AS name, ARRAY(SELECT jsonb_array_elements_text(x->'shape')::bigint) AS shape,
           -- b || '': the codebook detoasted once, not at each of its many substrings
           pg_temp.tensor((SELECT b || ''::bytea FROM books WHERE k = x->>'book'), (i - 1)::int,
                          ARRAY(SELECT jsonb_array_elements_text(x->'shape')::bigint)) AS data
    FROM exp, jsonb_array_elements(e->'tensors') WITH ORDINALITY AS j(x, i) WHERE model = m),
  o AS (SELECT *, sum(octet_length(data)) OVER (ORDER BY t) - octet_length(data) AS off FROM t),
  h AS (SELECT convert_to(jsonb_object_agg(name, jsonb_build_object('dtype', 'F16', 'shape', to_jsonb(shape),
                 'data_offsets', jsonb_build_array(off, off + octet_length(data))))::text, 'UTF8') AS header FROM o)
  SELECT pg_temp.le64(octet_length(header)) || header || (SELECT string_agg(data, ''::bytea ORDER BY t) FROM o) FROM h $$;

SELECT load_model(replace(model, '-', '_'),
  convert_to((pg_read_file(:'data' || '/spm/' || model || '/config.json')::jsonb || '{"encoder_layers": 1, "decoder_layers": 1}')::text, 'UTF8'),
  pg_temp.safetensors(model),
  pg_read_binary_file(:'root' || '/test/fixtures/spm/tiny_unigram_identity.model'),
  pg_read_binary_file(:'root' || '/test/fixtures/spm/tiny_unigram_identity.model'),
  convert_to((e->'vocab')::text, 'UTF8'),
  CASE WHEN e->'generation_config' <> 'null' THEN convert_to((e->'generation_config')::text, 'UTF8') END)
FROM exp ORDER BY model \g /dev/null

SELECT is((SELECT count(*)::int FROM transformer_models WHERE name IN ('opus_mt_en_mg', 'opus_mt_zh_en')), 2, 'both configurations load');
SELECT is((SELECT generation_config->>'renormalize_logits' FROM transformer_models WHERE name = 'opus_mt_en_mg'), 'true', 'opus-mt-en-mg: its generation_config.json is stored');

SET LOCAL transformer.max_length_factor = 0;
CREATE TEMP TABLE decoded AS
SELECT model, n, k, o, ARRAY(SELECT jsonb_array_elements_text(d->'ids')::int) AS want,
       generate(c->>'input', replace(model, '-', '_'), beam_size => (o->>'num_beams')::int, max_length => (o->>'max_length')::int,
                early_stopping => (o->>'early_stopping')::boolean, length_penalty => (o->>'length_penalty')::float8,
                no_repeat_ngram_size => (o->>'no_repeat_ngram_size')::int, repetition_penalty => (o->>'repetition_penalty')::float8,
                min_length => (o->>'min_length')::int, max_new_tokens => (o->>'max_new_tokens')::int) AS got
FROM exp, jsonb_array_elements(e->'cases') WITH ORDINALITY AS s(c, n), jsonb_array_elements(c->'decode') WITH ORDINALITY AS x(d, k),
     LATERAL (SELECT d->'options' AS o) y;
SELECT is((SELECT string_agg('input ' || n || ' with ' || o::text, '; ' ORDER BY n, k) FROM decoded WHERE model = mm AND got <> want), NULL,
  mm || ': generate() identical to Hugging Face''s rules, ' || (SELECT count(*) FROM decoded WHERE model = mm) || ' cases: the model''s own generation config and ' || (SELECT count(DISTINCT o) - 1 FROM decoded WHERE model = mm) || ' option sets')
FROM unnest(ARRAY['opus-mt-en-mg', 'opus-mt-zh-en']) mm;
SELECT is((SELECT count(*)::int FROM decoded d WHERE (SELECT (e->'vocab'->>'<pad>')::int FROM exp WHERE exp.model = d.model) = ANY(got)), 0, 'pad is never generated');
SELECT cmp_ok((SELECT count(*)::int FROM decoded WHERE o = '{}' AND cardinality(want) > 20), '>=', 1, 'the models'' own generation configs let outputs run long (max_length 512)');
SELECT * FROM finish();
\else
SELECT plan(1);
SELECT skip('../shared/data/spm is not there: the OPUS-MT configurations are read from it', 1);
\endif
ROLLBACK;
