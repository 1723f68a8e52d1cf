/*
 * sql_job_control.c
 *		The SQL functions that follow and steer a declared job:
 *		wait_for_job(), pause_job(), resume_job(), cancel_job() and
 *		retry_job_errors().  Jobs are declared in sql_jobs.c.
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/acl.h"
#include "utils/builtins.h"

#include "jobs.h"

/* The job, if the current role may see it (its owner's member, pg_monitor or superuser). */
static void
get_visible_job(int64 id, JobRow *job, bool to_change)
{
	bool		found = ReadJob(id, job);
	bool		own = found && has_privs_of_role(GetUserId(), job->owner);

	if (!found || (!own && !has_privs_of_role(GetUserId(), ROLE_PG_MONITOR)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("job " INT64_FORMAT " does not exist", id)));
	if (to_change && !own)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be a member of role \"%s\" to change job " INT64_FORMAT,
						GetUserNameFromId(job->owner, false), id)));
}

/* ------------------------------------------------------------ wait_for_job */

static int64
count_rows(int64 id, const char *sql)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1] = {Int64GetDatum(id)};
	JobAsOwner s;
	bool		isnull;
	int			ret;

	JobInternalBegin(&s);
	ret = SPI_execute_with_args(sql, 1, t, v, NULL, false, 1);
	JobInternalEnd(&s);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "could not count the queue");
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

PG_FUNCTION_INFO_V1(wait_for_job);
Datum
wait_for_job(PG_FUNCTION_ARGS)
{
	int64		id;
	TimestampTz deadline = 0;
	TimestampTz next_ensure = 0;
	bool		done = false;
	bool		first = true;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("job must not be null")));
	id = PG_GETARG_INT64(0);
	if (!PG_ARGISNULL(1))
	{
		Interval   *iv = PG_GETARG_INTERVAL_P(1);
		double		secs = iv->time / 1e6 + iv->day * 86400.0 + iv->month * 30.0 * 86400.0;

		if (secs < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("timeout must not be negative")));
		deadline = GetCurrentTimestamp() + (TimestampTz) Min(secs, 1e9) * USECS_PER_SEC;
	}
	MaybeResumeJobs();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	for (;;)
	{
		JobRow		job;
		int64		pending;

		CHECK_FOR_INTERRUPTS();
		get_visible_job(id, &job, false);
		if (first && TransactionIdIsCurrentTransactionId(job.xmin))
			ereport(ERROR,
					(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
					 errmsg("cannot wait for job " INT64_FORMAT " in the transaction that changed it", id),
					 errdetail("Its workers start when this transaction commits."),
					 errhint("Commit first, then call wait_for_job().")));
		first = false;
		if (strcmp(job.state, "cancelled") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("job " INT64_FORMAT " was cancelled", id)));
		if (strcmp(job.state, "failed") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("job " INT64_FORMAT " failed", id),
					 errhint("transformer_jobs.last_error says why; resume_job() starts it again.")));
		pending = count_rows(id, psprintf("SELECT coalesce(sum(n), 0)::bigint FROM %s WHERE job = $1",
										  JobTable("transformer_job_queue")));
		/* nothing queued, and the job's state settled (a supervisor settles a backlog that was empty); a fine_tune() job: its model written */
		if (job.fine_tune ? strcmp(job.state, "done") == 0 :
			(pending == 0 && strcmp(job.state, "queued") != 0 && strcmp(job.state, "running") != 0))
		{
			done = true;
			break;
		}
		if (IsolationUsesXactSnapshot())
			ereport(ERROR,
					(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
					 errmsg("cannot wait for a job in a REPEATABLE READ or SERIALIZABLE transaction"),
					 errdetail("Its snapshot would never see the workers' progress.")));
		/* the database's supervisor, if none runs (it was stopped, or never started since the server did) */
		if (GetCurrentTimestamp() >= next_ensure)
		{
			EnsureJobSupervisor(MyDatabaseId, true);
			next_ensure = GetCurrentTimestamp() + 2 * USECS_PER_SEC;
		}
		if (deadline != 0 && GetCurrentTimestamp() >= deadline)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 100, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	if (done)
	{
		int64		failed = count_rows(id, psprintf("SELECT count(*) FROM %s WHERE job = $1",
													 JobTable("transformer_job_errors")));

		if (failed > 0)
			ereport(WARNING,
					(errmsg_plural("job " INT64_FORMAT ": " INT64_FORMAT " row failed",
								   "job " INT64_FORMAT ": " INT64_FORMAT " rows failed", failed, id, failed),
					 errhint("transformer_job_errors says why; retry_job_errors() queues them again.")));
	}
	SPI_finish();
	PG_RETURN_BOOL(done);
}

/* ------------------------------------------------------------ pause, resume, cancel, retry */

static void
set_state(int64 id, const char *state, const char *extra)
{
	Oid			t[2] = {INT8OID, TEXTOID};
	Datum		v[2] = {Int64GetDatum(id), CStringGetTextDatum(state)};

	JobExec(psprintf("UPDATE %s SET state = $2%s WHERE id = $1", JobTable("transformer_job"), extra ? extra : ""),
				  2, t, v, NULL, SPI_OK_UPDATE);
}

static bool
state_in(const JobRow *job, const char *const *states)
{
	for (; *states; states++)
		if (strcmp(job->state, *states) == 0)
			return true;
	return false;
}

static void
wrong_state(const JobRow *job, const char *action)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("cannot %s job " INT64_FORMAT " because it is %s", action, job->id, job->state)));
}

PG_FUNCTION_INFO_V1(pause_job);
Datum
pause_job(PG_FUNCTION_ARGS)
{
	static const char *const ok[] = {"queued", "running", "syncing", NULL};
	JobRow		job;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	LockJobRow(PG_GETARG_INT64(0));
	get_visible_job(PG_GETARG_INT64(0), &job, true);
	if (strcmp(job.state, "paused") != 0)
	{
		if (!state_in(&job, ok))
			wrong_state(&job, "pause");
		set_state(job.id, "paused", ", waiting = NULL");
	}
	SPI_finish();
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(resume_job);
Datum
resume_job(PG_FUNCTION_ARGS)
{
	static const char *const ok[] = {"paused", "failed", "queued", "running", "syncing", "done", NULL};
	JobRow		job;

	MaybeResumeJobs();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	LockJobRow(PG_GETARG_INT64(0));
	get_visible_job(PG_GETARG_INT64(0), &job, true);
	if (!state_in(&job, ok))
		wrong_state(&job, "resume");
	if (strcmp(job.state, "paused") == 0 || strcmp(job.state, "failed") == 0)
		set_state(job.id, "queued", ", last_error = NULL, finished_at = NULL");
	EnsureJobSupervisorAtCommit();
	SPI_finish();
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(cancel_job);
Datum
cancel_job(PG_FUNCTION_ARGS)
{
	JobRow		job;
	Oid			t[1] = {INT8OID};
	Datum		v[1];

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	LockJobRow(PG_GETARG_INT64(0));
	get_visible_job(PG_GETARG_INT64(0), &job, true);
	if (strcmp(job.state, "cancelled") != 0)
	{
		if (!job.fine_tune)
			DropSyncTriggers(&job);
		set_state(job.id, "cancelled", ", waiting = NULL, finished_at = pg_catalog.now()");
		v[0] = Int64GetDatum(job.id);
		JobExec(psprintf("DELETE FROM %s WHERE job = $1", JobTable("transformer_job_queue")),
					  1, t, v, NULL, SPI_OK_DELETE);
		/* a fine_tune() job's saved state and pairs: their space back at once */
		JobExec(psprintf("DELETE FROM %s WHERE job = $1", JobTable("transformer_job_checkpoints")),
				1, t, v, NULL, SPI_OK_DELETE);
		JobExec(psprintf("DELETE FROM %s WHERE job = $1", JobTable("transformer_job_pairs")),
				1, t, v, NULL, SPI_OK_DELETE);
	}
	SPI_finish();
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(retry_job_errors);
Datum
retry_job_errors(PG_FUNCTION_ARGS)
{
	JobRow		job;
	Oid			t[1] = {INT8OID};
	Datum		v[1];
	int64		n;

	MaybeResumeJobs();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	LockJobRow(PG_GETARG_INT64(0));
	get_visible_job(PG_GETARG_INT64(0), &job, true);
	if (job.fine_tune)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("job " INT64_FORMAT " is a fine_tune() job, which has no rows to retry", job.id),
				 errhint("resume_job() resumes a failed fine_tune() job from its last saved state.")));
	if (strcmp(job.state, "cancelled") == 0)
		wrong_state(&job, "retry the errors of");
	v[0] = Int64GetDatum(job.id);
	JobExec(psprintf("WITH e AS (DELETE FROM %s WHERE job = $1 RETURNING key) "
					 "INSERT INTO %s (job, keys, n) SELECT $1, pg_catalog.jsonb_build_array(key), 1 FROM e",
						   JobTable("transformer_job_errors"), JobTable("transformer_job_queue")),
				  1, t, v, NULL, SPI_OK_INSERT);
	n = (int64) SPI_processed;
	if (n > 0)
	{
		/* the failures leave the counts with their rows */
		JobExec(psprintf("UPDATE %s SET rows_failed = 0 WHERE job = $1", JobTable("transformer_job_progress")),
					  1, t, v, NULL, SPI_OK_UPDATE);
		if (strcmp(job.state, "done") == 0)
			set_state(job.id, "queued", ", finished_at = NULL");
		EnsureJobSupervisorAtCommit();
	}
	SPI_finish();
	PG_RETURN_INT64(n);
}

