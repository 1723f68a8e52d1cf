/*
 * model.c
 *		The forward pass: embedding, encoder, incremental decoder
 *		(self-attention KV cache, cross-attention K/V computed once per input)
 *		and the attention maps.  The search is in search.c, the logits
 *		processors in logits.c.  No postgres.h.  The decoding rules are those
 *		of tools/marian_torch.py, the PyTorch reference the tests compare
 *		against.
 */
#include "model.h"
#include "model_internal.h"
#include "attention.h"
#include "tensor_ops.h"
#include "threads.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ helpers */

void
tf_sinusoidal_positions(int max_pos, int d, TfPositions kind, int first, float *out)
{
	int			half = d / 2;

	for (int p = 0; p < max_pos; p++)
	{
		float	   *row = out + (size_t) p * d;
		double		pos = (double) first + p;

		memset(row, 0, sizeof(float) * d);
		for (int i = 0; i < half; i++)
		{
			double		angle;

			/* M2M100SinusoidalPositionalEmbedding.get_embedding (fairseq) */
			if (kind == TF_POS_SINUSOIDAL_FAIRSEQ)
			{
				float		step = (float) (log(10000.0) / (half > 1 ? half - 1 : 1));

				/* torch computes the frequencies and products in fp32 */
				angle = (float) pos * expf((float) i * -step);
			}
			else
				angle = pos / pow(10000.0, 2.0 * i / d);

			if (kind == TF_POS_SINUSOIDAL_INTERLEAVED)
			{
				row[2 * i] = (float) sin(angle);
				row[2 * i + 1] = (float) cos(angle);
			}
			else
			{
				row[i] = (float) sin(angle);
				row[half + i] = (float) cos(angle);
			}
		}
	}
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

bool
tf_positions_skip_pad(const TfConfig *c)
{
	return c->positions == TF_POS_SINUSOIDAL_FAIRSEQ || c->pos_offset > 0;
}

void
tf_embed(const TfModel *m, int n, const int *ids, float *out)
{
	int			d = m->cfg.d_model;
	float		scale = m->cfg.scale_embedding ? sqrtf((float) d) : 1.0f;
	bool		skip_pad = tf_positions_skip_pad(&m->cfg);
	int			pos = 0;

	for (int i = 0; i < n; i++)
	{
		bool		pad = skip_pad && ids[i] == m->cfg.pad_id;
		const float *p = pad ? m->w.pad_pos : m->w.enc_pos + (size_t) pos++ * d;
		float	   *o = out + (size_t) i * d;

		tf_packed_row(m->cfg.src_vocab, d, o, m->w.enc_embed.data, m->w.enc_embed.dtype, ids[i]);
		if (p == NULL)
			for (size_t j = 0; j < (size_t) d; j++)
				o[j] = o[j] * scale;
		else
			for (size_t j = 0; j < (size_t) d; j++)
				o[j] = o[j] * scale + p[j];
	}
	if (m->cfg.embed_norm)
		tf_layer_norm(n, d, out, out, m->w.embed_norm_g, m->w.embed_norm_b, m->cfg.ln_eps);
}

void
tf_encode_state_alloc(const TfModel *m, int n, EncodeState *e, const SpmAlloc *a)
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
void
tf_encode_with(const TfModel *m, int n, const int *ids, float *x, const EncodeState *e)
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

	tf_encode_state_alloc(m, n, &e, a);
	tf_encode_with(m, n, ids, x, &e);
}

/*
 * Packed inputs: the attention of each input over its own rows, the
 * inputs shared out among the threads of the call (each part with its own
 * scores); the same kernel whatever the split.
 */
static inline int
imin(int a, int b)
{
	return a < b ? a : b;
}

typedef struct PackedAttn
{
	int			nsent;
	const int  *n;
	const size_t *off;			/* (nsent) first row of each input */
	int			d;
	int			heads;
	float	   *att;
	float	   *scores;			/* (parts, maxn * maxn) */
	size_t		part_scores;
	const float *q,
			   *k,
			   *v;
} PackedAttn;

static void
packed_attn_part(void *arg, int part, int nparts)
{
	const PackedAttn *p = arg;

	for (int i = part; i < p->nsent; i += nparts)
	{
		size_t		o = p->off[i] * (size_t) p->d;

		tf_multihead_attention(p->n[i], p->n[i], p->d, p->d, p->heads, p->att + o,
							   p->scores + (size_t) part * p->part_scores,
							   p->q + o, p->k + o, p->v + o, NULL);
	}
}

void
tf_encode_packed(const TfModel *m, int nsent, const int *const *ids, const int *n,
				 float *x, const SpmAlloc *a, void (*interrupt) (void))
{
	const TfConfig *c = &m->cfg;
	int			d = c->d_model;
	int			rows = 0;
	int			maxn = 1;
	int			parts = imax(1, tf_parallel_parts());
	size_t	   *off = a->alloc(a->ctx, sizeof(size_t) * (nsent + 1));
	EncodeState e;
	PackedAttn	pa;

	for (int i = 0; i < nsent; i++)
	{
		off[i] = (size_t) rows;
		rows += n[i];
		maxn = imax(maxn, n[i]);
	}
	if (rows == 0)
		return;
	tf_encode_state_alloc(m, rows, &e, a);
	pa.nsent = nsent;
	pa.n = n;
	pa.off = off;
	pa.d = d;
	pa.heads = c->enc_heads;
	pa.att = e.att;
	pa.part_scores = (size_t) maxn * maxn;
	pa.scores = a->alloc(a->ctx, sizeof(float) * pa.part_scores * parts);
	pa.q = e.q;
	pa.k = e.k;
	pa.v = e.v;

	for (int i = 0; i < nsent; i++)
		tf_embed(m, n[i], ids[i], x + off[i] * d);
	for (int l = 0; l < c->enc_layers; l++)
	{
		const TfLayerWeights *L = &m->w.enc[l];
		const TfAttnWeights *A = &L->self_attn;
		Block		blk = {m, rows, A->ln_g, A->ln_b};
		const float *in = block_input(&blk, x, e.tmp);

		if (interrupt)
			interrupt();
		linear(rows, d, d, e.q, in, A->q_w, A->q_b);
		linear(rows, d, d, e.k, in, A->k_w, A->k_b);
		linear(rows, d, d, e.v, in, A->v_w, A->v_b);
		tf_parallel(imin(parts, nsent), packed_attn_part, &pa);
		linear(rows, d, d, e.out, e.att, A->o_w, A->o_b);
		block_output(&blk, x, e.out);

		ffn_block(m, L, c->enc_ffn, rows, x, e.tmp, e.hb, e.out);
	}
	if (c->final_norm)
		tf_layer_norm(rows, d, x, x, m->w.enc_norm_g, m->w.enc_norm_b, c->ln_eps);
}

/*
 * sentence-transformers' Pooling.forward over one input's rows (all of
 * them real tokens: the mask is all ones): cls_token, mean_tokens
 * (sum / max(n, 1e-9)), max_tokens, mean_sqrt_len_tokens (sum / sqrt(n)).
 */
void
tf_pool(TfPooling mode, int n, int d, const float *x, float *out)
{
	if (mode == TF_POOL_CLS)
	{
		memcpy(out, x, sizeof(float) * d);
		return;
	}
	if (mode == TF_POOL_MAX)
	{
		memcpy(out, x, sizeof(float) * d);
		for (int i = 1; i < n; i++)
			for (int j = 0; j < d; j++)
				if (x[(size_t) i * d + j] > out[j])
					out[j] = x[(size_t) i * d + j];
		return;
	}
	memset(out, 0, sizeof(float) * d);
	for (int i = 0; i < n; i++)
		for (int j = 0; j < d; j++)
			out[j] += x[(size_t) i * d + j];
	{
		float		div = mode == TF_POOL_MEAN ? (float) n : sqrtf((float) n);

		for (int j = 0; j < d; j++)
			out[j] /= div;
	}
}

void
tf_l2_normalize(int d, float *x)
{
	double		ss = 0;
	float		norm;

	for (int j = 0; j < d; j++)
		ss += (double) x[j] * x[j];
	norm = (float) sqrt(ss);
	if (norm < 1e-12f)
		norm = 1e-12f;
	for (int j = 0; j < d; j++)
		x[j] /= norm;
}

/* ------------------------------------------------------------ decoder */

/*
 * A step's attention, row by row: independent rows, so the threads of one
 * call (threads.h) share them, each with its own scratch; every row is
 * computed by the same kernels whatever the split.
 */
typedef struct StepAttn
{
	const TfModel *m;
	RunState   *s;
	int			nr;
	const StepRow *rows;
	int			pos;
	int			l;
} StepAttn;


/* self-attention of rows nr·part/nparts .. over each row's own cache rows */
static void
self_attn_part(void *arg, int part, int nparts)
{
	const StepAttn *j = arg;
	RunState   *s = j->s;
	int			d = j->m->cfg.d_model;
	float	   *scratch = s->scores + (size_t) part * s->part_scores;
	const float **kr = s->krows + (size_t) part * s->T;
	const float **vr = s->vrows + (size_t) part * s->T;

	for (int r = (int) ((long) j->nr * part / nparts); r < (int) ((long) j->nr * (part + 1) / nparts); r++)
	{
		const int  *anc = s->anc + (size_t) j->rows[r].slot * s->T;

		for (int p = 0; p <= j->pos; p++)
		{
			kr[p] = cache_row(s, s->kcache, d, j->l, anc[p], p);
			vr[p] = cache_row(s, s->vcache, d, j->l, anc[p], p);
		}
		tf_multihead_attention_rows(j->pos + 1, d, j->m->cfg.dec_heads,
									s->att + (size_t) r * d, scratch,
									s->q + (size_t) r * d, kr, vr);
	}
}

/*
 * Cross-attention.  A sentence's beams are consecutive rows over one
 * source: each key is read once for up to TF_SMALL_M of them (tf_matmul's
 * own kernels, so every row's result is what it would be alone).  Groups
 * are dealt to the parts in turn.
 */
static void
cross_attn_part(void *arg, int part, int nparts)
{
	const StepAttn *j = arg;
	RunState   *s = j->s;
	const StepRow *rows = j->rows;
	int			d = j->m->cfg.d_model;
	float	   *scratch = s->scores + (size_t) part * s->part_scores;

	for (int r = 0, g, gi = 0; r < j->nr; r += g, gi++)
	{
		for (g = 1; r + g < j->nr && g < TF_SMALL_M && rows[r + g].cross_k == rows[r].cross_k; g++)
			;
		if (gi % nparts != part)
			continue;
		tf_multihead_attention(g, rows[r].n_src, d, d, j->m->cfg.dec_heads,
							   s->att + (size_t) r * d, scratch,
							   s->q + (size_t) r * d,
							   rows[r].cross_k + (size_t) j->l * rows[r].n_src * d,
							   rows[r].cross_v + (size_t) j->l * rows[r].n_src * d, NULL);
	}
}

/*
 * One decoder step for nr rows at position pos; leaves the logits in
 * s->logits (nr, vocab).
 */
void
tf_decoder_step(const TfModel *m, RunState *s, int nr, const StepRow *rows, int pos)
{
	const TfConfig *c = &m->cfg;
	int			d = c->d_model;
	float		scale = c->scale_embedding ? sqrtf((float) d) : 1.0f;

	/* this step's cache rows are the rows' own */
	for (int r = 0; r < nr; r++)
		s->anc[(size_t) rows[r].slot * s->T + pos] = rows[r].slot;
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

		/* self-attention over each row's cached keys and values (rows shared by the threads) */
		linear(nr, d, d, s->q, in, A->q_w, A->q_b);
		linear(nr, d, d, s->kv, in, A->k_w, A->k_b);
		for (int r = 0; r < nr; r++)
			memcpy(cache_row(s, s->kcache, d, l, rows[r].slot, pos),
				   s->kv + (size_t) r * d, sizeof(float) * d);
		linear(nr, d, d, s->kv, in, A->v_w, A->v_b);
		for (int r = 0; r < nr; r++)
			memcpy(cache_row(s, s->vcache, d, l, rows[r].slot, pos),
				   s->kv + (size_t) r * d, sizeof(float) * d);
		{
			StepAttn	job = {m, s, nr, rows, pos, l};

			tf_parallel(imin(s->parts, nr), self_attn_part, &job);
		}
		linear(nr, d, d, s->out, s->att, A->o_w, A->o_b);
		block_output(&blk, s->x, s->out);

		/* cross-attention over each row's encoder output */
		in = block_input(&xblk, s->x, s->tmp);
		linear(nr, d, d, s->q, in, X->q_w, X->q_b);
		{
			StepAttn	job = {m, s, nr, rows, pos, l};

			tf_parallel(imin(s->parts, nr), cross_attn_part, &job);
		}
		linear(nr, d, d, s->out, s->att, X->o_w, X->o_b);
		block_output(&xblk, s->x, s->out);

		ffn_block(m, L, c->dec_ffn, nr, s->x, s->tmp, s->hb, s->out);
	}
	if (c->final_norm)
		tf_layer_norm(nr, d, s->x, s->x, m->w.dec_norm_g, m->w.dec_norm_b, c->ln_eps);

	/* greedy rows: the screen, resolved in fp32 by the search (greedy_screen.c) */
	linear(nr, c->vocab, d, s->logits, s->x, s->screen ? m->w.lm_head_screen : m->w.lm_head,
		   m->w.logits_bias);
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

	/* the encoder, as tf_encode_with() runs it, each layer's weights recorded */
	tf_encode_state_alloc(m, rows, &e, a);
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
