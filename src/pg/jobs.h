/*
 * jobs.h
 *		Background jobs (translate_column(), embed_column()): what the SQL
 *		functions (sql_jobs.c, job_sync.c) and the background processes
 *		(src/worker/) share: job rows, locks and the fixed key settings
 *		(job_store.c); the supervisors, the worker cap and the fair shares
 *		(job_launch.c).
 *
 *		The processes, as pg_prewarm's autoprewarm and pgai's vectorizer do
 *		it: one supervisor per database with unfinished jobs, which starts
 *		workers while rows are queued; a worker does one job's batches and
 *		leaves when its queue is empty.  An idle syncing job holds no process.
 */
#ifndef JOBS_H
#define JOBS_H

#include "postgres.h"

#include "postmaster/bgworker.h"
#include "storage/lock.h"

/*
 * Keys per queue row, at least: a statement that writes many rows pays one
 * queue row per chunk (a worker takes a chunk at a time, and translates it
 * batch_size rows at a time).
 */
#define JOB_CHUNK_KEYS 64

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
	Oid			owner;			/* the role that declared the job */
	char		state[16];
	int			workers;
	bool		keep_in_sync;
	int			beam;			/* 0: the model's */
	int			batch_size;
	TransactionId xmin;			/* of the row: declared in this transaction? */
	bool		embed;			/* kind 'embed' (else 'translate') */
	char	   *format;			/* NULL: text */
	Datum		keep;			/* text[]; 0: NULL (every kind) */
	char	   *source_lang;	/* NULL: none */
	char	   *target_lang;
	char	   *lang_column;	/* NULL: none */
	bool		fine_tune;		/* kind 'fine_tune': no table (relid InvalidOid, no keys) */
	char	   *new_model;		/* fine_tune(): the model it writes */
	char	   *settings;		/* fine_tune(): its settings, jsonb text */
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
 * SET clause would).
 */
typedef struct JobAsOwner
{
	Oid			saved_user;
	int			saved_sec;
	int			guc_level;
} JobAsOwner;

extern void JobInternalBegin(JobAsOwner *s);
extern void JobInternalEnd(JobAsOwner *s);

/*
 * The settings under which row keys are written as text and read back:
 * DateStyle ISO, IntervalStyle postgres, TimeZone UTC, extra_float_digits 1
 * (exact), bytea_output hex, search_path pg_catalog.  A key never passes
 * through text formatted by a session's own settings.  Returns the GUC
 * nest level for JobKeySettingsEnd().
 */
extern int	JobKeySettingsBegin(bool with_search_path);
extern void JobKeySettingsEnd(int level);

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
/* Does some other process hold worker k's lock (a worker running)? */
extern bool JobWorkerRunning(Oid dboid, int64 job, int k);

/* The lock that keeps workers from reading a job row until its writer commits (job_store.c). */
extern void LockJobRow(int64 id);

/* A job's sync triggers: for inserts, for updates, and 0.8.0's row trigger; the name of one; all dropped (job_sync.c). */
extern const char *const SyncTriggerKinds[3];
extern char *SyncTriggerName(int64 id, const char *kind);
extern void DropSyncTriggers(const JobRow *job);

/*
 * As a table's owner inside a security-restricted operation, with the key
 * settings (keys are parsed back under them), as VACUUM and REFRESH
 * MATERIALIZED VIEW run a table's code: triggers, defaults, index
 * expressions and policies run with the owner's rights, never with the
 * declaring role's.
 */
typedef struct JobAsTableOwner
{
	Oid			saved_user;
	int			saved_sec;
	int			level;
} JobAsTableOwner;

extern void JobAsTableOwnerBegin(JobAsTableOwner *s, Oid relid);
extern void JobAsTableOwnerEnd(JobAsTableOwner *s);

/* A job failed as a whole: state failed, last_error message; in a transaction of its own (not in one). */
extern void FailJobNow(int64 job, const char *message);
/* Is job a fine_tune() job?  In a transaction of its own (not in one). */
extern bool JobIsFineTune(int64 job);

/* Set transformer_job.waiting (NULL clears it); SPI connected. */
extern void SetJobWaiting(int64 job, const char *why);

/*
 * The declaring role's rights on the job's table, checked as
 * translate_column() checks them: ERROR (42501) naming what is missing.
 * Also refuses a table whose row-level security applies to the role (its
 * policies would have to run with the role's rights).
 */
extern void CheckJobPrivileges(Oid relid, Oid role, const char *source, const char *target,
							   const char *lang_column, int nkeys, char **keys);
/* The same as a message (NULL: none), for the supervisor; *code its SQLSTATE */
extern char *JobPrivilegeProblem(Oid relid, Oid role, const char *source, const char *target,
								 const char *lang_column, int nkeys, char **keys, int *code);

/* ---------------------------------------------------------------- processes (job_launch.c) */

/*
 * A supervisor for db, if none runs: now (a job committed earlier: the
 * first use after a start; force false skips a database whose last
 * supervisor found nothing to do), or when the current transaction commits
 * (a job declared, resumed, rows queued in it).  Cheap when one runs.
 */
extern void EnsureJobSupervisor(Oid db, bool force);
/* A supervisor left db with no unfinished job (quiet), or work may come (not): force = false skips quiet ones */
extern void MarkJobsQuiet(Oid db, bool quiet);
extern void EnsureJobSupervisorAtCommit(void);

/* The first use of the extension in a database after a server start: its supervisor. */
extern void MaybeResumeJobs(void);

/* The launcher for shared_preload_libraries (its process: src/worker/job_supervisor.c) */
extern void RegisterJobLauncher(void);

/* Register a supervisor for db (with a handle if handle is not NULL); false if no slot. */
extern bool RegisterJobSupervisor(Oid db, BackgroundWorkerHandle **handle);

/* The supervisor of db: claim its shared entry (false: another runs), and leave it. */
extern bool ClaimSupervisor(Oid db);
extern void ReleaseSupervisor(Oid db);

/*
 * The cluster's job workers, for the cap (transformer.max_job_workers) and
 * the fair shares between roles.  A supervisor posts what each of its jobs
 * wants; the shares are max-min fair between roles over all databases.
 */
typedef struct JobDemand
{
	int64		job;
	Oid			role;
	int			wanted;			/* workers it could use now */
	int			running;		/* workers it has */
} JobDemand;

/* Replace db's demands with these (n of them). */
extern void PostJobDemands(Oid db, const JobDemand *d, int n);
/* How many more workers role may start now (0: at its share, or the cap reached). */
extern int	RoleHeadroom(Oid role);
/* Whether a worker of role should leave (the role is over its share while another waits). */
extern bool RoleOverShare(Oid role);
/* A worker of (db, job) started or left: the counts the shares use. */
extern void CountJobWorker(Oid db, int64 job, int delta);

/* True in our own job processes (they never start supervisors themselves) */
extern bool am_job_worker;
extern int64 my_job;
extern int	my_worker;

/* transformer.job_naptime: how often a supervisor looks at its queues (ms) */
extern int	job_naptime_ms;
/* transformer.checkpoint_interval: seconds between a fine_tune() job's saved states */
extern int	train_checkpoint_interval;
/* transformer.max_job_workers: all job workers of the cluster at once */
extern int	max_job_workers;

#endif							/* JOBS_H */
