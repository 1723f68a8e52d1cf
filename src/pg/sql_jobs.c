/*
 * sql_jobs.c
 *		The SQL surface of background translation jobs: translate_column(),
 *		wait_for_job(), pause/resume/cancel_job(), retry_job_errors(), and
 *		the sync trigger.  The workers are in src/worker/job_worker.c.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "parser/parse_coerce.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "ext_tables.h"
#include "jobs.h"

extern char *transformer_default_model;

#define DEFAULT_BATCH_SIZE 8
#define MAX_JOB_WORKERS 64
/* keys moved from the table to the queue per statement at declaration */
#define BACKFILL_CHUNK 10000

/* ------------------------------------------------------------ guards */

static void
check_int_arg(const char *what, int v, int lo, int hi)
{
	if (v < lo || v > hi)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be between %d and %d", what, lo, hi),
				 errdetail("It is %d.", v)));
}

/* A column of relid by name: not a system or dropped column; its type a string type. */
static AttrNumber
job_column(Oid relid, const char *what, const char *name, Oid *type)
{
	AttrNumber	att = get_attnum(relid, name);
	char		category;
	bool		preferred;

	if (att == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist", name, get_rel_name(relid))));
	if (att < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s column must not be a system column", what)));
	*type = get_atttype(relid, att);
	get_type_category_preferred(getBaseType(*type), &category, &preferred);
	if (category != TYPCATEGORY_STRING)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s column \"%s\" must be of a text type", what, name),
				 errdetail("It is of type %s.", format_type_be(*type))));
	return att;
}

/*
 * The columns that identify a row: the primary key, else the first unique,
 * immediate, non-partial index on plain NOT NULL columns.
 */
static List *
row_key(Relation rel)
{
	List	   *indexes = RelationGetIndexList(rel);
	List	   *best = NIL;
	bool		best_primary = false;
	ListCell   *lc;

	foreach(lc, indexes)
	{
		Relation	irel = index_open(lfirst_oid(lc), AccessShareLock);
		Form_pg_index ind = irel->rd_index;
		List	   *cols = NIL;
		bool		ok = ind->indisunique && ind->indimmediate && ind->indisvalid &&
			RelationGetIndexPredicate(irel) == NIL;

		for (int i = 0; ok && i < ind->indnkeyatts; i++)
		{
			AttrNumber	a = ind->indkey.values[i];

			if (a <= 0 || !TupleDescAttr(RelationGetDescr(rel), a - 1)->attnotnull)
				ok = false;
			else
				cols = lappend(cols, pstrdup(NameStr(TupleDescAttr(RelationGetDescr(rel), a - 1)->attname)));
		}
		if (ok && (best == NIL || (ind->indisprimary && !best_primary)))
		{
			best = cols;
			best_primary = ind->indisprimary;
		}
		index_close(irel, AccessShareLock);
	}
	return best;
}

static void
check_column_privilege(Oid relid, AttrNumber att, AclMode mode, const char *col)
{
	if (pg_attribute_aclcheck(relid, att, GetUserId(), mode) != ACLCHECK_OK &&
		pg_class_aclcheck(relid, GetUserId(), mode) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", get_rel_name(relid)),
				 errdetail("Translating needs %s on column \"%s\".", mode == ACL_SELECT ? "SELECT" : "UPDATE", col)));
}

/* SQL text of a job's key as a JSON array of the key columns' text, from alias t. */
static char *
key_json_sql(List *keys)
{
	StringInfoData b;
	ListCell   *lc;

	initStringInfo(&b);
	appendStringInfoString(&b, "pg_catalog.jsonb_build_array(");
	foreach(lc, keys)
		appendStringInfo(&b, "%st.%s::pg_catalog.text", lc == list_head(keys) ? "" : ", ",
						 quote_identifier(lfirst(lc)));
	appendStringInfoChar(&b, ')');
	return b.data;
}

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

/* The lock that keeps workers from reading a job row until its writer commits. */
static void
lock_job_row(int64 id)
{
	LOCKTAG		tag;

	JobLockTag(&tag, MyDatabaseId, id, 0);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

static char *
trigger_name(int64 id)
{
	return psprintf("transformer_job_" INT64_FORMAT "_sync", id);
}

static void
drop_sync_trigger(const JobRow *job)
{
	JobAsOwner s;
	char	   *relname = get_rel_name(job->relid);

	if (relname == NULL)
		return;					/* the table is gone, and its triggers with it */
	JobInternalBegin(&s);
	if (SPI_execute(psprintf("DROP TRIGGER IF EXISTS %s ON %s", quote_identifier(trigger_name(job->id)),
							 quote_qualified_identifier(get_namespace_name(get_rel_namespace(job->relid)), relname)),
					false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not drop the sync trigger of job " INT64_FORMAT, job->id);
	JobInternalEnd(&s);
}

static void
launch(const JobRow *job)
{
	SetJobWaiting(job->id, LaunchJobWorkers(job->id, job->owner, job->workers), job->workers);
}

/* ------------------------------------------------------------ translate_column */

PG_FUNCTION_INFO_V1(translate_column);
Datum
translate_column(PG_FUNCTION_ARGS)
{
	Oid			relid;
	char	   *source,
			   *target,
			   *model;
	int			workers = PG_ARGISNULL(4) ? 1 : PG_GETARG_INT32(4);
	bool		keep_in_sync = PG_ARGISNULL(5) ? true : PG_GETARG_BOOL(5);
	int			beam = PG_ARGISNULL(6) ? 0 : PG_GETARG_INT32(6);
	int			batch_size = PG_ARGISNULL(7) ? DEFAULT_BATCH_SIZE : PG_GETARG_INT32(7);
	Relation	rel;
	List	   *keys;
	AttrNumber	src_att,
				tgt_att;
	Oid			src_type,
				tgt_type;
	char	   *qualname;
	int64		id;
	JobAsOwner s;
	ListCell   *lc;
	Datum	   *keyd;
	int			i;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table, source and target must not be null")));
	relid = PG_GETARG_OID(0);
	source = text_to_cstring(PG_GETARG_TEXT_PP(1));
	target = text_to_cstring(PG_GETARG_TEXT_PP(2));
	model = PG_ARGISNULL(3) ? transformer_default_model : text_to_cstring(PG_GETARG_TEXT_PP(3));
	if (model == NULL || model[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("no model to translate with"),
				 errhint("Set transformer.default_model, or pass model.")));
	check_int_arg("workers", workers, 1, Min(MAX_JOB_WORKERS, max_worker_processes));
	if (!PG_ARGISNULL(6))
		check_int_arg("beam", beam, 1, 64);
	check_int_arg("batch_size", batch_size, 1, 1024);
	/* workers connect as the declaring role (as worker_spi does): it must be able to log in */
	{
		HeapTuple	role = SearchSysCache1(AUTHOID, ObjectIdGetDatum(GetUserId()));
		bool		can_login;

		if (!HeapTupleIsValid(role))
			elog(ERROR, "cache lookup failed for role %u", GetUserId());
		can_login = ((Form_pg_authid) GETSTRUCT(role))->rolcanlogin ||
			((Form_pg_authid) GETSTRUCT(role))->rolsuper;
		ReleaseSysCache(role);
		if (!can_login)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
					 errmsg("role \"%s\" cannot log in, and job workers connect as the role that declares the job",
							GetUserNameFromId(GetUserId(), false)),
					 errhint("Declare the job as a role with LOGIN, or grant it LOGIN.")));
	}
	if (IsInParallelMode())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cannot declare a translation job in a parallel operation")));

	/* the table: as the user's own UPDATE would see it */
	rel = table_open(relid, AccessShareLock);
	if (rel->rd_rel->relkind != RELKIND_RELATION && rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", RelationGetRelationName(rel)),
				 errdetail("Translation jobs write ordinary and partitioned tables.")));
	if (rel->rd_rel->relpersistence == RELPERSISTENCE_TEMP)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot translate a temporary table in the background"),
				 errdetail("Background workers cannot see another session's temporary tables.")));
	src_att = job_column(relid, "source", source, &src_type);
	tgt_att = job_column(relid, "target", target, &tgt_type);
	if (src_att == tgt_att)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("source and target must be different columns")));
	if (TupleDescAttr(RelationGetDescr(rel), tgt_att - 1)->attgenerated)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("target column \"%s\" is a generated column", target)));
	keys = row_key(rel);
	if (keys == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" has no primary key or unique key on NOT NULL columns",
						RelationGetRelationName(rel)),
				 errdetail("A job identifies each row it translates by such a key."),
				 errhint("Add a primary key, e.g. ALTER TABLE %s ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY.",
						 RelationGetRelationName(rel))));
	foreach(lc, keys)
	{
		if (strcmp(lfirst(lc), target) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("target column \"%s\" is part of the table's key", target)));
		check_column_privilege(relid, get_attnum(relid, lfirst(lc)), ACL_SELECT, lfirst(lc));
	}
	check_column_privilege(relid, src_att, ACL_SELECT, source);
	check_column_privilege(relid, tgt_att, ACL_SELECT, target);
	check_column_privilege(relid, tgt_att, ACL_UPDATE, target);
	if (keep_in_sync && pg_class_aclcheck(relid, GetUserId(), ACL_TRIGGER) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", RelationGetRelationName(rel)),
				 errdetail("keep_in_sync adds a trigger to the table, which needs the TRIGGER privilege."),
				 errhint("Ask its owner for TRIGGER, or pass keep_in_sync => false.")));
	qualname = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
										  RelationGetRelationName(rel));
	table_close(rel, AccessShareLock);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/* the model, as the user reads it */
	{
		int			level = ExtSpiConnect();
		Oid			t[1] = {TEXTOID};
		Datum		v[1] = {CStringGetTextDatum(model)};

		if (SPI_execute_with_args(psprintf("SELECT 1 FROM %s WHERE name = $1", ExtensionTableName("transformer_models")),
								  1, t, v, NULL, true, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not look up model");
		if (SPI_processed == 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("model \"%s\" does not exist", model),
					 errhint("Import it with import_model().")));
		ExtSpiFinish(level);
	}

	/*
	 * Citus: the trigger would run on the shards, on the workers, whose
	 * queue is not ours; a distributed table is backfilled from the
	 * coordinator only (README: Scaling out on Citus).
	 */
	if (keep_in_sync)
	{
		int			level = ExtSpiConnect();
		Oid			t[1] = {OIDOID};
		Datum		v[1] = {ObjectIdGetDatum(relid)};

		if (SPI_execute("SELECT pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL", true, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not look for Citus");
		if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &(bool) {false})))
		{
			if (SPI_execute_with_args("SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1 AND partmethod <> 'n'",
									  1, t, v, NULL, true, 1) != SPI_OK_SELECT)
				elog(ERROR, "could not look up the table in Citus");
			if (SPI_processed > 0)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("keep_in_sync is not supported on a Citus distributed table"),
						 errdetail("Its trigger would run on the shards, on the worker nodes."),
						 errhint("Pass keep_in_sync => false, and declare the job again after loading rows.")));
		}
		ExtSpiFinish(level);
	}

	/* one job per target column */
	{
		Oid			t[2] = {OIDOID, TEXTOID};
		Datum		v[2] = {ObjectIdGetDatum(relid), CStringGetTextDatum(target)};
		JobAsOwner o;
		int			ret;

		JobInternalBegin(&o);
		ret = SPI_execute_with_args(psprintf("SELECT id FROM %s WHERE tbl = $1 AND target = $2::name "
											 "AND state IN ('queued', 'running', 'syncing', 'paused', 'failed')",
											 JobTable("transformer_job")), 2, t, v, NULL, false, 1);
		JobInternalEnd(&o);
		if (ret != SPI_OK_SELECT)
			elog(ERROR, "could not look up jobs");
		if (SPI_processed > 0)
		{
			bool		isnull;

			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("column \"%s\" of table \"%s\" already has translation job " INT64_FORMAT,
							target, get_rel_name(relid),
							DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull))),
					 errhint("Cancel that job first with cancel_job().")));
		}
	}

	/* the job row */
	keyd = palloc(sizeof(Datum) * list_length(keys));
	i = 0;
	foreach(lc, keys)
		keyd[i++] = CStringGetDatum(lfirst(lc));
	{
		Oid			t[8] = {OIDOID, TEXTOID, TEXTOID, NAMEARRAYOID, TEXTOID, OIDOID, INT4OID, BOOLOID};
		Datum		v[8];
		Oid			t2[2] = {INT4OID, INT4OID};
		int			ret;
		bool		isnull;

		v[0] = ObjectIdGetDatum(relid);
		v[1] = CStringGetTextDatum(source);
		v[2] = CStringGetTextDatum(target);
		{
			Datum	   *names = palloc(sizeof(Datum) * list_length(keys));

			for (int k = 0; k < list_length(keys); k++)
				names[k] = DirectFunctionCall1(namein, keyd[k]);
			v[3] = PointerGetDatum(construct_array(names, list_length(keys), NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR));
		}
		v[4] = CStringGetTextDatum(model);
		v[5] = ObjectIdGetDatum(GetUserId());
		v[6] = Int32GetDatum(workers);
		v[7] = BoolGetDatum(keep_in_sync);
		(void) t2;
		JobInternalBegin(&s);
		ret = SPI_execute_with_args(psprintf("INSERT INTO %s (tbl, source, target, key_columns, model, owner, workers, "
											 "keep_in_sync, beam, batch_size) VALUES ($1::regclass, $2::name, $3::name, $4, $5, "
											 "$6::regrole, $7, $8, %s, %d) RETURNING id",
											 JobTable("transformer_job"),
											 beam > 0 ? psprintf("%d", beam) : "NULL", batch_size),
									8, t, v, NULL, false, 0);
		JobInternalEnd(&s);
		if (ret != SPI_OK_INSERT_RETURNING)
			elog(ERROR, "could not declare the job");
		id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	lock_job_row(id);

	/*
	 * The sync trigger first, created by the extension's owner (the user
	 * has TRIGGER): its lock waits for the table's writers in progress and
	 * holds new ones until we commit, so the backlog read next (a fresh
	 * snapshot) and the trigger miss no row between them.
	 */
	if (keep_in_sync)
	{
		StringInfoData b;

		initStringInfo(&b);
		appendStringInfo(&b, "CREATE TRIGGER %s AFTER INSERT OR UPDATE ON %s FOR EACH ROW EXECUTE FUNCTION %s.transformer_job_sync(",
						 quote_identifier(trigger_name(id)), qualname,
						 quote_identifier(get_namespace_name(ExtensionSchemaAndOwner(&(Oid) {0}))));
		appendStringInfo(&b, "'" INT64_FORMAT "', %s, %s", id, quote_literal_cstr(source), quote_literal_cstr(target));
		foreach(lc, keys)
			appendStringInfo(&b, ", %s", quote_literal_cstr(lfirst(lc)));
		appendStringInfoChar(&b, ')');
		JobInternalBegin(&s);
		if (SPI_execute(b.data, false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "could not create the sync trigger");
		JobInternalEnd(&s);
	}

	/*
	 * The backlog: keys of the rows whose target is NULL, read as the user
	 * (row-level security applies), queued by the extension's owner.
	 */
	{
		Portal		cur;
		SPIPlanPtr	plan;
		Oid			t[2] = {INT8OID, TEXTARRAYOID};

		plan = SPI_prepare(psprintf("SELECT %s::pg_catalog.text FROM %s t WHERE t.%s IS NULL AND t.%s IS NOT NULL",
									key_json_sql(keys), qualname, quote_identifier(target), quote_identifier(source)),
						   0, NULL);
		if (plan == NULL)
			elog(ERROR, "could not prepare the backlog query: %s", SPI_result_code_string(SPI_result));
		cur = SPI_cursor_open(NULL, plan, NULL, NULL, true);
		for (;;)
		{
			Datum	   *k;
			Datum		v[2];
			uint64		n;

			CHECK_FOR_INTERRUPTS();
			SPI_cursor_fetch(cur, true, BACKFILL_CHUNK);
			n = SPI_processed;
			if (n == 0)
				break;
			k = palloc(sizeof(Datum) * n);
			for (uint64 r = 0; r < n; r++)
			{
				bool		isnull;

				k[r] = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &isnull);
			}
			v[0] = Int64GetDatum(id);
			v[1] = PointerGetDatum(construct_array(k, (int) n, TEXTOID, -1, false, TYPALIGN_INT));
			JobExec(psprintf("INSERT INTO %s (job, key) SELECT $1, k::jsonb FROM unnest($2) k",
								   JobTable("transformer_job_queue")), 2, t, v, NULL, SPI_OK_INSERT);
			pfree(k);
		}
		SPI_cursor_close(cur);
	}

	{
		JobRow		job;

		if (!ReadJob(id, &job))
			elog(ERROR, "job " INT64_FORMAT " vanished", id);
		launch(&job);
	}
	SPI_finish();
	PG_RETURN_INT64(id);
}

/* ------------------------------------------------------------ wait_for_job */

static int64
pending_rows(int64 id)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1] = {Int64GetDatum(id)};
	JobAsOwner s;
	bool		isnull;
	int			ret;

	JobInternalBegin(&s);
	ret = SPI_execute_with_args(psprintf("SELECT count(*) FROM %s WHERE job = $1", JobTable("transformer_job_queue")),
								1, t, v, NULL, false, 1);
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
	TimestampTz next_launch = 0;
	bool		done = false;

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
		if (next_launch == 0 && TransactionIdIsCurrentTransactionId(job.xmin))
			ereport(ERROR,
					(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
					 errmsg("cannot wait for job " INT64_FORMAT " in the transaction that changed it", id),
					 errdetail("Its workers start when this transaction commits."),
					 errhint("Commit first, then call wait_for_job().")));
		if (strcmp(job.state, "cancelled") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("job " INT64_FORMAT " was cancelled", id)));
		if (strcmp(job.state, "failed") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("job " INT64_FORMAT " failed", id),
					 errhint("transformer_jobs.last_error says why; resume_job() starts it again.")));
		pending = pending_rows(id);
		if (pending == 0)
		{
			done = true;
			break;
		}
		if (IsolationUsesXactSnapshot())
			ereport(ERROR,
					(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
					 errmsg("cannot wait for a job in a REPEATABLE READ or SERIALIZABLE transaction"),
					 errdetail("Its snapshot would never see the workers' progress.")));
		/* every few seconds: start workers that are missing (no slot before, or killed) */
		if (GetCurrentTimestamp() >= next_launch &&
			(strcmp(job.state, "queued") == 0 || strcmp(job.state, "running") == 0 ||
			 strcmp(job.state, "syncing") == 0 || strcmp(job.state, "done") == 0))
		{
			if (strcmp(job.state, "done") == 0)
				job.workers = 1;	/* rows requeued after the end (a stale write) */

			/*
			 * No write of the job row here: this transaction lasts as long
			 * as the wait, and a worker's first batch updates that row.
			 * Worker 1 says which workers wait for a slot.
			 */
			(void) LaunchJobWorkers(id, job.owner, job.workers);
			next_launch = GetCurrentTimestamp() + 2 * USECS_PER_SEC;
		}
		if (deadline != 0 && GetCurrentTimestamp() >= deadline)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 100, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
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
	lock_job_row(PG_GETARG_INT64(0));
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
	lock_job_row(PG_GETARG_INT64(0));
	get_visible_job(PG_GETARG_INT64(0), &job, true);
	if (!state_in(&job, ok))
		wrong_state(&job, "resume");
	if (strcmp(job.state, "paused") == 0 || strcmp(job.state, "failed") == 0)
		set_state(job.id, "queued", ", last_error = NULL, finished_at = NULL");
	if (strcmp(job.state, "done") != 0)
		launch(&job);
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
	lock_job_row(PG_GETARG_INT64(0));
	get_visible_job(PG_GETARG_INT64(0), &job, true);
	if (strcmp(job.state, "cancelled") != 0)
	{
		drop_sync_trigger(&job);
		set_state(job.id, "cancelled", ", waiting = NULL, finished_at = pg_catalog.now()");
		v[0] = Int64GetDatum(job.id);
		JobExec(psprintf("DELETE FROM %s WHERE job = $1", JobTable("transformer_job_queue")),
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
	lock_job_row(PG_GETARG_INT64(0));
	get_visible_job(PG_GETARG_INT64(0), &job, true);
	if (strcmp(job.state, "cancelled") == 0)
		wrong_state(&job, "retry the errors of");
	v[0] = Int64GetDatum(job.id);
	JobExec(psprintf("WITH e AS (DELETE FROM %s WHERE job = $1 RETURNING key) "
						   "INSERT INTO %s (job, key) SELECT $1, key FROM e",
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
		if (strcmp(job.state, "paused") != 0 && strcmp(job.state, "failed") != 0)
			launch(&job);
	}
	SPI_finish();
	PG_RETURN_INT64(n);
}

/* ------------------------------------------------------------ the sync trigger */

static SPIPlanPtr enqueue_plan = NULL;
static Oid	enqueue_plan_queue = InvalidOid;

static Datum
column_value(HeapTuple tup, TupleDesc desc, const char *name, int64 job, bool *isnull)
{
	int			att = SPI_fnumber(desc, name);

	if (att <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of translation job " INT64_FORMAT " does not exist", name, job),
				 errdetail("It was renamed or dropped after the job was declared."),
				 errhint("Cancel the job with cancel_job(" INT64_FORMAT ") and declare it again.", job)));
	return heap_getattr(tup, att, desc, isnull);
}

static bool
same_value(Datum a, bool anull, Datum b, bool bnull, Form_pg_attribute att)
{
	if (anull || bnull)
		return anull && bnull;
	return datum_image_eq(a, b, att->attbyval, att->attlen);
}

PG_FUNCTION_INFO_V1(transformer_job_sync);
Datum
transformer_job_sync(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	Trigger    *tg;
	TupleDesc	desc;
	HeapTuple	row;
	int64		job;
	bool		snull,
				tnull;
	Datum		src;
	bool		queue = false;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("transformer_job_sync: not called as a trigger")));
	tg = td->tg_trigger;
	if (!TRIGGER_FIRED_FOR_ROW(td->tg_event) || !TRIGGER_FIRED_AFTER(td->tg_event) ||
		TRIGGER_FIRED_BY_DELETE(td->tg_event) || tg->tgnargs < 4)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("transformer_job_sync must be an AFTER INSERT OR UPDATE row trigger with a job, its columns and key")));
	job = pg_strtoint64(tg->tgargs[0]);
	desc = RelationGetDescr(td->tg_relation);
	row = TRIGGER_FIRED_BY_UPDATE(td->tg_event) ? td->tg_newtuple : td->tg_trigtuple;
	src = column_value(row, desc, tg->tgargs[1], job, &snull);
	(void) column_value(row, desc, tg->tgargs[2], job, &tnull);
	if (TRIGGER_FIRED_BY_INSERT(td->tg_event))
		queue = !snull && tnull;
	else
	{
		bool		osnull,
					otnull;
		Datum		osrc = column_value(td->tg_trigtuple, desc, tg->tgargs[1], job, &osnull);

		(void) column_value(td->tg_trigtuple, desc, tg->tgargs[2], job, &otnull);

		/* the source changed; or the target was cleared: translate again */
		queue = !same_value(src, snull, osrc, osnull, TupleDescAttr(desc, SPI_fnumber(desc, tg->tgargs[1]) - 1)) ||
			(tnull && !otnull && !snull);
	}
	if (queue)
	{
		StringInfoData key;
		JobAsOwner s;
		Oid			queue_rel;
		Datum		v[2];

		initStringInfo(&key);
		appendStringInfoChar(&key, '[');
		for (int i = 3; i < tg->tgnargs; i++)
		{
			bool		isnull;
			Datum		d = column_value(row, desc, tg->tgargs[i], job, &isnull);
			Oid			typoutput;
			bool		varlena;
			int			att = SPI_fnumber(desc, tg->tgargs[i]);

			if (i > 3)
				appendStringInfoString(&key, ", ");
			if (isnull)
			{
				appendStringInfoString(&key, "null");
				continue;
			}
			getTypeOutputInfo(TupleDescAttr(desc, att - 1)->atttypid, &typoutput, &varlena);
			escape_json(&key, OidOutputFunctionCall(typoutput, d));
		}
		appendStringInfoChar(&key, ']');

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		JobInternalBegin(&s);
		queue_rel = ExtensionTableOid("transformer_job_queue");
		if (enqueue_plan == NULL || enqueue_plan_queue != queue_rel)
		{
			Oid			t[2] = {INT8OID, TEXTOID};
			SPIPlanPtr	p = SPI_prepare(psprintf("INSERT INTO %s (job, key) VALUES ($1, $2::jsonb)",
												 JobTable("transformer_job_queue")), 2, t);

			if (p == NULL || SPI_keepplan(p) != 0)
				elog(ERROR, "could not prepare the queue insert");
			if (enqueue_plan)
				SPI_freeplan(enqueue_plan);
			enqueue_plan = p;
			enqueue_plan_queue = queue_rel;
		}
		v[0] = Int64GetDatum(job);
		v[1] = CStringGetTextDatum(key.data);
		if (SPI_execute_plan(enqueue_plan, v, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not queue the row");
		JobInternalEnd(&s);
		SPI_finish();
	}
	return PointerGetDatum(NULL);
}
