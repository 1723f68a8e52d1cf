/*
 * job_batch.c
 *		The rows of one batch of a job worker (job_batch.h): chunks of keys
 *		taken off the queue (FOR UPDATE SKIP LOCKED), their rows read, and
 *		each written back only if its source and target are still the ones
 *		read; a row that fails is recorded, not the batch.  All of it as the
 *		table's owner, inside a security-restricted operation (job_worker.c
 *		says why).
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"

#include "job_batch.h"
#include "jobs.h"

/* Errors of one row, recorded; the rest (cancel, shutdown, deadlock, I/O, internal) end the batch. */
static bool
row_error(const ErrorData *e)
{
	int			class = ERRCODE_TO_CATEGORY(e->sqlerrcode);

	return e->elevel == ERROR &&
		class != ERRCODE_TO_CATEGORY(ERRCODE_T_R_SERIALIZATION_FAILURE) &&
		class != ERRCODE_TO_CATEGORY(ERRCODE_ADMIN_SHUTDOWN) &&
		class != ERRCODE_TO_CATEGORY(ERRCODE_IO_ERROR) &&
		class != ERRCODE_TO_CATEGORY(ERRCODE_INTERNAL_ERROR);
}

/*
 * Run fn(arg) in a subtransaction.  True if it succeeded; otherwise a row
 * error is stored in r, and anything else is thrown again.
 */
bool
BatchInSubxact(void (*fn) (void *), void *arg, BatchRow *r)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	bool		ok = false;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		ok = true;
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		if (!row_error(e) || r == NULL)
			ReThrowError(e);
		r->failed = true;
		strlcpy(r->sqlstate, unpack_sql_state(e->sqlerrcode), sizeof(r->sqlstate));
		r->message = pstrdup(e->message ? e->message : "");
		FreeErrorData(e);
	}
	PG_END_TRY();
	return ok;
}

/* WHERE clause matching the key in parameter $1 (a JSON array as text), alias t */
static char *
key_match_sql(const JobRow *job, const char *key)
{
	StringInfoData b;

	initStringInfo(&b);
	for (int i = 0; i < job->nkeys; i++)
	{
		AttrNumber	att = get_attnum(job->relid, job->keys[i]);

		if (att == InvalidAttrNumber)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("key column \"%s\" of table \"%s\" does not exist", job->keys[i],
							get_rel_name(job->relid))));
		appendStringInfo(&b, "%st.%s = (%s::pg_catalog.jsonb OPERATOR(pg_catalog.->>) %d)::%s",
						 i ? " AND " : "", quote_identifier(job->keys[i]), key, i,
						 format_type_be_qualified(get_atttype(job->relid, att)));
	}
	return b.data;
}

char *
BatchTableSql(const JobRow *job)
{
	char	   *rel = get_rel_name(job->relid);

	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the table of job " INT64_FORMAT " was dropped", job->id)));
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(job->relid)), rel);
}

/* Wait until no transaction that changes the job row is in progress. */
void
BatchWaitWriters(int64 job)
{
	LOCKTAG		tag;

	JobLockTag(&tag, MyDatabaseId, job, 0);
	(void) LockAcquire(&tag, ShareLock, false, false);
	LockRelease(&tag, ShareLock, false);
}

/* Take chunks of keys off the queue, at least batch_size keys if there are; deduplicated. */
int
BatchClaimKeys(const JobRow *job, BatchRow **rows_out)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1] = {Int64GetDatum(job->id)};
	int			cap = job->batch_size * 2 + 16;
	BatchRow   *rows = palloc0(sizeof(BatchRow) * cap);
	int			n = 0,
				taken = 0;
	char	   *sql = psprintf("WITH c AS (DELETE FROM %1$s WHERE id = (SELECT id FROM %1$s WHERE job = $1 ORDER BY id "
							   "LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING keys, targets) "
							   "SELECT k.key::pg_catalog.text, (c.targets OPERATOR(pg_catalog.->) (k.ord - 1)::pg_catalog.int4)::pg_catalog.text "
							   "FROM c, pg_catalog.jsonb_array_elements(c.keys) WITH ORDINALITY AS k(key, ord)",
							   JobTable("transformer_job_queue"));

	while (taken < job->batch_size)
	{
		JobExec(sql, 1, t, v, NULL, SPI_OK_SELECT);
		if (SPI_processed == 0)
			break;
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			char	   *k = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
			char	   *snap = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
			int			j;

			taken++;
			for (j = 0; j < n; j++)
				if (strcmp(rows[j].key, k) == 0)
					break;		/* queued again: the later state counts */
			if (j == n)
			{
				if (n == cap)
				{
					cap *= 2;
					rows = repalloc(rows, sizeof(BatchRow) * cap);
					memset(rows + n, 0, sizeof(BatchRow) * (cap - n));
				}
				rows[n++].key = k;
			}
			/* no state (retried errors, 0.8.0's queue): no check */
			rows[j].check_target = snap != NULL;
			rows[j].snap_null = snap != NULL && strcmp(snap, "null") == 0;
			rows[j].snap_hash = snap != NULL && !rows[j].snap_null ? (uint32) strtoul(snap, NULL, 10) : 0;
		}
	}
	*rows_out = rows;
	return n;
}

/* The queue is empty: the job is syncing (keep_in_sync) or done. */
void
BatchSettleState(int64 job)
{
	Oid			t[1] = {INT8OID};
	Datum		v[1] = {Int64GetDatum(job)};

	JobExec(psprintf("UPDATE %s j SET state = CASE WHEN keep_in_sync THEN 'syncing' ELSE 'done' END, "
					 "finished_at = CASE WHEN keep_in_sync THEN NULL ELSE pg_catalog.now() END "
					 "WHERE id = $1 AND state IN ('queued', 'running') "
					 "AND NOT EXISTS (SELECT FROM %s q WHERE q.job = $1)",
					 JobTable("transformer_job"), JobTable("transformer_job_queue")),
			1, t, v, NULL, SPI_OK_UPDATE);
}

/* Read the rows of the claimed keys: source, target and language as they are now. */
/*
 * The worker's statements on its table, planned once (a worker does one
 * job): the plan cache re-plans them if the table changes.
 */
enum
{
	PLAN_READ, PLAN_WRITE_BATCH, PLAN_WRITE_ROW, NUM_PLANS
};
static SPIPlanPtr plans[NUM_PLANS];

static SPIPlanPtr
job_plan(int which, const char *sql, int nargs, Oid *types)
{
	if (plans[which] == NULL)
	{
		SPIPlanPtr	p = SPI_prepare(sql, nargs, types);

		if (p == NULL || SPI_keepplan(p) != 0)
			elog(ERROR, "could not prepare a statement of job " INT64_FORMAT ": %s", my_job,
				 SPI_result_code_string(SPI_result));
		plans[which] = p;
	}
	return plans[which];
}

/* The keys of rows as a text[] (those with rows[i].exists, or all) */
static Datum
keys_array(int n, BatchRow *rows, bool existing)
{
	Datum	   *d = palloc(sizeof(Datum) * (n + 1));
	int			m = 0;

	for (int i = 0; i < n; i++)
		if (!existing || rows[i].exists)
			d[m++] = CStringGetTextDatum(rows[i].key);
	return PointerGetDatum(construct_array(d, m, TEXTOID, -1, false, TYPALIGN_INT));
}

/*
 * Nested loops over the key's index, never a scan of the whole table for a
 * batch: the planner cannot know that the batch is a few rows.
 */
static int
index_lookups_begin(void)
{
	int			level = NewGUCNestLevel();

	(void) set_config_option("enable_hashjoin", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("enable_mergejoin", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	return level;
}

/*
 * Read the rows of the claimed keys, all in one statement: source, target
 * and language as they are now.  A fresh snapshot (read_only false): the
 * transaction's first one is older than the claim, and would miss rows
 * inserted or changed between them, whose keys the claim took.
 */
void
BatchReadRows(const JobRow *job, const char *tbl, int n, BatchRow *rows)
{
	Oid			t[1] = {TEXTARRAYOID};
	Datum		v[1];
	SPIPlanPtr	plan;
	JobAsTableOwner as;
	int			level;

	if (plans[PLAN_READ] == NULL)
		plan = job_plan(PLAN_READ,
						psprintf("SELECT k.ord::pg_catalog.int4, r.* FROM pg_catalog.unnest($1) WITH ORDINALITY AS k(key, ord) "
								 "CROSS JOIN LATERAL (SELECT t.%s::pg_catalog.text, t.%s::pg_catalog.text, %s, t.%s "
								 "FROM %s t WHERE %s LIMIT 1) r",
								 quote_identifier(job->source), quote_identifier(job->target),
								 job->lang_column ? psprintf("t.%s::pg_catalog.text", quote_identifier(job->lang_column)) : "NULL::pg_catalog.text",
								 quote_identifier(job->target), tbl, key_match_sql(job, "k.key")), 1, t);
	else
		plan = plans[PLAN_READ];
	v[0] = keys_array(n, rows, false);
	JobAsTableOwnerBegin(&as, job->relid);
	level = index_lookups_begin();
	if (SPI_execute_plan(plan, v, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the rows of job " INT64_FORMAT, job->id);
	AtEOXact_GUC(true, level);
	JobAsTableOwnerEnd(&as);
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int			i = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull)) - 1;
		Datum		d = SPI_getbinval(tup, desc, 2, &isnull);

		rows[i].exists = true;
		rows[i].source = isnull ? NULL : DatumGetTextPCopy(d);
		rows[i].old_target = SPI_getvalue(tup, desc, 3);
		rows[i].lang = SPI_getvalue(tup, desc, 4);
		d = SPI_getbinval(tup, desc, 5, &isnull);
		rows[i].target_null = isnull;
		rows[i].target_hash = isnull ? 0 : datum_image_hash(d, TupleDescAttr(desc, 4)->attbyval, TupleDescAttr(desc, 4)->attlen);
	}
}

/* The batch's UPDATE: rows in parameters $1.. as arrays, or one row's values */
static char *
write_sql(const JobRow *job, const char *tbl, bool batch)
{
	const char *cast = job->embed ? "::pg_catalog.float4[]" : "";

	if (batch)
		return psprintf("UPDATE %s t SET %s = u.out%s FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), "
						"pg_catalog.unnest($3), pg_catalog.unnest($4), pg_catalog.unnest($5)) AS u(key, out, src, old, lang) "
						"WHERE %s AND t.%s::pg_catalog.text IS NOT DISTINCT FROM u.src "
						"AND t.%s::pg_catalog.text IS NOT DISTINCT FROM u.old%s RETURNING u.key",
						tbl, quote_identifier(job->target), cast, key_match_sql(job, "u.key"),
						quote_identifier(job->source), quote_identifier(job->target),
						job->lang_column ? psprintf(" AND t.%s::pg_catalog.text IS NOT DISTINCT FROM u.lang",
													quote_identifier(job->lang_column)) : "");
	return psprintf("UPDATE %s t SET %s = $2%s WHERE %s AND t.%s::pg_catalog.text IS NOT DISTINCT FROM $3 "
					"AND t.%s::pg_catalog.text IS NOT DISTINCT FROM $4%s RETURNING $1",
					tbl, quote_identifier(job->target), cast, key_match_sql(job, "$1"), quote_identifier(job->source),
					quote_identifier(job->target),
					job->lang_column ? psprintf(" AND t.%s::pg_catalog.text IS NOT DISTINCT FROM $5",
												quote_identifier(job->lang_column)) : "");
}

typedef struct WriteArgs
{
	SPIPlanPtr	plan;
	Datum	   *values;
	char	   *nulls;
	int			n;
	BatchRow   *rows;
	bool	   *written;
} WriteArgs;

/* Run the write; mark the rows whose keys it returned. */
static void
write_fn(void *p)
{
	WriteArgs  *a = p;
	int			ret = SPI_execute_plan(a->plan, a->values, a->nulls, false, 0);

	if (ret != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not write the result: %s", SPI_result_code_string(ret));
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		char	   *k = SPI_getvalue(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1);

		for (int i = 0; i < a->n; i++)
			if (!a->written[i] && strcmp(a->rows[i].key, k) == 0)
			{
				a->written[i] = true;
				break;
			}
	}
}

static Datum
text_array(int n, char **v)
{
	Datum	   *d = palloc(sizeof(Datum) * (n + 1));
	bool	   *nulls = palloc(sizeof(bool) * (n + 1));
	int			dims[1] = {n};
	int			lbs[1] = {1};

	for (int i = 0; i < n; i++)
	{
		nulls[i] = v[i] == NULL;
		d[i] = v[i] ? CStringGetTextDatum(v[i]) : (Datum) 0;
	}
	return PointerGetDatum(construct_md_array(d, nulls, 1, dims, lbs, TEXTOID, -1, false, TYPALIGN_INT));
}

/*
 * Write each row whose source, language and target are still the ones read
 * (a target written by hand meanwhile stays): one UPDATE for the batch; if
 * a row makes it fail, one UPDATE per row, so that only that row fails.
 * Returns the rows written; *stale gets the keys to queue again (a source
 * changed under a job that has no trigger to queue it).
 */
int64
BatchWriteRows(const JobRow *job, const char *tbl, int n, BatchRow *rows, List **stale)
{
	JobAsTableOwner as;
	int64		done = 0;
	bool	   *skip = palloc0(sizeof(bool) * (n + 1));
	bool	   *written = palloc0(sizeof(bool) * (n + 1));
	char	  **key = palloc0(sizeof(char *) * (n + 1)),
			  **out = palloc0(sizeof(char *) * (n + 1)),
			  **src = palloc0(sizeof(char *) * (n + 1)),
			  **old = palloc0(sizeof(char *) * (n + 1)),
			  **lang = palloc0(sizeof(char *) * (n + 1));
	int			m = 0;
	int		   *idx = palloc(sizeof(int) * (n + 1));
	WriteArgs	wa;

	pgstat_report_activity(STATE_RUNNING, psprintf("writing %d rows", n));
	JobAsTableOwnerBegin(&as, job->relid);	/* the key settings: real[] as text exactly */
	for (int i = 0; i < n; i++)
	{
		if (!rows[i].exists || rows[i].failed)
		{
			skip[i] = true;		/* deleted meanwhile; or failed */
			continue;
		}
		if (rows[i].check_target &&
			(rows[i].snap_null != rows[i].target_null ||
			 (!rows[i].target_null && rows[i].snap_hash != rows[i].target_hash)))
		{
			skip[i] = true;		/* its target was written by hand since it was queued: it stays */
			done++;
			continue;
		}
		key[m] = rows[i].key;
		out[m] = rows[i].out == (Datum) 0 ? NULL : job->embed ?
			OidOutputFunctionCall(F_ARRAY_OUT, rows[i].out) : TextDatumGetCString(rows[i].out);
		/* the same result is there already (a key queued twice): nothing to write */
		if (out[m] && rows[i].old_target && strcmp(out[m], rows[i].old_target) == 0)
		{
			skip[i] = true;
			done++;
			continue;
		}
		src[m] = rows[i].source ? text_to_cstring(rows[i].source) : NULL;
		old[m] = rows[i].old_target;
		lang[m] = rows[i].lang;
		idx[m++] = i;
	}
	if (m > 0)
	{
		Oid			t[5] = {TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID};
		Datum		v[5];
		BatchRow	batch_error;
		BatchRow   *wrows = palloc0(sizeof(BatchRow) * m);
		bool	   *wwritten = palloc0(sizeof(bool) * m);
		int			level;

		memset(&batch_error, 0, sizeof(batch_error));
		for (int j = 0; j < m; j++)
			wrows[j].key = key[j];
		v[0] = text_array(m, key);
		v[1] = text_array(m, out);
		v[2] = text_array(m, src);
		v[3] = text_array(m, old);
		v[4] = text_array(m, lang);
		wa.plan = plans[PLAN_WRITE_BATCH] ? plans[PLAN_WRITE_BATCH] :
			job_plan(PLAN_WRITE_BATCH, write_sql(job, tbl, true), 5, t);
		wa.values = v;
		wa.nulls = NULL;
		wa.n = m;
		wa.rows = wrows;
		wa.written = wwritten;
		level = index_lookups_begin();
		if (!BatchInSubxact(write_fn, &wa, &batch_error))
		{
			/* a row made the batch fail: each row alone, to find it */
			Oid			t1[5] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
			SPIPlanPtr	one = plans[PLAN_WRITE_ROW] ? plans[PLAN_WRITE_ROW] :
				job_plan(PLAN_WRITE_ROW, write_sql(job, tbl, false), job->lang_column ? 5 : 4, t1);
			memset(wwritten, 0, sizeof(bool) * m);
			for (int j = 0; j < m; j++)
			{
				Datum		v1[5];
				char		n1[5];
				char	   *vals[5] = {key[j], out[j], src[j], old[j], lang[j]};
				WriteArgs	wa1 = wa;

				CHECK_FOR_INTERRUPTS();
				for (int c = 0; c < 5; c++)
				{
					v1[c] = vals[c] ? CStringGetTextDatum(vals[c]) : (Datum) 0;
					n1[c] = vals[c] ? ' ' : 'n';
				}
				wa1.plan = one;
				wa1.values = v1;
				wa1.nulls = n1;
				(void) BatchInSubxact(write_fn, &wa1, &rows[idx[j]]);
			}
		}
		AtEOXact_GUC(true, level);
		for (int j = 0; j < m; j++)
			written[idx[j]] = wwritten[j];
	}
	JobAsTableOwnerEnd(&as);

	for (int i = 0; i < n; i++)
	{
		if (skip[i] || rows[i].failed)
			continue;
		if (written[i])
			done++;
		else if (!job->keep_in_sync)
			*stale = lappend(*stale, &rows[i]);
	}
	return done;
}

/*
 * Rows not written by a job without triggers: queue again those whose
 * source (or language) changed since they were read; a target written by
 * hand meanwhile stays as it is.
 */
void
BatchRequeueStale(const JobRow *job, const char *tbl, List *stale)
{
	BatchRow   *again;
	int			n = list_length(stale);
	int			i = 0;
	ListCell   *lc;
	Oid			t[3] = {INT8OID, TEXTOID, TEXTOID};

	if (n == 0)
		return;
	again = palloc0(sizeof(BatchRow) * n);
	foreach(lc, stale)
		again[i++].key = ((BatchRow *) lfirst(lc))->key;
	BatchReadRows(job, tbl, n, again);
	i = 0;
	foreach(lc, stale)
	{
		BatchRow   *was = lfirst(lc);
		BatchRow   *now = &again[i++];
		bool		same_source = (was->source == NULL) == (now->source == NULL) &&
			(was->source == NULL || strcmp(text_to_cstring(was->source), text_to_cstring(now->source)) == 0);
		bool		same_lang = (was->lang == NULL) == (now->lang == NULL) &&
			(was->lang == NULL || strcmp(was->lang, now->lang) == 0);

		if (now->exists && (!same_source || !same_lang))
		{
			Datum		qv[3] = {Int64GetDatum(job->id), CStringGetTextDatum(now->key),
			CStringGetTextDatum(now->target_null ? "null" : psprintf("%u", now->target_hash))};

			JobExec(psprintf("INSERT INTO %s (job, keys, n, targets) VALUES ($1, pg_catalog.jsonb_build_array($2::pg_catalog.jsonb), 1, "
							 "pg_catalog.jsonb_build_array($3::pg_catalog.jsonb))",
							 JobTable("transformer_job_queue")), 3, t, qv, NULL, SPI_OK_INSERT);
		}
	}
}
