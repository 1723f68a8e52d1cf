-- Background jobs a DBA can trust (issue 37): rows keyed exactly whatever the
-- writer's settings, hand edits kept, no escalation through the table's code,
-- a revoked privilege or a dropped table stops the job, idle jobs hold no
-- worker, translate()'s options, source_lang_column, and embed_column().
-- Like 24_jobs.sql, it commits (workers see only committed rows) and drops
-- what it made at the end.  Restarts, crashes and several databases: test/jobs/run.py.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`

SET client_min_messages = warning;
DROP EXTENSION IF EXISTS transformer CASCADE;
DROP TABLE IF EXISTS kdate, kts, kfloat, knum, ktext, kuuid, kpair, khand, kowned, kspy, krev, kdrop, kcol, khtml,
  kmixed, kemb, kvec, kidle, keta, kpart, kint8 CASCADE;
DO $$
DECLARE r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['tf_trust_owner', 'tf_trust_alice'] LOOP
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
      EXECUTE format('DROP OWNED BY %I', r);
      EXECUTE format('DROP ROLE %I', r);
    END IF;
  END LOOP;
END $$;
CREATE EXTENSION transformer;
SELECT import_model('multi30k_de_en') \g /dev/null
SELECT import_model('multi30k_sentence_de_en') \g /dev/null
SELECT import_model('nllb', :'root' || '/test/fixtures/checkpoints/nllb_tiny') \g /dev/null
SELECT plan(52);

CREATE FUNCTION pg_temp.wait_state(job bigint, want text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE s text;
BEGIN
  FOR i IN 1..200 LOOP
    SELECT state INTO s FROM transformer_jobs WHERE id = job;
    IF s = want THEN RETURN s; END IF;
    PERFORM pg_sleep(0.1);
  END LOOP;
  RETURN s;
END $$;
CREATE FUNCTION pg_temp.bad_rows(tbl regclass, model text DEFAULT 'multi30k_de_en') RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM %s WHERE en IS DISTINCT FROM translate(de, %L)', tbl, model) INTO n;
  RETURN n;
END $$;

-- 1. rows keyed exactly: each key written by sessions with other settings
CREATE TABLE kdate (d date PRIMARY KEY, de text, en text);
INSERT INTO kdate VALUES ('2023-01-02', 'Ein Hund rennt.', 'kuratiert');
SELECT translate_column('kdate', 'de', 'en', 'multi30k_de_en') AS jdate \gset
SET datestyle = 'SQL, DMY';
INSERT INTO kdate VALUES ('2023-02-01', 'Eine Katze schläft.', NULL);
SET datestyle = 'German, MDY';
INSERT INTO kdate VALUES ('2023-03-04', 'Ein Mann liest.', NULL);
RESET datestyle;
SELECT ok(wait_for_job(:jdate, '2 min'), 'date keys: the job finishes');
SELECT is((SELECT en FROM kdate WHERE d = '2023-01-02'), 'kuratiert',
  'a row inserted under DateStyle SQL, DMY does not overwrite the row whose date reads the same in ISO');
SELECT is(pg_temp.bad_rows('kdate') , 1::bigint, 'date keys: every other row holds translate(de)');

CREATE TABLE kts (t timestamptz PRIMARY KEY, de text, en text);
SELECT translate_column('kts', 'de', 'en', 'multi30k_de_en') AS jts \gset
SET TimeZone = 'Pacific/Chatham';
SET datestyle = 'Postgres, DMY';
INSERT INTO kts VALUES ('2023-05-06 07:08:09.123456+00', 'Zwei Hunde spielen.', NULL);
SET TimeZone = 'America/St_Johns';
SET IntervalStyle = 'sql_standard';
INSERT INTO kts VALUES ('2023-05-06 07:08:09.123457+00', 'Ein Kind lacht.', NULL);
RESET TimeZone; RESET datestyle; RESET IntervalStyle;
SELECT ok(wait_for_job(:jts, '2 min'), 'timestamptz keys: the job finishes');
SELECT is(pg_temp.bad_rows('kts'), 0::bigint, 'timestamptz keys a microsecond apart, written in two time zones: each row its own');

CREATE TABLE kfloat (x float8 PRIMARY KEY, de text, en text);
INSERT INTO kfloat VALUES (0.3, 'Ein Vogel singt.', 'kuratiert');
SELECT translate_column('kfloat', 'de', 'en', 'multi30k_de_en') AS jfloat \gset
SET extra_float_digits = -3;
INSERT INTO kfloat VALUES (0.1::float8 + 0.2::float8, 'Ein Pferd steht.', NULL);
RESET extra_float_digits;
SELECT ok(wait_for_job(:jfloat, '2 min'), 'float8 keys: the job finishes');
SELECT is((SELECT en FROM kfloat WHERE x = 0.3), 'kuratiert',
  '0.1 + 0.2 written with extra_float_digits -3 (it prints 0.3) leaves the row 0.3 alone');
SELECT is((SELECT en FROM kfloat WHERE x <> 0.3), translate('Ein Pferd steht.', 'multi30k_de_en'), 'and is translated itself');

CREATE TABLE knum (x numeric PRIMARY KEY, de text, en text);
CREATE TABLE ktext (k text PRIMARY KEY, de text, en text);
CREATE TABLE kuuid (u uuid PRIMARY KEY, de text, en text);
CREATE TABLE kpair (d date, k text, de text, en text, PRIMARY KEY (d, k));
SELECT translate_column('knum', 'de', 'en', 'multi30k_de_en') AS jnum \gset
SELECT translate_column('ktext', 'de', 'en', 'multi30k_de_en') AS jtext \gset
SELECT translate_column('kuuid', 'de', 'en', 'multi30k_de_en') AS juuid \gset
SELECT translate_column('kpair', 'de', 'en', 'multi30k_de_en') AS jpair \gset
SET search_path = pg_catalog, public;
SET bytea_output = 'escape';
SET client_encoding = 'LATIN1';
INSERT INTO knum VALUES (1.10, 'Eine Frau tanzt.', NULL), (123456789012345678901234567890.000000000001, 'Ein Boot fährt.', NULL);
INSERT INTO ktext VALUES (E'a"b\\c''d\nzwei Zeilen\t', 'Ein Zug hält.', NULL), ('[1]', 'Ein Baum wächst.', NULL);
INSERT INTO kuuid VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'Ein Mädchen springt.', NULL);
SET datestyle = 'SQL, DMY';
INSERT INTO kpair VALUES ('2024-02-01', 'x"y', 'Ein Hund schwimmt.', NULL), ('2024-01-02', 'x"y', 'Ein Fisch schwimmt.', 'kuratiert');
RESET datestyle; RESET client_encoding; RESET bytea_output; RESET search_path;
SELECT ok(wait_for_job(:jnum, '2 min') AND wait_for_job(:jtext, '2 min') AND wait_for_job(:juuid, '2 min')
          AND wait_for_job(:jpair, '2 min'), 'numeric, text, uuid and composite keys: the jobs finish');
SELECT is(pg_temp.bad_rows('knum') + pg_temp.bad_rows('ktext') + pg_temp.bad_rows('kuuid'), 0::bigint,
  'numeric keys of 40 digits, text keys with quotes, backslashes, tabs and newlines, uuid keys: every row translated');
SELECT is((SELECT array_agg(en = translate(de, 'multi30k_de_en') ORDER BY d) FROM kpair), ARRAY[false, true],
  'a composite key (date, text) written under DMY: the new row translated, the curated one left alone');

-- a row whose key changes while it is queued
SELECT pause_job(:jtext);
INSERT INTO ktext VALUES ('alt', 'Ein Kind malt.', NULL);
UPDATE ktext SET k = 'neu' WHERE k = 'alt';
SELECT resume_job(:jtext);
SELECT ok(wait_for_job(:jtext, '2 min'), 'a key changed while queued: the job finishes');
SELECT is((SELECT en FROM ktext WHERE k = 'neu'), translate('Ein Kind malt.', 'multi30k_de_en'), 'the row is found under its new key');

-- a partitioned table: rows written through the parent, to a partition directly, and to a partition attached later
CREATE TABLE kpart (id int PRIMARY KEY, de text, en text) PARTITION BY RANGE (id);
CREATE TABLE kpart_1 PARTITION OF kpart FOR VALUES FROM (0) TO (100);
CREATE TABLE kpart_2 PARTITION OF kpart FOR VALUES FROM (100) TO (200);
INSERT INTO kpart VALUES (1, 'Ein Hund.', NULL);
SELECT translate_column('kpart', 'de', 'en', 'multi30k_de_en') AS jpart \gset
INSERT INTO kpart VALUES (2, 'Eine Katze.', NULL);
INSERT INTO kpart_2 VALUES (150, 'Ein Vogel.', NULL);
CREATE TABLE kpart_3 PARTITION OF kpart FOR VALUES FROM (200) TO (300);
INSERT INTO kpart_3 VALUES (250, 'Ein Fisch.', NULL);
UPDATE kpart SET de = 'Ein Pferd.' WHERE id = 1;
SELECT ok(wait_for_job(:jpart, '2 min'), 'a partitioned table: the job finishes');
SELECT is(pg_temp.bad_rows('kpart'), 0::bigint,
  'rows written through the parent, to a partition directly and to one attached later are all translated');

-- 2. hand edits survive: the rule is "the source changed", never "the row was touched"
CREATE TABLE khand (id int PRIMARY KEY, de text, en text);
INSERT INTO khand VALUES (1, 'Ein Hund.', NULL), (2, 'Eine Katze.', NULL), (3, 'Ein Mann.', NULL);
SELECT translate_column('khand', 'de', 'en', 'multi30k_de_en') AS jhand \gset
SELECT is((SELECT string_agg(tgname || ' ' || CASE WHEN tgtype & 1 = 1 THEN 'row' ELSE 'statement' END, ', ' ORDER BY tgname)
           FROM pg_trigger WHERE tgrelid = 'khand'::regclass),
  'transformer_job_' || :jhand || '_insert statement, transformer_job_' || :jhand || '_update statement',
  'keep_in_sync: two statement triggers (insert, update) with transition tables');
SELECT ok(wait_for_job(:jhand, '2 min'), 'hand edits: the backfill finishes');
UPDATE khand SET de = 'Ein Junge rennt.', en = 'manual' WHERE id = 1;
UPDATE khand SET en = 'by hand' WHERE id = 2;
UPDATE khand SET de = 'Eine Frau singt.' WHERE id = 3;
SELECT ok(wait_for_job(:jhand, '2 min'), 'hand edits: the job finishes');
SELECT is((SELECT array_agg(en ORDER BY id) FROM khand),
  ARRAY['manual', 'by hand', translate('Eine Frau singt.', 'multi30k_de_en')],
  'a target set with its source stays, a target set alone stays, a source changed alone is translated again');
-- a target written by hand after its row was queued, before a worker came: it stays too
SELECT pause_job(:jhand);
INSERT INTO khand VALUES (4, 'Ein Vogel singt.', NULL);
UPDATE khand SET en = 'typed in while queued' WHERE id = 4;
UPDATE khand SET de = 'Ein Kind lacht.' WHERE id = 3;
UPDATE khand SET en = 'rewritten while queued' WHERE id = 3;
SELECT resume_job(:jhand);
SELECT ok(wait_for_job(:jhand, '2 min'), 'hand edits while queued: the job finishes');
SELECT is((SELECT array_agg(en ORDER BY id) FROM khand WHERE id IN (3, 4)), ARRAY['rewritten while queued', 'typed in while queued'],
  'a row queued (inserted, or its source changed) whose target is written by hand before a worker reads it keeps that target');
-- and one written by hand while a worker translates it: the worker reads the row, then waits
-- for this transaction's row lock to write, and finds another target than it read
INSERT INTO khand VALUES (5, 'Ein Mann schwimmt im See.', NULL);
BEGIN;
UPDATE khand SET en = 'typed in while translated' WHERE id = 5;
SELECT pg_sleep(2) \g /dev/null
COMMIT;
SELECT ok(wait_for_job(:jhand, '2 min'), 'hand edits while translated: the job finishes');
SELECT is((SELECT en FROM khand WHERE id = 5), 'typed in while translated',
  'a target written by hand between the worker''s read and its write stays (the write checks the target it read)');

-- 3. no escalation: the table's code runs as its owner, in a security-restricted operation
CREATE ROLE tf_trust_owner;
CREATE ROLE tf_trust_alice LOGIN;
GRANT CREATE ON SCHEMA public TO tf_trust_owner;
SET ROLE tf_trust_owner;
CREATE TABLE kowned (id int PRIMARY KEY, de text, en text, who text);
CREATE TABLE kspy (who text, what text);
CREATE FUNCTION kescalate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO kspy VALUES (current_user, 'trigger');
  IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    EXECUTE 'ALTER ROLE tf_trust_owner SUPERUSER';
  END IF;
  NEW.who := current_user;
  RETURN NEW;
END $$;
CREATE TRIGGER kescalate BEFORE UPDATE ON kowned FOR EACH ROW EXECUTE FUNCTION kescalate();
CREATE FUNCTION kdefiner() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  IF NEW.id = 2 THEN
    RESET ROLE;   -- a SECURITY DEFINER function that tries to leave its owner's rights
    EXECUTE 'ALTER ROLE tf_trust_owner SUPERUSER';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER kdefiner BEFORE UPDATE ON kowned FOR EACH ROW EXECUTE FUNCTION kdefiner();
INSERT INTO kowned VALUES (1, 'Ein Hund bellt.', NULL, NULL);
RESET ROLE;
SELECT translate_column('kowned', 'de', 'en', 'multi30k_de_en') AS jowned \gset
SET ROLE tf_trust_owner;
INSERT INTO kowned VALUES (2, 'Eine Katze miaut.', NULL, NULL);
RESET ROLE;
SELECT ok(wait_for_job(:jowned, '2 min'), 'a superuser''s job on a table another role owns finishes');
SELECT is((SELECT rolsuper FROM pg_roles WHERE rolname = 'tf_trust_owner'), false,
  'the owner''s trigger that makes its owner a superuser when it runs as one did not: it ran as the owner');
SELECT is((SELECT array_agg(DISTINCT who) FROM kspy), ARRAY['tf_trust_owner'], 'the trigger ran as the table''s owner');
SELECT is((SELECT sqlstate FROM transformer_job_errors WHERE job = :jowned), '42501',
  'a SECURITY DEFINER trigger that resets the role fails the row (security-restricted operation) and is kept aside');

-- a privilege revoked after the declaration stops the job with the reason
CREATE TABLE krev (id int PRIMARY KEY, de text, en text);
GRANT SELECT, TRIGGER ON krev TO tf_trust_alice;
GRANT UPDATE (en) ON krev TO tf_trust_alice;
SET ROLE tf_trust_alice;
SELECT translate_column('krev', 'de', 'en', 'multi30k_de_en') AS jrev \gset
RESET ROLE;
REVOKE UPDATE (en) ON krev FROM tf_trust_alice;
INSERT INTO krev VALUES (1, 'Ein Hund.', NULL);
SELECT is(pg_temp.wait_state(:jrev, 'failed'), 'failed', 'UPDATE revoked: the job fails within seconds');
SELECT matches((SELECT last_error FROM transformer_jobs WHERE id = :jrev), 'permission denied for table krev.*UPDATE on column "en"',
  'and says which privilege is missing');
SELECT is((SELECT en FROM krev WHERE id = 1), NULL, 'nothing was written');

-- a dropped table, a dropped column: the job fails with the reason
CREATE TABLE kdrop (id int PRIMARY KEY, de text, en text);
CREATE TABLE kcol (id int PRIMARY KEY, de text, en text);
SELECT translate_column('kdrop', 'de', 'en', 'multi30k_de_en') AS jdrop \gset
SELECT translate_column('kcol', 'de', 'en', 'multi30k_de_en') AS jcol \gset
DROP TABLE kdrop;
ALTER TABLE kcol DROP COLUMN de;
SELECT pg_temp.wait_state(:jdrop, 'failed') \g /dev/null
SELECT pg_temp.wait_state(:jcol, 'failed') \g /dev/null
SELECT is((SELECT state || ': ' || last_error FROM transformer_jobs WHERE id = :jdrop),
  'failed: the table of job ' || :jdrop || ' was dropped', 'a dropped table fails its job within seconds');
SELECT is((SELECT state || ': ' || last_error FROM transformer_jobs WHERE id = :jcol),
  'failed: column "de" of relation "kcol" does not exist', 'so does a dropped column');
INSERT INTO kcol VALUES (1, 'still writable');

-- 4. idle syncing jobs hold no process; progress says idle
CREATE TABLE kidle (id int PRIMARY KEY, de text, en text);
INSERT INTO kidle SELECT i, 'Ein Hund Nummer ' || i || '.', NULL FROM generate_series(1, 12) i;
SELECT translate_column('kidle', 'de', 'en', 'multi30k_de_en', workers => 2, batch_size => 4) AS jidle \gset
SELECT ok(wait_for_job(:jidle, '2 min'), 'a syncing job finishes its backlog');
SELECT is((SELECT concat_ws(' ', state, activity, rows_pending, rows_per_second > 0, eta IS NULL) FROM transformer_jobs WHERE id = :jidle),
  'syncing idle 0 t t', 'transformer_jobs: syncing, idle, a rate over the last minute, no ETA without a backlog');
CREATE FUNCTION pg_temp.job_processes() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  FOR i IN 1..100 LOOP
    PERFORM pg_stat_clear_snapshot();
    SELECT count(*) INTO n FROM pg_stat_activity WHERE backend_type LIKE 'transformer job % worker %';
    IF n = 0 THEN RETURN 0; END IF;
    PERFORM pg_sleep(0.1);
  END LOOP;
  RETURN n;
END $$;
SELECT is(pg_temp.job_processes(), 0::bigint, 'once the queues are empty, no job worker process is left: idle jobs hold no slot');
SELECT is((SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'transformer job supervisor' AND datname = current_database()),
  1::bigint, 'one supervisor watches the database''s jobs');

-- progress during a backlog: a rate and an ETA
CREATE TABLE keta (id int PRIMARY KEY, de text, en text);
INSERT INTO keta SELECT i, 'Ein Hund Nummer ' || i || ' rennt über die große Wiese am Fluss.', NULL FROM generate_series(1, 300) i;
SELECT translate_column('keta', 'de', 'en', 'multi30k_de_en', batch_size => 4) AS jeta \gset
CREATE FUNCTION pg_temp.mid_backlog(job bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  FOR i IN 1..3000 LOOP
    SELECT * INTO r FROM transformer_jobs WHERE id = job;
    IF r.rows_done >= 8 AND r.rows_pending > 0 THEN
      RETURN concat_ws(' ', r.state, r.activity, r.rows_per_second > 0, r.eta > clock_timestamp());
    END IF;
    PERFORM pg_sleep(0.01);
  END LOOP;
  RETURN 'no moment with rows done and rows pending';
END $$;
SELECT is(pg_temp.mid_backlog(:jeta), 'running backfilling t t',
  'during a backlog: running, backfilling, a rate over the last minute and an ETA in the future');
SELECT ok(wait_for_job(:jeta, '2 min'), 'the backlog is done');

-- 5. translate()'s options, and a source language per row
CREATE TABLE khtml (id int PRIMARY KEY, de text, en text);
INSERT INTO khtml VALUES (1, '<p>Ein <b>Hund</b> rennt.</p>', NULL), (2, '<ul><li>Eine Katze.</li></ul>', NULL);
SELECT translate_column('khtml', 'de', 'en', 'multi30k_de_en', format => 'html', keep => '{url,number}') AS jhtml \gset
SELECT ok(wait_for_job(:jhtml, '2 min'), 'a job with format => html and keep finishes');
SELECT is((SELECT count(*) FROM khtml WHERE en IS DISTINCT FROM translate(de, 'multi30k_de_en', format => 'html', keep => '{url,number}')),
  0::bigint, 'each row equals translate() with the same options (the tags kept)');
SELECT throws_ok($$SELECT translate_column('khand', 'de', 'en', 'multi30k_de_en', format => 'pdf')$$, '22023', NULL,
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
SELECT is((SELECT batch_size || ' ' || (SELECT batch_size FROM transformer_jobs WHERE id = :jhand) FROM transformer_jobs WHERE id = :jint8),
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
DROP TABLE IF EXISTS kdate, kts, kfloat, knum, ktext, kuuid, kpair, khand, kowned, kspy, krev, kdrop, kcol, khtml,
  kmixed, kemb, kvec, kidle, keta, kpart, kint8 CASCADE;
DROP FUNCTION IF EXISTS kescalate(), kdefiner();
REVOKE CREATE ON SCHEMA public FROM tf_trust_owner;
DROP OWNED BY tf_trust_owner;
DROP OWNED BY tf_trust_alice;
DROP ROLE tf_trust_owner, tf_trust_alice;
