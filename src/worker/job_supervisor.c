/*
 * job_supervisor.c
 *		The supervisor of a database's background jobs, and the launcher
 *		that starts the supervisors at server start under
 *		shared_preload_libraries (as pg_prewarm's autoprewarm does).
 *
 *		One supervisor per database with unfinished jobs, connected as the
 *		bootstrap superuser (as autovacuum is) but touching only the job
 *		tables, as the extension's owner.  Every job_naptime, or as soon as
 *		a transaction queues rows, it looks at each unfinished job:
 *		- a job whose table, columns, model or role is gone, or whose role
 *		  lost a privilege, fails with the reason (its workers see it at
 *		  their next batch and leave);
 *		- a job with rows queued gets workers, up to its own number, the
 *		  cluster's cap (transformer.max_job_workers) and its role's fair
 *		  share; what it waits for is in transformer_job.waiting;
 *		- a job whose queue is empty and that no worker runs settles as
 *		  syncing or done.
 *		It leaves when the database has no unfinished job for a while.
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "catalog/pg_tablespace_d.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "common/relpath.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include <sys/stat.h>

#include "ext_tables.h"
#include "jobs.h"

PGDLLEXPORT void transformer_job_supervisor(Datum main_arg);
PGDLLEXPORT void transformer_job_launcher(Datum main_arg);

/* A supervisor leaves after this long without an unfinished job in its database */
#define SUPERVISOR_IDLE_MS 2000
/* batches older than this leave transformer_job_batches (the view's rate reads one minute) */
#define BATCHES_KEPT "2 minutes"

/* The workers this supervisor registered (their handles), by job and slot */
typedef struct Started
{
	int64		job;
	int			k;
	BackgroundWorkerHandle *handle;
} Started;

#define MAX_STARTED 256
static Started started[MAX_STARTED];
static int	nstarted = 0;

static Oid	my_db = InvalidOid;

/* Did the last look find a job short of workers?  (else it sleeps 4 naptimes) */
static bool busy = false;

/*
 * Whether the database still has a directory: a supervisor restarted
 * after its database was dropped would otherwise fail to connect, and be
 * restarted, forever.
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

/* Forget the handles of workers that stopped. */
static void
reap_started(void)
{
	for (int i = 0; i < nstarted; i++)
	{
		pid_t		pid;

		if (GetBackgroundWorkerPid(started[i].handle, &pid) == BGWH_STOPPED)
		{
			pfree(started[i].handle);
			started[i--] = started[--nstarted];
		}
	}
}

/* Is worker k of job running, or registered by us and not yet stopped? */
static bool
worker_alive(int64 job, int k)
{
	for (int i = 0; i < nstarted; i++)
		if (started[i].job == job && started[i].k == k)
		{
			pid_t		pid;

			if (GetBackgroundWorkerPid(started[i].handle, &pid) != BGWH_STOPPED)
				return true;
			pfree(started[i].handle);
			started[i] = started[--nstarted];
			break;
		}
	return JobWorkerRunning(my_db, job, k);
}

static bool
start_worker(int64 job, Oid role, int k)
{
	BackgroundWorker w;
	JobWorkerArgs args;
	BackgroundWorkerHandle *handle;

	if (nstarted == MAX_STARTED)
		return false;
	memset(&w, 0, sizeof(w));
	w.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	w.bgw_start_time = BgWorkerStart_RecoveryFinished;
	/* the supervisor starts workers again as long as rows are queued */
	w.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(w.bgw_library_name, "transformer", BGW_MAXLEN);
	strlcpy(w.bgw_function_name, "transformer_job_main", BGW_MAXLEN);
	snprintf(w.bgw_name, BGW_MAXLEN, "transformer job " INT64_FORMAT " worker %d", job, k);
	strlcpy(w.bgw_type, w.bgw_name, BGW_MAXLEN);
	args.dboid = my_db;
	args.owner = role;
	args.job = job;
	args.worker = k;
	StaticAssertStmt(sizeof(args) <= BGW_EXTRALEN, "job worker arguments too long");
	memcpy(w.bgw_extra, &args, sizeof(args));
	w.bgw_notify_pid = MyProcPid;
	{
		/* the handle outlives this transaction */
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
		bool		ok = RegisterDynamicBackgroundWorker(&w, &handle);

		MemoryContextSwitchTo(old);
		if (!ok)
			return false;
	}
	started[nstarted].job = job;
	started[nstarted].k = k;
	started[nstarted].handle = handle;
	nstarted++;
	return true;
}

/* Why a job cannot go on (NULL: it can): its table, columns, model, role, rights. */
static char *
job_problem(const JobRow *job, bool model_exists)
{
	HeapTuple	role;
	bool		can_login;
	int			code;

	if (!job->fine_tune && get_rel_name(job->relid) == NULL)
		return psprintf("the table of job " INT64_FORMAT " was dropped", job->id);
	if (!model_exists)
		return psprintf("model \"%s\" of job " INT64_FORMAT " was dropped", job->model, job->id);
	role = SearchSysCache1(AUTHOID, ObjectIdGetDatum(job->owner));
	if (!HeapTupleIsValid(role))
		return psprintf("the role that declared job " INT64_FORMAT " was dropped", job->id);
	can_login = ((Form_pg_authid) GETSTRUCT(role))->rolcanlogin || ((Form_pg_authid) GETSTRUCT(role))->rolsuper;
	ReleaseSysCache(role);
	if (!can_login)
		return psprintf("role \"%s\" can no longer log in, and the workers of job " INT64_FORMAT " connect as it",
						GetUserNameFromId(job->owner, false), job->id);
	if (job->fine_tune)
		return NULL;			/* its worker checks the rights on the model tables as it writes */
	return JobPrivilegeProblem(job->relid, job->owner, job->source, job->target, job->lang_column,
							   job->nkeys, job->keys, &code);
}

static void
fail_job_row(int64 id, const char *why)
{
	Oid			t[2] = {INT8OID, TEXTOID};
	Datum		v[2] = {Int64GetDatum(id), CStringGetTextDatum(why)};

	JobExec(psprintf("UPDATE %s SET state = 'failed', last_error = $2, finished_at = pg_catalog.now(), waiting = NULL "
					 "WHERE id = $1 AND state IN ('queued', 'running', 'syncing')", JobTable("transformer_job")),
			2, t, v, NULL, SPI_OK_UPDATE);
	ereport(LOG, (errmsg("transformer job " INT64_FORMAT " failed: %s", id, why)));
}

/* One look at the database's jobs; returns how many are unfinished. */
static int
supervise(void)
{
	static TimestampTz last_prune = 0;
	int			njobs;
	int64	   *ids;
	int		   *chunks;
	bool	   *model_ok;
	JobDemand  *demand;
	JobRow	   *jobs;
	int			nd = 0;
	int			unfinished = 0;

	/* a fine_tune() job wants its one worker while it is queued or running */
	JobExec(psprintf("SELECT j.id, CASE WHEN j.kind = 'fine_tune' THEN (j.state IN ('queued', 'running'))::integer "
					 "ELSE (SELECT count(*) FROM (SELECT FROM %s q WHERE q.job = j.id LIMIT 64) c)::integer END, "
					 "EXISTS (SELECT FROM %s m WHERE m.name = j.model) "
					 "FROM %s j WHERE j.state IN ('queued', 'running', 'syncing') ORDER BY j.id",
					 JobTable("transformer_job_queue"), JobTable("transformer_models"), JobTable("transformer_job")),
			0, NULL, NULL, NULL, SPI_OK_SELECT);
	njobs = (int) SPI_processed;
	ids = palloc(sizeof(int64) * (njobs + 1));
	chunks = palloc(sizeof(int) * (njobs + 1));
	model_ok = palloc(sizeof(bool) * (njobs + 1));
	for (int i = 0; i < njobs; i++)
	{
		bool		isnull;

		ids[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		chunks[i] = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
		model_ok[i] = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &isnull));
	}
	demand = palloc0(sizeof(JobDemand) * (njobs + 1));
	jobs = palloc0(sizeof(JobRow) * (njobs + 1));

	for (int i = 0; i < njobs; i++)
	{
		JobRow	   *job = &jobs[i];
		char	   *why;
		int			running = 0;

		CHECK_FOR_INTERRUPTS();
		if (!ReadJob(ids[i], job))
			continue;
		why = job_problem(job, model_ok[i]);
		if (why)
		{
			fail_job_row(job->id, why);
			continue;
		}
		unfinished++;
		for (int k = 1; k <= job->workers; k++)
			running += worker_alive(job->id, k) ? 1 : 0;
		demand[nd].job = job->id;
		demand[nd].role = job->owner;
		demand[nd].wanted = Min(job->workers, chunks[i]);
		demand[nd].running = running;
		nd++;
		if (!job->fine_tune && chunks[i] == 0 && running == 0 &&
			(strcmp(job->state, "queued") == 0 || strcmp(job->state, "running") == 0))
		{
			Oid			t[1] = {INT8OID};
			Datum		v[1] = {Int64GetDatum(job->id)};

			JobExec(psprintf("UPDATE %s j SET state = CASE WHEN keep_in_sync THEN 'syncing' ELSE 'done' END, "
							 "finished_at = CASE WHEN keep_in_sync THEN NULL ELSE pg_catalog.now() END, waiting = NULL "
							 "WHERE id = $1 AND state IN ('queued', 'running') "
							 "AND NOT EXISTS (SELECT FROM %s q WHERE q.job = $1)",
							 JobTable("transformer_job"), JobTable("transformer_job_queue")),
					1, t, v, NULL, SPI_OK_UPDATE);
		}
	}
	PostJobDemands(my_db, demand, nd);
	/* a job that wants more workers than it has: look again soon (a stopping worker sets our latch) */
	busy = false;
	for (int d = 0; d < nd; d++)
		busy |= demand[d].wanted > demand[d].running;

	/* workers for the jobs with rows queued, within the cap and the role's share */
	for (int d = 0; d < nd; d++)
	{
		JobDemand  *jd = &demand[d];
		const JobRow *job = NULL;
		int			missing = jd->wanted - jd->running;
		char	   *why = NULL;

		for (int i = 0; i < njobs && job == NULL; i++)
			if (jobs[i].id == jd->job)
				job = &jobs[i];
		if (missing > 0)
		{
			int			room = RoleHeadroom(jd->role);
			bool		no_slot = false;

			for (int k = 1; k <= job->workers && missing > 0 && room > 0; k++)
			{
				if (worker_alive(jd->job, k))
					continue;
				if (!start_worker(jd->job, jd->role, k))
				{
					no_slot = true;
					break;
				}
				CountJobWorker(my_db, jd->job, 1);
				missing--;
				room--;
			}
			if (missing > 0 && jd->running + (jd->wanted - jd->running - missing) == 0)
				why = no_slot ? psprintf("waiting for a free background worker slot (max_worker_processes is %d)",
										 max_worker_processes)
					: psprintf("waiting for a job worker: transformer.max_job_workers is %d, and other jobs' workers "
							   "hold their fair share", max_job_workers);
		}
		SetJobWaiting(jd->job, why);
	}

	if (TimestampDifferenceExceeds(last_prune, GetCurrentTimestamp(), 10000))
	{
		last_prune = GetCurrentTimestamp();
		JobExec(psprintf("DELETE FROM %s WHERE finished_at < pg_catalog.now() - interval '" BATCHES_KEPT "'",
						 JobTable("transformer_job_batches")), 0, NULL, NULL, NULL, SPI_OK_DELETE);
	}
	return unfinished;
}

static void
supervisor_exit(int code, Datum arg)
{
	PostJobDemands(my_db, NULL, 0);
	ReleaseSupervisor(my_db);
}

void
transformer_job_supervisor(Datum main_arg)
{
	int			idle_ms = 0;
	int			errors = 0;
	bool		released = false;
	MemoryContext cxt;

	my_db = DatumGetObjectId(main_arg);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	if (!database_on_disk(my_db))
		proc_exit(0);
	BackgroundWorkerInitializeConnectionByOid(my_db, InvalidOid, 0);
	am_job_worker = true;
	if (!ClaimSupervisor(my_db))
		proc_exit(0);			/* another one runs */
	MarkJobsQuiet(my_db, false);
	before_shmem_exit(supervisor_exit, (Datum) 0);
	pgstat_report_appname("transformer job supervisor");

	cxt = AllocSetContextCreate(TopMemoryContext, "transformer job supervisor", ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		int			unfinished = 0;
		bool		installed = false;
		MemoryContext old;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		reap_started();
		old = MemoryContextSwitchTo(cxt);
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PG_TRY();
		{
			Oid			owner;

			PushActiveSnapshot(GetTransactionSnapshot());
			pgstat_report_activity(STATE_RUNNING, "supervising jobs");
			installed = OidIsValid(get_extension_oid("transformer", true)) &&
				OidIsValid(get_relname_relid("transformer_job_batches", ExtensionSchemaAndOwner(&owner)));
			if (installed)
			{
				if (SPI_connect() != SPI_OK_CONNECT)
					elog(ERROR, "SPI_connect failed");
				unfinished = supervise();
				SPI_finish();
			}
			PopActiveSnapshot();
			CommitTransactionCommand();
			errors = 0;
		}
		PG_CATCH();
		{
			MemoryContextSwitchTo(cxt);
			EmitErrorReport();
			FlushErrorState();
			AbortCurrentTransaction();
			if (++errors >= 10)
				proc_exit(1);	/* restarted after bgw_restart_time */
			installed = true;
			unfinished = 1;
		}
		PG_END_TRY();
		MemoryContextSwitchTo(old);
		MemoryContextReset(cxt);
		pgstat_report_activity(STATE_IDLE, NULL);
		pgstat_report_stat(true);

		if (released)
		{
			/* the last look after letting go found work: take it back, unless another took it */
			if (unfinished == 0)
			{
				MarkJobsQuiet(my_db, true);
				break;
			}
			if (!ClaimSupervisor(my_db))
				break;
			released = false;
		}
		idle_ms = unfinished > 0 ? 0 : idle_ms + (busy ? job_naptime_ms : 4 * job_naptime_ms);
		if ((!installed || idle_ms >= SUPERVISOR_IDLE_MS) && nstarted == 0)
		{
			/*
			 * Let go first, then look once more: a transaction that queued
			 * work and found us running only set our latch.
			 */
			ReleaseSupervisor(my_db);
			released = true;
			continue;
		}
		/* a commit that queued rows sets the latch: an idle database needs no quick polling */
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 busy ? job_naptime_ms : 4 * job_naptime_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	proc_exit(0);
}

/*
 * The launcher (shared_preload_libraries only): once the server accepts
 * connections, a supervisor for every database that allows connections,
 * one after the other (one without jobs leaves at once), so that they
 * never take the slots their workers need.  Then it leaves.
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
		BackgroundWorkerHandle *handle;
		pid_t		pid;

		/* no slot: wait for one */
		while (!RegisterJobSupervisor(lfirst_oid(lc), &handle))
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1000, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		/* until it leaves (no jobs there), or has looked once and stays */
		for (int waited = 0; waited < 3000; waited += 100)
		{
			if (GetBackgroundWorkerPid(handle, &pid) == BGWH_STOPPED)
				break;
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 100, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	proc_exit(0);
}
