/*
 * model_internal.h
 *		What the forward pass (model.c), the search (search.c) and the logits
 *		processors (logits.c) share; not for use outside model.c,
 *		search.c and logits.c.  No postgres.h.
 */
#ifndef TF_MODEL_INTERNAL_H
#define TF_MODEL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "model.h"
#include "tensor_ops.h"

static inline int
imax(int a, int b)
{
	return a > b ? a : b;
}

static inline void
linear(int rows, int out_dim, int in_dim, float *y, const float *x,
	   TfMatrix w, const float *b)
{
	tf_linear(rows, out_dim, in_dim, y, x, w.data, w.dtype, b);
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
	bool		screen;			/* this step's logits from lm_head_screen (greedy_screen.c) */
	int			parts;			/* threads that share a step (tf_parallel_parts()) */
	size_t		part_scores;	/* floats of scores per part: max(T, TF_SMALL_M x longest source) */
	float	   *scores;			/* (parts, part_scores) */
	float	   *kcache;			/* (layers, T, slots, d) */
	float	   *vcache;			/* (layers, T, slots, d) */
	/*
	 * A cache row is written once, at its step, and never moved: row j of a
	 * beam lives in the slot its ancestor had at step j, anc[slot][j].  A
	 * beam that moves copies its parent's T ints, not its caches.
	 */
	int		   *anc;			/* (slots, T) */
	int		   *anc_tmp;		/* (beams, T): parents' rows while beams move */
	const float **krows;		/* (parts, T) one row's keys of a layer, by position */
	const float **vrows;		/* (parts, T) */
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

/*
 * Position-major: a step's rows of every slot lie together, so a step
 * writes one dense block and only the positions reached are ever touched.
 */
static inline float *
cache_row(const RunState *s, float *cache, int d, int l, int slot, int pos)
{
	return cache + (((size_t) l * s->T + pos) * s->slots + slot) * d;
}

void		tf_encode_state_alloc(const TfModel *m, int n, EncodeState *e, const SpmAlloc *a);
void		tf_encode_with(const TfModel *m, int n, const int *ids, float *x, const EncodeState *e);
void		tf_decoder_step(const TfModel *m, RunState *s, int nr, const StepRow *rows, int pos);

/* greedy_screen.c: see there; steps of up to TF_SCREEN_ROWS rows use the screen */
#define TF_SCREEN_ROWS 4
bool		tf_screen_usable(const TfModel *m);
size_t		tf_screen_scratch_floats(const TfConfig *c);
void		tf_screen_greedy_row(const TfModel *m, const TfDecodeOptions *opt, const int *seq, int len,
								 const float *x, float *row, float *scratch, int *tmp);

/* logits.c */
double		tf_process_logits(const TfConfig *c, const TfDecodeOptions *opt, bool beam, float *logits,
							  const int *seq, int len, int *tmp);

#endif							/* TF_MODEL_INTERNAL_H */
