/*
 * train_layers.h
 *		The Transformer's layers for training: each forward pass beside its
 *		backward pass, in fp32, as llm.c keeps them.  The forward passes
 *		keep what their backward passes need (a LayerNorm's mean and 1/σ, an
 *		attention's weights); the backward passes add into the gradients of
 *		the parameters (dw += ...) and write the gradient of their input
 *		(dx = ...), so that a parameter used twice (tied embeddings)
 *		gathers both.  Then the loss (torch.nn.CrossEntropyLoss with label
 *		smoothing and an ignored index), torch.optim.Adam's step and the
 *		paper's learning rate.
 *
 * Weights here are plain row-major fp32 (the master copy), not packed:
 * a Linear's w is (out, in) as torch.nn.Linear keeps it.  Arguments go
 * sizes first, then outputs, then inputs (ggml).  Checked against
 * torch.autograd in test/unit/test_core.c (test/fixtures/grad_ops.txt,
 * tools/gen_grad_fixtures.py).  No postgres.h.
 */
#ifndef TRAIN_LAYERS_H
#define TRAIN_LAYERS_H

#include <stdbool.h>
#include <stddef.h>

/* ---- Linear: y (n, out) = x (n, in) · wᵀ + b ---- */

void		tf_linear_fw(int n, int out, int in, float *y, const float *x, const float *w, const float *b);

/*
 * dx (n, in) = dy · w (dx may be NULL: the input needs no gradient);
 * dw (out, in) += dyᵀ · x; db (out) += Σ over rows of dy (db may be NULL: no bias).
 */
void		tf_linear_bw(int n, int out, int in, float *dx, float *dw, float *db,
						 const float *dy, const float *x, const float *w);

/* ---- LayerNorm over the last dimension d, with γ and β ---- */

/* y (n, d); mean (n) and rstd (n) = 1 / sqrt(var + eps), kept for the backward pass */
void		tf_layer_norm_fw(int n, int d, float *y, float *mean, float *rstd,
							 const float *x, const float *g, const float *b, float eps);

/* dx (n, d) = ...; dg (d) += Σ dy · x̂; db (d) += Σ dy */
void		tf_layer_norm_bw(int n, int d, float *dx, float *dg, float *db,
							 const float *dy, const float *x, const float *mean, const float *rstd,
							 const float *g);

/* ---- activations, elementwise: relu, gelu (erf form, torch's default), silu ---- */

typedef enum TfTrainAct
{
	TF_TRAIN_RELU,
	TF_TRAIN_GELU,
	TF_TRAIN_SILU
} TfTrainAct;

void		tf_activation_fw(TfTrainAct act, size_t n, float *y, const float *x);

/* dx = dy · f'(x) (dx may be dy) */
void		tf_activation_bw(TfTrainAct act, size_t n, float *dx, const float *dy, const float *x);

/* ---- multi-head scaled dot-product attention ---- */

/*
 * q (n, d), k and v (m, d), d = heads · dk: out (n, d) = for each head h,
 * softmax(q_h k_hᵀ / √dk, masked) v_h; p (heads, n, m) keeps the weights.
 * causal: key j hidden from query i when j > i; key_pad (m, or NULL): keys
 * hidden from every query.  A query with every key hidden gets weights 0.
 * Dropout of the weights (attention_dropout): keep (heads, n, m), 1 where
 * a weight is kept, and scale = 1 / (1 - p); p keeps them before it.
 * keep NULL: none.  scratch: n · m floats when keep is given.
 */
void		tf_mha_fw(int n, int m, int d, int heads, float *out, float *p, float *scratch,
					  const float *q, const float *k, const float *v,
					  bool causal, const unsigned char *key_pad, const unsigned char *keep, float scale);

/*
 * dq (n, d), dk and dv (m, d) from dout (n, d): written, not added.
 * scratch: 2 · n · m floats; keep and scale as the forward pass had them.
 */
void		tf_mha_bw(int n, int m, int d, int heads, float *dq, float *dk, float *dv, float *scratch,
					  const float *dout, const float *p, const float *q, const float *k, const float *v,
					  const unsigned char *keep, float scale);

/* ---- embeddings: out[i] = e[ids[i]] · scale + pos[i] ---- */

/* pos (n, d) or NULL: the positions' rows, already chosen for each token */
void		tf_embedding_fw(int n, int d, float *out, const int *ids, const float *e, float scale,
							const float *pos);

/*
 * de (vocab, d) += scale · dout at the rows of ids, except at padding_idx
 * (nn.Embedding's: that row gets nothing from a lookup; -1: none); dpos
 * (n, d) (or NULL: fixed positions) += dout.
 */
void		tf_embedding_bw(int n, int d, float *de, float *dpos, const float *dout, const int *ids,
							float scale, int padding_idx);

/* ---- the loss ---- */

/*
 * torch.nn.CrossEntropyLoss(label_smoothing = eps, ignore_index = ignore,
 * reduction = 'mean') over n rows of logits (n, vocab) and their targets:
 * per row, -(1 - eps) · log p[target] - eps / vocab · Σ_j log p[j], averaged
 * over the rows whose target is not ignore.  dlogits (n, vocab) gets its
 * gradient (0 on ignored rows); *counted the rows counted.  Returns the
 * loss (0 when no row counts).  denom > 0 divides by denom instead of the
 * rows counted: a batch's mean taken one sentence at a time.
 */
double		tf_cross_entropy(int n, int vocab, float *dlogits, int *counted,
							 const float *logits, const int *targets, int ignore, float eps,
							 int denom);

/* ---- the optimizer ---- */

typedef struct TfAdam
{
	double		beta1;			/* Python floats, as torch keeps them */
	double		beta2;
	double		eps;
	long		step;			/* steps taken: 1 after the first */
} TfAdam;

/*
 * One step of torch.optim.Adam (no weight decay, no amsgrad) on n
 * parameters: m and v are its exp_avg and exp_avg_sq; a->step is advanced
 * by the caller once per step of all parameters, before the first call.
 */
void		tf_adam_step(size_t n, float *param, float *m, float *v, const float *grad,
						 const TfAdam *a, double lr);

/* The paper's rate: d^-0.5 · min(step^-0.5, step · warmup^-1.5), step from 1. */
double		tf_noam_rate(int d_model, long step, long warmup);

/* A given rate after a linear warm-up: rate · min(1, step / warmup); warmup 0: none. */
double		tf_warmup_rate(double rate, long step, long warmup);

#endif							/* TRAIN_LAYERS_H */
