-- Parity with the SentencePiece library on every Multi30k sentence (de and
-- en; train, val, test_2016_flickr, test_2017_flickr), for the four OPUS-MT
-- SentencePiece models with their vocab.json.  The sentences are read from
-- ../shared/data; test/fixtures/tokenizer/<model>.multi30k.gz holds, per
-- sentence, a digest of the reference's SentencePiece ids, vocab.json ids,
-- pieces and both decodings (tools/gen_tokenizer_fixtures.py, digest()).
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set data `cd ../shared/data 2>/dev/null && pwd || echo missing`

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(8);
SELECT :'data' <> 'missing' AS have_data \gset
\if :have_data

SELECT import_tokenizer(t, :'data' || '/spm/' || dir || '/' || f || '.spm', :'data' || '/spm/' || dir || '/vocab.json'),
       import_tokenizer(t || '_spm', :'data' || '/spm/' || dir || '/' || f || '.spm')
FROM (VALUES ('enmg_src', 'opus-mt-en-mg', 'source'), ('enmg_tgt', 'opus-mt-en-mg', 'target'),
             ('zhen_src', 'opus-mt-zh-en', 'source'), ('zhen_tgt', 'opus-mt-zh-en', 'target')) v(t, dir, f) \g /dev/null

-- plain tables (rolled back at the end): parallel workers cannot read temp tables
CREATE TABLE sentences (n serial PRIMARY KEY, s text NOT NULL);
\copy sentences(s) FROM PROGRAM 'cd ../shared/data/multi30k && for f in train.de train.en val.de val.en test_2016_flickr.de test_2016_flickr.en test_2017_flickr.de test_2017_flickr.en; do zcat $f.gz; done' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02', NULL E'\x03')
SELECT is(count(*)::int, 64028, 'all Multi30k sentences read') FROM sentences;

CREATE TABLE expected (model text, n int, digest text, PRIMARY KEY (model, n));
CREATE TEMP TABLE expected_raw (n serial, digest text);
\copy expected_raw(digest) FROM PROGRAM 'zcat test/fixtures/tokenizer/enmg_src.multi30k.gz'
INSERT INTO expected SELECT 'enmg_src', n, digest FROM expected_raw; TRUNCATE expected_raw RESTART IDENTITY;
\copy expected_raw(digest) FROM PROGRAM 'zcat test/fixtures/tokenizer/enmg_tgt.multi30k.gz'
INSERT INTO expected SELECT 'enmg_tgt', n, digest FROM expected_raw; TRUNCATE expected_raw RESTART IDENTITY;
\copy expected_raw(digest) FROM PROGRAM 'zcat test/fixtures/tokenizer/zhen_src.multi30k.gz'
INSERT INTO expected SELECT 'zhen_src', n, digest FROM expected_raw; TRUNCATE expected_raw RESTART IDENTITY;
\copy expected_raw(digest) FROM PROGRAM 'zcat test/fixtures/tokenizer/zhen_tgt.multi30k.gz'
INSERT INTO expected SELECT 'zhen_tgt', n, digest FROM expected_raw; TRUNCATE expected_raw RESTART IDENTITY;
SELECT is(count(*)::int, 4 * 64028, 'all digests read') FROM expected;

-- the same digest as tools/gen_tokenizer_fixtures.py's digest()
CREATE FUNCTION tok_digest(s text, t text) RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT left(md5(array_to_string(tokenize(s, t || '_spm'), ' ') || E'\t' ||
                  array_to_string(tokenize(s, t), ' ') || E'\t' ||
                  array_to_string(tokens(s, t), ' ') || E'\t' ||
                  detokenize(tokenize(s, t || '_spm'), t || '_spm') || E'\t' ||
                  detokenize(tokenize(s, t), t)), 16) $$;

CREATE TEMP TABLE mismatches AS
SELECT e.model, s.n, s.s FROM sentences s JOIN expected e USING (n)
WHERE tok_digest(s.s, e.model) <> e.digest;

SELECT is((SELECT count(*)::int FROM mismatches WHERE model = m), 0,
  m || ': SentencePiece ids, vocab.json ids, pieces and decodings of 64028 Multi30k sentences identical to the reference')
FROM unnest(ARRAY['enmg_src', 'enmg_tgt', 'zhen_src', 'zhen_tgt']) m;
SELECT diag('mismatch: ' || model || ' #' || n || ': ' || s) FROM mismatches ORDER BY model, n LIMIT 10;

-- tokenizers load and run in parallel workers too
SET LOCAL parallel_setup_cost = 0;
SET LOCAL parallel_tuple_cost = 0;
SET LOCAL min_parallel_table_scan_size = 0;
SET LOCAL max_parallel_workers_per_gather = 2;
CREATE FUNCTION pg_temp.explain_json(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE plan json;
BEGIN
  EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON) ' || query INTO plan;
  RETURN plan::text;
END $$;
ANALYZE sentences;
ANALYZE expected;
-- every 8th sentence (32,000 tokenizations): the serial check above covers them all
\set q 'SELECT count(*) FROM sentences s JOIN expected e USING (n) WHERE s.n % 8 = 0 AND tok_digest(s.s, e.model) <> e.digest'
SELECT matches(pg_temp.explain_json(:'q'), '"Workers Launched": [12]', 'tokenizers load and run in parallel workers');
SELECT is((:q)::int, 0, 'parity holds for all four models in a parallel plan (every 8th sentence)');

\else
SELECT skip('../shared/data not found: Multi30k parity not tested', 8);
\endif

SELECT * FROM finish();
ROLLBACK;
