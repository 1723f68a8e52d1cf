-- Tokenizers: parity with the SentencePiece library on the stress set
-- (test/fixtures/tokenizer/*.stress.jsonl, from tools/gen_tokenizer_fixtures.py),
-- both loading paths, the cache, and privileges.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`
\set data `cd ../shared/data 2>/dev/null && pwd || echo missing`

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(42);

CREATE FUNCTION pg_temp.jint(j jsonb) RETURNS int[] LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(array_agg(x::int ORDER BY i), '{}') FROM jsonb_array_elements_text(j) WITH ORDINALITY t(x, i) $$;
CREATE FUNCTION pg_temp.jtext(j jsonb) RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(array_agg(x ORDER BY i), '{}') FROM jsonb_array_elements_text(j) WITH ORDINALITY t(x, i) $$;

-- the small models of test/fixtures/spm: unigram with user-defined symbols,
-- BPE with byte fallback and identity normalization, unigram without
-- dummy prefix or whitespace removal
SELECT is(import_tokenizer('tiny_unigram', :'root' || '/test/fixtures/spm/tiny_unigram.model'), 300, 'import_tokenizer from a server file');
SELECT is(load_tokenizer('tiny_bpe_bytes', pg_read_binary_file(:'root' || '/test/fixtures/spm/tiny_bpe_bytes.model')), 400, 'load_tokenizer from bytes');
SELECT is(load_tokenizer('tiny_unigram_identity', pg_read_binary_file(:'root' || '/test/fixtures/spm/tiny_unigram_identity.model')), 200, 'load_tokenizer, identity normalization');

CREATE TEMP TABLE stress_raw (n serial, line text);
CREATE TEMP TABLE stress (model text, n int, c jsonb);
\copy stress_raw(line) FROM 'test/fixtures/tokenizer/tiny_unigram.stress.jsonl' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02')
INSERT INTO stress SELECT 'tiny_unigram', n, line::jsonb FROM stress_raw; TRUNCATE stress_raw RESTART IDENTITY;
\copy stress_raw(line) FROM 'test/fixtures/tokenizer/tiny_bpe_bytes.stress.jsonl' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02')
INSERT INTO stress SELECT 'tiny_bpe_bytes', n, line::jsonb FROM stress_raw; TRUNCATE stress_raw RESTART IDENTITY;
\copy stress_raw(line) FROM 'test/fixtures/tokenizer/tiny_unigram_identity.stress.jsonl' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02')
INSERT INTO stress SELECT 'tiny_unigram_identity', n, line::jsonb FROM stress_raw; TRUNCATE stress_raw RESTART IDENTITY;

-- the OPUS-MT models, with and without their vocab.json (if ../shared/data is there)
SELECT :'data' <> 'missing' AS have_data \gset
\if :have_data
SELECT import_tokenizer(t, :'data' || '/spm/' || dir || '/' || f || '.spm', :'data' || '/spm/' || dir || '/vocab.json'),
       import_tokenizer(t || '_spm', :'data' || '/spm/' || dir || '/' || f || '.spm')
FROM (VALUES ('enmg_src', 'opus-mt-en-mg', 'source'), ('enmg_tgt', 'opus-mt-en-mg', 'target'),
             ('zhen_src', 'opus-mt-zh-en', 'source'), ('zhen_tgt', 'opus-mt-zh-en', 'target')) v(t, dir, f) \g /dev/null
\copy stress_raw(line) FROM 'test/fixtures/tokenizer/enmg_src.stress.jsonl' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02')
INSERT INTO stress SELECT 'enmg_src', n, line::jsonb FROM stress_raw; TRUNCATE stress_raw RESTART IDENTITY;
\copy stress_raw(line) FROM 'test/fixtures/tokenizer/enmg_tgt.stress.jsonl' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02')
INSERT INTO stress SELECT 'enmg_tgt', n, line::jsonb FROM stress_raw; TRUNCATE stress_raw RESTART IDENTITY;
\copy stress_raw(line) FROM 'test/fixtures/tokenizer/zhen_src.stress.jsonl' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02')
INSERT INTO stress SELECT 'zhen_src', n, line::jsonb FROM stress_raw; TRUNCATE stress_raw RESTART IDENTITY;
\copy stress_raw(line) FROM 'test/fixtures/tokenizer/zhen_tgt.stress.jsonl' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02')
INSERT INTO stress SELECT 'zhen_tgt', n, line::jsonb FROM stress_raw; TRUNCATE stress_raw RESTART IDENTITY;
\endif

-- SentencePiece ids, pieces and decoding: the tokenizer without vocabulary
-- (for the OPUS models, the <name>_spm one)
CREATE TEMP VIEW spm_side AS
SELECT model, n, c, CASE WHEN model LIKE 'tiny%' THEN model ELSE model || '_spm' END AS tok FROM stress;

SELECT is(
  (SELECT array_agg(n ORDER BY n) FROM spm_side WHERE model = m AND tokenize(c->>'input', tok) IS DISTINCT FROM pg_temp.jint(c->'spm_ids')),
  NULL, m || ': SentencePiece ids of ' || cnt || ' stress strings')
FROM (SELECT model AS m, count(*) AS cnt FROM stress GROUP BY model) s ORDER BY m;
SELECT is(
  (SELECT array_agg(n ORDER BY n) FROM spm_side WHERE model = m AND tokens(c->>'input', tok) IS DISTINCT FROM pg_temp.jtext(c->'pieces')),
  NULL, m || ': pieces of ' || cnt || ' stress strings')
FROM (SELECT model AS m, count(*) AS cnt FROM stress GROUP BY model) s ORDER BY m;
SELECT is(
  (SELECT array_agg(n ORDER BY n) FROM spm_side WHERE model = m AND detokenize(tokenize(c->>'input', tok), tok) IS DISTINCT FROM c->>'decoded'),
  NULL, m || ': detokenize(tokenize(x)) of ' || cnt || ' stress strings equals SentencePiece''s decode')
FROM (SELECT model AS m, count(*) AS cnt FROM stress GROUP BY model) s ORDER BY m;
-- Marian ids through vocab.json, and their decoding
SELECT is(
  (SELECT array_agg(n ORDER BY n) FROM stress WHERE model = m AND tokenize(c->>'input', m) IS DISTINCT FROM pg_temp.jint(c->'ids')),
  NULL, m || ': vocab.json ids of ' || cnt || ' stress strings')
FROM (SELECT model AS m, count(*) AS cnt FROM stress WHERE c ? 'ids' GROUP BY model) s ORDER BY m;
SELECT is(
  (SELECT array_agg(n ORDER BY n) FROM stress WHERE model = m AND detokenize(tokenize(c->>'input', m), m) IS DISTINCT FROM c->>'decoded_vocab'),
  NULL, m || ': detokenize of vocab.json ids of ' || cnt || ' stress strings')
FROM (SELECT model AS m, count(*) AS cnt FROM stress WHERE c ? 'ids' GROUP BY model) s ORDER BY m;
\if :have_data
\else
SELECT skip('../shared/data not found: OPUS-MT models not tested', 4 * 5);
\endif

-- cache: a re-load is seen at once, a drop too
SELECT is(tokenize('SELECT', 'tiny_unigram'), tokenize('SELECT', 'tiny_unigram'), 'repeated calls agree (cached)');
SELECT isnt(tokenize('hello world', 'tiny_unigram'), tokenize('hello world', 'tiny_unigram_identity'), 'two tokenizers differ');
SELECT load_tokenizer('swap', pg_read_binary_file(:'root' || '/test/fixtures/spm/tiny_unigram.model')) \g /dev/null
SELECT is(tokenize('hello world', 'swap'), tokenize('hello world', 'tiny_unigram'), 'tokenizer swap loaded');
SELECT load_tokenizer('swap', pg_read_binary_file(:'root' || '/test/fixtures/spm/tiny_unigram_identity.model')) \g /dev/null
SELECT is(tokenize('hello world', 'swap'), tokenize('hello world', 'tiny_unigram_identity'), 're-loading a tokenizer replaces the cached one');
SELECT ok(drop_tokenizer('swap'), 'drop_tokenizer');
SELECT throws_ok($$SELECT tokenize('x', 'swap')$$, '42704', 'tokenizer "swap" does not exist', 'a dropped tokenizer is gone from the cache');
UPDATE transformer_tokenizers SET model = (SELECT model FROM transformer_tokenizers WHERE name = 'tiny_bpe_bytes') WHERE name = 'tiny_unigram';
SELECT is(tokenize('hello world', 'tiny_unigram'), tokenize('hello world', 'tiny_bpe_bytes'), 'a direct UPDATE of the table invalidates the cache');

-- privileges: server files need pg_read_server_files; bytes need INSERT on the table
CREATE ROLE transformer_tap_user;
SET LOCAL ROLE transformer_tap_user;
SELECT throws_ok(format($$SELECT import_tokenizer('x', %L)$$, :'root' || '/test/fixtures/spm/tiny_unigram.model'),
  '42501', 'permission denied to read server files', 'import_tokenizer needs pg_read_server_files');
SELECT throws_ok($$SELECT load_tokenizer('x', '\x0a02'::bytea)$$, '22023', NULL, 'a bad model is refused before privileges matter');
SELECT ok(tokenize('hello', 'tiny_bpe_bytes') IS NOT NULL, 'anyone may tokenize');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
