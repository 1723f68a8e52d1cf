/*
 * tokenizer.h
 *		Tokenizers stored in transformer_tokenizers, loaded once per backend.
 */
#ifndef TOKENIZER_H
#define TOKENIZER_H

#include "postgres.h"

#include "utils/jsonb.h"

#include "backend_cache.h"
#include "special_tokens.h"
#include "spm.h"
#include "wordpiece.h"

typedef struct Tokenizer
{
	char		name[NAMEDATALEN];	/* hash key (CacheEntryHeader) */
	MemoryContext cxt;			/* everything below lives here */
	SpmModel   *model;			/* NULL for a WordPiece tokenizer */
	TfWordPiece *wp;			/* BERT's WordPiece, or NULL */
	bool		has_vocab;		/* ids are the vocabulary's, not SentencePiece's */
	TfSpecialSet *specials;		/* special tokens written in the text are those
								 * tokens (see special_tokens_of()), or NULL */
	SpmMap		vocab;			/* piece -> model id */
	int32	   *spm_to_model;	/* (npieces) model id of each piece */
	int32		vocab_unk;		/* model id of the unknown piece */
	int32		nmodel;			/* model ids are 0 .. nmodel - 1 */
	const char **model_piece;	/* (nmodel) piece of each model id, or NULL */
	uint32	   *model_piece_len;	/* (nmodel) */
	uint8		digest[32];		/* SHA-256 of the stored bytes, to share copies */
} Tokenizer;

/*
 * A vocabulary (piece -> model id) as stored: a jsonb value (in the
 * database encoding, UTF8 databases' choice), or the UTF-8 bytes of the
 * JSON file (vocab_json, where the database encoding cannot hold every
 * piece: LATIN1 and SentencePiece's U+2581).
 */
typedef struct TokVocab
{
	Jsonb	   *jsonb;
	const char *json;
	Size		json_len;
} TokVocab;

/* Is the database's encoding UTF8, so that vocabularies are stored as jsonb? */
extern bool VocabAsJsonb(void);

/* The vocabulary of vocab.json's bytes, stored as this database does (ERROR if it is not JSON). */
extern TokVocab VocabFromFile(const char *what, const char *json, Size len);

/* The tokenizer called name; ERROR if there is none.  Valid for the transaction. */
extern Tokenizer *GetTokenizer(const char *name);

/*
 * Parse and check a model file and an optional vocabulary into t, with all
 * memory in t->cxt.  ERROR with a clear message on any defect.
 */
extern void BuildTokenizer(Tokenizer *t, const char *model, Size model_len, const TokVocab *vocab);

/*
 * The same with every allocation the tokenizer keeps made by a (and
 * nothing it keeps pointing outside them): the shared tokenizer files
 * build into a mapped file this way.
 */
extern void BuildTokenizerWith(Tokenizer *t, const SpmAlloc *a, const char *model, Size model_len,
							   const TokVocab *vocab);

/*
 * A WordPiece tokenizer is stored as this line, a line of JSON options
 * (tokenizer.json's BertNormalizer and WordPiece settings), then vocab.txt.
 */
#define WORDPIECE_MAGIC "#transformer wordpiece 1\n"
extern bool IsWordPiece(const char *model, Size model_len);

/* encoder_files.c: a Hugging Face tokenizer directory (vocab.txt, or sentencepiece.bpe.model with fairseq's ids) */
extern void ReadTokenizerDirectory(const char *dir, char **model, Size *len, char **vocab, Size *vlen);

/* The model id of each token of an encoding, as Marian's tokenizer maps pieces. */
extern int32 TokenModelId(const Tokenizer *t, const SpmToken *tok);

/* The piece of a model id, as the tokenizer spells it ("" if it has none). */
extern const char *PieceOf(Tokenizer *tok, int id, Size *len);

/* sql_tokenizer.c: shared with the models */
extern int32 StoreTokenizer(const char *name, const char *model, Size model_len, const TokVocab *vocab);
extern void EncodeText(Tokenizer *tok, text *input, SpmEncoding *enc);
/* The same with a model's special tokens (ModelSpecials) in place of the tokenizer's. */
extern void EncodeTextWith(Tokenizer *tok, const TfSpecialSet *specials, text *input, SpmEncoding *enc);
extern char *DecodeIds(Tokenizer *tok, const char *name, int n, const int32 *ids, Size *len);
extern char *ToUtf8(text *t, Size *len);
extern text *FromUtf8(const char *s, Size len);
extern text *PieceToText(const char *s, Size len);

/* transformer.invalid_utf8: what a SQL_ASCII database's invalid UTF-8 gets (input_limit.c) */
typedef enum
{
	INVALID_UTF8_ERROR,
	INVALID_UTF8_REPLACE
} InvalidUtf8Action;
extern int	transformer_invalid_utf8;

/* A palloc allocator for the core, in the given memory context. */
extern SpmAlloc PgAllocator(MemoryContext cxt);

/* Register the cache invalidation callbacks; from _PG_init. */
extern void InitTokenizerCache(void);

#endif							/* TOKENIZER_H */
