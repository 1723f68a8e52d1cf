/*
 * translate.h
 *		The translation pipeline (translate.c): text -> sentences ->
 *		batches -> search -> text, called by the SQL entry points
 *		(sql_model.c, sql_document.c); and the options of a call.
 */
#ifndef TRANSLATE_H
#define TRANSLATE_H

#include "postgres.h"

#include "fmgr.h"

#include "model_store.h"
#include "tokenizer.h"

/*
 * translate()'s per-call options, arguments 2 to 9 (version 0.1.0 declared
 * only the first two); NULL, or absent, takes the model's.
 */
enum
{
	OPT_BEAM_SIZE, OPT_MAX_LENGTH, OPT_EARLY_STOPPING, OPT_LENGTH_PENALTY,
	OPT_NO_REPEAT_NGRAM_SIZE, OPT_REPETITION_PENALTY, OPT_MIN_LENGTH, OPT_MAX_NEW_TOKENS,
	OPT_SOURCE_LANG, OPT_TARGET_LANG,	/* text, since 0.6.0 */
	OPT_FORMAT, OPT_KEEP, OPT_SPLIT,	/* text, text[], boolean; translate() since 0.7.0 */
	NUM_CALL_OPTIONS
};
#define FIRST_OPTION_ARG 2

typedef struct CallOptions
{
	bool		given[NUM_CALL_OPTIONS];
	Datum		value[NUM_CALL_OPTIONS];
} CallOptions;

/* transformer.max_length_factor: the runaway guard (translate.c) */
extern double transformer_max_length_factor;

/* The options of a call of translate() or generate() (sql_model.c). */
extern void GetCallOptions(FunctionCallInfo fcinfo, CallOptions *o);

/*
 * Source ids of input as the model's tokenizer makes them: pieces, then EOS,
 * with the call's language tokens where the model wants them (palloc'd; o
 * may be NULL).
 */
extern int *SourceIds(CachedModel *cm, const char *model, text *input, const CallOptions *o, int *n);
/*
 * A training pair's ids (fine_tune()): the source's (target false) or the
 * labels (the target tokenizer's, EOS, and the target language's token
 * first where generate() forces it), in o's languages (NULL-able); NULL
 * for no tokens or too many.
 */
extern int *TrainingIds(CachedModel *cm, const char *model, text *input, const CallOptions *o, bool target, int *n);

/* The language tokens of a call (model_languages.c); -1 where none. */
extern void ResolveLanguages(const CachedModel *cm, const char *model, const CallOptions *o,
							 const char *text_target, int *prefix, int *suffix, int *forced_bos);
/* The length of a Marian language token (>>fra<<) that starts the text, or 0. */
extern int	TextLanguagePrefix(const CachedModel *cm, const char *s, int len);

/* Decoding options for n source ids: the call's options, else the model's. */
extern void DecodeOptions(CachedModel *cm, const char *model, int n, const CallOptions *o,
						  TfDecodeOptions *opt);

/* The target ids for one text (palloc'd); options NULL-able as in the SQL signature. */
extern int	GenerateIds(CachedModel *cm, const char *model, text *input, const CallOptions *o, int **out);

/* Sentence boundaries of UTF-8 text: nseg + 1 byte offsets (ICU's rules). */
extern size_t *SentenceBounds(const char *s, size_t len, const char *locale, int *nseg);

/* Translate n sentences together. */
extern void TranslateSentences(CachedModel *cm, const char *model, int n, text **in,
							   const CallOptions *o, text **out);

/* As TranslateSentences, with each sentence's generated ids in raw, nraw if raw is not NULL. */
extern void TranslateSentenceIds(CachedModel *cm, const char *model, int n, text **in,
								 const CallOptions *o, text **out, int **raw, int *nraw);

/* The tokens the last TranslateSentenceIds() read (EOS and language tokens included) and generated. */
extern int64 last_tokens_in;
extern int64 last_tokens_out;

/* Drop language and fairseq special ids from generated ids, as decode(skip_special_tokens) does. */
extern int	SkipSpecialIds(const CachedModel *cm, int n, int *ids);

/*
 * Translate n documents together: each split into
 * sentences, all sentences decoded as one batch, joined again with the
 * original whitespace.  NULL stays NULL; whitespace-only comes back as is.
 */
/*
 * The pieces TranslateDocuments() decodes of one document, in order: its
 * sentences, each cut further where it is longer than the model's
 * positions (text in the database encoding, palloc'd).  A blank document
 * has none.
 */
extern int	DocumentSentences(CachedModel *cm, text *doc, text ***sentences);

extern void TranslateDocuments(CachedModel *cm, const char *model, int n, text **docs,
							   const CallOptions *o, text **out);

#endif							/* TRANSLATE_H */
