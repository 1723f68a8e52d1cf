-- Background translation jobs (issue 25): declaration checks, backfill,
-- sync, errors kept aside, retry, pause/resume/cancel, and privileges.
-- Jobs run in background workers, which see only committed rows: unlike
-- the other files, this one commits, and drops what it made at the end.
-- The kill loop and the restarts are in test/jobs/run.py.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

SET client_min_messages = warning;
DROP EXTENSION IF EXISTS transformer CASCADE;
DROP TABLE IF EXISTS jlog, jdocs, jcheck, jpair, juniq, jnokey, jnullkey, jshared, jbob CASCADE;
DROP VIEW IF EXISTS jview;
DROP FUNCTION IF EXISTS jwho(), jlog();
DO $$
DECLARE r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['tf_job_alice', 'tf_job_bob', 'tf_job_watcher', 'tf_job_nologin'] LOOP
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
      EXECUTE format('DROP OWNED BY %I', r);
      EXECUTE format('DROP ROLE %I', r);
    END IF;
  END LOOP;
END $$;
CREATE EXTENSION transformer;
SELECT import_model('multi30k_de_en') \g /dev/null
SELECT plan(67);

CREATE FUNCTION pg_temp.wait_idle() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..300 LOOP
    IF NOT EXISTS (SELECT FROM pg_stat_activity WHERE application_name LIKE 'transformer job % worker %'
                   AND datname = current_database()) THEN
      RETURN true;
    END IF;
    PERFORM pg_sleep(0.1);
    PERFORM pg_stat_clear_snapshot();
  END LOOP;
  RETURN false;
END $$;

CREATE TABLE jdocs (id int PRIMARY KEY, de text, en text);
INSERT INTO jdocs VALUES (1, 'Ein Mann fährt Fahrrad.', NULL), (2, 'Zwei Hunde spielen im Schnee.', NULL),
  (3, 'Eine Frau liest ein Buch.', NULL), (4, 'Kinder spielen am Strand.', 'schon übersetzt'),
  (5, NULL, NULL), (6, 'Ein Mädchen singt.', NULL);

-- 1. what translate_column() refuses
CREATE TABLE jnokey (de text, en text);
CREATE TABLE jnullkey (id int UNIQUE, de text, en text);
CREATE VIEW jview AS SELECT * FROM jdocs;
SELECT throws_ok($$SELECT translate_column('jnokey', 'de', 'en', 'multi30k_de_en')$$, '55000',
  'table "jnokey" has no primary key or unique key on NOT NULL columns', 'a table without a key is refused');
SELECT throws_ok($$SELECT translate_column('jnullkey', 'de', 'en', 'multi30k_de_en')$$, '55000',
  'table "jnullkey" has no primary key or unique key on NOT NULL columns', 'a unique key on a nullable column does not identify rows');
SELECT throws_ok($$SELECT translate_column('jdocs', 'de', 'fr', 'multi30k_de_en')$$, '42703',
  'column "fr" of relation "jdocs" does not exist', 'a missing target column');
SELECT throws_ok($$SELECT translate_column('jdocs', 'de', 'id', 'multi30k_de_en')$$, '42804',
  'target column "id" must be of a text type', 'a target that is not text');
SELECT throws_ok($$SELECT translate_column('jdocs', 'de', 'de', 'multi30k_de_en')$$, '22023',
  'source and target must be different columns', 'source and target the same column');
SELECT throws_ok($$SELECT translate_column('jdocs', 'de', 'en', 'multi30k_de_en', workers => 0)$$, '22023',
  NULL, 'workers below 1');
SELECT throws_ok($$SELECT translate_column('jdocs', 'de', 'en', 'multi30k_de_en', batch_size => 5000)$$, '22023',
  'batch_size must be between 1 and 1024', 'a batch too large');
SELECT throws_ok($$SELECT translate_column('jdocs', 'de', 'en', 'no_such_model')$$, '42704',
  'model "no_such_model" does not exist', 'an unknown model');
SELECT throws_ok($$SELECT translate_column('jdocs', 'de', 'en')$$, '42704',
  'no model to translate with', 'no model and no transformer.default_model');
SELECT throws_ok($$SELECT translate_column('jview', 'de', 'en', 'multi30k_de_en')$$, '42809',
  '"jview" is not a table', 'a view is not a table');
SELECT throws_ok($$SELECT translate_column(NULL, 'de', 'en', 'multi30k_de_en')$$, '22004',
  'table, source and target must not be null', 'a NULL table');

-- 2. the backfill: every row whose target is NULL, written as translate() writes it
SELECT translate_column('jdocs', 'de', 'en', 'multi30k_de_en') AS job \gset
SELECT ok(wait_for_job(:job, '2 min'), 'wait_for_job() returns true once the backlog is empty');
SELECT is((SELECT count(*) FROM jdocs WHERE id <> 4 AND en IS DISTINCT FROM translate(de, 'multi30k_de_en')), 0::bigint,
  'every row with a NULL target now holds translate(source)');
SELECT is((SELECT en FROM jdocs WHERE id = 4), 'schon übersetzt', 'a target already written is left alone');
SELECT is((SELECT en FROM jdocs WHERE id = 5), NULL, 'a NULL source stays untranslated');
SELECT is((SELECT concat_ws(' ', "table", source, target, model, state, workers, rows_done, rows_failed, rows_pending, coalesce(last_error, '-'))
           FROM transformer_jobs WHERE id = :job), 'jdocs de en multi30k_de_en syncing 1 4 0 0 -',
  'transformer_jobs: syncing, 4 rows done, none failed or pending');
SELECT is((SELECT rows_total FROM transformer_jobs WHERE id = :job), 4::bigint, 'rows_total counts done, failed and pending');
SELECT throws_ok($$SELECT translate_column('jdocs', 'de', 'en', 'multi30k_de_en')$$, '42710',
  NULL, 'a second job on the same target column is refused');
SELECT is((SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'transformer job supervisor'
           AND datname = current_database()), 1::bigint, 'the database''s supervisor shows in pg_stat_activity as "transformer job supervisor"');

-- 3. keeping in sync: inserts, source updates, a cleared target
INSERT INTO jdocs VALUES (7, 'Ein Hund rennt über die Wiese.', NULL);
UPDATE jdocs SET de = 'Ein Junge springt ins Wasser.' WHERE id = 1;
UPDATE jdocs SET en = NULL WHERE id = 2;
UPDATE jdocs SET de = NULL WHERE id = 3;
SELECT ok(wait_for_job(:job, '2 min'), 'the sync trigger queued the changed rows');
SELECT is((SELECT count(*) FROM jdocs WHERE id <> 4 AND en IS DISTINCT FROM translate(de, 'multi30k_de_en')), 0::bigint,
  'inserted rows, changed sources and cleared targets are translated again; a NULL source gives a NULL target');
SELECT is((SELECT en FROM jdocs WHERE id = 1), translate('Ein Junge springt ins Wasser.', 'multi30k_de_en'),
  'the new source''s translation, not the old one''s');

-- a source changed while its old text is being translated never gets the old
-- translation: hold the row while the worker translates it, then commit a new source
CREATE TABLE jlog (id int, de text, en text);
CREATE FUNCTION jlog() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.en IS DISTINCT FROM OLD.en THEN INSERT INTO jlog VALUES (NEW.id, NEW.de, NEW.en); END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER jlog BEFORE UPDATE ON jdocs FOR EACH ROW EXECUTE FUNCTION jlog();
INSERT INTO jdocs VALUES (50, 'Ein Pferd steht auf der Weide.', NULL);
BEGIN;
UPDATE jdocs SET de = 'Ein Fisch schwimmt im Aquarium.' WHERE id = 50;
SELECT pg_sleep(1) \g /dev/null
COMMIT;
SELECT ok(wait_for_job(:job, '2 min'), 'the changed row is translated again');
SELECT is((SELECT en FROM jdocs WHERE id = 50), translate('Ein Fisch schwimmt im Aquarium.', 'multi30k_de_en'),
  'with the new source''s translation');
SELECT is((SELECT array_agg(en) FROM jlog WHERE en IS DISTINCT FROM translate(de, 'multi30k_de_en')), NULL,
  'no write ever put a translation beside another source (the write compares the source it translated)');
DROP TRIGGER jlog ON jdocs;

-- 4. pause, resume, cancel
SELECT pause_job(:job);
SELECT is((SELECT state FROM transformer_jobs WHERE id = :job), 'paused', 'pause_job() pauses');
INSERT INTO jdocs VALUES (8, 'Eine Katze schläft.', NULL);
SELECT is(wait_for_job(:job, '0.5 s'), false, 'a paused job keeps its rows queued: wait_for_job() times out with false');
SELECT is((SELECT rows_pending FROM transformer_jobs WHERE id = :job), 1::bigint, 'the row inserted while paused is queued');
SELECT resume_job(:job);
SELECT ok(wait_for_job(:job, '2 min'), 'resume_job() starts the workers again');
SELECT is((SELECT en FROM jdocs WHERE id = 8), translate('Eine Katze schläft.', 'multi30k_de_en'), 'and they translate the queued row');
SELECT throws_ok($$SELECT pause_job(999999)$$, '42704', 'job 999999 does not exist', 'an unknown job');
SELECT throws_ok($$SELECT wait_for_job(1, '-1 s')$$, '22023', 'timeout must not be negative', 'a negative timeout');
SELECT cancel_job(:job);
SELECT is((SELECT state FROM transformer_jobs WHERE id = :job), 'cancelled', 'cancel_job() cancels');
SELECT is((SELECT count(*) FROM pg_trigger WHERE tgrelid = 'jdocs'::regclass AND tgname LIKE 'transformer_job_%'), 0::bigint,
  'and drops the sync trigger');
INSERT INTO jdocs VALUES (9, 'Ein Vogel fliegt.', NULL);
SELECT is((SELECT count(*) FROM transformer_job_queue WHERE job = :job), 0::bigint, 'rows inserted after the cancel are not queued');
SELECT throws_ok('SELECT wait_for_job(' || :job || ')', '55000', 'job ' || :job || ' was cancelled', 'waiting for a cancelled job is an error');
SELECT throws_ok('SELECT resume_job(' || :job || ')', '55000', NULL, 'a cancelled job cannot be resumed');

-- 5. a row that fails goes to transformer_job_errors, the job goes on; retry_job_errors() queues it again
CREATE TABLE jcheck (id int PRIMARY KEY, de text, en text CONSTRAINT short CHECK (length(en) < 20));
INSERT INTO jcheck VALUES (1, 'Ein Hund.', NULL), (2, 'Ein Mann mit einem roten Hut fährt mit dem Fahrrad durch die Stadt.', NULL),
  (3, 'Eine Katze.', NULL);
SELECT translate_column('jcheck', 'de', 'en', 'multi30k_de_en', keep_in_sync => false) AS cjob \gset
SELECT ok(wait_for_job(:cjob, '2 min'), 'a job with a failing row finishes');
SELECT is((SELECT string_agg(concat_ws(' ', key::text, sqlstate, message), '; ') FROM transformer_job_errors WHERE job = :cjob),
  '["2"] 23514 new row for relation "jcheck" violates check constraint "short"',
  'the failing row is kept aside with PostgreSQL''s SQLSTATE and message');
SELECT is((SELECT count(*) FROM jcheck WHERE en IS NOT NULL), 2::bigint, 'the other rows are written');
SELECT is((SELECT concat_ws(' ', state, rows_done, rows_failed) FROM transformer_jobs WHERE id = :cjob), 'done 2 1',
  'keep_in_sync => false: the job is done, with 2 rows done and 1 failed');
SELECT is((SELECT count(*) FROM pg_trigger WHERE tgrelid = 'jcheck'::regclass AND tgname LIKE 'transformer_job_%'), 0::bigint,
  'keep_in_sync => false adds no trigger');
ALTER TABLE jcheck DROP CONSTRAINT short;
SELECT is(retry_job_errors(:cjob), 1::bigint, 'retry_job_errors() queues the failed row again');
SELECT ok(wait_for_job(:cjob, '2 min'), 'and the workers translate it');
SELECT is((SELECT count(*) FROM jcheck WHERE en IS DISTINCT FROM translate(de, 'multi30k_de_en')), 0::bigint, 'now every row is written');

-- 6. keys of two columns; a unique key on NOT NULL columns
CREATE TABLE jpair (a int, b text, de text, en text, PRIMARY KEY (a, b));
INSERT INTO jpair VALUES (1, 'x"y', 'Ein Hund.', NULL), (1, 'z', 'Eine Katze.', NULL);
CREATE TABLE juniq (code text NOT NULL UNIQUE, de text, en text);
INSERT INTO juniq VALUES ('a', 'Ein Mann.', NULL);
SELECT translate_column('jpair', 'de', 'en', 'multi30k_de_en', keep_in_sync => false) AS pjob \gset
SELECT translate_column('juniq', 'de', 'en', 'multi30k_de_en', keep_in_sync => false) AS ujob \gset
SELECT ok(wait_for_job(:pjob, '2 min') AND wait_for_job(:ujob, '2 min'), 'jobs on a two-column key and on a unique key finish');
SELECT is((SELECT count(*) FROM jpair WHERE en IS DISTINCT FROM translate(de, 'multi30k_de_en'))
        + (SELECT count(*) FROM juniq WHERE en IS DISTINCT FROM translate(de, 'multi30k_de_en')), 0::bigint,
  'their rows are found by their keys (quotes included)');

-- 7. not in the declaring transaction
BEGIN;
ALTER TABLE jnullkey ALTER COLUMN id SET NOT NULL;
SELECT translate_column('jnullkey', 'de', 'en', 'multi30k_de_en') AS njob \gset
SELECT throws_ok('SELECT wait_for_job(' || :njob || ')', '25001', NULL, 'wait_for_job() in the declaring transaction is an error');
ROLLBACK;
SELECT throws_ok('SELECT wait_for_job(' || :njob || ')', '42704', NULL, 'a job whose declaration rolled back does not exist');

-- 8. privileges: a job runs as its owner; RLS and column privileges apply; others' jobs are invisible
CREATE ROLE tf_job_alice LOGIN;
CREATE ROLE tf_job_bob LOGIN;
CREATE ROLE tf_job_nologin;
GRANT SELECT, UPDATE, TRIGGER ON jdocs TO tf_job_nologin;
SET ROLE tf_job_nologin;
SELECT throws_ok($$SELECT translate_column('jdocs', 'de', 'en', 'multi30k_de_en')$$, '28000',
  'role "tf_job_nologin" cannot log in, and job workers connect as the role that declares the job',
  'a role without LOGIN cannot declare a job: its workers could not connect');
RESET ROLE;
CREATE ROLE tf_job_watcher IN ROLE pg_monitor;
CREATE TABLE jshared (id int PRIMARY KEY, de text, en text, who text, sess text);
INSERT INTO jshared SELECT i, 'Ein Hund Nummer ' || i || '.', NULL, NULL FROM generate_series(1, 6) i;
GRANT SELECT (id, de, en), UPDATE (en) ON jshared TO tf_job_alice;
ALTER TABLE jshared ENABLE ROW LEVEL SECURITY;
CREATE POLICY alice_reads ON jshared FOR SELECT TO tf_job_alice USING (id <= 3);
CREATE POLICY alice_writes ON jshared FOR UPDATE TO tf_job_alice USING (id <= 3);
CREATE FUNCTION jwho() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.who := current_user; NEW.sess := session_user; RETURN NEW; END $$;
CREATE TRIGGER jwho BEFORE UPDATE ON jshared FOR EACH ROW EXECUTE FUNCTION jwho();
SET ROLE tf_job_alice;
SELECT throws_ok($$SELECT translate_column('jshared', 'de', 'en', 'multi30k_de_en')$$, '42501',
  'permission denied for table jshared', 'keep_in_sync needs the TRIGGER privilege');
SELECT throws_ok($$SELECT translate_column('jshared', 'de', 'en', 'multi30k_de_en', keep_in_sync => false)$$, '0A000',
  'row-level security of table "jshared" applies to role "tf_job_alice"',
  'a role that row-level security restricts cannot declare a job: its policies would run with its rights');
RESET ROLE;
ALTER TABLE jshared DISABLE ROW LEVEL SECURITY;
SET ROLE tf_job_alice;
SELECT translate_column('jshared', 'de', 'en', 'multi30k_de_en', keep_in_sync => false) AS ajob \gset
SELECT ok(wait_for_job(:ajob, '2 min'), 'a role with SELECT and UPDATE on the columns runs a job');
RESET ROLE;
SELECT is((SELECT count(*) FROM jshared WHERE en IS DISTINCT FROM translate(de, 'multi30k_de_en')), 0::bigint,
  'its rows are written');
SELECT is((SELECT array_agg(DISTINCT who) FROM jshared WHERE who IS NOT NULL), ARRAY[current_user::text],
  'the table''s own triggers run as the table''s owner, not as the role that declared the job');
SELECT is((SELECT array_agg(DISTINCT sess) FROM jshared WHERE sess IS NOT NULL), ARRAY['tf_job_alice'],
  'its worker''s session is the declaring role''s (it connects as that role, never as a superuser)');
SET ROLE tf_job_bob;
SELECT throws_ok($$SELECT translate_column('jshared', 'de', 'en', 'multi30k_de_en', keep_in_sync => false)$$, '42501',
  NULL, 'a role without privileges on the table cannot declare a job on it');
RESET ROLE;
GRANT SELECT (id, en), UPDATE (en) ON jshared TO tf_job_bob;
SET ROLE tf_job_bob;
SELECT throws_ok($$SELECT translate_column('jshared', 'de', 'en', 'multi30k_de_en', keep_in_sync => false)$$, '42501',
  'permission denied for table jshared', 'nor a role that may not read the source column');
RESET ROLE;
GRANT SELECT (de) ON jshared TO tf_job_bob;
REVOKE UPDATE ON jshared FROM tf_job_bob;
SET ROLE tf_job_bob;
SELECT throws_ok($$SELECT translate_column('jshared', 'de', 'en', 'multi30k_de_en', keep_in_sync => false)$$, '42501',
  'permission denied for table jshared', 'nor a role that may read every column but not update the target');
SELECT is((SELECT count(*) FROM transformer_jobs), 0::bigint, 'a role sees none of the others'' jobs');
SELECT throws_ok('SELECT pause_job(' || :ajob || ')', '42704', NULL, 'nor may it pause them');
SELECT throws_ok('SELECT cancel_job(' || :ajob || ')', '42704', NULL, 'nor cancel them');
SELECT throws_ok('SELECT count(*) FROM transformer_job_queue', '42501', NULL, 'the queue is not readable');
SELECT throws_ok('UPDATE transformer_job SET owner = ''tf_job_bob''', '42501', NULL, 'the job table is not writable');
RESET ROLE;
SET ROLE tf_job_watcher;
SELECT is((SELECT count(*) FROM transformer_jobs WHERE id = :ajob), 1::bigint, 'pg_monitor sees every job');
SELECT throws_ok('SELECT cancel_job(' || :ajob || ')', '42501', NULL, 'but may not change them');
RESET ROLE;

-- the end: no worker left behind
SELECT cancel_job(id) FROM transformer_jobs WHERE state <> 'cancelled' \g /dev/null
SELECT ok(pg_temp.wait_idle(), 'every worker leaves once its job is cancelled');

SELECT * FROM finish();
DROP EXTENSION transformer CASCADE;
DROP TABLE jlog, jdocs, jcheck, jpair, juniq, jnokey, jnullkey, jshared CASCADE;
DROP FUNCTION jwho();
DROP FUNCTION jlog();
DROP OWNED BY tf_job_nologin;
DROP ROLE tf_job_alice, tf_job_bob, tf_job_watcher, tf_job_nologin;
