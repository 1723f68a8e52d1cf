/*
 * translate.c
 *		The translation pipeline: text -> sentences -> batches -> search ->
 *		text.  A document is split into sentences (ICU's rules, cut further
 *		to the model's positions), all sentences of all documents are
 *		tokenized and decoded together in batches with the call's options,
 *		and the translations are joined again with the original whitespace.
 *		Also decoding's workspace.  The SQL entry points (sql_model.c,
 *		sql_document.c) call this file; it never calls them.
 */
#include "postgres.h"

#include <limits.h>
#include <math.h>

#include "access/xact.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "decode_workspace.h"
#include "model_store.h"
#include "segment.h"
#include "tokenizer.h"
#include "translate.h"

/* ---------------------------------------------------------- inference */

/*
 * The special tokens that the model's tokenizer splits off a source text:
 * the tokenizer's own, and NLLB's and M2M100's language tokens (NLLB's
 * deu_Latn, M2M100's __de__: added tokens; Marian's >>fra<< are pieces),
 * then NLLB's <mask> (lstrip), which NllbTokenizer numbers after the
 * languages.  The tokenizer's alone when the model adds none.
 */
static const TfSpecialSet *
ModelSpecials(const CachedModel *cm, const Tokenizer *tok)
{
	const TfSpecialSet *own = tok->specials;
	int			nown = own ? own->n : 0;
	TfSpecialSet *set;
	TfSpecialToken *all;
	int			n = 0;
	bool		nllb;

	if (cm->nlangs == 0 || tok->wp != NULL || strncmp(cm->lang_token[0], ">>", 2) == 0)
		return own;
	nllb = strncmp(cm->lang_token[0], "__", 2) != 0;
	all = palloc(sizeof(TfSpecialToken) * (nown + cm->nlangs + 1));
	for (int i = 0; i < nown; i++)
		all[n++] = own->tok[i];
	for (int i = 0; i < cm->nlangs; i++)
	{
		all[n].str = cm->lang_token[i];
		all[n].len = strlen(cm->lang_token[i]);
		all[n].id = cm->lang_id[i];
		all[n].lstrip = all[n].rstrip = false;
		n++;
	}
	if (nllb && tok->has_vocab)
	{
		/* NllbTokenizer: <mask> is len(sp_model) + len(lang_code_to_id) + fairseq_offset */
		int			mask = tok->nmodel + cm->nlangs;
		bool		after = true;

		for (int i = 0; i < cm->nlangs; i++)
			after &= cm->lang_id[i] >= tok->nmodel && cm->lang_id[i] < mask;
		if (after && mask < cm->model.cfg.src_vocab)
		{
			all[n].str = "<mask>";
			all[n].len = 6;
			all[n].id = mask;
			all[n].lstrip = true;
			all[n].rstrip = false;
			n++;
		}
	}
	set = palloc(sizeof(TfSpecialSet));
	tf_special_set_init(set, n, all);
	return set;
}

/*
 * Source ids of input as the model's tokenizer makes them: pieces, then
 * EOS; the call's language tokens before (Marian's >>fra<<, NLLB's
 * deu_Latn, M2M100's __de__) or after (NLLB's legacy_behaviour).
 */
/* The model ids of an encoding's tokens into ids; ERROR for one past the vocabulary (a damaged model). */
static int
token_ids(const CachedModel *cm, const char *model, const Tokenizer *tok, const SpmEncoding *enc, bool target,
		  int *ids)
{
	int			vocab = target ? cm->model.cfg.vocab : cm->model.cfg.src_vocab;

	for (int i = 0; i < enc->ntokens; i++)
	{
		ids[i] = TokenModelId(tok, &enc->tokens[i]);
		if (ids[i] >= vocab)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("model \"%s\" is damaged", model),
					 errdetail("Its %s tokenizer \"%s\" gives the id %d, but the model's vocabulary has %d entries.",
							   target ? "target" : "source", target ? cm->target_tokenizer : cm->source_tokenizer,
							   ids[i], vocab),
					 errhint("Drop it and import it again.")));
	}
	return enc->ntokens;
}

/* SourceIds(); soft: NULL for a text with no tokens or too many (TrainingIds()) */
static int *
source_ids(CachedModel *cm, const char *model, text *input, const CallOptions *o, int *n, bool soft)
{
	Tokenizer  *tok = GetTokenizer(cm->source_tokenizer);
	const TfConfig *c = &cm->model.cfg;
	SpmEncoding enc;
	int		   *ids;
	int			prefix,
				suffix,
				forced_bos;
	int			extra;
	int			k = 0;
	int			plen = TextLanguagePrefix(cm, VARDATA_ANY(input), VARSIZE_ANY_EXHDR(input));
	char	   *text_target = NULL;

	/* >>fra<< at the start of the text names the target, and is not translated */
	if (plen > 0)
	{
		text_target = pnstrdup(VARDATA_ANY(input), plen);
		input = cstring_to_text_with_len(VARDATA_ANY(input) + plen, VARSIZE_ANY_EXHDR(input) - plen);
	}

	EncodeTextWith(tok, ModelSpecials(cm, tok), input, &enc);
	if (enc.ntokens == 0 && soft)
		return NULL;
	if (enc.ntokens == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("input text is empty"),
				 errdetail("It has no tokens once whitespace is normalized."),
				 errhint("Leave out empty rows, e.g. WHERE btrim(body) <> ''.")));
	ResolveLanguages(cm, model, o, text_target, &prefix, &suffix, &forced_bos);
	extra = (prefix >= 0) + (suffix >= 0);
	if (enc.ntokens + 1 + extra > c->max_pos && soft)
		return NULL;
	if (enc.ntokens + 1 + extra > c->max_pos)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("input text is too long for model \"%s\"", model),
				 extra > 0 ?
				 errdetail("It has %d tokens with the end-of-sentence and language tokens; the model has %d positions.",
						   enc.ntokens + 1 + extra, c->max_pos) :
				 errdetail("It has %d tokens with the end-of-sentence token; the model has %d positions.",
						   enc.ntokens + 1, c->max_pos),
				 errhint("Split the text into sentences.")));
	ids = palloc(sizeof(int) * (enc.ntokens + 1 + extra));
	if (prefix >= 0)
		ids[k++] = prefix;
	k += token_ids(cm, model, tok, &enc, false, ids + k);
	ids[k++] = c->eos_id;
	if (suffix >= 0)
		ids[k++] = suffix;
	*n = k;
	return ids;
}

int *
SourceIds(CachedModel *cm, const char *model, text *input, const CallOptions *o, int *n)
{
	return source_ids(cm, model, input, o, n, false);
}

/*
 * A training pair's ids: the source as SourceIds() makes them, or the
 * labels as Hugging Face's tokenizer(text_target=...) makes them (Marian:
 * the target tokenizer's pieces, then EOS; NLLB and M2M100: the target
 * language's token first, as generate() forces it).  NULL for a text
 * with no tokens or more than the model's positions.
 */
int *
TrainingIds(CachedModel *cm, const char *model, text *input, const CallOptions *o, bool target, int *n)
{
	Tokenizer  *tok;
	const TfConfig *c = &cm->model.cfg;
	SpmEncoding enc;
	int		   *ids;
	int			prefix,
				suffix,
				forced_bos;
	int			k = 0;

	if (!target)
		return source_ids(cm, model, input, o, n, true);
	tok = GetTokenizer(cm->target_tokenizer);
	EncodeTextWith(tok, ModelSpecials(cm, tok), input, &enc);
	if (enc.ntokens == 0)
		return NULL;
	forced_bos = -1;
	if (cm->lang_forced_bos)
		ResolveLanguages(cm, model, o, NULL, &prefix, &suffix, &forced_bos);
	if (enc.ntokens + 1 + (forced_bos >= 0) > c->max_pos)
		return NULL;
	ids = palloc(sizeof(int) * (enc.ntokens + 2));
	if (forced_bos >= 0)
		ids[k++] = forced_bos;
	k += token_ids(cm, model, tok, &enc, true, ids + k);
	ids[k++] = c->eos_id;
	*n = k;
	return ids;
}

/*
 * Drop what decode(skip_special_tokens=True) drops from a multilingual
 * model's output: language tokens (the forced target language first of
 * all), and for NLLB and M2M100 fairseq's <s>, <pad>, </s> and <unk>.
 * Returns the ids left, in place.
 */
int
SkipSpecialIds(const CachedModel *cm, int n, int *ids)
{
	int			k = 0;

	if (cm->nlangs == 0)
		return n;
	for (int i = 0; i < n; i++)
	{
		if (IsLanguageToken(cm, ids[i]))
			continue;
		if (cm->lang_forced_bos && ids[i] >= 0 && ids[i] <= 3)
			continue;
		ids[k++] = ids[i];
	}
	return k;
}

static void
check_interrupts(void)
{
	CHECK_FOR_INTERRUPTS();
}

/* transformer.max_length_factor: the runaway guard */
double		transformer_max_length_factor = 3.0;

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
void
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
	{
		int			prefix,
					suffix;

		opt->forced_bos_id = -1;
		if (cm->lang_forced_bos)
			ResolveLanguages(cm, model, o, NULL, &prefix, &suffix, &opt->forced_bos_id);
	}
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
int
GenerateIds(CachedModel *cm, const char *model, text *input, const CallOptions *o, int **out)
{
	int			n;
	int		   *src = SourceIds(cm, model, input, o, &n);
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

/* translate(text[]): sentences decoded together, at most this many ... */
#define BATCH_SENTENCES 32
/* ... and this many beams in all */
#define BATCH_ROWS 128

/*
 * Translate n sentences (text in the database encoding, each with tokens
 * and within the model's positions) together into out: sentences decode
 * in groups of BATCH_ROWS beams at most, so the weights are read once per
 * step for all of them; each result is the one a sentence alone gets.
 * Each group's buffers are the workspace's, and what did not fit goes
 * with batch_cxt.
 */
/* the tokens the last TranslateSentenceIds() read and wrote (for the statistics) */
int64		last_tokens_in = 0;
int64		last_tokens_out = 0;

void
TranslateSentences(CachedModel *cm, const char *model, int n, text **in, const CallOptions *o, text **out)
{
	TranslateSentenceIds(cm, model, n, in, o, out, NULL, NULL);
}

/*
 * As TranslateSentences, and if raw is not NULL, each sentence's target ids
 * as generated (language tokens included, EOS not) in raw[i], nraw[i]
 * (palloc'd in the caller's context): what the alignment of a sentence
 * teacher-forces.
 */
void
TranslateSentenceIds(CachedModel *cm, const char *model, int n, text **in, const CallOptions *o, text **out,
					 int **raw, int *nraw)
{
	MemoryContext caller = CurrentMemoryContext;
	Tokenizer  *tgt = GetTokenizer(cm->target_tokenizer);
	int		  **srcs = palloc(sizeof(int *) * (n + 1));
	int		   *nsrc = palloc(sizeof(int) * (n + 1));
	TfDecodeOptions *opts = palloc(sizeof(TfDecodeOptions) * (n + 1));
	MemoryContext batch_cxt;

	last_tokens_in = last_tokens_out = 0;

	/* every input checked before any decoding (a document can have 100,000 short ones) */
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		srcs[i] = SourceIds(cm, model, in[i], o, &nsrc[i]);
		last_tokens_in += nsrc[i];
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
			char	   *str;

			last_tokens_out += nids[j];
			if (raw != NULL)
			{
				raw[first + j] = MemoryContextAlloc(caller, sizeof(int) * (nids[j] + 1));
				memcpy(raw[first + j], ids[j], sizeof(int) * nids[j]);
				nraw[first + j] = nids[j];
			}
			nids[j] = SkipSpecialIds(cm, nids[j], ids[j]);
			str = DecodeIds(tgt, cm->target_tokenizer, nids[j], ids[j], &len);

			out[first + j] = FromUtf8(str, len);
		}
		ReleaseWorkspace(&a);
		MemoryContextReset(batch_cxt);
		first += count;
	}
	MemoryContextDelete(batch_cxt);
}

/* Sentence boundaries of UTF-8 text: nseg + 1 byte offsets. */
size_t *
SentenceBounds(const char *s, size_t len, const char *locale, int *nseg)
{
	SpmAlloc	a = PgAllocator(CurrentMemoryContext);
	size_t	   *bounds;
	char		err[256];

	*nseg = tf_sentence_bounds(s, len, locale, &a, &bounds, err, sizeof(err));
	if (*nseg < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("could not split the text into sentences"),
				 errdetail("ICU reports: %s.", err)));
	return bounds;
}

