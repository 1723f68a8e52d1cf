/*
 * model_store.c
 *		Model configuration and weights: config.json into a TfConfig, stored
 *		tensors into fp32 weights, and the per-backend cache of models
 *		(backend_cache.c; changes to transformer_models or
 *		transformer_tensors drop it).
 */
#include "postgres.h"


#include <math.h>

#include "catalog/pg_type.h"
#include "common/int.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "model_store.h"
#include "weight_cache.h"

/* Limits far beyond real checkpoints, so that sizes are checked early. */
#define MAX_DIM 65536
#define MAX_LAYERS 256
#define MAX_VOCAB 10000000
#define MAX_POSITIONS 65536
#define MAX_WEIGHT_BYTES ((Size) 16 * 1024 * 1024 * 1024)
/* real checkpoints have a few hundred; MAX_LAYERS of them would have ~7000 */
#define MAX_TENSORS 100000

static void load_model(void *entry, const char *name);

static BackendCache model_cache = {
	.name = "transformer models",
	.tables = {"transformer_models", "transformer_tensors"},
	.entrysize = sizeof(CachedModel),
	.load = load_model,
};

/* ------------------------------------------------------------- config */

static JsonbValue *
config_get(Jsonb *config, const char *key)
{
	return getKeyJsonValueFromContainer(&config->root, key, strlen(key), NULL);
}

static int
config_int(Jsonb *config, const char *key, bool required, int dflt, int min, int max)
{
	JsonbValue *v = config_get(config, key);
	char	   *s;
	char	   *end;
	long		n;

	if (v == NULL || v->type == jbvNull)
	{
		if (required)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("model configuration lacks \"%s\"", key)));
		return dflt;
	}
	if (v->type != jbvNumeric)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model configuration \"%s\" must be a number", key)));
	s = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
	n = strtol(s, &end, 10);
	if (*end != '\0' || n < min || n > max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model configuration \"%s\" is %s", key, s),
				 errdetail("It must be an integer from %d to %d.", min, max)));
	return (int) n;
}

static bool
config_bool(Jsonb *config, const char *key, bool dflt)
{
	JsonbValue *v = config_get(config, key);

	if (v == NULL || v->type == jbvNull)
		return dflt;
	if (v->type != jbvBool)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model configuration \"%s\" must be true or false", key)));
	return v->val.boolean;
}

static char *
config_string(Jsonb *config, const char *key, const char *dflt)
{
	JsonbValue *v = config_get(config, key);

	if (v == NULL || v->type == jbvNull)
		return (char *) dflt;
	if (v->type != jbvString)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model configuration \"%s\" must be a string", key)));
	return pnstrdup(v->val.string.val, v->val.string.len);
}

static double
config_double(Jsonb *config, const char *key, double dflt)
{
	JsonbValue *v = config_get(config, key);

	if (v == NULL || v->type == jbvNull)
		return dflt;
	if (v->type != jbvNumeric)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model configuration \"%s\" must be a number", key)));
	return DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(v->val.numeric)));
}

void
ParseModelConfig(Jsonb *config, TfConfig *c)
{
	char	   *act;
	char	   *pos;

	if (!JB_ROOT_IS_OBJECT(config) || JB_ROOT_IS_SCALAR(config))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model configuration must be a JSON object")));

	memset(c, 0, sizeof(*c));
	c->d_model = config_int(config, "d_model", true, 0, 2, MAX_DIM);
	c->vocab = config_int(config, "vocab_size", true, 0, 2, MAX_VOCAB);
	c->enc_layers = config_int(config, "encoder_layers", true, 0, 0, MAX_LAYERS);
	c->dec_layers = config_int(config, "decoder_layers", true, 0, 1, MAX_LAYERS);
	c->enc_heads = config_int(config, "encoder_attention_heads", true, 0, 1, MAX_DIM);
	c->dec_heads = config_int(config, "decoder_attention_heads", true, 0, 1, MAX_DIM);
	c->enc_ffn = config_int(config, "encoder_ffn_dim", true, 0, 1, 16 * MAX_DIM);
	c->dec_ffn = config_int(config, "decoder_ffn_dim", true, 0, 1, 16 * MAX_DIM);
	c->max_pos = config_int(config, "max_position_embeddings", true, 0, 1, MAX_POSITIONS);
	c->pad_id = config_int(config, "pad_token_id", true, 0, 0, c->vocab - 1);
	c->eos_id = config_int(config, "eos_token_id", true, 0, 0, c->vocab - 1);
	c->decoder_start_id = config_int(config, "decoder_start_token_id", false, c->pad_id, 0, c->vocab - 1);
	c->pre_norm = config_bool(config, "normalize_before", false);
	c->final_norm = config_bool(config, "add_final_layer_norm", false);
	c->scale_embedding = config_bool(config, "scale_embedding", false);
	c->ln_eps = 1e-5f;

	if (c->d_model % c->enc_heads != 0 || c->d_model % c->dec_heads != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model configuration: attention heads must divide d_model"),
				 errdetail("d_model is %d, with %d encoder and %d decoder heads.",
						   c->d_model, c->enc_heads, c->dec_heads)));

	act = config_string(config, "activation_function", "gelu");	/* MarianConfig's default */
	if (strcmp(act, "relu") == 0)
		c->activation = TF_ACT_RELU;
	else if (strcmp(act, "gelu") == 0)
		c->activation = TF_ACT_GELU;
	else if (strcmp(act, "swish") == 0 || strcmp(act, "silu") == 0)
		c->activation = TF_ACT_SWISH;
	else
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("activation function \"%s\" is not supported", act),
				 errhint("Supported are relu, gelu and swish (silu).")));

	/* Marian's static positions, unless the configuration says otherwise */
	pos = config_string(config, "position_embedding",
						config_bool(config, "static_position_embeddings", true) ?
						"sinusoidal_half" : "learned");
	if (strcmp(pos, "sinusoidal_half") == 0)
		c->positions = TF_POS_SINUSOIDAL_HALF;
	else if (strcmp(pos, "sinusoidal_interleaved") == 0)
		c->positions = TF_POS_SINUSOIDAL_INTERLEAVED;
	else if (strcmp(pos, "learned") == 0)
		c->positions = TF_POS_LEARNED;
	else
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("position embedding \"%s\" is not supported", pos),
				 errhint("Supported are sinusoidal_half (Marian), sinusoidal_interleaved (the paper) and learned.")));
}

/* -------------------------------------------------------- generation */

static void
bad_generation(const char *key, const char *detail) pg_attribute_noreturn();

static void
bad_generation(const char *key, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("generation configuration \"%s\" is invalid", key),
			 errdetail("%s", detail)));
}

/* bad_words_ids: a list of non-empty lists of token ids */
static void
parse_bad_words(JsonbValue *v, const TfConfig *c, ModelGeneration *g, MemoryContext cxt)
{
	JsonbContainer *list;
	int			n;
	int			total = 0;

	g->nbad = 0;
	g->bad_off = MemoryContextAllocZero(cxt, sizeof(int));
	g->bad_ids = NULL;
	if (v == NULL || v->type == jbvNull)
		return;
	if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
		bad_generation("bad_words_ids", "It must be a list of lists of token ids.");
	list = v->val.binary.data;
	n = JsonContainerSize(list);
	for (int w = 0; w < n; w++)
	{
		JsonbValue *seq = getIthJsonbValueFromContainer(list, w);

		if (seq == NULL || seq->type != jbvBinary || !JsonContainerIsArray(seq->val.binary.data) ||
			JsonContainerSize(seq->val.binary.data) == 0)
			bad_generation("bad_words_ids", "It must be a list of non-empty lists of token ids.");
		total += JsonContainerSize(seq->val.binary.data);
	}
	g->bad_off = MemoryContextAllocZero(cxt, sizeof(int) * (n + 1));
	g->bad_ids = MemoryContextAllocZero(cxt, sizeof(int) * (total + 1));
	total = 0;
	for (int w = 0; w < n; w++)
	{
		JsonbContainer *seq = getIthJsonbValueFromContainer(list, w)->val.binary.data;

		for (int k = 0; k < (int) JsonContainerSize(seq); k++)
		{
			JsonbValue *id = getIthJsonbValueFromContainer(seq, k);
			char	   *str;
			char	   *end;
			long		val;

			if (id == NULL || id->type != jbvNumeric)
				bad_generation("bad_words_ids", "Its token ids must be integers.");
			str = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(id->val.numeric)));
			val = strtol(str, &end, 10);
			if (*end != '\0' || val < 0 || val >= c->vocab)
				bad_generation("bad_words_ids", psprintf("The token id %s is outside the vocabulary of %d.", str, c->vocab));
			g->bad_ids[total++] = (int) val;
		}
		/* NoBadWordsLogitsProcessor drops [eos] */
		if (total - g->bad_off[g->nbad] == 1 && g->bad_ids[total - 1] == c->eos_id)
			total--;
		else
			g->nbad++;
		g->bad_off[g->nbad] = total;
	}
}

void
ParseGenerationConfig(Jsonb *generation, Jsonb *config, TfConfig *c, ModelGeneration *g,
					  MemoryContext cxt)
{
	Jsonb	   *src = generation ? generation : config;
	JsonbValue *v;

	if (generation != NULL && (!JB_ROOT_IS_OBJECT(generation) || JB_ROOT_IS_SCALAR(generation)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("generation configuration must be a JSON object")));
	/* the token ids, where the generation config names them */
	if (generation != NULL)
	{
		c->decoder_start_id = config_int(generation, "decoder_start_token_id", false, c->decoder_start_id, 0, c->vocab - 1);
		c->eos_id = config_int(generation, "eos_token_id", false, c->eos_id, 0, c->vocab - 1);
	}
	g->num_beams = config_int(src, "num_beams", false, 1, 1, TF_MAX_BEAMS);
	g->length_penalty = config_double(src, "length_penalty", 1.0);
	if (!isfinite(g->length_penalty))
		bad_generation("length_penalty", "It must be finite.");
	v = config_get(src, "early_stopping");
	if (v == NULL || v->type == jbvNull)
		g->early_stopping = TF_EARLY_FALSE;
	else if (v->type == jbvBool)
		g->early_stopping = v->val.boolean ? TF_EARLY_TRUE : TF_EARLY_FALSE;
	else if (v->type == jbvString && v->val.string.len == 5 && memcmp(v->val.string.val, "never", 5) == 0)
		g->early_stopping = TF_EARLY_NEVER;
	else
		bad_generation("early_stopping", "It must be true, false or \"never\".");
	/*
	 * GenerationConfig's default is 20, which _prepare_generated_length
	 * grows by the decoder's input (1) within the positions; beyond the
	 * model's positions nothing can be decoded.
	 */
	g->max_length = config_int(src, "max_length", false, 20, 1, INT_MAX);
	if (g->max_length == 20)
		g->max_length = Min(21, c->max_pos);
	g->max_length = Min(g->max_length, c->max_pos + 1);
	g->max_new_tokens = config_int(src, "max_new_tokens", false, -1, 1, INT_MAX);
	g->min_length = config_int(src, "min_length", false, 0, 0, INT_MAX);
	g->no_repeat_ngram_size = config_int(src, "no_repeat_ngram_size", false, 0, 0, INT_MAX);
	g->repetition_penalty = config_double(src, "repetition_penalty", 1.0);
	if (!isfinite(g->repetition_penalty) || g->repetition_penalty <= 0)
		bad_generation("repetition_penalty", "It must be a positive number.");
	/* MarianConfig's default forced_eos_token_id is 0; GenerationConfig's is none */
	v = config_get(src, "forced_eos_token_id");
	g->forced_eos_id = v != NULL && v->type == jbvNull ? -1 :
		config_int(src, "forced_eos_token_id", false, generation ? -1 : 0, 0, c->vocab - 1);
	g->renormalize = config_bool(src, "renormalize_logits", false);
	parse_bad_words(config_get(src, "bad_words_ids"), c, g, cxt);
}

/* ------------------------------------------------------------ weights */

typedef struct WeightBuilder
{
	TfModel    *m;
	StoredTensor *tensors;
	int			ntensors;
	bool	   *used;
	char	   *arena;
	Size		arena_bytes;
	Size		next;
	bool		from_tables;	/* loading stored rows (not checking files to import) */
} WeightBuilder;

/* every tensor in the arena starts on a cache line */
#define ARENA_ALIGN 64

static StoredTensor *
find_tensor(WeightBuilder *wb, const char *name, int *index)
{
	for (int i = 0; i < wb->ntensors; i++)
		if (strcmp(wb->tensors[i].name, name) == 0)
		{
			*index = i;
			return &wb->tensors[i];
		}
	return NULL;
}

static char *
shape_string(int ndim, const int64 *shape)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoChar(&s, '(');
	for (int i = 0; i < ndim; i++)
		appendStringInfo(&s, i ? ", " INT64_FORMAT : INT64_FORMAT, shape[i]);
	appendStringInfoChar(&s, ')');
	return s.data;
}

TfDType
StoredDType(const StoredTensor *t)
{
	if (strcmp(t->dtype, "F16") == 0)
		return TF_F16;
	if (strcmp(t->dtype, "BF16") == 0)
		return TF_BF16;
	if (strcmp(t->dtype, "I8") == 0)
		return TF_I8;
	return TF_F32;
}

/* Kept in its stored dtype (a matrix) or converted to fp32 (a vector)? */
static bool
kept_as_stored(const StoredTensor *t)
{
	return t->ndim == 2 && t->shape[0] > 1 && strstr(t->name, "embed_positions") == NULL;
}

static void *
arena_take(WeightBuilder *wb, Size bytes, const char *what)
{
	void	   *p;

	if (wb->next + bytes > wb->arena_bytes)
		elog(ERROR, "weight arena overflow at \"%s\"", what);
	p = wb->arena + wb->next;
	wb->next += TYPEALIGN(ARENA_ALIGN, bytes);
	return p;
}

/*
 * The stored tensor `name`, checked against the shape (d0[, d1]); NULL if
 * it is absent and optional.  A (1, n) tensor is accepted for (n).
 */
static StoredTensor *
checked_tensor(WeightBuilder *wb, const char *name, bool required, int64 d0, int64 d1)
{
	int			idx;
	StoredTensor *t = find_tensor(wb, name, &idx);
	int64		want[2] = {d0, d1};
	int			wdim = d1 > 0 ? 2 : 1;
	bool		ok;

	if (t == NULL)
	{
		/* stored rows missing (a dump restored without them, say): damaged, and how to mend it */
		if (required && wb->from_tables)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("model lacks the tensor \"%s\"", name),
					 errdetail("The configuration requires it, with the shape %s; transformer_tensors holds %d rows of the model.",
							   shape_string(wdim, want), wb->ntensors),
					 errhint("Restore the model's rows of transformer_tensors (pg_dump includes them; "
							 "pg_restore --data-only --table=transformer_tensors), or import the model again.")));
		if (required)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("model lacks the tensor \"%s\"", name),
					 errdetail("The configuration requires it, with the shape %s.", shape_string(wdim, want))));
		return NULL;
	}
	ok = (t->ndim == wdim && t->shape[0] == d0 && (wdim == 1 || t->shape[1] == d1)) ||
		(wdim == 1 && t->ndim == 2 && t->shape[0] == 1 && t->shape[1] == d0);
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tensor \"%s\" has the shape %s, but the configuration requires %s",
						name, shape_string(t->ndim, t->shape), shape_string(wdim, want))));
	wb->used[idx] = true;
	return t;
}

static void
not_finite(const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("tensor \"%s\" contains NaN or infinity", name)));
}

/* The tensor `name` of shape (d0[, d1]) as fp32 in the arena (see checked_tensor). */
static const float *
weight(WeightBuilder *wb, const char *name, bool required, int64 d0, int64 d1)
{
	StoredTensor *t = checked_tensor(wb, name, required, d0, d1);
	int64		numel = d1 > 0 ? d0 * d1 : d0;
	float	   *out;

	if (t == NULL)
		return NULL;
	if (StoredDType(t) == TF_I8)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tensor \"%s\" is int8, but only weight matrices may be", name),
				 errdetail("Biases, norms, positions and scales are F32, F16 or BF16.")));
	CHECK_FOR_INTERRUPTS();
	out = arena_take(wb, sizeof(float) * numel, name);
	tf_to_float(numel, out, t->data, StoredDType(t));
	for (int64 i = 0; i < numel; i++)
		if (!isfinite(out[i]))
			not_finite(name);
	return out;
}

/*
 * The matrix `name` (d0, d1), packed into the arena in its stored dtype;
 * data NULL if it is absent and optional.
 */
static TfMatrix
matrix(WeightBuilder *wb, const char *name, bool required, int64 d0, int64 d1)
{
	StoredTensor *t = checked_tensor(wb, name, required, d0, d1);
	TfMatrix	mat = {NULL, TF_F32};
	Size		numel = (Size) d0 * d1;

	if (t == NULL)
		return mat;
	CHECK_FOR_INTERRUPTS();
	mat.dtype = StoredDType(t);
	mat.data = arena_take(wb, tf_packed_size(d0, d1, mat.dtype), name);
	if (mat.dtype == TF_I8)
	{
		/* int8 rows and their scales, "<name>_scale" (d0) */
		char	   *scale_name = psprintf("%s_scale", name);
		int			idx;
		const float *scale;

		if (find_tensor(wb, scale_name, &idx) == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("int8 matrix \"%s\" has no scales", name),
					 errdetail("Its scales, one per row, are the F32 tensor \"%s\" of shape (%lld).",
							   scale_name, (long long) d0)));
		scale = weight(wb, scale_name, true, d0, 0);

		if (d1 > TF_INT8_MAX_IN)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("int8 matrix \"%s\" has %lld input columns; at most %d are supported",
							name, (long long) d1, TF_INT8_MAX_IN)));
		for (int64 i = 0; i < d0; i++)
			if (scale[i] < 0.0f)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("tensor \"%s_scale\" has a negative scale", name)));
		tf_pack_int8(d0, d1, (void *) mat.data, (const int8_t *) t->data, scale);
		return mat;
	}
	tf_pack_panels(d0, d1, (void *) mat.data, t->data, mat.dtype);
	/* checked in the arena, aligned (the padding is zeros) */
	numel = tf_packed_size(d0, d1, mat.dtype) / tf_dtype_size(mat.dtype);
	if (mat.dtype == TF_F32)
	{
		const float *f = mat.data;

		for (Size i = 0; i < numel; i++)
			if (!isfinite(f[i]))
				not_finite(name);
	}
	else
	{
		/* all exponent bits set: infinity or NaN */
		uint16		mask = mat.dtype == TF_F16 ? 0x7c00 : 0x7f80;
		const uint16 *h = mat.data;

		for (Size i = 0; i < numel; i++)
			if ((h[i] & mask) == mask)
				not_finite(name);
	}
	return mat;
}

/* weight() and matrix() of a required tensor with a printf-style name */
#define NAMED(wb, d0, d1, ...) weight(wb, psprintf(__VA_ARGS__), true, d0, d1)
#define NAMED_MATRIX(wb, d0, d1, ...) matrix(wb, psprintf(__VA_ARGS__), true, d0, d1)

static void
attn_weights(WeightBuilder *wb, TfAttnWeights *A, const char *layer, const char *attn,
			 const char *norm, int d)
{
	A->q_w = NAMED_MATRIX(wb, d, d, "%s.%s.q_proj.weight", layer, attn);
	A->q_b = NAMED(wb, d, 0, "%s.%s.q_proj.bias", layer, attn);
	A->k_w = NAMED_MATRIX(wb, d, d, "%s.%s.k_proj.weight", layer, attn);
	A->k_b = NAMED(wb, d, 0, "%s.%s.k_proj.bias", layer, attn);
	A->v_w = NAMED_MATRIX(wb, d, d, "%s.%s.v_proj.weight", layer, attn);
	A->v_b = NAMED(wb, d, 0, "%s.%s.v_proj.bias", layer, attn);
	A->o_w = NAMED_MATRIX(wb, d, d, "%s.%s.out_proj.weight", layer, attn);
	A->o_b = NAMED(wb, d, 0, "%s.%s.out_proj.bias", layer, attn);
	A->ln_g = NAMED(wb, d, 0, "%s.%s.weight", layer, norm);
	A->ln_b = NAMED(wb, d, 0, "%s.%s.bias", layer, norm);
}

static void
layer_weights(WeightBuilder *wb, TfLayerWeights *L, const char *stack, int i, bool decoder)
{
	const TfConfig *c = &wb->m->cfg;
	int			d = c->d_model;
	int			ffn = decoder ? c->dec_ffn : c->enc_ffn;
	char	   *layer = psprintf("model.%s.layers.%d", stack, i);

	attn_weights(wb, &L->self_attn, layer, "self_attn", "self_attn_layer_norm", d);
	if (decoder)
		attn_weights(wb, &L->cross_attn, layer, "encoder_attn", "encoder_attn_layer_norm", d);
	L->fc1_w = NAMED_MATRIX(wb, ffn, d, "%s.fc1.weight", layer);
	L->fc1_b = NAMED(wb, ffn, 0, "%s.fc1.bias", layer);
	L->fc2_w = NAMED_MATRIX(wb, d, ffn, "%s.fc2.weight", layer);
	L->fc2_b = NAMED(wb, d, 0, "%s.fc2.bias", layer);
	L->ln_g = NAMED(wb, d, 0, "%s.final_layer_norm.weight", layer);
	L->ln_b = NAMED(wb, d, 0, "%s.final_layer_norm.bias", layer);
}

static const float *
positions(WeightBuilder *wb, const char *name)
{
	const TfConfig *c = &wb->m->cfg;
	const float *p = weight(wb, name, c->positions == TF_POS_LEARNED, c->max_pos, c->d_model);
	float	   *table;

	if (p != NULL)
		return p;
	table = arena_take(wb, sizeof(float) * c->max_pos * c->d_model, name);
	tf_sinusoidal_positions(c->max_pos, c->d_model, c->positions, table);
	return table;
}

Size
BuildModelWeights(TfModel *m, StoredTensor *tensors, int ntensors, MemoryContext cxt,
				  const char **arena)
{
	TfConfig   *c = &m->cfg;
	int			d = c->d_model;
	WeightBuilder wb;
	double		bytes = 2.0 * (sizeof(float) * c->max_pos * d + ARENA_ALIGN);	/* computed positions */
	TfMatrix	shared;

	/* size the arena: matrices as stored, vectors as fp32, aligned */
	for (int i = 0; i < ntensors; i++)
	{
		double		numel = 1;

		for (int k = 0; k < tensors[i].ndim; k++)
			numel *= (double) tensors[i].shape[k];
		if (kept_as_stored(&tensors[i]))
			bytes += (double) tf_packed_size(tensors[i].shape[0], tensors[i].shape[1],
											 StoredDType(&tensors[i])) + ARENA_ALIGN;
		else
			bytes += numel * sizeof(float) + ARENA_ALIGN;
	}
	if (bytes > (double) MAX_WEIGHT_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("model is too large"),
				 errdetail("Its weights need %.0f bytes; the limit is %zu.",
						   bytes, (size_t) MAX_WEIGHT_BYTES)));

	memset(&wb, 0, sizeof(wb));
	wb.m = m;
	wb.from_tables = arena != NULL;
	wb.tensors = tensors;
	wb.ntensors = ntensors;
	wb.used = palloc0(sizeof(bool) * (ntensors + 1));
	wb.arena_bytes = (Size) bytes;
	/* zeroed: the padding between weights goes into the shared file, which is then the same whoever builds it */
	wb.arena = MemoryContextAllocExtended(cxt, wb.arena_bytes + ARENA_ALIGN, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	wb.arena = (char *) TYPEALIGN(ARENA_ALIGN, wb.arena);

	/* token embeddings: shared, unless the checkpoint unties them */
	shared = matrix(&wb, "model.shared.weight", false, c->vocab, d);
	m->w.enc_embed = matrix(&wb, "model.encoder.embed_tokens.weight", shared.data == NULL, c->vocab, d);
	if (m->w.enc_embed.data == NULL)
		m->w.enc_embed = shared;
	m->w.dec_embed = matrix(&wb, "model.decoder.embed_tokens.weight", shared.data == NULL, c->vocab, d);
	if (m->w.dec_embed.data == NULL)
		m->w.dec_embed = shared;
	/* lm_head is tied to the decoder embeddings when safetensors omits it */
	m->w.lm_head = matrix(&wb, "lm_head.weight", false, c->vocab, d);
	if (m->w.lm_head.data == NULL)
		m->w.lm_head = m->w.dec_embed;
	m->w.logits_bias = weight(&wb, "final_logits_bias", false, c->vocab, 0);

	m->w.enc_pos = positions(&wb, "model.encoder.embed_positions.weight");
	m->w.dec_pos = positions(&wb, "model.decoder.embed_positions.weight");

	m->w.enc = MemoryContextAllocZero(cxt, sizeof(TfLayerWeights) * (c->enc_layers + 1));
	m->w.dec = MemoryContextAllocZero(cxt, sizeof(TfLayerWeights) * (c->dec_layers + 1));
	for (int i = 0; i < c->enc_layers; i++)
		layer_weights(&wb, &m->w.enc[i], "encoder", i, false);
	for (int i = 0; i < c->dec_layers; i++)
		layer_weights(&wb, &m->w.dec[i], "decoder", i, true);

	if (c->final_norm)
	{
		m->w.enc_norm_g = weight(&wb, "model.encoder.layer_norm.weight", true, d, 0);
		m->w.enc_norm_b = weight(&wb, "model.encoder.layer_norm.bias", true, d, 0);
		m->w.dec_norm_g = weight(&wb, "model.decoder.layer_norm.weight", true, d, 0);
		m->w.dec_norm_b = weight(&wb, "model.decoder.layer_norm.bias", true, d, 0);
	}

	for (int i = 0; i < ntensors; i++)
		if (!wb.used[i])
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("model has the unexpected tensor \"%s\"", tensors[i].name),
					 errdetail("The configuration (layers, final norms, positions) has no place for it.")));
	if (arena)
		*arena = wb.arena;
	return wb.next;
}

/* -------------------------------------------------------------- cache */

void
InitModelCache(void)
{
	BackendCacheInit(&model_cache);
}

/* Bytes per element of a stored dtype; 0 if unknown. */
static int
dtype_size(const char *dtype)
{
	if (strcmp(dtype, "F32") == 0)
		return 4;
	if (strcmp(dtype, "F16") == 0 || strcmp(dtype, "BF16") == 0)
		return 2;
	if (strcmp(dtype, "I8") == 0)
		return 1;
	return 0;
}

const char *
TensorDefect(const StoredTensor *t)
{
	int			esize = dtype_size(t->dtype);
	int64		numel = 1;
	int64		need;

	if (esize == 0)
		return psprintf("Tensor \"%s\" has the dtype \"%s\"; supported are F32, F16, BF16 and I8.",
						t->name, t->dtype);
	if (t->ndim < 0 || t->ndim > MAX_TENSOR_DIMS)
		return psprintf("Tensor \"%s\" has %d dimensions; at most %d are supported.",
						t->name, t->ndim, MAX_TENSOR_DIMS);
	for (int k = 0; k < t->ndim; k++)
		if (t->shape[k] < 0 || t->shape[k] > PG_INT32_MAX ||
			pg_mul_s64_overflow(numel, t->shape[k], &numel))
			return psprintf("Tensor \"%s\" has the shape %s, with a negative or too large dimension.",
							t->name, shape_string(t->ndim, t->shape));
	if (pg_mul_s64_overflow(numel, esize, &need) || (uint64) need != (uint64) t->nbytes)
		return psprintf("Tensor \"%s\" has %zu bytes of data, but its shape %s in %s needs %s.",
						t->name, (size_t) t->nbytes, shape_string(t->ndim, t->shape), t->dtype,
						need >= 0 ? psprintf(INT64_FORMAT, need) : "more than fit in memory");
	return NULL;
}

static void
damaged(const char *model, const char *detail) pg_attribute_noreturn();

static void
damaged(const char *model, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("model \"%s\" is damaged", model),
			 errdetail_internal("%s", detail),
			 errhint("Drop it and import it again.")));
}

/*
 * A stored tensor row (name, shape int8[], dtype, data), untrusted: anyone
 * with INSERT on the table may have written it.  Checked like a file's.
 */
static void
read_tensor(const char *model, HeapTuple tup, TupleDesc desc, StoredTensor *t)
{
	bool		isnull[4];
	Datum		d[4];
	ArrayType  *shape;
	bytea	   *data;
	const char *defect;
	int			n;

	for (int i = 0; i < 4; i++)
		d[i] = SPI_getbinval(tup, desc, i + 1, &isnull[i]);
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
	data = DatumGetByteaPP(d[3]);
	t->data = VARDATA_ANY(data);
	t->nbytes = VARSIZE_ANY_EXHDR(data);
	defect = TensorDefect(t);
	if (defect != NULL)
		damaged(model, defect);
}

int
ReadModelTensors(const char *name, StoredTensor **out)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1] = {CStringGetTextDatum(name)};
	StoredTensor *tensors;
	char	   *query;
	int			n;

	/* one more than allowed, to tell that there are too many */
	query = psprintf("SELECT name, shape, dtype, data FROM %s WHERE model = $1 "
					 "ORDER BY data_offset, name LIMIT %d",
					 ExtensionTableName("transformer_tensors"), MAX_TENSORS + 1);
	if (SPI_execute_with_args(query, 1, argtypes, args, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read transformer_tensors");
	if (SPI_processed > MAX_TENSORS)
		damaged(name, psprintf("It has more than %d tensors.", MAX_TENSORS));
	n = (int) SPI_processed;
	tensors = palloc0(sizeof(StoredTensor) * (n + 1));
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		read_tensor(name, SPI_tuptable->vals[i], SPI_tuptable->tupdesc, &tensors[i]);
	}
	*out = tensors;
	return n;
}

bool
IsWeightMatrix(const StoredTensor *t)
{
	return kept_as_stored(t);
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

	errcb.callback = load_context;
	errcb.arg = (void *) name;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	level = ExtSpiConnect();
	query = psprintf("SELECT config, source_tokenizer, target_tokenizer, %s, %s "
					 "FROM %s WHERE name = $1",
					 ModelsHaveGenerationConfig() ? "generation_config, source_lang, target_lang" :
					 "NULL::jsonb, NULL::text, NULL::text",
					 RowVersionSql("transformer_models"),
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
	ParseGenerationConfig(isnull[3] ? NULL : DatumGetJsonbP(d[3]), DatumGetJsonbP(d[0]),
						  &entry->model.cfg, &entry->gen, entry->cxt);

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
		MemoryContext arena_cxt = AllocSetContextCreate(entry->cxt, "transformer weights",
														ALLOCSET_DEFAULT_SIZES);
		const char *arena;

		n = ReadModelTensors(name, &tensors);
		entry->weight_bytes = BuildModelWeights(&entry->model, tensors, n, arena_cxt, &arena);
		ShareWeights(entry, name, fingerprint, arena, entry->weight_bytes, arena_cxt);
	}
	MemoryContextSwitchTo(caller);
	ExtSpiFinish(level);
	error_context_stack = errcb.previous;
}

CachedModel *
GetModel(const char *name)
{
	if (strlen(name) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", name)));
	return (CachedModel *) BackendCacheGet(&model_cache, name);
}
