/*
 * translate.h
 *		Translation entry points shared by sql_model.c (sentences, the
 *		options of a call) and sql_document.c (documents).
 */
#ifndef TRANSLATE_H
#define TRANSLATE_H

#include "postgres.h"

#include "fmgr.h"

#include "model_store.h"

/*
 * translate()'s per-call options, arguments 2 to 9 (version 0.1.0 declared
 * only the first two); NULL, or absent, takes the model's.
 */
enum
{
	OPT_BEAM_SIZE, OPT_MAX_LENGTH, OPT_EARLY_STOPPING, OPT_LENGTH_PENALTY,
	OPT_NO_REPEAT_NGRAM_SIZE, OPT_REPETITION_PENALTY, OPT_MIN_LENGTH, OPT_MAX_NEW_TOKENS,
	NUM_CALL_OPTIONS
};
#define FIRST_OPTION_ARG 2

typedef struct CallOptions
{
	bool		given[NUM_CALL_OPTIONS];
	Datum		value[NUM_CALL_OPTIONS];
} CallOptions;

/* The options of a call of translate() or generate(). */
extern void GetCallOptions(FunctionCallInfo fcinfo, CallOptions *o);

/* Translate n sentences together (sql_model.c). */
extern void TranslateSentences(CachedModel *cm, const char *model, int n, text **in,
							   const CallOptions *o, text **out);

/*
 * Translate n documents together (sql_document.c): each split into
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
