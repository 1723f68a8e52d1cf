/*
 * bench_gemm.c
 *		The core's products outside the server, one thread.
 *		usage: bench_gemm sgemm M N K REPS   ->  median GFLOP/s of cblas_sgemm
 *		                                         (x · Wᵀ, as tf_linear calls it)
 *		       bench_gemm linear DTYPE M N K REPS -> median GFLOP/s (GOP/s for
 *		                                         i8) and weight GB/s of tf_linear
 *		                                         (f32|f16|bf16|i8), weights packed
 *		                                         (i8: quantized) first
 *		       bench_gemm fma ROUNDS             -> that loop's own GFLOP/s (median)
 *		       bench_gemm peak DTYPE M N K ROUNDS -> tf_linear's rate over a loop of
 *		                                         independent 512-bit FMAs', the two
 *		                                         alternating 0.2 s each per round
 *		                                         (the VM's speed drifts; a ratio
 *		                                         taken side by side does not)
 *		       bench_gemm best DTYPE M N K CALLS -> the best and the mean rate of
 *		                                         CALLS single calls of tf_linear, and
 *		                                         of as many 2 ms runs of the FMA loop
 *		                                         (256-bit at TF_CPU_KERNELS=avx2),
 *		                                         interleaved: the best shows what a
 *		                                         kernel does when the VM lets it
 *		TF_CPU_KERNELS=avx512|avx2|portable in the environment holds the
 *		kernels to that level, as the setting transformer.cpu_kernels does.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blas.h"
#include "tensor_ops.h"
#include "bench_util.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/*
 * GFLOP/s of 12 independent chains of FMAs (enough for 2 FMA ports), for
 * secs: NAME of vectors VT of LANES floats, for the kernels of that width.
 */
#define DEFINE_FMA_LOOP(NAME, TARGET, VT, LANES, SET1, FMADD)					\
__attribute__((target(TARGET), noinline)) static double						\
NAME(double secs)																\
{																				\
	VT			a[12],															\
				b = SET1(0.999999f),											\
				c = SET1(1e-7f);												\
	long		it = 0;															\
	double		t0 = now(),														\
				dt;																\
	float		s = 0;															\
																				\
	for (int i = 0; i < 12; i++)												\
		a[i] = SET1((float) i);													\
	do																			\
	{																			\
		for (int r = 0; r < 100000; r++)										\
			for (int i = 0; i < 12; i++)										\
				a[i] = FMADD(a[i], b, c);										\
		it += 100000;															\
	} while (now() - t0 < secs);												\
	dt = now() - t0;															\
	for (int i = 0; i < 12; i++)												\
		for (int j = 0; j < LANES; j++)											\
			s += a[i][j];														\
	if (s == 12345.0f)			/* keeps the chains */							\
		printf(" ");															\
	return it * 12.0 * 2 * LANES / dt / 1e9;									\
}

DEFINE_FMA_LOOP(fma_peak, "avx512f", __m512, 16, _mm512_set1_ps, _mm512_fmadd_ps)
/* the rate the AVX2 kernels are held to */
DEFINE_FMA_LOOP(fma_peak_avx2, "avx2,fma", __m256, 8, _mm256_set1_ps, _mm256_fmadd_ps)
#else
static double
fma_peak(double secs)
{
	(void) secs;
	return 0;
}
static double
fma_peak_avx2(double secs)
{
	(void) secs;
	return 0;
}
#endif

int
main(int argc, char **argv)
{
	int			fma = argc == 3 && strcmp(argv[1], "fma") == 0;
	int			sgemm = argc == 6 && strcmp(argv[1], "sgemm") == 0;
	int			peak = argc == 7 && strcmp(argv[1], "peak") == 0;
	int			best = argc == 7 && strcmp(argv[1], "best") == 0;
	int			linear = argc == 7 && (strcmp(argv[1], "linear") == 0 || peak || best);
	TfDType		dt = TF_F32;
	int			m, n, k, reps;
	size_t		es;
	float	   *x, *y;
	unsigned char *w;
	double	   *t;

	if ((!sgemm && !linear && !fma) || atoi(argv[argc - 1]) < 1)
	{
		fprintf(stderr, "usage: bench_gemm sgemm M N K REPS | linear|peak|best f32|f16|bf16|i8 M N K REPS | fma ROUNDS\n");
		return 2;
	}
	if (fma)
	{
		/* the FMA loop alone: its median rate over ROUNDS of 0.2 s, and the range */
		int			rounds = atoi(argv[2]);

		if (tf_cpu_level(TF_LEVEL_AUTO) < TF_LEVEL_AVX512)
		{
			fprintf(stderr, "bench_gemm fma: needs AVX-512\n");
			return 2;
		}
		t = malloc(sizeof(double) * rounds);
		for (int r = 0; r < rounds; r++)
			t[r] = fma_peak(0.2);
		qsort(t, rounds, sizeof(double), cmp_double);
		printf("512-bit FMA loop: median %.1f GFLOP/s [%.1f, %.1f] over %d rounds of 0.2 s\n",
			   t[rounds / 2], t[0], t[rounds - 1], rounds);
		return 0;
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
	if (getenv("TF_CPU_KERNELS"))
	{
		const char *want = getenv("TF_CPU_KERNELS");
		int			level = strcmp(want, "avx512") == 0 ? 2 : strcmp(want, "avx2") == 0 ? 1 :
			strcmp(want, "portable") == 0 ? 0 : -2;

		if (level < -1 || tf_gemm_kernels(level) == NULL)
		{
			fprintf(stderr, "bench_gemm: TF_CPU_KERNELS=%s is not a level this CPU has\n", want);
			return 2;
		}
	}
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
	if (best)
	{
		/* the loop as wide as the kernels in effect (the CPU's best, or TF_CPU_KERNELS) */
		const char *level = tf_gemm_kernels_in_effect();
		int			avx2 = strcmp(level, "avx2") == 0;
		double		(*loop) (double) = avx2 ? fma_peak_avx2 : fma_peak;
		double	   *f = malloc(sizeof(double) * reps),
					tbest = 1e30,
					tsum = 0,
					fbest = 0,
					fsum = 0,
					flops = 2.0 * m * n * k;

		if ((!avx2 && strcmp(level, "avx512") != 0) || loop(0.01) == 0)
		{
			fprintf(stderr, "bench_gemm best: needs the avx512 or avx2 kernels (these: %s)\n", level);
			return 2;
		}
		tf_linear(m, n, k, y, x, w, dt, NULL);	/* first touches */
		for (int r = 0; r < reps; r++)
		{
			double		t0 = now();

			tf_linear(m, n, k, y, x, w, dt, NULL);
			t[r] = now() - t0;
			f[r] = loop(0.002);
			tbest = t[r] < tbest ? t[r] : tbest;
			tsum += t[r];
			fbest = f[r] > fbest ? f[r] : fbest;
			fsum += f[r];
		}
		printf("tf_linear: best %.1f GFLOP/s, mean %.1f; %d-bit FMA loop: best %.1f, mean %.1f; "
			   "best over best %.2f (%d calls)\n",
			   flops / tbest / 1e9, flops / (tsum / reps) / 1e9, avx2 ? 256 : 512, fbest, fsum / reps,
			   flops / tbest / 1e9 / fbest, reps);
		free(f);
		return 0;
	}
	if (peak)
	{
		if (tf_cpu_level(TF_LEVEL_AUTO) < TF_LEVEL_AVX512 || fma_peak(0.01) == 0)
		{
			fprintf(stderr, "bench_gemm peak: needs AVX-512\n");
			return 2;
		}
		for (int r = 0; r < reps; r++)
		{
			double		p = fma_peak(0.2),
						t0 = now();
			int			it = 0;

			do
			{
				tf_linear(m, n, k, y, x, w, dt, NULL);
				it++;
			} while (now() - t0 < 0.2);
			t[r] = 2.0 * m * n * k * it / (now() - t0) / 1e9 / p;
		}
		qsort(t, reps, sizeof(double), cmp_double);
		printf("tf_linear / FMA loop: median %.2f [%.2f, %.2f] over %d rounds\n",
			   reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2, t[0], t[reps - 1], reps);
		return 0;
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
