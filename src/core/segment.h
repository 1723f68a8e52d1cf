/*
 * segment.h
 *		Sentence segmentation of UTF-8 text with ICU's sentence
 *		BreakIterator.  Part of the core: no postgres.h.
 */
#ifndef SEGMENT_H
#define SEGMENT_H

#include <stdbool.h>
#include <stddef.h>

#include "spm.h"				/* SpmAlloc */

/*
 * Split s (len bytes of valid UTF-8) into sentences with ICU's rules for
 * locale ("" or NULL: the root rules), plus its standard abbreviation
 * suppressions (the "@ss=standard" keyword, unless the locale has
 * keywords of its own).  A sentence keeps the whitespace after it, so the
 * sentences concatenated are s.  One more rule than ICU's: a sentence that
 * ends in a one-letter abbreviation ("z.", "d.", an initial) and is
 * followed by a lower-case word or another such abbreviation is not ended
 * there ("z. B.", "J. R. R. Tolkien").
 *
 * *bounds gets nseg + 1 byte offsets (0 first, len last), allocated from a;
 * returns nseg, or -1 with a message in err (errlen bytes).
 */
int			tf_sentence_bounds(const char *s, size_t len, const char *locale,
							   const SpmAlloc *a, size_t **bounds, char *err, size_t errlen);

#endif							/* SEGMENT_H */
