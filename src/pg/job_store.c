/*
 * job_store.c
 *		The job tables as both sides read them: job rows, the owner switch
 *		for internal SQL, the per-job locks, and transformer_job.waiting.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "ext_tables.h"
#include "jobs.h"

/* locktag_field4 of job locks: apart from pg_advisory_lock()'s 1 and 2 and ext_tables.c's */
#define JOB_LOCK_CLASS 0x746a

void
JobInternalBegin(JobAsOwner *s)
{
	Oid			owner;

	(void) ExtensionSchemaAndOwner(&owner);
	GetUserIdAndSecContext(&s->saved_user, &s->saved_sec);
	SetUserIdAndSecContext(owner, s->saved_sec | SECURITY_LOCAL_USERID_CHANGE);
	s->guc_level = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

void
JobInternalEnd(JobAsOwner *s)
{
	AtEOXact_GUC(true, s->guc_level);
	SetUserIdAndSecContext(s->saved_user, s->saved_sec);
}

void
JobExec(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls, int expect)
{
	JobAsOwner s;
	int			ret;

	JobInternalBegin(&s);
	ret = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);
	JobInternalEnd(&s);
	if (ret != expect)
		elog(ERROR, "job bookkeeping failed: %s", SPI_result_code_string(ret));
}

char *
JobTable(const char *relname)
{
	return ExtensionTableName(relname);
}

bool
ReadJob(int64 id, JobRow *job)
{
	JobAsOwner s;
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(id)};
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;
	int			ret;

	JobInternalBegin(&s);
	ret = SPI_execute_with_args(psprintf("SELECT tbl::oid, source::text, target::text, key_columns::text[], model, "
										 "owner::oid, state, workers, keep_in_sync, coalesce(beam, 0), batch_size, "
										 "xmin::text::bigint FROM %s WHERE id = $1",
										 JobTable("transformer_job")),
								1, types, values, NULL, false, 1);
	JobInternalEnd(&s);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "could not read job " INT64_FORMAT, id);
	if (SPI_processed == 0)
		return false;
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	memset(job, 0, sizeof(*job));
	job->id = id;
	job->relid = DatumGetObjectId(SPI_getbinval(tup, desc, 1, &isnull));
	job->source = SPI_getvalue(tup, desc, 2);
	job->target = SPI_getvalue(tup, desc, 3);
	d = SPI_getbinval(tup, desc, 4, &isnull);
	{
		Datum	   *elems;
		bool	   *nulls;

		deconstruct_array(DatumGetArrayTypeP(d), TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &nulls, &job->nkeys);
		job->keys = palloc(sizeof(char *) * (job->nkeys + 1));
		for (int i = 0; i < job->nkeys; i++)
			job->keys[i] = TextDatumGetCString(elems[i]);
	}
	job->model = SPI_getvalue(tup, desc, 5);
	job->owner = DatumGetObjectId(SPI_getbinval(tup, desc, 6, &isnull));
	strlcpy(job->state, SPI_getvalue(tup, desc, 7), sizeof(job->state));
	job->workers = DatumGetInt32(SPI_getbinval(tup, desc, 8, &isnull));
	job->keep_in_sync = DatumGetBool(SPI_getbinval(tup, desc, 9, &isnull));
	job->beam = DatumGetInt32(SPI_getbinval(tup, desc, 10, &isnull));
	job->batch_size = DatumGetInt32(SPI_getbinval(tup, desc, 11, &isnull));
	job->xmin = (TransactionId) DatumGetInt64(SPI_getbinval(tup, desc, 12, &isnull));
	return true;
}

void
JobLockTag(LOCKTAG *tag, Oid dboid, int64 job, int k)
{
	SET_LOCKTAG_ADVISORY(*tag, dboid, (uint32) job,
						 ((uint32) (job >> 32) << 8) | (uint32) k, JOB_LOCK_CLASS);
}

void
SetJobWaiting(int64 job, int missing, int workers)
{
	Oid			types[2] = {INT8OID, TEXTOID};
	Datum		values[2];
	char		nulls[2] = {' ', ' '};

	values[0] = Int64GetDatum(job);
	if (missing > 0)
		values[1] = CStringGetTextDatum(psprintf("%d of %d workers wait for a free background worker slot "
												 "(max_worker_processes is %d)",
												 missing, workers, max_worker_processes));
	else
		nulls[1] = 'n';
	JobExec(psprintf("UPDATE %s SET waiting = $2 WHERE id = $1 AND waiting IS DISTINCT FROM $2",
					 JobTable("transformer_job")), 2, types, values, nulls, SPI_OK_UPDATE);
}
