/*
 * metrics.h
 *		Corpus BLEU and chrF as sacreBLEU computes them by default, from
 *		per-sentence statistics that add up (so that the aggregates can
 *		combine partial states).  Part of the core: no postgres.h.
 */
#ifndef METRICS_H
#define METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "spm.h"				/* SpmAlloc */

/* BLEU statistics: hypothesis length, reference length, then matches and totals of 1- to 4-grams */
#define TF_BLEU_STATS 10
/* chrF statistics: for character n-grams of 1 to 6, hypothesis n-grams, reference n-grams, matches */
#define TF_CHRF_ORDER 6
#define TF_CHRF_STATS (3 * TF_CHRF_ORDER)

/* Bytes of the whitespace character at s[i] (0: none), as Python's str.split() sees whitespace. */
size_t		tf_ws_len(const char *s, size_t i, size_t n);

/* mteval-v13a tokenization (sacreBLEU's default "13a"), allocated from a, NUL-terminated. */
char	   *tf_tokenize_13a(const char *s, size_t len, const SpmAlloc *a, size_t *out_len);

/* Add one sentence pair's BLEU statistics (13a-tokenized inside) to stats. */
void		tf_bleu_add(double *stats, const char *hyp, size_t hyp_len, const char *ref, size_t ref_len,
						const SpmAlloc *a);

/* Corpus BLEU (0 to 100) of summed statistics: 4-grams, brevity penalty, "exp" smoothing. */
double		tf_bleu_score(const double *stats);

/* Add one sentence pair's chrF statistics (characters of UTF-8, whitespace removed). */
void		tf_chrf_add(double *stats, const char *hyp, size_t hyp_len, const char *ref, size_t ref_len,
						const SpmAlloc *a);

/*
 * References of at least this many bytes (13a-tokenized for BLEU) are
 * counted in wide table slots; the default, 2^31, is beyond the server's
 * texts.  Tests lower it to exercise the wide slots.
 */
extern size_t tf_metrics_wide_bytes;

/* The bits of the n-gram hashes kept; tests keep a few top bits, to compare colliding n-grams. */
extern uint64_t tf_metrics_hash_mask;

/* chrF with beta = 2 (0 to 100) of summed statistics. */
double		tf_chrf_score(const double *stats);

#endif							/* METRICS_H */
