/*
 * wordpiece.h
 *		BERT's tokenizer: the BertNormalizer, the BertPreTokenizer and
 *		WordPiece of Hugging Face's tokenizers, ported rule by rule from the
 *		npm package @huggingface/tokenizers (src/core/normalizer/
 *		BertNormalizer.ts, preTokenizer/BertPreTokenizer.ts, model/
 *		WordPiece.ts), with the Unicode data from ICU.  No postgres.h.
 */
#ifndef WORDPIECE_H
#define WORDPIECE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spm.h"				/* SpmAlloc, SpmEncoding, SpmMap */

/* BertNormalizer's and WordPiece's settings (tokenizer.json's names). */
typedef struct TfWordPieceOptions
{
	bool		clean_text;		/* drop controls, whitespace to ' ' */
	bool		handle_chinese_chars;	/* spaces around CJK ideographs */
	int			strip_accents;	/* 1, 0, or -1: as lowercase (null) */
	bool		lowercase;
	int			max_input_chars_per_word;	/* longer words are [UNK] */
	char		unk_token[64];
	char		prefix[16];		/* continuing_subword_prefix, "##" */
} TfWordPieceOptions;

typedef struct TfWordPiece
{
	TfWordPieceOptions opt;
	int			ntokens;		/* ids 0 .. ntokens - 1 (vocab.txt's lines) */
	const char **token;			/* (ntokens) the token of each id, NUL-terminated */
	uint32_t   *token_len;		/* (ntokens) */
	SpmMap		map;			/* token -> id (a repeated token: its last line) */
	int			unk_id;
	/*
	 * Special (added) tokens: found in the raw text before anything else,
	 * the leftmost and longest first, and kept whole; the text between them
	 * is tokenized on its own (AddedVocabulary.split_with_indices).
	 */
	int			nspecial;
	const char **special;		/* (nspecial) */
	uint32_t   *special_len;
	int		   *special_id;
} TfWordPiece;

/* Most special tokens a tokenizer may have (BERT's: 5; with [unusedN]: ~1000). */
#define TF_WORDPIECE_MAX_SPECIAL 4096

/* Longest vocabulary we accept: far beyond real ones (bert-base has 30,522). */
#define TF_WORDPIECE_MAX_TOKENS 4000000

/*
 * Read vocab.txt as BertTokenizer's load_vocab does (one token per line,
 * only "\n" stripped, the line number is the id).  NULL with a message in
 * err on a defect (no unk_token in the vocabulary, too many lines, a
 * token that is not UTF-8).
 */
TfWordPiece *tf_wordpiece_load(const char *vocab, size_t len, const TfWordPieceOptions *opt,
							   const SpmAlloc *a, char *err, size_t errlen);

/*
 * Declare the special tokens (as tokenizer.json's added_tokens list them):
 * each must be in the vocabulary.  NULL on success, else the offending token.
 */
const char *tf_wordpiece_set_specials(TfWordPiece *wp, int n, const char *const *tokens,
									  const SpmAlloc *a);

/* The id of a token, -1 if it is not in the vocabulary. */
int			tf_wordpiece_id(const TfWordPiece *wp, const char *s, size_t len);

/*
 * Tokenize UTF-8 text (invalid sequences read as U+FFFD): normalize,
 * pre-tokenize, WordPiece.  Tokens point at the vocabulary's strings.
 * False if the text is longer than SPM_MAX_NORMALIZED_BYTES once
 * normalized, or ICU fails.
 */
bool		tf_wordpiece_encode(const TfWordPiece *wp, const char *text, size_t len,
								const SpmAlloc *a, SpmEncoding *enc);

/*
 * Tokens back to text as the WordPiece decoder does: a token with the
 * prefix joins the one before, the others follow a space; then
 * clean_up_tokenization_spaces (" ." -> ".", " n't" -> "n't", ...).
 */
char	   *tf_wordpiece_decode(const TfWordPiece *wp, int n, const int32_t *ids, const bool *skip,
								const SpmAlloc *a, size_t *out_len);

#endif							/* WORDPIECE_H */
