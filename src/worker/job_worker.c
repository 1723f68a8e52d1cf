/*
 * job_worker.c
 *		A worker of a background job, started by its database's supervisor
 *		(job_supervisor.c) while the job has rows queued.  It connects as
 *		the role that declared the job, does batches until the queue is
 *		empty (then lingers a moment for more), and leaves; it also leaves
 *		when its role is over its fair share while another role waits.
 *
 *		A batch is one transaction: it takes chunks of keys off the queue
 *		(FOR UPDATE SKIP LOCKED), reads their rows, translates or embeds
 *		them together, writes each row only if its source and target are
 *		still the ones it read, records the rows that fail, and commits.
 *		Killed at any point, the transaction aborts and the keys are back
 *		in the queue.
 *
 *		The table is read and written as its owner, inside a
 *		security-restricted operation, as VACUUM and REFRESH MATERIALIZED
 *		VIEW do: code that others attach to the table (triggers, defaults,
 *		index expressions, policies) never runs with the declaring role's
 *		rights.  The declaring role's own rights on the columns are checked
 *		at every batch, so a revoked privilege stops the job.
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "embed.h"
#include "input_limit.h"
#include "job_batch.h"
#include "job_train.h"
#include "jobs.h"
#include "translate.h"

PGDLLEXPORT void transformer_job_main(Datum main_arg);

/* What one call of the model does: translate() or embed() of n texts. */
typedef struct ModelArgs
{
	const JobRow *job;
	CachedModel *cm;
	CallOptions *o;
	int			n;
	text	  **in;
	Datum	   *out;
} ModelArgs;

static void
model_fn(void *p)
{
	ModelArgs  *a = p;

	for (int i = 0; i < a->n; i++)
		CheckInputSize(PointerGetDatum(a->in[i]));
	if (a->job->embed)
	{
		ArrayType **v = palloc0(sizeof(ArrayType *) * (a->n + 1));

		EmbedTexts(a->cm, a->job->model, a->n, a->in, v);
		for (int i = 0; i < a->n; i++)
			a->out[i] = PointerGetDatum(v[i]);
	}
	else
	{
		text	  **t = palloc0(sizeof(text *) * (a->n + 1));

		TranslateDocuments(a->cm, a->job->model, a->n, a->in, a->o, t);
		for (int i = 0; i < a->n; i++)
			a->out[i] = PointerGetDatum(t[i]);
	}
}

/* The job's options as translate() takes them; lang: this group's source language (NULL: the job's). */
static void
job_options(const JobRow *job, const char *lang, CallOptions *o)
{
	memset(o, 0, sizeof(*o));
	if (job->beam > 0)
	{
		o->given[OPT_BEAM_SIZE] = true;
		o->value[OPT_BEAM_SIZE] = Int32GetDatum(job->beam);
	}
	if (job->format)
	{
		o->given[OPT_FORMAT] = true;
		o->value[OPT_FORMAT] = CStringGetTextDatum(job->format);
	}
	if (job->keep)
	{
		o->given[OPT_KEEP] = true;
		o->value[OPT_KEEP] = job->keep;
	}
	if (lang || job->source_lang)
	{
		o->given[OPT_SOURCE_LANG] = true;
		o->value[OPT_SOURCE_LANG] = CStringGetTextDatum(lang ? lang : job->source_lang);
	}
	if (job->target_lang)
	{
		o->given[OPT_TARGET_LANG] = true;
		o->value[OPT_TARGET_LANG] = CStringGetTextDatum(job->target_lang);
	}
}

/* Rows by source language (NULL first), then by the length of their source */
static const BatchRow *sort_rows;

static int
by_language_and_length(const void *a, const void *b)
{
	const BatchRow *x = &sort_rows[*(const int *) a];
	const BatchRow *y = &sort_rows[*(const int *) b];
	int			c;

	if ((x->lang == NULL) != (y->lang == NULL))
		return x->lang == NULL ? -1 : 1;
	if (x->lang && (c = strcmp(x->lang, y->lang)) != 0)
		return c;
	c = (int) (VARSIZE_ANY_EXHDR(x->source) > VARSIZE_ANY_EXHDR(y->source)) -
		(int) (VARSIZE_ANY_EXHDR(x->source) < VARSIZE_ANY_EXHDR(y->source));
	return c != 0 ? c : (*(const int *) a > *(const int *) b) - (*(const int *) a < *(const int *) b);
}

/*
 * Translate or embed the rows that have a source, batch_size at a time, a
 * batch of one source language and of sources of about the same length (a
 * beam search of a batch runs as long as its longest sentence; the
 * packed encoder pays no padding either way); if a batch fails, its rows
 * one by one, to find the rows at fault.
 */
static void
run_model(const JobRow *job, int n, BatchRow *rows)
{
	CachedModel *cm = job->embed ? GetEmbeddingModel(job->model) : GetModel(job->model);
	int		   *order = palloc(sizeof(int) * (n + 1));
	text	  **in = palloc0(sizeof(text *) * (n + 1));
	Datum	   *out = palloc0(sizeof(Datum) * (n + 1));
	int			count = 0;

	for (int i = 0; i < n; i++)
		if (rows[i].exists && rows[i].source)
			order[count++] = i;
	sort_rows = rows;
	qsort(order, count, sizeof(int), by_language_and_length);
	for (int first = 0; first < count;)
	{
		const char *lang = rows[order[first]].lang;
		CallOptions o;
		ModelArgs	ma;
		int			m = 0;
		int		   *idx = order + first;

		while (first + m < count && m < job->batch_size &&
			   ((lang == NULL && rows[idx[m]].lang == NULL) ||
				(lang && rows[idx[m]].lang && strcmp(lang, rows[idx[m]].lang) == 0)))
		{
			in[m] = rows[idx[m]].source;
			m++;
		}
		first += m;
		job_options(job, lang, &o);
		ma.job = job;
		ma.cm = cm;
		ma.o = &o;
		ma.n = m;
		ma.in = in;
		ma.out = out;
		pgstat_report_activity(STATE_RUNNING, psprintf("%s %d rows", job->embed ? "embedding" : "translating", m));
		if (!BatchInSubxact(model_fn, &ma, &(BatchRow) {0}))
		{
			for (int j = 0; j < m; j++)
			{
				ModelArgs	one = ma;

				CHECK_FOR_INTERRUPTS();
				one.n = 1;
				one.in = &in[j];
				one.out = &out[j];
				out[j] = (Datum) 0;
				(void) BatchInSubxact(model_fn, &one, &rows[idx[j]]);
			}
		}
		for (int j = 0; j < m; j++)
			rows[idx[j]].out = out[j];
	}
}

static BatchResult
run_batch(const JobWorkerArgs *a)
{
	JobRow		job;
	BatchRow   *rows;
	int			n;
	TimestampTz started = GetCurrentTimestamp();
	int64		done,
				failed = 0;
	char	   *tbl;
	List	   *stale = NIL;

	BatchWaitWriters(a->job);
	{
		Oid			owner;

		/* the extension dropped (its tables with it), or not yet updated */
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

	/* the declaring role's rights, now (a revoked privilege stops the job) */
	CheckJobPrivileges(job.relid, GetUserId(), job.source, job.target, job.lang_column, job.nkeys, job.keys);

	n = BatchClaimKeys(&job, &rows);
	if (n == 0)
	{
		BatchSettleState(a->job);
		return BATCH_IDLE;
	}
	if (strcmp(job.state, "queued") == 0)
	{
		Oid			t[1] = {INT8OID};
		Datum		v[1] = {Int64GetDatum(a->job)};

		JobExec(psprintf("UPDATE %s SET state = 'running', started_at = coalesce(started_at, pg_catalog.now()), "
						 "waiting = NULL WHERE id = $1 AND state = 'queued'", JobTable("transformer_job")),
				1, t, v, NULL, SPI_OK_UPDATE);
	}

	tbl = BatchTableSql(&job);
	BatchReadRows(&job, tbl, n, rows);
	run_model(&job, n, rows);
	done = BatchWriteRows(&job, tbl, n, rows, &stale);
	BatchRequeueStale(&job, tbl, stale);

	/* the rows that failed: kept aside with PostgreSQL's SQLSTATE and message */
	for (int i = 0; i < n; i++)
	{
		Oid			t[5] = {INT8OID, TEXTOID, TEXTOID, TEXTOID, OIDOID};
		Datum		ev[5];

		if (!rows[i].exists || !rows[i].failed)
			continue;
		ev[0] = Int64GetDatum(a->job);
		ev[1] = CStringGetTextDatum(rows[i].key);
		ev[2] = CStringGetTextDatum(rows[i].sqlstate);
		ev[3] = CStringGetTextDatum(rows[i].message);
		ev[4] = ObjectIdGetDatum(job.owner);
		JobExec(psprintf("INSERT INTO %s (job, key, sqlstate, message, owner) VALUES ($1, $2::jsonb, $3, $4, $5::regrole)",
						 JobTable("transformer_job_errors")), 5, t, ev, NULL, SPI_OK_INSERT);
		failed++;
	}

	/* progress, and the batch for the rate over the last minute */
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
		JobExec(psprintf("INSERT INTO %s (job, worker, started_at, finished_at, rows) "
						 "VALUES ($1, $2, $5, pg_catalog.clock_timestamp(), ($3 + $4)::integer)",
						 JobTable("transformer_job_batches")), 5, t, v, NULL, SPI_OK_INSERT);
	}
	return BATCH_DID_WORK;
}

/* ------------------------------------------------------------ the worker */

/* How long a worker waits for more rows once its queue is empty, before it leaves */
#define LINGER_MS 1000

void
transformer_job_main(Datum main_arg)
{
	JobWorkerArgs a;
	LOCKTAG		tag;
	char		name[BGW_MAXLEN];
	int			transient = 0;
	int			idle_ms = 0;
	MemoryContext batch_cxt;

	memcpy(&a, MyBgworkerEntry->bgw_extra, sizeof(a));
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(a.dboid, a.owner, 0);
	am_job_worker = true;
	my_job = a.job;
	my_worker = a.worker;

	/*
	 * A batch lost in a crash is done again: its queue rows come back with
	 * it, since one transaction holds both.  So a commit need not wait for
	 * the disk.
	 */
	SetConfigOption("synchronous_commit", "off", PGC_USERSET, PGC_S_SESSION);

	snprintf(name, sizeof(name), "transformer job " INT64_FORMAT " worker %d", a.job, a.worker);
	SetConfigOption("application_name", name, PGC_USERSET, PGC_S_SESSION);
	pgstat_report_appname(name);

	/* one process per job and slot: a duplicate leaves */
	JobLockTag(&tag, a.dboid, a.job, a.worker);
	if (LockAcquire(&tag, ExclusiveLock, true, true) == LOCKACQUIRE_NOT_AVAIL)
		proc_exit(0);

	/* a fine_tune() job: its training run (job_train.c) */
	if (JobIsFineTune(a.job))
	{
		FineTuneWorker(&a);
		proc_exit(0);
	}

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
			r = run_batch(&a);
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
				FailJobNow(a.job, e->message ? e->message : "unknown error");
				r = BATCH_EXIT;
			}
		}
		PG_END_TRY();
		MemoryContextSwitchTo(old);
		MemoryContextReset(batch_cxt);
		pgstat_report_activity(STATE_IDLE, NULL);
		pgstat_report_stat(false);
		if (r == BATCH_EXIT)
			break;
		if (r == BATCH_DID_WORK)
		{
			idle_ms = 0;
			/* another role waits and ours is over its share: make room */
			if (RoleOverShare(a.owner))
				break;
			continue;
		}
		if (idle_ms >= LINGER_MS)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(job_naptime_ms, 100), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		idle_ms += Min(job_naptime_ms, 100);
	}
	proc_exit(0);
}
