/* transformer--0.9.0--0.10.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION transformer UPDATE TO '0.10.0'" to load this file. \quit

-- Fine-tuning in the database (since 0.10.0): fine_tune() declares a job
-- of kind fine_tune, which has no table but a model to write

DROP VIEW transformer_jobs;
ALTER TABLE transformer_job
	ALTER COLUMN tbl DROP NOT NULL,
	ALTER COLUMN source DROP NOT NULL,
	ALTER COLUMN target DROP NOT NULL,
	ALTER COLUMN key_columns DROP NOT NULL,
	DROP CONSTRAINT transformer_job_kind_check,
	ADD COLUMN new_model text,
	ADD COLUMN settings jsonb,
	ADD CONSTRAINT transformer_job_kind_check CHECK (kind IN ('translate', 'embed', 'fine_tune')),
	ADD CONSTRAINT transformer_job_table_check CHECK (CASE WHEN kind = 'fine_tune'
		THEN tbl IS NULL AND new_model IS NOT NULL AND settings IS NOT NULL
		ELSE tbl IS NOT NULL AND source IS NOT NULL AND target IS NOT NULL AND key_columns IS NOT NULL END);
COMMENT ON TABLE transformer_job IS
'background jobs as translate_column(), embed_column() and fine_tune() declared them; read them through the view transformer_jobs';

-- fine_tune() (since 0.10.0): the pairs its query returned, as token ids,
-- every step's loss, and the last saved state of a run, to resume from
CREATE TABLE transformer_job_pairs (
	job bigint NOT NULL REFERENCES transformer_job (id) ON DELETE CASCADE,
	n integer NOT NULL CHECK (n >= 0),
	source_ids integer[] NOT NULL,
	target_ids integer[] NOT NULL,
	PRIMARY KEY (job, n)
);
COMMENT ON TABLE transformer_job_pairs IS
'the sentence pairs of each fine_tune() job, in the order of its query, as the model''s tokenizers give them: the source''s ids and the labels (end-of-sentence and language tokens included)';
SELECT pg_catalog.pg_extension_config_dump('transformer_job_pairs', '');

CREATE TABLE transformer_job_steps (
	job bigint NOT NULL REFERENCES transformer_job (id) ON DELETE CASCADE,
	step integer NOT NULL CHECK (step > 0),
	loss double precision NOT NULL,
	tokens integer NOT NULL,
	learning_rate double precision NOT NULL,
	seconds double precision NOT NULL,
	at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	owner regrole NOT NULL,
	PRIMARY KEY (job, step)
);
COMMENT ON TABLE transformer_job_steps IS
'every step of each fine_tune() job: its loss (the batch''s mean over its target tokens, label smoothing included), its source and target tokens, the learning rate it used and its time';
SELECT pg_catalog.pg_extension_config_dump('transformer_job_steps', '');
-- each role sees the steps of its own jobs (pg_monitor and superusers all)
ALTER TABLE transformer_job_steps ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_jobs ON transformer_job_steps FOR SELECT
	USING (pg_catalog.pg_has_role(owner, 'USAGE') OR pg_catalog.pg_has_role('pg_monitor', 'USAGE'));
GRANT SELECT ON transformer_job_steps TO PUBLIC;

CREATE TABLE transformer_job_checkpoints (
	job bigint NOT NULL REFERENCES transformer_job (id) ON DELETE CASCADE,
	part integer NOT NULL CHECK (part >= 0),
	data bytea NOT NULL,
	PRIMARY KEY (job, part)
);
-- float arrays: no compression to try
ALTER TABLE transformer_job_checkpoints ALTER COLUMN data SET STORAGE EXTERNAL;
COMMENT ON TABLE transformer_job_checkpoints IS
'the last saved state of each fine_tune() job (its step, the weights, Adam''s moments, the checkpoints being averaged), in parts, so that it resumes after a pause or a restart where it was';
SELECT pg_catalog.pg_extension_config_dump('transformer_job_checkpoints', '');

CREATE VIEW transformer_jobs WITH (security_barrier) AS
SELECT j.id, j.kind, j.tbl AS "table", j.source, j.target, j.model, j.owner, j.state,
	CASE WHEN j.kind = 'fine_tune' AND j.state IN ('queued', 'running') THEN 'training'
		WHEN j.state IN ('queued', 'running') THEN 'backfilling'
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
	CASE WHEN j.kind = 'fine_tune' AND j.state IN ('queued', 'running') AND t.step_seconds > 0
		THEN pg_catalog.clock_timestamp() + pg_catalog.make_interval(secs => (t.steps_total - t.step) * t.step_seconds)
		WHEN j.state IN ('queued', 'running', 'syncing') AND q.pending > 0 AND r.rate > 0
		THEN pg_catalog.clock_timestamp() + pg_catalog.make_interval(secs => q.pending / r.rate) END AS eta,
	j.last_error,
	j.waiting,
	j.keep_in_sync, j.beam, j.batch_size, j.format, j.keep, j.source_lang, j.target_lang, j.source_lang_column,
	j.created_at, j.finished_at,
	j.new_model,
	t.step,
	t.steps_total,
	t.loss,
	t.tokens_per_second,
	j.settings
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
-- fine_tune(): its last step, the mean loss of its last 10 steps, tokens a second over its last minute
LEFT JOIN LATERAL (SELECT max(s.step) AS step, (j.settings->>'steps')::integer AS steps_total,
	(SELECT avg(l.loss) FROM (SELECT loss FROM transformer_job_steps WHERE job = j.id ORDER BY step DESC LIMIT 10) l) AS loss,
	round((sum(s.tokens) FILTER (WHERE s.at > pg_catalog.clock_timestamp() - interval '1 minute') /
		nullif(sum(s.seconds) FILTER (WHERE s.at > pg_catalog.clock_timestamp() - interval '1 minute'), 0))::numeric, 1)::double precision AS tokens_per_second,
	avg(s.seconds) FILTER (WHERE s.at > pg_catalog.clock_timestamp() - interval '1 minute') AS step_seconds
	FROM transformer_job_steps s WHERE s.job = j.id AND j.kind = 'fine_tune') t ON true
WHERE pg_catalog.pg_has_role(j.owner, 'USAGE') OR pg_catalog.pg_has_role('pg_monitor', 'USAGE');
COMMENT ON VIEW transformer_jobs IS
'background jobs: kind (translate, embed or fine_tune), state, activity (backfilling, syncing, idle or training), rows done, failed and pending, rows per second over the last minute, expected end, and why no worker runs (waiting); a fine_tune() job''s step of steps_total, mean loss over its last 10 steps and tokens per second; a role sees its own jobs, pg_monitor all';
GRANT SELECT ON transformer_jobs TO PUBLIC;

CREATE FUNCTION fine_tune(model text, new_model text, pairs text, epochs integer DEFAULT 1,
                          max_steps integer DEFAULT NULL, batch_size integer DEFAULT 32,
                          learning_rate float8 DEFAULT NULL, warmup_steps integer DEFAULT NULL,
                          label_smoothing float8 DEFAULT 0.1, dropout float8 DEFAULT NULL,
                          shuffle boolean DEFAULT true, seed integer DEFAULT 0,
                          average_last integer DEFAULT 1, source_lang text DEFAULT NULL,
                          target_lang text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'fine_tune'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION fine_tune(text, text, text, integer, integer, integer, float8, integer, float8, float8, boolean, integer, integer, text, text) IS
'declares a background job that trains a copy of model on the (source, target) pairs that the query pairs returns (run now, as the caller) and stores it as new_model: cross-entropy with label smoothing, Adam (0.9, 0.98, 1e-9), the paper''s learning rate when learning_rate is NULL (else constant after warmup_steps), the config''s dropout when dropout is NULL, the average of the last average_last checkpoints; source_lang and target_lang pick a multilingual model''s languages (NLLB, M2M100); returns the job''s id';
