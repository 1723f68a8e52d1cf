/* transformer--0.8.0--0.9.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION transformer UPDATE TO '0.9.0'" to load this file. \quit

-- Background jobs a DBA can trust (since 0.9.0): embedding jobs, translate()'s
-- options, queue chunks keyed under fixed settings, the rate over the last minute

ALTER TABLE transformer_job
	ADD COLUMN kind text NOT NULL DEFAULT 'translate' CHECK (kind IN ('translate', 'embed')),
	ADD COLUMN format text,
	ADD COLUMN keep text[],
	ADD COLUMN source_lang text,
	ADD COLUMN target_lang text,
	ADD COLUMN source_lang_column name;
COMMENT ON TABLE transformer_job IS
'background jobs as translate_column() and embed_column() declared them; read them through the view transformer_jobs';

DROP VIEW transformer_jobs;
ALTER TABLE transformer_job_queue RENAME COLUMN key TO keys;
ALTER TABLE transformer_job_queue ADD COLUMN n integer NOT NULL DEFAULT 1 CHECK (n > 0);
ALTER TABLE transformer_job_queue ADD COLUMN targets jsonb;
UPDATE transformer_job_queue SET keys = pg_catalog.jsonb_build_array(keys);
COMMENT ON TABLE transformer_job_queue IS
'the keys of the rows each job has still to do, in chunks: keys is a JSON array of n keys, each a JSON array of the key columns'' text written under fixed settings (DateStyle ISO, IntervalStyle postgres, TimeZone UTC, extra_float_digits 1, bytea_output hex); targets, the hash of each row''s target when it was queued (null: NULL), so that a target written by hand since is left alone';

-- the batches of the last minutes, for the rate over the last minute (since 0.9.0;
-- the supervisor forgets batches older than 2 minutes)
CREATE TABLE transformer_job_batches (
	job bigint NOT NULL REFERENCES transformer_job (id) ON DELETE CASCADE,
	worker integer NOT NULL,
	started_at timestamptz NOT NULL,
	finished_at timestamptz NOT NULL,
	rows integer NOT NULL
);
CREATE INDEX transformer_job_batches_job ON transformer_job_batches (job, finished_at);
COMMENT ON TABLE transformer_job_batches IS
'the batches each job''s workers finished in the last two minutes: when and how many rows';

CREATE VIEW transformer_jobs WITH (security_barrier) AS
SELECT j.id, j.kind, j.tbl AS "table", j.source, j.target, j.model, j.owner, j.state,
	CASE WHEN j.state IN ('queued', 'running') THEN 'backfilling'
		WHEN j.state = 'syncing' AND q.pending > 0 THEN 'syncing'
		WHEN j.state = 'syncing' THEN 'idle'
		ELSE j.state END AS activity,
	j.workers,
	p.done + p.failed + q.pending AS rows_total,
	p.done AS rows_done,
	p.failed AS rows_failed,
	q.pending AS rows_pending,
	r.rate AS rows_per_second,
	j.started_at,
	CASE WHEN j.state IN ('queued', 'running', 'syncing') AND q.pending > 0 AND r.rate > 0
		THEN pg_catalog.clock_timestamp() + pg_catalog.make_interval(secs => q.pending / r.rate) END AS eta,
	j.last_error,
	j.waiting,
	j.keep_in_sync, j.beam, j.batch_size, j.format, j.keep, j.source_lang, j.target_lang, j.source_lang_column,
	j.created_at, j.finished_at
FROM transformer_job j
CROSS JOIN LATERAL (SELECT coalesce(sum(rows_done), 0)::bigint AS done,
	coalesce(sum(rows_failed), 0)::bigint AS failed
	FROM transformer_job_progress WHERE job = j.id) p
CROSS JOIN LATERAL (SELECT coalesce(sum(n), 0)::bigint AS pending FROM transformer_job_queue WHERE job = j.id) q
CROSS JOIN LATERAL (SELECT sum(rows) AS rows, min(started_at) AS since FROM transformer_job_batches
	WHERE job = j.id AND finished_at > pg_catalog.clock_timestamp() - interval '1 minute') b
CROSS JOIN LATERAL (SELECT CASE WHEN b.rows > 0
	THEN round((b.rows / greatest(extract(epoch FROM pg_catalog.clock_timestamp() - greatest(b.since, pg_catalog.clock_timestamp() - interval '1 minute')), 0.001))::numeric, 1)::double precision
	END AS rate) r
WHERE pg_catalog.pg_has_role(j.owner, 'USAGE') OR pg_catalog.pg_has_role('pg_monitor', 'USAGE');
COMMENT ON VIEW transformer_jobs IS
'background jobs: kind (translate or embed), state, activity (backfilling, syncing or idle), rows done, failed and pending, rows per second over the last minute, expected end while rows are pending, and why no worker runs (waiting); a role sees its own jobs, pg_monitor all';
GRANT SELECT ON transformer_jobs TO PUBLIC;

DROP FUNCTION translate_column(regclass, text, text, text, integer, boolean, integer, integer);

CREATE FUNCTION translate_column(tbl regclass, source text, target text, model text DEFAULT NULL,
                                 workers integer DEFAULT 1, keep_in_sync boolean DEFAULT true,
                                 beam integer DEFAULT NULL, batch_size integer DEFAULT NULL,
                                 format text DEFAULT 'text', keep text[] DEFAULT NULL,
                                 source_lang text DEFAULT NULL, target_lang text DEFAULT NULL,
                                 source_lang_column text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'translate_column'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION translate_column(regclass, text, text, text, integer, boolean, integer, integer, text, text[], text, text, text) IS
'declares a background job that writes translate(source) into target, with translate()''s format, keep and languages, for every row whose target is NULL; keep_in_sync also does rows inserted later or whose source changes (a target set by hand stays); source_lang_column names a column with each row''s source language; workers: at most this many background workers at a time, started by the database''s job supervisor while rows are queued; returns the job''s id';

CREATE FUNCTION embed_column(tbl regclass, source text, target text, model text DEFAULT NULL,
                             workers integer DEFAULT 1, keep_in_sync boolean DEFAULT true,
                             batch_size integer DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'embed_column'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION embed_column(regclass, text, text, text, integer, boolean, integer) IS
'declares a background job that writes embed(source, model) into target (real[], or pgvector''s vector) for every row whose target is NULL, with the guarantees of translate_column(); returns the job''s id';

COMMENT ON FUNCTION wait_for_job(bigint, interval) IS
'waits until the job has no row left to do (true; a WARNING says how many rows failed), or until timeout (false)';

COMMENT ON FUNCTION transformer_job_sync() IS
'statement triggers of keep_in_sync jobs: queue the keys of the rows inserted with a NULL target, or whose source changed while their target did not';

-- translate(body, 'nllb', 'deu_Latn', 'fra_Latn'): languages in third and
-- fourth place, where beam_size and max_length would otherwise take them
-- (and fail as integers); unknown-typed literals prefer this text form.
-- Its parameters are not named source_lang and target_lang, so that a call
-- naming those has one candidate only.
CREATE FUNCTION translate(input text, model text, from_lang text, to_lang text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
COST 100000
RETURN @extschema@.translate(input, model, source_lang => from_lang, target_lang => to_lang);

COMMENT ON FUNCTION translate(text, text, text, text) IS
'translates input from from_lang to to_lang with a multilingual model, as translate(input, model, source_lang => from_lang, target_lang => to_lang)';

CREATE FUNCTION translate(inputs text[], model text, from_lang text, to_lang text)
RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE
COST 100000
RETURN @extschema@.translate(inputs, model, source_lang => from_lang, target_lang => to_lang);

COMMENT ON FUNCTION translate(text[], text, text, text) IS
'translates each element of inputs from from_lang to to_lang, as translate(inputs, model, source_lang => from_lang, target_lang => to_lang)';

-- the kinds of spans kept: symbol and list (issue 38)
COMMENT ON FUNCTION translate(text, text, integer, integer, boolean, double precision, integer, double precision, integer, integer, text, text, text, text[], boolean) IS
'translates input with a model as Hugging Face''s generate() does: greedy when beam_size is 1, beam search otherwise; every NULL option takes the model''s generation config (generation_config.json, else config.json); source_lang and target_lang pick the languages of a multilingual model (see model_languages()); format text, html or xml (markup kept, text translated); keep: the kinds of spans kept verbatim (url, email, number, placeholder, format, mention, hashtag, code, symbol, list; NULL: all); split false: one segment, not sentences; NULL input gives NULL';
