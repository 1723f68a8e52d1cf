/*
 * special_tokens.h
 *		Special (added) tokens written in the text, found where Hugging
 *		Face's tokenizers find them: before the model sees the text, so that
 *		"a <pad> b" is a, the pad token, b.
 */
#ifndef SPECIAL_TOKENS_H
#define SPECIAL_TOKENS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct TfSpecialToken
{
	const char *str;			/* its text, matched byte for byte */
	uint32_t	len;
	int32_t		id;				/* the model's id */
	bool		lstrip;			/* AddedToken.lstrip: eats the whitespace before it */
	bool		rstrip;			/* AddedToken.rstrip: eats the whitespace after it */
} TfSpecialToken;

/* Most special tokens a text is searched for (NLLB-200: 202 languages and 5 more). */
#define TF_MAX_SPECIAL_TOKENS 4096

typedef struct TfSpecialSet
{
	int			n;
	const TfSpecialToken *tok;	/* (n) sorted by their first byte */
	int			start[257];		/* tok[start[b] .. start[b + 1]) begin with byte b */
} TfSpecialSet;

/* A set of the n tokens tok, which are sorted by their first byte (in place). */
void		tf_special_set_init(TfSpecialSet *set, int n, TfSpecialToken *tok);

/*
 * The earliest special token in s[from, len) and, of those starting there,
 * the longest (tokenization_utils.Trie.split, as tools/nllb_tokenizer.py
 * ports it): its index in set->tok, its offset in *at; -1 if none.
 */
int			tf_special_next(const TfSpecialSet *set, const char *s, size_t len, size_t from, size_t *at);

/* Bytes of Unicode whitespace (Python's str.isspace()) at the end of s[0, len), and at its start. */
size_t		tf_trailing_space(const char *s, size_t len);
size_t		tf_leading_space(const char *s, size_t len);

#endif							/* SPECIAL_TOKENS_H */
