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
 * v_proj; the feed-forward block's F is fc2(act(fc1(x))).  Dropout as
 * F.dropout in those modules: after the embeddings, of the attention
 * weights, after the activation, and of each F before its residual.
 */
#include "train_model.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
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
	if (c->positions == TF_POS_LEARNED)
	{
		out->enc_pos = take(b, (size_t) c->max_pos * d);
		out->dec_pos = take(b, (size_t) c->max_pos * d);
	}
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

/* ------------------------------------------------------------ names */

static int
named(TfTrainNamed *out, int k, float *data, size_t numel, const char *name)
{
	if (out)
	{
		snprintf(out[k].name, sizeof(out[k].name), "%s", name);
		out[k].data = data;
		out[k].numel = numel;
	}
	return k + 1;
}

/* model.<stack>.layers.<l>.<part> */
static int
named_in(TfTrainNamed *out, int k, float *data, size_t numel, const char *stack, int l, const char *part)
{
	char		name[sizeof(((TfTrainNamed *) 0)->name)];

	snprintf(name, sizeof(name), "model.%s.layers.%d.%s", stack, l, part);
	return named(out, k, data, numel, name);
}

static int
named_attn(TfTrainNamed *out, int k, const TfTrainAttn *a, int d, const char *stack, int l, const char *attn)
{
	char		part[48];
	static const char *const proj[4] = {"q_proj", "k_proj", "v_proj", "out_proj"};
	float	   *w[4] = {a->q_w, a->k_w, a->v_w, a->o_w};
	float	   *b[4] = {a->q_b, a->k_b, a->v_b, a->o_b};

	for (int i = 0; i < 4; i++)
	{
		snprintf(part, sizeof(part), "%s.%s.weight", attn, proj[i]);
		k = named_in(out, k, w[i], (size_t) d * d, stack, l, part);
		snprintf(part, sizeof(part), "%s.%s.bias", attn, proj[i]);
		k = named_in(out, k, b[i], d, stack, l, part);
	}
	snprintf(part, sizeof(part), "%s_layer_norm.weight", attn);
	k = named_in(out, k, a->ln_g, d, stack, l, part);
	snprintf(part, sizeof(part), "%s_layer_norm.bias", attn);
	return named_in(out, k, a->ln_b, d, stack, l, part);
}

static int
named_ffn(TfTrainNamed *out, int k, const TfTrainLayer *L, int d, int ffn, const char *stack, int l)
{
	k = named_in(out, k, L->fc1_w, (size_t) ffn * d, stack, l, "fc1.weight");
	k = named_in(out, k, L->fc1_b, ffn, stack, l, "fc1.bias");
	k = named_in(out, k, L->fc2_w, (size_t) d * ffn, stack, l, "fc2.weight");
	k = named_in(out, k, L->fc2_b, d, stack, l, "fc2.bias");
	k = named_in(out, k, L->ln_g, d, stack, l, "final_layer_norm.weight");
	return named_in(out, k, L->ln_b, d, stack, l, "final_layer_norm.bias");
}

/* the names in bind_all's order (out NULL: only count them) */
static int
all_names(const TfConfig *c, bool shared, bool tied, const TfTrainParams *p, TfTrainNamed *out)
{
	int			d = c->d_model;
	int			k = 0;

	if (shared)
		k = named(out, k, p->src_embed, (size_t) c->src_vocab * d, "model.shared.weight");
	else
	{
		k = named(out, k, p->src_embed, (size_t) c->src_vocab * d, "model.encoder.embed_tokens.weight");
		k = named(out, k, p->dec_embed, (size_t) c->vocab * d, "model.decoder.embed_tokens.weight");
	}
	if (!tied)
		k = named(out, k, p->lm_head, (size_t) c->vocab * d, "lm_head.weight");
	if (c->positions == TF_POS_LEARNED)
	{
		k = named(out, k, p->enc_pos, (size_t) c->max_pos * d, "model.encoder.embed_positions.weight");
		k = named(out, k, p->dec_pos, (size_t) c->max_pos * d, "model.decoder.embed_positions.weight");
	}
	for (int l = 0; l < c->enc_layers; l++)
	{
		k = named_attn(out, k, &p->enc[l].self_attn, d, "encoder", l, "self_attn");
		k = named_ffn(out, k, &p->enc[l], d, c->enc_ffn, "encoder", l);
	}
	for (int l = 0; l < c->dec_layers; l++)
	{
		k = named_attn(out, k, &p->dec[l].self_attn, d, "decoder", l, "self_attn");
		k = named_attn(out, k, &p->dec[l].cross_attn, d, "decoder", l, "encoder_attn");
		k = named_ffn(out, k, &p->dec[l], d, c->dec_ffn, "decoder", l);
	}
	if (c->final_norm)
	{
		k = named(out, k, p->enc_norm_g, d, "model.encoder.layer_norm.weight");
		k = named(out, k, p->enc_norm_b, d, "model.encoder.layer_norm.bias");
		k = named(out, k, p->dec_norm_g, d, "model.decoder.layer_norm.weight");
		k = named(out, k, p->dec_norm_b, d, "model.decoder.layer_norm.bias");
	}
	return k;
}

int
tf_train_name_count(const TfConfig *c, bool shared, bool tied)
{
	TfTrainParams p;

	memset(&p, 0, sizeof(p));
	return all_names(c, shared, tied, &p, NULL);
}

int
tf_train_names(const TfConfig *c, bool shared, bool tied, const TfTrainParams *p, TfTrainNamed *out)
{
	return all_names(c, shared, tied, p, out);
}

/* ------------------------------------------------------------ the state */

/* target rows through the output layer at a time: products of full size, logits of bounded size */
#define OUT_ROWS 64

/* What a block keeps for its backward pass (its rows; keys of every pair). */
typedef struct BlockActs
{
	float	   *x;				/* (rows, d) the block's input */
	float	   *xn;				/* (rows, d) pre-norm: LN(x), F's input */
	float	   *mean;			/* (rows) the LayerNorm's: of x (pre), of x + F (post) */
	float	   *rstd;			/* (rows) */
	float	   *sum;			/* (rows, d) post-norm: x + F, the LayerNorm's input */
	float	   *q;				/* (rows, d) attention */
	float	   *k;				/* (key rows, d) */
	float	   *v;				/* (key rows, d) */
	float	   *p;				/* pair i's weights (heads, its rows, its keys) at heads · row0 · longest */
	float	   *att;			/* (rows, d) before out_proj */
	float	   *h;				/* (rows, ffn) feed-forward: fc1's output */
	float	   *a;				/* (rows, ffn) activated (and dropped out) */
	int			site_p;			/* its dropout sites: of the attention weights, */
	int			site_a;			/* of the activation, */
	int			site_f;			/* of F */
} BlockActs;

/* The pairs of a batch as row ranges: source rows so[i] .. so[i] + n[i], target rows to[i] .. */
typedef struct Pairs
{
	int			count;
	const int  *n;
	const int  *t;
	int		   *so;
	int		   *to;
} Pairs;

struct TfTrainState
{
	TfTrainLimits lim;
	BlockActs	enc[TF_TRAIN_MAX_LAYERS][2];	/* self-attention, feed-forward */
	BlockActs	dec[TF_TRAIN_MAX_LAYERS][3];	/* self, cross, feed-forward */
	float	   *enc_top;		/* (N, d) the last encoder block's output */
	float	   *enc_out;		/* (N, d) the encoder's output (after its final norm) */
	float	   *enc_mean;		/* (N) */
	float	   *enc_rstd;
	float	   *dec_top;		/* (T, d) */
	float	   *dec_out;		/* (T, d) */
	float	   *dec_mean;		/* (T) */
	float	   *dec_rstd;
	float	   *logits;			/* (OUT_ROWS, vocab): a part of the target rows at a time */
	float	   *dlogits;		/* (OUT_ROWS, vocab) */
	int		   *src;			/* (N) the batch's source ids */
	int		   *din;			/* (T) the decoder's inputs: per pair start, labels[0 .. t-2] */
	int		   *labels;			/* (T) */
	int		   *so;				/* (sentences) */
	int		   *to;				/* (sentences) */
	/* backward work, for R = max(N, T) rows */
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
	float	   *scratch;		/* (2, longest, longest) */
	float	   *dfm;			/* (R, d) dF through F's dropout */
	unsigned char *keep;		/* a dropout mask: (R, max(d, ffn)) or (heads, longest, longest) */
	float	   *denc;			/* (N, d) the encoder output's gradient, from every cross-attention */
	int			sites;			/* dropout sites numbered so far in this batch's forward pass */
	int			site_enc;		/* the embeddings' */
	int			site_dec;
};

static void
take_block(Bump *b, const TfConfig *c, int rows, int keys, int longest, int heads, int ffn, BlockActs *a)
{
	int			d = c->d_model;

	memset(a, 0, sizeof(*a));
	a->x = take(b, (size_t) rows * d);
	a->xn = take(b, (size_t) rows * d);
	a->mean = take(b, rows);
	a->rstd = take(b, rows);
	a->sum = take(b, (size_t) rows * d);
	if (ffn > 0)
	{
		a->h = take(b, (size_t) rows * ffn);
		a->a = take(b, (size_t) rows * ffn);
	}
	else
	{
		a->q = take(b, (size_t) rows * d);
		a->k = take(b, (size_t) keys * d);
		a->v = take(b, (size_t) keys * d);
		a->p = take(b, (size_t) heads * rows * longest);
		a->att = take(b, (size_t) rows * d);
	}
}

static size_t
layout(const TfTrainModel *tm, const TfTrainLimits *lim, Bump *b, TfTrainState *st)
{
	const TfConfig *c = &tm->cfg;
	int			d = c->d_model;
	int			N = lim->src_tokens,
				T = lim->tgt_tokens,
				Lg = lim->longest;
	int			R = N > T ? N : T;
	int			ffn = c->enc_ffn > c->dec_ffn ? c->enc_ffn : c->dec_ffn;

	st->lim = *lim;
	for (int l = 0; l < c->enc_layers; l++)
	{
		take_block(b, c, N, N, Lg, c->enc_heads, 0, &st->enc[l][0]);
		take_block(b, c, N, N, Lg, 0, c->enc_ffn, &st->enc[l][1]);
	}
	for (int l = 0; l < c->dec_layers; l++)
	{
		take_block(b, c, T, T, Lg, c->dec_heads, 0, &st->dec[l][0]);
		take_block(b, c, T, N, Lg, c->dec_heads, 0, &st->dec[l][1]);
		take_block(b, c, T, T, Lg, 0, c->dec_ffn, &st->dec[l][2]);
	}
	st->enc_top = take(b, (size_t) N * d);
	st->enc_out = take(b, (size_t) N * d);
	st->enc_mean = take(b, N);
	st->enc_rstd = take(b, N);
	st->dec_top = take(b, (size_t) T * d);
	st->dec_out = take(b, (size_t) T * d);
	st->dec_mean = take(b, T);
	st->dec_rstd = take(b, T);
	st->logits = take(b, (size_t) (T < OUT_ROWS ? T : OUT_ROWS) * c->vocab);
	st->dlogits = take(b, (size_t) (T < OUT_ROWS ? T : OUT_ROWS) * c->vocab);
	st->src = (int *) take(b, N);
	st->din = (int *) take(b, T);
	st->labels = (int *) take(b, T);
	st->so = (int *) take(b, lim->sentences);
	st->to = (int *) take(b, lim->sentences);
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
	st->scratch = take(b, (size_t) 2 * Lg * Lg);
	st->dfm = take(b, (size_t) R * d);
	{
		int			heads = c->enc_heads > c->dec_heads ? c->enc_heads : c->dec_heads;
		size_t		hidden = (size_t) R * (ffn > d ? ffn : d);
		size_t		weights = (size_t) heads * Lg * Lg;

		st->keep = (unsigned char *) take(b, ((hidden > weights ? hidden : weights) + 3) / 4);
	}
	st->denc = take(b, (size_t) N * d);
	return b->used;
}

size_t
tf_train_state_size(const TfTrainModel *tm, const TfTrainLimits *lim)
{
	Bump		b = {NULL, (sizeof(TfTrainState) + 15) & ~(size_t) 15};
	TfTrainState st;

	return layout(tm, lim, &b, &st);
}

TfTrainState *
tf_train_state_init(const TfTrainModel *tm, const TfTrainLimits *lim, void *buf)
{
	TfTrainState *st = buf;
	Bump		b = {buf, (sizeof(TfTrainState) + 15) & ~(size_t) 15};

	layout(tm, lim, &b, st);
	return st;
}

/* ------------------------------------------------------------ dropout */

static unsigned long long
splitmix64(unsigned long long z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

bool
tf_dropout_keep(unsigned long long seed, long step, int site, unsigned long long idx, float p)
{
	unsigned long long stream = ((unsigned long long) step << 20) | (unsigned) site;
	unsigned long long z = splitmix64(seed * 0x9E3779B97F4A7C15ULL + stream * 0xD1B54A32D192ED03ULL + idx);

	return (double) (z >> 40) >= (double) p * 16777216.0;
}

static float
drop_scale(float p)
{
	return (float) (1.0 / (1.0 - (double) p));
}

/*
 * x (the rows of one side of the batch, cols wide) times site's mask and
 * scale: the forward pass, and the backward pass on the gradient.
 */
static void
drop_rows(const TfTrainModel *tm, const Pairs *pp, bool tgt, int cols, int site, float p, float *x)
{
	float		scale;

	if (p <= 0.0f)
		return;
	scale = drop_scale(p);
	for (int b = 0; b < pp->count; b++)
	{
		int			r0 = tgt ? pp->to[b] : pp->so[b],
					len = tgt ? pp->t[b] : pp->n[b];

		for (int j = 0; j < len; j++)
		{
			float	   *row = x + (size_t) (r0 + j) * cols;

			for (int k = 0; k < cols; k++)
			{
				unsigned long long idx = (unsigned long long) b << 32 | (unsigned long long) j << 16 | k;

				row[k] = tf_dropout_keep(tm->drop.seed, tm->drop.step, site, idx, p) ? row[k] * scale : 0.0f;
			}
		}
	}
}

/* pair b's mask of attention weights (heads, qn, kn), or NULL without dropout */
static const unsigned char *
weights_mask(const TfTrainModel *tm, TfTrainState *st, int b, int heads, int qn, int kn, int site)
{
	float		p = tm->drop.attention;

	if (p <= 0.0f)
		return NULL;
	for (int h = 0; h < heads; h++)
		for (int i = 0; i < qn; i++)
			for (int j = 0; j < kn; j++)
			{
				unsigned long long idx = (unsigned long long) (b * heads + h) << 32 |
					(unsigned long long) i << 16 | j;

				st->keep[((size_t) h * qn + i) * kn + j] = tf_dropout_keep(tm->drop.seed, tm->drop.step, site, idx, p);
			}
	return st->keep;
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

/*
 * An attention block on A->x (rows r); mem: the encoder's output (kv rows)
 * for cross-attention.  Pair i's queries are rows qo[i] .. + qn[i], its
 * keys ko[i] .. + kn[i].
 */
static void
attn_fw(const TfTrainModel *tm, TfTrainState *st, const TfTrainAttn *w, int heads, int r, int kv,
		const Pairs *pp, bool cross, BlockActs *A, const float *mem, bool causal, float *out, float *f)
{
	int			d = tm->cfg.d_model;
	const float *in = block_in(tm, A, r, w->ln_g, w->ln_b);
	const float *kvin = mem ? mem : in;

	A->site_p = st->sites++;
	A->site_f = st->sites++;
	tf_linear_fw(r, d, d, A->q, in, w->q_w, w->q_b);
	tf_linear_fw(kv, d, d, A->k, kvin, w->k_w, w->k_b);
	tf_linear_fw(kv, d, d, A->v, kvin, w->v_w, w->v_b);
	for (int i = 0; i < pp->count; i++)
	{
		int			q0 = cross || causal ? pp->to[i] : pp->so[i],
					qn = cross || causal ? pp->t[i] : pp->n[i],
					k0 = cross ? pp->so[i] : q0,
					kn = cross ? pp->n[i] : qn;
		const unsigned char *keep = weights_mask(tm, st, i, heads, qn, kn, A->site_p);

		tf_mha_fw(qn, kn, d, heads, A->att + (size_t) q0 * d, A->p + (size_t) heads * q0 * st->lim.longest,
				  st->scratch, A->q + (size_t) q0 * d, A->k + (size_t) k0 * d, A->v + (size_t) k0 * d, causal,
				  NULL, keep, drop_scale(tm->drop.attention));
	}
	tf_linear_fw(r, d, d, f, A->att, w->o_w, w->o_b);
	drop_rows(tm, pp, cross || causal, d, A->site_f, tm->drop.hidden, f);
	block_out(tm, A, r, w->ln_g, w->ln_b, f, out);
}

static void
ffn_fw(const TfTrainModel *tm, TfTrainState *st, const TfTrainLayer *w, int ffn, int r, const Pairs *pp,
	   bool tgt, BlockActs *A, float *out, float *f)
{
	int			d = tm->cfg.d_model;
	const float *in = block_in(tm, A, r, w->ln_g, w->ln_b);

	A->site_a = st->sites++;
	A->site_f = st->sites++;
	tf_linear_fw(r, ffn, d, A->h, in, w->fc1_w, w->fc1_b);
	tf_activation_fw(train_act(tm->cfg.activation), (size_t) r * ffn, A->a, A->h);
	drop_rows(tm, pp, tgt, ffn, A->site_a, tm->drop.activation, A->a);
	tf_linear_fw(r, d, ffn, f, A->a, w->fc2_w, w->fc2_b);
	drop_rows(tm, pp, tgt, d, A->site_f, tm->drop.hidden, f);
	block_out(tm, A, r, w->ln_g, w->ln_b, f, out);
}

/* dF through F's dropout, into st->dfm (dF itself stays: the residual path's) */
static const float *
drop_dF(const TfTrainModel *tm, TfTrainState *st, const Pairs *pp, bool tgt, int r, int site, const float *dF)
{
	if (tm->drop.hidden <= 0.0f)
		return dF;
	memcpy(st->dfm, dF, sizeof(float) * r * tm->cfg.d_model);
	drop_rows(tm, pp, tgt, tm->cfg.d_model, site, tm->drop.hidden, st->dfm);
	return st->dfm;
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
		int r, int kv, const Pairs *pp, bool cross, bool causal, BlockActs *A, const float *mem,
		float *dmem, const float *dout, float *dx)
{
	int			d = tm->cfg.d_model;
	const float *dF = block_dF(tm, st, A, r, w->ln_g, gw->ln_g, gw->ln_b, dout);
	const float *dFm = drop_dF(tm, st, pp, cross || causal, r, A->site_f, dF);
	const float *in = tm->cfg.pre_norm ? A->xn : A->x;
	const float *kvin = mem ? mem : in;

	tf_linear_bw(r, d, d, st->datt, gw->o_w, gw->o_b, dFm, A->att, w->o_w);
	for (int i = 0; i < pp->count; i++)
	{
		int			q0 = cross || causal ? pp->to[i] : pp->so[i],
					qn = cross || causal ? pp->t[i] : pp->n[i],
					k0 = cross ? pp->so[i] : q0,
					kn = cross ? pp->n[i] : qn;
		const unsigned char *keep = weights_mask(tm, st, i, heads, qn, kn, A->site_p);

		tf_mha_bw(qn, kn, d, heads, st->dq + (size_t) q0 * d, st->dk + (size_t) k0 * d,
				  st->dv + (size_t) k0 * d, st->scratch, st->datt + (size_t) q0 * d,
				  A->p + (size_t) heads * q0 * st->lim.longest,
				  A->q + (size_t) q0 * d, A->k + (size_t) k0 * d, A->v + (size_t) k0 * d,
				  keep, drop_scale(tm->drop.attention));
	}
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
	   const Pairs *pp, bool tgt, BlockActs *A, const float *dout, float *dx)
{
	int			d = tm->cfg.d_model;
	const float *dF = block_dF(tm, st, A, r, w->ln_g, gw->ln_g, gw->ln_b, dout);
	const float *dFm = drop_dF(tm, st, pp, tgt, r, A->site_f, dF);
	const float *in = tm->cfg.pre_norm ? A->xn : A->x;

	tf_linear_bw(r, d, ffn, st->dh, gw->fc2_w, gw->fc2_b, dFm, A->a, w->fc2_w);
	drop_rows(tm, pp, tgt, ffn, A->site_a, tm->drop.activation, st->dh);
	tf_activation_bw(train_act(tm->cfg.activation), (size_t) r * ffn, st->dh, st->dh, A->h);
	tf_linear_bw(r, ffn, d, st->din_, gw->fc1_w, gw->fc1_b, st->dh, in, w->fc1_w);
	block_dx(tm, A, r, w->ln_g, gw->ln_g, gw->ln_b, dout, dF, st->din_, dx);
}

/* ------------------------------------------------------------ a batch */

/* between blocks: a long batch honours a cancel */
static void
interrupt_point(const TfTrainModel *tm)
{
	if (tm->interrupt)
		tm->interrupt();
}

static float
embed_scale(const TfConfig *c)
{
	return c->scale_embedding ? sqrtf((float) c->d_model) : 1.0f;
}

/*
 * The embeddings' backward pass pair by pair (the batch is packed): a
 * pair's row j is its position j, for learned positions' gradient (dpos
 * NULL: fixed ones).
 */
static void
embeddings_bw(int count, const int *len, const int *row0, int d, float *de, float *dpos,
			  const float *dout, const int *ids, float scale, int padding_idx)
{
	for (int i = 0; i < count; i++)
		tf_embedding_bw(len[i], d, de, dpos, dout + (size_t) row0[i] * d, ids + row0[i], scale, padding_idx);
}

double
tf_train_batch(TfTrainModel *tm, TfTrainState *st, int nsent, const int *const *src,
			   const int *n, const int *const *labels, const int *t, float label_smoothing)
{
	const TfConfig *c = &tm->cfg;
	int			d = c->d_model;
	int			V = c->vocab;
	int			L = c->enc_layers,
				M = c->dec_layers;
	int			N = 0,
				T = 0,
				count = 0;
	double		loss = 0.0;
	Pairs		pp = {nsent, n, t, st->so, st->to};
	float	   *x0;

	/* ---- the batch as rows ---- */
	for (int i = 0; i < nsent; i++)
	{
		st->so[i] = N;
		st->to[i] = T;
		memcpy(st->src + N, src[i], sizeof(int) * n[i]);
		memcpy(st->labels + T, labels[i], sizeof(int) * t[i]);
		st->din[T] = c->decoder_start_id;
		for (int j = 1; j < t[i]; j++)
			st->din[T + j] = labels[i][j - 1];
		for (int j = 0; j < t[i]; j++)
			count += labels[i][j] != c->pad_id;
		N += n[i];
		T += t[i];
	}

	/* ---- the encoder ---- */
	st->sites = 0;
	st->site_enc = st->sites++;
	x0 = L > 0 ? st->enc[0][0].x : st->enc_top;
	for (int i = 0; i < nsent; i++)
		tf_embedding_fw(n[i], d, x0 + (size_t) st->so[i] * d, src[i], tm->p.src_embed, embed_scale(c),
						tm->p.enc_pos ? tm->p.enc_pos : tm->enc_pos);
	drop_rows(tm, &pp, false, d, st->site_enc, tm->drop.hidden, x0);
	for (int l = 0; l < L; l++)
	{
		float	   *after_ffn = l + 1 < L ? st->enc[l + 1][0].x : st->enc_top;

		interrupt_point(tm);
		attn_fw(tm, st, &tm->p.enc[l].self_attn, c->enc_heads, N, N, &pp, false, &st->enc[l][0], NULL,
				false, st->enc[l][1].x, st->dsum);
		ffn_fw(tm, st, &tm->p.enc[l], c->enc_ffn, N, &pp, false, &st->enc[l][1], after_ffn, st->dsum);
	}
	if (c->final_norm)
		tf_layer_norm_fw(N, d, st->enc_out, st->enc_mean, st->enc_rstd, st->enc_top,
						 tm->p.enc_norm_g, tm->p.enc_norm_b, c->ln_eps);
	else
		memcpy(st->enc_out, st->enc_top, sizeof(float) * N * d);

	/* ---- the decoder, teacher-forced ---- */
	st->site_dec = st->sites++;
	x0 = M > 0 ? st->dec[0][0].x : st->dec_top;
	for (int i = 0; i < nsent; i++)
		tf_embedding_fw(t[i], d, x0 + (size_t) st->to[i] * d, st->din + st->to[i], tm->p.dec_embed,
						embed_scale(c), tm->p.dec_pos ? tm->p.dec_pos : tm->dec_pos);
	drop_rows(tm, &pp, true, d, st->site_dec, tm->drop.hidden, x0);
	for (int l = 0; l < M; l++)
	{
		float	   *after_ffn = l + 1 < M ? st->dec[l + 1][0].x : st->dec_top;

		interrupt_point(tm);
		attn_fw(tm, st, &tm->p.dec[l].self_attn, c->dec_heads, T, T, &pp, false, &st->dec[l][0], NULL,
				true, st->dec[l][1].x, st->dsum);
		attn_fw(tm, st, &tm->p.dec[l].cross_attn, c->dec_heads, T, N, &pp, true, &st->dec[l][1],
				st->enc_out, false, st->dec[l][2].x, st->dsum);
		ffn_fw(tm, st, &tm->p.dec[l], c->dec_ffn, T, &pp, true, &st->dec[l][2], after_ffn, st->dsum);
	}
	if (c->final_norm)
		tf_layer_norm_fw(T, d, st->dec_out, st->dec_mean, st->dec_rstd, st->dec_top,
						 tm->p.dec_norm_g, tm->p.dec_norm_b, c->ln_eps);
	else
		memcpy(st->dec_out, st->dec_top, sizeof(float) * T * d);

	/*
	 * ---- the output layer and the loss, OUT_ROWS rows at a time ----
	 * (its logits are the largest activations: (rows, vocab) for a part only)
	 */
	for (int r0 = 0; r0 < T; r0 += OUT_ROWS)
	{
		int			rows = T - r0 < OUT_ROWS ? T - r0 : OUT_ROWS;
		const float *h = st->dec_out + (size_t) r0 * d;
		int			counted;

		interrupt_point(tm);
		tf_linear_fw(rows, V, d, st->logits, h, tm->p.lm_head, tm->logits_bias);
		loss += tf_cross_entropy(rows, V, st->dlogits, &counted, st->logits, st->labels + r0, c->pad_id,
								 label_smoothing, count > 0 ? count : 1);
		tf_linear_bw(rows, V, d, st->dcur + (size_t) r0 * d, tm->g.lm_head, NULL, st->dlogits, h,
					 tm->p.lm_head);
	}

	/* ---- backward: the decoder ---- */
	if (c->final_norm)
	{
		tf_layer_norm_bw(T, d, st->dnext, tm->g.dec_norm_g, tm->g.dec_norm_b, st->dcur, st->dec_top,
						 st->dec_mean, st->dec_rstd, tm->p.dec_norm_g);
		memcpy(st->dcur, st->dnext, sizeof(float) * T * d);
	}
	memset(st->denc, 0, sizeof(float) * N * d);
	for (int l = M - 1; l >= 0; l--)
	{
		interrupt_point(tm);
		ffn_bw(tm, st, &tm->p.dec[l], &tm->g.dec[l], c->dec_ffn, T, &pp, true, &st->dec[l][2], st->dcur,
			   st->dnext);
		attn_bw(tm, st, &tm->p.dec[l].cross_attn, &tm->g.dec[l].cross_attn, c->dec_heads, T, N, &pp, true,
				false, &st->dec[l][1], st->enc_out, st->denc, st->dnext, st->dcur);
		attn_bw(tm, st, &tm->p.dec[l].self_attn, &tm->g.dec[l].self_attn, c->dec_heads, T, T, &pp, false,
				true, &st->dec[l][0], NULL, NULL, st->dcur, st->dnext);
		memcpy(st->dcur, st->dnext, sizeof(float) * T * d);
	}
	drop_rows(tm, &pp, true, d, st->site_dec, tm->drop.hidden, st->dcur);
	embeddings_bw(pp.count, pp.t, pp.to, d, tm->g.dec_embed, tm->g.dec_pos, st->dcur, st->din, embed_scale(c),
				  c->pad_id);

	/* ---- the encoder ---- */
	if (c->final_norm)
		tf_layer_norm_bw(N, d, st->dcur, tm->g.enc_norm_g, tm->g.enc_norm_b, st->denc, st->enc_top,
						 st->enc_mean, st->enc_rstd, tm->p.enc_norm_g);
	else
		memcpy(st->dcur, st->denc, sizeof(float) * N * d);
	for (int l = L - 1; l >= 0; l--)
	{
		interrupt_point(tm);
		ffn_bw(tm, st, &tm->p.enc[l], &tm->g.enc[l], c->enc_ffn, N, &pp, false, &st->enc[l][1], st->dcur,
			   st->dnext);
		attn_bw(tm, st, &tm->p.enc[l].self_attn, &tm->g.enc[l].self_attn, c->enc_heads, N, N, &pp, false,
				false, &st->enc[l][0], NULL, NULL, st->dnext, st->dcur);
	}
	drop_rows(tm, &pp, false, d, st->site_enc, tm->drop.hidden, st->dcur);
	embeddings_bw(pp.count, pp.n, pp.so, d, tm->g.src_embed, tm->g.enc_pos, st->dcur, st->src, embed_scale(c),
				  c->pad_id);
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
