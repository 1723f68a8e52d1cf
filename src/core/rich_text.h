/*
 * rich_text.h
 *		A text to translate with anchors over it, and its translation with
 *		the anchors put back: verbatim spans (spans.h) taken out of the
 *		text and inserted again, inline markup (markup.h) placed around the
 *		target words aligned to its source words (placement.h).  Part of
 *		the core: no postgres.h.
 */
#ifndef RICH_TEXT_H
#define RICH_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "markup.h"				/* TfAnchor, TfPlaced */
#include "spans.h"				/* TfCharCheck */
#include "spm.h"				/* SpmAlloc */

/* A word: a run without whitespace; its core without punctuation at either end. */
typedef struct TfWord
{
	size_t		start,
				end;
	size_t		cs,
				ce;
} TfWord;

/* The words of s[0..len) (UTF-8); -1 when out of memory. */
int			tf_text_words(const char *s, size_t len, const SpmAlloc *a, TfWord **words);

/* The first word that starts at or after offset o (n if none). */
int			tf_word_at(const TfWord *w, int n, size_t o);

/* An anchor of a unit, in byte offsets of its text (the text with its spans taken out). */
typedef struct TfUnitAnchor
{
	size_t		start,
				end;
	int			parent;			/* in the unit's anchors, -1: none */
	bool		point;
	const char *insert;			/* a span's bytes, put back at its place (NULL: a markup anchor) */
	size_t		insert_len;
	int			markup;			/* the markup anchor's index in its block, -1: a span */
	bool		ws_before;		/* whitespace before it in the source */
	bool		ws_after;		/* ... and after it */
	bool		line_start;		/* a list marker: goes at the start of its line */
	bool		at_end;			/* a span that ends the text (no whitespace after it) */
} TfUnitAnchor;

typedef struct TfUnit
{
	char	   *text;			/* UTF-8, spans taken out, NUL-terminated */
	size_t		len;
	TfUnitAnchor *anchors;		/* parents before children, in source order */
	int			nanchors;
	int			nmarkup;		/* the markup anchors given */
} TfUnit;

/*
 * A unit from text s[0..len) and the markup anchors ma[0..nma) over it
 * (a block's, or none): the spans of the kinds in keep (TF_SPAN_* bits)
 * are taken out of the text and become point anchors carrying their
 * bytes, children of the innermost markup element around them; a span
 * that an element starts or ends inside (crossing it, or held by it)
 * stays text.  The spans' bytes point into s, which must outlive u.
 * 0, or -1 when out of memory.  O(n log n) in spans and anchors.
 */
int			tf_unit_build(const char *s, size_t len, const TfAnchor *ma, int nma, unsigned keep,
						  const SpmAlloc *a, TfUnit *u);

/* The same, with the model's characters checked (TF_SPAN_SYMBOL; cc NULL: all known). */
int			tf_unit_build_checked(const char *s, size_t len, const TfAnchor *ma, int nma, unsigned keep,
								  const TfCharCheck *cc, const SpmAlloc *a, TfUnit *u);

/*
 * The translation t[0..tlen) of unit u with its anchors placed, from a
 * word alignment over the unit (best_src: per target word of t, the
 * source word of u->text it aligns to, -1: none; best_tgt: per source
 * word, its best target word; tf_align_words per sentence, offset):
 *  - each span goes in verbatim after the target words aligned to the
 *    source word before it (at the start if none), with a space before
 *    and after it where the source had one and the translation needs one;
 *    a list marker at the start of the line of the target word aligned
 *    to the source word after it;
 *  - each markup anchor gets its range in the result (placed[markup]):
 *    an element around the target words aligned to its words and the
 *    spans inside it, a point at its place.
 * Every span appears exactly once, at its own range (*ranges, one per
 * anchor, if not NULL: the span's bytes, or the point).  *out gets
 * *outlen bytes and a NUL.  0, or -1 when out of memory.
 */
int			tf_unit_place(const TfUnit *u, const char *t, size_t tlen,
						  const int *best_src, const int *best_tgt, const SpmAlloc *a,
						  char **out, size_t *outlen, TfPlaced *placed, TfPlaced **ranges);

#endif							/* RICH_TEXT_H */
