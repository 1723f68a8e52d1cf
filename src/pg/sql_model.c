/*
 * sql_model.c
 *		SQL entry points for inference: embed(), encoder_output(),
 *		generate(), translate() (sentences; documents in sql_document.c),
 *		the options of a call, and decoding's workspace.
 */
#include "postgres.h"

#include <limits.h>
#include <math.h>
#include <sys/stat.h>

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "ext_tables.h"
#include "model_store.h"
#include "pg_arrays.h"
#include "server_files.h"
#include "input_limit.h"
#include "translate.h"


char	   *transformer_default_model = NULL;

/* ---------------------------------------------------------- inference */

/* Source ids of input as Marian's tokenizer makes them: pieces, then EOS. */
static int *
SourceIds(CachedModel *cm, const char *model, text *input, int *n)
{
	Tokenizer  *tok = GetTokenizer(cm->source_tokenizer);
	const TfConfig *c = &cm->model.cfg;
	SpmEncoding enc;
	int		   *ids;

	EncodeText(tok, input, &enc);
	if (enc.ntokens == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("input text is empty"),
				 errdetail("It has no tokens once whitespace is normalized."),
				 errhint("Leave out empty rows, e.g. WHERE btrim(body) <> ''.")));
	if (enc.ntokens + 1 > c->max_pos)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("input text is too long for model \"%s\"", model),
				 errdetail("It has %d tokens with the end-of-sentence token; the model has %d positions.",
						   enc.ntokens + 1, c->max_pos),
				 errhint("Split the text into sentences.")));
	ids = palloc(sizeof(int) * (enc.ntokens + 1));
	for (int i = 0; i < enc.ntokens; i++)
	{
		ids[i] = TokenModelId(tok, &enc.tokens[i]);
		if (ids[i] >= c->vocab)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("model \"%s\" is damaged", model),
					 errdetail("Its source tokenizer \"%s\" gives the id %d, but the model's vocabulary has %d entries.",
							   cm->source_tokenizer, ids[i], c->vocab),
					 errhint("Drop it and import it again.")));
	}
	ids[enc.ntokens] = c->eos_id;
	*n = enc.ntokens + 1;
	return ids;
}

/*
 * Decoding's buffers (encoder scratch, key/value caches, logits), kept from
 * one call to the next so that translate() does not allocate them and
 * fault in fresh pages every time.  A call takes them from the workspace
 * in order; what does not fit comes from the caller's memory context, and
 * the next call grows the workspace to what this one needed, up to
 * WORKSPACE_MAX bytes, held by the backend for its lifetime.  Nothing in
 * the core reads a buffer before writing it, so none is zeroed.
 *
 * One call holds it at a time: a nested call (a user's code run by a load
 * in the middle of ours) allocates from its own memory context instead,
 * so the outer call's buffers are never reused or freed under it.  The
 * holder releases it when done, or its (sub)transaction's abort does.
 */
#define WORKSPACE_MAX ((Size) 64 * 1024 * 1024)
#define WORKSPACE_ALIGN 64

typedef struct Workspace
{
	char	   *raw;			/* in TopMemoryContext */
	char	   *base;			/* raw, aligned */
	Size		size;
	Size		used;			/* by the current call */
	Size		need;			/* what the current call asked for */
	bool		busy;			/* a call holds it */
	SubTransactionId owner;		/* the holder's subtransaction */
} Workspace;

static Workspace workspace;

/*
 * The core asks for its buffers by size; a model's configuration (which
 * any writer of our tables sets) can make one absurd: refuse it clearly.
 */
static void
CheckBufferSize(size_t size)
{
	if (size > MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the model would need a buffer of %zu bytes", size),
				 errdetail("The limit is %zu bytes.", (size_t) MaxAllocSize),
				 errhint("Use a shorter input, a smaller beam_size or max_length, or fewer sentences at once.")));
}

static void *
context_alloc(void *ctx, size_t size)
{
	CheckBufferSize(size);
	return MemoryContextAlloc((MemoryContext) ctx, size);
}

static void *
workspace_alloc(void *ctx, size_t size)
{
	Size		bytes = TYPEALIGN(WORKSPACE_ALIGN, size);
	void	   *p;

	CheckBufferSize(size);
	workspace.need += bytes;
	if (workspace.used + bytes <= workspace.size)
	{
		p = workspace.base + workspace.used;
		workspace.used += bytes;
		return p;
	}
	return MemoryContextAlloc((MemoryContext) ctx, size);
}

/*
 * An allocator for one decoding call; overflow goes to cxt.  Hold it until
 * ReleaseWorkspace(); a nested caller gets plain memory from cxt.
 */
static SpmAlloc
DecodeWorkspace(MemoryContext cxt)
{
	SpmAlloc	a = {workspace_alloc, cxt};

	if (workspace.busy)
	{
		a.alloc = context_alloc;
		return a;
	}
	workspace.busy = true;
	workspace.owner = GetCurrentSubTransactionId();
	if (workspace.need > workspace.size && workspace.need <= WORKSPACE_MAX)
	{
		if (workspace.raw)
			pfree(workspace.raw);
		workspace.raw = NULL;
		workspace.size = 0;
		workspace.raw = MemoryContextAlloc(TopMemoryContext, workspace.need + WORKSPACE_ALIGN);
		workspace.base = (char *) TYPEALIGN(WORKSPACE_ALIGN, workspace.raw);
		workspace.size = workspace.need;
	}
	workspace.used = 0;
	workspace.need = 0;
	return a;
}

static void
ReleaseWorkspace(SpmAlloc *a)
{
	if (a->alloc == workspace_alloc)
		workspace.busy = false;
}

/* An error in the holder's (sub)transaction releases the workspace. */
static void
workspace_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		workspace.busy = false;
}

static void
workspace_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						   SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB && workspace.busy && workspace.owner >= mySubid)
		workspace.busy = false;
}

void
InitDecodeWorkspace(void)
{
	RegisterXactCallback(workspace_xact_callback, NULL);
	RegisterSubXactCallback(workspace_subxact_callback, NULL);
}

PG_FUNCTION_INFO_V1(embed);
Datum
embed(PG_FUNCTION_ARGS)
{
	char	   *model = text_to_cstring(PG_GETARG_TEXT_PP(1));
	CachedModel *cm = GetModel(model);
	int			n;
	int		   *ids = SourceIds(cm, model, InputTextArg(fcinfo, 0), &n);
	ArrayType  *result = NewFloat4Array(n, cm->model.cfg.d_model);

	tf_embed(&cm->model, n, ids, (float *) ARR_DATA_PTR(result));
	PG_RETURN_ARRAYTYPE_P(result);
}

PG_FUNCTION_INFO_V1(encode);
Datum
encode(PG_FUNCTION_ARGS)
{
	char	   *model = text_to_cstring(PG_GETARG_TEXT_PP(1));
	CachedModel *cm = GetModel(model);
	int			n;
	int		   *ids = SourceIds(cm, model, InputTextArg(fcinfo, 0), &n);
	ArrayType  *result = NewFloat4Array(n, cm->model.cfg.d_model);
	SpmAlloc	a = DecodeWorkspace(CurrentMemoryContext);

	tf_encode(&cm->model, n, ids, (float *) ARR_DATA_PTR(result), &a);
	ReleaseWorkspace(&a);
	PG_RETURN_ARRAYTYPE_P(result);
}

static void
check_interrupts(void)
{
	CHECK_FOR_INTERRUPTS();
}

/* transformer.max_length_factor: the runaway guard */
double		transformer_max_length_factor = 3.0;

void
GetCallOptions(FunctionCallInfo fcinfo, CallOptions *o)
{
	for (int i = 0; i < NUM_CALL_OPTIONS; i++)
	{
		int			arg = FIRST_OPTION_ARG + i;

		o->given[i] = PG_NARGS() > arg && !PG_ARGISNULL(arg);
		o->value[i] = o->given[i] ? PG_GETARG_DATUM(arg) : (Datum) 0;
	}
}

static void
bad_option(const char *option, const char *range, const char *value) pg_attribute_noreturn();

static void
bad_option(const char *option, const char *range, const char *value)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s must be %s", option, range),
			 errdetail("It is %s.", value)));
}

static int
int_option(const CallOptions *o, int which, const char *option, int dflt, int min, int max)
{
	int32		v;

	if (!o->given[which])
		return dflt;
	v = DatumGetInt32(o->value[which]);
	if (v < min || v > max)
		bad_option(option, psprintf("between %d and %d", min, max), psprintf("%d", v));
	return v;
}

/*
 * Decoding options for n source ids: each call option, or the model's
 * generation config, with Hugging Face's precedence (max_new_tokens over
 * max_length).  When the length comes from the model, the runaway guard
 * caps it at max_length_factor times the source tokens.
 */
static void
DecodeOptions(CachedModel *cm, const char *model, int n, const CallOptions *o, TfDecodeOptions *opt)
{
	const TfConfig *c = &cm->model.cfg;
	const ModelGeneration *g = &cm->gen;
	int			max_new;

	opt->beam_size = int_option(o, OPT_BEAM_SIZE, "beam_size", g->num_beams, 1, TF_MAX_BEAMS);
	opt->length_penalty = g->length_penalty;
	if (o->given[OPT_LENGTH_PENALTY])
	{
		opt->length_penalty = DatumGetFloat8(o->value[OPT_LENGTH_PENALTY]);
		if (!isfinite(opt->length_penalty))
			bad_option("length_penalty", "finite", psprintf("%g", opt->length_penalty));
	}
	opt->early_stopping = !o->given[OPT_EARLY_STOPPING] ? g->early_stopping :
		DatumGetBool(o->value[OPT_EARLY_STOPPING]) ? TF_EARLY_TRUE : TF_EARLY_FALSE;
	opt->repetition_penalty = g->repetition_penalty;
	if (o->given[OPT_REPETITION_PENALTY])
	{
		opt->repetition_penalty = DatumGetFloat8(o->value[OPT_REPETITION_PENALTY]);
		if (!isfinite(opt->repetition_penalty) || opt->repetition_penalty <= 0)
			bad_option("repetition_penalty", "a positive number", psprintf("%g", opt->repetition_penalty));
	}
	opt->no_repeat_ngram_size = int_option(o, OPT_NO_REPEAT_NGRAM_SIZE, "no_repeat_ngram_size",
										   g->no_repeat_ngram_size, 0, INT_MAX);
	opt->min_length = int_option(o, OPT_MIN_LENGTH, "min_length", g->min_length, 0, INT_MAX);

	/* GenerationConfig: max_new_tokens, when set, decides; the start token counts */
	max_new = int_option(o, OPT_MAX_NEW_TOKENS, "max_new_tokens", g->max_new_tokens, 1, c->max_pos);
	if (max_new > 0)
		opt->max_length = Min(max_new, c->max_pos) + 1;
	else if (o->given[OPT_MAX_LENGTH])
	{
		opt->max_length = DatumGetInt32(o->value[OPT_MAX_LENGTH]);
		if (opt->max_length < 1 || opt->max_length > c->max_pos + 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("max_length must be between 1 and %d for model \"%s\"", c->max_pos + 1, model),
					 errdetail("It is %d.  As in Hugging Face's generate(), it counts the decoder start token, so the model's %d positions allow %d.",
							   opt->max_length, c->max_pos, c->max_pos + 1)));
	}
	else
		opt->max_length = g->max_length;
	if (!o->given[OPT_MAX_LENGTH] && !o->given[OPT_MAX_NEW_TOKENS] && transformer_max_length_factor > 0)
		opt->max_length = Min(opt->max_length, 1 + (int) ceil(transformer_max_length_factor * n));

	opt->forced_eos_id = g->forced_eos_id;
	opt->renormalize = g->renormalize;
	opt->nbad = g->nbad;
	opt->bad_off = g->bad_off;
	opt->bad_ids = g->bad_ids;
}

/* Bytes of one of the decoder's key and value caches for rows beams of up to max_length. */
static double
CacheBytes(CachedModel *cm, int rows, int max_length)
{
	const TfConfig *c = &cm->model.cfg;

	return (double) c->dec_layers * rows * max_length * c->d_model * sizeof(float);
}

/* ERROR before decoding if a cache would exceed what one allocation may take. */
static void
CheckCacheSize(CachedModel *cm, const char *model, int rows, int max_length)
{
	double		bytes = CacheBytes(cm, rows, max_length);

	if (bytes > (double) MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("decoding with model \"%s\" would need a key/value cache of %.0f MB", model, bytes / (1024.0 * 1024.0)),
				 errdetail("%d beams of up to %d tokens; the limit is %zu MB.",
						   rows, max_length, (size_t) (MaxAllocSize / (1024 * 1024))),
				 errhint("Use a smaller beam_size or max_length.")));
}

/* The target ids for one text (palloc'd); options NULL-able as in the SQL signature. */
static int
GenerateIds(CachedModel *cm, const char *model, text *input, const CallOptions *o, int **out)
{
	int			n;
	int		   *src = SourceIds(cm, model, input, &n);
	TfDecodeOptions opt;
	SpmAlloc	a;
	int		   *ids;
	int			nout;

	DecodeOptions(cm, model, n, o, &opt);
	CheckCacheSize(cm, model, opt.beam_size, opt.max_length);
	a = DecodeWorkspace(CurrentMemoryContext);
	nout = tf_translate(&cm->model, n, src, &opt, &ids, &a, check_interrupts);
	*out = palloc(sizeof(int) * (nout + 1));
	memcpy(*out, ids, sizeof(int) * nout);
	ReleaseWorkspace(&a);
	return nout;
}

static char *
ModelArg(FunctionCallInfo fcinfo, int arg)
{
	if (PG_ARGISNULL(arg))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model must not be null")));
	return text_to_cstring(PG_GETARG_TEXT_PP(arg));
}

PG_FUNCTION_INFO_V1(translate_text);
Datum
translate_text(PG_FUNCTION_ARGS)
{
	char	   *model;
	CallOptions o;
	text	   *in;
	text	   *out;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	model = ModelArg(fcinfo, 1);
	GetCallOptions(fcinfo, &o);
	in = InputTextArg(fcinfo, 0);
	TranslateDocuments(GetModel(model), model, 1, &in, &o, &out);
	PG_RETURN_TEXT_P(out);
}

PG_FUNCTION_INFO_V1(generate);
Datum
generate(PG_FUNCTION_ARGS)
{
	char	   *model;
	int		   *out;
	int			n;
	Datum	   *d;
	CallOptions o;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	model = ModelArg(fcinfo, 1);
	GetCallOptions(fcinfo, &o);
	n = GenerateIds(GetModel(model), model, InputTextArg(fcinfo, 0), &o, &out);
	d = palloc(sizeof(Datum) * (n + 1));
	for (int i = 0; i < n; i++)
		d[i] = Int32GetDatum(out[i]);
	PG_RETURN_ARRAYTYPE_P(construct_array(d, n, INT4OID, 4, true, TYPALIGN_INT));
}

PG_FUNCTION_INFO_V1(translate_default);
Datum
translate_default(PG_FUNCTION_ARGS)
{
	char	   *model = transformer_default_model;
	CallOptions o;
	text	   *in;
	text	   *out;

	if (model == NULL || model[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("no model to translate with"),
				 errhint("Set transformer.default_model, or call translate(input, model).")));
	memset(&o, 0, sizeof(o));
	in = InputTextArg(fcinfo, 0);
	TranslateDocuments(GetModel(model), model, 1, &in, &o, &out);
	PG_RETURN_TEXT_P(out);
}

/* translate(text[]): sentences decoded together, at most this many ... */
#define BATCH_SENTENCES 32
/* ... and this many beams in all */
#define BATCH_ROWS 128
/* elements of one translate(text[]) call (its bookkeeping stays far under 1 GB) */
#define MAX_BATCH_INPUTS 1000000

/*
 * Translate n sentences (text in the database encoding, each with tokens
 * and within the model's positions) together into out: sentences decode
 * in groups of BATCH_ROWS beams at most, so the weights are read once per
 * step for all of them; each result is the one a sentence alone gets.
 * Each group's buffers are the workspace's, and what did not fit goes
 * with batch_cxt.
 */
void
TranslateSentences(CachedModel *cm, const char *model, int n, text **in, const CallOptions *o, text **out)
{
	Tokenizer  *tgt = GetTokenizer(cm->target_tokenizer);
	int		  **srcs = palloc(sizeof(int *) * (n + 1));
	int		   *nsrc = palloc(sizeof(int) * (n + 1));
	TfDecodeOptions *opts = palloc(sizeof(TfDecodeOptions) * (n + 1));
	MemoryContext batch_cxt;

	/* every input checked before any decoding */
	for (int i = 0; i < n; i++)
	{
		srcs[i] = SourceIds(cm, model, in[i], &nsrc[i]);
		DecodeOptions(cm, model, nsrc[i], o, &opts[i]);
		CheckCacheSize(cm, model, opts[i].beam_size, opts[i].max_length);
	}

	batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "transformer batch", ALLOCSET_DEFAULT_SIZES);
	for (int first = 0; first < n;)
	{
		int			k = opts[first].beam_size;
		int			group = Max(1, Min(BATCH_SENTENCES, BATCH_ROWS / k));
		int			count = Min(group, n - first);
		int			longest = 0;
		int		  **ids;
		int		   *nids;
		MemoryContext old = MemoryContextSwitchTo(batch_cxt);
		SpmAlloc	a = DecodeWorkspace(batch_cxt);

		/* fewer sentences at once if their caches would be too large */
		for (int j = 0; j < count; j++)
			longest = Max(longest, opts[first + j].max_length);
		while (count > 1 && CacheBytes(cm, count * k, longest) > (double) MaxAllocSize)
			count /= 2;
		ids = palloc(sizeof(int *) * count);
		nids = palloc(sizeof(int) * count);
		tf_translate_batch(&cm->model, count, (const int *const *) srcs + first, nsrc + first,
						   opts + first, ids, nids, &a, check_interrupts);
		MemoryContextSwitchTo(old);
		/* the ids are read below, before anything else can decode */
		for (int j = 0; j < count; j++)
		{
			Size		len;
			char	   *str = DecodeIds(tgt, cm->target_tokenizer, nids[j], ids[j], &len);

			out[first + j] = FromUtf8(str, len);
		}
		ReleaseWorkspace(&a);
		MemoryContextReset(batch_cxt);
		first += count;
	}
	MemoryContextDelete(batch_cxt);
}

/* translate(inputs text[], model, ...): each element a document */
PG_FUNCTION_INFO_V1(translate_batch);
Datum
translate_batch(PG_FUNCTION_ARGS)
{
	ArrayType  *inputs;
	char	   *model;
	CachedModel *cm;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	text	  **docs;
	text	  **outs;
	Datum	   *d;
	int			dims[1];
	int			lbs[1] = {1};
	CallOptions o;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	GetCallOptions(fcinfo, &o);
	inputs = PG_GETARG_ARRAYTYPE_P(0);
	model = ModelArg(fcinfo, 1);
	cm = GetModel(model);
	if (ARR_NDIM(inputs) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("inputs must be a 1-D array")));
	deconstruct_array(inputs, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n > MAX_BATCH_INPUTS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many inputs to translate at once"),
				 errdetail("There are %d; the limit is %d.", n, MAX_BATCH_INPUTS),
				 errhint("Translate groups of rows, e.g. GROUP BY id / 32.")));
	docs = palloc(sizeof(text *) * (n + 1));
	outs = palloc(sizeof(text *) * (n + 1));
	d = palloc(sizeof(Datum) * (n + 1));
	for (int i = 0; i < n; i++)
	{
		if (!nulls[i])
			CheckInputSize(elems[i]);
		docs[i] = nulls[i] ? NULL : DatumGetTextPP(elems[i]);
	}
	TranslateDocuments(cm, model, n, docs, &o, outs);
	for (int i = 0; i < n; i++)
		d[i] = outs[i] ? PointerGetDatum(outs[i]) : (Datum) 0;
	dims[0] = n;
	PG_RETURN_ARRAYTYPE_P(construct_md_array(d, nulls, n > 0 ? 1 : 0, dims, lbs,
											 TEXTOID, -1, false, TYPALIGN_INT));
}

/* ------------------------------------------------------ attention maps */

/* The piece of a model id, as the tokenizer spells it. */
static const char *
PieceOf(Tokenizer *tok, int id, Size *len)
{
	if (tok->has_vocab && id >= 0 && id < tok->nmodel && tok->model_piece[id] != NULL)
	{
		*len = tok->model_piece_len[id];
		return tok->model_piece[id];
	}
	if (!tok->has_vocab && id >= 0 && id < tok->model->npieces)
	{
		*len = tok->model->pieces[id].len;
		return tok->model->pieces[id].str;
	}
	*len = 0;
	return "";
}

static void
PutRows(ReturnSetInfo *rsinfo, const char *stack, int layers, int heads, int nq, int nk,
		const float *w, text **qtok, text **ktok, bool causal, int qoff, int koff)
{
	Datum		v[8];
	bool		nulls[8] = {false};

	v[0] = CStringGetTextDatum(stack);
	for (int l = 0; l < layers; l++)
		for (int h = 0; h < heads; h++)
			for (int i = 0; i < nq; i++)
			{
				CHECK_FOR_INTERRUPTS();
				for (int j = 0; j < (causal ? i + 1 : nk); j++)
				{
					v[1] = Int32GetDatum(l + 1);
					v[2] = Int32GetDatum(h + 1);
					v[3] = Int32GetDatum(qoff + i + 1);
					v[4] = PointerGetDatum(qtok[i]);
					v[5] = Int32GetDatum(koff + j + 1);
					v[6] = PointerGetDatum(ktok[j]);
					v[7] = Float4GetDatum(w[(((size_t) l * heads + h) * nq + i) * nk + j]);
					tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
				}
			}
}

/*
 * The attention maps of one sentence (in): rows with query and key
 * positions after *qoff and *koff (advanced past this sentence's).
 */
static void
SentenceMaps(ReturnSetInfo *rsinfo, CachedModel *cm, const char *model, text *in, const CallOptions *o,
			 int *src_off, int *tgt_off)
{
	const TfConfig *c = &cm->model.cfg;
	Tokenizer  *stok = GetTokenizer(cm->source_tokenizer);
	Tokenizer  *ttok = GetTokenizer(cm->target_tokenizer);
	TfDecodeOptions opt;
	int			n,
				nout,
				T;
	int		   *src;
	int		   *out;
	int		   *tokens;
	int		   *dec_in;
	text	  **src_piece;
	text	  **tgt_piece;
	float	   *enc_w,
			   *dec_w,
			   *cross_w;
	double		floats;
	SpmAlloc	a;

	src = SourceIds(cm, model, in, &n);
	DecodeOptions(cm, model, n, o, &opt);
	nout = GenerateIds(cm, model, in, o, &out);
	/* EOS ended it, unless the length did */
	T = nout + (nout < opt.max_length - 1 ? 1 : 0);
	tokens = palloc(sizeof(int) * (T + 1));
	dec_in = palloc(sizeof(int) * (T + 1));
	memcpy(tokens, out, sizeof(int) * nout);
	if (T > nout)
		tokens[nout] = c->eos_id;
	dec_in[0] = c->decoder_start_id;
	for (int t = 1; t < T; t++)
		dec_in[t] = tokens[t - 1];

	floats = (double) c->enc_layers * c->enc_heads * n * n +
		(double) c->dec_layers * c->dec_heads * ((double) T * T + (double) T * n);
	CheckBufferSize((size_t) Min(floats * sizeof(float), (double) SIZE_MAX / 2));
	enc_w = palloc_extended(sizeof(float) * (Size) c->enc_layers * c->enc_heads * n * n + 1, MCXT_ALLOC_HUGE);
	dec_w = palloc_extended(sizeof(float) * (Size) c->dec_layers * c->dec_heads * T * T + 1, MCXT_ALLOC_HUGE);
	cross_w = palloc_extended(sizeof(float) * (Size) c->dec_layers * c->dec_heads * T * n + 1, MCXT_ALLOC_HUGE);
	a.alloc = context_alloc;
	a.ctx = CurrentMemoryContext;
	if (T > 0)
		tf_attention_maps(&cm->model, n, src, T, dec_in, enc_w, dec_w, cross_w, &a);

	src_piece = palloc(sizeof(text *) * (n + 1));
	for (int i = 0; i < n; i++)
	{
		Size		len;
		const char *p = i == n - 1 ? "</s>" : PieceOf(stok, src[i], &len);

		src_piece[i] = i == n - 1 ? cstring_to_text(p) : PieceToText(p, len);
	}
	tgt_piece = palloc(sizeof(text *) * (T + 1));
	for (int t = 0; t < T; t++)
	{
		Size		len;
		const char *p = tokens[t] == c->eos_id && t == T - 1 && T > nout ? "</s>" : PieceOf(ttok, tokens[t], &len);

		tgt_piece[t] = (tokens[t] == c->eos_id && t == T - 1 && T > nout) ? cstring_to_text(p) : PieceToText(p, len);
	}
	if (T > 0)
	{
		PutRows(rsinfo, "encoder", c->enc_layers, c->enc_heads, n, n, enc_w, src_piece, src_piece, false,
				*src_off, *src_off);
		PutRows(rsinfo, "decoder", c->dec_layers, c->dec_heads, T, T, dec_w, tgt_piece, tgt_piece, true,
				*tgt_off, *tgt_off);
		PutRows(rsinfo, "cross", c->dec_layers, c->dec_heads, T, n, cross_w, tgt_piece, src_piece, false,
				*tgt_off, *src_off);
	}
	*src_off += n;
	*tgt_off += T;
}

/*
 * attention_map(input, model, beam_size): every attention weight of the
 * translation translate() gives input, sentence by sentence as it
 * translates it (its sentences, cut where one is longer than the model's
 * positions): the encoder's self-attention, the decoder's, and the
 * encoder-decoder attention of each step that produced an output token
 * (EOS included), from one teacher-forced pass over those tokens.
 * Positions run on across sentences; a sentence attends only to itself,
 * so there are no rows between sentences.
 */
PG_FUNCTION_INFO_V1(attention_map);
Datum
attention_map(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *model;
	CachedModel *cm;
	CallOptions o;
	text	  **sentences;
	int			nsent;
	int			src_off = 0,
				tgt_off = 0;

	InitMaterializedSRF(fcinfo, 0);
	if (PG_ARGISNULL(0))
		return (Datum) 0;
	model = ModelArg(fcinfo, 1);
	cm = GetModel(model);
	GetCallOptions(fcinfo, &o);
	nsent = DocumentSentences(cm, InputTextArg(fcinfo, 0), &sentences);
	for (int i = 0; i < nsent; i++)
		SentenceMaps(rsinfo, cm, model, sentences[i], &o, &src_off, &tgt_off);
	return (Datum) 0;
}
