/*
 * train_model.c
 *		The encoder-decoder's forward pass with its activations kept, its
 *		backward pass, and Adam over the parameters (train_model.h).
 *		No postgres.h.
 *
 * The layers are Hugging Face's MarianMTModel and M2M100 layers (as
 * tools/marian_torch.py and tools/m2m100_torch.py port them): a block is
 * post-norm, LN(x + F(x)), or pre-norm, x + F(LN(x)); the attention
 * blocks' F is out_proj(softmax(q kᵀ / √dk) v) over q_proj, k_proj,
 * v_proj; the feed-forward block's F is fc2(act(fc1(x))).  Dropout is not
 * applied here (training with dropout 0).
 */
#include "train_model.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------ parameters */

/* a bump pointer over an array, or a counter when base is NULL */
typedef struct Bump
{
	char	   *base;
	size_t		used;
} Bump;

static float *
take(Bump *b, size_t nfloats)
{
	float	   *p = b->base ? (float *) (b->base + b->used) : NULL;

	/* 16-byte steps keep every buffer aligned for the vector kernels */
	b->used += (nfloats * sizeof(float) + 15) & ~(size_t) 15;
	return p;
}

static void
bind_attn(Bump *b, int d, TfTrainAttn *a)
{
	a->q_w = take(b, (size_t) d * d);
	a->q_b = take(b, d);
	a->k_w = take(b, (size_t) d * d);
	a->k_b = take(b, d);
	a->v_w = take(b, (size_t) d * d);
	a->v_b = take(b, d);
	a->o_w = take(b, (size_t) d * d);
	a->o_b = take(b, d);
	a->ln_g = take(b, d);
	a->ln_b = take(b, d);
}

static void
bind_ffn(Bump *b, int d, int ffn, TfTrainLayer *l)
{
	l->fc1_w = take(b, (size_t) ffn * d);
	l->fc1_b = take(b, ffn);
	l->fc2_w = take(b, (size_t) d * ffn);
	l->fc2_b = take(b, d);
	l->ln_g = take(b, d);
	l->ln_b = take(b, d);
}

static void
bind_all(const TfConfig *c, bool shared, bool tied, Bump *b, TfTrainParams *out)
{
	int			d = c->d_model;

	memset(out, 0, sizeof(*out));
	out->src_embed = take(b, (size_t) c->src_vocab * d);
	out->dec_embed = shared ? out->src_embed : take(b, (size_t) c->vocab * d);
	out->lm_head = tied ? out->dec_embed : take(b, (size_t) c->vocab * d);
	for (int l = 0; l < c->enc_layers; l++)
	{
		bind_attn(b, d, &out->enc[l].self_attn);
		bind_ffn(b, d, c->enc_ffn, &out->enc[l]);
	}
	for (int l = 0; l < c->dec_layers; l++)
	{
		bind_attn(b, d, &out->dec[l].self_attn);
		bind_attn(b, d, &out->dec[l].cross_attn);
		bind_ffn(b, d, c->dec_ffn, &out->dec[l]);
	}
	if (c->final_norm)
	{
		out->enc_norm_g = take(b, d);
		out->enc_norm_b = take(b, d);
		out->dec_norm_g = take(b, d);
		out->dec_norm_b = take(b, d);
	}
}

size_t
tf_train_param_count(const TfConfig *c, bool shared, bool tied)
{
	Bump		b = {NULL, 0};
	TfTrainParams p;

	if (c->enc_layers > TF_TRAIN_MAX_LAYERS || c->dec_layers > TF_TRAIN_MAX_LAYERS)
		return 0;
	bind_all(c, shared, tied, &b, &p);
	return b.used / sizeof(float);
}

void
tf_train_bind(const TfConfig *c, bool shared, bool tied, float *base, TfTrainParams *out)
{
	Bump		b = {(char *) base, 0};

	bind_all(c, shared, tied, &b, out);
}

/* ------------------------------------------------------------ the state */

/* What a block keeps for its backward pass (r rows; kv rows of keys). */
typedef struct BlockActs
{
	float	   *x;				/* (r, d) the block's input */
	float	   *xn;				/* (r, d) pre-norm: LN(x), F's input */
	float	   *mean;			/* (r) the LayerNorm's: of x (pre), of x + F (post) */
	float	   *rstd;			/* (r) */
	float	   *sum;			/* (r, d) post-norm: x + F, the LayerNorm's input */
	float	   *q;				/* (r, d) attention */
	float	   *k;				/* (kv, d) */
	float	   *v;				/* (kv, d) */
	float	   *p;				/* (heads, r, kv) the attention's weights */
	float	   *att;			/* (r, d) before out_proj */
	float	   *h;				/* (r, ffn) feed-forward: fc1's output */
	float	   *a;				/* (r, ffn) activated */
} BlockActs;

struct TfTrainState
{
	int			n_max;
	int			t_max;
	BlockActs	enc[TF_TRAIN_MAX_LAYERS][2];	/* self-attention, feed-forward */
	BlockActs	dec[TF_TRAIN_MAX_LAYERS][3];	/* self, cross, feed-forward */
	float	   *enc_top;		/* (n, d) the last encoder block's output */
	float	   *enc_out;		/* (n, d) the encoder's output (after its final norm) */
	float	   *enc_mean;		/* (n) */
	float	   *enc_rstd;
	float	   *dec_top;		/* (t, d) */
	float	   *dec_out;		/* (t, d) */
	float	   *dec_mean;		/* (t) */
	float	   *dec_rstd;
	float	   *logits;			/* (t, vocab) */
	float	   *dlogits;		/* (t, vocab) */
	int		   *din;			/* (t) the decoder's inputs: start, labels[0 .. t-2] */
	/* backward work, for r <= R rows and kv <= R keys */
	float	   *dcur;			/* (R, d) the gradient of a block's output */
	float	   *dnext;			/* (R, d) of its input */
	float	   *dsum;			/* (R, d) */
	float	   *datt;			/* (R, d) */
	float	   *dq;				/* (R, d) */
	float	   *dk;				/* (R, d) */
	float	   *dv;				/* (R, d) */
	float	   *din_;			/* (R, d) */
	float	   *dkin;			/* (R, d) */
	float	   *dvin;			/* (R, d) */
	float	   *dh;				/* (R, ffn) */
	float	   *scratch;		/* (R, R) */
	float	   *denc;			/* (n, d) the encoder output's gradient, from every cross-attention */
};

static void
take_block(Bump *b, const TfConfig *c, int r, int kv, int heads, int ffn, BlockActs *a)
{
	int			d = c->d_model;

	memset(a, 0, sizeof(*a));
	a->x = take(b, (size_t) r * d);
	a->xn = take(b, (size_t) r * d);
	a->mean = take(b, r);
	a->rstd = take(b, r);
	a->sum = take(b, (size_t) r * d);
	if (ffn > 0)
	{
		a->h = take(b, (size_t) r * ffn);
		a->a = take(b, (size_t) r * ffn);
	}
	else
	{
		a->q = take(b, (size_t) r * d);
		a->k = take(b, (size_t) kv * d);
		a->v = take(b, (size_t) kv * d);
		a->p = take(b, (size_t) heads * r * kv);
		a->att = take(b, (size_t) r * d);
	}
}

static size_t
layout(const TfTrainModel *tm, int n, int t, Bump *b, TfTrainState *st)
{
	const TfConfig *c = &tm->cfg;
	int			d = c->d_model;
	int			R = n > t ? n : t;
	int			ffn = c->enc_ffn > c->dec_ffn ? c->enc_ffn : c->dec_ffn;

	st->n_max = n;
	st->t_max = t;
	for (int l = 0; l < c->enc_layers; l++)
	{
		take_block(b, c, n, n, c->enc_heads, 0, &st->enc[l][0]);
		take_block(b, c, n, n, 0, c->enc_ffn, &st->enc[l][1]);
	}
	for (int l = 0; l < c->dec_layers; l++)
	{
		take_block(b, c, t, t, c->dec_heads, 0, &st->dec[l][0]);
		take_block(b, c, t, n, c->dec_heads, 0, &st->dec[l][1]);
		take_block(b, c, t, t, 0, c->dec_ffn, &st->dec[l][2]);
	}
	st->enc_top = take(b, (size_t) n * d);
	st->enc_out = take(b, (size_t) n * d);
	st->enc_mean = take(b, n);
	st->enc_rstd = take(b, n);
	st->dec_top = take(b, (size_t) t * d);
	st->dec_out = take(b, (size_t) t * d);
	st->dec_mean = take(b, t);
	st->dec_rstd = take(b, t);
	st->logits = take(b, (size_t) t * c->vocab);
	st->dlogits = take(b, (size_t) t * c->vocab);
	st->din = (int *) take(b, t);
	st->dcur = take(b, (size_t) R * d);
	st->dnext = take(b, (size_t) R * d);
	st->dsum = take(b, (size_t) R * d);
	st->datt = take(b, (size_t) R * d);
	st->dq = take(b, (size_t) R * d);
	st->dk = take(b, (size_t) R * d);
	st->dv = take(b, (size_t) R * d);
	st->din_ = take(b, (size_t) R * d);
	st->dkin = take(b, (size_t) R * d);
	st->dvin = take(b, (size_t) R * d);
	st->dh = take(b, (size_t) R * ffn);
	st->scratch = take(b, (size_t) R * R);
	st->denc = take(b, (size_t) n * d);
	return b->used;
}

size_t
tf_train_state_size(const TfTrainModel *tm, int n_max, int t_max)
{
	Bump		b = {NULL, (sizeof(TfTrainState) + 15) & ~(size_t) 15};
	TfTrainState st;

	return layout(tm, n_max, t_max, &b, &st);
}

TfTrainState *
tf_train_state_init(const TfTrainModel *tm, int n_max, int t_max, void *buf)
{
	TfTrainState *st = buf;
	Bump		b = {buf, (sizeof(TfTrainState) + 15) & ~(size_t) 15};

	layout(tm, n_max, t_max, &b, st);
	return st;
}

/* ------------------------------------------------------------ the blocks */

static TfTrainAct
train_act(TfActivation a)
{
	return a == TF_ACT_RELU ? TF_TRAIN_RELU : a == TF_ACT_GELU ? TF_TRAIN_GELU : TF_TRAIN_SILU;
}

static void
add_to(size_t n, float *y, const float *x)
{
	for (size_t i = 0; i < n; i++)
		y[i] += x[i];
}

/* F's input: LN(x) when pre-norm, else x */
static const float *
block_in(const TfTrainModel *tm, BlockActs *A, int r, const float *g, const float *b)
{
	if (!tm->cfg.pre_norm)
		return A->x;
	tf_layer_norm_fw(r, tm->cfg.d_model, A->xn, A->mean, A->rstd, A->x, g, b, tm->cfg.ln_eps);
	return A->xn;
}

/* out = x + F (pre-norm) or LN(x + F) (post-norm), with F already in f */
static void
block_out(const TfTrainModel *tm, BlockActs *A, int r, const float *g, const float *b,
		  const float *f, float *out)
{
	size_t		n = (size_t) r * tm->cfg.d_model;

	if (tm->cfg.pre_norm)
	{
		memcpy(out, A->x, sizeof(float) * n);
		add_to(n, out, f);
		return;
	}
	memcpy(A->sum, A->x, sizeof(float) * n);
	add_to(n, A->sum, f);
	tf_layer_norm_fw(r, tm->cfg.d_model, out, A->mean, A->rstd, A->sum, g, b, tm->cfg.ln_eps);
}

/* an attention block on A->x (r rows); mem: the encoder's output (kv rows) for cross-attention */
static void
attn_fw(const TfTrainModel *tm, const TfTrainAttn *w, int heads, int r, int kv, BlockActs *A,
		const float *mem, bool causal, float *out, float *f)
{
	int			d = tm->cfg.d_model;
	const float *in = block_in(tm, A, r, w->ln_g, w->ln_b);
	const float *kvin = mem ? mem : in;

	tf_linear_fw(r, d, d, A->q, in, w->q_w, w->q_b);
	tf_linear_fw(kv, d, d, A->k, kvin, w->k_w, w->k_b);
	tf_linear_fw(kv, d, d, A->v, kvin, w->v_w, w->v_b);
	tf_mha_fw(r, kv, d, heads, A->att, A->p, A->q, A->k, A->v, causal, NULL);
	tf_linear_fw(r, d, d, f, A->att, w->o_w, w->o_b);
	block_out(tm, A, r, w->ln_g, w->ln_b, f, out);
}

static void
ffn_fw(const TfTrainModel *tm, const TfTrainLayer *w, int ffn, int r, BlockActs *A, float *out, float *f)
{
	int			d = tm->cfg.d_model;
	const float *in = block_in(tm, A, r, w->ln_g, w->ln_b);

	tf_linear_fw(r, ffn, d, A->h, in, w->fc1_w, w->fc1_b);
	tf_activation_fw(train_act(tm->cfg.activation), (size_t) r * ffn, A->a, A->h);
	tf_linear_fw(r, d, ffn, f, A->a, w->fc2_w, w->fc2_b);
	block_out(tm, A, r, w->ln_g, w->ln_b, f, out);
}

/*
 * The gradient of F's output from the block's output's (dout): through
 * the LayerNorm when post-norm (into st->dsum), else dout itself.
 */
static const float *
block_dF(TfTrainModel *tm, TfTrainState *st, BlockActs *A, int r, const float *g, float *dg, float *db,
		 const float *dout)
{
	if (tm->cfg.pre_norm)
		return dout;
	tf_layer_norm_bw(r, tm->cfg.d_model, st->dsum, dg, db, dout, A->sum, A->mean, A->rstd, g);
	return st->dsum;
}

/*
 * dx (r, d) from F's input's gradient (din) and dF: pre-norm, dx = dout +
 * LN_bw(din); post-norm, dx = dF + din (x + F(x) before the norm).
 */
static void
block_dx(TfTrainModel *tm, BlockActs *A, int r, const float *g, float *dg, float *db,
		 const float *dout, const float *dF, const float *din, float *dx)
{
	size_t		n = (size_t) r * tm->cfg.d_model;

	if (tm->cfg.pre_norm)
	{
		tf_layer_norm_bw(r, tm->cfg.d_model, dx, dg, db, din, A->x, A->mean, A->rstd, g);
		add_to(n, dx, dout);
	}
	else
	{
		memcpy(dx, dF, sizeof(float) * n);
		add_to(n, dx, din);
	}
}

static void
attn_bw(TfTrainModel *tm, TfTrainState *st, const TfTrainAttn *w, TfTrainAttn *gw, int heads,
		int r, int kv, BlockActs *A, const float *mem, float *dmem, const float *dout, float *dx)
{
	int			d = tm->cfg.d_model;
	const float *dF = block_dF(tm, st, A, r, w->ln_g, gw->ln_g, gw->ln_b, dout);
	const float *in = tm->cfg.pre_norm ? A->xn : A->x;
	const float *kvin = mem ? mem : in;

	tf_linear_bw(r, d, d, st->datt, gw->o_w, gw->o_b, dF, A->att, w->o_w);
	tf_mha_bw(r, kv, d, heads, st->dq, st->dk, st->dv, st->scratch, st->datt, A->p, A->q, A->k, A->v);
	tf_linear_bw(r, d, d, st->din_, gw->q_w, gw->q_b, st->dq, in, w->q_w);
	/*
	 * No gradient for k_proj's bias: it adds q · b to every score of a
	 * query, which the softmax takes away, so its gradient is exactly 0 and
	 * what a computation gives is rounding noise, which Adam would scale up
	 * to full steps.  (The reference does the same: tools/gen_train_fixtures.py.)
	 */
	tf_linear_bw(kv, d, d, st->dkin, gw->k_w, NULL, st->dk, kvin, w->k_w);
	tf_linear_bw(kv, d, d, st->dvin, gw->v_w, gw->v_b, st->dv, kvin, w->v_w);
	if (mem)
	{
		add_to((size_t) kv * d, dmem, st->dkin);
		add_to((size_t) kv * d, dmem, st->dvin);
	}
	else
	{
		add_to((size_t) r * d, st->din_, st->dkin);
		add_to((size_t) r * d, st->din_, st->dvin);
	}
	block_dx(tm, A, r, w->ln_g, gw->ln_g, gw->ln_b, dout, dF, st->din_, dx);
}

static void
ffn_bw(TfTrainModel *tm, TfTrainState *st, const TfTrainLayer *w, TfTrainLayer *gw, int ffn, int r,
	   BlockActs *A, const float *dout, float *dx)
{
	int			d = tm->cfg.d_model;
	const float *dF = block_dF(tm, st, A, r, w->ln_g, gw->ln_g, gw->ln_b, dout);
	const float *in = tm->cfg.pre_norm ? A->xn : A->x;

	tf_linear_bw(r, d, ffn, st->dh, gw->fc2_w, gw->fc2_b, dF, A->a, w->fc2_w);
	tf_activation_bw(train_act(tm->cfg.activation), (size_t) r * ffn, st->dh, st->dh, A->h);
	tf_linear_bw(r, ffn, d, st->din_, gw->fc1_w, gw->fc1_b, st->dh, in, w->fc1_w);
	block_dx(tm, A, r, w->ln_g, gw->ln_g, gw->ln_b, dout, dF, st->din_, dx);
}

/* ------------------------------------------------------------ a pair */

static float
embed_scale(const TfConfig *c)
{
	return c->scale_embedding ? sqrtf((float) c->d_model) : 1.0f;
}

double
tf_train_pair(TfTrainModel *tm, TfTrainState *st, int n, const int *src, int t,
			  const int *labels, int denom, float label_smoothing)
{
	const TfConfig *c = &tm->cfg;
	int			d = c->d_model;
	int			V = c->vocab;
	int			L = c->enc_layers,
				M = c->dec_layers;
	int			counted;
	double		loss;
	float	   *x;

	/* ---- the encoder ---- */
	tf_embedding_fw(n, d, L > 0 ? st->enc[0][0].x : st->enc_top, src, tm->p.src_embed, embed_scale(c),
					tm->enc_pos);
	for (int l = 0; l < L; l++)
	{
		float	   *after_attn = st->enc[l][1].x;
		float	   *after_ffn = l + 1 < L ? st->enc[l + 1][0].x : st->enc_top;

		attn_fw(tm, &tm->p.enc[l].self_attn, c->enc_heads, n, n, &st->enc[l][0], NULL, false,
				after_attn, st->dsum);
		ffn_fw(tm, &tm->p.enc[l], c->enc_ffn, n, &st->enc[l][1], after_ffn, st->dsum);
	}
	if (c->final_norm)
		tf_layer_norm_fw(n, d, st->enc_out, st->enc_mean, st->enc_rstd, st->enc_top,
						 tm->p.enc_norm_g, tm->p.enc_norm_b, c->ln_eps);
	else
		memcpy(st->enc_out, st->enc_top, sizeof(float) * n * d);

	/* ---- the decoder, teacher-forced ---- */
	st->din[0] = c->decoder_start_id;
	for (int i = 1; i < t; i++)
		st->din[i] = labels[i - 1];
	tf_embedding_fw(t, d, M > 0 ? st->dec[0][0].x : st->dec_top, st->din, tm->p.dec_embed, embed_scale(c),
					tm->dec_pos);
	for (int l = 0; l < M; l++)
	{
		float	   *after_ffn = l + 1 < M ? st->dec[l + 1][0].x : st->dec_top;

		attn_fw(tm, &tm->p.dec[l].self_attn, c->dec_heads, t, t, &st->dec[l][0], NULL, true,
				st->dec[l][1].x, st->dsum);
		attn_fw(tm, &tm->p.dec[l].cross_attn, c->dec_heads, t, n, &st->dec[l][1], st->enc_out, false,
				st->dec[l][2].x, st->dsum);
		ffn_fw(tm, &tm->p.dec[l], c->dec_ffn, t, &st->dec[l][2], after_ffn, st->dsum);
	}
	if (c->final_norm)
		tf_layer_norm_fw(t, d, st->dec_out, st->dec_mean, st->dec_rstd, st->dec_top,
						 tm->p.dec_norm_g, tm->p.dec_norm_b, c->ln_eps);
	else
		memcpy(st->dec_out, st->dec_top, sizeof(float) * t * d);
	tf_linear_fw(t, V, d, st->logits, st->dec_out, tm->p.lm_head, tm->logits_bias);

	/* ---- the loss ---- */
	loss = tf_cross_entropy(t, V, st->dlogits, &counted, st->logits, labels, c->pad_id,
							label_smoothing, denom);

	/* ---- backward: the output layer, the decoder ---- */
	x = st->dcur;
	tf_linear_bw(t, V, d, x, tm->g.lm_head, NULL, st->dlogits, st->dec_out, tm->p.lm_head);
	if (c->final_norm)
	{
		tf_layer_norm_bw(t, d, st->dnext, tm->g.dec_norm_g, tm->g.dec_norm_b, st->dcur, st->dec_top,
						 st->dec_mean, st->dec_rstd, tm->p.dec_norm_g);
		memcpy(st->dcur, st->dnext, sizeof(float) * t * d);
	}
	memset(st->denc, 0, sizeof(float) * n * d);
	for (int l = M - 1; l >= 0; l--)
	{
		ffn_bw(tm, st, &tm->p.dec[l], &tm->g.dec[l], c->dec_ffn, t, &st->dec[l][2], st->dcur, st->dnext);
		attn_bw(tm, st, &tm->p.dec[l].cross_attn, &tm->g.dec[l].cross_attn, c->dec_heads, t, n,
				&st->dec[l][1], st->enc_out, st->denc, st->dnext, st->dcur);
		attn_bw(tm, st, &tm->p.dec[l].self_attn, &tm->g.dec[l].self_attn, c->dec_heads, t, t,
				&st->dec[l][0], NULL, NULL, st->dcur, st->dnext);
		memcpy(st->dcur, st->dnext, sizeof(float) * t * d);
	}
	tf_embedding_bw(t, d, tm->g.dec_embed, NULL, st->dcur, st->din, embed_scale(c), c->pad_id);

	/* ---- the encoder ---- */
	if (c->final_norm)
		tf_layer_norm_bw(n, d, st->dcur, tm->g.enc_norm_g, tm->g.enc_norm_b, st->denc, st->enc_top,
						 st->enc_mean, st->enc_rstd, tm->p.enc_norm_g);
	else
		memcpy(st->dcur, st->denc, sizeof(float) * n * d);
	for (int l = L - 1; l >= 0; l--)
	{
		ffn_bw(tm, st, &tm->p.enc[l], &tm->g.enc[l], c->enc_ffn, n, &st->enc[l][1], st->dcur, st->dnext);
		attn_bw(tm, st, &tm->p.enc[l].self_attn, &tm->g.enc[l].self_attn, c->enc_heads, n, n,
				&st->enc[l][0], NULL, NULL, st->dnext, st->dcur);
	}
	tf_embedding_bw(n, d, tm->g.src_embed, NULL, st->dcur, src, embed_scale(c), c->pad_id);
	(void) counted;
	return loss;
}

/* ------------------------------------------------------------ Adam */

void
tf_train_adam(TfTrainModel *tm, float *m, float *v, TfAdam *a, double lr)
{
	a->step++;
	tf_adam_step(tm->nparams, tm->params, m, v, tm->grads, a, lr);
	memset(tm->grads, 0, sizeof(float) * tm->nparams);
}
