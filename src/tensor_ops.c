/*
 * tensor_ops.c
 *		Dense float32 kernels: matmul (OpenBLAS), softmax, layer norm,
 *		activations.  No postgres.h: see tensor_ops.h.
 */
#include "tensor_ops.h"

#include <cblas.h>
#include <math.h>

void
tf_set_blas_threads(int nthreads)
{
	openblas_set_num_threads(nthreads);
}

void
tf_matmul(int m, int n, int k,
		  float *out, int ldo,
		  const float *a, int lda,
		  const float *b, int ldb,
		  bool trans_b, float alpha, float beta)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
				m, n, k, alpha, a, lda, b, ldb, beta, out, ldo);
}

void
tf_softmax_rows(int rows, int cols, float *x)
{
	for (int r = 0; r < rows; r++)
	{
		float	   *row = x + (size_t) r * cols;
		float		max = -INFINITY;
		double		sum = 0.0;

		for (int j = 0; j < cols; j++)
			if (row[j] > max)
				max = row[j];

		/* every entry masked: no key to attend to */
		if (max == -INFINITY)
		{
			for (int j = 0; j < cols; j++)
				row[j] = 0.0f;
			continue;
		}

		for (int j = 0; j < cols; j++)
		{
			float		e = expf(row[j] - max);

			row[j] = e;
			sum += e;
		}

		{
			float		inv = (float) (1.0 / sum);

			for (int j = 0; j < cols; j++)
				row[j] *= inv;
		}
	}
}

void
tf_layer_norm(int rows, int d, float *out, const float *x,
			  const float *gamma, const float *beta, float eps)
{
	for (int r = 0; r < rows; r++)
	{
		const float *xr = x + (size_t) r * d;
		float	   *yr = out + (size_t) r * d;
		double		mean = 0.0;
		double		var = 0.0;
		float		inv;

		for (int j = 0; j < d; j++)
			mean += xr[j];
		mean /= d;
		for (int j = 0; j < d; j++)
		{
			double		c = xr[j] - mean;

			var += c * c;
		}
		var /= d;				/* biased, as torch.nn.LayerNorm */
		inv = (float) (1.0 / sqrt(var + eps));

		for (int j = 0; j < d; j++)
		{
			float		v = ((float) (xr[j] - mean)) * inv;

			yr[j] = v * (gamma ? gamma[j] : 1.0f) + (beta ? beta[j] : 0.0f);
		}
	}
}

void
tf_relu(size_t n, float *x)
{
	for (size_t i = 0; i < n; i++)
		x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void
tf_gelu(size_t n, float *x)
{
	for (size_t i = 0; i < n; i++)
		x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float) M_SQRT1_2));
}

void
tf_silu(size_t n, float *x)
{
	for (size_t i = 0; i < n; i++)
		x[i] = x[i] / (1.0f + expf(-x[i]));
}

double
tf_dot(int n, const float *a, const float *b)
{
	double		sum = 0.0;

	for (int i = 0; i < n; i++)
		sum += (double) a[i] * b[i];
	return sum;
}
