/*
 * job_worker.c
 *		The background workers of translation jobs, done as worker_spi and
 *		autoprewarm do them: a worker per job and slot, running as the role
 *		that declared the job; a short-lived resumer per database after a
 *		server start; and, under shared_preload_libraries, a launcher that
 *		starts the resumers.  Registering them is src/pg/job_launch.c's.
 *
 *		A worker's batch is one transaction: it takes keys off the queue
 *		(FOR UPDATE SKIP LOCKED), translates their rows together, writes
 *		each row only if its source is still the one translated, records
 *		the rows that fail, and commits.  Killed at any point, the
 *		transaction aborts and the keys are back in the queue.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/heapam.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/catalog.h"
#include "catalog/pg_database.h"
#include "catalog/pg_tablespace_d.h"
#include "common/relpath.h"
#include "storage/fd.h"
#include <sys/stat.h>
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "access/parallel.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "ext_tables.h"
#include "input_limit.h"
#include "jobs.h"
#include "model_store.h"
#include "translate.h"

PGDLLEXPORT void transformer_job_main(Datum main_arg);
PGDLLEXPORT void transformer_job_resumer(Datum main_arg);
PGDLLEXPORT void transformer_job_launcher(Datum main_arg);

static bool first_batch = true;

/* ------------------------------------------------------------ one batch */

typedef struct BatchRow
{
	char	   *key;			/* JSON array text */
	bool		exists;			/* the row is still there */
	text	   *source;			/* NULL: source is NULL */
	text	   *out;
	bool		failed;
	char		sqlstate[6];
	char	   *message;
} BatchRow;

typedef enum BatchResult
{
	BATCH_DID_WORK,
	BATCH_IDLE,					/* nothing to claim: wait */
	BATCH_EXIT					/* the job is over for this worker */
} BatchResult;

/* Errors of one row, recorded; the rest (cancel, shutdown, deadlock, I/O, internal) end the batch. */
static bool
row_error(const ErrorData *e)
{
	int			class = ERRCODE_TO_CATEGORY(e->sqlerrcode);

	return e->elevel == ERROR &&
		class != ERRCODE_TO_CATEGORY(ERRCODE_T_R_SERIALIZATION_FAILURE) &&
		class != ERRCODE_TO_CATEGORY(ERRCODE_ADMIN_SHUTDOWN) &&
		class != ERRCODE_TO_CATEGORY(ERRCODE_IO_ERROR) &&
		class != ERRCODE_TO_CATEGORY(ERRCODE_INTERNAL_ERROR);
}

/*
 * Run fn(arg) in a subtransaction.  True if it succeeded; otherwise a row
 * error is stored in r, and anything else is thrown again.
 */
static bool
in_subxact(void (*fn) (void *), void *arg, BatchRow *r)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	bool		ok = false;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		ok = true;
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		if (!row_error(e) || r == NULL)
			ReThrowError(e);
		r->failed = true;
		strlcpy(r->sqlstate, unpack_sql_state(e->sqlerrcode), sizeof(r->sqlstate));
		r->message = pstrdup(e->message ? e->message : "");
		FreeErrorData(e);
	}
	PG_END_TRY();
	return ok;
}

typedef struct TranslateArgs
{
	CachedModel *cm;
	const char *model;
	CallOptions *o;
	int			n;
	text	  **in;
	text	  **out;
} TranslateArgs;

static void
translate_fn(void *p)
{
	TranslateArgs *a = p;

	for (int i = 0; i < a->n; i++)
		if (a->in[i])
			CheckInputSize(PointerGetDatum(a->in[i]));
	TranslateDocuments(a->cm, a->model, a->n, a->in, a->o, a->out);
}

typedef struct WriteArgs
{
	SPIPlanPtr	plan;
	Datum	   *values;
	char	   *nulls;
	uint64		processed;
} WriteArgs;

static void
write_fn(void *p)
{
	WriteArgs  *a = p;
	int			ret = SPI_execute_plan(a->plan, a->values, a->nulls, false, 0);

	if (ret != SPI_OK_UPDATE)
		elog(ERROR, "could not write the translation: %s", SPI_result_code_string(ret));
	a->processed = SPI_processed;
}

/* WHERE clause matching the key in parameter $1 (a JSON array as text), alias t */
static char *
key_match_sql(const JobRow *job)
{
	StringInfoData b;

	initStringInfo(&b);
	for (int i = 0; i < job->nkeys; i++)
	{
		AttrNumber	att = get_attnum(job->relid, job->keys[i]);

		if (att == InvalidAttrNumber)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("key column \"%s\" of table \"%s\" does not exist", job->keys[i],
							get_rel_name(job->relid))));
		appendStringInfo(&b, "%st.%s = ($1::pg_catalog.jsonb OPERATOR(pg_catalog.->>) %d)::%s",
						 i ? " AND " : "", quote_identifier(job->keys[i]), i,
						 format_type_be_qualified(get_atttype(job->relid, att)));
	}
	return b.data;
}

static char *
table_sql(const JobRow *job)
{
	char	   *rel = get_rel_name(job->relid);

	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the table of job " INT64_FORMAT " was dropped", job->id)));
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(job->relid)), rel);
}

/* Wait until no transaction that changes the job row is in progress. */
static void
wait_job_writers(int64 job)
{
	LOCKTAG		tag;

	JobLockTag(&tag, MyDatabaseId, job, 0);
	(void) LockAcquire(&tag, ShareLock, false, false);
	LockRelease(&tag, ShareLock, false);
}

static BatchResult
run_batch(const JobWorkerArgs *a, TimestampTz *idle_since)
{
	JobRow		job;
	Oid			t2[2] = {INT8OID, INT4OID};
	Datum		v2[2];
	BatchRow   *rows;
	int			n = 0;
	TimestampTz started = GetCurrentTimestamp();
	int64		done = 0,
				failed = 0;
	SPIPlanPtr	read_plan,
				write_plan;
	char	   *tbl;
	char	   *match;

	wait_job_writers(a->job);
	{
		Oid			owner;

		/* the extension dropped (its tables with it), or not yet updated to 0.5.0 */
		if (!OidIsValid(get_extension_oid("transformer", true)) ||
			!OidIsValid(get_relname_relid("transformer_job", ExtensionSchemaAndOwner(&owner))))
			return BATCH_EXIT;
	}
	if (!ReadJob(a->job, &job))
		return BATCH_EXIT;		/* deleted, or its declaration rolled back */
	if (strcmp(job.state, "queued") != 0 && strcmp(job.state, "running") != 0 &&
		strcmp(job.state, "syncing") != 0)
		return BATCH_EXIT;		/* paused, cancelled, failed or done */
	if (a->worker > job.workers)
		return BATCH_EXIT;
	if (strcmp(job.state, "queued") == 0)
	{
		Oid			t[1] = {INT8OID};
		Datum		v[1] = {Int64GetDatum(a->job)};

		JobExec(psprintf("UPDATE %s SET state = 'running', started_at = coalesce(started_at, pg_catalog.now()), "
						  "waiting = NULL WHERE id = $1 AND state = 'queued'", JobTable("transformer_job")),
				 1, t, v, NULL, SPI_OK_UPDATE);
	}

	/* claim a batch */
	v2[0] = Int64GetDatum(a->job);
	v2[1] = Int32GetDatum(job.batch_size);
	JobExec(psprintf("DELETE FROM %1$s WHERE id = ANY (ARRAY(SELECT id FROM %1$s WHERE job = $1 ORDER BY id "
					  "LIMIT $2 FOR UPDATE SKIP LOCKED)) RETURNING key::text",
					  JobTable("transformer_job_queue")), 2, t2, v2, NULL, SPI_OK_DELETE_RETURNING);
	rows = palloc0(sizeof(BatchRow) * (SPI_processed + 1));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *k = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		bool		dup = false;

		for (int j = 0; j < n && !dup; j++)
			dup = strcmp(rows[j].key, k) == 0;
		if (!dup)
			rows[n++].key = k;
	}

	/*
	 * Worker 1 starts its missing siblings (and says in the job row which
	 * wait for a slot) when it starts, and again on a full batch (a bulk
	 * load while syncing), at most every 5 s; they leave once the queue is
	 * empty.
	 */
	if (a->worker == 1 && (first_batch || (SPI_processed == (uint64) job.batch_size && job.workers > 1)))
	{
		static TimestampTz next_launch = 0;

		first_batch = false;
		if (GetCurrentTimestamp() >= next_launch)
		{
			SetJobWaiting(a->job, LaunchJobWorkers(a->job, job.owner, job.workers), job.workers);
			next_launch = GetCurrentTimestamp() + 5 * USECS_PER_SEC;
		}
	}

	if (n == 0)
	{
		Oid			t[1] = {INT8OID};
		Datum		v[1] = {Int64GetDatum(a->job)};

		/* the backlog is empty once no row is queued, locked by others or not */
		JobExec(psprintf("UPDATE %s j SET state = CASE WHEN keep_in_sync THEN 'syncing' ELSE 'done' END, "
						  "finished_at = CASE WHEN keep_in_sync THEN NULL ELSE pg_catalog.now() END "
						  "WHERE id = $1 AND state IN ('running', 'syncing') AND state <> "
						  "CASE WHEN keep_in_sync THEN 'syncing' ELSE 'done' END "
						  "AND NOT EXISTS (SELECT FROM %s q WHERE q.job = $1)",
						  JobTable("transformer_job"), JobTable("transformer_job_queue")),
				 1, t, v, NULL, SPI_OK_UPDATE);
		if (!job.keep_in_sync || a->worker > 1)
		{
			/* others' batches may requeue stale rows: worker 1 stays while any are locked */
			if (a->worker > 1 || SPI_processed > 0)
				return BATCH_EXIT;
			JobExec(psprintf("SELECT 1 FROM %s WHERE job = $1 LIMIT 1", JobTable("transformer_job_queue")),
					 1, t, v, NULL, SPI_OK_SELECT);
			if (SPI_processed == 0)
				return BATCH_EXIT;
		}
		return BATCH_IDLE;
	}
	*idle_since = 0;

	/* read the sources, as the job's owner */
	tbl = table_sql(&job);
	match = key_match_sql(&job);
	{
		Oid			t[1] = {TEXTOID};

		read_plan = SPI_prepare(psprintf("SELECT t.%s::pg_catalog.text FROM %s t WHERE %s",
										 quote_identifier(job.source), tbl, match), 1, t);
		if (read_plan == NULL)
			elog(ERROR, "could not prepare the read of job " INT64_FORMAT ": %s", a->job,
				 SPI_result_code_string(SPI_result));
	}
	for (int i = 0; i < n; i++)
	{
		Datum		v[1] = {CStringGetTextDatum(rows[i].key)};
		bool		isnull;

		/*
		 * A fresh snapshot (read_only false): the transaction's first one is
		 * older than the claim, and would miss rows inserted or changed
		 * between them, whose keys the claim took.
		 */
		if (SPI_execute_plan(read_plan, v, NULL, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not read a row of job " INT64_FORMAT, a->job);
		rows[i].exists = SPI_processed > 0;
		if (rows[i].exists)
		{
			Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

			rows[i].source = isnull ? NULL : DatumGetTextPCopy(d);
		}
	}

	/* translate them together; if that fails, one by one to find the rows at fault */
	{
		CachedModel *cm = GetModel(job.model);
		CallOptions o;
		TranslateArgs ta;
		text	  **in = palloc0(sizeof(text *) * (n + 1));
		text	  **out = palloc0(sizeof(text *) * (n + 1));
		int			m = 0;
		int		   *idx = palloc(sizeof(int) * (n + 1));

		memset(&o, 0, sizeof(o));
		if (job.beam > 0)
		{
			o.given[OPT_BEAM_SIZE] = true;
			o.value[OPT_BEAM_SIZE] = Int32GetDatum(job.beam);
		}
		for (int i = 0; i < n; i++)
			if (rows[i].exists && rows[i].source)
			{
				idx[m] = i;
				in[m++] = rows[i].source;
			}
		ta.cm = cm;
		ta.model = job.model;
		ta.o = &o;
		ta.n = m;
		ta.in = in;
		ta.out = out;
		pgstat_report_activity(STATE_RUNNING, psprintf("translating %d rows", m));
		if (m > 0 && !in_subxact(translate_fn, &ta, &(BatchRow) {0}))
		{
			for (int j = 0; j < m; j++)
			{
				TranslateArgs one = ta;

				CHECK_FOR_INTERRUPTS();
				one.n = 1;
				one.in = &in[j];
				one.out = &out[j];
				out[j] = NULL;
				(void) in_subxact(translate_fn, &one, &rows[idx[j]]);
			}
		}
		for (int j = 0; j < m; j++)
			rows[idx[j]].out = out[j];
	}

	/* write each row whose source is still the one translated */
	{
		Oid			t[3] = {TEXTOID, TEXTOID, TEXTOID};

		write_plan = SPI_prepare(psprintf("UPDATE %s t SET %s = $2 WHERE %s AND t.%s::pg_catalog.text IS NOT DISTINCT FROM $3",
										  tbl, quote_identifier(job.target), match, quote_identifier(job.source)), 3, t);
		if (write_plan == NULL)
			elog(ERROR, "could not prepare the write of job " INT64_FORMAT ": %s", a->job,
				 SPI_result_code_string(SPI_result));
	}
	pgstat_report_activity(STATE_RUNNING, psprintf("writing %d rows", n));
	for (int i = 0; i < n; i++)
	{
		WriteArgs	wa;
		Datum		v[3];
		char		nulls[3] = {' ', ' ', ' '};

		if (!rows[i].exists)
			continue;			/* deleted meanwhile */
		if (!rows[i].failed)
		{
			v[0] = CStringGetTextDatum(rows[i].key);
			v[1] = rows[i].out ? PointerGetDatum(rows[i].out) : (Datum) 0;
			nulls[1] = rows[i].out ? ' ' : 'n';
			v[2] = rows[i].source ? PointerGetDatum(rows[i].source) : (Datum) 0;
			nulls[2] = rows[i].source ? ' ' : 'n';
			wa.plan = write_plan;
			wa.values = v;
			wa.nulls = nulls;
			wa.processed = 0;
			if (in_subxact(write_fn, &wa, &rows[i]))
			{
				if (wa.processed > 0)
					done++;
				else if (!job.keep_in_sync)
				{
					/* the source changed under us, and no trigger queues it again: we do */
					Oid			t[2] = {INT8OID, TEXTOID};
					Datum		qv[2] = {Int64GetDatum(a->job), CStringGetTextDatum(rows[i].key)};

					JobExec(psprintf("INSERT INTO %s (job, key) VALUES ($1, $2::jsonb)", JobTable("transformer_job_queue")),
							 2, t, qv, NULL, SPI_OK_INSERT);
				}
				continue;
			}
		}
		/* a row that failed: kept aside with PostgreSQL's SQLSTATE and message */
		{
			Oid			t[5] = {INT8OID, TEXTOID, TEXTOID, TEXTOID, OIDOID};
			Datum		ev[5];

			ev[0] = Int64GetDatum(a->job);
			ev[1] = CStringGetTextDatum(rows[i].key);
			ev[2] = CStringGetTextDatum(rows[i].sqlstate);
			ev[3] = CStringGetTextDatum(rows[i].message);
			ev[4] = ObjectIdGetDatum(job.owner);
			JobExec(psprintf("INSERT INTO %s (job, key, sqlstate, message, owner) VALUES ($1, $2::jsonb, $3, $4, $5::regrole)",
							  JobTable("transformer_job_errors")), 5, t, ev, NULL, SPI_OK_INSERT);
			failed++;
		}
	}

	/* progress */
	{
		Oid			t[5] = {INT8OID, INT4OID, INT8OID, INT8OID, TIMESTAMPTZOID};
		Datum		v[5];

		v[0] = Int64GetDatum(a->job);
		v[1] = Int32GetDatum(a->worker);
		v[2] = Int64GetDatum(done);
		v[3] = Int64GetDatum(failed);
		v[4] = TimestampTzGetDatum(started);
		JobExec(psprintf("INSERT INTO %s AS p (job, worker, rows_done, rows_failed, first_at, last_at) "
						  "VALUES ($1, $2, $3, $4, $5, pg_catalog.clock_timestamp()) ON CONFLICT (job, worker) DO UPDATE "
						  "SET rows_done = p.rows_done + $3, rows_failed = p.rows_failed + $4, "
						  "first_at = coalesce(p.first_at, $5), last_at = pg_catalog.clock_timestamp()",
						  JobTable("transformer_job_progress")), 5, t, v, NULL, SPI_OK_INSERT);
	}
	return BATCH_DID_WORK;
}

/* ------------------------------------------------------------ the worker */


/* The job failed as a whole: say why in its row, and leave (an error here too: just leave). */
static void
fail_job(int64 job, const char *message)
{
	Oid			t[2] = {INT8OID, TEXTOID};
	Datum		v[2] = {Int64GetDatum(job), CStringGetTextDatum(message)};

	PG_TRY();
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		PushActiveSnapshot(GetTransactionSnapshot());
		JobExec(psprintf("UPDATE %s SET state = 'failed', last_error = $2, finished_at = pg_catalog.now() "
						  "WHERE id = $1 AND state IN ('queued', 'running', 'syncing')", JobTable("transformer_job")),
				 2, t, v, NULL, SPI_OK_UPDATE);
		SPI_finish();
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
	}
	PG_END_TRY();
}

/*
 * Whether the database still has a directory: a worker restarted after its
 * database was dropped would otherwise fail to connect, and be restarted,
 * forever.
 */
static bool
database_on_disk(Oid db)
{
	struct stat st;
	DIR		   *dir;
	struct dirent *de;
	bool		found;
	char	   *path = GetDatabasePath(db, DEFAULTTABLESPACE_OID);

	found = stat(path, &st) == 0;
	if (found || (dir = AllocateDir("pg_tblspc")) == NULL)
		return found;
	while (!found && (de = ReadDir(dir, "pg_tblspc")) != NULL)
	{
		char		p[MAXPGPATH];

		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "pg_tblspc/%s/%s/%u", de->d_name, TABLESPACE_VERSION_DIRECTORY, db);
		found = stat(p, &st) == 0;
	}
	FreeDir(dir);
	return found;
}

/*
 * Failed connections of each worker since it last connected: a worker
 * whose role was dropped or lost LOGIN fails to connect, and its restart
 * policy would start it again every second, forever.  After a few tries it
 * leaves instead (wait_for_job() and the next resume try again).
 */
#define MAX_CONNECT_FAILURES 5
#define START_SLOTS 128
typedef struct WorkerStarts
{
	slock_t		mutex;
	struct
	{
		Oid			db;
		int64		job;
		int			worker;
		int			failures;
	}			slot[START_SLOTS];
} WorkerStarts;

static WorkerStarts *
worker_starts(void)
{
	static WorkerStarts *shared = NULL;
	bool		found;

	if (shared == NULL)
	{
		LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
		shared = ShmemInitStruct("transformer job worker starts", sizeof(WorkerStarts), &found);
		if (!found)
		{
			SpinLockInit(&shared->mutex);
			memset(shared->slot, 0, sizeof(shared->slot));
		}
		LWLockRelease(AddinShmemInitLock);
	}
	return shared;
}

/* Count a connection attempt (connected = false), or reset after success; the failures so far. */
static int
count_start(const JobWorkerArgs *a, bool connected)
{
	WorkerStarts *w = worker_starts();
	int			found = -1,
				empty = -1,
				failures = 0;

	SpinLockAcquire(&w->mutex);
	for (int i = 0; i < START_SLOTS; i++)
	{
		if (w->slot[i].job == a->job && w->slot[i].db == a->dboid && w->slot[i].worker == a->worker)
			found = i;
		else if (w->slot[i].failures == 0 && empty < 0)
			empty = i;
	}
	if (found < 0 && !connected && empty >= 0)
	{
		found = empty;
		w->slot[found].db = a->dboid;
		w->slot[found].job = a->job;
		w->slot[found].worker = a->worker;
		w->slot[found].failures = 0;
	}
	if (found >= 0)
	{
		if (connected)
			w->slot[found].failures = 0;
		else
			failures = w->slot[found].failures++;
	}
	SpinLockRelease(&w->mutex);
	return failures;
}

void
transformer_job_main(Datum main_arg)
{
	JobWorkerArgs a;
	LOCKTAG		tag;
	char		name[BGW_MAXLEN];
	TimestampTz idle_since = 0;
	int			transient = 0;
	MemoryContext batch_cxt;

	memcpy(&a, MyBgworkerEntry->bgw_extra, sizeof(a));
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	if (!database_on_disk(a.dboid))
		proc_exit(0);
	if (count_start(&a, false) >= MAX_CONNECT_FAILURES)
	{
		(void) count_start(&a, true);
		ereport(LOG,
				(errmsg("transformer job " INT64_FORMAT " worker %d: gave up after %d failed connections",
						a.job, a.worker, MAX_CONNECT_FAILURES)));
		proc_exit(0);
	}
	BackgroundWorkerInitializeConnectionByOid(a.dboid, a.owner, 0);
	(void) count_start(&a, true);
	am_job_worker = true;
	my_job = a.job;
	my_worker = a.worker;

	snprintf(name, sizeof(name), "transformer job " INT64_FORMAT " worker %d", a.job, a.worker);
	SetConfigOption("application_name", name, PGC_USERSET, PGC_S_SESSION);
	pgstat_report_appname(name);

	/* one process per job and slot: a duplicate (a resumer's, a restart's) leaves */
	JobLockTag(&tag, a.dboid, a.job, a.worker);
	if (LockAcquire(&tag, ExclusiveLock, true, true) == LOCKACQUIRE_NOT_AVAIL)
		proc_exit(0);

	batch_cxt = AllocSetContextCreate(TopMemoryContext, "transformer job batch", ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		BatchResult r = BATCH_EXIT;
		MemoryContext old;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		old = MemoryContextSwitchTo(batch_cxt);
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PG_TRY();
		{
			if (SPI_connect() != SPI_OK_CONNECT)
				elog(ERROR, "SPI_connect failed");
			PushActiveSnapshot(GetTransactionSnapshot());
			pgstat_report_activity(STATE_RUNNING, "claiming a batch");
			r = run_batch(&a, &idle_since);
			SPI_finish();
			PopActiveSnapshot();
			CommitTransactionCommand();
			transient = 0;
		}
		PG_CATCH();
		{
			ErrorData  *e;
			int			class;

			MemoryContextSwitchTo(batch_cxt);
			e = CopyErrorData();
			EmitErrorReport();
			FlushErrorState();
			AbortCurrentTransaction();
			class = ERRCODE_TO_CATEGORY(e->sqlerrcode);
			if ((class == ERRCODE_TO_CATEGORY(ERRCODE_T_R_SERIALIZATION_FAILURE) ||
				 e->sqlerrcode == ERRCODE_QUERY_CANCELED || e->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE) &&
				++transient < 10)
				r = BATCH_IDLE; /* try the batch again */
			else
			{
				fail_job(a.job, e->message ? e->message : "unknown error");
				r = BATCH_EXIT;
			}
		}
		PG_END_TRY();
		MemoryContextSwitchTo(old);
		MemoryContextReset(batch_cxt);
		pgstat_report_activity(STATE_IDLE, NULL);
		pgstat_report_stat(true);
		if (r == BATCH_EXIT)
			break;
		if (r == BATCH_IDLE)
		{
			RetryWaitingJobs(a.dboid);	/* another job of this database may wait for a slot */
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 job_naptime_ms, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
	}
	proc_exit(0);
}

/*
 * The resumer: connected to one database as the bootstrap superuser (as
 * autovacuum is), it only reads the job table and registers each
 * unfinished job's workers, which run as the jobs' owners.
 */
void
transformer_job_resumer(Datum main_arg)
{
	Oid			db = DatumGetObjectId(main_arg);

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(db, InvalidOid, 0);
	am_job_worker = true;
	(void) ClaimResume(db);

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (OidIsValid(get_extension_oid("transformer", true)))
	{
		Oid			owner;
		Oid			nsp = ExtensionSchemaAndOwner(&owner);

		if (OidIsValid(get_relname_relid("transformer_job", nsp)))
		{
			int			level;

			if (SPI_connect() != SPI_OK_CONNECT)
				elog(ERROR, "SPI_connect failed");
			level = ExtSpiConnect();
			if (SPI_execute(psprintf("SELECT id, owner::oid, workers FROM %s WHERE state IN ('queued', 'running', 'syncing') "
									 "ORDER BY id", JobTable("transformer_job")), true, 0) != SPI_OK_SELECT)
				elog(ERROR, "could not read the jobs");
			for (uint64 i = 0; i < SPI_processed; i++)
			{
				bool		isnull;
				HeapTuple	tup = SPI_tuptable->vals[i];
				TupleDesc	desc = SPI_tuptable->tupdesc;
				int64		id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
				Oid			role = DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull));
				int			workers = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));
				int			missing = LaunchJobWorkers(id, role, workers);

				SetJobWaiting(id, missing, workers);
				if (missing > 0)
					ereport(LOG,
							(errmsg("transformer job " INT64_FORMAT ": %d of %d workers found no free background worker slot",
									id, missing, workers)));
			}
			ExtSpiFinish(level);
			SPI_finish();
		}
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	proc_exit(0);
}

/*
 * The launcher (shared_preload_libraries only): once the server accepts
 * connections, a resumer for every database that allows them, one after
 * the other; then it stays, and every 5 s starts the jobs that waited for
 * a free slot.
 */
void
transformer_job_launcher(Datum main_arg)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	List	   *dbs = NIL;
	ListCell   *lc;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database d = (Form_pg_database) GETSTRUCT(tup);

		if (d->datallowconn && !d->datistemplate)
			dbs = lappend_oid(dbs, d->oid);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();

	foreach(lc, dbs)
	{
		Oid			db = lfirst_oid(lc);

		if (ClaimResume(db))
			RunResumer(db);
	}

	/* then, as long as the server runs: the databases whose jobs wait for a slot */
	for (;;)
	{
		Oid			db;

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 5000, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		while ((db = NextWaitingDatabase()) != InvalidOid)
			RunResumer(db);
	}
}
