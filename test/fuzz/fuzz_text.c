/*
 * libFuzzer harness for the core's text functions outside the server:
 * sentence segmentation (segment.c, ICU), 13a tokenization, BLEU and chrF
 * statistics (metrics.c).  The input is split at its first NUL into a
 * hypothesis and a reference; make fuzz-text.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "segment.h"
#include "fuzz_arena.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Arena		arena = {0};
	SpmAlloc	a = {arena_alloc, &arena};
	const char *s = (const char *) data;
	const char *nul = memchr(s, 0, size);
	size_t		hl = nul ? (size_t) (nul - s) : size;
	const char *ref = nul ? nul + 1 : "";
	size_t		rl = nul ? size - hl - 1 : 0;
	double		bleu[TF_BLEU_STATS] = {0};
	double		chrf[TF_CHRF_STATS] = {0};
	size_t	   *bounds;
	char		err[256];
	size_t		tl;
	int			n;

	tf_tokenize_13a(s, hl, &a, &tl);
	tf_bleu_add(bleu, s, hl, ref, rl, &a);
	tf_chrf_add(chrf, s, hl, ref, rl, &a);
	if (!isfinite(tf_bleu_score(bleu)) || !isfinite(tf_chrf_score(chrf)))
		abort();
	/* segmentation wants valid UTF-8, as the server gives it */
	n = tf_sentence_bounds(s, hl, (size & 1) ? "de" : "en", &a, &bounds, err, sizeof(err));
	if (n > 0 && (bounds[0] != 0 || bounds[n] != hl))
		abort();
	for (int i = 0; i < n; i++)
		if (bounds[i] >= bounds[i + 1])
			abort();
	arena_free(&arena);
	return 0;
}
