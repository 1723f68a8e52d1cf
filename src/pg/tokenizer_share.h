/*
 * tokenizer_share.h
 *		Tokenizers shared between backends through mapped files
 *		(tokenizer_share.c): above the builder (tokenizer.c), below the
 *		per-backend cache (tokenizer_cache.c).
 */
#ifndef TOKENIZER_SHARE_H
#define TOKENIZER_SHARE_H

#include "postgres.h"

#include "tokenizer.h"

/* Point t into the tokenizer's shared file if it exists and checks out. */
extern bool MapSharedTokenizer(Tokenizer *t, const char *name, uint64 fingerprint);

/*
 * Build t (its memory in t->cxt) and, sharing on, write its file and use
 * that instead; on any failure to write, a WARNING and t's own copy.
 */
extern void LoadTokenizerShared(Tokenizer *t, const char *name, uint64 fingerprint,
								const char *model, Size model_len, const TokVocab *vocab);

/* Remove the tokenizer's files in this database (drop, re-import). */
extern void RemoveSharedTokenizer(const char *name);

#endif							/* TOKENIZER_SHARE_H */
