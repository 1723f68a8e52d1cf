/*
 * tensor_ops.c
 *		Dense float32 kernels: matmul (OpenBLAS), softmax, layer norm,
 *		activations.  No postgres.h: see tensor_ops.h.
 */
#include "tensor_ops.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/*
 * Debian's OpenBLAS is a DYNAMIC_ARCH build: at load it picks kernels by CPU
 * model, and a model newer than the library falls back to the generic SSE3
 * "Prescott" kernels, several times slower.  In that case, and unless the
 * user chose with OPENBLAS_CORETYPE, we choose by CPU features and let
 * OpenBLAS initialise again.  Weak symbols: other builds simply keep theirs.
 */
extern char *openblas_get_corename(void);
extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));

const char *
tf_blas_init(void)
{
	const char *core = openblas_get_corename();
	const char *want = NULL;

	if (getenv("OPENBLAS_CORETYPE") != NULL ||
		gotoblas_dynamic_init == NULL || gotoblas_dynamic_quit == NULL ||
		core == NULL || strcasecmp(core, "prescott") != 0)
		return core;

#if defined(__x86_64__) && defined(__GNUC__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
		__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
		__builtin_cpu_supports("avx512vl"))
		want = "SkylakeX";
	else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		want = "Haswell";
#endif
	if (want == NULL)
		return core;

	setenv("OPENBLAS_CORETYPE", want, 0);
	gotoblas_dynamic_quit();
	gotoblas_dynamic_init();
	return openblas_get_corename();
}

void
tf_set_blas_threads(int nthreads)
{
	openblas_set_num_threads(nthreads);
}

/*
 * e^x for x <= 88.3 (larger saturates), branch-free so loops over it
 * vectorize: Cephes' expf, e^x = 2^n · e^r with |r| <= ln2/2 and a degree-6
 * polynomial; relative error about 1e-7.  Below -87 it returns exactly 0, so
 * a masked (-inf) score gets a weight of exactly 0.
 */
static inline float
exp_fast(float x)
{
	/* written so that NaN clamps too: (int32_t) NaN is undefined (found by fuzz_weight_file) */
	float		xc = x > -87.0f ? (x < 88.3f ? x : 88.3f) : -87.0f;
	/* round to nearest by the 1.5·2^23 trick: vectorizes, unlike roundf */
	float		n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
	float		r = xc - n * 0.693359375f + n * 2.12194440e-4f;
	float		p = 1.9875691500e-4f;
	int32_t		bits;
	float		scale;

	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	bits = ((int32_t) n + 127) << 23;
	memcpy(&scale, &bits, sizeof(float));
	return x < -87.0f ? 0.0f : (x == x ? p * scale : x);	/* NaN stays NaN */
}

/*
 * Compiled for AVX-512, AVX2 and baseline; the loader picks one (ifunc).
 * GCC only: clang (the fuzzers' and sanitizers' compiler) builds baseline.
 */
#if defined(__GNUC__) && !defined(__clang__)
#define TF_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TF_MULTIVERSION
#endif

#define SOFTMAX_LANES 16
#define SOFTMAX_FLUSH 1024

/*
 * Indices are size_t: PostgreSQL builds with -fwrapv, under which int index
 * arithmetic may wrap and the compiler will not vectorize these loops.
 */
TF_MULTIVERSION
void
tf_softmax_rows(int rows, int cols, float *x)
{
	size_t		n = (size_t) cols;

	for (size_t r = 0; r < (size_t) rows; r++)
	{
		float	   *row = x + r * n;
		float		max = -INFINITY;
		float		lanes[SOFTMAX_LANES] = {0};
		double		sum = 0.0;
		float		inv;
		size_t		j;

		for (j = 0; j < n; j++)
			max = row[j] > max ? row[j] : max;

		/* every entry masked: no key to attend to */
		if (max == -INFINITY)
		{
			for (j = 0; j < n; j++)
				row[j] = 0.0f;
			continue;
		}

		/*
		 * Fixed-width float lanes so the compiler vectorizes; they are
		 * flushed into the double sum every SOFTMAX_FLUSH entries, so no
		 * float partial sum adds up more than SOFTMAX_FLUSH / 16 terms.
		 */
		for (j = 0; j + SOFTMAX_LANES <= n; j += SOFTMAX_LANES)
		{
			for (size_t l = 0; l < SOFTMAX_LANES; l++)
			{
				float		e = exp_fast(row[j + l] - max);

				row[j + l] = e;
				lanes[l] += e;
			}
			if ((j + SOFTMAX_LANES) % SOFTMAX_FLUSH == 0)
				for (size_t l = 0; l < SOFTMAX_LANES; l++)
				{
					sum += lanes[l];
					lanes[l] = 0.0f;
				}
		}
		for (; j < n; j++)
		{
			float		e = exp_fast(row[j] - max);

			row[j] = e;
			sum += e;
		}
		for (size_t l = 0; l < SOFTMAX_LANES; l++)
			sum += lanes[l];

		inv = (float) (1.0 / sum);
		for (j = 0; j < n; j++)
			row[j] *= inv;
	}
}

/* log Σ e^x over n values (-inf ones add nothing); max-subtracted, summed in double. */
TF_MULTIVERSION
double
tf_log_sum_exp_max(int n, const float *x, float max)
{
	float		lanes[SOFTMAX_LANES] = {0};
	double		sum = 0.0;
	size_t		j;

	if (max == -INFINITY)
		return -INFINITY;
	for (j = 0; j + SOFTMAX_LANES <= (size_t) n; j += SOFTMAX_LANES)
	{
		for (size_t l = 0; l < SOFTMAX_LANES; l++)
			lanes[l] += exp_fast(x[j + l] - max);
		if ((j + SOFTMAX_LANES) % SOFTMAX_FLUSH == 0)
			for (size_t l = 0; l < SOFTMAX_LANES; l++)
			{
				sum += lanes[l];
				lanes[l] = 0.0f;
			}
	}
	for (; j < (size_t) n; j++)
		sum += exp_fast(x[j] - max);
	for (size_t l = 0; l < SOFTMAX_LANES; l++)
		sum += lanes[l];
	return max + log(sum);
}

double
tf_log_sum_exp(int n, const float *x)
{
	float		max = -INFINITY;

	for (size_t j = 0; j < (size_t) n; j++)
		max = x[j] > max ? x[j] : max;
	return tf_log_sum_exp_max(n, x, max);
}

#define NORM_LANES 8

/* Mean and variance in double, in lanes the compiler can vectorize. */
TF_MULTIVERSION
void
tf_layer_norm(int rows, int d, float *out, const float *x,
			  const float *gamma, const float *beta, float eps)
{
	size_t		n = (size_t) d;

	for (size_t r = 0; r < (size_t) rows; r++)
	{
		const float *xr = x + r * n;
		float	   *yr = out + r * n;
		double		lanes[NORM_LANES] = {0};
		double		mean = 0.0;
		double		var = 0.0;
		float		meanf;
		float		inv;
		size_t		j;

		for (j = 0; j + NORM_LANES <= n; j += NORM_LANES)
			for (size_t l = 0; l < NORM_LANES; l++)
				lanes[l] += xr[j + l];
		for (; j < n; j++)
			mean += xr[j];
		for (size_t l = 0; l < NORM_LANES; l++)
		{
			mean += lanes[l];
			lanes[l] = 0.0;
		}
		mean /= d;
		for (j = 0; j + NORM_LANES <= n; j += NORM_LANES)
			for (size_t l = 0; l < NORM_LANES; l++)
			{
				double		c = xr[j + l] - mean;

				lanes[l] += c * c;
			}
		for (; j < n; j++)
			var += (xr[j] - mean) * (xr[j] - mean);
		for (size_t l = 0; l < NORM_LANES; l++)
			var += lanes[l];
		var /= d;				/* biased, as torch.nn.LayerNorm */
		inv = (float) (1.0 / sqrt(var + eps));
		meanf = (float) mean;

		for (j = 0; j < n; j++)
		{
			float		v = (xr[j] - meanf) * inv;

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

/*
 * GELU(x) = x/2 · (1 + erf(x/√2)), the exact (erf) form of torch's GELU.
 * erf by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7) on |z| with
 * exp_fast, so that the loop vectorizes: libm's scalar erff took 18% of a
 * BERT pass (bench/README.md).  Within 5e-7 of erff's GELU.
 */
TF_MULTIVERSION
void
tf_gelu(size_t n, float *x)
{
	for (size_t i = 0; i < n; i++)
	{
		float		v = x[i];
		float		z = fabsf(v) * (float) M_SQRT1_2;
		float		t = 1.0f / (1.0f + 0.3275911f * z);
		float		poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f +
																	   t * (-1.453152027f + t * 1.061405429f))));
		float		erf_z = 1.0f - poly * exp_fast(-z * z);

		x[i] = 0.5f * v * (1.0f + (v < 0.0f ? -erf_z : erf_z));
	}
}

TF_MULTIVERSION
void
tf_silu(size_t n, float *x)
{
	for (size_t i = 0; i < n; i++)
		x[i] = x[i] / (1.0f + exp_fast(-x[i]));
}

/* Σ a·b in double, in lanes the compiler can vectorize. */
TF_MULTIVERSION
double
tf_dot(int n, const float *a, const float *b)
{
	double		lanes[NORM_LANES] = {0};
	double		sum = 0.0;
	size_t		i;

	for (i = 0; i + NORM_LANES <= (size_t) n; i += NORM_LANES)
		for (size_t l = 0; l < NORM_LANES; l++)
			lanes[l] += (double) a[i + l] * b[i + l];
	for (; i < (size_t) n; i++)
		sum += (double) a[i] * b[i];
	for (size_t l = 0; l < NORM_LANES; l++)
		sum += lanes[l];
	return sum;
}

/* Whether no value is NaN or infinite: a test of the exponent bits, vectorized. */
TF_MULTIVERSION
bool
tf_all_finite(size_t n, const float *x)
{
	uint32_t	bad = 0;

	for (size_t i = 0; i < n; i++)
	{
		uint32_t	bits;

		memcpy(&bits, &x[i], sizeof(bits));
		bad |= (bits & 0x7f800000u) == 0x7f800000u;
	}
	return bad == 0;
}
