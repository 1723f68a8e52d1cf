/*
 * train_layers.c
 *		Forward and backward passes of the Transformer's layers, the loss,
 *		Adam and the paper's rate, in fp32 (train_layers.h).  No postgres.h.
 *
 * Ported from torch's definitions, rule by rule: nn.Linear, nn.LayerNorm
 * (biased variance), F.gelu (erf), F.silu, F.scaled_dot_product_attention's
 * math (softmax(q kᵀ / √dk) v), nn.Embedding, nn.CrossEntropyLoss with
 * label_smoothing and ignore_index (torch/nn/functional.py and
 * aten/src/ATen/native/LossNLL.cpp: the smoothing term averaged over the
 * counted rows, as the NLL term), and torch.optim.Adam's single-tensor
 * step (torch/optim/adam.py: _single_tensor_adam).
 */
#include "train_layers.h"

#include "blas.h"
#include "tensor_ops.h"

#include <math.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/*
 * out (m, n) += alpha · aᵀ · b, a (k, m) and b (k, n) row-major with
 * leading dimensions: the products that need a transposed left side
 * (a weight's gradient).  OpenBLAS's sgemm; without it, a row of a at a
 * time so the inner loop runs along b's rows.
 */
static void
matmul_tn_acc(int m, int n, int k, float *out, int ldo, const float *a, int lda,
			  const float *b, int ldb, float alpha)
{
	if (tf_blas_sgemm_tn(m, n, k, out, ldo, a, lda, b, ldb, alpha, 1.0f))
		return;
	for (size_t r = 0; r < (size_t) k; r++)
		for (size_t i = 0; i < (size_t) m; i++)
		{
			float		s = alpha * a[r * lda + i];
			float	   *o = out + i * ldo;
			const float *br = b + r * ldb;

			if (s == 0.0f)
				continue;
			for (size_t j = 0; j < (size_t) n; j++)
				o[j] += s * br[j];
		}
}

/* ------------------------------------------------------------ Linear */

void
tf_linear_fw(int n, int out, int in, float *y, const float *x, const float *w, const float *b)
{
	tf_matmul(n, out, in, y, out, x, in, w, in, true, 1.0f, 0.0f);
	if (b)
		for (size_t r = 0; r < (size_t) n; r++)
			for (size_t o = 0; o < (size_t) out; o++)
				y[r * out + o] += b[o];
}

void
tf_linear_bw(int n, int out, int in, float *dx, float *dw, float *db,
			 const float *dy, const float *x, const float *w)
{
	if (dx)
		tf_matmul(n, in, out, dx, in, dy, out, w, in, false, 1.0f, 0.0f);
	matmul_tn_acc(out, in, n, dw, in, dy, out, x, in, 1.0f);
	if (db)
		for (size_t r = 0; r < (size_t) n; r++)
			for (size_t o = 0; o < (size_t) out; o++)
				db[o] += dy[r * out + o];
}

/* ------------------------------------------------------------ LayerNorm */

void
tf_layer_norm_fw(int n, int d, float *y, float *mean, float *rstd,
				 const float *x, const float *g, const float *b, float eps)
{
	for (size_t r = 0; r < (size_t) n; r++)
	{
		const float *xr = x + r * d;
		float	   *yr = y + r * d;
		double		mu = 0.0,
					var = 0.0;
		float		muf,
					rs;

		for (int j = 0; j < d; j++)
			mu += xr[j];
		mu /= d;
		for (int j = 0; j < d; j++)
			var += (xr[j] - mu) * (xr[j] - mu);
		var /= d;				/* biased, as nn.LayerNorm */
		muf = (float) mu;
		rs = (float) (1.0 / sqrt(var + eps));
		for (int j = 0; j < d; j++)
			yr[j] = (xr[j] - muf) * rs * g[j] + b[j];
		mean[r] = muf;
		rstd[r] = rs;
	}
}

/*
 * With x̂ = (x - μ) / σ and dx̂ = dy · γ:
 *		dx = (dx̂ - mean(dx̂) - x̂ · mean(dx̂ · x̂)) / σ
 */
void
tf_layer_norm_bw(int n, int d, float *dx, float *dg, float *db,
				 const float *dy, const float *x, const float *mean, const float *rstd,
				 const float *g)
{
	for (size_t r = 0; r < (size_t) n; r++)
	{
		const float *xr = x + r * d;
		const float *dyr = dy + r * d;
		float	   *dxr = dx + r * d;
		double		s1 = 0.0,
					s2 = 0.0;
		float		m1,
					m2;

		for (int j = 0; j < d; j++)
		{
			float		xh = (xr[j] - mean[r]) * rstd[r];
			float		dxh = dyr[j] * g[j];

			s1 += dxh;
			s2 += dxh * xh;
			dg[j] += dyr[j] * xh;
			db[j] += dyr[j];
		}
		m1 = (float) (s1 / d);
		m2 = (float) (s2 / d);
		for (int j = 0; j < d; j++)
		{
			float		xh = (xr[j] - mean[r]) * rstd[r];

			dxr[j] = (dyr[j] * g[j] - m1 - xh * m2) * rstd[r];
		}
	}
}

/* ------------------------------------------------------------ activations */

void
tf_activation_fw(TfTrainAct act, size_t n, float *y, const float *x)
{
	if (act == TF_TRAIN_RELU)
	{
		for (size_t i = 0; i < n; i++)
			y[i] = x[i] > 0.0f ? x[i] : 0.0f;
		return;
	}
	/* the inference pass's vectorized kernels (tensor_ops.c), in place on a copy */
	if (y != x)
		memcpy(y, x, sizeof(float) * n);
	if (act == TF_TRAIN_GELU)
		tf_gelu(n, y);
	else
		tf_silu(n, y);
}

/*
 * relu' = [x > 0] (torch's threshold_backward: 0 at x = 0);
 * gelu' = Φ(x) + x · φ(x); silu' = σ(x) · (1 + x · (1 - σ(x))).
 */
void
tf_activation_bw(TfTrainAct act, size_t n, float *dx, const float *dy, const float *x)
{
	if (act == TF_TRAIN_GELU)
		tf_gelu_grad(n, dx, dy, x);
	else if (act == TF_TRAIN_SILU)
		tf_silu_grad(n, dx, dy, x);
	else
		for (size_t i = 0; i < n; i++)
			dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

/* ------------------------------------------------------------ attention */

void
tf_mha_fw(int n, int m, int d, int heads, float *out, float *p, float *scratch,
		  const float *q, const float *k, const float *v,
		  bool causal, const unsigned char *key_pad, const unsigned char *keep, float scale)
{
	int			dk = d / heads;
	float		qk_scale = 1.0f / sqrtf((float) dk);

	for (int h = 0; h < heads; h++)
	{
		float	   *ph = p + (size_t) h * n * m;
		const float *w = ph;

		tf_matmul(n, m, dk, ph, m, q + h * dk, d, k + h * dk, d, true, qk_scale, 0.0f);
		for (size_t i = 0; i < (size_t) n; i++)
			for (size_t j = 0; j < (size_t) m; j++)
				if ((causal && j > i) || (key_pad && key_pad[j]))
					ph[i * m + j] = -INFINITY;
		tf_softmax_rows(n, m, ph);
		if (keep)
		{
			const unsigned char *kh = keep + (size_t) h * n * m;

			for (size_t i = 0; i < (size_t) n * m; i++)
				scratch[i] = kh[i] ? ph[i] * scale : 0.0f;
			w = scratch;
		}
		tf_matmul(n, dk, m, out + h * dk, d, w, m, v + h * dk, d, false, 1.0f, 0.0f);
	}
}

/*
 * Per head, with P the weights, P' = P ⊙ keep · scale what the forward
 * pass multiplied V by (P without dropout), and dO the head's columns of
 * dout:
 *		dV = P'ᵀ dO;  dP = (dO Vᵀ) ⊙ keep · scale;
 *		dS = P ⊙ (dP - rowsum(dP ⊙ P));  dQ = dS K / √dk;  dK = dSᵀ Q / √dk.
 * A hidden key has P = 0, so dS = 0 there: the mask needs no second look.
 */
void
tf_mha_bw(int n, int m, int d, int heads, float *dq, float *dk, float *dv, float *scratch,
		  const float *dout, const float *p, const float *q, const float *k, const float *v,
		  const unsigned char *keep, float scale)
{
	int			hd = d / heads;
	float		qk_scale = 1.0f / sqrtf((float) hd);

	memset(dk, 0, sizeof(float) * m * d);
	memset(dv, 0, sizeof(float) * m * d);
	for (int h = 0; h < heads; h++)
	{
		const float *ph = p + (size_t) h * n * m;
		const unsigned char *kh = keep ? keep + (size_t) h * n * m : NULL;
		float	   *ds = scratch;
		const float *w = ph;

		if (kh)
		{
			float	   *pd = scratch + (size_t) n * m;

			for (size_t i = 0; i < (size_t) n * m; i++)
				pd[i] = kh[i] ? ph[i] * scale : 0.0f;
			w = pd;
		}
		matmul_tn_acc(m, hd, n, dv + h * hd, d, w, m, dout + h * hd, d, 1.0f);
		tf_matmul(n, m, hd, ds, m, dout + h * hd, d, v + h * hd, d, true, 1.0f, 0.0f);
		if (kh)
			for (size_t i = 0; i < (size_t) n * m; i++)
				ds[i] = kh[i] ? ds[i] * scale : 0.0f;
		for (size_t i = 0; i < (size_t) n; i++)
		{
			double		dot = 0.0;

			for (size_t j = 0; j < (size_t) m; j++)
				dot += ds[i * m + j] * ph[i * m + j];
			for (size_t j = 0; j < (size_t) m; j++)
				ds[i * m + j] = ph[i * m + j] * (ds[i * m + j] - (float) dot);
		}
		tf_matmul(n, hd, m, dq + h * hd, d, ds, m, k + h * hd, d, false, qk_scale, 0.0f);
		matmul_tn_acc(m, hd, n, dk + h * hd, d, ds, m, q + h * hd, d, qk_scale);
	}
}

/* ------------------------------------------------------------ embeddings */

void
tf_embedding_fw(int n, int d, float *out, const int *ids, const float *e, float scale,
				const float *pos)
{
	for (size_t i = 0; i < (size_t) n; i++)
	{
		const float *er = e + (size_t) ids[i] * d;

		for (size_t j = 0; j < (size_t) d; j++)
			out[i * d + j] = er[j] * scale + (pos ? pos[i * d + j] : 0.0f);
	}
}

void
tf_embedding_bw(int n, int d, float *de, float *dpos, const float *dout, const int *ids,
				float scale, int padding_idx)
{
	for (size_t i = 0; i < (size_t) n; i++)
	{
		float	   *der = de + (size_t) ids[i] * d;

		if (ids[i] != padding_idx)
			for (size_t j = 0; j < (size_t) d; j++)
				der[j] += scale * dout[i * d + j];
		if (dpos)
			for (size_t j = 0; j < (size_t) d; j++)
				dpos[i * d + j] += dout[i * d + j];
	}
}

/* ------------------------------------------------------------ the loss */

/* Σ x in double, in lanes so that the loop vectorizes (one chain of adds would not) */
static double
sum_lanes(int n, const float *x)
{
	double		lanes[8] = {0},
				sum = 0.0;
	int			j;

	for (j = 0; j + 8 <= n; j += 8)
		for (int l = 0; l < 8; l++)
			lanes[l] += x[j + l];
	for (; j < n; j++)
		sum += x[j];
	for (int l = 0; l < 8; l++)
		sum += lanes[l];
	return sum;
}

double
tf_cross_entropy(int n, int vocab, float *dlogits, int *counted,
				 const float *logits, const int *targets, int ignore, float eps,
				 int denom)
{
	double		nll = 0.0,
				smooth = 0.0;
	int			count = 0;
	float		inv;

	for (int r = 0; r < n; r++)
		count += targets[r] != ignore;
	*counted = count;
	if (denom > 0)
		count = denom;
	inv = count > 0 ? 1.0f / (float) count : 0.0f;
	for (size_t r = 0; r < (size_t) n; r++)
	{
		const float *z = logits + r * vocab;
		float	   *dz = dlogits + r * vocab;
		double		lse,
					sum_z;
		float		uniform = eps / vocab;

		if (targets[r] == ignore)
		{
			memset(dz, 0, sizeof(float) * vocab);
			continue;
		}
		/*
		 * The probabilities by the vectorized softmax (its sum in double),
		 * log Σ e^z likewise; Σ_j log p_j = Σ_j z_j - vocab · lse.
		 */
		memcpy(dz, z, sizeof(float) * vocab);
		tf_softmax_rows(1, vocab, dz);
		lse = tf_log_sum_exp(vocab, z);
		sum_z = sum_lanes(vocab, z);
		for (int j = 0; j < vocab; j++)
			dz[j] = (dz[j] - uniform) * inv;
		dz[targets[r]] -= (1.0f - eps) * inv;
		nll -= z[targets[r]] - lse;
		smooth -= sum_z - vocab * lse;
	}
	if (count == 0)
		return 0.0;
	return (1.0 - eps) * nll / count + eps / vocab * smooth / count;
}

/* ------------------------------------------------------------ Adam */

/*
 * torch 1.13's _single_tensor_adam, fp32 tensors and Python-float scalars:
 *		m = β1 m + (1 - β1) g;  v = β2 v + (1 - β2) g²
 *		p -= lr / (1 - β1^t) · m / (√v / √(1 - β2^t) + eps)
 */
/*
 * Four at a time with SSE, then a scalar tail: compilers keep the loop
 * scalar for sqrtf's errno (a sqrtss and a libm call in case: 9% of a
 * training step).  The same operations in the same order, so the same
 * results to the bit (IEEE sqrt and division, no contraction).
 */
void
tf_adam_step(size_t n, float *param, float *m, float *v, const float *grad,
			 const TfAdam *a, double lr)
{
	double		bc1 = 1.0 - pow(a->beta1, (double) a->step);
	double		bc2_sqrt = sqrt(1.0 - pow(a->beta2, (double) a->step));
	float		b1 = (float) a->beta1,
				b2 = (float) a->beta2,
				c1 = (float) (1.0 - a->beta1),
				c2 = (float) (1.0 - a->beta2),
				step_size = (float) (lr / bc1),
				bc2s = (float) bc2_sqrt,
				eps = (float) a->eps;

	size_t		i = 0;

#ifdef __SSE2__
	{
		const __m128 vb1 = _mm_set1_ps(b1),
					vb2 = _mm_set1_ps(b2),
					vc1 = _mm_set1_ps(c1),
					vc2 = _mm_set1_ps(c2),
					vstep = _mm_set1_ps(step_size),
					vbc2s = _mm_set1_ps(bc2s),
					veps = _mm_set1_ps(eps);

		for (; i + 4 <= n; i += 4)
		{
			__m128		g = _mm_loadu_ps(grad + i);
			__m128		mi = _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(m + i), vb1), _mm_mul_ps(g, vc1));
			__m128		vi = _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(v + i), vb2), _mm_mul_ps(_mm_mul_ps(g, g), vc2));
			__m128		den = _mm_add_ps(_mm_div_ps(_mm_sqrt_ps(vi), vbc2s), veps);

			_mm_storeu_ps(m + i, mi);
			_mm_storeu_ps(v + i, vi);
			_mm_storeu_ps(param + i, _mm_sub_ps(_mm_loadu_ps(param + i), _mm_mul_ps(vstep, _mm_div_ps(mi, den))));
		}
	}
#endif
	for (; i < n; i++)
	{
		float		g = grad[i];

		m[i] = m[i] * b1 + g * c1;
		v[i] = v[i] * b2 + g * g * c2;
		param[i] -= step_size * (m[i] / (sqrtf(v[i]) / bc2s + eps));
	}
}

double
tf_noam_rate(int d_model, long step, long warmup)
{
	double		s = (double) (step < 1 ? 1 : step);
	double		w = (double) (warmup < 1 ? 1 : warmup);

	return pow((double) d_model, -0.5) * fmin(pow(s, -0.5), s * pow(w, -1.5));
}

double
tf_warmup_rate(double rate, long step, long warmup)
{
	if (warmup <= 0 || step >= warmup)
		return rate;
	return rate * (double) (step < 1 ? 1 : step) / (double) warmup;
}
