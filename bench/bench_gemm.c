/*
 * bench_gemm.c
 *		The core's products outside the server, one thread.
 *		usage: bench_gemm sgemm M N K REPS   ->  median GFLOP/s of cblas_sgemm
 *		                                         (x · Wᵀ, as tf_linear calls it)
 *		       bench_gemm linear DTYPE M N K REPS -> median GFLOP/s (GOP/s for
 *		                                         i8) and weight GB/s of tf_linear
 *		                                         (f32|f16|bf16|i8), weights packed
 *		                                         (i8: quantized) first
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blas.h"
#include "tensor_ops.h"
#include "bench_util.h"

int
main(int argc, char **argv)
{
	int			sgemm = argc == 6 && strcmp(argv[1], "sgemm") == 0;
	int			linear = argc == 7 && strcmp(argv[1], "linear") == 0;
	TfDType		dt = TF_F32;
	int			m, n, k, reps;
	size_t		es;
	float	   *x, *y;
	unsigned char *w;
	double	   *t;

	if (!sgemm && !linear)
	{
		fprintf(stderr, "usage: bench_gemm sgemm M N K REPS | linear f32|f16|bf16|i8 M N K REPS\n");
		return 2;
	}
	if (linear)
		dt = strcmp(argv[2], "f16") == 0 ? TF_F16 : strcmp(argv[2], "bf16") == 0 ? TF_BF16 :
			strcmp(argv[2], "i8") == 0 ? TF_I8 : TF_F32;
	m = atoi(argv[argc - 4]);
	n = atoi(argv[argc - 3]);
	k = atoi(argv[argc - 2]);
	reps = atoi(argv[argc - 1]);
	if (m < 1 || n < 1 || k < 1 || reps < 1)
		return 2;
	tf_blas_init();
	tf_set_blas_threads(1);
	es = tf_dtype_size(dt);
	x = malloc(sizeof(float) * (size_t) m * k);
	y = malloc(sizeof(float) * (size_t) m * n);
	w = malloc((dt == TF_I8 ? 4 : es) * (size_t) n * k);
	t = malloc(sizeof(double) * reps);
	srand(1);
	for (size_t i = 0; i < (size_t) m * k; i++)
		x[i] = (float) rand() / RAND_MAX - 0.5f;
	for (size_t i = 0; i < (size_t) n * k; i++)
	{
		float		v = ((float) rand() / RAND_MAX - 0.5f) * 0.1f;

		if (dt == TF_F32 || dt == TF_I8)
			memcpy(w + 4 * i, &v, 4);
		else
		{
			/* bf16 = the high half of the fp32; fp16 of a small number: 0x2e66 ~ 0.1 */
			unsigned int bits;
			unsigned short h;

			memcpy(&bits, &v, 4);
			h = dt == TF_BF16 ? (unsigned short) (bits >> 16) : (unsigned short) (0x2e66 ^ (rand() & 0x83ff));
			memcpy(w + 2 * i, &h, 2);
		}
	}
	if (linear)
	{
		void	   *packed = malloc(tf_packed_size(n, k, dt));

		if (dt == TF_I8)
		{
			/* quantized per row, as quantize_model() does */
			int8_t	   *q = malloc((size_t) n * k);
			float	   *scale = malloc(sizeof(float) * n);

			tf_quantize_rows(n, k, q, scale, (const float *) w);
			tf_pack_int8(n, k, packed, q, scale);
			free(q);
			free(scale);
		}
		else
			tf_pack_panels(n, k, packed, w, dt);
		free(w);
		w = packed;
	}
	for (int r = -1; r < reps; r++)
	{
		double		t0 = now();

		if (sgemm)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k,
						(const float *) w, k, 0.0f, y, n);
		else
			tf_linear(m, n, k, y, x, w, dt, NULL);
		if (r >= 0)
			t[r] = now() - t0;
	}
	qsort(t, reps, sizeof(double), cmp_double);
	printf("%.3f GFLOP/s %.2f GB/s\n", 2.0 * m * n * k / t[reps / 2] / 1e9,
		   (double) es * n * k / t[reps / 2] / 1e9);
	return 0;
}
