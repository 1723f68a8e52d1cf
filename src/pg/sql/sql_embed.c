/*
 * sql_embed.c
 *		Sentence embeddings: embed(text, model) and embed(text[], model),
 *		one vector per text as sentence-transformers' encode() gives it
 *		(the encoder, then Pooling, then Normalize if the model has it);
 *		the encoder's per-token output (encoder_output(), transformer.encode())
 *		and the paper's input layer (input_embeddings()).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "decode_workspace.h"
#include "embed.h"
#include "input_limit.h"
#include "model_store.h"
#include "pg_arrays.h"
#include "tokenizer.h"
#include "translate.h"

/*
 * A batch of embed(text[]) runs at most this many tokens at once: the
 * activations of a pack stay in the caches (a BERT-base feed-forward of 512
 * tokens is 6 MB); packs of 4,096 tokens ran 10-16% slower
 * (bench/README.md).
 */
#define EMBED_BATCH_TOKENS 512

static void
embed_interrupts(void)
{
	CHECK_FOR_INTERRUPTS();
}

/*
 * The encoder's input for a text: an encoder-only model's [CLS] pieces
 * [SEP] (<s> pieces </s>), cut to max_seq_length as sentence-transformers
 * truncates (the pieces at the end go); a translation model's source ids.
 */
static int *
EmbedIds(CachedModel *cm, const char *model, text *input, int *n)
{
	Tokenizer  *tok;
	SpmEncoding enc;
	int		   *ids;
	int			keep;

	if (!cm->model.cfg.encoder_only)
		return SourceIds(cm, model, input, NULL, n);
	tok = GetTokenizer(cm->source_tokenizer);
	EncodeText(tok, input, &enc);
	keep = Min(enc.ntokens, cm->max_seq_length - 2);
	ids = palloc(sizeof(int) * (keep + 2));
	ids[0] = cm->cls_id;
	for (int i = 0; i < keep; i++)
	{
		ids[i + 1] = TokenModelId(tok, &enc.tokens[i]);
		if (ids[i + 1] < 0 || ids[i + 1] >= cm->model.cfg.src_vocab)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("model \"%s\" is damaged", model),
					 errdetail("Its tokenizer \"%s\" gives the id %d, but the model's vocabulary has %d entries.",
							   cm->source_tokenizer, ids[i + 1], cm->model.cfg.src_vocab)));
	}
	ids[keep + 1] = cm->sep_id;
	*n = keep + 2;
	return ids;
}

/* x (rows of nsent inputs, packed) pooled and normalized into out (nsent, d) */
static void
PoolRows(const CachedModel *cm, int nsent, const int *n, const float *x, float *out)
{
	int			d = cm->model.cfg.d_model;
	size_t		row = 0;

	for (int i = 0; i < nsent; i++)
	{
		tf_pool(cm->pooling, n[i], d, x + row * d, out + (size_t) i * d);
		if (cm->normalize)
			tf_l2_normalize(d, out + (size_t) i * d);
		row += n[i];
	}
}

/* The encoder over nsent id lists at once, pooled into out (nsent, d). */
static void
EmbedBatch(CachedModel *cm, int nsent, int **ids, const int *n, float *out)
{
	int			d = cm->model.cfg.d_model;
	double		rows = 0;
	float	   *x;
	SpmAlloc	a;

	for (int i = 0; i < nsent; i++)
		rows += n[i];
	CheckFloatCount(rows * d, "encoder output");
	x = palloc(sizeof(float) * (Size) rows * d);
	a = DecodeWorkspace(CurrentMemoryContext);
	tf_encode_packed(&cm->model, nsent, (const int *const *) ids, n, x, &a, embed_interrupts);
	ReleaseWorkspace(&a);
	PoolRows(cm, nsent, n, x, out);
	pfree(x);
}

PG_FUNCTION_INFO_V1(sentence_embedding);
Datum
sentence_embedding(PG_FUNCTION_ARGS)
{
	char	   *model = text_to_cstring(PG_GETARG_TEXT_PP(1));
	CachedModel *cm = GetEmbeddingModel(model);
	int			n;
	int		   *ids = EmbedIds(cm, model, InputTextArg(fcinfo, 0), &n);
	ArrayType  *result = NewFloat4Array(-1, cm->model.cfg.d_model);

	EmbedBatch(cm, 1, &ids, &n, (float *) ARR_DATA_PTR(result));
	PG_RETURN_ARRAYTYPE_P(result);
}

/*
 * Vectors of n texts (NULL for NULL), as embed(text, model) gives each:
 * the texts run through the encoder together in packs of up to
 * EMBED_BATCH_TOKENS tokens, so the weights are read once per pack.
 * Used by embed(text[]) and by embedding jobs (src/worker/job_worker.c).
 */
void
EmbedTexts(CachedModel *cm, const char *model, int count, text **in, ArrayType **out)
{
	int		  **ids = palloc0(sizeof(int *) * (count + 1));
	int		   *n = palloc0(sizeof(int) * (count + 1));
	int			d = cm->model.cfg.d_model;
	int			first = 0;
	MemoryContext batch_cxt;

	for (int i = 0; i < count; i++)
	{
		CHECK_FOR_INTERRUPTS();
		out[i] = NULL;
		if (in[i])
			ids[i] = EmbedIds(cm, model, (CheckInputSize(PointerGetDatum(in[i])), in[i]), &n[i]);
	}
	batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "embed batch", ALLOCSET_DEFAULT_SIZES);
	while (first < count)
	{
		int			last = first;
		int			tokens = 0;
		int			nb = 0;
		int		  **bids;
		int		   *bn;
		float	   *vec;
		MemoryContext old;

		/* the pack: up to EMBED_BATCH_TOKENS tokens, at least one text */
		while (last < count && (nb == 0 || tokens + n[last] <= EMBED_BATCH_TOKENS))
		{
			if (in[last])
			{
				tokens += n[last];
				nb++;
			}
			last++;
		}
		old = MemoryContextSwitchTo(batch_cxt);
		bids = palloc(sizeof(int *) * (nb + 1));
		bn = palloc(sizeof(int) * (nb + 1));
		nb = 0;
		for (int i = first; i < last; i++)
			if (in[i])
			{
				bids[nb] = ids[i];
				bn[nb] = n[i];
				nb++;
			}
		vec = palloc(sizeof(float) * ((Size) nb * d + 1));
		if (nb > 0)
			EmbedBatch(cm, nb, bids, bn, vec);
		MemoryContextSwitchTo(old);
		nb = 0;
		for (int i = first; i < last; i++)
			if (in[i])
			{
				out[i] = NewFloat4Array(-1, d);
				memcpy(ARR_DATA_PTR(out[i]), vec + (size_t) nb * d, sizeof(float) * d);
				nb++;
			}
		MemoryContextReset(batch_cxt);
		first = last;
	}
	MemoryContextDelete(batch_cxt);
}

/* embed(text[], model): a row per element, in order (NULL for NULL); EmbedTexts() */
PG_FUNCTION_INFO_V1(sentence_embeddings);
Datum
sentence_embeddings(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ArrayType  *arr;
	char	   *model;
	Datum	   *elems;
	bool	   *nulls;
	int			count;
	text	  **in;
	ArrayType **out;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		return (Datum) 0;
	arr = PG_GETARG_ARRAYTYPE_P(0);
	model = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("inputs must be a 1-D array")));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &count);
	in = palloc0(sizeof(text *) * (count + 1));
	out = palloc0(sizeof(ArrayType *) * (count + 1));
	for (int i = 0; i < count; i++)
		in[i] = nulls[i] ? NULL : DatumGetTextPP(elems[i]);
	EmbedTexts(GetEmbeddingModel(model), model, count, in, out);
	for (int i = 0; i < count; i++)
	{
		Datum		v = PointerGetDatum(out[i]);
		bool		isnull = out[i] == NULL;

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &v, &isnull);
	}
	return (Datum) 0;
}

/* input_embeddings(text, model): the paper's input layer, per token (tokens × d) */
PG_FUNCTION_INFO_V1(input_embeddings);
Datum
input_embeddings(PG_FUNCTION_ARGS)
{
	char	   *model = text_to_cstring(PG_GETARG_TEXT_PP(1));
	CachedModel *cm = GetModel(model);
	int			n;
	int		   *ids = EmbedIds(cm, model, InputTextArg(fcinfo, 0), &n);
	ArrayType  *result = NewFloat4Array(n, cm->model.cfg.d_model);

	tf_embed(&cm->model, n, ids, (float *) ARR_DATA_PTR(result));
	PG_RETURN_ARRAYTYPE_P(result);
}

/* encoder_output(text, model) and transformer.encode(text, model): tokens × d */
PG_FUNCTION_INFO_V1(encoder_output);
Datum
encoder_output(PG_FUNCTION_ARGS)
{
	char	   *model = text_to_cstring(PG_GETARG_TEXT_PP(1));
	CachedModel *cm = GetModel(model);
	int			n;
	int		   *ids = EmbedIds(cm, model, InputTextArg(fcinfo, 0), &n);
	ArrayType  *result = NewFloat4Array(n, cm->model.cfg.d_model);
	SpmAlloc	a = DecodeWorkspace(CurrentMemoryContext);

	tf_encode_packed(&cm->model, 1, (const int *const *) &ids, &n, (float *) ARR_DATA_PTR(result),
					 &a, embed_interrupts);
	ReleaseWorkspace(&a);
	PG_RETURN_ARRAYTYPE_P(result);
}
