/*
 * attention.h
 *		Scaled dot-product and multi-head attention on raw float buffers.
 *
 * Part of the numeric core: no postgres.h.  Long computations are split by
 * the caller into row blocks, so that the server glue can check for
 * interrupts between blocks.
 */
#ifndef ATTENTION_H
#define ATTENTION_H

#include <stdbool.h>

/*
 * Attention masks.  Key j is visible to query row i when
 *   !(causal && j > q_pos + i)  and  !(key_pad && key_pad[j]),
 * i.e. a causal mask is aligned top-left (torch.ones(n, m).tril()) and
 * q_pos shifts it for incremental decoding (query i is at position
 * q_pos + i).  A row that sees no key gets all-zero weights.
 */
typedef struct AttnMask
{
	bool		causal;
	int			q_pos;
	const unsigned char *key_pad;	/* (m) nonzero = padding, or NULL */
} AttnMask;

/*
 * w (n, m) = softmax(q · kᵀ / √dk) with the mask applied.
 * q (n, dk) with leading dimension ldq, k (m, dk) with ldk; w is dense.
 */
void		tf_attention_weights(int n, int m, int dk,
								 float *w,
								 const float *q, int ldq,
								 const float *k, int ldk,
								 const AttnMask *mask);

/*
 * out (n, dv) = softmax(q · kᵀ / √dk) · v, one head.
 * scratch: n·m floats for the weights.
 */
void		tf_attention(int n, int m, int dk, int dv,
						 float *out, int ldo,
						 float *scratch,
						 const float *q, int ldq,
						 const float *k, int ldk,
						 const float *v, int ldv,
						 const AttnMask *mask);

/*
 * Multi-head attention without projections: q (n, dq), k (m, dq) and
 * v (m, dv) are split into `heads` column blocks of dq/heads and dv/heads;
 * each head attends on its own and the results are concatenated into
 * out (n, dv).  scratch: n·m floats.  heads must divide dq and dv.
 */
void		tf_multihead_attention(int n, int m, int dq, int dv, int heads,
								   float *out,
								   float *scratch,
								   const float *q, const float *k, const float *v,
								   const AttnMask *mask);

/*
 * The same for one query row (d) whose m keys and values are rows anywhere,
 * krows[j] and vrows[j] (d each): a beam's cache rows, left where its
 * ancestors wrote them.  Bitwise equal to tf_multihead_attention on the
 * rows gathered into matrices.  scratch: m floats.
 */
void		tf_multihead_attention_rows(int m, int d, int heads,
										float *out,
										float *scratch,
										const float *q,
										const float *const *krows, const float *const *vrows);

#endif							/* ATTENTION_H */
