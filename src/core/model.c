/*
 * model.c
 *		Embedding, encoder, incremental decoder (self-attention KV cache,
 *		cross-attention K/V computed once per input) and beam search.
 *		No postgres.h.  The decoding rules are those of tools/marian_torch.py,
 *		the PyTorch reference the tests compare against.
 */
#include "model.h"
#include "attention.h"
#include "tensor_ops.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ helpers */

static inline int
imax(int a, int b)
{
	return a > b ? a : b;
}

void
tf_sinusoidal_positions(int max_pos, int d, TfPositions kind, float *out)
{
	for (int p = 0; p < max_pos; p++)
	{
		float	   *row = out + (size_t) p * d;

		memset(row, 0, sizeof(float) * d);
		for (int i = 0; i < d / 2; i++)
		{
			double		angle = p / pow(10000.0, 2.0 * i / d);

			if (kind == TF_POS_SINUSOIDAL_INTERLEAVED)
			{
				row[2 * i] = (float) sin(angle);
				row[2 * i + 1] = (float) cos(angle);
			}
			else
			{
				row[i] = (float) sin(angle);
				row[d / 2 + i] = (float) cos(angle);
			}
		}
	}
}

static inline void
linear(int rows, int out_dim, int in_dim, float *y, const float *x,
	   TfMatrix w, const float *b)
{
	tf_linear(rows, out_dim, in_dim, y, x, w.data, w.dtype, b);
}

static void
activate(TfActivation act, size_t n, float *x)
{
	if (act == TF_ACT_RELU)
		tf_relu(n, x);
	else if (act == TF_ACT_GELU)
		tf_gelu(n, x);
	else
		tf_silu(n, x);
}

static void
add_inplace(size_t n, float *x, const float *y)
{
	for (size_t i = 0; i < n; i++)
		x[i] += y[i];
}

/*
 * x := x + f(x) with the block's norm placed before (pre-norm) or after
 * (post-norm, the paper's) the residual connection.  f reads `in` and
 * writes `out`; tmp is scratch of the same size as x.
 */
typedef struct Block
{
	const TfModel *m;
	int			rows;
	const float *g;
	const float *b;
} Block;

static const float *
block_input(const Block *blk, float *x, float *tmp)
{
	if (blk->m->cfg.pre_norm)
	{
		tf_layer_norm(blk->rows, blk->m->cfg.d_model, tmp, x, blk->g, blk->b, blk->m->cfg.ln_eps);
		return tmp;
	}
	return x;
}

static void
block_output(const Block *blk, float *x, const float *fx)
{
	size_t		n = (size_t) blk->rows * blk->m->cfg.d_model;

	add_inplace(n, x, fx);
	if (!blk->m->cfg.pre_norm)
		tf_layer_norm(blk->rows, blk->m->cfg.d_model, x, x, blk->g, blk->b, blk->m->cfg.ln_eps);
}

/* FFN block over rows of x: x := x + fc2(act(fc1(x))), normed as configured. */
static void
ffn_block(const TfModel *m, const TfLayerWeights *L, int ffn, int rows,
		  float *x, float *tmp, float *hb, float *out)
{
	Block		blk = {m, rows, L->ln_g, L->ln_b};
	const float *in = block_input(&blk, x, tmp);
	int			d = m->cfg.d_model;

	linear(rows, ffn, d, hb, in, L->fc1_w, L->fc1_b);
	activate(m->cfg.activation, (size_t) rows * ffn, hb);
	linear(rows, d, ffn, out, hb, L->fc2_w, L->fc2_b);
	block_output(&blk, x, out);
}

/* ------------------------------------------------------------ encoder */

void
tf_embed(const TfModel *m, int n, const int *ids, float *out)
{
	int			d = m->cfg.d_model;
	float		scale = m->cfg.scale_embedding ? sqrtf((float) d) : 1.0f;

	for (int i = 0; i < n; i++)
	{
		const float *p = m->w.enc_pos + (size_t) i * d;
		float	   *o = out + (size_t) i * d;

		tf_packed_row(m->cfg.vocab, d, o, m->w.enc_embed.data, m->w.enc_embed.dtype, ids[i]);
		for (size_t j = 0; j < (size_t) d; j++)
			o[j] = o[j] * scale + p[j];
	}
}

/* The encoder's buffers for inputs of up to n tokens. */
typedef struct EncodeState
{
	float	   *tmp;			/* (n, d) */
	float	   *q;				/* (n, d) */
	float	   *k;				/* (n, d) */
	float	   *v;				/* (n, d) */
	float	   *att;			/* (n, d) */
	float	   *out;			/* (n, d) */
	float	   *hb;				/* (n, ffn) */
	float	   *scores;			/* (n, n) */
} EncodeState;

static void
encode_state_alloc(const TfModel *m, int n, EncodeState *e, const SpmAlloc *a)
{
	size_t		nd = (size_t) n * m->cfg.d_model;

	e->tmp = a->alloc(a->ctx, sizeof(float) * nd);
	e->q = a->alloc(a->ctx, sizeof(float) * nd);
	e->k = a->alloc(a->ctx, sizeof(float) * nd);
	e->v = a->alloc(a->ctx, sizeof(float) * nd);
	e->att = a->alloc(a->ctx, sizeof(float) * nd);
	e->out = a->alloc(a->ctx, sizeof(float) * nd);
	e->hb = a->alloc(a->ctx, sizeof(float) * (size_t) n * m->cfg.enc_ffn);
	e->scores = a->alloc(a->ctx, sizeof(float) * (size_t) n * n);
}

/* x (n, d) = the encoder's output for ids, in e's buffers (n or more tokens). */
static void
encode(const TfModel *m, int n, const int *ids, float *x, const EncodeState *e)
{
	const TfConfig *c = &m->cfg;
	int			d = c->d_model;
	float	   *tmp = e->tmp,
			   *q = e->q,
			   *k = e->k,
			   *v = e->v,
			   *att = e->att,
			   *out = e->out,
			   *hb = e->hb,
			   *scores = e->scores;

	tf_embed(m, n, ids, x);
	for (int l = 0; l < c->enc_layers; l++)
	{
		const TfLayerWeights *L = &m->w.enc[l];
		const TfAttnWeights *A = &L->self_attn;
		Block		blk = {m, n, A->ln_g, A->ln_b};
		const float *in = block_input(&blk, x, tmp);

		linear(n, d, d, q, in, A->q_w, A->q_b);
		linear(n, d, d, k, in, A->k_w, A->k_b);
		linear(n, d, d, v, in, A->v_w, A->v_b);
		tf_multihead_attention(n, n, d, d, c->enc_heads, att, scores, q, k, v, NULL);
		linear(n, d, d, out, att, A->o_w, A->o_b);
		block_output(&blk, x, out);

		ffn_block(m, L, c->enc_ffn, n, x, tmp, hb, out);
	}
	if (c->final_norm)
		tf_layer_norm(n, d, x, x, m->w.enc_norm_g, m->w.enc_norm_b, c->ln_eps);
}

void
tf_encode(const TfModel *m, int n, const int *ids, float *x, const SpmAlloc *a)
{
	EncodeState e;

	encode_state_alloc(m, n, &e, a);
	encode(m, n, ids, x, &e);
}

/* ------------------------------------------------------------ decoder */

/*
 * Decoding works on rows: each live beam of each sentence of a batch is one
 * row of the decoder's products, so the weights stream through the cache
 * once per step for all of them.  Every row keeps its own cache slot; the
 * products are row-independent (tf_linear), so a sentence decodes the
 * same alone or in any batch.
 */
typedef struct RunState
{
	int			slots;			/* cache slots: sentences x beams */
	int			T;				/* positions: the longest max_length */
	float	   *x;				/* (rows, d) */
	float	   *tmp;			/* (rows, d) */
	float	   *q;				/* (rows, d) */
	float	   *kv;				/* (rows, d) */
	float	   *att;			/* (rows, d) */
	float	   *out;			/* (rows, d) */
	float	   *hb;				/* (rows, ffn) */
	float	   *logits;			/* (rows, vocab) */
	float	   *scores;			/* (max(T, longest source)) */
	float	   *kcache;			/* (layers, slots, T, d) */
	float	   *vcache;			/* (layers, slots, T, d) */
	float	   *reorder;		/* (beams, T, d): parents' caches while beams move */
} RunState;

/* What one row of a step is: its token, cache slot and source. */
typedef struct StepRow
{
	int			tok;
	int			slot;
	int			n_src;
	const float *cross_k;		/* (layers, n_src, d) */
	const float *cross_v;
} StepRow;

static inline float *
cache_at(const RunState *s, float *cache, int d, int l, int slot)
{
	return cache + (((size_t) l * s->slots + slot) * s->T) * d;
}

/*
 * One decoder step for nr rows at position pos; leaves the logits in
 * s->logits (nr, vocab).
 */
static void
decoder_step(const TfModel *m, RunState *s, int nr, const StepRow *rows, int pos)
{
	const TfConfig *c = &m->cfg;
	int			d = c->d_model;
	float		scale = c->scale_embedding ? sqrtf((float) d) : 1.0f;

	for (int r = 0; r < nr; r++)
	{
		const float *p = m->w.dec_pos + (size_t) pos * d;
		float	   *x = s->x + (size_t) r * d;

		tf_packed_row(m->cfg.vocab, d, x, m->w.dec_embed.data, m->w.dec_embed.dtype, rows[r].tok);
		for (size_t j = 0; j < (size_t) d; j++)
			x[j] = x[j] * scale + p[j];
	}

	for (int l = 0; l < c->dec_layers; l++)
	{
		const TfLayerWeights *L = &m->w.dec[l];
		const TfAttnWeights *A = &L->self_attn;
		const TfAttnWeights *X = &L->cross_attn;
		Block		blk = {m, nr, A->ln_g, A->ln_b};
		Block		xblk = {m, nr, X->ln_g, X->ln_b};
		const float *in = block_input(&blk, s->x, s->tmp);

		/* self-attention over each row's cached keys and values */
		linear(nr, d, d, s->q, in, A->q_w, A->q_b);
		linear(nr, d, d, s->kv, in, A->k_w, A->k_b);
		for (int r = 0; r < nr; r++)
			memcpy(cache_at(s, s->kcache, d, l, rows[r].slot) + (size_t) pos * d,
				   s->kv + (size_t) r * d, sizeof(float) * d);
		linear(nr, d, d, s->kv, in, A->v_w, A->v_b);
		for (int r = 0; r < nr; r++)
			memcpy(cache_at(s, s->vcache, d, l, rows[r].slot) + (size_t) pos * d,
				   s->kv + (size_t) r * d, sizeof(float) * d);
		for (int r = 0; r < nr; r++)
			tf_multihead_attention(1, pos + 1, d, d, c->dec_heads,
								   s->att + (size_t) r * d, s->scores,
								   s->q + (size_t) r * d,
								   cache_at(s, s->kcache, d, l, rows[r].slot),
								   cache_at(s, s->vcache, d, l, rows[r].slot), NULL);
		linear(nr, d, d, s->out, s->att, A->o_w, A->o_b);
		block_output(&blk, s->x, s->out);

		/* cross-attention over each row's encoder output */
		in = block_input(&xblk, s->x, s->tmp);
		linear(nr, d, d, s->q, in, X->q_w, X->q_b);
		for (int r = 0; r < nr; r++)
			tf_multihead_attention(1, rows[r].n_src, d, d, c->dec_heads,
								   s->att + (size_t) r * d, s->scores,
								   s->q + (size_t) r * d,
								   rows[r].cross_k + (size_t) l * rows[r].n_src * d,
								   rows[r].cross_v + (size_t) l * rows[r].n_src * d, NULL);
		linear(nr, d, d, s->out, s->att, X->o_w, X->o_b);
		block_output(&xblk, s->x, s->out);

		ffn_block(m, L, c->dec_ffn, nr, s->x, s->tmp, s->hb, s->out);
	}
	if (c->final_norm)
		tf_layer_norm(nr, d, s->x, s->x, m->w.dec_norm_g, m->w.dec_norm_b, c->ln_eps);

	linear(nr, c->vocab, d, s->logits, s->x, m->w.lm_head, m->w.logits_bias);
}

typedef struct Cand
{
	double		score;
	int			beam;
	int			tok;
} Cand;

static int
cand_cmp(const void *pa, const void *pb)
{
	const Cand *a = pa,
			   *b = pb;

	if (a->score != b->score)
		return a->score > b->score ? -1 : 1;
	if (a->beam != b->beam)
		return a->beam - b->beam;
	return a->tok - b->tok;
}

static int
int_cmp(const void *pa, const void *pb)
{
	int			a = *(const int *) pa,
				b = *(const int *) pb;

	return (a > b) - (a < b);
}

/*
 * max(x), NaNs ignored.  In 16 independent lanes, which the compiler turns
 * into vector maxima: one serial chain over the vocabulary (58k values per
 * row and step) cost a tenth of batched decoding.  The order does not
 * change the value; only the sign of a zero maximum could differ, which
 * x - max does not see.
 */
#define MAX_LANES 16

static float
row_max(int n, const float *x)
{
	float		lanes[MAX_LANES];
	float		m = -INFINITY;
	int			j;

	for (int l = 0; l < MAX_LANES; l++)
		lanes[l] = -INFINITY;
	for (j = 0; j + MAX_LANES <= n; j += MAX_LANES)
		for (int l = 0; l < MAX_LANES; l++)
			lanes[l] = x[j + l] > lanes[l] ? x[j + l] : lanes[l];
	for (; j < n; j++)
		m = x[j] > m ? x[j] : m;
	for (int l = 0; l < MAX_LANES; l++)
		m = lanes[l] > m ? lanes[l] : m;
	return m;
}

/* log Σ exp(x); -inf if every x is -inf */
static double
row_log_sum_exp(int n, const float *x)
{
	float		m = row_max(n, x);

	return m == -INFINITY ? -INFINITY : tf_log_sum_exp_max(n, x, m);
}

/*
 * Hugging Face's logits processors on one row, in the order
 * _get_logits_processor builds them (see tools/marian_torch.py):
 * repetition penalty, no-repeat n-grams, bad words, minimum length, forced
 * EOS.  seq (len tokens, the start token first) is the row's sequence so
 * far: its cur_len is len.  Greedy search processes the raw logits; beam
 * search their log-softmax, and optionally renormalizes after.  The row is
 * changed in place so that a token's processed score is logits[j] - shift,
 * and shift is returned: the scale stays that of the logits, so the top-k
 * search runs on floats and only its winners are shifted.  tmp: len ints.
 */
static double
process_row(const TfConfig *c, const TfDecodeOptions *opt, bool beam, float *logits,
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

/*
 * The k best tokens of one processed row as candidates of beam b, appended
 * to out: score = base + logits[j] - shift.  Chosen on the floats, in the
 * order of (-logit, token); only the winners are shifted.
 */
#define TOP_K_BLOCK 16

static int
top_k(int vocab, const float *logits, int k, int beam, double base, double shift, Cand *out)
{
	int			n = 0;
	float		worst = -INFINITY;
	float		best[2 * TF_MAX_BEAMS];
	int			ids[2 * TF_MAX_BEAMS];

	for (int j = 0; j < vocab; j++)
	{
		float		v = logits[j];
		int			i;

		/* once k are found, skip blocks with nothing better (vectorized) */
		if (n == k && (j & (TOP_K_BLOCK - 1)) == 0 && j + TOP_K_BLOCK <= vocab)
		{
			int			better = 0;

			for (size_t l = 0; l < TOP_K_BLOCK; l++)
				better |= logits[j + l] > worst;
			if (!better)
			{
				j += TOP_K_BLOCK - 1;
				continue;
			}
		}
		/* ties go to the lower token id, met first */
		if (v == -INFINITY || (n == k && v <= worst))
			continue;
		i = n < k ? n++ : k - 1;
		while (i > 0 && best[i - 1] < v)
		{
			best[i] = best[i - 1];
			ids[i] = ids[i - 1];
			i--;
		}
		best[i] = v;
		ids[i] = j;
		worst = best[n - 1];
	}
	for (int i = 0; i < n; i++)
	{
		out[i].score = base + ((double) best[i] - shift);
		out[i].beam = beam;
		out[i].tok = ids[i];
	}
	return n;
}

/* The search for one sentence (see tools/marian_torch.py for the rules). */
typedef struct Search
{
	int			n_src;
	int			T;				/* decoding steps: its max_length - 1 */
	float	   *cross_k;		/* (layers, n_src, d) */
	float	   *cross_v;
	int			nb;				/* live beams */
	int		   *toks;			/* (K, T + 1) live beams, start token first */
	int		   *toks2;
	double	   *score;			/* (K) sums of processed log-probabilities */
	double	   *score2;
	int		   *parent;			/* (K) */
	/* finished hypotheses: the K best */
	int		   *fin_toks;		/* (K, T + 1) generated tokens, EOS excluded */
	int		   *fin_len;
	double	   *fin_score;		/* normalized by length ** length_penalty */
	int			nfin;
	bool		done;
} Search;

/* Keep a finished hypothesis if it is among the K best (BeamHypotheses.add). */
static void
add_finished(Search *h, int K, const int *toks, int len, double score)
{
	int			T1 = h->T + 1;
	int			slot = h->nfin;

	if (h->nfin == K)
	{
		slot = 0;
		for (int i = 1; i < K; i++)
			if (h->fin_score[i] < h->fin_score[slot])
				slot = i;
		if (score <= h->fin_score[slot])
			return;
	}
	else
		h->nfin++;
	memcpy(h->fin_toks + (size_t) slot * T1, toks, sizeof(int) * len);
	h->fin_len[slot] = len;
	h->fin_score[slot] = score;
}

/*
 * One greedy step (Hugging Face's _sample without sampling): the argmax of
 * the processed logits; EOS or the last position ends the sentence.
 */
static int
greedy_step(const TfConfig *c, const TfDecodeOptions *opt, Search *h, float *logits,
			int t, int *tmp)
{
	Cand		best;

	process_row(c, opt, false, logits, h->toks, t, tmp);
	if (top_k(c->vocab, logits, 1, 0, 0.0, 0.0, &best) == 0)
		best.tok = 0;			/* all -inf: torch.argmax gives the first */
	if (best.tok == c->eos_id)
	{
		add_finished(h, 1, h->toks + 1, t - 1, 0.0);
		return 0;
	}
	h->toks[t] = best.tok;
	h->parent[0] = 0;
	if (t == h->T)
	{
		add_finished(h, 1, h->toks + 1, t, 0.0);
		return 0;
	}
	return 1;
}

/*
 * One beam search step of one sentence (logits at rows[0..nb)), as
 * Hugging Face's _beam_search: the 2K best (beam, token) candidates; EOS
 * among the first K finishes a hypothesis (score / length ** length
 * penalty, the length counting the generated tokens with EOS); the best K
 * others are the new live beams; then the early-stopping rule.  Returns the
 * new live beam count, 0 when the sentence is done.
 */
static int
beam_step(const TfConfig *c, const TfDecodeOptions *opt, Search *h, float *logits,
		  int t, Cand *cands, Cand *top, int *tmp)
{
	int			K = opt->beam_size;
	int			T1 = h->T + 1;
	int			ncand = 0;
	int			nnew = 0;
	bool		last = t == h->T;

	for (int b = 0; b < h->nb; b++)
	{
		float	   *row = logits + (size_t) b * c->vocab;
		double		shift = process_row(c, opt, true, row, h->toks + (size_t) b * T1, t, tmp);

		ncand += top_k(c->vocab, row, 2 * K, b, h->score[b], shift, cands + ncand);
	}
	qsort(cands, ncand, sizeof(Cand), cand_cmp);
	if (ncand > 2 * K)
		ncand = 2 * K;
	memcpy(top, cands, sizeof(Cand) * ncand);

	for (int r = 0; r < ncand; r++)
	{
		const Cand *cd = &top[r];
		double		norm = cd->score / pow((double) t, opt->length_penalty);

		if (cd->tok == c->eos_id)
		{
			/* once full, early_stopping=True takes no more */
			if (r < K && !(h->nfin == K && opt->early_stopping == TF_EARLY_TRUE))
				add_finished(h, K, h->toks + (size_t) cd->beam * T1 + 1, t - 1, norm);
			continue;
		}
		if (last)
		{
			/* out of positions: the first K candidates finish as they are */
			if (r < K && !(h->nfin == K && opt->early_stopping == TF_EARLY_TRUE))
			{
				memcpy(tmp, h->toks + (size_t) cd->beam * T1 + 1, sizeof(int) * (t - 1));
				tmp[t - 1] = cd->tok;
				add_finished(h, K, tmp, t, norm);
			}
			continue;
		}
		if (nnew < K)
		{
			memcpy(h->toks2 + (size_t) nnew * T1, h->toks + (size_t) cd->beam * T1, sizeof(int) * t);
			h->toks2[(size_t) nnew * T1 + t] = cd->tok;
			h->score2[nnew] = cd->score;
			h->parent[nnew] = cd->beam;
			nnew++;
		}
	}
	if (last || nnew == 0)
		return 0;
	memcpy(h->toks, h->toks2, sizeof(int) * (size_t) nnew * T1);
	memcpy(h->score, h->score2, sizeof(double) * nnew);

	/* _check_early_stop_heuristic: can the best live beam still beat the worst finished? */
	if (h->nfin == K)
	{
		double		worst = h->fin_score[0];
		double		len;

		for (int i = 1; i < K; i++)
			worst = h->fin_score[i] < worst ? h->fin_score[i] : worst;
		if (opt->early_stopping == TF_EARLY_TRUE)
			return 0;
		len = opt->early_stopping == TF_EARLY_NEVER && opt->length_penalty > 0.0 ?
			opt->max_length - 1 : t;
		if (worst >= h->score[0] / pow(len, opt->length_penalty))
			return 0;
	}
	return nnew;
}

/*
 * Give the new beams of slots first..first+nb their parents' caches (t
 * positions).  A beam that stays in its slot keeps its cache; a parent that
 * another beam needs and whose own slot is overwritten is saved first.
 */
static void
reorder_caches(const TfModel *m, RunState *s, int first, int nb, const int *parent, int t)
{
	int			d = m->cfg.d_model;
	size_t		bytes = sizeof(float) * (size_t) t * d;
	bool		saved[TF_MAX_BEAMS];
	bool		any = false;

	/* parents are old beams, maybe beyond nb: only slots below nb are written */
	for (int b = 0; b < TF_MAX_BEAMS; b++)
		saved[b] = false;
	for (int b = 0; b < nb; b++)
		any |= parent[b] != b;
	if (!any)
		return;
	for (int b = 0; b < nb; b++)
	{
		int			p = parent[b];

		if (p != b && p < nb && parent[p] != p)
			saved[p] = true;
	}

	for (int l = 0; l < m->cfg.dec_layers; l++)
		for (int pass = 0; pass < 2; pass++)
		{
			float	   *cache = pass == 0 ? s->kcache : s->vcache;

			for (int p = 0; p < nb; p++)
				if (saved[p])
					memcpy(s->reorder + (size_t) p * s->T * d, cache_at(s, cache, d, l, first + p), bytes);
			for (int b = 0; b < nb; b++)
				if (parent[b] != b)
					memcpy(cache_at(s, cache, d, l, first + b),
						   saved[parent[b]] ? s->reorder + (size_t) parent[b] * s->T * d :
						   cache_at(s, cache, d, l, first + parent[b]), bytes);
		}
}

int
tf_translate(const TfModel *m, int n, const int *src, const TfDecodeOptions *opt,
			 int **result, const SpmAlloc *a, void (*interrupt) (void))
{
	const int  *srcs[1] = {src};
	int			nout;

	tf_translate_batch(m, 1, srcs, &n, opt, result, &nout, a, interrupt);
	return nout;
}

void
tf_translate_batch(const TfModel *m, int nsent, const int *const *src, const int *n_src,
				   const TfDecodeOptions *opt, int **results, int *nresults,
				   const SpmAlloc *a, void (*interrupt) (void))
{
	const TfConfig *c = &m->cfg;
	int			d = c->d_model;
	int			K = opt[0].beam_size;
	int			L = c->dec_layers;
	int			maxrows = nsent * K;
	int			longest = 0;
	RunState	s;
	EncodeState enc;
	Search	   *hs = a->alloc(a->ctx, sizeof(Search) * nsent);
	StepRow    *rows = a->alloc(a->ctx, sizeof(StepRow) * maxrows);
	Cand	   *cands = a->alloc(a->ctx, sizeof(Cand) * (size_t) K * 2 * K);
	Cand	   *top = a->alloc(a->ctx, sizeof(Cand) * 2 * K);
	int		   *tmp;
	float	   *memory;

	/* Hugging Face's max_length counts the start token: max_length - 1 steps */
	s.slots = maxrows;
	s.T = 1;
	for (int i = 0; i < nsent; i++)
	{
		s.T = imax(s.T, opt[i].max_length - 1);
		longest = imax(longest, n_src[i]);
	}
	tmp = a->alloc(a->ctx, sizeof(int) * (size_t) (s.T + 1));
	memory = a->alloc(a->ctx, sizeof(float) * (size_t) longest * d);
	encode_state_alloc(m, longest, &enc, a);

	/* each sentence's encoder, then its cross-attention K and V, once */
	for (int i = 0; i < nsent; i++)
	{
		Search	   *h = &hs[i];
		int			n = n_src[i];
		int			T1 = imax(opt[i].max_length - 1, 1) + 1;

		if (interrupt)
			interrupt();
		memset(h, 0, sizeof(Search));
		h->n_src = n;
		h->T = T1 - 1;
		encode(m, n, src[i], memory, &enc);
		h->cross_k = a->alloc(a->ctx, sizeof(float) * (size_t) L * n * d);
		h->cross_v = a->alloc(a->ctx, sizeof(float) * (size_t) L * n * d);
		for (int l = 0; l < L; l++)
		{
			const TfAttnWeights *X = &m->w.dec[l].cross_attn;

			linear(n, d, d, h->cross_k + (size_t) l * n * d, memory, X->k_w, X->k_b);
			linear(n, d, d, h->cross_v + (size_t) l * n * d, memory, X->v_w, X->v_b);
		}
		h->toks = a->alloc(a->ctx, sizeof(int) * (size_t) K * T1);
		h->toks2 = a->alloc(a->ctx, sizeof(int) * (size_t) K * T1);
		h->score = a->alloc(a->ctx, sizeof(double) * K);
		h->score2 = a->alloc(a->ctx, sizeof(double) * K);
		h->parent = a->alloc(a->ctx, sizeof(int) * K);
		h->fin_toks = a->alloc(a->ctx, sizeof(int) * (size_t) K * T1);
		h->fin_len = a->alloc(a->ctx, sizeof(int) * K);
		h->fin_score = a->alloc(a->ctx, sizeof(double) * K);
		h->nb = 1;
		h->toks[0] = c->decoder_start_id;
		h->score[0] = 0.0;
	}

	s.x = a->alloc(a->ctx, sizeof(float) * (size_t) maxrows * d);
	s.tmp = a->alloc(a->ctx, sizeof(float) * (size_t) maxrows * d);
	s.q = a->alloc(a->ctx, sizeof(float) * (size_t) maxrows * d);
	s.kv = a->alloc(a->ctx, sizeof(float) * (size_t) maxrows * d);
	s.att = a->alloc(a->ctx, sizeof(float) * (size_t) maxrows * d);
	s.out = a->alloc(a->ctx, sizeof(float) * (size_t) maxrows * d);
	s.hb = a->alloc(a->ctx, sizeof(float) * (size_t) maxrows * c->dec_ffn);
	s.logits = a->alloc(a->ctx, sizeof(float) * (size_t) maxrows * c->vocab);
	s.scores = a->alloc(a->ctx, sizeof(float) * (size_t) imax(s.T, longest));
	s.kcache = a->alloc(a->ctx, sizeof(float) * (size_t) L * maxrows * s.T * d);
	s.vcache = a->alloc(a->ctx, sizeof(float) * (size_t) L * maxrows * s.T * d);
	s.reorder = a->alloc(a->ctx, sizeof(float) * (size_t) K * s.T * d);

	for (int t = 1; t <= s.T; t++)
	{
		int			nr = 0;
		int			row0 = 0;

		if (interrupt)
			interrupt();
		/* the live beams of the sentences still searching, as rows */
		for (int i = 0; i < nsent; i++)
		{
			Search	   *h = &hs[i];

			if (h->done)
				continue;
			for (int b = 0; b < h->nb; b++)
			{
				StepRow    *r = &rows[nr++];

				r->tok = h->toks[(size_t) b * (h->T + 1) + t - 1];
				r->slot = i * K + b;
				r->n_src = h->n_src;
				r->cross_k = h->cross_k;
				r->cross_v = h->cross_v;
			}
		}
		if (nr == 0)
			break;
		decoder_step(m, &s, nr, rows, t - 1);

		for (int i = 0; i < nsent; i++)
		{
			Search	   *h = &hs[i];
			int			nb = h->nb;
			int			nnew;

			if (h->done)
				continue;
			if (K == 1)
				nnew = greedy_step(c, &opt[i], h, s.logits + (size_t) row0 * c->vocab, t, tmp);
			else
				nnew = beam_step(c, &opt[i], h, s.logits + (size_t) row0 * c->vocab, t, cands, top, tmp);
			row0 += nb;
			if (nnew == 0)
			{
				h->done = true;
				continue;
			}
			if (K > 1)
				reorder_caches(m, &s, i * K, nnew, h->parent, t);
			h->nb = nnew;
		}
	}

	for (int i = 0; i < nsent; i++)
	{
		Search	   *h = &hs[i];
		int			best = 0;

		for (int j = 1; j < h->nfin; j++)
			if (h->fin_score[j] > h->fin_score[best])
				best = j;
		nresults[i] = h->nfin > 0 ? h->fin_len[best] : 0;
		results[i] = a->alloc(a->ctx, sizeof(int) * (size_t) (nresults[i] + 1));
		if (nresults[i] > 0)
			memcpy(results[i], h->fin_toks + (size_t) best * (h->T + 1), sizeof(int) * nresults[i]);
	}
}

/* ------------------------------------------------------ attention maps */

/* Each head's weights of one attention, into w (heads, nq, nk). */
static void
record_heads(int heads, int d, int nq, int nk, const float *q, const float *k,
			 const AttnMask *mask, float *w)
{
	int			dh = d / heads;

	for (int h = 0; h < heads; h++)
		tf_attention_weights(nq, nk, dh, w + (size_t) h * nq * nk, q + h * dh, d, k + h * dh, d, mask);
}

void
tf_attention_maps(const TfModel *m, int n, const int *src, int T, const int *dec_in,
				  float *enc_w, float *dec_w, float *cross_w, const SpmAlloc *a)
{
	const TfConfig *c = &m->cfg;
	int			d = c->d_model;
	int			rows = n > T ? n : T;
	EncodeState e;
	float	   *memory = a->alloc(a->ctx, sizeof(float) * (size_t) n * d);
	float	   *y = a->alloc(a->ctx, sizeof(float) * (size_t) T * d);
	float	   *mk = a->alloc(a->ctx, sizeof(float) * (size_t) n * d);
	float	   *mv = a->alloc(a->ctx, sizeof(float) * (size_t) n * d);
	float	   *hb = a->alloc(a->ctx, sizeof(float) * (size_t) T * (c->dec_ffn > c->enc_ffn ? c->dec_ffn : c->enc_ffn));
	float	   *scores = a->alloc(a->ctx, sizeof(float) * (size_t) rows * rows);
	float		scale = c->scale_embedding ? sqrtf((float) d) : 1.0f;
	AttnMask	causal = {true, 0, NULL};

	/* the encoder, as encode() runs it, each layer's weights recorded */
	encode_state_alloc(m, rows, &e, a);
	tf_embed(m, n, src, memory);
	for (int l = 0; l < c->enc_layers; l++)
	{
		const TfLayerWeights *L = &m->w.enc[l];
		const TfAttnWeights *A = &L->self_attn;
		Block		blk = {m, n, A->ln_g, A->ln_b};
		const float *in = block_input(&blk, memory, e.tmp);

		linear(n, d, d, e.q, in, A->q_w, A->q_b);
		linear(n, d, d, e.k, in, A->k_w, A->k_b);
		linear(n, d, d, e.v, in, A->v_w, A->v_b);
		record_heads(c->enc_heads, d, n, n, e.q, e.k, NULL, enc_w + (size_t) l * c->enc_heads * n * n);
		tf_multihead_attention(n, n, d, d, c->enc_heads, e.att, scores, e.q, e.k, e.v, NULL);
		linear(n, d, d, e.out, e.att, A->o_w, A->o_b);
		block_output(&blk, memory, e.out);
		ffn_block(m, L, c->enc_ffn, n, memory, e.tmp, e.hb, e.out);
	}
	if (c->final_norm)
		tf_layer_norm(n, d, memory, memory, m->w.enc_norm_g, m->w.enc_norm_b, c->ln_eps);

	/* the decoder over all T inputs at once (teacher forcing): causal self-attention */
	for (int t = 0; t < T; t++)
	{
		const float *p = m->w.dec_pos + (size_t) t * d;
		float	   *x = y + (size_t) t * d;

		tf_packed_row(m->cfg.vocab, d, x, m->w.dec_embed.data, m->w.dec_embed.dtype, dec_in[t]);
		for (int j = 0; j < d; j++)
			x[j] = x[j] * scale + p[j];
	}
	for (int l = 0; l < c->dec_layers; l++)
	{
		const TfLayerWeights *L = &m->w.dec[l];
		const TfAttnWeights *A = &L->self_attn;
		const TfAttnWeights *X = &L->cross_attn;
		Block		blk = {m, T, A->ln_g, A->ln_b};
		Block		xblk = {m, T, X->ln_g, X->ln_b};
		const float *in = block_input(&blk, y, e.tmp);

		linear(T, d, d, e.q, in, A->q_w, A->q_b);
		linear(T, d, d, e.k, in, A->k_w, A->k_b);
		linear(T, d, d, e.v, in, A->v_w, A->v_b);
		record_heads(c->dec_heads, d, T, T, e.q, e.k, &causal, dec_w + (size_t) l * c->dec_heads * T * T);
		tf_multihead_attention(T, T, d, d, c->dec_heads, e.att, scores, e.q, e.k, e.v, &causal);
		linear(T, d, d, e.out, e.att, A->o_w, A->o_b);
		block_output(&blk, y, e.out);

		in = block_input(&xblk, y, e.tmp);
		linear(T, d, d, e.q, in, X->q_w, X->q_b);
		linear(n, d, d, mk, memory, X->k_w, X->k_b);
		linear(n, d, d, mv, memory, X->v_w, X->v_b);
		record_heads(c->dec_heads, d, T, n, e.q, mk, NULL, cross_w + (size_t) l * c->dec_heads * T * n);
		tf_multihead_attention(T, n, d, d, c->dec_heads, e.att, scores, e.q, mk, mv, NULL);
		linear(T, d, d, e.out, e.att, X->o_w, X->o_b);
		block_output(&xblk, y, e.out);

		ffn_block(m, L, c->dec_ffn, T, y, e.tmp, hb, e.out);
	}
}
