/* transformer--0.4.0--0.5.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION transformer UPDATE TO '0.5.0'" to load this file. \quit

-- Background translation jobs (since 0.5.0): translate_column() declares a
-- job; background workers run it as the role that declared it.  Only the
-- extension's C functions write these tables, as the extension's owner.

CREATE TABLE transformer_job (
	id bigserial PRIMARY KEY,
	tbl regclass NOT NULL,
	source name NOT NULL,
	target name NOT NULL,
	key_columns name[] NOT NULL,
	model text NOT NULL,
	owner regrole NOT NULL,
	state text NOT NULL DEFAULT 'queued'
		CHECK (state IN ('queued', 'running', 'syncing', 'paused', 'done', 'failed', 'cancelled')),
	workers integer NOT NULL CHECK (workers BETWEEN 1 AND 64),
	keep_in_sync boolean NOT NULL,
	beam integer CHECK (beam BETWEEN 1 AND 64),
	batch_size integer NOT NULL CHECK (batch_size BETWEEN 1 AND 1024),
	created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	started_at timestamptz,
	finished_at timestamptz,
	last_error text,
	waiting text
);
COMMENT ON TABLE transformer_job IS
'background translation jobs as translate_column() declared them; read them through the view transformer_jobs';
SELECT pg_catalog.pg_extension_config_dump('transformer_job', '');
SELECT pg_catalog.pg_extension_config_dump('transformer_job_id_seq', '');

CREATE TABLE transformer_job_queue (
	id bigserial PRIMARY KEY,
	job bigint NOT NULL REFERENCES transformer_job (id) ON DELETE CASCADE,
	key jsonb NOT NULL,
	queued_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE INDEX transformer_job_queue_job ON transformer_job_queue (job, id);
COMMENT ON TABLE transformer_job_queue IS
'the keys of the rows each job has still to translate (the text form of the key columns, as a JSON array)';
SELECT pg_catalog.pg_extension_config_dump('transformer_job_queue', '');
SELECT pg_catalog.pg_extension_config_dump('transformer_job_queue_id_seq', '');

CREATE TABLE transformer_job_progress (
	job bigint NOT NULL REFERENCES transformer_job (id) ON DELETE CASCADE,
	worker integer NOT NULL,
	rows_done bigint NOT NULL DEFAULT 0,
	rows_failed bigint NOT NULL DEFAULT 0,
	first_at timestamptz,
	last_at timestamptz,
	PRIMARY KEY (job, worker)
);
COMMENT ON TABLE transformer_job_progress IS
'rows each worker of a job has written, and when it wrote its first and last batch';
SELECT pg_catalog.pg_extension_config_dump('transformer_job_progress', '');

CREATE TABLE transformer_job_errors (
	job bigint NOT NULL REFERENCES transformer_job (id) ON DELETE CASCADE,
	key jsonb NOT NULL,
	sqlstate text NOT NULL,
	message text NOT NULL,
	at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	owner regrole NOT NULL
);
CREATE INDEX transformer_job_errors_job ON transformer_job_errors (job);
COMMENT ON TABLE transformer_job_errors IS
'rows a job could not translate or write: their key, PostgreSQL''s SQLSTATE and message; retry_job_errors() queues them again';
SELECT pg_catalog.pg_extension_config_dump('transformer_job_errors', '');
-- each role sees the errors of its own jobs (pg_monitor and superusers all)
ALTER TABLE transformer_job_errors ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_jobs ON transformer_job_errors FOR SELECT
	USING (pg_catalog.pg_has_role(owner, 'USAGE') OR pg_catalog.pg_has_role('pg_monitor', 'USAGE'));
GRANT SELECT ON transformer_job_errors TO PUBLIC;

CREATE VIEW transformer_jobs WITH (security_barrier) AS
SELECT j.id, j.tbl AS "table", j.source, j.target, j.model, j.owner, j.state, j.workers,
	p.done + p.failed + q.pending AS rows_total,
	p.done AS rows_done,
	p.failed AS rows_failed,
	q.pending AS rows_pending,
	r.rate AS rows_per_second,
	j.started_at,
	CASE WHEN j.state IN ('queued', 'running') AND r.rate > 0
		THEN pg_catalog.now() + pg_catalog.make_interval(secs => q.pending / r.rate) END AS eta,
	j.last_error,
	j.waiting,
	j.keep_in_sync, j.beam, j.batch_size, j.created_at, j.finished_at
FROM transformer_job j
CROSS JOIN LATERAL (SELECT coalesce(sum(rows_done), 0)::bigint AS done,
	coalesce(sum(rows_failed), 0)::bigint AS failed,
	min(first_at) AS first_at, max(last_at) AS last_at
	FROM transformer_job_progress WHERE job = j.id) p
CROSS JOIN LATERAL (SELECT count(*) AS pending FROM transformer_job_queue WHERE job = j.id) q
CROSS JOIN LATERAL (SELECT CASE WHEN p.last_at > p.first_at
	THEN round(((p.done + p.failed) / extract(epoch FROM p.last_at - p.first_at))::numeric, 1)::double precision
	END AS rate) r
WHERE pg_catalog.pg_has_role(j.owner, 'USAGE') OR pg_catalog.pg_has_role('pg_monitor', 'USAGE');
COMMENT ON VIEW transformer_jobs IS
'background translation jobs: state, rows done, failed and pending, speed, expected end, and why no worker runs (waiting); a role sees its own jobs, pg_monitor all';
GRANT SELECT ON transformer_jobs TO PUBLIC;

CREATE FUNCTION translate_column(tbl regclass, source text, target text, model text DEFAULT NULL,
                                 workers integer DEFAULT 1, keep_in_sync boolean DEFAULT true,
                                 beam integer DEFAULT NULL, batch_size integer DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'translate_column'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION translate_column(regclass, text, text, text, integer, boolean, integer, integer) IS
'declares a background job that writes translate(source) into target for every row whose target is NULL, with workers background workers running as you; keep_in_sync also translates rows inserted or whose source changes later; returns the job''s id';

CREATE FUNCTION wait_for_job(job bigint, timeout interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'wait_for_job'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION wait_for_job(bigint, interval) IS
'waits until the job has no row left to translate (true), or until timeout (false)';

CREATE FUNCTION pause_job(job bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'pause_job'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION pause_job(bigint) IS
'stops the job''s workers after their current batch; changed rows are still queued';

CREATE FUNCTION resume_job(job bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'resume_job'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION resume_job(bigint) IS
'starts the workers of a paused or failed job again';

CREATE FUNCTION cancel_job(job bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'cancel_job'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION cancel_job(bigint) IS
'stops the job for good: drops its sync trigger and its queue; rows written stay';

CREATE FUNCTION retry_job_errors(job bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'retry_job_errors'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION retry_job_errors(bigint) IS
'queues the rows in transformer_job_errors of the job again, and starts its workers; returns how many';

CREATE FUNCTION transformer_job_sync()
RETURNS trigger
AS 'MODULE_PATHNAME', 'transformer_job_sync'
LANGUAGE C;

COMMENT ON FUNCTION transformer_job_sync() IS
'trigger of keep_in_sync jobs: queues the key of each row inserted, or whose source changed';

REVOKE ALL ON FUNCTION transformer_job_sync() FROM PUBLIC;
