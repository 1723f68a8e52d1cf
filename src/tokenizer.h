/*
 * tokenizer.h
 *		Tokenizers stored in transformer_tokenizers, loaded once per backend.
 */
#ifndef TOKENIZER_H
#define TOKENIZER_H

#include "postgres.h"

#include "utils/jsonb.h"

#include "backend_cache.h"
#include "spm.h"

typedef struct Tokenizer
{
	char		name[NAMEDATALEN];	/* hash key (CacheEntryHeader) */
	MemoryContext cxt;			/* everything below lives here */
	SpmModel   *model;
	bool		has_vocab;		/* ids are the vocabulary's, not SentencePiece's */
	SpmMap		vocab;			/* piece -> model id */
	int32	   *spm_to_model;	/* (npieces) model id of each piece */
	int32		vocab_unk;		/* model id of the unknown piece */
	int32		nmodel;			/* model ids are 0 .. nmodel - 1 */
	const char **model_piece;	/* (nmodel) piece of each model id, or NULL */
	uint32	   *model_piece_len;	/* (nmodel) */
	uint8		digest[32];		/* SHA-256 of the stored bytes, to share copies */
} Tokenizer;

/* The tokenizer called name; ERROR if there is none.  Valid for the transaction. */
extern Tokenizer *GetTokenizer(const char *name);

/*
 * Parse and check a model file and an optional vocabulary into t, with all
 * memory in t->cxt.  ERROR with a clear message on any defect.
 */
extern void BuildTokenizer(Tokenizer *t, const char *model, Size model_len, Jsonb *vocab);

/*
 * The same with every allocation the tokenizer keeps made by a (and
 * nothing it keeps pointing outside them): the shared tokenizer files
 * build into a mapped file this way.
 */
extern void BuildTokenizerWith(Tokenizer *t, const SpmAlloc *a, const char *model, Size model_len,
							   Jsonb *vocab);

/* The model id of each token of an encoding, as Marian's tokenizer maps pieces. */
extern int32 TokenModelId(const Tokenizer *t, const SpmToken *tok);

/* sql_tokenizer.c: shared with the models */
extern int32 StoreTokenizer(const char *name, const char *model, Size model_len, Jsonb *vocab);
extern void EncodeText(Tokenizer *tok, text *input, SpmEncoding *enc);
extern char *DecodeIds(Tokenizer *tok, const char *name, int n, const int32 *ids, Size *len);
extern char *ToUtf8(text *t, Size *len);
extern text *FromUtf8(const char *s, Size len);

/* A palloc allocator for the core, in the given memory context. */
extern SpmAlloc PgAllocator(MemoryContext cxt);

/* Register the cache invalidation callbacks; from _PG_init. */
extern void InitTokenizerCache(void);

#endif							/* TOKENIZER_H */
