/*
 * gemm_bf16.c
 *		tf_linear in bf16 (TF_BF16D, the opt-in compute type bf16):
 *		y = bf16(x) · bf16(W)ᵀ + b, the products summed in fp32.  No postgres.h.
 *
 * W (out, in) is rounded to bf16 once, at load (to nearest even, as
 * torch.Tensor.to(torch.bfloat16)), and packed in panels of TF_PANEL output
 * rows: pair q of a panel holds input columns 2q and 2q+1 of its 32 rows,
 * 4 bytes per row, so that one AVX512_BF16 vdpbf16ps multiplies 16 rows'
 * pairs with one pair of x broadcast.  An odd last column is paired with 0.
 *
 * x (rows, in) is rounded to bf16 on every call, the same way.  Each output
 * is then, exactly as vdpbf16ps computes it lane by lane:
 *		acc = 0; for q: acc += x[2q+1]·w[2q+1]; acc += x[2q]·w[2q]
 * in fp32, each product exact (8-bit by 8-bit significands) and each sum
 * rounded; then + b.  The portable kernel does the same sums in the same
 * order, so both families give the same y (but for subnormal numbers, which
 * vdpbf16ps flushes to zero), and a row's result does not depend on the
 * other rows.  Twice the multiply-adds per instruction of fp32 FMA, and
 * half the bytes of fp32 weights to read.
 */
#include "tensor_ops.h"
#include "threads.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TF_X86 1
#endif

/* rows of x rounded per block: a block's bf16 copy stays on the stack (one row at least: in <= TF_BF16_MAX_IN) */
#define XBLOCK_BYTES (TF_BF16_MAX_IN * 2)

static inline size_t
pairs_of(size_t cols)
{
	return (cols + 1) / 2;
}

/* f to bf16, to nearest even (a NaN stays a NaN) */
static inline uint16_t
to_bf16(float f)
{
	uint32_t	u;

	memcpy(&u, &f, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t) ((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t) (u >> 16);
}

static inline float
from_bf16(uint16_t h)
{
	uint32_t	u = (uint32_t) h << 16;
	float		f;

	memcpy(&f, &u, 4);
	return f;
}

size_t
tf_bf16d_packed_size(size_t rows, size_t cols)
{
	size_t		panels = (rows + TF_PANEL - 1) / TF_PANEL;

	return panels * TF_PANEL * pairs_of(cols) * 2 * sizeof(uint16_t);
}

void
tf_pack_bf16d_rows(size_t rows, size_t cols, void *out, const void *w, TfDType src,
				   size_t r0, size_t n)
{
	size_t		k2 = pairs_of(cols);
	uint16_t   *o = out;
	float		row[256];

	(void) rows;
	for (size_t r = r0; r < r0 + n; r++)
	{
		uint16_t   *panel = o + (r / TF_PANEL) * k2 * TF_PANEL * 2;
		const char *in = (const char *) w + (r - r0) * cols * tf_dtype_size(src);

		for (size_t c0 = 0; c0 < cols; c0 += 256)
		{
			size_t		nc = cols - c0 < 256 ? cols - c0 : 256;

			tf_to_float(nc, row, in + c0 * tf_dtype_size(src), src);
			for (size_t c = 0; c < nc; c++)
				panel[(((c0 + c) / 2) * TF_PANEL + r % TF_PANEL) * 2 + (c0 + c) % 2] = to_bf16(row[c]);
		}
	}
}

void
tf_bf16d_packed_row(size_t cols, float *out, const void *packed, size_t row)
{
	size_t		k2 = pairs_of(cols);
	const uint16_t *panel = (const uint16_t *) packed + (row / TF_PANEL) * k2 * TF_PANEL * 2;

	for (size_t c = 0; c < cols; c++)
		out[c] = from_bf16(panel[((c / 2) * TF_PANEL + row % TF_PANEL) * 2 + c % 2]);
}

/* x (k) as bf16 pairs: xb (pairs_of(k) uint32, the even column in the low half) */
static void
round_input(size_t k, uint32_t *xb, const float *x)
{
	for (size_t q = 0; q < k / 2; q++)
		xb[q] = (uint32_t) to_bf16(x[2 * q]) | ((uint32_t) to_bf16(x[2 * q + 1]) << 16);
	if (k % 2)
		xb[k / 2] = to_bf16(x[k - 1]);
}

/* ------------------------------------------------------------ portable */

/* y[r][j0..j0+cols) for R rows of xb and one panel */
static void
panel_base(size_t R, size_t k2, float *y, size_t ldy, size_t cols, const uint32_t *xb,
		   const uint16_t *panel, const float *bias)
{
	for (size_t r = 0; r < R; r++)
	{
		float		acc[TF_PANEL] = {0};

		for (size_t q = 0; q < k2; q++)
		{
			uint32_t	xq = xb[r * k2 + q];
			float		xe = from_bf16((uint16_t) (xq & 0xffff));
			float		xo = from_bf16((uint16_t) (xq >> 16));
			const uint16_t *w = panel + q * TF_PANEL * 2;

			for (size_t i = 0; i < TF_PANEL; i++)
			{
				acc[i] += xo * from_bf16(w[2 * i + 1]);
				acc[i] += xe * from_bf16(w[2 * i]);
			}
		}
		for (size_t j = 0; j < cols; j++)
			y[r * ldy + j] = bias ? acc[j] + bias[j] : acc[j];
	}
}

/* ------------------------------------------------------------ AVX512_BF16 */

#ifdef TF_X86
#define BF16_TARGET __attribute__((target("avx512f,avx512bf16")))
#define MR 12

/*
 * R rows (R <= MR) by NP panels (1, or 4 for R <= 2): two zmm of 16 outputs
 * per row and panel, at most 24 accumulators.  With few rows (decoding)
 * four panels give the multiply-adds enough independent chains.
 */
static inline __attribute__((always_inline)) BF16_TARGET void
tile_avx512(size_t R, size_t NP, size_t k2, float *y, size_t ldy, size_t cols, const uint32_t *xb,
			const uint16_t *panel, const float *bias)
{
	__m512		acc[MR][8];

	for (size_t r = 0; r < R; r++)
		for (size_t i = 0; i < 2 * NP; i++)
			acc[r][i] = _mm512_setzero_ps();
	for (size_t q = 0; q < k2; q++)
	{
		__m512bh	w[8];

		for (size_t p = 0; p < NP; p++)
		{
			const uint16_t *wp = panel + (p * k2 + q) * TF_PANEL * 2;

			w[2 * p] = (__m512bh) _mm512_loadu_si512(wp);
			w[2 * p + 1] = (__m512bh) _mm512_loadu_si512(wp + 32);
		}
		for (size_t r = 0; r < R; r++)
		{
			__m512bh	xv = (__m512bh) _mm512_set1_epi32((int) xb[r * k2 + q]);

			for (size_t i = 0; i < 2 * NP; i++)
				acc[r][i] = _mm512_dpbf16_ps(acc[r][i], w[i], xv);
		}
	}
	for (size_t r = 0; r < R; r++)
		for (size_t p = 0; p < NP; p++)
		{
			float	   *yo = y + r * ldy + p * TF_PANEL;
			const float *bp = bias ? bias + p * TF_PANEL : NULL;
			size_t		c = NP > 1 ? TF_PANEL : cols;

			if (c == TF_PANEL)
				for (size_t h = 0; h < 2; h++)
					_mm512_storeu_ps(yo + 16 * h, bp ? _mm512_add_ps(acc[r][2 * p + h], _mm512_loadu_ps(bp + 16 * h))
									 : acc[r][2 * p + h]);
			else
			{
				float		t[TF_PANEL];

				_mm512_storeu_ps(t, acc[r][2 * p]);
				_mm512_storeu_ps(t + 16, acc[r][2 * p + 1]);
				for (size_t j = 0; j < c; j++)
					yo[j] = bp ? t[j] + bp[j] : t[j];
			}
		}
}

#define TILE1(R) tile_avx512(R, 1, k2, y + r * n + j, n, cols, xb + r * k2, w + j * k2 * 2, bias ? bias + j : NULL)

static BF16_TARGET void
block_avx512(size_t m, size_t n, size_t k2, float *y, const uint32_t *xb, const uint16_t *w,
			 size_t jlo, size_t jhi, const float *bias)
{
	size_t		j = jlo;

	if (m <= 2)
		for (; j + 4 * TF_PANEL <= jhi; j += 4 * TF_PANEL)
		{
			if (m == 1)
				tile_avx512(1, 4, k2, y + j, n, TF_PANEL, xb, w + j * k2 * 2, bias ? bias + j : NULL);
			else
				tile_avx512(2, 4, k2, y + j, n, TF_PANEL, xb, w + j * k2 * 2, bias ? bias + j : NULL);
		}
	/* each panel is read from memory once and meets every row of x */
	for (; j < jhi; j += TF_PANEL)
	{
		size_t		cols = jhi - j < TF_PANEL ? jhi - j : TF_PANEL;

		for (size_t r = 0; r < m; r += MR)
		{
			switch (m - r < MR ? m - r : MR)
			{
				case 1: TILE1(1); break;
				case 2: TILE1(2); break;
				case 3: TILE1(3); break;
				case 4: TILE1(4); break;
				case 5: TILE1(5); break;
				case 6: TILE1(6); break;
				case 7: TILE1(7); break;
				case 8: TILE1(8); break;
				case 9: TILE1(9); break;
				case 10: TILE1(10); break;
				case 11: TILE1(11); break;
				default: TILE1(MR); break;
			}
		}
	}
}

static bool
cpu_has_bf16(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
}
#endif

static void
block_base(size_t m, size_t n, size_t k2, float *y, const uint32_t *xb, const uint16_t *w,
		   size_t jlo, size_t jhi, const float *bias)
{
	for (size_t j = jlo; j < jhi; j += TF_PANEL)
		panel_base(m, k2, y + j, n, jhi - j < TF_PANEL ? jhi - j : TF_PANEL, xb, w + j * k2 * 2,
				   bias ? bias + j : NULL);
}

typedef void (*block_fn) (size_t, size_t, size_t, float *, const uint32_t *, const uint16_t *,
						  size_t, size_t, const float *);
static block_fn bf16_block;

const char *
tf_bf16_kernels(int level)
{
	bf16_block = block_base;
#ifdef TF_X86
	if ((level < 0 || level >= 2) && cpu_has_bf16())
		bf16_block = block_avx512;
#endif
	return tf_bf16_kernels_in_effect();
}

const char *
tf_bf16_kernels_in_effect(void)
{
	if (bf16_block == NULL)
		tf_bf16_kernels(-1);
#ifdef TF_X86
	if (bf16_block == block_avx512)
		return "avx512bf16";
#endif
	return "portable";
}

typedef struct Bf16Job
{
	size_t		m,
				n,
				k2;
	float	   *y;
	const uint32_t *xb;
	const uint16_t *w;
	const float *bias;
} Bf16Job;

static void
bf16_part(void *arg, int part, int nparts)
{
	const Bf16Job *j = arg;
	size_t		lo,
				hi;

	tf_column_block(j->n, part, nparts, &lo, &hi);
	if (lo < hi)
		bf16_block(j->m, j->n, j->k2, j->y, j->xb, j->w, lo, hi, j->bias);
}

void
tf_linear_bf16d(int rows, int out_dim, int in_dim, float *y, const float *x,
				const void *packed, const float *bias)
{
	size_t		m = rows,
				n = out_dim,
				k = in_dim,
				k2 = pairs_of(k);
	size_t		block = XBLOCK_BYTES / (k2 * sizeof(uint32_t));
	uint32_t	xb[XBLOCK_BYTES / sizeof(uint32_t)] __attribute__((aligned(64)));

	if (bf16_block == NULL)
		tf_bf16_kernels(-1);
	for (size_t r0 = 0; r0 < m; r0 += block)
	{
		size_t		mb = m - r0 < block ? m - r0 : block;
		Bf16Job		job = {mb, n, k2, y + r0 * n, xb, packed, bias};

		for (size_t r = 0; r < mb; r++)
			round_input(k, xb + r * k2, x + (r0 + r) * k);
		tf_parallel(tf_product_parts(mb, n, k2), bf16_part, &job);
	}
}
