/*
 * train_weights.c
 *		A stored model as the trainer's fp32 master weights, and trained
 *		weights stored as a new model (train_weights.h).
 *
 * The names are Hugging Face's (tf_train_names); the rows are untrusted,
 * so every tensor is placed by name and size, every parameter must be
 * found once, and every value must be finite.  The new model is written
 * as quantize_model() writes its copy: the source's configuration,
 * tokenizers and settings, the tensors in fp32 in the source's order.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "ext_tables.h"
#include "model_store.h"
#include "tensor_ops.h"
#include "train_weights.h"

static const StoredTensor *
find_tensor(const StoredTensor *t, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(t[i].name, name) == 0)
			return &t[i];
	return NULL;
}

/* "X.weight_scale" of an int8 "X.weight": consumed with its matrix */
static bool
is_int8_scale(const StoredTensor *t, int n, const char *name)
{
	size_t		len = strlen(name);
	const StoredTensor *m;

	if (len <= 6 || strcmp(name + len - 6, "_scale") != 0)
		return false;
	m = find_tensor(t, n, pnstrdup(name, len - 6));
	return m != NULL && strcmp(m->dtype, "I8") == 0;
}

static void
not_trainable(const char *model, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("fine_tune() cannot train model \"%s\"", model),
			 errdetail_internal("%s", detail)));
}

#define damaged ModelDamaged

/* t's values as fp32 into out (numel of them); an int8 matrix times its row scales */
static void
tensor_to_fp32(const char *model, const StoredTensor *t, const StoredTensor *all, int n, float *out)
{
	Size		numel = TensorNumel(t);

	tf_to_float(numel, out, t->data, StoredDType(t));
	if (strcmp(t->dtype, "I8") == 0)
	{
		const StoredTensor *s = find_tensor(all, n, psprintf("%s_scale", t->name));
		Size		rows = t->ndim == 2 ? (Size) t->shape[0] : 0;
		float	   *scale;

		if (s == NULL || rows == 0 || TensorNumel(s) != rows)
			damaged(model, psprintf("The int8 matrix \"%s\" has no scale per row.", t->name));
		scale = palloc(sizeof(float) * rows);
		tf_to_float(rows, scale, s->data, StoredDType(s));
		for (Size r = 0; r < rows; r++)
			for (Size c = 0; c < numel / rows; c++)
				out[r * (numel / rows) + c] *= scale[r];
		pfree(scale);
	}
	for (Size i = 0; i < numel; i++)
		if (!isfinite(out[i]))
			damaged(model, psprintf("Tensor \"%s\" contains NaN or infinity.", t->name));
}

/* A dropout rate of the config, 0 if it has none; ERROR outside [0, 1). */
static float
config_rate(const char *model, Datum config, const char *key)
{
	char	   *sql = psprintf("SELECT CASE WHEN pg_catalog.jsonb_typeof($1 -> %s) = 'number' "
							   "THEN ($1 ->> %s)::pg_catalog.float8 END",
							   quote_literal_cstr(key), quote_literal_cstr(key));
	Oid			t[1] = {JSONBOID};
	Datum		v[1] = {config};
	bool		isnull;
	double		r;

	if (SPI_execute_with_args(sql, 1, t, v, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the configuration");
	r = DatumGetFloat8(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (isnull)
		return 0.0f;
	if (!(r >= 0.0 && r < 1.0))
		damaged(model, psprintf("Its configuration's %s is %g; a rate is at least 0 and below 1.", key, r));
	return (float) r;
}

void
LoadTrainWeights(const char *name, TrainWeights *w, MemoryContext cxt)
{
	Oid			types[1] = {TEXTOID};
	Datum		args[1] = {CStringGetTextDatum(name)};
	TfConfig	cfg;
	StoredTensor *t;
	int			n;
	bool		shared,
				tied;
	bool	   *filled;
	TfTrainModel *tm = &w->tm;
	int			level;
	Datum		config;
	bool		isnull;

	memset(w, 0, sizeof(*w));
	level = ExtSpiConnect();
	if (SPI_execute_with_args(psprintf("SELECT config FROM %s WHERE name = $1", ExtensionTableName("transformer_models")),
							  1, types, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read transformer_models");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", name)));
	config = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);

		config = PointerGetDatum(DatumGetJsonbPCopy(config));
		MemoryContextSwitchTo(old);
	}
	memset(&cfg, 0, sizeof(cfg));
	ParseModelConfig(DatumGetJsonbP(config), &cfg);
	if (cfg.encoder_only)
		not_trainable(name, "It is an encoder without a decoder; fine_tune() trains translation models.");
	if (cfg.embed_norm)
		not_trainable(name, "It has a LayerNorm after its embeddings.");
	w->dropout = config_rate(name, config, "dropout");
	w->attention_dropout = config_rate(name, config, "attention_dropout");
	w->activation_dropout = config_rate(name, config, "activation_dropout");

	n = ReadModelTensors(name, &t, false);
	shared = find_tensor(t, n, "model.shared.weight") != NULL;
	if (shared && (find_tensor(t, n, "model.encoder.embed_tokens.weight") ||
				   find_tensor(t, n, "model.decoder.embed_tokens.weight")))
		not_trainable(name, "It shares its embeddings in part: model.shared.weight and a stack's own embed_tokens.");
	if (shared && cfg.src_vocab != cfg.vocab)
		damaged(name, "It shares one embedding table between vocabularies of different sizes.");
	tied = find_tensor(t, n, "lm_head.weight") == NULL;
	tm->cfg = cfg;
	tm->shared = shared;
	tm->tied = tied;
	tm->nparams = tf_train_param_count(&cfg, shared, tied);
	if (tm->nparams == 0)
		not_trainable(name, psprintf("It has more than %d layers in a stack.", TF_TRAIN_MAX_LAYERS));
	if ((double) tm->nparams * sizeof(float) >= (double) MaxAllocHugeSize / 2)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("model \"%s\" is too large to fine-tune", name)));
	tm->params = MemoryContextAllocExtended(cxt, sizeof(float) * tm->nparams, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	tm->grads = MemoryContextAllocExtended(cxt, sizeof(float) * tm->nparams, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	tf_train_bind(&cfg, shared, tied, tm->params, &tm->p);
	tf_train_bind(&cfg, shared, tied, tm->grads, &tm->g);
	w->nnames = tf_train_name_count(&cfg, shared, tied);
	w->names = MemoryContextAllocZero(cxt, sizeof(TfTrainNamed) * w->nnames);
	tf_train_names(&cfg, shared, tied, &tm->p, w->names);
	filled = palloc0(sizeof(bool) * w->nnames);

	for (int i = 0; i < n; i++)
	{
		const StoredTensor *x = &t[i];
		Size		numel = TensorNumel(x);
		int			k;
		bool		enc_pos = strcmp(x->name, "model.encoder.embed_positions.weight") == 0;

		CHECK_FOR_INTERRUPTS();
		if (is_int8_scale(t, n, x->name))
			continue;
		if (strcmp(x->name, "final_logits_bias") == 0 ||
			(cfg.positions != TF_POS_LEARNED &&
			 (enc_pos || strcmp(x->name, "model.decoder.embed_positions.weight") == 0)))
		{
			/* buffers, not parameters: kept as they are (learned positions are parameters) */
			Size		want = x->name[0] == 'f' ? (Size) cfg.vocab : (Size) cfg.max_pos * cfg.d_model;
			float	   *f;

			if (numel != want)
				damaged(name, psprintf("Tensor \"%s\" has %zu values; its place has %zu.", x->name, numel, want));
			f = MemoryContextAllocExtended(cxt, sizeof(float) * numel, MCXT_ALLOC_HUGE);
			tensor_to_fp32(name, x, t, n, f);
			if (x->name[0] == 'f')
				w->logits_bias = f;
			else if (enc_pos)
				tm->enc_pos = f;
			else
				tm->dec_pos = f;
			continue;
		}
		for (k = 0; k < w->nnames; k++)
			if (strcmp(w->names[k].name, x->name) == 0)
				break;
		if (k == w->nnames)
			not_trainable(name, psprintf("It has the tensor \"%s\", which the trainer has no place for.", x->name));
		if (filled[k] || numel != w->names[k].numel)
			damaged(name, psprintf("Tensor \"%s\" has %zu values; its place has %zu.", x->name, numel, w->names[k].numel));
		tensor_to_fp32(name, x, t, n, w->names[k].data);
		filled[k] = true;
	}
	for (int k = 0; k < w->nnames; k++)
		if (!filled[k])
			damaged(name, psprintf("It has no tensor \"%s\".", w->names[k].name));
	ExtSpiFinish(level);

	/* fixed positions computed as the forward pass computes them (model_pack.c) */
	if (cfg.positions != TF_POS_LEARNED && (tm->enc_pos == NULL || tm->dec_pos == NULL))
	{
		w->positions = MemoryContextAllocExtended(cxt, sizeof(float) * cfg.max_pos * cfg.d_model, MCXT_ALLOC_HUGE);
		tf_sinusoidal_positions(cfg.max_pos, cfg.d_model, cfg.positions,
								cfg.positions == TF_POS_SINUSOIDAL_FAIRSEQ ? cfg.pad_id + 1 : 0, w->positions);
		if (tm->enc_pos == NULL)
			tm->enc_pos = w->positions;
		if (tm->dec_pos == NULL)
			tm->dec_pos = w->positions;
	}
	tm->logits_bias = w->logits_bias;
}

void
StoreTrainedModel(const char *model, const char *new_name, const TrainWeights *w,
				  const float *params, const char *metadata)
{
	MemoryContext cxt = CurrentMemoryContext;
	const TfTrainModel *tm = &w->tm;
	ModelImport mi;
	StoredTensor *src,
			   *dst;
	int			n,
				nout = 0;
	int			level;
	Size		hlen;

	level = ExtSpiConnect();
	ReadModelImport(model, cxt, &mi);
	/* names and shapes only: the bytes are the trained ones */
	n = ReadModelTensors(model, &src, true);
	dst = MemoryContextAllocZero(cxt, sizeof(StoredTensor) * (n + 1));
	for (int i = 0; i < n; i++)
	{
		const StoredTensor *x = &src[i];
		StoredTensor *o;
		const float *data = NULL;
		Size		numel = TensorNumel(x);

		if (is_int8_scale(src, n, x->name))
			continue;
		if (strcmp(x->name, "final_logits_bias") == 0)
			data = w->logits_bias;
		else if (tm->p.enc_pos == NULL && strcmp(x->name, "model.encoder.embed_positions.weight") == 0)
			data = tm->enc_pos;
		else if (tm->p.dec_pos == NULL && strcmp(x->name, "model.decoder.embed_positions.weight") == 0)
			data = tm->dec_pos;
		else
			for (int k = 0; k < w->nnames; k++)
				if (strcmp(w->names[k].name, x->name) == 0)
				{
					/* the same place in params as in the master weights */
					data = params + (w->names[k].data - tm->params);
					break;
				}
		if (data == NULL)
			elog(ERROR, "tensor \"%s\" of model \"%s\" changed while it was fine-tuned", x->name, model);
		o = &dst[nout++];
		o->name = MemoryContextStrdup(cxt, x->name);
		strlcpy(o->dtype, "F32", sizeof(o->dtype));
		o->ndim = x->ndim;
		memcpy(o->shape, x->shape, sizeof(int64) * x->ndim);
		o->nbytes = sizeof(float) * numel;
		o->data = (const char *) data;
		o->alias_of = -1;
	}
	ExtSpiFinish(level);
	MemoryContextSwitchTo(cxt);
	mi.header = SafetensorsHeaderFor(dst, nout, metadata, &hlen);
	mi.hlen = hlen;
	mi.tensors = dst;
	mi.ntensors = nout;
	(void) StoreModel(new_name, &mi);
}
