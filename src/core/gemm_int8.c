/*
 * gemm_int8.c
 *		int8 products for tf_linear: y = dequant(quant_u8(x) · W_s8ᵀ) + b.
 *		No postgres.h.
 *
 * W (out, in) is quantized once, per output row, symmetrically to s8 with
 * an fp32 scale sw (CTranslate2's scheme; tf_quantize_rows), and packed at
 * load (tf_pack_int8) in panels of TF_PANEL output rows: group g of a panel
 * holds input columns 4g..4g+3 of its 32 rows, 4 bytes per row, so that one
 * AVX-512 VNNI vpdpbusd multiplies 16 rows' groups with one row of x's group
 * broadcast.  After the panels come the rows' scales and Σ_k w[j][k].
 *
 * x (rows, in) is quantized on every call, per row, asymmetrically to u8:
 * the range [min(x, 0), max(x, 0)] onto 0..255 with scale sx and zero
 * point zx (tf_quantize_input).  Then, exactly in int32,
 *		t[r][j] = Σ_k q[r][k] w[j][k] - zx[r] Σ_k w[j][k]
 * and one dequantizing step, the same in every kernel family:
 *		y[r][j] = fma((float) t, sx[r] · sw[j], b[j])		((float) t · (sx · sw) without b)
 * Integer sums are exact whatever their order, so every family (VNNI,
 * AVX2, portable) gives bitwise the same y, and a row's result does not
 * depend on the other rows.  |t| <= in · 255 · 128, which fits int32 for
 * in <= TF_INT8_MAX_IN.
 *
 * The kernels (chosen by gemm.c's tf_gemm_kernels):
 *	VNNI: vpdpbusd (u8 × s8, 4 products summed into s32), 8 rows of x by a
 *		  panel, 16 zmm accumulators; the dequantizing step on the
 *		  accumulators.  A panel stays in cache while the rows pass.
 *	AVX2: vpmaddubsw would saturate (255 · 127 · 2 > 32767), so bytes are
 *		  widened to s16 and multiplied with vpmaddwd (pairs into s32), exact.
 *	portable: int32 arithmetic in C.
 */
#include "tensor_ops.h"
#include "threads.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define TF_X86 1
#endif

/* bytes of x's quantized rows per block (on the stack); >= one row */
#define QBLOCK_BYTES 65536
#define QBLOCK_ROWS 256

/* --------------------------------------------------------- the layout */

static inline size_t
groups_of(size_t cols)
{
	return (cols + 3) / 4;
}

static inline size_t
panels_bytes(size_t rows, size_t cols)
{
	return (rows + TF_PANEL - 1) / TF_PANEL * groups_of(cols) * TF_PANEL * 4;
}

size_t
tf_int8_packed_size(size_t rows, size_t cols)
{
	size_t		padded = (rows + TF_PANEL - 1) / TF_PANEL * TF_PANEL;

	return panels_bytes(rows, cols) + padded * (sizeof(float) + sizeof(int32_t));
}

/* scales and sums, after the panels, padded to whole panels with zeros */
static inline const float *
row_scales(const void *packed, size_t rows, size_t cols)
{
	return (const float *) ((const char *) packed + panels_bytes(rows, cols));
}

static inline const int32_t *
row_sums(const void *packed, size_t rows, size_t cols)
{
	size_t		padded = (rows + TF_PANEL - 1) / TF_PANEL * TF_PANEL;

	return (const int32_t *) (row_scales(packed, rows, cols) + padded);
}

void
tf_quantize_rows(size_t rows, size_t cols, int8_t *q, float *scale, const float *w)
{
	for (size_t r = 0; r < rows; r++)
	{
		const float *wr = w + r * cols;
		float		amax = 0.0f,
					inv;

		for (size_t c = 0; c < cols; c++)
			amax = fmaxf(amax, fabsf(wr[c]));
		scale[r] = amax / 127.0f;
		/* as torch's quantize_per_channel: round(w · (1 / scale)), to nearest even */
		inv = amax > 0.0f ? 1.0f / scale[r] : 0.0f;
		for (size_t c = 0; c < cols; c++)
		{
			float		v = rintf(wr[c] * inv);

			q[r * cols + c] = (int8_t) (v > 127.0f ? 127 : v < -127.0f ? -127 : v);
		}
	}
}

void
tf_pack_int8(size_t rows, size_t cols, void *out, const int8_t *w, const float *scale)
{
	memset(out, 0, tf_int8_packed_size(rows, cols));
	tf_pack_int8_rows(rows, cols, out, w, scale, 0, rows);
}

void
tf_pack_int8_rows(size_t rows, size_t cols, void *out, const int8_t *w, const float *scale,
				  size_t r0, size_t n)
{
	size_t		k4 = groups_of(cols);
	int8_t	   *panels = out;
	float	   *sc = (float *) row_scales(out, rows, cols);
	int32_t    *sums = (int32_t *) row_sums(out, rows, cols);

	for (size_t r = r0; r < r0 + n; r++)
	{
		int8_t	   *panel = panels + (r / TF_PANEL) * k4 * TF_PANEL * 4;
		const int8_t *row = w + (r - r0) * cols;
		int32_t		s = 0;

		for (size_t c = 0; c < cols; c++)
		{
			panel[((c / 4) * TF_PANEL + r % TF_PANEL) * 4 + c % 4] = row[c];
			s += row[c];
		}
		sc[r] = scale[r - r0];
		sums[r] = s;
	}
}

void
tf_int8_packed_row(size_t cols, float *out, const void *packed, size_t rows, size_t row)
{
	size_t		k4 = groups_of(cols);
	const int8_t *panel = (const int8_t *) packed + (row / TF_PANEL) * k4 * TF_PANEL * 4;
	float		s = row_scales(packed, rows, cols)[row];

	for (size_t c = 0; c < cols; c++)
		out[c] = (float) panel[((c / 4) * TF_PANEL + row % TF_PANEL) * 4 + c % 4] * s;
}

/* ------------------------------------------------- x, quantized per row */

static inline void
input_params(float lo, float hi, float *scale, int32_t *zero)
{
	float		s = (hi - lo) / 255.0f;

	if (s == 0.0f)
		s = 1.0f;				/* a row of zeros */
	*scale = s;
	*zero = (int32_t) lrintf(-lo / s);
}

void
tf_quantize_input(size_t k, uint8_t *q, float *scale, int32_t *zero, const float *x)
{
	float		lo = 0.0f,
				hi = 0.0f,
				inv;

	for (size_t c = 0; c < k; c++)
	{
		lo = fminf(lo, x[c]);
		hi = fmaxf(hi, x[c]);
	}
	input_params(lo, hi, scale, zero);
	inv = 1.0f / *scale;
	for (size_t c = 0; c < k; c++)
	{
		long		v = lrintf(x[c] * inv) + *zero;

		q[c] = (uint8_t) (v < 0 ? 0 : v > 255 ? 255 : v);
	}
	/* the last group's padding: 0 meets the weights' zero padding */
	for (size_t c = k; c < groups_of(k) * 4; c++)
		q[c] = 0;
}

/* A block of rows of x, quantized: row r at q + r · ld. */
typedef struct QInput
{
	size_t		ld;
	const uint8_t *q;
	const float *scale;
	const int32_t *zero;
} QInput;

/* the dequantizing step for one row of outputs, as every family does it */
static inline void
dequant_row(size_t n, float *y, const int32_t *acc, float sx, int32_t zx,
			const float *sw, const int32_t *wsum, const float *bias)
{
	for (size_t j = 0; j < n; j++)
	{
		float		t = (float) (acc[j] - zx * wsum[j]);

		y[j] = bias ? fmaf(t, sx * sw[j], bias[j]) : t * (sx * sw[j]);
	}
}

/* -------------------------------------------------------- the kernels */

/* y[:, jlo .. jhi) of (m, n), jlo a multiple of TF_PANEL */
typedef void (*int8_block_fn) (size_t m, size_t n, size_t k, float *y, const QInput *x,
							   const void *packed, const float *bias, size_t jlo, size_t jhi);

/* portable: one row of x by one panel at a time, int32 sums in C */
static void
block_base(size_t m, size_t n, size_t k, float *y, const QInput *x,
		   const void *packed, const float *bias, size_t jlo, size_t jhi)
{
	size_t		k4 = groups_of(k);
	const float *sw = row_scales(packed, n, k);
	const int32_t *wsum = row_sums(packed, n, k);

	for (size_t j0 = jlo; j0 < jhi; j0 += TF_PANEL)
	{
		const int8_t *panel = (const int8_t *) packed + j0 * k4 * 4;
		size_t		cols = n - j0 < TF_PANEL ? n - j0 : TF_PANEL;

		for (size_t r = 0; r < m; r++)
		{
			const uint8_t *xq = x->q + r * x->ld;
			int32_t		acc[TF_PANEL] = {0};

			for (size_t g = 0; g < k4; g++)
			{
				const int8_t *wg = panel + g * TF_PANEL * 4;
				const uint8_t *xg = xq + 4 * g;

				for (size_t i = 0; i < TF_PANEL; i++)
					acc[i] += xg[0] * wg[4 * i] + xg[1] * wg[4 * i + 1] +
						xg[2] * wg[4 * i + 2] + xg[3] * wg[4 * i + 3];
			}
			dequant_row(cols, y + r * n + j0, acc, x->scale[r], x->zero[r],
						sw + j0, wsum + j0, bias ? bias + j0 : NULL);
		}
	}
}

#ifdef TF_X86

#define T_VNNI __attribute__((target("arch=x86-64-v4,avx512vnni")))
#define T_AVX2 __attribute__((target("arch=x86-64-v3")))
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* 4 bytes of x as one int32, for a broadcast */
static ALWAYS_INLINE int32_t
load4(const uint8_t *p)
{
	int32_t		v;

	memcpy(&v, p, 4);
	return v;
}

/*
 * acc += u8 x · s8 w in groups of 4.  GCC 12 pairs each _mm512_dpbusd_epi32
 * on an array of accumulators with a register copy, which costs a third of
 * the speed; the instruction itself does not.
 */
static ALWAYS_INLINE T_VNNI __m512i
dpbusd(__m512i acc, __m512i x, __m512i w)
{
	__asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(x), "v"(w));
	return acc;
}

#define VNNI_MR 8
/* bytes ahead that the first block of rows prefetches weights (across panels) */
#define VNNI_PREFETCH 1024

/* a panel's scales, Σ w, bias and column masks (its last may be cut short) */
typedef struct PanelOut
{
	__m512		sw0,
				sw1,
				b0,
				b1;
	__m512i		ws0,
				ws1;
	__mmask16	mk0,
				mk1;
	bool		bias;
} PanelOut;

static ALWAYS_INLINE T_VNNI PanelOut
panel_out(size_t n, size_t j0, const float *sw, const int32_t *wsum, const float *bias)
{
	size_t		left = n - j0;
	PanelOut	o;

	o.mk0 = left >= 16 ? 0xffff : (__mmask16) ((1u << left) - 1);
	o.mk1 = left >= 32 ? 0xffff : left <= 16 ? 0 : (__mmask16) ((1u << (left - 16)) - 1);
	o.sw0 = _mm512_loadu_ps(sw + j0);
	o.sw1 = _mm512_loadu_ps(sw + j0 + 16);
	o.b0 = bias ? _mm512_maskz_loadu_ps(o.mk0, bias + j0) : _mm512_setzero_ps();
	o.b1 = bias ? _mm512_maskz_loadu_ps(o.mk1, bias + j0 + 16) : _mm512_setzero_ps();
	o.ws0 = _mm512_loadu_si512(wsum + j0);
	o.ws1 = _mm512_loadu_si512(wsum + j0 + 16);
	o.bias = bias != NULL;
	return o;
}

/*
 * One row of a panel's 32 outputs from its int32 sums a0, a1: the
 * dequantizing step of dequant_row, 16 lanes at a time (VNNI and AMX).
 */
static ALWAYS_INLINE T_VNNI void
dequant_store(float *yi, __m512i a0, __m512i a1, int32_t zero, float scale, const PanelOut *o)
{
	__m512i		z = _mm512_set1_epi32(zero);
	__m512		sx = _mm512_set1_ps(scale);
	__m512		t0 = _mm512_cvtepi32_ps(_mm512_sub_epi32(a0, _mm512_mullo_epi32(z, o->ws0))),
				t1 = _mm512_cvtepi32_ps(_mm512_sub_epi32(a1, _mm512_mullo_epi32(z, o->ws1))),
				s0 = _mm512_mul_ps(sx, o->sw0),
				s1 = _mm512_mul_ps(sx, o->sw1);

	_mm512_mask_storeu_ps(yi, o->mk0, o->bias ? _mm512_fmadd_ps(t0, s0, o->b0) : _mm512_mul_ps(t0, s0));
	_mm512_mask_storeu_ps(yi + 16, o->mk1, o->bias ? _mm512_fmadd_ps(t1, s1, o->b1) : _mm512_mul_ps(t1, s1));
}

/* mr (a constant in each inlined copy) rows of x by one panel */
static ALWAYS_INLINE T_VNNI void
vnni_tile(const int mr, const int prefetch, size_t n, size_t k4, float *y, const QInput *x,
		  const int8_t *panel, size_t j0, const float *sw, const int32_t *wsum, const float *bias)
{
	PanelOut	o = panel_out(n, j0, sw, wsum, bias);
	__m512i		acc[VNNI_MR][2];

	for (int i = 0; i < mr; i++)
		acc[i][0] = acc[i][1] = _mm512_setzero_si512();
	for (size_t g = 0; g < k4; g++)
	{
		__m512i		w0 = _mm512_loadu_si512(panel + g * TF_PANEL * 4),
					w1 = _mm512_loadu_si512(panel + g * TF_PANEL * 4 + 64);

		/*
		 * The weights stream from memory for large n; with a store stream
		 * per row of x besides, the hardware prefetcher loses them.
		 */
		if (prefetch)
			_mm_prefetch((const char *) panel + g * TF_PANEL * 4 + VNNI_PREFETCH, _MM_HINT_T0);
		for (int i = 0; i < mr; i++)
		{
			__m512i		xb = _mm512_set1_epi32(load4(x->q + i * x->ld + 4 * g));

			acc[i][0] = dpbusd(acc[i][0], xb, w0);
			acc[i][1] = dpbusd(acc[i][1], xb, w1);
		}
	}
	for (int i = 0; i < mr; i++)
		dequant_store(y + i * n + j0, acc[i][0], acc[i][1], x->zero[i], x->scale[i], &o);
}

/*
 * Rows r0..m of x by one panel, VNNI_MR at a time; the first block
 * prefetches the weights if prefetch (the panel's first pass).
 */
static ALWAYS_INLINE T_VNNI void
vnni_panel_rows(size_t r0, size_t m, int prefetch, size_t n, size_t k4, float *y, const QInput *x,
				const int8_t *panel, size_t j0, const float *sw, const int32_t *wsum, const float *bias)
{
	for (size_t r = r0; r < m; r += VNNI_MR)
	{
		QInput		xr = {x->ld, x->q + r * x->ld, x->scale + r, x->zero + r};
		float	   *yr = y + r * n;
		int			pf = prefetch && r == r0;

		switch (m - r >= VNNI_MR ? VNNI_MR : m - r)
		{
			case 1: vnni_tile(1, pf, n, k4, yr, &xr, panel, j0, sw, wsum, bias); break;
			case 2: vnni_tile(2, pf, n, k4, yr, &xr, panel, j0, sw, wsum, bias); break;
			case 3: vnni_tile(3, pf, n, k4, yr, &xr, panel, j0, sw, wsum, bias); break;
			case 4: vnni_tile(4, pf, n, k4, yr, &xr, panel, j0, sw, wsum, bias); break;
			case 5: vnni_tile(5, pf, n, k4, yr, &xr, panel, j0, sw, wsum, bias); break;
			case 6: vnni_tile(6, pf, n, k4, yr, &xr, panel, j0, sw, wsum, bias); break;
			case 7: vnni_tile(7, pf, n, k4, yr, &xr, panel, j0, sw, wsum, bias); break;
			default: vnni_tile(8, pf, n, k4, yr, &xr, panel, j0, sw, wsum, bias); break;
		}
	}
}

static T_VNNI void
block_vnni(size_t m, size_t n, size_t k, float *y, const QInput *x,
		   const void *packed, const float *bias, size_t jlo, size_t jhi)
{
	size_t		k4 = groups_of(k);
	const float *sw = row_scales(packed, n, k);
	const int32_t *wsum = row_sums(packed, n, k);

	/* panel outermost: it stays in L1/L2 while the blocks of x pass */
	for (size_t j0 = jlo; j0 < jhi; j0 += TF_PANEL)
		vnni_panel_rows(0, m, 1, n, k4, y, x, (const int8_t *) packed + j0 * k4 * 4, j0, sw, wsum, bias);
}

/*
 * AMX (Sapphire Rapids and later): tdpbusd multiplies a tile of 16 rows of
 * x by 64 bytes (u8) with a tile of 16 groups of 4 columns by 16 output
 * rows (s8), summing exactly into a 16 × 16 int32 tile: the same sums as
 * vpdpbusd, so the same y to the bit.  A panel's group g is 32 rows × 4
 * bytes, 128 bytes: its first 64 bytes are a B tile row for output rows
 * 0-15, the next 64 for rows 16-31; 16 groups at a stride of 128 bytes make
 * a B tile as the panel lies.  Tiles 0-3 hold a 32 × 32 block of sums, 4-5
 * two blocks of 16 rows of x, 6-7 the panel's two halves.  Used for shapes
 * whose in_dim is a multiple of 64 (every model's here) and blocks of at
 * least 16 rows; fewer rows go to vnni_tile.
 */
#define T_AMX __attribute__((target("arch=x86-64-v4,avx512vnni,amx-tile,amx-int8")))
#define AMX_K4 16				/* groups of 4 columns in a tile row of x */
/*
 * Columns (output rows of W) per block: the block's panels (512 KB at
 * in_dim 512) stay in L2 while every block of rows of x passes, and each
 * row of y is written 4 KB at a time.  Panel by panel, the 128 rows of a
 * beam search's output layer (58,101 columns) were written 128 bytes to a
 * page, and storing y took 78% of the product (16 ms; 7 ms so).
 */
#define AMX_NB 1024

typedef struct AmxConfig
{
	uint8_t		palette;
	uint8_t		start_row;
	uint8_t		reserved[14];
	uint16_t	colsb[16];
	uint8_t		rows[16];
} AmxConfig;

/* sums of rows r..r+mr of x (mr 16 or 32) by one panel into acc[mr][32] */
static ALWAYS_INLINE T_AMX void
amx_sums(const int mr, size_t k4, int32_t *acc, const QInput *x, const int8_t *panel)
{
	_tile_zero(0);
	_tile_zero(1);
	if (mr == 32)
	{
		_tile_zero(2);
		_tile_zero(3);
	}
	for (size_t g = 0; g < k4; g += AMX_K4)
	{
		_tile_loadd(4, x->q + 4 * g, x->ld);
		_tile_loadd(6, panel + g * TF_PANEL * 4, TF_PANEL * 4);
		_tile_loadd(7, panel + g * TF_PANEL * 4 + 64, TF_PANEL * 4);
		_tile_dpbusd(0, 4, 6);
		_tile_dpbusd(1, 4, 7);
		if (mr == 32)
		{
			_tile_loadd(5, x->q + 16 * x->ld + 4 * g, x->ld);
			_tile_dpbusd(2, 5, 6);
			_tile_dpbusd(3, 5, 7);
		}
	}
	_tile_stored(0, acc, TF_PANEL * 4);
	_tile_stored(1, acc + 16, TF_PANEL * 4);
	if (mr == 32)
	{
		_tile_stored(2, acc + 16 * TF_PANEL, TF_PANEL * 4);
		_tile_stored(3, acc + 16 * TF_PANEL + 16, TF_PANEL * 4);
	}
}

/* the dequantizing step of vnni_tile, on sums stored by amx_sums */
static ALWAYS_INLINE T_AMX void
amx_store(int mr, size_t n, float *y, const QInput *x, const int32_t *acc,
		  size_t j0, const float *sw, const int32_t *wsum, const float *bias)
{
	PanelOut	o = panel_out(n, j0, sw, wsum, bias);

	for (int i = 0; i < mr; i++)
		dequant_store(y + i * n + j0, _mm512_loadu_si512(acc + i * TF_PANEL),
					  _mm512_loadu_si512(acc + i * TF_PANEL + 16), x->zero[i], x->scale[i], &o);
}

static T_AMX void
block_amx(size_t m, size_t n, size_t k, float *y, const QInput *x,
		  const void *packed, const float *bias, size_t jlo, size_t jhi)
{
	size_t		k4 = groups_of(k);
	const float *sw = row_scales(packed, n, k);
	const int32_t *wsum = row_sums(packed, n, k);
	int32_t		acc[32 * TF_PANEL] __attribute__((aligned(64)));
	AmxConfig	cfg;

	if (k4 % AMX_K4 != 0 || m < 16)
	{
		block_vnni(m, n, k, y, x, packed, bias, jlo, jhi);
		return;
	}
	/* every tile 16 rows of 64 bytes; a thread's tiles are its own */
	memset(&cfg, 0, sizeof(cfg));
	cfg.palette = 1;
	for (int t = 0; t < 8; t++)
	{
		cfg.colsb[t] = 64;
		cfg.rows[t] = 16;
	}
	_tile_loadconfig(&cfg);
	for (size_t jb = jlo; jb < jhi; jb += AMX_NB)
	{
		size_t		je = jhi - jb < AMX_NB ? jhi : jb + AMX_NB;
		size_t		r = 0;

		for (int mr; r + 16 <= m; r += mr)
		{
			QInput		xr = {x->ld, x->q + r * x->ld, x->scale + r, x->zero + r};

			mr = r + 32 <= m ? 32 : 16;
			for (size_t j0 = jb; j0 < je; j0 += TF_PANEL)
			{
				const int8_t *panel = (const int8_t *) packed + j0 * k4 * 4;

				if (mr == 32)
					amx_sums(32, k4, acc, &xr, panel);
				else
					amx_sums(16, k4, acc, &xr, panel);
				amx_store(mr, n, y + r * n, &xr, acc, j0, sw, wsum, bias);
			}
		}
		/* fewer than 16 rows left: VNNI */
		for (size_t j0 = jb; j0 < je; j0 += TF_PANEL)
			vnni_panel_rows(r, m, 0, n, k4, y, x, (const int8_t *) packed + j0 * k4 * 4, j0, sw, wsum, bias);
	}
	_tile_release();
}

/*
 * x quantized with AVX-512: the same operations as tf_quantize_input
 * (min/max are exact in any order; x · (1 / s) rounded to nearest even).
 */
static T_VNNI void
quantize_input_avx512(size_t k, uint8_t *q, float *scale, int32_t *zero, const float *x)
{
	__m512		vlo = _mm512_setzero_ps(),
				vhi = _mm512_setzero_ps(),
				vinv;
	__m512i		vz,
				vmax = _mm512_set1_epi32(255);
	size_t		kp = groups_of(k) * 4;

	for (size_t c = 0; c < k; c += 16)
	{
		__mmask16	mk = k - c >= 16 ? 0xffff : (__mmask16) ((1u << (k - c)) - 1);
		__m512		v = _mm512_maskz_loadu_ps(mk, x + c);

		vlo = _mm512_min_ps(vlo, v);
		vhi = _mm512_max_ps(vhi, v);
	}
	input_params(_mm512_reduce_min_ps(vlo), _mm512_reduce_max_ps(vhi), scale, zero);
	vinv = _mm512_set1_ps(1.0f / *scale);
	vz = _mm512_set1_epi32(*zero);
	for (size_t c = 0; c < kp; c += 16)
	{
		/* columns k..kp are the padding: 0 */
		__mmask16	mk = k <= c ? 0 : k - c >= 16 ? 0xffff : (__mmask16) ((1u << (k - c)) - 1);
		__mmask16	mst = kp - c >= 16 ? 0xffff : (__mmask16) ((1u << (kp - c)) - 1);
		__m512i		v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + c), vinv));

		v = _mm512_min_epi32(_mm512_max_epi32(_mm512_add_epi32(v, vz), _mm512_setzero_si512()), vmax);
		v = _mm512_maskz_mov_epi32(mk, v);
		_mm512_mask_cvtepi32_storeu_epi8(q + c, mst, v);
	}
}

/*
 * AVX2: each 16 bytes of a panel group (4 rows × 4 columns) widened to s16
 * and multiplied by x's 4 columns (widened, broadcast) with vpmaddwd: 8 sums
 * of pairs, rows 4h..4h+3 × (columns 0-1, 2-3).  The pairs are added after
 * the loop; integer sums, so the order does not matter.
 */
#define AVX2_MR 2

static ALWAYS_INLINE T_AVX2 void
avx2_tile(const int mr, const int prefetch, size_t n, size_t k4, float *y, const QInput *x,
		  const int8_t *panel, size_t j0, const float *sw, const int32_t *wsum, const float *bias)
{
	__m256i		acc[AVX2_MR][8];
	size_t		cols = n - j0 < TF_PANEL ? n - j0 : TF_PANEL;

	for (int i = 0; i < mr; i++)
		for (int h = 0; h < 8; h++)
			acc[i][h] = _mm256_setzero_si256();
	for (size_t g = 0; g < k4; g++)
	{
		const int8_t *wg = panel + g * TF_PANEL * 4;
		__m256i		xb[AVX2_MR];

		/* as in vnni_tile: the weights stream from memory for large n */
		if (prefetch)
			_mm_prefetch((const char *) wg + VNNI_PREFETCH, _MM_HINT_T0);
		for (int i = 0; i < mr; i++)
		{
			__m128i		x4 = _mm_cvtsi32_si128(load4(x->q + i * x->ld + 4 * g));

			xb[i] = _mm256_broadcastq_epi64(_mm_cvtepu8_epi16(x4));
		}
		for (int h = 0; h < 8; h++)
		{
			__m256i		w = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) (wg + 16 * h)));

			for (int i = 0; i < mr; i++)
				acc[i][h] = _mm256_add_epi32(acc[i][h], _mm256_madd_epi16(xb[i], w));
		}
	}
	for (int i = 0; i < mr; i++)
	{
		int32_t		pairs[TF_PANEL * 2];
		int32_t		sums[TF_PANEL];

		for (int h = 0; h < 8; h++)
			_mm256_storeu_si256((__m256i *) (pairs + 8 * h), acc[i][h]);
		for (int j = 0; j < TF_PANEL; j++)
			sums[j] = pairs[2 * j] + pairs[2 * j + 1];
		dequant_row(cols, y + i * n + j0, sums, x->scale[i], x->zero[i],
					sw + j0, wsum + j0, bias ? bias + j0 : NULL);
	}
}

/* x quantized with AVX2: the same operations as quantize_input_avx512 */
static T_AVX2 void
quantize_input_avx2(size_t k, uint8_t *q, float *scale, int32_t *zero, const float *x)
{
	__m256		vlo = _mm256_setzero_ps(),
				vhi = _mm256_setzero_ps(),
				vinv;
	__m256i		vz,
				vmax = _mm256_set1_epi32(255);
	float		lanes_lo[8],
				lanes_hi[8],
				lo,
				hi,
				inv;
	size_t		kp = groups_of(k) * 4,
				c;

	for (c = 0; c + 8 <= k; c += 8)
	{
		__m256		v = _mm256_loadu_ps(x + c);

		vlo = _mm256_min_ps(vlo, v);
		vhi = _mm256_max_ps(vhi, v);
	}
	_mm256_storeu_ps(lanes_lo, vlo);
	_mm256_storeu_ps(lanes_hi, vhi);
	lo = lanes_lo[0];
	hi = lanes_hi[0];
	for (int l = 1; l < 8; l++)
	{
		lo = lo < lanes_lo[l] ? lo : lanes_lo[l];
		hi = hi > lanes_hi[l] ? hi : lanes_hi[l];
	}
	for (; c < k; c++)
	{
		lo = lo < x[c] ? lo : x[c];
		hi = hi > x[c] ? hi : x[c];
	}
	input_params(lo, hi, scale, zero);
	inv = 1.0f / *scale;
	vinv = _mm256_set1_ps(inv);
	vz = _mm256_set1_epi32(*zero);
	for (c = 0; c + 8 <= k; c += 8)
	{
		__m256i		v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + c), vinv));
		__m256i		p;

		v = _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(v, vz), _mm256_setzero_si256()), vmax);
		/* 8 values in 0..255 to bytes: each 128-bit lane's 4 land in its low dword */
		p = _mm256_packus_epi16(_mm256_packus_epi32(v, v), _mm256_setzero_si256());
		_mm_storel_epi64((__m128i *) (q + c),
						 _mm_unpacklo_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1)));
	}
	for (; c < k; c++)
	{
		long		v = lrintf(x[c] * inv) + *zero;

		q[c] = (uint8_t) (v < 0 ? 0 : v > 255 ? 255 : v);
	}
	/* the last group's padding: 0 meets the weights' zero padding */
	for (; c < kp; c++)
		q[c] = 0;
}

static T_AVX2 void
block_avx2_narrow(size_t m, size_t n, size_t k, float *y, const QInput *x,
		   const void *packed, const float *bias, size_t jlo, size_t jhi)
{
	size_t		k4 = groups_of(k);
	const float *sw = row_scales(packed, n, k);
	const int32_t *wsum = row_sums(packed, n, k);

	for (size_t j0 = jlo; j0 < jhi; j0 += TF_PANEL)
	{
		const int8_t *panel = (const int8_t *) packed + j0 * k4 * 4;

		for (size_t r = 0; r < m; r += AVX2_MR)
		{
			QInput		xr = {x->ld, x->q + r * x->ld, x->scale + r, x->zero + r};

			if (m - r >= 2)
				avx2_tile(2, r == 0, n, k4, y + r * n, &xr, panel, j0, sw, wsum, bias);
			else
				avx2_tile(1, r == 0, n, k4, y + r * n, &xr, panel, j0, sw, wsum, bias);
		}
	}
}

/*
 * AVX2 for 3 rows or more: the panel's weights widened to s16 once per call
 * (AVX2_KC groups at a time, on the stack), in the order vpmaddwd wants
 * them: per group, 4 vectors of 8 rows' (w0, w1) pairs, then 4 of their
 * (w2, w3) pairs; x's bytes widened once too, so that a pair (x0, x1) is
 * one vpbroadcastd from memory.  Then each accumulator holds 8 whole
 * outputs (no pair sums after), and the inner loop is vpmaddwd + vpaddd:
 * without the widening, which the tile above repeats for every 2 rows.
 * Tiles of 2 rows: the weights are operands from memory either way, and
 * 3 rows × 4 accumulators with the products in flight spilled two of
 * them every group (2 rows were 1.02-1.06x).
 */
#define AVX2_KC 64
#define AVX2_WIDE_MR 2

/* groups [g0, g0 + gn) of a panel as s16 pairs: out (gn, 8 vectors of 16) */
static T_AVX2 void
widen_panel_avx2(const int8_t *panel, size_t g0, size_t gn, int16_t *out)
{
	/* in each 128-bit lane (4 rows × 4 bytes): the rows' bytes 0-1, then 2-3 */
	const __m256i pick = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
										  0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);

	for (size_t g = 0; g < gn; g++)
	{
		const int8_t *wg = panel + (g0 + g) * TF_PANEL * 4;
		int16_t    *o = out + g * 8 * 16;

		/* the next chunk (of this panel or the next, which follows it) */
		_mm_prefetch((const char *) wg + AVX2_KC * TF_PANEL * 4, _MM_HINT_T0);
		_mm_prefetch((const char *) wg + AVX2_KC * TF_PANEL * 4 + 64, _MM_HINT_T0);

		for (int h = 0; h < 4; h++)
		{
			__m256i		v = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *) (wg + 32 * h)), pick);

			/* rows 8h..8h+7: (w0, w1) pairs from both lanes' low halves, (w2, w3) from the high */
			v = _mm256_permute4x64_epi64(v, 0xd8);
			_mm256_storeu_si256((__m256i *) (o + 16 * h), _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v)));
			_mm256_storeu_si256((__m256i *) (o + 16 * (4 + h)), _mm256_cvtepi8_epi16(_mm256_extracti128_si256(v, 1)));
		}
	}
}

/* R rows (R <= AVX2_WIDE_MR) by a panel, groups [0, gn) of the widened chunk: sums += */
static ALWAYS_INLINE T_AVX2 void
wide_tile_avx2(const int R, size_t gn, const int16_t *wbuf, const int16_t *xw, size_t ldx,
			   int32_t *sums, bool first)
{
	__m256i		acc[AVX2_WIDE_MR][4];

	for (int i = 0; i < R; i++)
		for (int h = 0; h < 4; h++)
			acc[i][h] = first ? _mm256_setzero_si256() : _mm256_loadu_si256((const __m256i *) (sums + i * TF_PANEL + 8 * h));
	for (size_t g = 0; g < gn; g++)
	{
		const __m256i *w = (const __m256i *) (wbuf + g * 8 * 16);

		for (int i = 0; i < R; i++)
		{
			int32_t		p01,
						p23;
			__m256i		x01,
						x23;

			memcpy(&p01, xw + i * ldx + 4 * g, 4);
			memcpy(&p23, xw + i * ldx + 4 * g + 2, 4);
			x01 = _mm256_set1_epi32(p01);
			x23 = _mm256_set1_epi32(p23);
			for (int h = 0; h < 4; h++)
				acc[i][h] = _mm256_add_epi32(acc[i][h], _mm256_madd_epi16(x01, _mm256_loadu_si256(w + h)));
			for (int h = 0; h < 4; h++)
				acc[i][h] = _mm256_add_epi32(acc[i][h], _mm256_madd_epi16(x23, _mm256_loadu_si256(w + 4 + h)));
		}
	}
	for (int i = 0; i < R; i++)
		for (int h = 0; h < 4; h++)
			_mm256_storeu_si256((__m256i *) (sums + i * TF_PANEL + 8 * h), acc[i][h]);
}

static T_AVX2 void
block_avx2_wide(size_t m, size_t n, size_t k, float *y, const QInput *x,
				const void *packed, const float *bias, size_t jlo, size_t jhi)
{
	size_t		k4 = groups_of(k);
	size_t		ld = x->ld;
	const float *sw = row_scales(packed, n, k);
	const int32_t *wsum = row_sums(packed, n, k);
	int16_t		wbuf[AVX2_KC * 8 * 16] __attribute__((aligned(32)));
	int32_t		sums[QBLOCK_ROWS * TF_PANEL] __attribute__((aligned(32)));
	int16_t		xw[QBLOCK_BYTES] __attribute__((aligned(32)));

	/* x's block (m rows of ld bytes, m * ld <= QBLOCK_BYTES) as s16 */
	for (size_t i = 0; i + 16 <= m * ld; i += 16)
		_mm256_storeu_si256((__m256i *) (xw + i),
							_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *) (x->q + i))));
	for (size_t i = (m * ld) / 16 * 16; i < m * ld; i++)
		xw[i] = x->q[i];

	for (size_t j0 = jlo; j0 < jhi; j0 += TF_PANEL)
	{
		const int8_t *panel = (const int8_t *) packed + j0 * k4 * 4;
		size_t		cols = n - j0 < TF_PANEL ? n - j0 : TF_PANEL;

		for (size_t g0 = 0; g0 < k4; g0 += AVX2_KC)
		{
			size_t		gn = k4 - g0 < AVX2_KC ? k4 - g0 : AVX2_KC;
			size_t		r = 0;

			widen_panel_avx2(panel, g0, gn, wbuf);
			for (; r + AVX2_WIDE_MR <= m; r += AVX2_WIDE_MR)
				wide_tile_avx2(AVX2_WIDE_MR, gn, wbuf, xw + r * ld + 4 * g0, ld, sums + r * TF_PANEL, g0 == 0);
			if (m - r == 1)
				wide_tile_avx2(1, gn, wbuf, xw + r * ld + 4 * g0, ld, sums + r * TF_PANEL, g0 == 0);
		}
		for (size_t r = 0; r < m; r++)
			dequant_row(cols, y + r * n + j0, sums + r * TF_PANEL, x->scale[r], x->zero[r],
						sw + j0, wsum + j0, bias ? bias + j0 : NULL);
	}
}

/* the AVX2 family: 1 or 2 rows widen the weights as they go, more widen them once */
static T_AVX2 void
block_avx2(size_t m, size_t n, size_t k, float *y, const QInput *x,
		   const void *packed, const float *bias, size_t jlo, size_t jhi)
{
	if (m >= 3)
		block_avx2_wide(m, n, k, y, x, packed, bias, jlo, jhi);
	else
		block_avx2_narrow(m, n, k, y, x, packed, bias, jlo, jhi);
}

static bool
cpu_has_vnni(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		__builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
		__builtin_cpu_supports("avx512vnni");
}

/*
 * AMX's tile data is a state Linux hands out on request: without
 * ARCH_REQ_XCOMP_PERM, the first tile instruction kills the process.  The
 * request holds for the whole process and its children; it fails under a
 * kernel before 5.16 and under valgrind, and then AMX is not used.
 */
static bool
cpu_has_amx(void)
{
	static int	usable = -1;

	if (usable < 0)
	{
		unsigned	a,
					b,
					c,
					d;

		/* CPUID.(7,0):EDX bit 24 AMX-TILE, bit 25 AMX-INT8 (clang 14 has no names for them) */
		usable = cpu_has_vnni() && __get_cpuid_count(7, 0, &a, &b, &c, &d) &&
			(d >> 24 & 3) == 3 &&
			syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */ , 18 /* XFEATURE_XTILEDATA */ ) == 0;
	}
	return usable;
}

static bool
cpu_has_avx2(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif							/* TF_X86 */

static int8_block_fn int8_block;
static const char *int8_name;

const char *
tf_int8_kernels(int level)
{
	int8_block = block_base;
	int8_name = "portable";
#ifdef TF_X86
	if (level < 0 && cpu_has_amx())
	{
		int8_block = block_amx;
		int8_name = "amx";
	}
	else if ((level < 0 || level >= 2) && cpu_has_vnni())
	{
		int8_block = block_vnni;
		int8_name = "avx512vnni";
	}
	else if ((level < 0 || level >= 1) && cpu_has_avx2())
	{
		int8_block = block_avx2;
		int8_name = "avx2";
	}
#endif
	return int8_name;
}

const char *
tf_int8_kernels_in_effect(void)
{
	if (int8_block == NULL)
		tf_int8_kernels(-1);
	return int8_name;
}

typedef struct Int8Job
{
	size_t		m,
				n,
				k;
	float	   *y;				/* (m, n) */
	const QInput *x;			/* (m, k) quantized */
	const void *packed;
	const float *bias;
} Int8Job;

static void
int8_part(void *arg, int part, int nparts)
{
	const Int8Job *j = arg;
	size_t		lo,
				hi;

	tf_column_block(j->n, part, nparts, &lo, &hi);
	if (lo < hi)
		int8_block(j->m, j->n, j->k, j->y, j->x, j->packed, j->bias, lo, hi);
}

void
tf_linear_int8(int rows, int out_dim, int in_dim, float *y, const float *x,
			   const void *packed, const float *bias)
{
	size_t		m = rows,
				n = out_dim,
				k = in_dim,
				ld = groups_of(k) * 4;
	size_t		block = QBLOCK_BYTES / ld;
	uint8_t		q[QBLOCK_BYTES] __attribute__((aligned(64)));
	float		scale[QBLOCK_ROWS];
	int32_t		zero[QBLOCK_ROWS];

	if (int8_block == NULL)
		tf_int8_kernels(-1);
	if (block > QBLOCK_ROWS)
		block = QBLOCK_ROWS;
	/* in_dim <= TF_INT8_MAX_IN: ld <= QBLOCK_BYTES, so block >= 1 */
	for (size_t r0 = 0; r0 < m; r0 += block)
	{
		size_t		mb = m - r0 < block ? m - r0 : block;
		QInput		qx = {ld, q, scale, zero};
		Int8Job		job = {mb, n, k, y + r0 * n, &qx, packed, bias};

		for (size_t r = 0; r < mb; r++)
		{
#ifdef TF_X86
			if (int8_block == block_vnni || int8_block == block_amx)
				quantize_input_avx512(k, q + r * ld, &scale[r], &zero[r], x + (r0 + r) * k);
			else if (int8_block == block_avx2)
				quantize_input_avx2(k, q + r * ld, &scale[r], &zero[r], x + (r0 + r) * k);
			else
#endif
				tf_quantize_input(k, q + r * ld, &scale[r], &zero[r], x + (r0 + r) * k);
		}
		/*
		 * The quantized rows are read by every thread; each writes its
		 * columns.  A byte product costs about a quarter of a float one.
		 */
		tf_parallel(tf_product_parts(mb, n, (k + 3) / 4), int8_part, &job);
	}
}
