/*
 * placement.h
 *		Where things of a source text go in its translation: word alignment
 *		from the encoder-decoder attention, and anchors (inline tags,
 *		verbatim spans) moved from source words to the target words aligned
 *		to them.  Part of the core: no postgres.h.
 */
#ifndef PLACEMENT_H
#define PLACEMENT_H

#include <stdbool.h>

/*
 * Word alignment of one sentence, as align() computes it: cross is the
 * encoder-decoder attention of one layer averaged over the heads, T x S
 * (row t: the step that produced target piece t).  tword[t] is the target
 * word of piece t and sword[s] the source word of piece s (-1: none, as
 * for EOS or a language token).  A target word's weight on a source word
 * is the mean over its pieces of the sum over the source word's pieces.
 * Out: best_src[ntw], the source word each target word weighs most (-1 if
 * it has no piece), and best_tgt[nsw], the target word that weighs each
 * source word most.  scratch has ntw * nsw floats.
 */
void		tf_align_words(const float *cross, int T, int S, const int *tword, int ntw,
						   const int *sword, int nsw, float *scratch, int *best_src, int *best_tgt);

/*
 * An anchor in source words: an element around source words [s0, s1), or
 * a point (an empty element, a verbatim span) before source word s0
 * (s0 == s1).  parent: the enclosing anchor's index (-1: none); parents
 * come before their children, siblings in source order.
 */
typedef struct TfPlaceIn
{
	int			parent;
	bool		point;
	int			s0,
				s1;
} TfPlaceIn;

/* Where an anchor goes: target words [t0, t1); t0 == t1: at the slot before target word t0. */
typedef struct TfPlaceOut
{
	int			t0,
				t1;
} TfPlaceOut;

/*
 * Place n anchors in ntw target words from a word alignment (best_src,
 * best_tgt as tf_align_words gives them, over the whole text):
 *  - an element goes around the target words whose best source word it
 *    covers; if none, around the best target words of its source words;
 *    the span from the first to the last of them;
 *  - a point, and an element that keeps no word, goes after the target
 *    words aligned to the source word before it (at the start if none);
 *  - then nesting is kept: a child stays inside its parent, and a
 *    sibling starts where the one before it ends (a squeezed one is
 *    left empty rather than moved out of order).
 * scratch has TF_PLACE_SCRATCH(nsw, n) ints.
 */
void		tf_place_anchors(int ntw, const int *best_src, int nsw, const int *best_tgt,
							 int n, const TfPlaceIn *in, TfPlaceOut *out, int *scratch);

/* The ints of scratch tf_place_anchors needs. */
#define TF_PLACE_SCRATCH(nsw, n) (2 * (size_t) (nsw) + (size_t) (n) + 1)

#endif							/* PLACEMENT_H */
