/*
 * job_launch.c
 *		Starting the processes of background jobs (src/worker/): a supervisor
 *		per database with unfinished jobs (registered on first use after a
 *		start, when a transaction that declared, resumed or queued work
 *		commits, and by the launcher under shared_preload_libraries), and the
 *		shared counts of job workers behind transformer.max_job_workers and
 *		the fair shares between roles.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"

#include "jobs.h"

/* set by the job processes (src/worker/) for themselves */
bool		am_job_worker = false;
int64		my_job = 0;
int			my_worker = 0;

/* transformer.job_naptime, transformer.max_job_workers (transformer.c) */
int			job_naptime_ms = 250;
int			train_checkpoint_interval = 300;
int			max_job_workers = 2;

/* A registered supervisor that has not started within this long is taken as lost. */
#define SUPERVISOR_START_TIMEOUT_MS 10000

#define MAX_SUPERVISORS 256
#define MAX_JOB_ENTRIES 1024

typedef struct SupervisorEntry
{
	Oid			db;				/* InvalidOid: free */
	bool		running;		/* else registered, not yet started */
	TimestampTz since;
	int			pgprocno;		/* when running: whose latch to set */
} SupervisorEntry;

typedef struct JobEntry
{
	Oid			db;				/* InvalidOid: free */
	int64		job;
	Oid			role;
	int			wanted;
	int			running;
} JobEntry;

typedef struct JobShared
{
	slock_t		mutex;
	SupervisorEntry sup[MAX_SUPERVISORS];
	JobEntry	jobs[MAX_JOB_ENTRIES];
	/* databases whose supervisor left with no unfinished job: a first use there starts none */
	Oid			quiet[MAX_SUPERVISORS];
} JobShared;

static JobShared *
job_shared(void)
{
	static JobShared *shared = NULL;
	bool		found;

	if (shared == NULL)
	{
		LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
		shared = ShmemInitStruct("transformer job supervisors", sizeof(JobShared), &found);
		if (!found)
		{
			memset(shared, 0, sizeof(JobShared));
			SpinLockInit(&shared->mutex);
		}
		LWLockRelease(AddinShmemInitLock);
	}
	return shared;
}

/* ------------------------------------------------------------ supervisors */

bool
RegisterJobSupervisor(Oid db, BackgroundWorkerHandle **handle)
{
	BackgroundWorker w;

	memset(&w, 0, sizeof(w));
	w.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	w.bgw_start_time = BgWorkerStart_RecoveryFinished;
	/* after a crash-restart too (without shared_preload_libraries); exit 0 unregisters it */
	w.bgw_restart_time = 5;
	strlcpy(w.bgw_library_name, "transformer", BGW_MAXLEN);
	strlcpy(w.bgw_function_name, "transformer_job_supervisor", BGW_MAXLEN);
	snprintf(w.bgw_name, BGW_MAXLEN, "transformer job supervisor for database %u", db);
	strlcpy(w.bgw_type, "transformer job supervisor", BGW_MAXLEN);
	w.bgw_main_arg = ObjectIdGetDatum(db);
	w.bgw_notify_pid = handle ? MyProcPid : 0;
	return RegisterDynamicBackgroundWorker(&w, handle);
}

static int
find_supervisor(JobShared *s, Oid db)
{
	for (int i = 0; i < MAX_SUPERVISORS; i++)
		if (s->sup[i].db == db)
			return i;
	return -1;
}

void
MarkJobsQuiet(Oid db, bool quiet)
{
	JobShared  *s = job_shared();
	int			free_slot = -1;
	bool		found = false;

	SpinLockAcquire(&s->mutex);
	for (int i = 0; i < MAX_SUPERVISORS; i++)
	{
		if (s->quiet[i] == db)
		{
			found = true;
			if (!quiet)
				s->quiet[i] = InvalidOid;
		}
		else if (s->quiet[i] == InvalidOid && free_slot < 0)
			free_slot = i;
	}
	if (quiet && !found && free_slot >= 0)
		s->quiet[free_slot] = db;
	SpinLockRelease(&s->mutex);
}

static bool
jobs_quiet(JobShared *s, Oid db)
{
	for (int i = 0; i < MAX_SUPERVISORS; i++)
		if (s->quiet[i] == db)
			return true;
	return false;
}

void
EnsureJobSupervisor(Oid db, bool force)
{
	JobShared  *s = job_shared();
	TimestampTz now = GetCurrentTimestamp();
	int			i;
	int			wake = -1;
	bool		need = false;

	if (RecoveryInProgress())
		return;					/* a standby runs no jobs (its supervisor could not start) */
	if (force)
		MarkJobsQuiet(db, false);
	SpinLockAcquire(&s->mutex);
	if (!force && jobs_quiet(s, db))
	{
		SpinLockRelease(&s->mutex);
		return;
	}
	i = find_supervisor(s, db);
	if (i >= 0 && !s->sup[i].running &&
		TimestampDifferenceExceeds(s->sup[i].since, now, SUPERVISOR_START_TIMEOUT_MS))
	{
		s->sup[i].db = InvalidOid;	/* registered long ago, never started: lost */
		i = -1;
	}
	if (i >= 0)
		wake = s->sup[i].running ? s->sup[i].pgprocno : -1;
	else
	{
		i = find_supervisor(s, InvalidOid);
		if (i >= 0)
		{
			s->sup[i].db = db;
			s->sup[i].running = false;
			s->sup[i].since = now;
			need = true;
		}
	}
	SpinLockRelease(&s->mutex);
	if (wake >= 0)
		SetLatch(&ProcGlobal->allProcs[wake].procLatch);
	if (need && !RegisterJobSupervisor(db, NULL))
	{
		/* no free slot: the next use, commit or launcher round tries again */
		SpinLockAcquire(&s->mutex);
		if (s->sup[i].db == db && !s->sup[i].running)
			s->sup[i].db = InvalidOid;
		SpinLockRelease(&s->mutex);
	}
}

bool
ClaimSupervisor(Oid db)
{
	JobShared  *s = job_shared();
	bool		ok = true;
	int			i;

	SpinLockAcquire(&s->mutex);
	i = find_supervisor(s, db);
	if (i >= 0 && s->sup[i].running && s->sup[i].pgprocno != MyProc->pgprocno)
		ok = false;				/* another one runs */
	else
	{
		if (i < 0)
			i = find_supervisor(s, InvalidOid);
		if (i < 0)
			ok = false;
		else
		{
			s->sup[i].db = db;
			s->sup[i].running = true;
			s->sup[i].since = GetCurrentTimestamp();
			s->sup[i].pgprocno = MyProc->pgprocno;
		}
	}
	SpinLockRelease(&s->mutex);
	return ok;
}

void
ReleaseSupervisor(Oid db)
{
	JobShared  *s = job_shared();
	int			i;

	SpinLockAcquire(&s->mutex);
	i = find_supervisor(s, db);
	if (i >= 0 && s->sup[i].running && s->sup[i].pgprocno == MyProc->pgprocno)
		s->sup[i].db = InvalidOid;
	SpinLockRelease(&s->mutex);
}

/* ------------------------------------------------------------ at commit */

static bool supervisor_at_commit = false;

static void
job_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT && supervisor_at_commit)
	{
		supervisor_at_commit = false;
		EnsureJobSupervisor(MyDatabaseId, true);
	}
	else if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		supervisor_at_commit = false;
}

void
EnsureJobSupervisorAtCommit(void)
{
	static bool registered = false;

	if (IsParallelWorker())
		return;					/* the leader's commit does it */
	if (!registered)
	{
		RegisterXactCallback(job_xact_callback, NULL);
		registered = true;
	}
	supervisor_at_commit = true;
}

void
MaybeResumeJobs(void)
{
	static bool done_here = false;

	if (done_here || am_job_worker || IsBackgroundWorker || IsParallelWorker() || !IsUnderPostmaster ||
		!OidIsValid(MyDatabaseId))
		return;
	done_here = true;
	EnsureJobSupervisor(MyDatabaseId, false);
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
	w.bgw_restart_time = 10;
	strlcpy(w.bgw_name, "transformer job launcher", BGW_MAXLEN);
	strlcpy(w.bgw_type, "transformer job launcher", BGW_MAXLEN);
	RegisterBackgroundWorker(&w);
}

/* ------------------------------------------------------------ the cap and the fair shares */

static int
find_job(JobShared *s, Oid db, int64 job)
{
	for (int i = 0; i < MAX_JOB_ENTRIES; i++)
		if (s->jobs[i].db == db && s->jobs[i].job == job)
			return i;
	return -1;
}

void
PostJobDemands(Oid db, const JobDemand *d, int n)
{
	JobShared  *s = job_shared();

	SpinLockAcquire(&s->mutex);
	for (int i = 0; i < MAX_JOB_ENTRIES; i++)
		if (s->jobs[i].db == db)
			s->jobs[i].db = InvalidOid;
	for (int k = 0; k < n; k++)
	{
		int			i = -1;

		if (d[k].wanted == 0 && d[k].running == 0)
			continue;
		for (int j = 0; i < 0 && j < MAX_JOB_ENTRIES; j++)
			if (s->jobs[j].db == InvalidOid)
				i = j;
		if (i < 0)
			break;				/* 1024 busy jobs: the rest go uncounted */
		s->jobs[i].db = db;
		s->jobs[i].job = d[k].job;
		s->jobs[i].role = d[k].role;
		s->jobs[i].wanted = d[k].wanted;
		s->jobs[i].running = d[k].running;
	}
	SpinLockRelease(&s->mutex);
}

/*
 * Max-min fair shares of the cap between roles (spinlock held): each role
 * wants the sum of its jobs' max(wanted, running); the roles that want
 * least get all they want, the others split the rest evenly.  Returns the
 * share of role, its workers, and all workers.
 */
static int
role_share(JobShared *s, Oid role, int *role_running, int *total_running, bool *others_wait)
{
	Oid			roles[MAX_JOB_ENTRIES];
	int			want[MAX_JOB_ENTRIES];
	int			run[MAX_JOB_ENTRIES];
	int			nroles = 0;
	int			left = max_job_workers;
	int			share = 0;
	bool		done[MAX_JOB_ENTRIES];

	*total_running = 0;
	*role_running = 0;
	*others_wait = false;
	for (int i = 0; i < MAX_JOB_ENTRIES; i++)
	{
		JobEntry   *e = &s->jobs[i];
		int			r;

		if (e->db == InvalidOid)
			continue;
		for (r = 0; r < nroles && roles[r] != e->role; r++)
			;
		if (r == nroles)
		{
			roles[r] = e->role;
			want[r] = run[r] = 0;
			done[r] = false;
			nroles++;
		}
		want[r] += Max(e->wanted, e->running);
		run[r] += e->running;
		*total_running += e->running;
		if (e->role != role && e->wanted > e->running)
			*others_wait = true;
	}
	for (int r = 0; r < nroles; r++)
		if (roles[r] == role)
			*role_running = run[r];
	/* water-filling: the smallest demands first */
	for (int round = 0; round < nroles && left > 0; round++)
	{
		int			best = -1;
		int			open = 0;

		for (int r = 0; r < nroles; r++)
			if (!done[r])
			{
				open++;
				if (best < 0 || want[r] < want[best])
					best = r;
			}
		if (best < 0)
			break;
		{
			int			even = Max(left / open, 1);
			int			give = Min(want[best], even);

			done[best] = true;
			left -= give;
			if (roles[best] == role)
				share = give;
		}
	}
	return share;
}

int
RoleHeadroom(Oid role)
{
	JobShared  *s = job_shared();
	int			running,
				total,
				share;
	bool		others;

	SpinLockAcquire(&s->mutex);
	share = role_share(s, role, &running, &total, &others);
	SpinLockRelease(&s->mutex);
	return Max(0, Min(share - running, max_job_workers - total));
}

bool
RoleOverShare(Oid role)
{
	JobShared  *s = job_shared();
	int			running,
				total,
				share;
	bool		others;
	bool		leave;

	SpinLockAcquire(&s->mutex);
	share = role_share(s, role, &running, &total, &others);
	leave = (others && running > share) || total > max_job_workers;
	if (leave)
	{
		/* count this worker out now, so that its siblings do not all leave */
		for (int i = 0; i < MAX_JOB_ENTRIES; i++)
			if (s->jobs[i].db == MyDatabaseId && s->jobs[i].job == my_job && s->jobs[i].running > 0)
			{
				s->jobs[i].running--;
				break;
			}
	}
	SpinLockRelease(&s->mutex);
	return leave;
}

void
CountJobWorker(Oid db, int64 job, int delta)
{
	JobShared  *s = job_shared();
	int			i;

	SpinLockAcquire(&s->mutex);
	i = find_job(s, db, job);
	if (i >= 0)
		s->jobs[i].running = Max(0, s->jobs[i].running + delta);
	SpinLockRelease(&s->mutex);
}
