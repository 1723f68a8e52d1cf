/*
 * train_model.h
 *		Training the encoder-decoder (Marian / M2M100 / NLLB layouts) with
 *		teacher forcing: the forward pass of a sentence pair keeping its
 *		activations, the backward pass into the gradients, and Adam over
 *		all parameters.  After llm.c: the parameters are one fp32 array
 *		(the master weights) with a struct of pointers into it, the
 *		gradients and Adam's two moments are arrays of the same layout, and
 *		the activations live in a state allocated once for the longest pair.
 *
 * A batch is packed: its pairs' tokens are the rows of every product, and
 * attention runs pair by pair, which computes what a padded batch does
 * (padding is masked out of every sum) without the padding.  No
 * postgres.h.
 */
#ifndef TRAIN_MODEL_H
#define TRAIN_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "model.h"				/* TfConfig */
#include "train_layers.h"

typedef struct TfTrainAttn
{
	float	   *q_w;			/* (d, d) */
	float	   *q_b;			/* (d) */
	float	   *k_w;			/* (d, d) */
	float	   *k_b;			/* (d) */
	float	   *v_w;			/* (d, d) */
	float	   *v_b;			/* (d) */
	float	   *o_w;			/* (d, d) */
	float	   *o_b;			/* (d) */
	float	   *ln_g;			/* (d) this block's LayerNorm */
	float	   *ln_b;			/* (d) */
} TfTrainAttn;

typedef struct TfTrainLayer
{
	TfTrainAttn self_attn;
	TfTrainAttn cross_attn;		/* decoder layers only */
	float	   *fc1_w;			/* (ffn, d) */
	float	   *fc1_b;			/* (ffn) */
	float	   *fc2_w;			/* (d, ffn) */
	float	   *fc2_b;			/* (d) */
	float	   *ln_g;			/* (d) final_layer_norm */
	float	   *ln_b;			/* (d) */
} TfTrainLayer;

/*
 * The trained parameters, in this order in the array (tf_train_bind):
 * src_embed, then dec_embed unless shared, then lm_head unless tied, then
 * the encoder's and the decoder's positions if they are learned; each
 * encoder layer (self_attn q, k, v, o with biases, its norm, fc1, fc2,
 * final norm); each decoder layer (self_attn, cross_attn, each with its
 * norm, fc1, fc2, final norm); then the final norms if config.final_norm.
 */
#define TF_TRAIN_MAX_LAYERS 64

typedef struct TfTrainParams
{
	float	   *src_embed;		/* (src_vocab, d) */
	float	   *dec_embed;		/* (vocab, d): src_embed when shared */
	float	   *lm_head;		/* (vocab, d): dec_embed when tied */
	float	   *enc_pos;		/* (max_pos, d) learned positions (config.positions TF_POS_LEARNED), else NULL */
	float	   *dec_pos;		/* (max_pos, d) */
	TfTrainLayer enc[TF_TRAIN_MAX_LAYERS];
	TfTrainLayer dec[TF_TRAIN_MAX_LAYERS];
	float	   *enc_norm_g;		/* (d), if config.final_norm */
	float	   *enc_norm_b;
	float	   *dec_norm_g;
	float	   *dec_norm_b;
} TfTrainParams;

/*
 * Dropout (nn.Dropout's: a kept value times 1 / (1 - p)): after the
 * embeddings and every block's F (hidden), of the attention weights
 * (attention), after the feed-forward's activation (activation).  Which
 * values are kept is a function of (seed, step, the site's number in the
 * forward pass, the value's place in its pair), tf_dropout_keep, so the
 * backward pass regenerates the forward's masks and a reference can make
 * the same ones (tools/gen_train_fixtures.py).
 */
typedef struct TfTrainDropout
{
	float		hidden;
	float		attention;
	float		activation;
	unsigned long long seed;
	long		step;			/* the batch's step, from 1: set before tf_train_batch */
} TfTrainDropout;

/*
 * Whether the value at idx of dropout site `site` in step `step` is kept:
 * splitmix64(seed · φ + (step << 20 | site) · c + idx)'s top 24 bits, as
 * a fraction, >= p.  idx: for a hidden value of pair b at position j,
 * column k, b << 32 | j << 16 | k; for an attention weight of pair b, head
 * h, query i, key j, (b · heads + h) << 32 | i << 16 | j.
 */
bool		tf_dropout_keep(unsigned long long seed, long step, int site, unsigned long long idx, float p);

typedef struct TfTrainModel
{
	TfConfig	cfg;			/* relu/gelu/swish, pre or post norm, scaled embeddings */
	bool		shared;			/* one embedding table for source and target */
	bool		tied;			/* the output layer is the target embedding */
	size_t		nparams;
	float	   *params;			/* (nparams) the master weights */
	float	   *grads;			/* (nparams) */
	TfTrainParams p;			/* into params */
	TfTrainParams g;			/* into grads, the same layout */
	const float *enc_pos;		/* (max_pos, d): source token i adds row i (fixed positions; learned ones are p.enc_pos) */
	const float *dec_pos;		/* (max_pos, d) */
	const float *logits_bias;	/* (vocab) Marian's final_logits_bias (a buffer, not trained), or NULL */
	TfTrainDropout drop;		/* zeros: none */
	void		(*interrupt) (void);	/* called between blocks (CHECK_FOR_INTERRUPTS), or NULL */
} TfTrainModel;

/* How many fp32 parameters the layout holds; 0 when it has too many layers. */
size_t		tf_train_param_count(const TfConfig *c, bool shared, bool tied);

/* Point out's members into base (tf_train_param_count floats). */
void		tf_train_bind(const TfConfig *c, bool shared, bool tied, float *base, TfTrainParams *out);

/*
 * A parameter under its checkpoint name (Hugging Face's, as model_pack.c
 * reads them): "model.shared.weight" (shared) or the two
 * "model.{encoder,decoder}.embed_tokens.weight", "lm_head.weight" (untied),
 * "model.encoder.layers.0.self_attn.q_proj.weight", ...  Learned positions
 * are "model.{encoder,decoder}.embed_positions.weight"; fixed ones and
 * Marian's final_logits_bias are not parameters: they are the caller's.
 */
typedef struct TfTrainNamed
{
	char		name[128];
	float	   *data;			/* into the p given */
	size_t		numel;
} TfTrainNamed;

/* How many named parameters the layout has (tf_train_names' out). */
int			tf_train_name_count(const TfConfig *c, bool shared, bool tied);

/* Every parameter of p with its name and size, in the array's order; returns the count. */
int			tf_train_names(const TfConfig *c, bool shared, bool tied, const TfTrainParams *p, TfTrainNamed *out);

/*
 * The limits of a batch a state holds: sentences, source and target
 * tokens in all, and the longest source or target.
 */
typedef struct TfTrainLimits
{
	int			sentences;
	int			src_tokens;
	int			tgt_tokens;
	int			longest;
} TfTrainLimits;

/* The activations of one batch. */
typedef struct TfTrainState TfTrainState;

/* Bytes of a state for these limits (tf_train_state_init's buffer). */
size_t		tf_train_state_size(const TfTrainModel *tm, const TfTrainLimits *lim);

/* A state in buf (tf_train_state_size bytes, 16-aligned); it points into buf. */
TfTrainState *tf_train_state_init(const TfTrainModel *tm, const TfTrainLimits *lim, void *buf);

/*
 * A batch of pairs (src[i] (n[i]), labels[i] (t[i])), teacher-forced from
 * the decoder start token: forward, the loss, and the backward pass, whose
 * gradients are added to tm->grads.  The pairs' tokens are packed as the
 * rows of every product (no padding); attention runs pair by pair.  The
 * loss is the mean over the batch's labels that are not pad_id (ignored),
 * as a padded batch through torch.nn.CrossEntropyLoss gives it; returned.
 * The batch must be within the state's limits.
 */
double		tf_train_batch(TfTrainModel *tm, TfTrainState *st, int nsent, const int *const *src,
						   const int *n, const int *const *labels, const int *t, float label_smoothing);

/*
 * Adam over every parameter (a->step is advanced here), after clearing
 * the gradient of the pad id's embedding rows (nn.Embedding's padding_idx);
 * then the gradients are zeroed for the next batch.  m and v: nparams each.
 */
void		tf_train_adam(TfTrainModel *tm, float *m, float *v, TfAdam *a, double lr);

#endif							/* TRAIN_MODEL_H */
