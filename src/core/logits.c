/*
 * logits.c
 *		Hugging Face's logits processors on one row of a decoding step:
 *		repetition penalty, no-repeat n-grams, bad words, minimum length,
 *		forced EOS, renormalization.  No postgres.h.  The rules are those of
 *		tools/marian_torch.py.
 */
#include "model.h"
#include "model_internal.h"
#include "tensor_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int
int_cmp(const void *pa, const void *pb)
{
	int			a = *(const int *) pa,
				b = *(const int *) pb;

	return (a > b) - (a < b);
}

/* log Σ exp(x); -inf if every x is -inf */
static double
row_log_sum_exp(int n, const float *x)
{
	float		m = tf_row_max(n, x);

	return m == -INFINITY ? -INFINITY : tf_log_sum_exp_max(n, x, m);
}

/*
 * Hugging Face's logits processors on one row, in the order
 * _get_logits_processor builds them (see tools/marian_torch.py):
 * repetition penalty, no-repeat n-grams, bad words, minimum length, forced
 * BOS, forced EOS.  seq (len tokens, the start token first) is the row's sequence so
 * far: its cur_len is len.  Greedy search processes the raw logits; beam
 * search their log-softmax, and optionally renormalizes after.  The row is
 * changed in place so that a token's processed score is logits[j] - shift,
 * and shift is returned: the scale stays that of the logits, so the top-k
 * search runs on floats and only its winners are shifted.  tmp: len ints.
 */
double
tf_process_logits(const TfConfig *c, const TfDecodeOptions *opt, bool beam, float *logits,
			const int *seq, int len, int *tmp)
{
	int			vocab = c->vocab;
	double		shift = beam ? row_log_sum_exp(vocab, logits) : 0.0;

	/* RepetitionPenaltyLogitsProcessor: each distinct token of seq once */
	if (opt->repetition_penalty != 1.0)
	{
		float		pen = (float) opt->repetition_penalty;

		memcpy(tmp, seq, sizeof(int) * len);
		qsort(tmp, len, sizeof(int), int_cmp);
		for (int i = 0; i < len; i++)
		{
			int			j = tmp[i];
			float		v;

			if ((i > 0 && tmp[i - 1] == j) || j < 0 || j >= vocab)
				continue;
			v = beam ? (float) (logits[j] - shift) : logits[j];
			v = v < 0 ? v * pen : v / pen;
			logits[j] = beam ? (float) (v + shift) : v;
		}
	}
	/* NoRepeatNGramLogitsProcessor: n-grams of seq, the start token included */
	if (opt->no_repeat_ngram_size > 0 && len + 1 >= opt->no_repeat_ngram_size)
	{
		int			n = opt->no_repeat_ngram_size;
		const int  *prefix = seq + len - (n - 1);

		for (int i = 0; i + n <= len; i++)
			if (memcmp(seq + i, prefix, sizeof(int) * (n - 1)) == 0 &&
				seq[i + n - 1] >= 0 && seq[i + n - 1] < vocab)
				logits[seq[i + n - 1]] = -INFINITY;
	}
	/* NoBadWordsLogitsProcessor: a sequence's last token, once the rest is there */
	for (int w = 0; w < opt->nbad; w++)
	{
		const int  *bad = opt->bad_ids + opt->bad_off[w];
		int			blen = opt->bad_off[w + 1] - opt->bad_off[w];

		if (blen >= 1 && blen - 1 <= len &&
			memcmp(seq + len - (blen - 1), bad, sizeof(int) * (blen - 1)) == 0 &&
			bad[blen - 1] >= 0 && bad[blen - 1] < vocab)
			logits[bad[blen - 1]] = -INFINITY;
	}
	/* MinLengthLogitsProcessor */
	if (len < opt->min_length)
		logits[c->eos_id] = -INFINITY;
	/* ForcedBOSTokenLogitsProcessor: the first token after the start one */
	if (opt->forced_bos_id >= 0 && len == 1)
	{
		for (int j = 0; j < vocab; j++)
			logits[j] = -INFINITY;
		logits[opt->forced_bos_id] = (float) shift;
	}
	/* ForcedEOSTokenLogitsProcessor: at max_length - 1, EOS with score 0 */
	if (opt->forced_eos_id >= 0 && len == opt->max_length - 1)
	{
		for (int j = 0; j < vocab; j++)
			logits[j] = -INFINITY;
		logits[opt->forced_eos_id] = (float) shift;
	}
	/* LogitNormalization, last: the log-softmax of the processed scores */
	if (beam && opt->renormalize)
		shift = row_log_sum_exp(vocab, logits);
	return shift;
}
