/*
 * sql_fine_tune.c
 *		fine_tune(): declares a background job that trains a copy of a
 *		translation model on sentence pairs and stores it as a new model
 *		(its worker: src/worker/job_train.c).
 *
 * The pairs query runs here, in the caller's transaction and with the
 * caller's rights, and its pairs are kept as token ids in
 * transformer_job_pairs: the worker reads exactly these pairs, however
 * often it resumes, and never runs the caller's SQL itself.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "ext_tables.h"
#include "input_limit.h"
#include "jobs.h"
#include "model_store.h"
#include "translate.h"
#include "train_model.h"

/* pairs written to transformer_job_pairs per statement */
#define PAIRS_PER_INSERT 1000
/* the most pairs a job keeps (its ids are read whole by the worker) */
#define MAX_PAIRS 10000000

static void
check_int(const char *what, int v, int lo, int hi)
{
	if (v < lo || v > hi)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be between %d and %d", what, lo, hi),
				 errdetail("It is %d.", v)));
}

/* a rate: finite and in [lo, hi) (or (0, hi) when positive) */
static void
check_rate(const char *what, double v, bool positive, double hi)
{
	if (!isfinite(v) || v < 0.0 || (positive && v <= 0.0) || v >= hi)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 positive ? errmsg("%s must be positive and below %g", what, hi)
				 : errmsg("%s must be at least 0 and below %g", what, hi),
				 errdetail("It is %g.", v)));
}

/* The caller may create models: INSERT on the model tables (ERROR 42501). */
static void
check_can_create_models(void)
{
	static const char *const tables[] = {"transformer_models", "transformer_tensors", "transformer_tokenizers"};
	Oid			owner;
	Oid			nsp = ExtensionSchemaAndOwner(&owner);

	for (int i = 0; i < 3; i++)
	{
		Oid			rel = get_relname_relid(tables[i], nsp);

		if (!OidIsValid(rel) || pg_class_aclcheck(rel, GetUserId(), ACL_INSERT) != ACLCHECK_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to create models"),
					 errdetail("fine_tune() stores the new model, which takes INSERT on %s.", tables[i]),
					 errhint("A role that may load models (GRANT SELECT, INSERT, UPDATE, DELETE ON transformer_models, "
							 "transformer_tensors, transformer_tokenizers) can fine-tune.")));
	}
}

static bool
model_exists(const char *name)
{
	Oid			t[1] = {TEXTOID};
	Datum		v[1] = {CStringGetTextDatum(name)};
	int			level = ExtSpiConnect();
	bool		found;

	if (SPI_execute_with_args(psprintf("SELECT FROM %s WHERE name = $1", ExtensionTableName("transformer_models")),
							  1, t, v, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read transformer_models");
	found = SPI_processed > 0;
	ExtSpiFinish(level);
	return found;
}

/* ids as an array literal, {1,2,3} */
static Datum
ids_literal(const int *ids, int n)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoChar(&s, '{');
	for (int i = 0; i < n; i++)
		appendStringInfo(&s, i ? ",%d" : "%d", ids[i]);
	appendStringInfoChar(&s, '}');
	return CStringGetTextDatum(s.data);
}

static void
insert_pairs(int64 job, int count, Datum *ns, Datum *src, Datum *tgt)
{
	Oid			t[4] = {INT8OID, INT4ARRAYOID, TEXTARRAYOID, TEXTARRAYOID};
	Datum		v[4];

	if (count == 0)
		return;
	v[0] = Int64GetDatum(job);
	v[1] = PointerGetDatum(construct_array(ns, count, INT4OID, 4, true, TYPALIGN_INT));
	v[2] = PointerGetDatum(construct_array(src, count, TEXTOID, -1, false, TYPALIGN_INT));
	v[3] = PointerGetDatum(construct_array(tgt, count, TEXTOID, -1, false, TYPALIGN_INT));
	JobExec(psprintf("INSERT INTO %s (job, n, source_ids, target_ids) SELECT $1, n, s::pg_catalog.int4[], t::pg_catalog.int4[] "
					 "FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4)) AS u(n, s, t)",
					 JobTable("transformer_job_pairs")), 4, t, v, NULL, SPI_OK_INSERT);
}

/*
 * Run the pairs query as the caller and keep its pairs' ids; returns how
 * many were kept, *skipped those left out (a NULL, no tokens, or more
 * than the model's positions), *tokens their source and target tokens.
 */
static int
store_pairs(int64 job, const char *model, CachedModel *cm, const CallOptions *o, const char *query, int *skipped,
			int64 *tokens)
{
	Portal		portal;
	int			kept = 0;
	Datum	   *ns = palloc(sizeof(Datum) * PAIRS_PER_INSERT);
	Datum	   *src = palloc(sizeof(Datum) * PAIRS_PER_INSERT);
	Datum	   *tgt = palloc(sizeof(Datum) * PAIRS_PER_INSERT);
	int			pending = 0;
	MemoryContext rows_cxt = AllocSetContextCreate(CurrentMemoryContext, "fine_tune pairs", ALLOCSET_DEFAULT_SIZES);

	*skipped = 0;
	*tokens = 0;
	portal = SPI_cursor_open_with_args(NULL, query, 0, NULL, NULL, NULL, true, 0);
	if (portal->tupDesc == NULL || portal->tupDesc->natts != 2)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the pairs query must return two columns, the source and the target"),
				 errdetail("It returns %d.", portal->tupDesc ? portal->tupDesc->natts : 0)));
	for (int c = 0; c < 2; c++)
	{
		char		category;
		bool		preferred;

		get_type_category_preferred(getBaseType(TupleDescAttr(portal->tupDesc, c)->atttypid), &category, &preferred);
		if (category != TYPCATEGORY_STRING)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column %d of the pairs query is of type %s, not a string type", c + 1,
							format_type_be(TupleDescAttr(portal->tupDesc, c)->atttypid)),
					 errhint("Cast it to text.")));
	}
	for (;;)
	{
		SPITupleTable *rows;
		uint64		nrows;

		SPI_cursor_fetch(portal, true, 1000);
		/* insert_pairs() runs statements of its own: keep this fetch's rows */
		rows = SPI_tuptable;
		nrows = SPI_processed;
		if (nrows == 0)
			break;
		for (uint64 r = 0; r < nrows; r++)
		{
			MemoryContext old;
			char	   *s,
					   *t;
			int		   *si,
					   *ti;
			int			sn,
						tn;

			CHECK_FOR_INTERRUPTS();
			s = SPI_getvalue(rows->vals[r], rows->tupdesc, 1);
			t = SPI_getvalue(rows->vals[r], rows->tupdesc, 2);
			if (s == NULL || t == NULL)
			{
				(*skipped)++;
				continue;
			}
			old = MemoryContextSwitchTo(rows_cxt);
			CheckInputSize(PointerGetDatum(cstring_to_text(s)));
			CheckInputSize(PointerGetDatum(cstring_to_text(t)));
			si = TrainingIds(cm, model, cstring_to_text(s), o, false, &sn);
			ti = si ? TrainingIds(cm, model, cstring_to_text(t), o, true, &tn) : NULL;
			MemoryContextSwitchTo(old);
			if (si == NULL || ti == NULL)
			{
				(*skipped)++;
				MemoryContextReset(rows_cxt);
				continue;
			}
			if (kept >= MAX_PAIRS)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("the pairs query returned more than %d pairs", MAX_PAIRS)));
			ns[pending] = Int32GetDatum(kept);
			src[pending] = ids_literal(si, sn);
			tgt[pending] = ids_literal(ti, tn);
			*tokens += sn + tn;
			pending++;
			kept++;
			MemoryContextReset(rows_cxt);
			if (pending == PAIRS_PER_INSERT)
			{
				insert_pairs(job, pending, ns, src, tgt);
				for (int i = 0; i < pending; i++)
				{
					pfree(DatumGetPointer(src[i]));
					pfree(DatumGetPointer(tgt[i]));
				}
				pending = 0;
			}
		}
		SPI_freetuptable(rows);
	}
	SPI_cursor_close(portal);
	insert_pairs(job, pending, ns, src, tgt);
	MemoryContextDelete(rows_cxt);
	return kept;
}

static void
json_key_text(StringInfo s, const char *key, const char *v)
{
	appendStringInfo(s, ", \"%s\": ", key);
	escape_json(s, v);
}

PG_FUNCTION_INFO_V1(fine_tune);
Datum
fine_tune(PG_FUNCTION_ARGS)
{
	char	   *model,
			   *new_model,
			   *query;
	int			epochs = PG_ARGISNULL(3) ? 1 : PG_GETARG_INT32(3);
	bool		has_max_steps = !PG_ARGISNULL(4);
	int			max_steps = has_max_steps ? PG_GETARG_INT32(4) : 0;
	int			batch_size = PG_ARGISNULL(5) ? 32 : PG_GETARG_INT32(5);
	bool		has_rate = !PG_ARGISNULL(6);
	double		rate = has_rate ? PG_GETARG_FLOAT8(6) : 0.0;
	bool		has_warmup = !PG_ARGISNULL(7);
	int			warmup = has_warmup ? PG_GETARG_INT32(7) : (has_rate ? 0 : 4000);
	double		smoothing = PG_ARGISNULL(8) ? 0.1 : PG_GETARG_FLOAT8(8);
	bool		has_dropout = !PG_ARGISNULL(9);
	double		dropout = has_dropout ? PG_GETARG_FLOAT8(9) : 0.0;
	bool		shuffle = PG_ARGISNULL(10) ? true : PG_GETARG_BOOL(10);
	int			seed = PG_ARGISNULL(11) ? 0 : PG_GETARG_INT32(11);
	int			average_last = PG_ARGISNULL(12) ? 1 : PG_GETARG_INT32(12);
	char	   *source_lang = PG_ARGISNULL(13) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(13));
	char	   *target_lang = PG_ARGISNULL(14) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(14));
	CallOptions o;
	CachedModel *cm;
	int64		id;
	int			npairs,
				skipped;
	int64		tokens;
	int64		per_epoch,
				steps,
				every;
	StringInfoData settings;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model, new_model and pairs must not be null")));
	model = text_to_cstring(PG_GETARG_TEXT_PP(0));
	new_model = text_to_cstring(PG_GETARG_TEXT_PP(1));
	query = text_to_cstring(PG_GETARG_TEXT_PP(2));

	/* the hyperparameters, before any work */
	check_int("epochs", epochs, 1, 100000);
	if (has_max_steps)
		check_int("max_steps", max_steps, 1, 100000000);
	check_int("batch_size", batch_size, 1, 1024);
	if (has_rate)
		check_rate("learning_rate", rate, true, 1.0);
	check_int("warmup_steps", warmup, 0, 100000000);
	check_rate("label_smoothing", smoothing, false, 1.0);
	if (has_dropout)
		check_rate("dropout", dropout, false, 1.0);
	check_int("average_last", average_last, 1, 1000);

	/* the models */
	CheckModelName(new_model);
	if (strcmp(model, new_model) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the fine-tuned copy of model \"%s\" needs a name of its own", model),
				 errdetail("fine_tune() leaves the source model as it is and stores the copy beside it.")));
	check_can_create_models();
	cm = GetTranslationModel(model);
	if (cm->model.cfg.embed_norm || tf_train_param_count(&cm->model.cfg, true, true) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("fine_tune() cannot train model \"%s\"", model),
				 errdetail("It trains Marian, M2M100 and NLLB models: no LayerNorm after the embeddings, at most %d layers a stack.",
						   TF_TRAIN_MAX_LAYERS)));
	/* the languages as translate() takes them: checked now, on an empty text */
	memset(&o, 0, sizeof(o));
	if (source_lang)
	{
		o.given[OPT_SOURCE_LANG] = true;
		o.value[OPT_SOURCE_LANG] = CStringGetTextDatum(source_lang);
	}
	if (target_lang)
	{
		o.given[OPT_TARGET_LANG] = true;
		o.value[OPT_TARGET_LANG] = CStringGetTextDatum(target_lang);
	}
	if (source_lang || target_lang || cm->lang_forced_bos)
	{
		int			prefix,
					suffix,
					forced_bos;

		ResolveLanguages(cm, model, &o, NULL, &prefix, &suffix, &forced_bos);
	}
	if (model_exists(new_model))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("model \"%s\" already exists", new_model),
				 errhint("Choose another name, or drop_model() it first.")));

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/* the job row first (its id keys the pairs); its settings once the pairs are counted */
	{
		Oid			t[4] = {TEXTOID, TEXTOID, OIDOID, INT4OID};
		Datum		v[4] = {CStringGetTextDatum(model), CStringGetTextDatum(new_model),
		ObjectIdGetDatum(GetUserId()), Int32GetDatum(batch_size)};
		JobAsOwner s;
		bool		isnull;
		int			ret;

		JobInternalBegin(&s);
		ret = SPI_execute_with_args(psprintf("INSERT INTO %s (kind, model, new_model, owner, workers, keep_in_sync, "
											 "batch_size, settings) VALUES ('fine_tune', $1, $2, $3::regrole, 1, false, $4, "
											 "'{}') RETURNING id", JobTable("transformer_job")),
									4, t, v, NULL, false, 0);
		JobInternalEnd(&s);
		if (ret != SPI_OK_INSERT_RETURNING)
			elog(ERROR, "could not declare the job");
		id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	LockJobRow(id);

	npairs = store_pairs(id, model, cm, &o, query, &skipped, &tokens);
	if (npairs == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the pairs query returned no pair to train on"),
				 skipped > 0 ? errdetail("%d pairs were left out: a NULL, no tokens, or more tokens than the model's %d positions.",
										 skipped, cm->model.cfg.max_pos) : 0));
	if (skipped > 0)
		ereport(NOTICE,
				(errmsg("%d of %d pairs left out", skipped, npairs + skipped),
				 errdetail("A pair is left out for a NULL, a text with no tokens, or more tokens than the model's %d positions.",
						   cm->model.cfg.max_pos)));

	/* Hugging Face's Trainer: max_steps, when given, overrides epochs */
	per_epoch = (npairs + batch_size - 1) / batch_size;
	steps = has_max_steps ? max_steps : per_epoch * epochs;
	if (steps > 100000000)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the run would take " INT64_FORMAT " steps; the most is 100000000", steps)));
	/* a checkpoint per epoch, or every max_steps / average_last steps */
	every = has_max_steps ? steps / average_last : per_epoch;
	if (every < 1 || (!has_max_steps && average_last > epochs))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("average_last is %d, but the run has %s", average_last,
						has_max_steps ? psprintf(INT64_FORMAT " steps", steps) : psprintf("%d epochs", epochs)),
				 errdetail("Checkpoints are taken once an epoch, or every max_steps / average_last steps.")));

	initStringInfo(&settings);
	appendStringInfo(&settings, "{\"epochs\": %d, \"max_steps\": %s, \"batch_size\": %d, ",
					 epochs, has_max_steps ? psprintf("%d", max_steps) : "null", batch_size);
	appendStringInfo(&settings, "\"learning_rate\": %s, \"warmup_steps\": %d, \"label_smoothing\": %.17g, ",
					 has_rate ? psprintf("%.17g", rate) : "null", warmup, smoothing);
	appendStringInfo(&settings, "\"dropout\": %s, \"shuffle\": %s, \"seed\": %d, \"average_last\": %d, ",
					 has_dropout ? psprintf("%.17g", dropout) : "null", shuffle ? "true" : "false", seed, average_last);
	appendStringInfo(&settings, "\"pairs\": %d, \"pairs_left_out\": %d, \"tokens\": " INT64_FORMAT ", "
					 "\"steps\": " INT64_FORMAT ", \"steps_per_epoch\": " INT64_FORMAT ", \"average_every\": " INT64_FORMAT,
					 npairs, skipped, tokens, steps, per_epoch, every);
	if (source_lang)
		json_key_text(&settings, "source_lang", source_lang);
	if (target_lang)
		json_key_text(&settings, "target_lang", target_lang);
	json_key_text(&settings, "query", query);
	appendStringInfoChar(&settings, '}');
	{
		Oid			t[2] = {INT8OID, TEXTOID};
		Datum		v[2] = {Int64GetDatum(id), CStringGetTextDatum(settings.data)};

		JobExec(psprintf("UPDATE %s SET settings = $2::pg_catalog.jsonb WHERE id = $1", JobTable("transformer_job")),
				2, t, v, NULL, SPI_OK_UPDATE);
	}
	SPI_finish();
	EnsureJobSupervisorAtCommit();
	PG_RETURN_INT64(id);
}
