/*
 * greedy_screen.c
 *		Greedy decoding's output layer read in a quarter of the bytes, with
 *		the same result.  No postgres.h.
 *
 * With one row per step (a sentence decoded greedily), the output layer is
 * a matrix-vector product over the whole vocabulary: for transformer-base,
 * 119 MB of fp32 weights read for each token, more than half of the step,
 * at the memory's speed (NLLB-600M: 1 GB).  Greedy search wants one thing
 * of those logits: the first largest after the logits processors.  So the
 * step first reads an int8 copy of the matrix (the screen: each row
 * quantized as quantize_model() does, w ~ sw q), through tf_linear's int8
 * product (x quantized too, x ~ sx (qx - zx)), and bounds each logit:
 *
 *   |z_j - s_j| <= ||x|| (||w_j - ŵ_j|| + 2.5 gamma_d ||w_j||)
 *                  + (||x - x̂|| + 4u ||x̂||) ||ŵ_j||  (+ the bias's rounding)
 *
 * where z_j is the fp32 logit tf_linear computes, s_j the screened one,
 * ŵ_j and x̂ the dequantized row and input, u = 2^-24 and gamma_d = d u /
 * (1 - d u) (Higham's bound for the fp32 sum; the int8 sum is exact, its
 * dequantizing step three roundings).  The two per-row factors are kept
 * with the screen (slack: (vocab, 2)).  The processors of greedy search
 * (repetition penalty, banned n-grams and words, minimum length, forced BOS
 * and EOS) are non-decreasing per token or set a token to a constant, so
 * they map bounds to bounds: every token whose processed upper bound
 * reaches the largest processed lower bound is a candidate, and the winner
 * is among them.  The candidates' panels are then computed in fp32 by the
 * same kernel as the full product (bitwise the same logits), the other
 * tokens set to -inf, and the search goes on as before: the same token,
 * ties included.  A few panels of 32 rows are read again.
 */
#include "model_internal.h"

#include <math.h>
#include <string.h>

bool		tf_greedy_screen = true;

size_t
tf_screen_slack_floats(size_t rows)
{
	return 2 * rows;
}

void
tf_screen_pack_rows(size_t rows, size_t cols, void *screen, float *slack, const float *packed,
					size_t r0, size_t n, float *w, int8_t *q)
{
	double		u = ldexp(1.0, -24);
	double		gamma = cols * u / (1.0 - cols * u);

	for (size_t r = r0; r < r0 + n; r++)
	{
		float		scale;
		double		err2 = 0.0,
					w2 = 0.0,
					h2 = 0.0;

		tf_packed_row(rows, cols, w, packed, TF_F32, r);
		tf_quantize_rows(1, cols, q, &scale, w);
		tf_pack_int8_rows(rows, cols, screen, q, &scale, r, 1);
		for (size_t p = 0; p < cols; p++)
		{
			double		f = w[p];
			double		h = (double) scale * q[p];

			err2 += (f - h) * (f - h);
			w2 += f * f;
			h2 += h * h;
		}
		/* rounded up, past the double sums' own rounding */
		slack[2 * r] = (float) ((sqrt(err2) + 2.5 * gamma * sqrt(w2)) * (1.0 + 1e-6) + 1e-30);
		slack[2 * r + 1] = (float) (sqrt(h2) * (1.0 + 1e-6) + 1e-30);
	}
}

size_t
tf_screen_scratch_floats(const TfConfig *c)
{
	return (size_t) c->vocab + (c->d_model + 3) / 4 + 1;
}

bool
tf_screen_usable(const TfModel *m)
{
	/* the bound is the int8 screen's (a file of another layout is refused before) */
	return tf_greedy_screen && m->w.lm_head_screen.data != NULL && m->w.lm_head_slack != NULL &&
		m->w.lm_head_screen.dtype == TF_I8 && m->w.lm_head.dtype == TF_F32;
}

/*
 * row: the screened logits s of one greedy row (vocab), x its input (d);
 * scratch: tf_screen_scratch_floats() floats.  On return, row holds the fp32 logits of the
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
	uint8_t    *qx = (uint8_t *) (scratch + vocab);
	float		sx;
	int32_t		zx;
	double		nx2 = 0.0,
				dx2 = 0.0,
				hx2 = 0.0;
	float		nx,
				cx;
	float		tau = -INFINITY;
	bool		usable = opt->repetition_penalty > 0.0;

	/* x as the int8 product quantizes it: ||x||, ||x - x̂||, ||x̂|| */
	tf_quantize_input(d, qx, &sx, &zx, x);
	for (int i = 0; i < d; i++)
	{
		double		h = (double) sx * ((int32_t) qx[i] - zx);

		nx2 += (double) x[i] * x[i];
		dx2 += (x[i] - h) * (x[i] - h);
		hx2 += h * h;
	}
	nx = (float) (sqrt(nx2) * (1.0 + 1e-6));
	cx = (float) ((sqrt(dx2) + 4.0 * ldexp(1.0, -24) * sqrt(hx2)) * (1.0 + 1e-6));
	if (!isfinite(nx) || !isfinite(cx))
		usable = false;

	/* the largest processed lower bound */
	for (int j = 0; j < vocab && usable; j++)
	{
		float		e = nx * slack[2 * j] + cx * slack[2 * j + 1];

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
		/*
		 * no bound to trust (or every token banned): the full product, in
		 * this thread (the search's steps may already share the threads)
		 */
		tf_linear_columns(1, vocab, d, row, x, m->w.lm_head.data, TF_F32, m->w.logits_bias, 0, vocab);
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
