/*
 * model_stats.c
 *		Per-model statistics in shared memory, as pg_stat_statements keeps
 *		per-statement ones: calls, sentences, tokens in and out, time, and
 *		the backends' model cache hits and misses, per database and model.
 *
 * The memory is requested at server start, so the statistics need
 * shared_preload_libraries = 'transformer'; without it they are off and
 * reading them is an error that says so.  One LWLock guards the table:
 * a translate() call takes it once, at its end, for a few additions.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "model_store.h"

/* models the table holds; past that, a new model takes the slot of the least called */
#define STATS_MODELS 512

typedef struct StatsEntry
{
	Oid			dbid;			/* InvalidOid: a free slot */
	char		model[NAMEDATALEN];
	int64		calls;
	int64		sentences;
	int64		tokens_in;
	int64		tokens_out;
	double		total_ms;
	int64		cache_hits;
	int64		cache_misses;
	TimestampTz since;
} StatsEntry;

typedef struct StatsShared
{
	LWLock	   *lock;
	StatsEntry	entries[STATS_MODELS];
} StatsShared;

static StatsShared *stats = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
stats_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(StatsShared)));
	RequestNamedLWLockTranche("transformer_stats", 1);
}

static void
stats_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	stats = ShmemInitStruct("transformer model statistics", sizeof(StatsShared), &found);
	if (!found)
	{
		memset(stats, 0, sizeof(StatsShared));
		stats->lock = &(GetNamedLWLockTranche("transformer_stats"))->lock;
	}
	LWLockRelease(AddinShmemInitLock);
}

/* From _PG_init: the shared memory, if the library is preloaded. */
void
InitModelStats(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = stats_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = stats_shmem_startup;
}

/* The entry of (this database, model), made if missing; the lock held exclusively. */
static StatsEntry *
entry_for(const char *model)
{
	StatsEntry *free_slot = NULL,
			   *least = NULL;

	for (int i = 0; i < STATS_MODELS; i++)
	{
		StatsEntry *e = &stats->entries[i];

		if (e->dbid == MyDatabaseId && strcmp(e->model, model) == 0)
			return e;
		if (e->dbid == InvalidOid)
		{
			if (free_slot == NULL)
				free_slot = e;
		}
		else if (least == NULL || e->calls < least->calls)
			least = e;
	}
	if (free_slot == NULL)
		free_slot = least;		/* full: the least called goes */
	memset(free_slot, 0, sizeof(StatsEntry));
	free_slot->dbid = MyDatabaseId;
	strlcpy(free_slot->model, model, NAMEDATALEN);
	free_slot->since = GetCurrentTimestamp();
	return free_slot;
}

/* Count one call of translate() (or a job's batch) on model; nothing if the statistics are off. */
void
RecordModelCall(const char *model, int64 sentences, int64 tokens_in, int64 tokens_out, double ms)
{
	StatsEntry *e;

	if (stats == NULL || model == NULL || strlen(model) >= NAMEDATALEN)
		return;
	LWLockAcquire(stats->lock, LW_EXCLUSIVE);
	e = entry_for(model);
	e->calls++;
	e->sentences += sentences;
	e->tokens_in += tokens_in;
	e->tokens_out += tokens_out;
	e->total_ms += ms;
	LWLockRelease(stats->lock);
}

/* Count a lookup of model in a backend's model cache: found there (hit), or loaded (miss). */
void
RecordModelCache(const char *model, bool hit)
{
	StatsEntry *e;

	if (stats == NULL || model == NULL || strlen(model) >= NAMEDATALEN)
		return;
	LWLockAcquire(stats->lock, LW_EXCLUSIVE);
	e = entry_for(model);
	if (hit)
		e->cache_hits++;
	else
		e->cache_misses++;
	LWLockRelease(stats->lock);
}

static void
stats_needed(void)
{
	if (stats == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("transformer statistics must be loaded via \"shared_preload_libraries\""),
				 errhint("Add 'transformer' to shared_preload_libraries and restart the server.")));
}

/* transformer_model_stats(): the statistics of this database's models */
PG_FUNCTION_INFO_V1(transformer_model_stats);
Datum
transformer_model_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	StatsEntry *copy;
	int			n = 0;

	stats_needed();
	InitMaterializedSRF(fcinfo, 0);
	/* copied under the lock, returned after it */
	copy = palloc(sizeof(StatsEntry) * STATS_MODELS);
	LWLockAcquire(stats->lock, LW_SHARED);
	for (int i = 0; i < STATS_MODELS; i++)
		if (stats->entries[i].dbid == MyDatabaseId)
			copy[n++] = stats->entries[i];
	LWLockRelease(stats->lock);
	for (int i = 0; i < n; i++)
	{
		Datum		v[10];
		bool		nulls[10] = {false};

		v[0] = CStringGetTextDatum(copy[i].model);
		v[1] = Int64GetDatum(copy[i].calls);
		v[2] = Int64GetDatum(copy[i].sentences);
		v[3] = Int64GetDatum(copy[i].tokens_in);
		v[4] = Int64GetDatum(copy[i].tokens_out);
		v[5] = Float8GetDatum(copy[i].total_ms);
		v[6] = Float8GetDatum(copy[i].calls > 0 ? copy[i].total_ms / copy[i].calls : 0);
		nulls[6] = copy[i].calls == 0;
		v[7] = Int64GetDatum(copy[i].cache_hits);
		v[8] = Int64GetDatum(copy[i].cache_misses);
		v[9] = TimestampTzGetDatum(copy[i].since);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
	}
	return (Datum) 0;
}

/* transformer_stat_reset(model): forget one model's statistics in this database, or all (NULL) */
PG_FUNCTION_INFO_V1(transformer_stat_reset);
Datum
transformer_stat_reset(PG_FUNCTION_ARGS)
{
	char	   *model = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));

	stats_needed();
	LWLockAcquire(stats->lock, LW_EXCLUSIVE);
	for (int i = 0; i < STATS_MODELS; i++)
	{
		StatsEntry *e = &stats->entries[i];

		if (e->dbid == MyDatabaseId && (model == NULL || strcmp(e->model, model) == 0))
			memset(e, 0, sizeof(StatsEntry));
	}
	LWLockRelease(stats->lock);
	PG_RETURN_VOID();
}
