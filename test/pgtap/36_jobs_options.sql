-- Background jobs a DBA can trust (issue 37), 3 of 3: translate()'s options,
-- source_lang_column, an int8 model's batch, and embed_column().
-- It commits (workers see only committed rows), drops what an earlier run left before it
-- begins, and what it made at the end.  Restarts, crashes and several databases: test/jobs/run.py.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`

SET client_min_messages = warning;
DROP EXTENSION IF EXISTS transformer CASCADE;
DROP TABLE IF EXISTS khtml, kmixed, kint8, kemb, kvec CASCADE;
CREATE EXTENSION transformer;
SELECT import_model('multi30k_de_en') \g /dev/null
SELECT import_model('multi30k_sentence_de_en') \g /dev/null
SELECT import_model('nllb', :'root' || '/test/fixtures/checkpoints/nllb_tiny') \g /dev/null
SELECT plan(14);

\ir include/jobs.psql

-- 5. translate()'s options, and a source language per row
CREATE TABLE khtml (id int PRIMARY KEY, de text, en text);
INSERT INTO khtml VALUES (1, '<p>Ein <b>Hund</b> rennt.</p>', NULL), (2, '<ul><li>Eine Katze.</li></ul>', NULL);
SELECT translate_column('khtml', 'de', 'en', 'multi30k_de_en', format => 'html', keep => '{url,number}') AS jhtml \gset
SELECT ok(wait_for_job(:jhtml, '2 min'), 'a job with format => html and keep finishes');
SELECT is((SELECT count(*) FROM khtml WHERE en IS DISTINCT FROM translate(de, 'multi30k_de_en', format => 'html', keep => '{url,number}')),
  0::bigint, 'each row equals translate() with the same options (the tags kept)');
SELECT throws_ok($$SELECT translate_column('khtml', 'de', 'en', 'multi30k_de_en', format => 'pdf')$$, '22023', NULL,
  'a bad format is refused when the job is declared, as translate() refuses it');
CREATE TABLE kmixed (id int PRIMARY KEY, lang text, body text, en text);
INSERT INTO kmixed VALUES (1, 'deu_Latn', 'Ein Hund.', NULL), (2, 'fra_Latn', 'Un chien.', NULL), (3, NULL, 'Ein Mann.', NULL);
SELECT translate_column('kmixed', 'body', 'en', 'nllb', target_lang => 'eng_Latn', source_lang_column => 'lang', beam => 1) AS jmixed \gset
SELECT ok(wait_for_job(:jmixed, '2 min'), 'a job with source_lang_column finishes');
SELECT is((SELECT count(*) FROM kmixed WHERE en IS DISTINCT FROM
          translate(body, 'nllb', beam_size => 1, source_lang => lang, target_lang => 'eng_Latn')), 0::bigint,
  'each row is translated from the language its column names (NULL: the model''s default)');

-- an int8 model's job translates one sentence at a time by default; a fp32 model's, 8
SELECT quantize_model('multi30k_de_en', 'kq8') \g /dev/null
CREATE TABLE kint8 (id int PRIMARY KEY, de text, en text);
INSERT INTO kint8 VALUES (1, 'Ein Hund rennt.', NULL), (2, 'Eine Frau singt ein Lied.', NULL);
SELECT translate_column('kint8', 'de', 'en', 'kq8', keep_in_sync => false) AS jint8 \gset
SELECT ok(wait_for_job(:jint8, '2 min'), 'a job on an int8 model finishes');
SELECT is((SELECT batch_size || ' ' || (SELECT batch_size FROM transformer_jobs WHERE id = :jhtml) FROM transformer_jobs WHERE id = :jint8),
  '1 8', 'batch_size by default: 1 for an int8 model, 8 otherwise');
SELECT is(pg_temp.bad_rows('kint8', 'kq8'), 0::bigint, 'each row equals translate() with the int8 model');

-- 6. embed_column(): the same machinery for vectors
CREATE TABLE kemb (id int PRIMARY KEY, de text, v real[]);
INSERT INTO kemb SELECT i, 'Ein Hund Nummer ' || i || ' rennt.', NULL FROM generate_series(1, 20) i;
SELECT embed_column('kemb', 'de', 'v', 'multi30k_sentence_de_en') AS jemb \gset
INSERT INTO kemb VALUES (21, 'Eine Katze.', NULL);
SELECT ok(wait_for_job(:jemb, '2 min'), 'embed_column(): the job finishes');
SELECT is((SELECT count(*) FROM kemb WHERE v IS NULL
           OR (SELECT max(abs(a - b)) FROM unnest(v, embed(de, 'multi30k_sentence_de_en')) AS u(a, b)) > 1e-6),
  0::bigint, 'each vector equals embed() of its row (backfill and sync)');
SELECT is((SELECT kind FROM transformer_jobs WHERE id = :jemb), 'embed', 'transformer_jobs lists it with its kind');

SELECT throws_ok($$SELECT embed_column('kemb', 'de', 'id', 'multi30k_sentence_de_en')$$, '42804',
  'target column "id" must be of type real[] or vector', 'an embedding target must take real[]');
SELECT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'vector') AS have_vector \gset
\if :have_vector
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE kvec (id int PRIMARY KEY, de text, v vector(256));
INSERT INTO kvec SELECT i, 'Eine Frau Nummer ' || i || ' singt.', NULL FROM generate_series(1, 10) i;
SELECT embed_column('kvec', 'de', 'v', 'multi30k_sentence_de_en') AS jvec \gset
SELECT ok(wait_for_job(:jvec, '2 min'), 'embed_column() into pgvector''s vector(256): the job finishes');
SELECT is((SELECT count(*) FROM kvec WHERE v IS NULL OR (SELECT max(abs(a - b)) FROM
           unnest(v::real[], embed(de, 'multi30k_sentence_de_en')) AS u(a, b)) > 1e-6), 0::bigint,
  'each vector equals embed() of its row');
\else
SELECT skip('pgvector is not installed here (it is not a Debian package; see docs/embeddings.md)', 2);
\endif

SELECT * FROM finish();
SELECT cancel_job(id) FROM transformer_jobs WHERE state NOT IN ('cancelled') \g /dev/null
DROP EXTENSION transformer CASCADE;
DROP TABLE IF EXISTS khtml, kmixed, kint8, kemb, kvec CASCADE;
