/*
 * model.h
 *		The Transformer of "Attention Is All You Need" in the Marian layout:
 *		configuration, weights, and the forward passes (embedding, encoder,
 *		incremental decoder) with greedy and beam search.
 *
 * Part of the core: no postgres.h.  After llama2.c: a Config, a Weights
 * struct of raw pointers with their shapes, and a RunState of buffers
 * allocated once per call (never inside the loops).  Linear weights are
 * (out, in) as torch.nn.Linear keeps them, in the checkpoint's dtype, packed
 * for tf_linear (TfMatrix), and applied as x · Wᵀ; vectors (biases, norms, positions)
 * are fp32.
 */
#ifndef MODEL_H
#define MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "spm.h"				/* SpmAlloc */
#include "tensor_ops.h"			/* TfDType */

typedef enum TfActivation
{
	TF_ACT_RELU,
	TF_ACT_GELU,
	TF_ACT_SWISH
} TfActivation;

typedef enum TfPositions
{
	TF_POS_SINUSOIDAL_HALF,		/* Marian: sin in the first half, cos in the second */
	TF_POS_SINUSOIDAL_INTERLEAVED,	/* the paper: sin at even, cos at odd indices */
	TF_POS_SINUSOIDAL_FAIRSEQ,	/* M2M100/NLLB: sin | cos halves with frequencies
								 * 10000^(-i/(d/2-1)), from position pad_id + 1 */
	TF_POS_LEARNED
} TfPositions;

typedef struct TfConfig
{
	int			vocab;			/* the decoder's and the output layer's */
	int			src_vocab;		/* the encoder's embeddings: == vocab unless a
								 * Marian model has separate vocabularies */
	int			d_model;
	int			enc_layers;
	int			dec_layers;
	int			enc_heads;
	int			dec_heads;
	int			enc_ffn;
	int			dec_ffn;
	int			max_pos;
	TfActivation activation;
	bool		pre_norm;		/* normalize_before */
	bool		final_norm;		/* a LayerNorm after the last layer of each stack */
	bool		scale_embedding;	/* token embeddings times sqrt(d_model) */
	TfPositions positions;
	int			pad_id;
	int			eos_id;
	int			unk_id;
	int			decoder_start_id;
	float		ln_eps;
	bool		embed_norm;		/* a LayerNorm after the embeddings (BERT's embeddings.LayerNorm) */
	bool		encoder_only;	/* BERT / XLM-R: no decoder (dec_layers 0) */
	bool		compute_bf16;	/* not the checkpoint's: the compute type bf16, its
								 * matrices packed TF_BF16D (transformer.compute_type) */
	bool		compute_int8;	/* the compute type int8: its float matrices
								 * quantized at load, as quantize_model() does */
	int			token_types;	/* BERT's type_vocab_size (type 0 is folded into enc_pos) */
	int			pos_offset;		/* the stored position table's first row used:
								 * XLM-R's padding_idx + 1, else 0 */
} TfConfig;

/* A weight matrix in its stored dtype, packed in panels for tf_linear. */
typedef struct TfMatrix
{
	const void *data;
	TfDType		dtype;
} TfMatrix;

typedef struct TfAttnWeights
{
	TfMatrix	q_w;			/* (d, d) */
	const float *q_b;			/* (d) */
	TfMatrix	k_w;			/* (d, d) */
	const float *k_b;			/* (d) */
	TfMatrix	v_w;			/* (d, d) */
	const float *v_b;			/* (d) */
	TfMatrix	o_w;			/* (d, d) */
	const float *o_b;			/* (d) */
	const float *ln_g;			/* (d) the LayerNorm of this block */
	const float *ln_b;			/* (d) */
} TfAttnWeights;

typedef struct TfLayerWeights
{
	TfAttnWeights self_attn;
	TfAttnWeights cross_attn;	/* decoder layers only */
	TfMatrix	fc1_w;			/* (ffn, d) */
	const float *fc1_b;			/* (ffn) */
	TfMatrix	fc2_w;			/* (d, ffn) */
	const float *fc2_b;			/* (d) */
	const float *ln_g;			/* (d) final_layer_norm of the layer */
	const float *ln_b;			/* (d) */
} TfLayerWeights;

typedef struct TfWeights
{
	TfMatrix	enc_embed;		/* (src_vocab, d) */
	TfMatrix	dec_embed;		/* (vocab, d), usually == enc_embed */
	TfMatrix	lm_head;		/* (vocab, d), usually == dec_embed */
	const float *logits_bias;	/* (vocab) final_logits_bias, or NULL */
	TfMatrix	lm_head_screen;	/* (vocab, d) an fp32 lm_head quantized, TF_I8:
								 * greedy decoding's screen (greedy_screen.c);
								 * data NULL: none */
	const float *lm_head_slack;	/* (vocab, 2) the screen's error bound per row:
								 * the factors of ||x|| and of ||x - x̂|| */
	const float *enc_pos;		/* (max_pos, d) */
	const float *pad_pos;		/* (d) the position of a pad id in the source when
								 * tf_positions_skip_pad(): XLM-R's row padding_idx;
								 * NULL: zeros (fairseq's sinusoidal row padding_idx) */
	const float *dec_pos;		/* (max_pos, d) */
	TfLayerWeights *enc;		/* (enc_layers) */
	TfLayerWeights *dec;		/* (dec_layers) */
	const float *embed_norm_g;	/* (d) the embeddings' LayerNorm, if config.embed_norm */
	const float *embed_norm_b;
	const float *enc_norm_g;	/* (d) final norms, if config.final_norm */
	const float *enc_norm_b;
	const float *dec_norm_g;
	const float *dec_norm_b;
} TfWeights;

typedef struct TfModel
{
	TfConfig	cfg;
	TfWeights	w;
} TfModel;

/*
 * Fill a (max_pos, d) table with sinusoidal positions of the given kind:
 * row p is position first + p (fairseq's tables start at pad_id + 1).
 */
void		tf_sinusoidal_positions(int max_pos, int d, TfPositions kind, int first, float *out);

/*
 * Are a source's positions counted from its ids, a pad id taking position
 * padding_idx and not counted (fairseq's make_positions, Hugging Face's
 * create_position_ids_from_input_ids: XLM-R / RoBERTa and M2M100 / NLLB)?
 * Otherwise token i is at position i (Marian, BERT).
 */
bool		tf_positions_skip_pad(const TfConfig *c);

/*
 * out (n, d) = embed[ids] · scale + positions (0, 1, ..., or counted as
 * tf_positions_skip_pad() says), LayerNorm'd if config.embed_norm.
 */
void		tf_embed(const TfModel *m, int n, const int *ids, float *out);

/* out (n, d) = the encoder's output for ids (no padding). */
void		tf_encode(const TfModel *m, int n, const int *ids, float *out, const SpmAlloc *a);

/*
 * The encoder's outputs for nsent inputs of different lengths at once:
 * ids[i] (n[i] ids) gives the rows x[off_i .. off_i + n[i]) of x (sum n, d),
 * packed one after another without padding.  The products run over all
 * rows together; attention stays within each input, which is what Hugging
 * Face's attention_mask does for a right-padded batch (BertModel,
 * XLMRobertaModel), without computing the padding.
 */
void		tf_encode_packed(const TfModel *m, int nsent, const int *const *ids, const int *n,
							 float *x, const SpmAlloc *a, void (*interrupt) (void));

/* sentence-transformers' Pooling modes */
typedef enum TfPooling
{
	TF_POOL_CLS,				/* the first token's output */
	TF_POOL_MEAN,				/* the mean over the tokens */
	TF_POOL_MAX,				/* the maximum of each dimension */
	TF_POOL_MEAN_SQRT_LEN		/* the sum over the tokens / sqrt(tokens) */
} TfPooling;

/* out (d) = rows x (n, d) pooled; n >= 1. */
void		tf_pool(TfPooling mode, int n, int d, const float *x, float *out);

/* x (d) /= max(‖x‖₂, 1e-12), as torch.nn.functional.normalize (sentence-transformers' Normalize). */
void		tf_l2_normalize(int d, float *x);

/* The largest beam_size tf_translate accepts (the caller checks). */
#define TF_MAX_BEAMS 64

/* early_stopping of Hugging Face's beam search */
typedef enum TfEarlyStopping
{
	TF_EARLY_FALSE = 0,			/* stop when no live beam can beat the worst finished */
	TF_EARLY_TRUE = 1,			/* stop when num_beams hypotheses are finished */
	TF_EARLY_NEVER = 2			/* as false, but bounding the length by max_length */
} TfEarlyStopping;

/*
 * Decoding options, with Hugging Face's GenerationConfig semantics (see
 * tools/marian_torch.py, which follows transformers' code rule by rule).
 */
typedef struct TfDecodeOptions
{
	int			beam_size;		/* num_beams; 1: greedy */
	int			max_length;		/* the start token counts: at most max_length - 1
								 * tokens are generated, EOS included */
	double		length_penalty;
	TfEarlyStopping early_stopping;
	int			min_length;		/* EOS is banned while the sequence, start token
								 * included, is shorter */
	int			no_repeat_ngram_size;	/* 0: off */
	double		repetition_penalty; /* 1: off */
	int			forced_eos_id;	/* forced_eos_token_id at max_length - 1; -1: none */
	int			forced_bos_id;	/* forced_bos_token_id after the start token
								 * (NLLB's target language); -1: none */
	bool		renormalize;	/* renormalize_logits */
	int			nbad;			/* bad_words_ids: nbad token sequences ... */
	const int  *bad_off;		/* (nbad + 1) ... at bad_ids[bad_off[w]..bad_off[w + 1]) */
	const int  *bad_ids;
} TfDecodeOptions;

/*
 * Greedy decoding's screened output layer (greedy_screen.c): rows [r0, r0 +
 * n) of screen (tf_packed_size(rows, cols, TF_I8) bytes, zeroed first) and
 * slack (tf_screen_slack_floats(rows)) from an fp32 (rows, cols) matrix
 * packed in panels; w (cols floats) and q (cols bytes) are the caller's
 * scratch.  tf_greedy_screen: whether greedy steps use it
 * (transformer.greedy_screen); the tokens are the same either way.
 */
void		tf_screen_pack_rows(size_t rows, size_t cols, void *screen, float *slack, const float *packed,
								size_t r0, size_t n, float *w, int8_t *q);
size_t		tf_screen_slack_floats(size_t rows);
extern bool tf_greedy_screen;

/*
 * Translate source ids (EOS included): the generated ids, EOS excluded, into
 * *out (allocated from a), their count returned.  interrupt, if not NULL,
 * is called once per decoding step (the server checks for cancel there).
 */
int			tf_translate(const TfModel *m, int n, const int *src, const TfDecodeOptions *opt,
						 int **out, const SpmAlloc *a, void (*interrupt) (void));

/*
 * tf_translate for nsent sentences at once (src[i] of n_src[i] ids, options
 * opt[i], all with the same beam_size): every step decodes the live beams
 * of all of them as rows of the same products.  Each result is the one
 * tf_translate gives for that sentence alone.  The caller bounds nsent x
 * beam_size (the caches are (decoder layers, nsent x beams, max_length,
 * d_model) floats each for keys and values).
 */
void		tf_translate_batch(const TfModel *m, int nsent, const int *const *src, const int *n_src,
							   const TfDecodeOptions *opt, int **out, int *nout,
							   const SpmAlloc *a, void (*interrupt) (void));

/*
 * The attention weights of every layer and head, for src (n ids, EOS
 * included) and the decoder inputs dec_in (T ids: the start token, then the
 * generated ones but the last), in one teacher-forced pass: the weights of
 * the steps that produced the T output tokens, as incremental decoding
 * computed them.  enc_w (enc_layers, enc_heads, n, n); dec_w (dec_layers,
 * dec_heads, T, T), zero above the diagonal; cross_w (dec_layers,
 * dec_heads, T, n).
 */
void		tf_attention_maps(const TfModel *m, int n, const int *src, int T, const int *dec_in,
							  float *enc_w, float *dec_w, float *cross_w, const SpmAlloc *a);

#endif							/* MODEL_H */
