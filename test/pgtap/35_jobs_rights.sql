-- Background jobs a DBA can trust (issue 37), 2 of 3: no escalation through the table's
-- code, a revoked privilege or a dropped table stops the job, idle jobs hold no worker,
-- progress during a backlog.
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
DROP TABLE IF EXISTS kowned, kspy, krev, kdrop, kcol, kidle, keta CASCADE;
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
SELECT plan(15);

\ir include/jobs.psql

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

SELECT * FROM finish();
SELECT cancel_job(id) FROM transformer_jobs WHERE state NOT IN ('cancelled') \g /dev/null
DROP EXTENSION transformer CASCADE;
DROP TABLE IF EXISTS kowned, kspy, krev, kdrop, kcol, kidle, keta CASCADE;
DROP FUNCTION IF EXISTS kescalate(), kdefiner();
REVOKE CREATE ON SCHEMA public FROM tf_trust_owner;
DROP OWNED BY tf_trust_owner;
DROP OWNED BY tf_trust_alice;
DROP ROLE tf_trust_owner, tf_trust_alice;
