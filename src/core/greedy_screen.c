/*
 * greedy_screen.c
 *		Greedy decoding's output layer read in half the bytes, with the same
 *		result.  No postgres.h.
 *
 * With one row per step (a sentence decoded greedily), the output layer is
 * a matrix-vector product over the whole vocabulary: for transformer-base,
 * 119 MB of fp32 weights read for each token, more than half of the step,
 * at the memory's speed.  Greedy search wants one thing of those logits:
 * the first largest after the logits processors.  So the step first reads
 * a bf16 copy of the matrix (the screen: each weight rounded to nearest
 * even, packed as TF_BF16, 2 bytes a weight) and bounds each logit:
 *
 *   |z_j - s_j| <= ||x||_2 * slack_j,
 *   slack_j = ||w_j - bf16(w_j)||_2 + 2.5 * gamma_d * ||w_j||_2,
 *
 * where z_j is the fp32 logit tf_linear computes, s_j the screened one and
 * gamma_d = d u / (1 - d u) (u = 2^-24) covers the rounding of both fp32
 * sums (Cauchy-Schwarz on the rounding of the weights, Higham's bound on
 * the sums; both use |bf16(w)| <= |w| (1 + 2^-8)).  The processors of
 * greedy search (repetition penalty, banned n-grams and words, minimum
 * length, forced BOS and EOS) are non-decreasing per token or set a token
 * to a constant, so they map bounds to bounds: every token whose processed
 * upper bound reaches the largest processed lower bound is a candidate, and
 * the winner is among them.  The candidates' panels are then computed in
 * fp32 by the same kernel as the full product (bitwise the same logits),
 * the other tokens set to -inf, and the search goes on as before: the same
 * token, ties included.  Typically 1 to 3 panels of 32 rows are read again.
 */
#include "model_internal.h"

#include <math.h>
#include <string.h>

bool		tf_greedy_screen = true;

/* float -> bf16, rounded to nearest even (finite values) */
static inline uint16_t
bf16_rne(float f)
{
	uint32_t	u;

	memcpy(&u, &f, 4);
	return (uint16_t) ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

void
tf_screen_pack_rows(size_t cols, uint16_t *screen, float *slack, const float *packed, size_t r0, size_t n)
{
	double		u = ldexp(1.0, -24);
	double		gamma = cols * u / (1.0 - cols * u);

	for (size_t r = r0; r < r0 + n; r++)
	{
		const float *w = packed + (r / TF_PANEL) * TF_PANEL * cols + r % TF_PANEL;
		uint16_t   *s = screen + (r / TF_PANEL) * TF_PANEL * cols + r % TF_PANEL;
		double		err2 = 0.0,
					w2 = 0.0;

		for (size_t p = 0; p < cols; p++)
		{
			float		f = w[p * TF_PANEL];
			uint16_t	h = bf16_rne(f);
			double		e = (double) f - (double) tf_bf16_to_float(h);

			s[p * TF_PANEL] = h;
			err2 += e * e;
			w2 += (double) f * f;
		}
		/* rounded up, past the double sums' own rounding */
		slack[r] = (float) ((sqrt(err2) + 2.5 * gamma * sqrt(w2)) * (1.0 + 1e-6) + 1e-30);
	}
}

bool
tf_screen_usable(const TfModel *m)
{
	return tf_greedy_screen && m->w.lm_head_screen.data != NULL && m->w.lm_head_slack != NULL &&
		m->w.lm_head.dtype == TF_F32;
}

/*
 * row: the screened logits s of one greedy row (vocab), x its input (d);
 * scratch: vocab floats.  On return, row holds the fp32 logits of the
 * candidates and -inf elsewhere: greedy_step's token is the one the full
 * fp32 row gives.  seq, len, tmp: as tf_process_logits.
 */
void
tf_screen_greedy_row(const TfModel *m, const TfDecodeOptions *opt, const int *seq, int len,
					 const float *x, float *row, float *scratch, int *tmp)
{
	const TfConfig *c = &m->cfg;
	int			vocab = c->vocab;
	int			d = c->d_model;
	const float *slack = m->w.lm_head_slack;
	double		nx2 = 0.0;
	float		nx;
	float		tau = -INFINITY;
	bool		usable = opt->repetition_penalty > 0.0;

	for (int i = 0; i < d; i++)
		nx2 += (double) x[i] * x[i];
	nx = (float) (sqrt(nx2) * (1.0 + 1e-6));
	if (!isfinite(nx))
		usable = false;

	/* the largest processed lower bound */
	for (int j = 0; j < vocab && usable; j++)
	{
		float		e = nx * slack[j];

		if (!isfinite(row[j]) || !isfinite(e))
			usable = false;
		/* the bias's own rounding, on the value's scale */
		e += (fabsf(row[j]) + e) * 0x1p-22f;
		scratch[j] = row[j] - e;
		row[j] += e;
	}
	if (usable)
	{
		tf_process_logits(c, opt, false, scratch, seq, len, tmp);
		for (int j = 0; j < vocab; j++)
			tau = scratch[j] > tau ? scratch[j] : tau;
		/* the processed upper bounds: the candidates reach tau */
		memcpy(scratch, row, sizeof(float) * vocab);
		tf_process_logits(c, opt, false, scratch, seq, len, tmp);
	}
	if (!usable || tau == -INFINITY)
	{
		/* no bound to trust (or every token banned): the full product */
		tf_linear(1, vocab, d, row, x, m->w.lm_head.data, TF_F32, m->w.logits_bias);
		return;
	}
	for (int j0 = 0; j0 < vocab; j0 += TF_PANEL)
	{
		int			j1 = j0 + TF_PANEL < vocab ? j0 + TF_PANEL : vocab;
		bool		any = false;

		for (int j = j0; j < j1; j++)
			any |= scratch[j] >= tau;
		if (any)
			tf_linear_columns(1, vocab, d, row, x, m->w.lm_head.data, TF_F32, m->w.logits_bias, j0, j1);
		for (int j = j0; j < j1; j++)
			if (!(scratch[j] >= tau))
				row[j] = -INFINITY;
	}
}
