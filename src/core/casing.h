/*
 * casing.h
 *		ALL-CAPS and Title Case input for a translation model trained on
 *		normally cased text: the style of a text, its words lowered to the
 *		casing a normal sentence would have, and the translation restored to
 *		the style.  ICU case mappings.  Part of the core: no postgres.h.
 *
 * A word is a maximal run of letters, combining marks and digits, with an
 * apostrophe (' U+2019) or hyphen (- U+2010 U+2011) inside it between two
 * such characters ("don't", "well-known", "COVID-19").  A word begins a
 * sentence at the start of the text, after a line break, and after a
 * sentence terminator (Sentence_Terminal, or "…"; closing quotes and
 * brackets may follow it) and then white space; after 。！？ no space is
 * needed.  Texts longer than INT32_MAX / 3 bytes are MIXED and rejected by
 * the other two functions.
 */
#ifndef CASING_H
#define CASING_H

#include <stdbool.h>
#include <stddef.h>

#include "spm.h"				/* SpmAlloc */

typedef enum
{
	TF_CASE_MIXED = 0,
	TF_CASE_UPPER,
	TF_CASE_TITLE
} TfCaseStyle;

/*
 * The casing style of s (len bytes of UTF-8).  Letters count as upper or
 * lower case by their simple case mappings: ß and ª, which have no simple
 * upper-case form, count as neither, so "STRAßE" is upper case.  A word is
 * cased when it has such a letter; words of uncased letters (CJK) only count
 * against a style: at least half of the words with letters must be cased.
 *
 * UPPER: no lower-case (or title-case) letter, at least 2 cased words and at
 * least 4 upper-case letters.  "USA" or "NASA" alone is MIXED.
 *
 * TITLE: at least 3 cased words, every one of them either capitalized (its
 * first cased letter upper case, later upper-case letters only right after
 * an apostrophe or hyphen: "O'Brien", "Well-Known"), an acronym (at least 2
 * letters, all upper case: "NASA") or, neither first nor last, an English
 * minor word in lower case (a an the and but or nor of in on at to for by
 * with from up as); and at least 2 capitalized words that have a
 * lower-case letter.  "A Man on a Bike" and "Ein Mann Fährt Fahrrad" are
 * TITLE; "Ein Mann fährt Fahrrad" and "Der Besuch der NASA" are MIXED.
 *
 * Otherwise MIXED.
 */
extern TfCaseStyle tf_case_style(const char *s, size_t len);

/*
 * A score for one candidate casing of a word, higher is better (the caller
 * scores with the model's vocabulary: fewer pieces, higher piece scores).
 * word is len bytes, not NUL-terminated.
 */
typedef double (*TfCaseScore) (void *arg, const char *word, size_t len);

/*
 * s, in style, lowered for the model word by word.  The candidates for a
 * word with cased letters are, in order:
 *	- its lower-case form (ICU, locale), except at a sentence start;
 *	- its capitalized form (ICU titlecasing of the whole word: first letter
 *	  title case, the rest lower case; "IJSSEL" → "IJssel" for nl);
 *	- the word as it is: in TITLE style always (it keeps "O'Brien"), in
 *	  UPPER style for words of 2 or 3 cased letters ("EU", "USA": an acronym
 *	  cannot be told from a word, longer ones such as "NASA" are lowered).
 * score() picks among them (the first wins ties; score NULL: the first).
 * In TITLE style an acronym (see tf_case_style) is kept as it is without
 * asking.  A candidate whose byte length differs from the word's is not
 * offered (Turkish "İ" → "i", "ẞ" → "ß"): the result has exactly len bytes
 * and every byte offset into s is valid for it.  Words without cased
 * letters and everything between words are unchanged; MIXED: a copy.
 *
 * *out gets len bytes and a NUL from a.  Returns 0, or -1 with a message
 * in err (out of memory, ICU errors, a text too long).
 */
extern int	tf_case_lower(TfCaseStyle style, const char *s, size_t len, const char *locale,
						  TfCaseScore score, void *arg, const SpmAlloc *a,
						  char **out, char *err, size_t errlen);

/*
 * t (a translation, len bytes of UTF-8) restored to style with the rules of
 * the target locale:
 *	UPPER: every letter upper case (ICU: "straße" → "STRASSE", so lengths
 *	  change);
 *	TITLE: every word's first letter title case (ICU, whole-word
 *	  titlecasing without lowering the rest: "ijssel" → "IJssel" for nl),
 *	  the rest unchanged; for English ("en" or "eng", alone or followed by
 *	  "_", "-" or "@") the lower-case minor words listed at tf_case_style
 *	  stay as they are unless first or last in the text or at a sentence
 *	  start;
 *	MIXED: a copy.
 * offs[0..noffs) are byte offsets into t (non-decreasing, at most len;
 * otherwise an error), meant to be at word boundaries; new_offs[0..noffs)
 * (caller-allocated) gets the same boundaries in *out.  An offset inside a
 * word whose first letter changed length is kept at the same distance from
 * the word's end.  *out gets *outlen bytes and a NUL from a.  Returns 0, or
 * -1 with a message in err.
 */
extern int	tf_case_restore(TfCaseStyle style, const char *t, size_t len, const char *locale,
							const size_t *offs, int noffs, const SpmAlloc *a,
							char **out, size_t *outlen, size_t *new_offs,
							char *err, size_t errlen);

#endif							/* CASING_H */
