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

		tf_row_to_float(d, o, m->w.enc_embed.data, m->w.enc_embed.dtype, ids[i]);
		for (size_t j = 0; j < (size_t) d; j++)
			o[j] = o[j] * scale + p[j];
	}
}

void
tf_encode(const TfModel *m, int n, const int *ids, float *x, const SpmAlloc *a)
{
	const TfConfig *c = &m->cfg;
	int			d = c->d_model;
	size_t		nd = (size_t) n * d;
	float	   *tmp = a->alloc(a->ctx, sizeof(float) * nd);
	float	   *q = a->alloc(a->ctx, sizeof(float) * nd);
	float	   *k = a->alloc(a->ctx, sizeof(float) * nd);
	float	   *v = a->alloc(a->ctx, sizeof(float) * nd);
	float	   *att = a->alloc(a->ctx, sizeof(float) * nd);
	float	   *out = a->alloc(a->ctx, sizeof(float) * nd);
	float	   *hb = a->alloc(a->ctx, sizeof(float) * (size_t) n * c->enc_ffn);
	float	   *scores = a->alloc(a->ctx, sizeof(float) * (size_t) n * n);

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

/* ------------------------------------------------------------ decoder */

typedef struct RunState
{
	int			K;				/* beams */
	int			T;				/* positions: max_length */
	int			n_src;
	float	   *x;				/* (K, d) */
	float	   *tmp;			/* (K, d) */
	float	   *q;				/* (K, d) */
	float	   *kv;				/* (K, d) */
	float	   *att;			/* (K, d) */
	float	   *out;			/* (K, d) */
	float	   *hb;				/* (K, ffn) */
	float	   *logits;			/* (K, vocab) */
	float	   *scores;			/* (max(T, n_src)) */
	float	   *kcache;			/* (layers, K, T, d) */
	float	   *vcache;			/* (layers, K, T, d) */
	float	   *kcache2;		/* the same, to reorder beams into */
	float	   *vcache2;
	float	   *cross_k;		/* (layers, n_src, d) */
	float	   *cross_v;		/* (layers, n_src, d) */
} RunState;

static inline float *
cache_at(const RunState *s, float *cache, int d, int l, int b)
{
	return cache + (((size_t) l * s->K + b) * s->T) * d;
}

/*
 * One decoder step for nb beams: token tok[b] at position pos of each beam;
 * leaves the logits in s->logits (nb, vocab).
 */
static void
decoder_step(const TfModel *m, RunState *s, int nb, const int *tok, int pos)
{
	const TfConfig *c = &m->cfg;
	int			d = c->d_model;
	float		scale = c->scale_embedding ? sqrtf((float) d) : 1.0f;

	for (int b = 0; b < nb; b++)
	{
		const float *p = m->w.dec_pos + (size_t) pos * d;
		float	   *x = s->x + (size_t) b * d;

		tf_row_to_float(d, x, m->w.dec_embed.data, m->w.dec_embed.dtype, tok[b]);
		for (size_t j = 0; j < (size_t) d; j++)
			x[j] = x[j] * scale + p[j];
	}

	for (int l = 0; l < c->dec_layers; l++)
	{
		const TfLayerWeights *L = &m->w.dec[l];
		const TfAttnWeights *A = &L->self_attn;
		const TfAttnWeights *X = &L->cross_attn;
		Block		blk = {m, nb, A->ln_g, A->ln_b};
		Block		xblk = {m, nb, X->ln_g, X->ln_b};
		const float *in = block_input(&blk, s->x, s->tmp);

		/* self-attention over this beam's cached keys and values */
		linear(nb, d, d, s->q, in, A->q_w, A->q_b);
		linear(nb, d, d, s->kv, in, A->k_w, A->k_b);
		for (int b = 0; b < nb; b++)
			memcpy(cache_at(s, s->kcache, d, l, b) + (size_t) pos * d, s->kv + (size_t) b * d,
				   sizeof(float) * d);
		linear(nb, d, d, s->kv, in, A->v_w, A->v_b);
		for (int b = 0; b < nb; b++)
			memcpy(cache_at(s, s->vcache, d, l, b) + (size_t) pos * d, s->kv + (size_t) b * d,
				   sizeof(float) * d);
		for (int b = 0; b < nb; b++)
			tf_multihead_attention(1, pos + 1, d, d, c->dec_heads,
								   s->att + (size_t) b * d, s->scores,
								   s->q + (size_t) b * d,
								   cache_at(s, s->kcache, d, l, b),
								   cache_at(s, s->vcache, d, l, b), NULL);
		linear(nb, d, d, s->out, s->att, A->o_w, A->o_b);
		block_output(&blk, s->x, s->out);

		/* cross-attention over the encoder output */
		in = block_input(&xblk, s->x, s->tmp);
		linear(nb, d, d, s->q, in, X->q_w, X->q_b);
		for (int b = 0; b < nb; b++)
			tf_multihead_attention(1, s->n_src, d, d, c->dec_heads,
								   s->att + (size_t) b * d, s->scores,
								   s->q + (size_t) b * d,
								   s->cross_k + (size_t) l * s->n_src * d,
								   s->cross_v + (size_t) l * s->n_src * d, NULL);
		linear(nb, d, d, s->out, s->att, X->o_w, X->o_b);
		block_output(&xblk, s->x, s->out);

		ffn_block(m, L, c->dec_ffn, nb, s->x, s->tmp, s->hb, s->out);
	}
	if (c->final_norm)
		tf_layer_norm(nb, d, s->x, s->x, m->w.dec_norm_g, m->w.dec_norm_b, c->ln_eps);

	linear(nb, c->vocab, d, s->logits, s->x, m->w.lm_head, m->w.logits_bias);
}

/* log-softmax of one row of logits (pad excluded), as doubles. */
static void
log_softmax_row(const TfConfig *c, float *logits, double *lp)
{
	double		lse;

	logits[c->pad_id] = -INFINITY;
	lse = tf_log_sum_exp(c->vocab, logits);
	for (size_t j = 0; j < (size_t) c->vocab; j++)
		lp[j] = (double) logits[j] - lse;
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

/* The top k entries of lp (vocab) as candidates of beam b, appended to c. */
static int
top_k(const double *lp, int vocab, int k, int beam, double base, Cand *out)
{
	int			n = 0;

	for (int j = 0; j < vocab; j++)
	{
		Cand		cand = {base + lp[j], beam, j};
		int			i;

		if (lp[j] == -INFINITY)
			continue;
		if (n == k && cand_cmp(&cand, &out[n - 1]) >= 0)
			continue;
		/* insertion into the sorted prefix */
		i = n < k ? n++ : k - 1;
		while (i > 0 && cand_cmp(&cand, &out[i - 1]) < 0)
		{
			out[i] = out[i - 1];
			i--;
		}
		out[i] = cand;
	}
	return n;
}

int
tf_translate(const TfModel *m, int n, const int *src, const TfDecodeOptions *opt,
			 int **result, const SpmAlloc *a, void (*interrupt) (void))
{
	const TfConfig *c = &m->cfg;
	int			d = c->d_model;
	int			K = opt->beam_size;
	int			T = opt->max_length;
	int			L = c->dec_layers;
	RunState	s;
	float	   *memory = a->alloc(a->ctx, sizeof(float) * (size_t) n * d);
	int		   *toks = a->alloc(a->ctx, sizeof(int) * (size_t) K * (T + 1));	/* live beams */
	int		   *toks2 = a->alloc(a->ctx, sizeof(int) * (size_t) K * (T + 1));
	double	   *score = a->alloc(a->ctx, sizeof(double) * K);
	double	   *score2 = a->alloc(a->ctx, sizeof(double) * K);
	int		   *parent = a->alloc(a->ctx, sizeof(int) * K);
	int		   *last = a->alloc(a->ctx, sizeof(int) * K);
	double	   *lp = a->alloc(a->ctx, sizeof(double) * c->vocab);
	Cand	   *cands = a->alloc(a->ctx, sizeof(Cand) * (size_t) K * 2 * K);
	Cand	   *top = a->alloc(a->ctx, sizeof(Cand) * 2 * K);
	/* finished hypotheses: at most K from the search plus K at the end */
	int		   *fin_toks = a->alloc(a->ctx, sizeof(int) * (size_t) 2 * K * (T + 1));
	int		   *fin_len = a->alloc(a->ctx, sizeof(int) * 2 * K);
	double	   *fin_score = a->alloc(a->ctx, sizeof(double) * 2 * K);
	int			nfin = 0;
	int			nb = 1;
	int			best;

	/* the encoder, then each decoder layer's cross-attention K and V, once */
	s.K = K;
	s.T = T;
	s.n_src = n;
	tf_encode(m, n, src, memory, a);
	s.cross_k = a->alloc(a->ctx, sizeof(float) * (size_t) L * n * d);
	s.cross_v = a->alloc(a->ctx, sizeof(float) * (size_t) L * n * d);
	for (int l = 0; l < L; l++)
	{
		const TfAttnWeights *X = &m->w.dec[l].cross_attn;

		linear(n, d, d, s.cross_k + (size_t) l * n * d, memory, X->k_w, X->k_b);
		linear(n, d, d, s.cross_v + (size_t) l * n * d, memory, X->v_w, X->v_b);
	}

	s.x = a->alloc(a->ctx, sizeof(float) * (size_t) K * d);
	s.tmp = a->alloc(a->ctx, sizeof(float) * (size_t) K * d);
	s.q = a->alloc(a->ctx, sizeof(float) * (size_t) K * d);
	s.kv = a->alloc(a->ctx, sizeof(float) * (size_t) K * d);
	s.att = a->alloc(a->ctx, sizeof(float) * (size_t) K * d);
	s.out = a->alloc(a->ctx, sizeof(float) * (size_t) K * d);
	s.hb = a->alloc(a->ctx, sizeof(float) * (size_t) K * c->dec_ffn);
	s.logits = a->alloc(a->ctx, sizeof(float) * (size_t) K * c->vocab);
	s.scores = a->alloc(a->ctx, sizeof(float) * (size_t) (T > n ? T : n));
	s.kcache = a->alloc(a->ctx, sizeof(float) * (size_t) L * K * T * d);
	s.vcache = a->alloc(a->ctx, sizeof(float) * (size_t) L * K * T * d);
	s.kcache2 = K > 1 ? a->alloc(a->ctx, sizeof(float) * (size_t) L * K * T * d) : NULL;
	s.vcache2 = K > 1 ? a->alloc(a->ctx, sizeof(float) * (size_t) L * K * T * d) : NULL;

	toks[0] = c->decoder_start_id;
	score[0] = 0.0;
	for (int t = 1; t <= T; t++)
	{
		int			ncand = 0;
		int			nnew = 0;

		if (interrupt)
			interrupt();
		for (int b = 0; b < nb; b++)
			last[b] = toks[(size_t) b * (T + 1) + t - 1];
		decoder_step(m, &s, nb, last, t - 1);

		for (int b = 0; b < nb; b++)
		{
			log_softmax_row(c, s.logits + (size_t) b * c->vocab, lp);
			ncand += top_k(lp, c->vocab, 2 * K, b, score[b], cands + ncand);
		}
		qsort(cands, ncand, sizeof(Cand), cand_cmp);
		if (ncand > 2 * K)
			ncand = 2 * K;
		memcpy(top, cands, sizeof(Cand) * ncand);

		for (int r = 0; r < ncand; r++)
		{
			const Cand *cd = &top[r];

			if (cd->tok == c->eos_id)
			{
				if (r < K)
				{
					/* tokens after the start token, EOS excluded */
					memcpy(fin_toks + (size_t) nfin * (T + 1), toks + (size_t) cd->beam * (T + 1) + 1,
						   sizeof(int) * (t - 1));
					fin_len[nfin] = t - 1;
					fin_score[nfin] = cd->score / pow((double) t, opt->length_penalty);
					nfin++;
				}
				continue;
			}
			if (nnew < K)
			{
				memcpy(toks2 + (size_t) nnew * (T + 1), toks + (size_t) cd->beam * (T + 1),
					   sizeof(int) * t);
				toks2[(size_t) nnew * (T + 1) + t] = cd->tok;
				score2[nnew] = cd->score;
				parent[nnew] = cd->beam;
				nnew++;
			}
		}
		if (nfin >= K || nnew == 0)
			break;

		/* the new beams: tokens, scores, and their parents' caches */
		memcpy(toks, toks2, sizeof(int) * (size_t) nnew * (T + 1));
		memcpy(score, score2, sizeof(double) * nnew);
		if (K > 1)
		{
			for (int l = 0; l < L; l++)
				for (int b = 0; b < nnew; b++)
				{
					memcpy(cache_at(&s, s.kcache2, d, l, b), cache_at(&s, s.kcache, d, l, parent[b]),
						   sizeof(float) * (size_t) t * d);
					memcpy(cache_at(&s, s.vcache2, d, l, b), cache_at(&s, s.vcache, d, l, parent[b]),
						   sizeof(float) * (size_t) t * d);
				}
			{
				float	   *swap = s.kcache;

				s.kcache = s.kcache2;
				s.kcache2 = swap;
				swap = s.vcache;
				s.vcache = s.vcache2;
				s.vcache2 = swap;
			}
		}
		nb = nnew;

		if (t == T)
			for (int b = 0; b < nb; b++)
			{
				memcpy(fin_toks + (size_t) nfin * (T + 1), toks + (size_t) b * (T + 1) + 1,
					   sizeof(int) * t);
				fin_len[nfin] = t;
				fin_score[nfin] = score[b] / pow((double) t, opt->length_penalty);
				nfin++;
			}
	}

	best = 0;
	for (int i = 1; i < nfin; i++)
		if (fin_score[i] > fin_score[best])
			best = i;
	*result = a->alloc(a->ctx, sizeof(int) * (size_t) (nfin > 0 ? fin_len[best] + 1 : 1));
	if (nfin == 0)
		return 0;
	memcpy(*result, fin_toks + (size_t) best * (T + 1), sizeof(int) * fin_len[best]);
	return fin_len[best];
}
