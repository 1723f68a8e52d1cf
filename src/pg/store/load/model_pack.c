/*
 * model_pack.c
 *		A model's stored tensors: each checked (dtype, shape, size, finite
 *		values), then packed into the weights arena of a TfModel.
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "common/int.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "model_store.h"

/* Limits far beyond real checkpoints, so that sizes are checked early. */
#define MAX_WEIGHT_BYTES ((Size) 16 * 1024 * 1024 * 1024)

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
	bool		shapes_only;	/* names and shapes only: no data, no arena */
} WeightBuilder;

/* what weight() and matrix() give for a present tensor when only shapes are checked */
static const float shape_checked[1];

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

/*
 * The dtype a stored matrix is packed in: its own, TF_BF16D with the
 * compute type bf16, TF_I8 with the compute type int8 (int8 stays int8)
 */
static TfDType
packed_dtype(const TfModel *m, const StoredTensor *t)
{
	TfDType		dt = StoredDType(t);

	if (dt == TF_I8)
		return dt;
	return m->cfg.compute_bf16 ? TF_BF16D : m->cfg.compute_int8 ? TF_I8 : dt;
}

/* Kept in its stored dtype (a matrix) or converted to fp32 (a vector)? */
static bool
kept_as_stored(const StoredTensor *t)
{
	return t->ndim == 2 && t->shape[0] > 1 && strstr(t->name, "embed_positions") == NULL &&
		strstr(t->name, "position_embeddings") == NULL && strstr(t->name, "token_type_embeddings") == NULL;
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

static void
changed_while_read(const StoredTensor *t)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("model is damaged"),
			 errdetail("The parts of tensor \"%s\" changed while it was read.", t->name)));
}

/* The parts of t: its bytes (one), or its rows */
static inline int
tensor_parts(const StoredTensor *t)
{
	return t->data != NULL ? 1 : t->nrows;
}

/* Part k of t and its length; *copy: the detoasted copy to pfree, or NULL */
static const char *
tensor_part(const StoredTensor *t, int k, Size *len, void **copy)
{
	bool		isnull;
	Datum		d;
	bytea	   *b;

	*copy = NULL;
	if (t->data != NULL)
	{
		*len = t->nbytes;
		return t->data;
	}
	d = heap_getattr(t->rows[k], 4, t->desc, &isnull);
	if (isnull)
		changed_while_read(t);
	b = DatumGetByteaPP(d);
	if ((Pointer) b != DatumGetPointer(d))
		*copy = b;
	*len = VARSIZE_ANY_EXHDR(b);
	return VARDATA_ANY(b);
}

/* The bytes of t whole (a vector's: small); *copy: to pfree, or NULL */
static const char *
tensor_bytes(const StoredTensor *t, void **copy)
{
	char	   *whole;
	Size		off = 0;

	if (tensor_parts(t) == 1)
	{
		Size		len;
		const char *p = tensor_part(t, 0, &len, copy);

		if (len != t->nbytes)
			changed_while_read(t);
		return p;
	}
	whole = MemoryContextAllocExtended(CurrentMemoryContext, Max(t->nbytes, 1), MCXT_ALLOC_HUGE);
	for (int k = 0; k < t->nrows; k++)
	{
		Size		len;
		void	   *c;
		const char *p = tensor_part(t, k, &len, &c);

		CHECK_FOR_INTERRUPTS();
		if (len > t->nbytes - off)
			changed_while_read(t);
		memcpy(whole + off, p, len);
		off += len;
		if (c)
			pfree(c);
	}
	if (off != t->nbytes)
		changed_while_read(t);
	*copy = whole;
	return whole;
}

/* rows of a float matrix quantized at a time (the compute type int8): 1 MB of fp32 at most */
#define QUANTIZE_FLOATS (256 * 1024)

/*
 * Rows r..r+n of a float matrix (d0, d1) of dtype src, quantized per row as
 * quantize_model() quantizes a stored copy (tf_quantize_rows, the same fp32
 * values), and packed: the compute type int8 gives that copy's weights.
 */
static void
quantize_pack_rows(int64 d0, int64 d1, TfDType src, void *out, const char *p, int64 r, Size n,
				   const char *name)
{
	Size		rows = Max(1, QUANTIZE_FLOATS / d1);
	float	   *f = palloc(sizeof(float) * rows * d1);
	int8_t	   *q = palloc(rows * d1);
	float	   *scale = palloc(sizeof(float) * rows);
	Size		rowb = (Size) d1 * tf_dtype_size(src);

	for (Size i = 0; i < n; i += rows)
	{
		Size		m = Min(rows, n - i);

		CHECK_FOR_INTERRUPTS();
		tf_to_float(m * d1, f, p + i * rowb, src);
		for (Size j = 0; j < m * d1; j++)
			if (!isfinite(f[j]))
				not_finite(name);
		tf_quantize_rows(m, d1, q, scale, f);
		tf_pack_int8_rows(d0, d1, out, q, scale, r + i, m);
	}
	pfree(f);
	pfree(q);
	pfree(scale);
}

/*
 * Pack the rows of matrix t (d0, d1) into out (zeroed) as its parts come,
 * one part detoasted at a time; a row cut between two parts is carried.
 * scale: an int8 matrix's row scales, else NULL.  dt: how it is packed,
 * its stored dtype or TF_BF16D.
 */
static void
pack_rows(int64 d0, int64 d1, TfDType src, TfDType dt, void *out, const char *p, const float *scale,
		  int64 r, Size n, const char *name)
{
	if (dt == TF_I8 && src != TF_I8)
		quantize_pack_rows(d0, d1, src, out, p, r, n, name);
	else if (dt == TF_I8)
		tf_pack_int8_rows(d0, d1, out, (const int8_t *) p, scale + r, r, n);
	else if (dt == TF_BF16D)
		tf_pack_bf16d_rows(d0, d1, out, p, src, r, n);
	else
		tf_pack_panel_rows(d0, d1, out, p, dt, r, n);
}

static void
pack_streamed(const StoredTensor *t, int64 d0, int64 d1, TfDType dt, void *out, const float *scale)
{
	TfDType		src = StoredDType(t);
	Size		rowb = (Size) d1 * (src == TF_I8 ? 1 : tf_dtype_size(src));
	char	   *carry = palloc(rowb);
	Size		have = 0;
	Size		total = 0;
	int64		r = 0;

	for (int k = 0; k < tensor_parts(t); k++)
	{
		Size		len;
		void	   *copy;
		const char *p = tensor_part(t, k, &len, &copy);
		Size		full;

		CHECK_FOR_INTERRUPTS();
		if (len > t->nbytes - total)
			changed_while_read(t);
		total += len;
		if (have > 0)
		{
			Size		take = Min(rowb - have, len);

			memcpy(carry + have, p, take);
			have += take;
			p += take;
			len -= take;
			if (have < rowb)
			{
				if (copy)
					pfree(copy);
				continue;
			}
			pack_rows(d0, d1, src, dt, out, carry, scale, r, 1, t->name);
			r++;
			have = 0;
		}
		full = len / rowb;
		if (full > 0)
		{
			pack_rows(d0, d1, src, dt, out, p, scale, r, full, t->name);
			r += full;
			p += full * rowb;
			len -= full * rowb;
		}
		memcpy(carry, p, len);
		have = len;
		if (copy)
			pfree(copy);
	}
	if (r != d0 || have != 0 || total != t->nbytes)
		changed_while_read(t);
	pfree(carry);
}

/* The tensor `name` of shape (d0[, d1]) as fp32 in the arena (see checked_tensor). */
static const float *
weight(WeightBuilder *wb, const char *name, bool required, int64 d0, int64 d1)
{
	StoredTensor *t = checked_tensor(wb, name, required, d0, d1);
	int64		numel = d1 > 0 ? d0 * d1 : d0;
	float	   *out;
	const char *bytes;
	void	   *copy;

	if (t == NULL)
		return NULL;
	if (wb->shapes_only && StoredDType(t) != TF_I8)
		return shape_checked;
	if (StoredDType(t) == TF_I8)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tensor \"%s\" is int8, but only weight matrices may be", name),
				 errdetail("Biases, norms, positions and scales are F32, F16 or BF16.")));
	if (wb->shapes_only)
		return shape_checked;
	CHECK_FOR_INTERRUPTS();
	out = arena_take(wb, sizeof(float) * numel, name);
	bytes = tensor_bytes(t, &copy);
	tf_to_float(numel, out, bytes, StoredDType(t));
	if (copy)
		pfree(copy);
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
	mat.dtype = StoredDType(t);
	if (wb->shapes_only)
	{
		char	   *scale_name = psprintf("%s_scale", name);
		int			idx;

		if (mat.dtype == TF_I8 && find_tensor(wb, scale_name, &idx) == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("int8 matrix \"%s\" has no scales", name)));
		if (mat.dtype == TF_I8)
			(void) weight(wb, scale_name, true, d0, 0);
		mat.data = shape_checked;
		return mat;
	}
	CHECK_FOR_INTERRUPTS();
	mat.dtype = packed_dtype(wb->m, t);
	if (mat.dtype == TF_BF16D && d1 > TF_BF16_MAX_IN)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("matrix \"%s\" has %lld input columns; the compute type bf16 supports at most %d",
						name, (long long) d1, TF_BF16_MAX_IN),
				 errhint("Use transformer.compute_type = 'stored' for this model.")));
	mat.data = arena_take(wb, tf_packed_size(d0, d1, mat.dtype), name);
	if (mat.dtype == TF_I8 && StoredDType(t) != TF_I8)
	{
		/* the compute type int8: quantized here, each row checked finite first */
		if (d1 > TF_INT8_MAX_IN)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("matrix \"%s\" has %lld input columns; the compute type int8 supports at most %d",
							name, (long long) d1, TF_INT8_MAX_IN),
					 errhint("Use transformer.compute_type = 'stored' for this model.")));
		pack_streamed(t, d0, d1, TF_I8, (void *) mat.data, NULL);
		return mat;
	}
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
		pack_streamed(t, d0, d1, TF_I8, (void *) mat.data, scale);
		return mat;
	}
	/* (the arena is zeroed: the padding rows stay zeros) */
	pack_streamed(t, d0, d1, mat.dtype, (void *) mat.data, NULL);
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
		/* all exponent bits set: infinity or NaN (bf16's too, which rounding may reach) */
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

	if (p != NULL || wb->shapes_only)
		return p;
	table = arena_take(wb, sizeof(float) * c->max_pos * c->d_model, name);
	tf_sinusoidal_positions(c->max_pos, c->d_model, c->positions,
							c->positions == TF_POS_SINUSOIDAL_FAIRSEQ ? c->pad_id + 1 : 0, table);
	return table;
}

/*
 * BertModel / XLMRobertaModel (names as save_pretrained() writes them,
 * a head model's prefix dropped at import): the layers are the paper's
 * post-LayerNorm ones, under other names.
 */
static void
encoder_layer_weights(WeightBuilder *wb, TfLayerWeights *L, int i)
{
	const TfConfig *c = &wb->m->cfg;
	int			d = c->d_model;
	int			ffn = c->enc_ffn;
	char	   *layer = psprintf("encoder.layer.%d", i);
	TfAttnWeights *A = &L->self_attn;

	A->q_w = NAMED_MATRIX(wb, d, d, "%s.attention.self.query.weight", layer);
	A->q_b = NAMED(wb, d, 0, "%s.attention.self.query.bias", layer);
	A->k_w = NAMED_MATRIX(wb, d, d, "%s.attention.self.key.weight", layer);
	A->k_b = NAMED(wb, d, 0, "%s.attention.self.key.bias", layer);
	A->v_w = NAMED_MATRIX(wb, d, d, "%s.attention.self.value.weight", layer);
	A->v_b = NAMED(wb, d, 0, "%s.attention.self.value.bias", layer);
	A->o_w = NAMED_MATRIX(wb, d, d, "%s.attention.output.dense.weight", layer);
	A->o_b = NAMED(wb, d, 0, "%s.attention.output.dense.bias", layer);
	A->ln_g = NAMED(wb, d, 0, "%s.attention.output.LayerNorm.weight", layer);
	A->ln_b = NAMED(wb, d, 0, "%s.attention.output.LayerNorm.bias", layer);
	L->fc1_w = NAMED_MATRIX(wb, ffn, d, "%s.intermediate.dense.weight", layer);
	L->fc1_b = NAMED(wb, ffn, 0, "%s.intermediate.dense.bias", layer);
	L->fc2_w = NAMED_MATRIX(wb, d, ffn, "%s.output.dense.weight", layer);
	L->fc2_b = NAMED(wb, d, 0, "%s.output.dense.bias", layer);
	L->ln_g = NAMED(wb, d, 0, "%s.output.LayerNorm.weight", layer);
	L->ln_b = NAMED(wb, d, 0, "%s.output.LayerNorm.bias", layer);
}

/*
 * The embeddings of an encoder-only model.  Every input is one segment
 * (token type 0), so type 0's row is added to the position table once:
 * enc_pos[p] = position_embeddings[pos_offset + p] + token_type_embeddings[0].
 */
static void
encoder_embeddings(WeightBuilder *wb, MemoryContext cxt)
{
	TfModel    *m = wb->m;
	const TfConfig *c = &m->cfg;
	int			d = c->d_model;
	const float *pos;
	const float *types;
	float	   *table;

	m->w.enc_embed = matrix(wb, "embeddings.word_embeddings.weight", true, c->vocab, d);
	m->w.dec_embed = m->w.enc_embed;
	m->w.lm_head = m->w.enc_embed;
	pos = weight(wb, "embeddings.position_embeddings.weight", true, (int64) c->max_pos + c->pos_offset, d);
	types = weight(wb, "embeddings.token_type_embeddings.weight", true, c->token_types, d);
	m->w.embed_norm_g = weight(wb, "embeddings.LayerNorm.weight", true, d, 0);
	m->w.embed_norm_b = weight(wb, "embeddings.LayerNorm.bias", true, d, 0);
	m->w.enc = MemoryContextAllocZero(cxt, sizeof(TfLayerWeights) * (c->enc_layers + 1));
	m->w.dec = MemoryContextAllocZero(cxt, sizeof(TfLayerWeights));
	if (wb->shapes_only)
		table = (float *) shape_checked;
	else
	{
		table = arena_take(wb, sizeof(float) * c->max_pos * d, "positions");
		for (size_t p = 0; p < (size_t) c->max_pos; p++)
			for (size_t j = 0; j < (size_t) d; j++)
				table[p * d + j] = pos[(p + c->pos_offset) * d + j] + types[j];
		/* a pad id written in the text sits at position padding_idx (pad_id < pos_offset) */
		if (tf_positions_skip_pad(c))
		{
			float	   *pad = arena_take(wb, sizeof(float) * d, "pad position");

			for (size_t j = 0; j < (size_t) d; j++)
				pad[j] = pos[(size_t) c->pad_id * d + j] + types[j];
			m->w.pad_pos = pad;
		}
	}
	m->w.enc_pos = table;
	m->w.dec_pos = table;
}

/*
 * Greedy decoding's screen of an fp32 output layer (greedy_screen.c): the
 * matrix quantized as quantize_model() would, and each row's bound.
 */
static void
screen_lm_head(WeightBuilder *wb)
{
	TfModel    *m = wb->m;
	size_t		vocab = m->cfg.vocab;
	size_t		d = m->cfg.d_model;
	void	   *screen = arena_take(wb, tf_packed_size(vocab, d, TF_I8), "lm_head screen");
	float	   *slack = arena_take(wb, sizeof(float) * tf_screen_slack_floats(vocab), "lm_head slack");

	float	   *w = palloc(sizeof(float) * d);
	int8	   *q = palloc(d);

	for (size_t r = 0; r < vocab; r += 4096)
	{
		CHECK_FOR_INTERRUPTS();
		tf_screen_pack_rows(vocab, d, screen, slack, m->w.lm_head.data, r, Min(4096, vocab - r), w, q);
	}
	pfree(w);
	pfree(q);
	m->w.lm_head_screen.data = screen;
	m->w.lm_head_screen.dtype = TF_I8;
	m->w.lm_head_slack = slack;
}

/* The tensor that becomes lm_head (see build_weights), or NULL */
static const StoredTensor *
lm_head_tensor(const StoredTensor *tensors, int ntensors)
{
	static const char *const names[] = {"lm_head.weight", "model.decoder.embed_tokens.weight", "model.shared.weight"};

	for (int k = 0; k < lengthof(names); k++)
		for (int i = 0; i < ntensors; i++)
			if (strcmp(tensors[i].name, names[k]) == 0)
				return &tensors[i];
	return NULL;
}

static Size build_weights(TfModel *m, StoredTensor *tensors, int ntensors, MemoryContext cxt,
						  const char **arena, bool shapes_only, char *into, Size into_bytes);

Size
BuildModelWeights(TfModel *m, StoredTensor *tensors, int ntensors, MemoryContext cxt,
				  const char **arena)
{
	return build_weights(m, tensors, ntensors, cxt, arena, false, NULL, 0);
}

Size
BuildModelWeightsInto(TfModel *m, StoredTensor *tensors, int ntensors, MemoryContext cxt,
					  char *arena, Size arena_bytes)
{
	Assert(arena != NULL && TYPEALIGN(ARENA_ALIGN, arena) == (uintptr_t) arena);
	return build_weights(m, tensors, ntensors, cxt, NULL, false, arena, arena_bytes);
}

/*
 * The arena's size: matrices as stored, vectors as fp32, each aligned,
 * plus computed positions and the pad position; ERROR past the limit.
 */
Size
ModelArenaBound(const TfModel *m, const StoredTensor *tensors, int ntensors)
{
	const TfConfig *c = &m->cfg;
	int			d = c->d_model;
	double		bytes = 2.0 * (sizeof(float) * c->max_pos * d + ARENA_ALIGN) +
		sizeof(float) * d + ARENA_ALIGN;

	for (int i = 0; i < ntensors; i++)
	{
		double		numel = 1;

		for (int k = 0; k < tensors[i].ndim; k++)
			numel *= (double) tensors[i].shape[k];
		if (kept_as_stored(&tensors[i]))
			bytes += (double) tf_packed_size(tensors[i].shape[0], tensors[i].shape[1],
											 packed_dtype(m, &tensors[i])) + ARENA_ALIGN;
		else
			bytes += numel * sizeof(float) + ARENA_ALIGN;
	}
	/* an fp32 output layer's screen: bf16 and a bound per row (screen_lm_head) */
	if (!c->encoder_only)
	{
		const StoredTensor *t = lm_head_tensor(tensors, ntensors);

		if (t != NULL && t->ndim == 2 && packed_dtype(m, t) == TF_F32 && t->shape[1] <= TF_INT8_MAX_IN)
			bytes += (double) tf_packed_size(t->shape[0], t->shape[1], TF_I8) +
				sizeof(float) * (double) tf_screen_slack_floats(t->shape[0]) + 2 * ARENA_ALIGN;
	}
	if (bytes > (double) MAX_WEIGHT_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("model is too large"),
				 errdetail("Its weights need %.0f bytes; the limit is %zu.",
						   bytes, (size_t) MAX_WEIGHT_BYTES)));
	return (Size) bytes;
}

/*
 * The checks of BuildModelWeights() on names and shapes only, before any
 * tensor's bytes are read: an import streams them afterwards (see
 * CheckTensorValues()).  m's weights are left unusable.
 */
void
CheckModelShapes(TfModel *m, StoredTensor *tensors, int ntensors)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "model shapes", ALLOCSET_DEFAULT_SIZES);

	build_weights(m, tensors, ntensors, cxt, NULL, true, NULL, 0);
	MemoryContextDelete(cxt);
	memset(&m->w, 0, sizeof(m->w));
}

static Size
build_weights(TfModel *m, StoredTensor *tensors, int ntensors, MemoryContext cxt,
			  const char **arena, bool shapes_only, char *into, Size into_bytes)
{
	TfConfig   *c = &m->cfg;
	int			d = c->d_model;
	WeightBuilder wb;
	Size		bytes = ModelArenaBound(m, tensors, ntensors);
	TfMatrix	shared;

	memset(&wb, 0, sizeof(wb));
	wb.m = m;
	wb.from_tables = arena != NULL || into != NULL;
	wb.tensors = tensors;
	wb.ntensors = ntensors;
	wb.used = palloc0(sizeof(bool) * (ntensors + 1));
	wb.arena_bytes = bytes;
	wb.shapes_only = shapes_only;
	/* zeroed: the padding between weights goes into the shared file, which is then the same whoever builds it */
	if (into != NULL)
	{
		if (into_bytes < bytes)
			elog(ERROR, "weight arena of %zu bytes, %zu needed", (size_t) into_bytes, (size_t) bytes);
		wb.arena = into;
	}
	else if (!shapes_only)
	{
		wb.arena = MemoryContextAllocExtended(cxt, wb.arena_bytes + ARENA_ALIGN, MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
		wb.arena = (char *) TYPEALIGN(ARENA_ALIGN, wb.arena);
	}

	if (c->encoder_only)
	{
		encoder_embeddings(&wb, cxt);
		for (int i = 0; i < c->enc_layers; i++)
			encoder_layer_weights(&wb, &m->w.enc[i], i);
		goto check_unused;
	}

	/* token embeddings: shared, unless the checkpoint unties them */
	shared = matrix(&wb, "model.shared.weight", false, c->vocab, d);
	m->w.enc_embed = matrix(&wb, "model.encoder.embed_tokens.weight", shared.data == NULL, c->src_vocab, d);
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
	if (!wb.shapes_only && m->w.lm_head.dtype == TF_F32 && d <= TF_INT8_MAX_IN)
		screen_lm_head(&wb);

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

check_unused:
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

bool
IsWeightMatrix(const StoredTensor *t)
{
	return kept_as_stored(t);
}

/*
 * The value checks of BuildModelWeights() on one tensor's bytes as an
 * import streams them: no NaN or infinity in a float tensor, no negative
 * int8 scale.
 */
void
CheckTensorValues(const StoredTensor *t)
{
	TfDType		dt = StoredDType(t);
	Size		esize = dt == TF_F32 ? 4 : dt == TF_I8 ? 1 : 2;
	Size		numel = t->nbytes / esize;
	size_t		len = strlen(t->name);
	bool		scale = len > 6 && strcmp(t->name + len - 6, "_scale") == 0;

	if (dt == TF_I8)
		return;
	for (Size i = 0; i < numel; i++)
	{
		if ((i & 0xfffff) == 0)
			CHECK_FOR_INTERRUPTS();
		if (dt == TF_F32)
		{
			float		f;

			memcpy(&f, t->data + i * 4, 4);
			if (!isfinite(f))
				not_finite(t->name);
			if (scale && f < 0.0f)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("tensor \"%s\" has a negative scale", t->name)));
		}
		else
		{
			uint16		h;
			uint16		mask = dt == TF_F16 ? 0x7c00 : 0x7f80;

			memcpy(&h, t->data + i * 2, 2);
			if ((h & mask) == mask)
				not_finite(t->name);
			if (scale && (h & 0x8000) && (h & 0x7fff) != 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("tensor \"%s\" has a negative scale", t->name)));
		}
	}
}
