/*
 * sql_jobs.c
 *		Background jobs declared: translate_column() and embed_column(),
 *		their arguments checked, the queue filled, the sync triggers made.
 *		The jobs are followed and steered in sql_job_control.c; the sync
 *		triggers run in job_sync.c, the supervisor and the workers in
 *		src/worker/.
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
#include "catalog/pg_inherits.h"
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
#include "model_store.h"
#include "translate.h"

extern char *transformer_default_model;

#define DEFAULT_BATCH_SIZE 8
#define DEFAULT_EMBED_BATCH_SIZE 1
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

/* ------------------------------------------------------------ translate_column, embed_column */

/* What translate_column() and embed_column() were given */
typedef struct JobSpec
{
	bool		embed;
	Oid			relid;
	char	   *source;
	char	   *target;
	char	   *model;
	int			workers;
	bool		keep_in_sync;
	int			beam;			/* 0: the model's */
	int			batch_size;
	char	   *format;			/* NULL: none given */
	Datum		keep;			/* text[]; 0: NULL */
	char	   *source_lang;
	char	   *target_lang;
	char	   *lang_column;
} JobSpec;

/* An embedding target: real[], or any type real[] assigns to (double precision[], pgvector's vector) */
static void
check_embed_target(Oid relid, const char *name, AttrNumber *att)
{
	Oid			type;
	Oid			from = FLOAT4ARRAYOID;

	*att = get_attnum(relid, name);
	if (*att == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist", name, get_rel_name(relid))));
	if (*att < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("target column must not be a system column")));
	type = get_atttype(relid, *att);
	if (!can_coerce_type(1, &from, &type, COERCION_ASSIGNMENT))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("target column \"%s\" must be of type real[] or vector", name),
				 errdetail("It is of type %s, to which real[] does not assign.", format_type_be(type))));
}

/*
 * The job's options as one call of translate() with them: a bad format,
 * keep kind or language is refused now, with translate()'s own error.
 */
static void
check_translate_options(const JobSpec *js)
{
	JobRow		job;
	CallOptions o;
	text	   *in = cstring_to_text("Ja.");
	text	   *out;

	memset(&job, 0, sizeof(job));
	memset(&o, 0, sizeof(o));
	if (js->format)
	{
		o.given[OPT_FORMAT] = true;
		o.value[OPT_FORMAT] = CStringGetTextDatum(js->format);
	}
	if (js->keep)
	{
		o.given[OPT_KEEP] = true;
		o.value[OPT_KEEP] = js->keep;
	}
	if (js->source_lang)
	{
		o.given[OPT_SOURCE_LANG] = true;
		o.value[OPT_SOURCE_LANG] = CStringGetTextDatum(js->source_lang);
	}
	if (js->target_lang)
	{
		o.given[OPT_TARGET_LANG] = true;
		o.value[OPT_TARGET_LANG] = CStringGetTextDatum(js->target_lang);
	}
	o.given[OPT_MAX_NEW_TOKENS] = true;
	o.value[OPT_MAX_NEW_TOKENS] = Int32GetDatum(1);
	TranslateDocuments(GetTranslationModel(js->model), js->model, 1, &in, &o, &out);
}

static int64
declare_job(JobSpec *js)
{
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
	char	  **keyv;
	int			nkeys;
	int			i;
	Oid			relid = js->relid;
	bool		distributed = false;

	if (js->model == NULL || js->model[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("no model to %s with", js->embed ? "embed" : "translate"),
				 errhint("Set transformer.default_model, or pass model.")));
	check_int_arg("workers", js->workers, 1, Min(MAX_JOB_WORKERS, max_worker_processes));
	if (js->batch_size != -1)
		check_int_arg("batch_size", js->batch_size, 1, 1024);
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
				 errmsg("cannot declare a background job in a parallel operation")));

	/* the table: as the user's own UPDATE would see it */
	rel = table_open(relid, AccessShareLock);
	if (rel->rd_rel->relkind != RELKIND_RELATION && rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", RelationGetRelationName(rel)),
				 errdetail("Background jobs write ordinary and partitioned tables.")));
	if (rel->rd_rel->relpersistence == RELPERSISTENCE_TEMP)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot %s a temporary table in the background", js->embed ? "embed" : "translate"),
				 errdetail("Background workers cannot see another session's temporary tables.")));
	src_att = job_column(relid, "source", js->source, &src_type);
	if (js->embed)
		check_embed_target(relid, js->target, &tgt_att);
	else
		tgt_att = job_column(relid, "target", js->target, &tgt_type);
	if (src_att == tgt_att)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("source and target must be different columns")));
	if (TupleDescAttr(RelationGetDescr(rel), tgt_att - 1)->attgenerated)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("target column \"%s\" is a generated column", js->target)));
	if (js->lang_column)
	{
		Oid			lang_type;
		AttrNumber	lang_att = job_column(relid, "source_lang_column", js->lang_column, &lang_type);

		if (lang_att == tgt_att || lang_att == src_att)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("source_lang_column must be a column apart from source and target")));
	}
	keys = row_key(rel);
	if (keys == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" has no primary key or unique key on NOT NULL columns",
						RelationGetRelationName(rel)),
				 errdetail("A job identifies each row it writes by such a key."),
				 errhint("Add a primary key, e.g. ALTER TABLE %s ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY.",
						 RelationGetRelationName(rel))));
	nkeys = list_length(keys);
	keyv = palloc(sizeof(char *) * (nkeys + 1));
	i = 0;
	foreach(lc, keys)
	{
		if (strcmp(lfirst(lc), js->target) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("target column \"%s\" is part of the table's key", js->target)));
		keyv[i++] = lfirst(lc);
	}
	if (js->keep_in_sync && pg_class_aclcheck(relid, GetUserId(), ACL_TRIGGER) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", RelationGetRelationName(rel)),
				 errdetail("keep_in_sync adds triggers to the table, which needs the TRIGGER privilege."),
				 errhint("Ask its owner for TRIGGER, or pass keep_in_sync => false.")));
	CheckJobPrivileges(relid, GetUserId(), js->source, js->target, js->lang_column, nkeys, keyv);
	qualname = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
										  RelationGetRelationName(rel));
	table_close(rel, AccessShareLock);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/* the model, as the user reads it */
	{
		int			level = ExtSpiConnect();
		Oid			t[1] = {TEXTOID};
		Datum		v[1] = {CStringGetTextDatum(js->model)};

		if (SPI_execute_with_args(psprintf("SELECT 1 FROM %s WHERE name = $1", ExtensionTableName("transformer_models")),
								  1, t, v, NULL, true, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not look up model");
		if (SPI_processed == 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("model \"%s\" does not exist", js->model),
					 errhint("Import it with import_model().")));
		ExtSpiFinish(level);
	}
	if (!js->embed)
		check_translate_options(js);
	else
		(void) GetEmbeddingModel(js->model);

	/*
	 * The default batch of a translation job: 8 sentences, whose products
	 * share each weight read; but an int8 model's products gain nothing
	 * from more rows on AVX-512 VNNI, while a batch pads every attention to
	 * its longest sentence, so one at a time (bench/README.md, issue 37).
	 */
	if (js->batch_size == -1)
	{
		int			level = ExtSpiConnect();
		Oid			t[1] = {TEXTOID};
		Datum		v[1] = {CStringGetTextDatum(js->model)};

		if (SPI_execute_with_args(psprintf("SELECT 1 FROM %s WHERE model = $1 AND dtype = 'I8' LIMIT 1",
										   ExtensionTableName("transformer_tensors")),
								  1, t, v, NULL, true, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not look up the model's tensors");
		js->batch_size = SPI_processed > 0 ? 1 : DEFAULT_BATCH_SIZE;
		ExtSpiFinish(level);
	}

	/*
	 * Citus: the triggers would run on the shards, on the workers, whose
	 * queue is not ours; a distributed table is backfilled from the
	 * coordinator only (docs/citus.md).
	 */
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
			distributed = SPI_processed > 0;
			if (distributed && js->keep_in_sync)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("keep_in_sync is not supported on a Citus distributed table"),
						 errdetail("Its triggers would run on the shards, on the worker nodes."),
						 errhint("Pass keep_in_sync => false, and declare the job again after loading rows.")));
		}
		ExtSpiFinish(level);
	}

	/* one job per target column */
	{
		Oid			t[2] = {OIDOID, TEXTOID};
		Datum		v[2] = {ObjectIdGetDatum(relid), CStringGetTextDatum(js->target)};
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
					 errmsg("column \"%s\" of table \"%s\" already has job " INT64_FORMAT,
							js->target, get_rel_name(relid),
							DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull))),
					 errhint("Cancel that job first with cancel_job().")));
		}
	}

	/* the job row */
	{
		Oid			t[15] = {OIDOID, TEXTOID, TEXTOID, NAMEARRAYOID, TEXTOID, OIDOID, INT4OID, BOOLOID,
		INT4OID, INT4OID, TEXTOID, TEXTOID, TEXTARRAYOID, TEXTOID, TEXTOID};
		Datum		v[16];
		char		nulls[16];
		Datum	   *names = palloc(sizeof(Datum) * nkeys);
		int			ret;
		bool		isnull;

		memset(nulls, ' ', sizeof(nulls));
		for (int k = 0; k < nkeys; k++)
			names[k] = DirectFunctionCall1(namein, CStringGetDatum(keyv[k]));
		v[0] = ObjectIdGetDatum(relid);
		v[1] = CStringGetTextDatum(js->source);
		v[2] = CStringGetTextDatum(js->target);
		v[3] = PointerGetDatum(construct_array(names, nkeys, NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR));
		v[4] = CStringGetTextDatum(js->model);
		v[5] = ObjectIdGetDatum(GetUserId());
		v[6] = Int32GetDatum(js->workers);
		v[7] = BoolGetDatum(js->keep_in_sync);
		v[8] = Int32GetDatum(js->beam);
		nulls[8] = js->beam > 0 ? ' ' : 'n';
		v[9] = Int32GetDatum(js->batch_size);
		v[10] = CStringGetTextDatum(js->embed ? "embed" : "translate");
#define TEXT_OR_NULL(i, s) (v[i] = (s) ? CStringGetTextDatum(s) : (Datum) 0, nulls[i] = (s) ? ' ' : 'n')
		TEXT_OR_NULL(11, js->format);
		v[12] = js->keep;
		nulls[12] = js->keep ? ' ' : 'n';
		TEXT_OR_NULL(13, js->source_lang);
		TEXT_OR_NULL(14, js->target_lang);
		JobInternalBegin(&s);
		ret = SPI_execute_with_args(psprintf("INSERT INTO %s (tbl, source, target, key_columns, model, owner, workers, "
											 "keep_in_sync, beam, batch_size, kind, format, keep, source_lang, target_lang, "
											 "source_lang_column) VALUES ($1::regclass, $2::name, $3::name, $4, $5, "
											 "$6::regrole, $7, $8, $9, $10, $11, $12, $13, $14, $15, %s) RETURNING id",
											 JobTable("transformer_job"),
											 js->lang_column ? quote_literal_cstr(js->lang_column) : "NULL"),
									15, t, v, nulls, false, 0);
		JobInternalEnd(&s);
		if (ret != SPI_OK_INSERT_RETURNING)
			elog(ERROR, "could not declare the job");
		id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	LockJobRow(id);

	/*
	 * The sync triggers first, created by the extension's owner (the user
	 * has TRIGGER): their lock waits for the table's writers in progress
	 * and holds new ones until we commit, so the backlog read next (a
	 * fresh snapshot) and the triggers miss no row between them.
	 */
	if (js->keep_in_sync)
	{
		/*
		 * Statement triggers with transition tables: a statement pays one
		 * queue insert.  A table in a partition or inheritance tree gets one
		 * row trigger instead: a partitioned table's is cloned to every
		 * partition, now and later, so rows written to a partition directly
		 * are queued too; and a statement on the parent fires no statement
		 * trigger of a partition or child that its rows go to.
		 */
		bool		partitioned = get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE ||
			get_rel_relispartition(relid) || has_subclass(relid) || has_superclass(relid);

		for (int k = partitioned ? 2 : 0; k < (partitioned ? 3 : 2); k++)
		{
			StringInfoData b;

			initStringInfo(&b);
			if (k < 2)
				appendStringInfo(&b, "CREATE TRIGGER %s AFTER %s ON %s REFERENCING %s FOR EACH STATEMENT "
								 "EXECUTE FUNCTION %s.transformer_job_sync('",
								 quote_identifier(SyncTriggerName(id, SyncTriggerKinds[k])), k == 0 ? "INSERT" : "UPDATE", qualname,
								 k == 0 ? "NEW TABLE AS transformer_new" : "OLD TABLE AS transformer_old NEW TABLE AS transformer_new",
								 quote_identifier(get_namespace_name(ExtensionSchemaAndOwner(&(Oid) {0}))));
			else
				appendStringInfo(&b, "CREATE TRIGGER %s AFTER INSERT OR UPDATE ON %s FOR EACH ROW "
								 "EXECUTE FUNCTION %s.transformer_job_sync('r",
								 quote_identifier(SyncTriggerName(id, SyncTriggerKinds[k])), qualname,
								 quote_identifier(get_namespace_name(ExtensionSchemaAndOwner(&(Oid) {0}))));
			appendStringInfo(&b, INT64_FORMAT "', %s, %s, %s, '%d'", id, quote_literal_cstr(js->source),
							 quote_literal_cstr(js->target), quote_literal_cstr(js->lang_column ? js->lang_column : ""),
							 Max(js->batch_size, JOB_CHUNK_KEYS));
			for (int j = 0; j < nkeys; j++)
				appendStringInfo(&b, ", %s", quote_literal_cstr(keyv[j]));
			appendStringInfoChar(&b, ')');
			JobInternalBegin(&s);
			if (SPI_execute(b.data, false, 0) != SPI_OK_UTILITY)
				elog(ERROR, "could not create the sync trigger");
			JobInternalEnd(&s);
		}
	}

	/*
	 * The backlog: keys of the rows whose target is NULL, read as the
	 * table's owner in a security-restricted operation (as the workers read
	 * them), written under the fixed key settings, queued by the
	 * extension's owner in chunks of JOB_CHUNK_KEYS keys (or batch_size).
	 */
	{
		Portal		cur;
		SPIPlanPtr	plan;
		Oid			t[4] = {INT8OID, TEXTARRAYOID, INT4ARRAYOID, TEXTARRAYOID};
		JobAsTableOwner as;
		int			level;
		int			chunk_keys = Max(js->batch_size, JOB_CHUNK_KEYS);

		JobAsTableOwnerBegin(&as, relid);
		level = JobKeySettingsBegin(true);

		plan = SPI_prepare(psprintf("SELECT %s::pg_catalog.text FROM %s t WHERE t.%s IS NULL AND t.%s IS NOT NULL",
									key_json_sql(keys), qualname, quote_identifier(js->target), quote_identifier(js->source)),
						   0, NULL);
		if (plan == NULL)
			elog(ERROR, "could not prepare the backlog query: %s", SPI_result_code_string(SPI_result));
		cur = SPI_cursor_open(NULL, plan, NULL, NULL, false);
		for (;;)
		{
			Datum	   *k;
			Datum	   *cn;
			Datum	   *tg;
			StringInfoData nulls;
			Datum		v[4];
			uint64		n;
			int			nchunks = 0;
			StringInfoData chunk;

			CHECK_FOR_INTERRUPTS();
			SPI_cursor_fetch(cur, true, BACKFILL_CHUNK);
			n = SPI_processed;
			if (n == 0)
				break;
			k = palloc(sizeof(Datum) * (n / chunk_keys + 2));
			cn = palloc(sizeof(Datum) * (n / chunk_keys + 2));
			tg = palloc(sizeof(Datum) * (n / chunk_keys + 2));
			initStringInfo(&nulls);
			initStringInfo(&chunk);
			for (uint64 r = 0; r < n; r += chunk_keys)
			{
				int			c = 0;

				resetStringInfo(&chunk);
				resetStringInfo(&nulls);
				appendStringInfoChar(&chunk, '[');
				appendStringInfoChar(&nulls, '[');
				for (uint64 q = r; q < n && q < r + chunk_keys; q++, c++)
				{
					if (c > 0)
						appendStringInfoString(&chunk, ", ");
					appendStringInfoString(&nulls, c > 0 ? ", null" : "null");
					appendStringInfoString(&chunk, SPI_getvalue(SPI_tuptable->vals[q], SPI_tuptable->tupdesc, 1));
				}
				appendStringInfoChar(&chunk, ']');
				appendStringInfoChar(&nulls, ']');
				k[nchunks] = CStringGetTextDatum(chunk.data);
				tg[nchunks] = CStringGetTextDatum(nulls.data);
				cn[nchunks++] = Int32GetDatum(c);
			}
			v[0] = Int64GetDatum(id);
			v[1] = PointerGetDatum(construct_array(k, nchunks, TEXTOID, -1, false, TYPALIGN_INT));
			v[2] = PointerGetDatum(construct_array(cn, nchunks, INT4OID, 4, true, TYPALIGN_INT));
			/* the targets were NULL: a row whose target is written by hand before a worker comes is left alone */
			v[3] = PointerGetDatum(construct_array(tg, nchunks, TEXTOID, -1, false, TYPALIGN_INT));
			JobExec(psprintf("INSERT INTO %s (job, keys, n, targets) SELECT $1, k::pg_catalog.jsonb, c, tg::pg_catalog.jsonb "
							 "FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4)) AS u(k, c, tg)",
							 JobTable("transformer_job_queue")), 4, t, v, NULL, SPI_OK_INSERT);
			SPI_freetuptable(SPI_tuptable);
		}
		SPI_cursor_close(cur);
		JobKeySettingsEnd(level);
		JobAsTableOwnerEnd(&as);
	}
	SPI_finish();
	EnsureJobSupervisorAtCommit();
	if (distributed)
		ereport(NOTICE,
				(errmsg("job " INT64_FORMAT " on distributed table \"%s\" runs on this coordinator", id, get_rel_name(relid)),
				 errdetail("Its workers start here, read the rows through Citus and write each row on the node of its shard.")));
	return id;
}

static char *
text_arg(FunctionCallInfo fcinfo, int i)
{
	return PG_NARGS() > i && !PG_ARGISNULL(i) ? text_to_cstring(PG_GETARG_TEXT_PP(i)) : NULL;
}

static void
common_args(FunctionCallInfo fcinfo, JobSpec *js)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table, source and target must not be null")));
	js->relid = PG_GETARG_OID(0);
	js->source = text_arg(fcinfo, 1);
	js->target = text_arg(fcinfo, 2);
	js->model = PG_ARGISNULL(3) ? transformer_default_model : text_to_cstring(PG_GETARG_TEXT_PP(3));
	js->workers = PG_ARGISNULL(4) ? 1 : PG_GETARG_INT32(4);
	js->keep_in_sync = PG_ARGISNULL(5) ? true : PG_GETARG_BOOL(5);
}

PG_FUNCTION_INFO_V1(translate_column);
Datum
translate_column(PG_FUNCTION_ARGS)
{
	JobSpec		js;

	memset(&js, 0, sizeof(js));
	common_args(fcinfo, &js);
	js.beam = PG_ARGISNULL(6) ? 0 : PG_GETARG_INT32(6);
	if (!PG_ARGISNULL(6))
		check_int_arg("beam", js.beam, 1, 64);
	js.batch_size = PG_ARGISNULL(7) ? -1 : PG_GETARG_INT32(7);	/* -1: by the model (declare_job) */
	js.format = text_arg(fcinfo, 8);
	js.keep = PG_NARGS() > 9 && !PG_ARGISNULL(9) ? PointerGetDatum(PG_GETARG_ARRAYTYPE_P_COPY(9)) : (Datum) 0;
	js.source_lang = text_arg(fcinfo, 10);
	js.target_lang = text_arg(fcinfo, 11);
	js.lang_column = text_arg(fcinfo, 12);
	PG_RETURN_INT64(declare_job(&js));
}

PG_FUNCTION_INFO_V1(embed_column);
Datum
embed_column(PG_FUNCTION_ARGS)
{
	JobSpec		js;

	memset(&js, 0, sizeof(js));
	common_args(fcinfo, &js);
	js.embed = true;
	js.batch_size = PG_ARGISNULL(6) ? DEFAULT_EMBED_BATCH_SIZE : PG_GETARG_INT32(6);
	PG_RETURN_INT64(declare_job(&js));
}
