/*
 * job_store.c
 *		The job tables as both sides read them: job rows, the owner switch
 *		for internal SQL, the fixed settings of row keys, the per-job locks,
 *		the declaring role's rights, and transformer_job.waiting.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "commands/extension.h"
#include "utils/snapmgr.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/rls.h"
#include "utils/syscache.h"
#include "catalog/pg_class.h"

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

int
JobKeySettingsBegin(bool with_search_path)
{
	static const char *const settings[][2] = {
		{"DateStyle", "ISO, YMD"},
		{"IntervalStyle", "postgres"},
		{"TimeZone", "UTC"},
		{"extra_float_digits", "1"},
		{"bytea_output", "hex"},
	};
	int			level = NewGUCNestLevel();

	for (int i = 0; i < lengthof(settings); i++)
		(void) set_config_option(settings[i][0], settings[i][1], PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	if (with_search_path)
		(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	return level;
}

void
JobKeySettingsEnd(int level)
{
	AtEOXact_GUC(true, level);
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
										 "xmin::text::bigint, kind, format, keep, source_lang, target_lang, "
										 "source_lang_column::text, new_model, settings::text FROM %s WHERE id = $1",
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
	if (isnull)
		job->relid = InvalidOid;
	job->source = SPI_getvalue(tup, desc, 2);
	job->target = SPI_getvalue(tup, desc, 3);
	d = SPI_getbinval(tup, desc, 4, &isnull);
	if (!isnull)
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
	job->embed = strcmp(SPI_getvalue(tup, desc, 13), "embed") == 0;
	job->fine_tune = strcmp(SPI_getvalue(tup, desc, 13), "fine_tune") == 0;
	job->format = SPI_getvalue(tup, desc, 14);
	d = SPI_getbinval(tup, desc, 15, &isnull);
	job->keep = isnull ? (Datum) 0 : PointerGetDatum(DatumGetArrayTypePCopy(d));
	job->source_lang = SPI_getvalue(tup, desc, 16);
	job->target_lang = SPI_getvalue(tup, desc, 17);
	job->lang_column = SPI_getvalue(tup, desc, 18);
	job->new_model = SPI_getvalue(tup, desc, 19);
	job->settings = SPI_getvalue(tup, desc, 20);
	return true;
}

void
JobAsTableOwnerBegin(JobAsTableOwner *s, Oid relid)
{
	Oid			owner = RelationOwner(relid);

	if (!OidIsValid(owner))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the table of the job was dropped")));
	GetUserIdAndSecContext(&s->saved_user, &s->saved_sec);
	SetUserIdAndSecContext(owner, s->saved_sec | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	s->level = JobKeySettingsBegin(false);
}

void
JobAsTableOwnerEnd(JobAsTableOwner *s)
{
	JobKeySettingsEnd(s->level);
	SetUserIdAndSecContext(s->saved_user, s->saved_sec);
}

/* What the role lacks on a column (NULL: nothing); *code its SQLSTATE. */
static char *
column_problem(Oid relid, Oid role, const char *col, AclMode mode, int *code)
{
	AttrNumber	att = get_attnum(relid, col);

	if (att == InvalidAttrNumber)
	{
		*code = ERRCODE_UNDEFINED_COLUMN;
		return psprintf("column \"%s\" of relation \"%s\" does not exist", col, get_rel_name(relid));
	}
	if (pg_attribute_aclcheck(relid, att, role, mode) != ACLCHECK_OK &&
		pg_class_aclcheck(relid, role, mode) != ACLCHECK_OK)
	{
		*code = ERRCODE_INSUFFICIENT_PRIVILEGE;
		return psprintf("permission denied for table %s: role \"%s\" needs %s on column \"%s\"",
						get_rel_name(relid), GetUserNameFromId(role, false),
						mode == ACL_SELECT ? "SELECT" : "UPDATE", col);
	}
	return NULL;
}

char *
JobPrivilegeProblem(Oid relid, Oid role, const char *source, const char *target,
					const char *lang_column, int nkeys, char **keys, int *code)
{
	char	   *p = NULL;

	if (get_rel_name(relid) == NULL)
	{
		*code = ERRCODE_UNDEFINED_TABLE;
		return pstrdup("the job's table was dropped");
	}
	for (int i = 0; i < nkeys && p == NULL; i++)
		p = column_problem(relid, role, keys[i], ACL_SELECT, code);
	if (p == NULL)
		p = column_problem(relid, role, source, ACL_SELECT, code);
	if (p == NULL && lang_column)
		p = column_problem(relid, role, lang_column, ACL_SELECT, code);
	if (p == NULL)
		p = column_problem(relid, role, target, ACL_SELECT, code);
	if (p == NULL)
		p = column_problem(relid, role, target, ACL_UPDATE, code);
	if (p)
		return p;

	/*
	 * Row-level security that applies to the role: its policies are code
	 * the table's owner attached, and the role's rows are those its
	 * policies give when they run as the role.  A worker never runs the
	 * table's code with the declaring role's rights, so it cannot apply them.
	 */
	if (!has_privs_of_role(role, RelationOwner(relid)) &&
		check_enable_rls(relid, role, true) == RLS_ENABLED)
	{
		*code = ERRCODE_FEATURE_NOT_SUPPORTED;
		return psprintf("row-level security of table \"%s\" applies to role \"%s\"", get_rel_name(relid),
						GetUserNameFromId(role, false));
	}
	return NULL;
}

void
CheckJobPrivileges(Oid relid, Oid role, const char *source, const char *target,
				   const char *lang_column, int nkeys, char **keys)
{
	int			code = 0;
	char	   *p = JobPrivilegeProblem(relid, role, source, target, lang_column, nkeys, keys, &code);

	if (p == NULL)
		return;
	if (code == ERRCODE_FEATURE_NOT_SUPPORTED)
		ereport(ERROR,
				(errcode(code),
				 errmsg("%s", p),
				 errdetail("A job's workers run the table's code as its owner, never with the declaring role's rights, "
						   "so they cannot apply policies written for that role."),
				 errhint("Have the table's owner, or a role with BYPASSRLS, declare the job.")));
	if (code == ERRCODE_INSUFFICIENT_PRIVILEGE)
	{
		char	   *colon = strchr(p, ':');

		*colon = '\0';
		ereport(ERROR,
				(errcode(code),
				 errmsg("%s", p),
				 errdetail("Role%s.", colon + 7)));
	}
	ereport(ERROR, (errcode(code), errmsg("%s", p)));
}

void
JobLockTag(LOCKTAG *tag, Oid dboid, int64 job, int k)
{
	SET_LOCKTAG_ADVISORY(*tag, dboid, (uint32) job,
						 ((uint32) (job >> 32) << 8) | (uint32) k, JOB_LOCK_CLASS);
}

bool
JobWorkerRunning(Oid dboid, int64 job, int k)
{
	LOCKTAG		tag;

	JobLockTag(&tag, dboid, job, k);
	if (LockAcquire(&tag, ExclusiveLock, false, true) == LOCKACQUIRE_NOT_AVAIL)
		return true;
	LockRelease(&tag, ExclusiveLock, false);
	return false;
}

void
SetJobWaiting(int64 job, const char *why)
{
	Oid			types[2] = {INT8OID, TEXTOID};
	Datum		values[2];
	char		nulls[2] = {' ', ' '};

	values[0] = Int64GetDatum(job);
	if (why)
		values[1] = CStringGetTextDatum(why);
	else
		nulls[1] = 'n';
	JobExec(psprintf("UPDATE %s SET waiting = $2 WHERE id = $1 AND waiting IS DISTINCT FROM $2",
					 JobTable("transformer_job")), 2, types, values, nulls, SPI_OK_UPDATE);
}

/* The lock that keeps workers from reading a job row until its writer commits. */
void
LockJobRow(int64 id)
{
	LOCKTAG		tag;

	JobLockTag(&tag, MyDatabaseId, id, 0);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

/* The job failed as a whole: say why in its row, in a transaction of its own (an error here too: only logged). */
void
FailJobNow(int64 job, const char *message)
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
		JobExec(psprintf("UPDATE %s SET state = 'failed', last_error = $2, finished_at = pg_catalog.now(), waiting = NULL "
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

/* Is job a fine_tune() job?  In a transaction of its own; false if it is gone. */
bool
JobIsFineTune(int64 job)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1] = {Int64GetDatum(job)};
	bool		fine_tune = false;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PushActiveSnapshot(GetTransactionSnapshot());
	if (OidIsValid(get_extension_oid("transformer", true)))
	{
		JobExec(psprintf("SELECT kind = 'fine_tune' FROM %s WHERE id = $1", JobTable("transformer_job")),
				1, t, v, NULL, SPI_OK_SELECT);
		if (SPI_processed > 0)
		{
			bool		isnull;

			fine_tune = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		}
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	return fine_tune;
}
