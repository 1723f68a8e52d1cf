-- Background jobs a DBA can trust (issue 37), 1 of 3: rows keyed exactly whatever the
-- writer's settings, and hand edits kept.  35_jobs_rights.sql and 36_jobs_options.sql follow.
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
DROP TABLE IF EXISTS kdate, kts, kfloat, knum, ktext, kuuid, kpair, khand, kpart CASCADE;
CREATE EXTENSION transformer;
SELECT import_model('multi30k_de_en') \g /dev/null
SELECT plan(23);

\ir include/jobs.psql

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

SELECT * FROM finish();
SELECT cancel_job(id) FROM transformer_jobs WHERE state NOT IN ('cancelled') \g /dev/null
DROP EXTENSION transformer CASCADE;
DROP TABLE IF EXISTS kdate, kts, kfloat, knum, ktext, kuuid, kpair, khand, kpart CASCADE;
