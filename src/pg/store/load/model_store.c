/*
 * model_store.c
 *		The per-backend cache of models (backend_cache.c; changes to
 *		transformer_models or transformer_tensors drop it): a model's rows
 *		read, checked and loaded.  Its configuration is parsed in
 *		model_config.c, its tensors packed in model_pack.c.
 */
#include "postgres.h"

#include "access/detoast.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "model_store.h"
#include "weight_cache.h"

/* real checkpoints have a few hundred; MAX_LAYERS (model_config.c) of them would have ~7000 */
#define MAX_TENSORS 100000
/* rows: a tensor of the largest checkpoints spans a few dozen parts */
#define MAX_TENSOR_ROWS (4 * MAX_TENSORS)

static void load_model(void *entry, const char *name);
static void load_model_bf16(void *entry, const char *name);
static void load_model_int8(void *entry, const char *name);

/* models this backend loaded (a lookup that changes it missed the cache) */
static uint64 model_loads = 0;

static BackendCache model_cache = {
	.name = "transformer models",
	.tables = {"transformer_models", "transformer_tensors"},
	.entrysize = sizeof(CachedModel),
	.load = load_model,
};

/* the same models with the compute type bf16: other weights, kept apart */
static BackendCache model_cache_bf16 = {
	.name = "transformer models (bf16)",
	.tables = {"transformer_models", "transformer_tensors"},
	.entrysize = sizeof(CachedModel),
	.load = load_model_bf16,
};

/* ... and with the compute type int8 */
static BackendCache model_cache_int8 = {
	.name = "transformer models (int8)",
	.tables = {"transformer_models", "transformer_tensors"},
	.entrysize = sizeof(CachedModel),
	.load = load_model_int8,
};

/* transformer.compute_type */
typedef enum ComputeType
{
	COMPUTE_AUTO,				/* embed() in int8, the rest as stored */
	COMPUTE_STORED,
	COMPUTE_BF16,
	COMPUTE_INT8
} ComputeType;

static const struct config_enum_entry compute_types[] = {
	{"auto", COMPUTE_AUTO, false},
	{"stored", COMPUTE_STORED, false},
	{"bf16", COMPUTE_BF16, false},
	{"int8", COMPUTE_INT8, false},
	{"default", COMPUTE_STORED, true},	/* 0.9.0's name for "stored" */
	{"bfloat16", COMPUTE_BF16, true},
	{NULL, 0, false}
};

static int	compute_type = COMPUTE_AUTO;

/* the compute type of the load in progress (its cache's) */
static ComputeType loading_compute = COMPUTE_STORED;

/* -------------------------------------------------------------- cache */

void
InitModelCache(void)
{
	BackendCacheInit(&model_cache);
	BackendCacheInit(&model_cache_bf16);
	BackendCacheInit(&model_cache_int8);
	DefineCustomEnumVariable("transformer.compute_type",
							 "Sets the arithmetic of models' weight matrices.",
							 "stored: as stored (fp32, fp16 or bf16 weights, fp32 arithmetic; int8 as int8). "
							 "bf16: fp32, fp16 and bf16 matrices rounded to bf16 and multiplied in bf16 "
							 "(AVX512_BF16 where the CPU has it), summed in fp32. "
							 "int8: float matrices quantized per row at load, as quantize_model() does. "
							 "auto: int8 for embed(), stored for everything else. "
							 "Each compute type keeps a copy of a model apart.",
							 &compute_type,
							 COMPUTE_AUTO,
							 compute_types,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
}

void
ModelDamaged(const char *model, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("model \"%s\" is damaged", model),
			 errdetail_internal("%s", detail),
			 errhint("Drop it and import it again.")));
}

#define damaged ModelDamaged

Size
TensorNumel(const StoredTensor *t)
{
	Size		n = 1;

	for (int k = 0; k < t->ndim; k++)
		n *= (Size) t->shape[k];
	return n;
}

/*
 * A stored tensor row (name, shape int8[], dtype, data), untrusted: anyone
 * with INSERT on the table may have written it.  Checked like a file's.
 */
static void
read_tensor(const char *model, HeapTuple tup, TupleDesc desc, StoredTensor *t, int *part)
{
	bool		isnull[5];
	Datum		d[5];
	ArrayType  *shape;
	bytea	   *data;
	int			n;

	for (int i = 0; i < 5; i++)
		d[i] = SPI_getbinval(tup, desc, i + 1, &isnull[i]);
	*part = isnull[4] ? -1 : DatumGetInt32(d[4]);
	if (isnull[0])
		damaged(model, "A tensor has no name.");
	t->name = TextDatumGetCString(d[0]);
	if (isnull[1] || isnull[2] || isnull[3])
		damaged(model, psprintf("Tensor \"%s\" has no shape, dtype or data.", t->name));
	shape = DatumGetArrayTypeP(d[1]);
	if (ARR_ELEMTYPE(shape) != INT8OID || ARR_NDIM(shape) > 1 || ARR_HASNULL(shape))
		damaged(model, psprintf("The shape of tensor \"%s\" is not a one-dimensional array of integers.", t->name));
	n = ArrayGetNItems(ARR_NDIM(shape), ARR_DIMS(shape));
	if (n > MAX_TENSOR_DIMS)
		damaged(model, psprintf("Tensor \"%s\" has %d dimensions; at most %d are supported.",
								t->name, n, MAX_TENSOR_DIMS));
	t->ndim = n;
	memcpy(t->shape, ARR_DATA_PTR(shape), sizeof(int64) * n);
	strlcpy(t->dtype, TextDatumGetCString(d[2]), sizeof(t->dtype));
	/* the bytes are fetched when they are used (ReadModelTensors) */
	data = (bytea *) DatumGetPointer(d[3]);
	t->data = NULL;
	t->nbytes = toast_raw_datum_size(d[3]) - VARHDRSZ;
	(void) data;
}

/* The bytes of a row's data, detoasted: a copy to pfree, or NULL if the row holds them as they are. */
static bytea *
row_bytes(HeapTuple tup, TupleDesc desc, const char **data, Size *len)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tup, desc, 4, &isnull);
	bytea	   *b = DatumGetByteaPP(d);

	*data = VARDATA_ANY(b);
	*len = VARSIZE_ANY_EXHDR(b);
	return (Pointer) b != DatumGetPointer(d) ? b : NULL;
}

int
ReadModelTensors(const char *name, StoredTensor **out, bool lazy)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1] = {CStringGetTextDatum(name)};
	StoredTensor *tensors;
	char	   *query;
	int			n;

	int			rows;

	/* one more than allowed, to tell that there are too many */
	query = psprintf("SELECT name, shape, dtype, data, %s FROM %s WHERE model = $1 "
					 "ORDER BY data_offset, name%s LIMIT %d",
					 TensorsHaveParts() ? "part" : "NULL::integer",
					 ExtensionTableName("transformer_tensors"),
					 TensorsHaveParts() ? ", part" : "", MAX_TENSOR_ROWS + 1);
	if (SPI_execute_with_args(query, 1, argtypes, args, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read transformer_tensors");
	if (SPI_processed > MAX_TENSOR_ROWS)
		damaged(name, psprintf("It has more than %d rows of tensors.", MAX_TENSOR_ROWS));
	rows = (int) SPI_processed;
	tensors = palloc0(sizeof(StoredTensor) * (rows + 1));
	n = 0;
	for (int i = 0; i < rows;)
	{
		StoredTensor *t = &tensors[n];
		int			part;
		int			last;
		Size		total;
		char	   *whole;
		const char *defect;

		CHECK_FOR_INTERRUPTS();
		if (n >= MAX_TENSORS)
			damaged(name, psprintf("It has more than %d tensors.", MAX_TENSORS));
		read_tensor(name, SPI_tuptable->vals[i], SPI_tuptable->tupdesc, t, &part);
		if (part > 0)
			damaged(name, psprintf("Tensor \"%s\" has part %d but no part 0.", t->name, part));
		/* the rows of its further parts, 1, 2, ... in order, of the same shape and dtype */
		total = t->nbytes;
		for (last = i + 1; last < rows; last++)
		{
			StoredTensor p;
			int			pn;

			read_tensor(name, SPI_tuptable->vals[last], SPI_tuptable->tupdesc, &p, &pn);
			if (strcmp(p.name, t->name) != 0)
				break;
			if (pn != last - i || p.ndim != t->ndim || strcmp(p.dtype, t->dtype) != 0 ||
				memcmp(p.shape, t->shape, sizeof(int64) * t->ndim) != 0)
				damaged(name, psprintf("The parts of tensor \"%s\" are not 0, 1, ... of one shape and dtype.", t->name));
			if (pg_add_size_overflow(total, p.nbytes, &total) || total > MaxAllocHugeSize)
				damaged(name, psprintf("Tensor \"%s\" is too large.", t->name));
		}
		if (lazy)
		{
			/* checked whole; its rows kept, to be read part by part when packed */
			t->nbytes = total;
			if ((defect = TensorDefect(t)) != NULL)
				damaged(name, defect);
			t->nrows = last - i;
			t->rows = palloc(sizeof(HeapTuple) * t->nrows);
			memcpy(t->rows, SPI_tuptable->vals + i, sizeof(HeapTuple) * t->nrows);
			t->desc = SPI_tuptable->tupdesc;
		}
		else if (last > i + 1)
		{
			/* checked whole before the bytes are joined */
			Size		off = 0;

			t->nbytes = total;
			defect = TensorDefect(t);
			if (defect != NULL)
				damaged(name, defect);
			whole = MemoryContextAllocExtended(CurrentMemoryContext, Max(total, 1), MCXT_ALLOC_HUGE);
			for (int r = i; r < last; r++)
			{
				const char *data;
				Size		len;
				bytea	   *copy;

				CHECK_FOR_INTERRUPTS();
				copy = row_bytes(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, &data, &len);
				if (len > total - off)
					damaged(name, psprintf("The parts of tensor \"%s\" changed while it was read.", t->name));
				memcpy(whole + off, data, len);
				off += len;
				if (copy)
					pfree(copy);
			}
			t->data = whole;
		}
		else
		{
			Size		len;

			(void) row_bytes(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, &t->data, &len);
			t->nbytes = len;
			if ((defect = TensorDefect(t)) != NULL)
				damaged(name, defect);
		}
		n++;
		i = last;
	}
	*out = tensors;
	return n;
}

/* Error context: which model was being loaded. */
static void
load_context(void *arg)
{
	errcontext("loading model \"%s\" from its tables", (const char *) arg);
}

static void
load_model(void *e, const char *name)
{
	CachedModel *entry = (CachedModel *) e;
	char	   *query;
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1] = {CStringGetTextDatum(name)};
	bool		isnull[6];
	Datum		d[6];
	StoredTensor *tensors;
	int			n;
	int			level;
	MemoryContext caller = CurrentMemoryContext;
	ErrorContextCallback errcb;
	HeapTuple	row;
	TupleDesc	desc;
	uint64		fingerprint;
	char	   *version;

	ComputeType compute = loading_compute;

	loading_compute = COMPUTE_STORED;	/* (this load's alone, not a nested one's) */
	model_loads++;
	errcb.callback = load_context;
	errcb.arg = (void *) name;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	level = ExtSpiConnect();
	query = psprintf("SELECT config, source_tokenizer, target_tokenizer, %s, %s, %s, %s, %s "
					 "FROM %s WHERE name = $1",
					 ModelsHaveGenerationConfig() ? "generation_config, source_lang, target_lang" :
					 "NULL::jsonb, NULL::text, NULL::text",
					 RowVersionSql("transformer_models"),
					 ExtensionTableHasColumn("transformer_models", "languages") ? "languages" : "NULL::jsonb",
					 ExtensionTableHasColumn("transformer_models", "segment_tokens") ? "segment_tokens" : "NULL::integer",
					 ExtensionTableHasColumn("transformer_models", "embedding") ? "embedding" : "NULL::jsonb",
					 ExtensionTableName("transformer_models"));
	if (SPI_execute_with_args(query, 1, argtypes, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read transformer_models");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", name),
				 errhint("Load one with import_model().")));
	row = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	for (int i = 0; i < 6; i++)
		d[i] = SPI_getbinval(row, desc, i + 1, &isnull[i]);
	if (!isnull[4])
		strlcpy(entry->source_lang, TextDatumGetCString(d[4]), sizeof(entry->source_lang));
	if (!isnull[5])
		strlcpy(entry->target_lang, TextDatumGetCString(d[5]), sizeof(entry->target_lang));
	if (isnull[0] || isnull[1] || isnull[2])
		damaged(name, "Its configuration or a tokenizer name is null.");
	strlcpy(entry->source_tokenizer, TextDatumGetCString(d[1]), NAMEDATALEN);
	strlcpy(entry->target_tokenizer, TextDatumGetCString(d[2]), NAMEDATALEN);
	ParseModelConfig(DatumGetJsonbP(d[0]), &entry->model.cfg);
	entry->model.cfg.compute_bf16 = compute == COMPUTE_BF16;
	entry->model.cfg.compute_int8 = compute == COMPUTE_INT8;
	ParseGenerationConfig(isnull[3] ? NULL : DatumGetJsonbP(d[3]), DatumGetJsonbP(d[0]),
						  &entry->model.cfg, &entry->gen, entry->cxt);
	{
		bool		lnull;
		Datum		l = SPI_getbinval(row, desc, 8, &lnull);

		LoadLanguages(entry, lnull ? NULL : DatumGetJsonbP(l), name);
		l = SPI_getbinval(row, desc, 9, &lnull);
		entry->segment_tokens = lnull ? 0 : Max(DatumGetInt32(l), 0);
		l = SPI_getbinval(row, desc, 10, &lnull);
		if (entry->model.cfg.encoder_only && lnull)
			damaged(name, "It is an encoder-only model without its embedding settings.");
		ParseEmbeddingSettings(lnull ? NULL : DatumGetJsonbP(l), entry, name);
	}

	/*
	 * The shared file of this version of the rows, or the tables.  Rows of
	 * this transaction, or of tables without file_id, stay private.
	 */
	version = SPI_getvalue(row, desc, 7);
	fingerprint = 0;
	if (version != NULL)
	{
		bool		uncommitted;

		fingerprint = ModelFingerprint(name, version, &uncommitted);
		if (uncommitted)
			fingerprint = 0;
	}
	if (fingerprint != 0 && MapSharedWeights(entry, name, fingerprint))
		entry->weight_bytes = entry->shared_file_bytes;
	else
	{
		/* packed part by part, straight into a new shared file when sharing, else into memory */
		n = ReadModelTensors(name, &tensors, true);
		if (BuildSharedWeights(entry, name, fingerprint, tensors, n))
			entry->weight_bytes = entry->shared_file_bytes;
		else
		{
			MemoryContext arena_cxt = AllocSetContextCreate(entry->cxt, "transformer weights",
															ALLOCSET_DEFAULT_SIZES);
			const char *arena;

			entry->weight_bytes = BuildModelWeights(&entry->model, tensors, n, arena_cxt, &arena);
		}
	}
	MemoryContextSwitchTo(caller);
	ExtSpiFinish(level);
	error_context_stack = errcb.previous;
}

/* load_model() for another compute type's cache: the compute type goes with the entry */
static void
load_model_as(void *e, const char *name, ComputeType compute)
{
	loading_compute = compute;
	PG_TRY();
	{
		load_model(e, name);
	}
	PG_FINALLY();
	{
		loading_compute = COMPUTE_STORED;
	}
	PG_END_TRY();
}

static void
load_model_bf16(void *e, const char *name)
{
	load_model_as(e, name, COMPUTE_BF16);
}

static void
load_model_int8(void *e, const char *name)
{
	load_model_as(e, name, COMPUTE_INT8);
}

CachedModel *
GetTranslationModel(const char *name)
{
	CachedModel *cm = GetModel(name);

	if (cm->model.cfg.encoder_only)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("model \"%s\" is an encoder-only model", name),
				 errdetail("It has no decoder: it embeds text, it does not translate or generate."),
				 errhint("Use embed() or transformer.encode() with it.")));
	return cm;
}

/* an integer setting of the embedding settings, checked */
static int
embedding_int(Jsonb *j, const char *key, int min, int max, const char *name)
{
	JsonbValue *v = getKeyJsonValueFromContainer(&j->root, key, strlen(key), NULL);
	int64		n;
	char	   *s;
	char	   *end;

	if (v == NULL || v->type != jbvNumeric)
		damaged(name, psprintf("Its embedding settings lack \"%s\".", key));
	s = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
	n = strtoll(s, &end, 10);
	if (*end != '\0' || n < min || n > max)
		damaged(name, psprintf("Its embedding setting \"%s\" is %s; it must be from %d to %d.", key, s, min, max));
	return (int) n;
}

void
ParseEmbeddingSettings(Jsonb *j, CachedModel *cm, const char *name)
{
	const TfConfig *c = &cm->model.cfg;
	JsonbValue *v;
	char	   *mode;

	/* a translation model: the mean of its encoder's output, as it reads the source */
	cm->pooling = TF_POOL_MEAN;
	cm->normalize = false;
	cm->max_seq_length = c->max_pos;
	cm->cls_id = -1;
	cm->sep_id = c->eos_id;
	if (j == NULL)
		return;
	if (!JB_ROOT_IS_OBJECT(j) || JB_ROOT_IS_SCALAR(j))
		damaged(name, "Its embedding settings are not a JSON object.");
	v = getKeyJsonValueFromContainer(&j->root, "pooling", 7, NULL);
	if (v == NULL || v->type != jbvString)
		damaged(name, "Its embedding settings lack \"pooling\".");
	mode = pnstrdup(v->val.string.val, v->val.string.len);
	if (strcmp(mode, "cls") == 0)
		cm->pooling = TF_POOL_CLS;
	else if (strcmp(mode, "mean") == 0)
		cm->pooling = TF_POOL_MEAN;
	else if (strcmp(mode, "max") == 0)
		cm->pooling = TF_POOL_MAX;
	else if (strcmp(mode, "mean_sqrt_len") == 0)
		cm->pooling = TF_POOL_MEAN_SQRT_LEN;
	else
		damaged(name, psprintf("Its embedding pooling \"%s\" is none of cls, mean, max and mean_sqrt_len.", mode));
	v = getKeyJsonValueFromContainer(&j->root, "normalize", 9, NULL);
	if (v == NULL || v->type != jbvBool)
		damaged(name, "Its embedding settings lack \"normalize\" (true or false).");
	cm->normalize = v->val.boolean;
	cm->max_seq_length = embedding_int(j, "max_seq_length", 2, c->max_pos, name);
	cm->cls_id = embedding_int(j, "cls_id", 0, c->src_vocab - 1, name);
	cm->sep_id = embedding_int(j, "sep_id", 0, c->src_vocab - 1, name);
}

/* set by _PG_init (transformer.c): the model store calls no layer above it */
void		(*model_use_hook) (void) = NULL;

/* the cache of a compute type (auto resolved by the caller) */
static BackendCache *
cache_of(ComputeType compute)
{
	switch (compute)
	{
		case COMPUTE_BF16:
			return &model_cache_bf16;
		case COMPUTE_INT8:
			return &model_cache_int8;
		default:
			return &model_cache;
	}
}

static CachedModel *
get_model(const char *name, bool sentence_embedding)
{
	if (strlen(name) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", name)));
	if (model_use_hook)
		model_use_hook();		/* the jobs' supervisor, at the first use after a server start */
	{
		uint64		before = model_loads;
		ComputeType compute = compute_type;
		CachedModel *cm;

		/* auto: sentence vectors in int8 (cosine to fp32 >= 0.9999, docs/embeddings.md) */
		if (compute == COMPUTE_AUTO)
			compute = sentence_embedding ? COMPUTE_INT8 : COMPUTE_STORED;
		cm = (CachedModel *) BackendCacheGet(cache_of(compute), name);
		RecordModelCache(name, model_loads == before);
		return cm;
	}
}

CachedModel *
GetModel(const char *name)
{
	return get_model(name, false);
}

CachedModel *
GetEmbeddingModel(const char *name)
{
	return get_model(name, true);
}
