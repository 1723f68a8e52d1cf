/*
 * jobs.h
 *		Background translation jobs: what the SQL functions (sql_jobs.c) and
 *		the background workers (src/worker/job_worker.c) share: job rows and
 *		locks (job_store.c), starting the processes (job_launch.c).
 */
#ifndef JOBS_H
#define JOBS_H

#include "postgres.h"

#include "storage/lock.h"

/* One row of transformer_job, as the workers and the SQL functions read it. */
typedef struct JobRow
{
	int64		id;
	Oid			relid;
	char	   *source;
	char	   *target;
	int			nkeys;
	char	  **keys;			/* key column names */
	char	   *model;
	Oid			owner;
	char		state[16];
	int			workers;
	bool		keep_in_sync;
	int			beam;			/* 0: the model's */
	int			batch_size;
	TransactionId xmin;			/* of the row: declared in this transaction? */
} JobRow;

/* What a worker needs before it can read anything (bgw_extra). */
typedef struct JobWorkerArgs
{
	Oid			dboid;
	Oid			owner;
	int64		job;
	int			worker;			/* 1..workers */
} JobWorkerArgs;

/*
 * Internal SQL on the job tables runs as the extension's owner with
 * search_path "pg_catalog, pg_temp" (as a SECURITY DEFINER function with a
 * SET clause would); statements on the user's table run as the user.
 */
typedef struct JobAsOwner
{
	Oid			saved_user;
	int			saved_sec;
	int			guc_level;
} JobAsOwner;

extern void JobInternalBegin(JobAsOwner *s);
extern void JobInternalEnd(JobAsOwner *s);

/* Run internal SQL on the job tables as above; ERROR unless SPI returns expect (SPI connected). */
extern void JobExec(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls, int expect);

/* Quoted, schema-qualified name of a job table (for SPI text). */
extern char *JobTable(const char *relname);

/* Read job id (SPI connected); false if there is none. */
extern bool ReadJob(int64 id, JobRow *job);

/*
 * The advisory lock of worker k of a job (k = 0: the lock writers of the
 * job row hold until they commit).  Its locktag_field4 is apart from
 * pg_advisory_lock()'s, so no user lock can collide.
 */
extern void JobLockTag(LOCKTAG *tag, Oid dboid, int64 job, int k);

/*
 * Register the workers of a job that are not running; returns how many
 * could not get a slot (the caller says so in transformer_job.waiting).
 */
extern int	LaunchJobWorkers(int64 job, Oid owner, int workers);

/* Set transformer_job.waiting (NULL clears it); SPI connected. */
extern void SetJobWaiting(int64 job, int missing, int workers);

/*
 * After a server start: the first use of the extension in a database
 * starts the unfinished jobs of that database again (a short-lived
 * background worker reads them).  Cheap after the first call.
 */
extern void MaybeResumeJobs(void);

/*
 * Note that db has jobs whose workers found no free slot: the idle worker
 * of any syncing job there, the next MaybeResumeJobs() there, and the
 * launcher (shared_preload_libraries) retry them.
 */
extern void MarkJobsWaiting(Oid db);

/* The launcher for shared_preload_libraries (its process: src/worker/job_worker.c) */
extern void RegisterJobLauncher(void);

/* For the resumer and the launcher (job_launch.c): db's jobs resumed since the start; false if they were already */
extern bool ClaimResume(Oid db);
/* A resumer for db if its jobs wait for a slot (none free: it stays marked) */
extern void RetryWaitingJobs(Oid db);
/* The next database whose jobs wait for a slot, forgotten; InvalidOid if none */
extern Oid	NextWaitingDatabase(void);
/* A resumer for db, and wait until it has exited */
extern void RunResumer(Oid db);

/* True in our own job workers (they never resume jobs); the job and slot of this one */
extern bool am_job_worker;
extern int64 my_job;
extern int	my_worker;

/* transformer.job_naptime: how often an idle keep_in_sync worker looks at its queue (ms) */
extern int	job_naptime_ms;

#endif							/* JOBS_H */
