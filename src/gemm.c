/*
 * gemm.c
 *		Matrix products: tf_matmul (fp32) and tf_linear (x · Wᵀ + b with W
 *		in its stored dtype: fp32, fp16 or bf16).  No postgres.h.
 *
 * Large products go to OpenBLAS's sgemm.  Products with few rows (decoding:
 * one row per beam) are done here instead: sgemm packs b into a buffer on
 * every call, which for one row costs more than the product, and decoding
 * is bound by how fast the weights stream from memory, so the weights are
 * read once, in their stored width (half the bytes for fp16 and bf16), and
 * converted in registers.
 *
 * One body per vector width (AVX-512, AVX2 + FMA, SSE2), chosen at run
 * time; the tile shape is a constant in every inlined copy, so the 4 x 4
 * accumulators stay in registers.
 */
#include "tensor_ops.h"

#include <cblas.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TF_X86 1
#endif

/* Below this many rows of a, the products are done here. */
#define SMALL_M 16

float
tf_half_to_float(uint16_t h)
{
	uint32_t	sign = (uint32_t) (h & 0x8000) << 16;
	uint32_t	exp = (h >> 10) & 0x1f;
	uint32_t	mant = h & 0x3ff;
	uint32_t	bits;
	float		f;

	if (exp == 0)
	{
		/* zero or subnormal: mant · 2^-24 */
		f = (float) mant * 5.9604644775390625e-8f;
		return sign ? -f : f;
	}
	if (exp == 31)
		bits = sign | 0x7f800000u | (mant << 13);
	else
		bits = sign | ((exp + 112) << 23) | (mant << 13);
	memcpy(&f, &bits, sizeof(f));
	return f;
}

float
tf_bf16_to_float(uint16_t h)
{
	uint32_t	bits = (uint32_t) h << 16;
	float		f;

	memcpy(&f, &bits, sizeof(f));
	return f;
}

size_t
tf_dtype_size(TfDType dt)
{
	return dt == TF_F32 ? 4 : 2;
}

void
tf_row_to_float(size_t n, float *out, const void *w, TfDType dt, size_t row)
{
	if (dt == TF_F32)
		memcpy(out, (const float *) w + row * n, sizeof(float) * n);
	else
	{
		const uint16_t *h = (const uint16_t *) w + row * n;

		for (size_t i = 0; i < n; i++)
			out[i] = dt == TF_F16 ? tf_half_to_float(h[i]) : tf_bf16_to_float(h[i]);
	}
}

/* scalar loads of one element of b, by dtype */
#define SCALAR_F32(p) (*(p))
#define SCALAR_F16(p) tf_half_to_float(*(p))
#define SCALAR_BF16(p) tf_bf16_to_float(*(p))

/*
 * out[r][j] = alpha · a_r · b_j (+ beta · out[r][j]) for a tile of R rows of
 * a by J rows of b, both with k columns.  LOADB loads W elements of b as
 * floats.
 */
#define DEFINE_DOT_TILE(SFX, DT, TARGET, W, BT, LOADB, SCALARB)				\
static inline __attribute__((always_inline, TARGET)) void						\
dot_tile_##SFX##_##DT(size_t R, size_t J, size_t k, float *out, size_t ldo,	\
					  const float *a, size_t lda, const BT *b, size_t ldb,		\
					  float alpha, float beta)									\
{																				\
	vf_##SFX	acc[4][4];														\
	size_t		p;																\
																				\
	for (size_t r = 0; r < R; r++)												\
		for (size_t j = 0; j < J; j++)											\
			acc[r][j] = (vf_##SFX) {0};											\
	for (p = 0; p + W <= k; p += W)												\
	{																			\
		vf_##SFX	bv[4];														\
																				\
		for (size_t j = 0; j < J; j++)											\
			bv[j] = LOADB(b + j * ldb + p);										\
		for (size_t r = 0; r < R; r++)											\
		{																		\
			vf_##SFX	av = *(const vf_##SFX *) (a + r * lda + p);				\
																				\
			for (size_t j = 0; j < J; j++)										\
				acc[r][j] += av * bv[j];										\
		}																		\
	}																			\
	for (size_t r = 0; r < R; r++)												\
		for (size_t j = 0; j < J; j++)											\
		{																		\
			float		s = HSUM_##SFX(acc[r][j]);								\
			float	   *o = out + r * ldo + j;									\
																				\
			for (size_t q = p; q < k; q++)										\
				s += a[r * lda + q] * SCALARB(b + j * ldb + q);					\
			*o = beta == 0.0f ? alpha * s : alpha * s + beta * *o;				\
		}																		\
}																				\
																				\
/* out (n) = b (n) as floats, converted as the tile kernel converts them */	\
static __attribute__((TARGET, unused)) void										\
convert_##SFX##_##DT(size_t n, float *out, const BT *b)						\
{																				\
	size_t		p;																\
																				\
	for (p = 0; p + W <= n; p += W)												\
		*(vf_##SFX *) (out + p) = LOADB(b + p);									\
	for (; p < n; p++)															\
		out[p] = SCALARB(b + p);												\
}																				\
																				\
/* out (m, n) = alpha · a (m, k) · bᵀ + beta · out, b (n, k) */				\
static __attribute__((TARGET)) void												\
gemm_nt_##SFX##_##DT(size_t m, size_t n, size_t k, float *out, size_t ldo,	\
					 const float *a, size_t lda, const void *bv, size_t ldb,	\
					 float alpha, float beta)									\
{																				\
	const BT   *b = (const BT *) bv;											\
																				\
	/* each group of 4 rows of b is read once and meets every row of a */		\
	for (size_t j = 0; j < n; j += 4)											\
	{																			\
		size_t		J = n - j < 4 ? n - j : 4;									\
																				\
		for (size_t r = 0; r < m; r += 4)										\
		{																		\
			size_t		R = m - r < 4 ? m - r : 4;								\
			float	   *o = out + r * ldo + j;									\
			const float *ar = a + r * lda;										\
			const BT   *bj = b + j * ldb;										\
																				\
			switch (R * 4 + J)													\
			{																	\
				case 4 + 1: dot_tile_##SFX##_##DT(1, 1, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 4 + 2: dot_tile_##SFX##_##DT(1, 2, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 4 + 3: dot_tile_##SFX##_##DT(1, 3, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 4 + 4: dot_tile_##SFX##_##DT(1, 4, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 8 + 1: dot_tile_##SFX##_##DT(2, 1, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 8 + 2: dot_tile_##SFX##_##DT(2, 2, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 8 + 3: dot_tile_##SFX##_##DT(2, 3, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 8 + 4: dot_tile_##SFX##_##DT(2, 4, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 12 + 1: dot_tile_##SFX##_##DT(3, 1, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 12 + 2: dot_tile_##SFX##_##DT(3, 2, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 12 + 3: dot_tile_##SFX##_##DT(3, 3, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 12 + 4: dot_tile_##SFX##_##DT(3, 4, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 16 + 1: dot_tile_##SFX##_##DT(4, 1, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 16 + 2: dot_tile_##SFX##_##DT(4, 2, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 16 + 3: dot_tile_##SFX##_##DT(4, 3, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				default: dot_tile_##SFX##_##DT(4, 4, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
			}																	\
		}																		\
	}																			\
}

/* out (m, n) = alpha · a (m, k) · b (k, n) + beta · out: rows of b, scaled */
#define DEFINE_GEMM_NN(SFX, TARGET)												\
static __attribute__((TARGET)) void												\
gemm_nn_##SFX(size_t m, size_t n, size_t k, float *out, size_t ldo,			\
			  const float *a, size_t lda, const void *bv, size_t ldb,			\
			  float alpha, float beta)											\
{																				\
	const float *b = (const float *) bv;										\
																				\
	for (size_t r = 0; r < m; r++)												\
	{																			\
		float	   *o = out + r * ldo;											\
																				\
		for (size_t j = 0; j < n; j++)											\
			o[j] = beta == 0.0f ? 0.0f : beta * o[j];							\
		for (size_t p = 0; p < k; p++)											\
		{																		\
			float		s = alpha * a[r * lda + p];								\
			const float *bp = b + p * ldb;										\
																				\
			for (size_t j = 0; j < n; j++)										\
				o[j] += s * bp[j];												\
		}																		\
	}																			\
}


#ifdef TF_X86
typedef float vf_v4 __attribute__((vector_size(64), aligned(4)));
typedef float vf_v3 __attribute__((vector_size(32), aligned(4)));

/* horizontal sums as trees of shuffles, not a serial chain of adds */
#define HSUM_v4(v) _mm512_reduce_add_ps((__m512) (v))
static inline __attribute__((always_inline, target("arch=x86-64-v3"))) float
hsum_v3(vf_v3 v)
{
	__m128		x = _mm_add_ps(_mm256_castps256_ps128((__m256) v), _mm256_extractf128_ps((__m256) v, 1));

	x = _mm_add_ps(x, _mm_movehl_ps(x, x));
	x = _mm_add_ss(x, _mm_movehdup_ps(x));
	return _mm_cvtss_f32(x);
}
#define HSUM_v3(v) hsum_v3(v)

#define V4_F32(p) (*(const vf_v4 *) (p))
#define V4_F16(p) ((vf_v4) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) (p))))
#define V4_BF16(p) ((vf_v4) _mm512_castsi512_ps(_mm512_slli_epi32( \
	_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *) (p))), 16)))
#define V3_F32(p) (*(const vf_v3 *) (p))
#define V3_F16(p) ((vf_v3) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (p))))
#define V3_BF16(p) ((vf_v3) _mm256_castsi256_ps(_mm256_slli_epi32( \
	_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *) (p))), 16)))

DEFINE_DOT_TILE(v4, f32, target("arch=x86-64-v4"), 16, float, V4_F32, SCALAR_F32)
DEFINE_DOT_TILE(v4, f16, target("arch=x86-64-v4"), 16, uint16_t, V4_F16, SCALAR_F16)
DEFINE_DOT_TILE(v4, bf16, target("arch=x86-64-v4"), 16, uint16_t, V4_BF16, SCALAR_BF16)
DEFINE_GEMM_NN(v4, target("arch=x86-64-v4"))
DEFINE_DOT_TILE(v3, f32, target("arch=x86-64-v3"), 8, float, V3_F32, SCALAR_F32)
DEFINE_DOT_TILE(v3, f16, target("arch=x86-64-v3"), 8, uint16_t, V3_F16, SCALAR_F16)
DEFINE_DOT_TILE(v3, bf16, target("arch=x86-64-v3"), 8, uint16_t, V3_BF16, SCALAR_BF16)
DEFINE_GEMM_NN(v3, target("arch=x86-64-v3"))
#endif

/* the portable fallback: 4-wide vectors, halves converted one by one */
typedef float vf_base __attribute__((vector_size(16), aligned(4)));

#define HSUM_base(v) (((v)[0] + (v)[2]) + ((v)[1] + (v)[3]))
#define BASE_F32(p) (*(const vf_base *) (p))
#define BASE_F16(p) ((vf_base) {SCALAR_F16((p)), SCALAR_F16((p) + 1), SCALAR_F16((p) + 2), SCALAR_F16((p) + 3)})
#define BASE_BF16(p) ((vf_base) {SCALAR_BF16((p)), SCALAR_BF16((p) + 1), SCALAR_BF16((p) + 2), SCALAR_BF16((p) + 3)})

DEFINE_DOT_TILE(base, f32, unused, 4, float, BASE_F32, SCALAR_F32)
DEFINE_DOT_TILE(base, f16, unused, 4, uint16_t, BASE_F16, SCALAR_F16)
DEFINE_DOT_TILE(base, bf16, unused, 4, uint16_t, BASE_BF16, SCALAR_BF16)
DEFINE_GEMM_NN(base, unused)

typedef void (*gemm_fn) (size_t, size_t, size_t, float *, size_t,
						 const float *, size_t, const void *, size_t, float, float);
typedef void (*convert_fn) (size_t, float *, const void *);

static gemm_fn gemm_nt[3];		/* by TfDType */
static convert_fn convert[3];	/* by TfDType; fp32 unused */
static gemm_fn gemm_nn;

#define PICK(SFX) \
	do { \
		gemm_nt[TF_F32] = gemm_nt_##SFX##_f32; \
		gemm_nt[TF_F16] = gemm_nt_##SFX##_f16; \
		gemm_nt[TF_BF16] = gemm_nt_##SFX##_bf16; \
		convert[TF_F16] = (convert_fn) convert_##SFX##_f16; \
		convert[TF_BF16] = (convert_fn) convert_##SFX##_bf16; \
		gemm_nn = gemm_nn_##SFX; \
	} while (0)

static void
pick_kernels(void)
{
	PICK(base);
#ifdef TF_X86
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		__builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
		__builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("fma"))
		PICK(v4);
	else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		PICK(v3);
#endif
}

void
tf_matmul(int m, int n, int k,
		  float *out, int ldo,
		  const float *a, int lda,
		  const float *b, int ldb,
		  bool trans_b, float alpha, float beta)
{
	if (m > SMALL_M)
	{
		cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
					m, n, k, alpha, a, lda, b, ldb, beta, out, ldo);
		return;
	}
	if (gemm_nn == NULL)
		pick_kernels();
	(trans_b ? gemm_nt[TF_F32] : gemm_nn) (m, n, k, out, ldo, a, lda, b, ldb, alpha, beta);
}

/* Rows of a half-precision b converted once per 4 rows of b, not per 4 rows of a. */
#define CONVERT_MIN_ROWS 8
#define CONVERT_MAX_K 4096

static void
linear_tiles(size_t rows, size_t out_dim, size_t in_dim, float *y, const float *x,
			 const void *w, TfDType dt)
{
	if (gemm_nn == NULL)
		pick_kernels();
	if (dt != TF_F32 && rows >= CONVERT_MIN_ROWS && in_dim <= CONVERT_MAX_K)
	{
		/*
		 * The same floats meet the same rows in the same order as in the
		 * half-precision kernel, so the results are bitwise the same.
		 */
		float		buf[4 * CONVERT_MAX_K] __attribute__((aligned(64)));
		const uint16_t *h = w;

		for (size_t j = 0; j < out_dim; j += 4)
		{
			size_t		J = out_dim - j < 4 ? out_dim - j : 4;

			convert[dt] (J * in_dim, buf, h + j * in_dim);
			gemm_nt[TF_F32] (rows, J, in_dim, y + j, out_dim, x, in_dim, buf, in_dim, 1.0f, 0.0f);
		}
		return;
	}
	gemm_nt[dt] (rows, out_dim, in_dim, y, out_dim, x, in_dim, w, in_dim, 1.0f, 0.0f);
}

static void
add_bias(size_t rows, size_t out_dim, float *y, const float *bias)
{
	if (bias)
		for (size_t r = 0; r < rows; r++)
		{
			float	   *yr = y + r * out_dim;

			for (size_t j = 0; j < out_dim; j++)
				yr[j] += bias[j];
		}
}

void
tf_linear(int rows, int out_dim, int in_dim, float *y, const float *x,
		  const void *w, TfDType dt, const float *bias)
{
	if (dt == TF_F32 && rows > SMALL_M)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, out_dim, in_dim,
					1.0f, x, in_dim, (const float *) w, in_dim, 0.0f, y, out_dim);
	else
		linear_tiles(rows, out_dim, in_dim, y, x, w, dt);
	add_bias(rows, out_dim, y, bias);
}

void
tf_linear_rows(int rows, int out_dim, int in_dim, float *y, const float *x,
			   const void *w, TfDType dt, const float *bias)
{
	linear_tiles(rows, out_dim, in_dim, y, x, w, dt);
	add_bias(rows, out_dim, y, bias);
}
