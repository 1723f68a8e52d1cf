/*
 * job_launch.c
 *		Starting the processes of translation jobs (src/worker/job_worker.c):
 *		registering a job's workers, the resumer of a database after a
 *		server start, the launcher under shared_preload_libraries, and the
 *		shared list of databases whose jobs wait for a free slot.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/lock.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "jobs.h"

/* set by the job workers (src/worker/job_worker.c) for themselves */
bool		am_job_worker = false;
int64		my_job = 0;
int			my_worker = 0;

/* transformer.job_naptime (transformer.c) */
int			job_naptime_ms = 250;

/* Does some process hold worker k's lock (a worker running)? */
static bool
worker_running(int64 job, int k)
{
	LOCKTAG		tag;

	JobLockTag(&tag, MyDatabaseId, job, k);
	if (LockAcquire(&tag, ExclusiveLock, false, true) == LOCKACQUIRE_NOT_AVAIL)
		return true;
	LockRelease(&tag, ExclusiveLock, false);
	return false;
}

int
LaunchJobWorkers(int64 job, Oid owner, int workers)
{
	int			missing = 0;

	for (int k = 1; k <= workers; k++)
	{
		BackgroundWorker w;
		JobWorkerArgs args;

		/* (a worker holds its own lock: LockAcquire() would succeed for it) */
		if ((am_job_worker && my_job == job && my_worker == k) || worker_running(job, k))
			continue;
		memset(&w, 0, sizeof(w));
		w.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		w.bgw_start_time = BgWorkerStart_RecoveryFinished;
		/* restarted after a crash or a kill: without shared_preload_libraries too */
		w.bgw_restart_time = 1;
		strlcpy(w.bgw_library_name, "transformer", BGW_MAXLEN);
		strlcpy(w.bgw_function_name, "transformer_job_main", BGW_MAXLEN);
		snprintf(w.bgw_name, BGW_MAXLEN, "transformer job " INT64_FORMAT " worker %d", job, k);
		strlcpy(w.bgw_type, w.bgw_name, BGW_MAXLEN);
		args.dboid = MyDatabaseId;
		args.owner = owner;
		args.job = job;
		args.worker = k;
		StaticAssertStmt(sizeof(args) <= BGW_EXTRALEN, "job worker arguments too long");
		memcpy(w.bgw_extra, &args, sizeof(args));
		w.bgw_notify_pid = 0;
		if (!RegisterDynamicBackgroundWorker(&w, NULL))
			missing++;
	}
	if (missing > 0)
		MarkJobsWaiting(MyDatabaseId);	/* retried as slots free (job_worker.c) */
	return missing;
}

/* ------------------------------------------------------------ resuming after a start */

/*
 * Databases whose jobs were resumed since the server started, and those
 * with jobs whose workers found no free slot (spare shared memory)
 */
#define MAX_RESUMED_DBS 256
#define MAX_WAITING_DBS 64
typedef struct ResumedDatabases
{
	slock_t		mutex;
	int			n;
	Oid			db[MAX_RESUMED_DBS];
	int			nwaiting;
	Oid			waiting[MAX_WAITING_DBS];
} ResumedDatabases;

static ResumedDatabases *
resumed_databases(void)
{
	static ResumedDatabases *shared = NULL;
	bool		found;

	if (shared == NULL)
	{
		LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
		shared = ShmemInitStruct("transformer resumed databases", sizeof(ResumedDatabases), &found);
		if (!found)
		{
			SpinLockInit(&shared->mutex);
			shared->n = 0;
			shared->nwaiting = 0;
		}
		LWLockRelease(AddinShmemInitLock);
	}
	return shared;
}

/* Marks db resumed; false if it already was. */
bool
ClaimResume(Oid db)
{
	ResumedDatabases *r = resumed_databases();
	bool		claimed = true;

	SpinLockAcquire(&r->mutex);
	for (int i = 0; i < r->n; i++)
		if (r->db[i] == db)
			claimed = false;
	if (claimed && r->n < MAX_RESUMED_DBS)
		r->db[r->n++] = db;
	SpinLockRelease(&r->mutex);
	return claimed;
}

static void
unclaim_resume(Oid db)
{
	ResumedDatabases *r = resumed_databases();

	SpinLockAcquire(&r->mutex);
	for (int i = 0; i < r->n; i++)
		if (r->db[i] == db)
			r->db[i] = r->db[--r->n];
	SpinLockRelease(&r->mutex);
}

void
MarkJobsWaiting(Oid db)
{
	ResumedDatabases *r = resumed_databases();
	bool		known = false;

	SpinLockAcquire(&r->mutex);
	for (int i = 0; i < r->nwaiting; i++)
		known |= r->waiting[i] == db;
	if (!known && r->nwaiting < MAX_WAITING_DBS)
		r->waiting[r->nwaiting++] = db;
	SpinLockRelease(&r->mutex);
}

/* Whether db has jobs waiting for a slot (and forget it: the caller retries). */
static bool
take_waiting(Oid db)
{
	ResumedDatabases *r = resumed_databases();
	bool		found = false;

	SpinLockAcquire(&r->mutex);
	for (int i = 0; i < r->nwaiting && !found; i++)
		if (r->waiting[i] == db || db == InvalidOid)
		{
			found = true;
			r->waiting[i] = r->waiting[--r->nwaiting];
		}
	SpinLockRelease(&r->mutex);
	return found;
}

static bool
register_resumer_with(Oid db, BackgroundWorkerHandle **handle)
{
	BackgroundWorker w;

	memset(&w, 0, sizeof(w));
	w.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	w.bgw_start_time = BgWorkerStart_RecoveryFinished;
	w.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(w.bgw_library_name, "transformer", BGW_MAXLEN);
	strlcpy(w.bgw_function_name, "transformer_job_resumer", BGW_MAXLEN);
	snprintf(w.bgw_name, BGW_MAXLEN, "transformer job resumer for database %u", db);
	strlcpy(w.bgw_type, "transformer job resumer", BGW_MAXLEN);
	w.bgw_main_arg = ObjectIdGetDatum(db);
	w.bgw_notify_pid = handle ? MyProcPid : 0;
	return RegisterDynamicBackgroundWorker(&w, handle);
}

static bool
register_resumer(Oid db)
{
	return register_resumer_with(db, NULL);
}

/* A resumer for db if it has jobs waiting for a slot (none free: it stays marked). */
void
RetryWaitingJobs(Oid db)
{
	if (take_waiting(db) && !register_resumer(db))
		MarkJobsWaiting(db);
}

void
MaybeResumeJobs(void)
{
	static bool done_here = false;
	static TimestampTz next_retry = 0;

	if (am_job_worker || IsBackgroundWorker || IsParallelWorker() || !IsUnderPostmaster ||
		!OidIsValid(MyDatabaseId))
		return;
	if (!done_here)
	{
		done_here = true;
		if (ClaimResume(MyDatabaseId) && !register_resumer(MyDatabaseId))
			unclaim_resume(MyDatabaseId);	/* no slot: the next use tries again */
	}
	/* jobs of this database waiting for a slot: at most every 2 s per backend */
	if (GetCurrentTimestamp() >= next_retry)
	{
		next_retry = GetCurrentTimestamp() + 2 * USECS_PER_SEC;
		RetryWaitingJobs(MyDatabaseId);
	}
}

/* The first database with jobs waiting for a slot, forgotten (InvalidOid: none). */
Oid
NextWaitingDatabase(void)
{
	ResumedDatabases *r = resumed_databases();
	Oid			db = InvalidOid;

	SpinLockAcquire(&r->mutex);
	if (r->nwaiting > 0)
	{
		db = r->waiting[0];
		r->waiting[0] = r->waiting[--r->nwaiting];
	}
	SpinLockRelease(&r->mutex);
	return db;
}

/*
 * A resumer for db, waited for: one at a time, so that resumers never take
 * the slots their jobs' workers need.  No slot: db is marked to try again.
 */
void
RunResumer(Oid db)
{
	BackgroundWorkerHandle *handle;

	if (!register_resumer_with(db, &handle))
	{
		MarkJobsWaiting(db);
		return;
	}
	(void) WaitForBackgroundWorkerShutdown(handle);
}

void
RegisterJobLauncher(void)
{
	BackgroundWorker w;

	memset(&w, 0, sizeof(w));
	w.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	w.bgw_start_time = BgWorkerStart_RecoveryFinished;
	strlcpy(w.bgw_library_name, "transformer", BGW_MAXLEN);
	strlcpy(w.bgw_function_name, "transformer_job_launcher", BGW_MAXLEN);
	w.bgw_restart_time = 10;	/* and after a crash */
	strlcpy(w.bgw_name, "transformer job launcher", BGW_MAXLEN);
	strlcpy(w.bgw_type, "transformer job launcher", BGW_MAXLEN);
	RegisterBackgroundWorker(&w);
}
