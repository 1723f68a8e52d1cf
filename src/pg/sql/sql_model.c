/*
 * sql_model.c
 *		SQL entry points for inference: generate(), translate() (the
 *		pipeline is translate.c), the options of a call, the attention
 *		maps, and the 0.7.0 C names of input_embeddings() and
 *		encoder_output().
 */
#include "postgres.h"

#include <limits.h>
#include <math.h>
#include <sys/stat.h>

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
#include "decode_workspace.h"
#include "model_store.h"
#include "pg_arrays.h"
#include "server_files.h"
#include "input_limit.h"
#include "translate.h"


char	   *transformer_default_model = NULL;

/*
 * The C names of the functions that were embed() and encoder_output() up to
 * 0.7.0, for the SQL definitions of an installation not yet updated with
 * ALTER EXTENSION: the same code as input_embeddings() and encoder_output()
 * (sql_embed.c).
 */
extern Datum input_embeddings(PG_FUNCTION_ARGS);
extern Datum encoder_output(PG_FUNCTION_ARGS);

PG_FUNCTION_INFO_V1(embed);
Datum
embed(PG_FUNCTION_ARGS)
{
	return input_embeddings(fcinfo);
}

PG_FUNCTION_INFO_V1(encode);
Datum
encode(PG_FUNCTION_ARGS)
{
	return encoder_output(fcinfo);
}

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
	TranslateDocuments(GetTranslationModel(model), model, 1, &in, &o, &out);
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
	n = GenerateIds(GetTranslationModel(model), model, InputTextArg(fcinfo, 0), &o, &out);
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
	TranslateDocuments(GetTranslationModel(model), model, 1, &in, &o, &out);
	PG_RETURN_TEXT_P(out);
}

/* elements of one translate(text[]) call (its bookkeeping stays far under 1 GB) */
#define MAX_BATCH_INPUTS 1000000


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
	cm = GetTranslationModel(model);
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

	src = SourceIds(cm, model, in, o, &n);
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
	a.alloc = WorkspaceContextAlloc;
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
	cm = GetTranslationModel(model);
	GetCallOptions(fcinfo, &o);
	nsent = DocumentSentences(cm, InputTextArg(fcinfo, 0), &sentences);
	for (int i = 0; i < nsent; i++)
		SentenceMaps(rsinfo, cm, model, sentences[i], &o, &src_off, &tgt_off);
	return (Datum) 0;
}
