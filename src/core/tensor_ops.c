/*
 * tensor_ops.c
 *		Dense float32 kernels: softmax, layer norm, activations; the choice
 *		of every kernel family (tf_cpu_kernels) and of OpenBLAS's kernels.
 *		No postgres.h: see tensor_ops.h.
 */
#include "tensor_ops.h"

#include "blas.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/*
 * exp_fast's compares are selects only if the compiler may evaluate them
 * unconditionally.  With trapping math (GCC's default) it vectorizes them
 * only under AVX-512's masks, so the AVX2 and baseline copies of every loop
 * that takes an e^x stayed scalar.  This changes no value: only whether a
 * float operation's exception flags may be raised speculatively.  (A
 * pragma, not an attribute: GCC 12 did not apply the attribute to every
 * inlined body.)
 */
#pragma GCC optimize ("no-trapping-math")

/*
 * e^x for x <= 88.3 (larger saturates), branch-free so loops over it
 * vectorize: Cephes' expf, e^x = 2^n · e^r with |r| <= ln2/2 and a degree-6
 * polynomial; relative error about 1e-7.  Below -87 it returns exactly 0, so
 * a masked (-inf) score gets a weight of exactly 0.
 */
static inline __attribute__((always_inline)) float
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
 * The vector kernels below are written once, as always-inline bodies the
 * compiler vectorizes, and compiled three times: for AVX-512 (avx512f), for
 * AVX2 and for the baseline (SSE2).  Function pointers, set by
 * tf_cpu_kernels, choose one copy per family for the whole process: the
 * choice is made once per setting change, never per element.  Every copy
 * does the same float operations in the same order (fixed lanes, scalar
 * tails), but GCC's avx512f implies FMA, so the AVX-512 copies fuse
 * multiply-adds and may differ from the others in the last bits; the AVX2
 * and baseline ones agree bitwise.  (These are the copies GCC's
 * target_clones made before, chosen then once by the loader.)
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TF_X86 1
#define T_AVX512 __attribute__((target("avx512f")))
#define T_AVX2 __attribute__((target("avx2")))
#endif
#define ALWAYS_INLINE inline __attribute__((always_inline))

#define SOFTMAX_LANES 16
#define SOFTMAX_FLUSH 1024

/*
 * Indices are size_t: PostgreSQL builds with -fwrapv, under which int index
 * arithmetic may wrap and the compiler will not vectorize these loops.
 */
static ALWAYS_INLINE void
softmax_rows_body(int rows, int cols, float *x)
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
		 * The scalar tail after them sums the last n % 16 entries.
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

/*
 * max(x), NaNs ignored, in 16 independent lanes (vector maxima; one serial
 * chain over a vocabulary of 58k values per row and step cost a tenth of
 * batched decoding).  The order does not change the value; only the sign
 * of a zero maximum could differ, which x - max does not see.
 */
#define MAX_LANES 16

static ALWAYS_INLINE float
row_max_body(size_t n, const float *x)
{
	float		lanes[MAX_LANES];
	float		m = -INFINITY;
	size_t		j;

	for (size_t l = 0; l < MAX_LANES; l++)
		lanes[l] = -INFINITY;
	for (j = 0; j + MAX_LANES <= n; j += MAX_LANES)
		for (size_t l = 0; l < MAX_LANES; l++)
			lanes[l] = x[j + l] > lanes[l] ? x[j + l] : lanes[l];
	for (; j < n; j++)
		m = x[j] > m ? x[j] : m;
	for (size_t l = 0; l < MAX_LANES; l++)
		m = lanes[l] > m ? lanes[l] : m;
	return m;
}

/* log Σ e^x over n values (-inf ones add nothing); max-subtracted, summed in double. */
static ALWAYS_INLINE double
log_sum_exp_max_body(int n, const float *x, float max)
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

#define NORM_LANES 8

/* Mean and variance in double, in lanes the compiler can vectorize. */
static ALWAYS_INLINE void
layer_norm_body(int rows, int d, float *out, const float *x,
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

static ALWAYS_INLINE void
relu_body(size_t n, float *x)
{
	for (size_t i = 0; i < n; i++)
		x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* erf(z) for z = |x|/√2 >= 0 by Abramowitz & Stegun 7.1.26, e = e^(-z²) given (φ's too, in the derivative) */
static ALWAYS_INLINE float
erf_pos(float z, float e)
{
	float		t = 1.0f / (1.0f + 0.3275911f * z);
	float		poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f +
																   t * (-1.453152027f + t * 1.061405429f))));

	return 1.0f - poly * e;
}

/*
 * GELU(x) = x/2 · (1 + erf(x/√2)), the exact (erf) form of torch's GELU.
 * erf by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7) on |z| with
 * exp_fast, so that the loop vectorizes: libm's scalar erff took 18% of a
 * BERT pass (bench/README.md).  Within 5e-7 of erff's GELU.
 */
static ALWAYS_INLINE void
gelu_body(size_t n, float *x)
{
	for (size_t i = 0; i < n; i++)
	{
		float		v = x[i];
		float		z = fabsf(v) * (float) M_SQRT1_2;
		float		erf_z = erf_pos(z, exp_fast(-z * z));

		x[i] = 0.5f * v * (1.0f + (v < 0.0f ? -erf_z : erf_z));
	}
}

static ALWAYS_INLINE void
silu_body(size_t n, float *x)
{
	for (size_t i = 0; i < n; i++)
		x[i] = x[i] / (1.0f + exp_fast(-x[i]));
}

/*
 * The activations' derivatives, for training: dx = dy · f'(x), with the
 * forward bodies' exp_fast and erf (torch's silu_backward and gelu_backward,
 * erf form: silu' = σ(x) · (1 + x · (1 - σ(x))), gelu' = Φ(x) + x · φ(x)).
 * libm's scalar expf and erff took 10% of a training step.
 */
static ALWAYS_INLINE void
silu_grad_body(size_t n, float *dx, const float *dy, const float *x)
{
	for (size_t i = 0; i < n; i++)
	{
		float		v = x[i];
		float		s = 1.0f / (1.0f + exp_fast(-v));

		dx[i] = dy[i] * (s * (1.0f + v * (1.0f - s)));
	}
}

static ALWAYS_INLINE void
gelu_grad_body(size_t n, float *dx, const float *dy, const float *x)
{
	for (size_t i = 0; i < n; i++)
	{
		float		v = x[i];
		float		z = fabsf(v) * (float) M_SQRT1_2;
		float		e = exp_fast(-z * z);	/* e^(-x²/2): erf's and φ's */
		float		erf_z = erf_pos(z, e);
		float		cdf = 0.5f * (1.0f + (v < 0.0f ? -erf_z : erf_z));

		dx[i] = dy[i] * (cdf + v * e * (float) (0.5 * M_2_SQRTPI * M_SQRT1_2));
	}
}

/* Σ a·b in double, in lanes the compiler can vectorize. */
static ALWAYS_INLINE double
dot_body(int n, const float *a, const float *b)
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
static ALWAYS_INLINE bool
all_finite_body(size_t n, const float *x)
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

/* one copy of every body, compiled for TARGET */
#define DEFINE_VECTOR_KERNELS(SFX, TARGET)										\
static TARGET void																\
softmax_rows_##SFX(int rows, int cols, float *x)								\
{																				\
	softmax_rows_body(rows, cols, x);											\
}																				\
static TARGET double															\
log_sum_exp_max_##SFX(int n, const float *x, float max)						\
{																				\
	return log_sum_exp_max_body(n, x, max);										\
}																				\
static TARGET void																\
layer_norm_##SFX(int rows, int d, float *out, const float *x,					\
				 const float *gamma, const float *beta, float eps)				\
{																				\
	layer_norm_body(rows, d, out, x, gamma, beta, eps);							\
}																				\
static TARGET void																\
relu_##SFX(size_t n, float *x)													\
{																				\
	relu_body(n, x);															\
}																				\
static TARGET void																\
gelu_##SFX(size_t n, float *x)													\
{																				\
	gelu_body(n, x);															\
}																				\
static TARGET void																\
silu_##SFX(size_t n, float *x)													\
{																				\
	silu_body(n, x);															\
}																				\
static TARGET void																\
silu_grad_##SFX(size_t n, float *dx, const float *dy, const float *x)			\
{																				\
	silu_grad_body(n, dx, dy, x);												\
}																				\
static TARGET void																\
gelu_grad_##SFX(size_t n, float *dx, const float *dy, const float *x)			\
{																				\
	gelu_grad_body(n, dx, dy, x);												\
}																				\
static TARGET double															\
dot_##SFX(int n, const float *a, const float *b)								\
{																				\
	return dot_body(n, a, b);													\
}																				\
static TARGET bool																\
all_finite_##SFX(size_t n, const float *x)										\
{																				\
	return all_finite_body(n, x);												\
}

DEFINE_VECTOR_KERNELS(base, )
#ifdef TF_X86
DEFINE_VECTOR_KERNELS(avx2, T_AVX2)
DEFINE_VECTOR_KERNELS(avx512, T_AVX512)
#endif

/*
 * row_max and find_above by intrinsics at AVX2 and AVX-512: compilers
 * leave both scalar (the NaN rules).  max_ps(x, m) is x > m ? x : m, so
 * NaNs are ignored as in row_max_body; _CMP_NLE_UQ is !(x <= t).
 */
static float
row_max_base(size_t n, const float *x)
{
	return row_max_body(n, x);
}

#ifdef TF_X86
static T_AVX2 float
row_max_avx2(size_t n, const float *x)
{
	__m256		m[4];
	float		lanes[8];
	float		r = -INFINITY;
	size_t		j;

	for (int i = 0; i < 4; i++)
		m[i] = _mm256_set1_ps(-INFINITY);
	for (j = 0; j + 32 <= n; j += 32)
		for (int i = 0; i < 4; i++)
			m[i] = _mm256_max_ps(_mm256_loadu_ps(x + j + 8 * i), m[i]);
	m[0] = _mm256_max_ps(_mm256_max_ps(m[0], m[1]), _mm256_max_ps(m[2], m[3]));
	_mm256_storeu_ps(lanes, m[0]);
	for (int l = 0; l < 8; l++)
		r = lanes[l] > r ? lanes[l] : r;
	for (; j < n; j++)
		r = x[j] > r ? x[j] : r;
	return r;
}

static T_AVX512 float
row_max_avx512(size_t n, const float *x)
{
	__m512		m[4];
	float		lanes[16];
	float		r = -INFINITY;
	size_t		j;

	for (int i = 0; i < 4; i++)
		m[i] = _mm512_set1_ps(-INFINITY);
	for (j = 0; j + 64 <= n; j += 64)
		for (int i = 0; i < 4; i++)
			m[i] = _mm512_max_ps(_mm512_loadu_ps(x + j + 16 * i), m[i]);
	m[0] = _mm512_max_ps(_mm512_max_ps(m[0], m[1]), _mm512_max_ps(m[2], m[3]));
	_mm512_storeu_ps(lanes, m[0]);
	for (int l = 0; l < 16; l++)
		r = lanes[l] > r ? lanes[l] : r;
	for (; j < n; j++)
		r = x[j] > r ? x[j] : r;
	return r;
}
#endif

static size_t
find_above_base(size_t n, const float *x, float t)
{
	for (size_t j = 0; j < n; j++)
		if (!(x[j] <= t))
			return j;
	return n;
}

#ifdef TF_X86
static T_AVX2 size_t
find_above_avx2(size_t n, const float *x, float t)
{
	__m256		tv = _mm256_set1_ps(t);
	size_t		j;

	for (j = 0; j + 8 <= n; j += 8)
	{
		int			m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + j), tv, _CMP_NLE_UQ));

		if (m)
			return j + __builtin_ctz(m);
	}
	return j + find_above_base(n - j, x + j, t);
}

static T_AVX512 size_t
find_above_avx512(size_t n, const float *x, float t)
{
	__m512		tv = _mm512_set1_ps(t);
	size_t		j;

	for (j = 0; j + 16 <= n; j += 16)
	{
		__mmask16	m = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + j), tv, _CMP_NLE_UQ);

		if (m)
			return j + __builtin_ctz(m);
	}
	return j + find_above_base(n - j, x + j, t);
}
#endif

/* the copies in effect, by family */
static struct
{
	/* softmax */
	void		(*softmax_rows) (int, int, float *);
	double		(*log_sum_exp_max) (int, const float *, float);
	float		(*row_max) (size_t, const float *);
	size_t		(*find_above) (size_t, const float *, float);
	/* norms */
	void		(*layer_norm) (int, int, float *, const float *, const float *, const float *, float);
	/* activations */
	void		(*relu) (size_t, float *);
	void		(*gelu) (size_t, float *);
	void		(*silu) (size_t, float *);
	void		(*silu_grad) (size_t, float *, const float *, const float *);
	void		(*gelu_grad) (size_t, float *, const float *, const float *);
	/* vector */
	double		(*dot) (int, const float *, const float *);
	bool		(*all_finite) (size_t, const float *);
}			vk;

#define PICK_SOFTMAX(SFX) \
	(vk.softmax_rows = softmax_rows_##SFX, vk.log_sum_exp_max = log_sum_exp_max_##SFX, \
	 vk.row_max = row_max_##SFX, vk.find_above = find_above_##SFX)
#define PICK_NORMS(SFX) (vk.layer_norm = layer_norm_##SFX)
#define PICK_ACTIVATIONS(SFX) (vk.relu = relu_##SFX, vk.gelu = gelu_##SFX, vk.silu = silu_##SFX, \
							   vk.silu_grad = silu_grad_##SFX, vk.gelu_grad = gelu_grad_##SFX)
#define PICK_VECTOR(SFX) (vk.dot = dot_##SFX, vk.all_finite = all_finite_##SFX)
#define PICK_ALL(SFX) (PICK_SOFTMAX(SFX), PICK_NORMS(SFX), PICK_ACTIVATIONS(SFX), PICK_VECTOR(SFX))

/* level: 0..2, one this CPU has */
static void
pick_vector_kernels(int level)
{
#ifdef TF_X86
	if (level == 2)
		PICK_ALL(avx512);
	else if (level == 1)
		PICK_ALL(avx2);
	else
#endif
		PICK_ALL(base);
}

/* before tf_cpu_kernels: the best there is */
static void
pick_vector_default(void)
{
	pick_vector_kernels(tf_cpu_level(-1));
}

/* a family's copy in effect, by the address of one of its kernels */
#ifdef TF_X86
#define NAME_OF(FN, NAME) \
	((void *) vk.FN == (void *) NAME##_avx512 ? "avx512" : \
	 (void *) vk.FN == (void *) NAME##_avx2 ? "avx2" : \
	 (void *) vk.FN == (void *) NAME##_base ? "portable" : "none")
#else
#define NAME_OF(FN, NAME) ((void *) vk.FN == (void *) NAME##_base ? "portable" : "none")
#endif

const char *
tf_kernel_family(TfKernelFamily family)
{
	if (vk.softmax_rows == NULL)
		pick_vector_default();
	switch (family)
	{
		case TF_KERNELS_FP32:
			return tf_gemm_kernels_in_effect();
		case TF_KERNELS_INT8:
			return tf_int8_kernels_in_effect();
		case TF_KERNELS_SOFTMAX:
			return NAME_OF(softmax_rows, softmax_rows);
		case TF_KERNELS_NORMS:
			return NAME_OF(layer_norm, layer_norm);
		case TF_KERNELS_ACTIVATIONS:
			return NAME_OF(gelu, gelu);
		case TF_KERNELS_VECTOR:
			return NAME_OF(dot, dot);
		case TF_KERNELS_BF16:
			return tf_bf16_kernels_in_effect();
	}
	return "none";
}

const char *
tf_kernel_family_name(TfKernelFamily family)
{
	static const char *const names[TF_KERNEL_FAMILIES] = {
		"fp32", "int8", "softmax", "norms", "activations", "vector", "bf16"
	};

	return family >= 0 && family < TF_KERNEL_FAMILIES ? names[family] : "?";
}

const char *
tf_blas_init(void)
{
	tf_blas_hold(TF_LEVEL_AUTO, tf_cpu_level(TF_LEVEL_AUTO));
	return tf_blas_load();
}

const char *
tf_cpu_kernels(int level)
{
	static const char *const names[] = {"portable", "avx2", "avx512"};
	int			lv = tf_cpu_level(level);

	if (lv < 0)
		return NULL;
	tf_gemm_kernels(level < 0 ? level : lv);	/* fp32, and int8 (auto may choose AMX) */
	pick_vector_kernels(lv);
	tf_blas_hold(level, tf_cpu_level(TF_LEVEL_AUTO));	/* OpenBLAS's core, now or when it loads */
	return names[lv];
}

/* ---- the entry points: one indirect call each, no per-element dispatch */

void
tf_softmax_rows(int rows, int cols, float *x)
{
	if (vk.softmax_rows == NULL)
		pick_vector_default();
	vk.softmax_rows(rows, cols, x);
}

double
tf_log_sum_exp_max(int n, const float *x, float max)
{
	if (vk.log_sum_exp_max == NULL)
		pick_vector_default();
	return vk.log_sum_exp_max(n, x, max);
}

double
tf_log_sum_exp(int n, const float *x)
{
	return tf_log_sum_exp_max(n, x, tf_row_max(n, x));
}

float
tf_row_max(size_t n, const float *x)
{
	if (vk.row_max == NULL)
		pick_vector_default();
	return vk.row_max(n, x);
}

size_t
tf_find_above(size_t n, const float *x, float t)
{
	if (vk.find_above == NULL)
		pick_vector_default();
	return vk.find_above(n, x, t);
}

void
tf_layer_norm(int rows, int d, float *out, const float *x,
			  const float *gamma, const float *beta, float eps)
{
	if (vk.layer_norm == NULL)
		pick_vector_default();
	vk.layer_norm(rows, d, out, x, gamma, beta, eps);
}

void
tf_relu(size_t n, float *x)
{
	if (vk.relu == NULL)
		pick_vector_default();
	vk.relu(n, x);
}

void
tf_gelu(size_t n, float *x)
{
	if (vk.gelu == NULL)
		pick_vector_default();
	vk.gelu(n, x);
}

void
tf_silu(size_t n, float *x)
{
	if (vk.silu == NULL)
		pick_vector_default();
	vk.silu(n, x);
}

void
tf_silu_grad(size_t n, float *dx, const float *dy, const float *x)
{
	if (vk.silu_grad == NULL)
		pick_vector_default();
	vk.silu_grad(n, dx, dy, x);
}

void
tf_gelu_grad(size_t n, float *dx, const float *dy, const float *x)
{
	if (vk.gelu_grad == NULL)
		pick_vector_default();
	vk.gelu_grad(n, dx, dy, x);
}

double
tf_dot(int n, const float *a, const float *b)
{
	if (vk.dot == NULL)
		pick_vector_default();
	return vk.dot(n, a, b);
}

bool
tf_all_finite(size_t n, const float *x)
{
	if (vk.all_finite == NULL)
		pick_vector_default();
	return vk.all_finite(n, x);
}
