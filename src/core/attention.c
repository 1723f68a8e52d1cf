/*
 * attention.c
 *		softmax(Q·Kᵀ/√d_k)·V, one head and many.  No postgres.h.
 */
#include "attention.h"
#include "tensor_ops.h"

#include <math.h>

/* Overwrite the masked-out scores of w (n, m) with -inf. */
static void
apply_mask(int n, int m, float *w, const AttnMask *mask)
{
	if (mask == NULL)
		return;

	for (int i = 0; i < n; i++)
	{
		float	   *row = w + (size_t) i * m;

		if (mask->key_pad)
			for (int j = 0; j < m; j++)
				if (mask->key_pad[j])
					row[j] = -INFINITY;

		if (mask->causal)
		{
			/* keys after the query's own position are hidden */
			long		first_hidden = (long) mask->q_pos + i + 1;

			for (long j = first_hidden < 0 ? 0 : first_hidden; j < m; j++)
				row[j] = -INFINITY;
		}
	}
}

void
tf_attention_weights(int n, int m, int dk,
					 float *w,
					 const float *q, int ldq,
					 const float *k, int ldk,
					 const AttnMask *mask)
{
	float		scale = (float) (1.0 / sqrt((double) dk));

	tf_matmul(n, m, dk, w, m, q, ldq, k, ldk, true, scale, 0.0f);
	apply_mask(n, m, w, mask);
	tf_softmax_rows(n, m, w);
}

void
tf_attention(int n, int m, int dk, int dv,
			 float *out, int ldo,
			 float *scratch,
			 const float *q, int ldq,
			 const float *k, int ldk,
			 const float *v, int ldv,
			 const AttnMask *mask)
{
	tf_attention_weights(n, m, dk, scratch, q, ldq, k, ldk, mask);
	tf_matmul(n, dv, m, out, ldo, scratch, m, v, ldv, false, 1.0f, 0.0f);
}

void
tf_multihead_attention(int n, int m, int dq, int dv, int heads,
					   float *out,
					   float *scratch,
					   const float *q, const float *k, const float *v,
					   const AttnMask *mask)
{
	int			hq = dq / heads;
	int			hv = dv / heads;

	for (int h = 0; h < heads; h++)
		tf_attention(n, m, hq, hv,
					 out + (size_t) h * hv, dv,
					 scratch,
					 q + (size_t) h * hq, dq,
					 k + (size_t) h * hq, dq,
					 v + (size_t) h * hv, dv,
					 mask);
}

void
tf_multihead_attention_rows(int m, int d, int heads,
							float *out,
							float *scratch,
							const float *q,
							const float *const *krows, const float *const *vrows)
{
	int			dh = d / heads;
	float		scale = (float) (1.0 / sqrt((double) dh));	/* as tf_attention_weights */

	for (int h = 0; h < heads; h++)
	{
		size_t		off = (size_t) h * dh;

		tf_dot_rows(m, dh, scratch, q + off, krows, off, scale);
		tf_softmax_rows(1, m, scratch);
		tf_sum_rows(m, dh, out + off, scratch, vrows, off);
	}
}
