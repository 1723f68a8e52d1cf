/*
 * bench_int8.c
 *		int8 products for the model's shapes, one thread: oneDNN's matmul
 *		against a kernel of our own, with fp32 sgemm and tf_linear as the
 *		references, to choose between the two.
 *		usage: bench_int8 [-avx2] [SECONDS]          -> every shape below
 *		       bench_int8 [-avx2] M N K [SECONDS]    -> one shape
 *		SECONDS (default 0.25) is the time spent per implementation and
 *		shape; the median of the calls is printed.  -avx2 forces our AVX2
 *		kernel on a CPU with VNNI.
 *
 * The product is y (M, N) = dequant(quant_u8(x) · W_s8ᵀ): x (M, K) fp32 is
 * quantized per row, asymmetrically, to u8 (scale sx, zero point zx) on
 * every call; W (N, K) is quantized once per output row, symmetrically, to
 * s8 (scale sw).  Then
 *		y[m][n] = sx[m] · sw[n] · (Σ_k q[m][k] w[n][k] - zx[m] · Σ_k w[n][k])
 * with the sums exact in int32.  Both int8 sides share the quantization;
 * oneDNN computes the int32 sums (u8 x s8 -> s32; oneDNN 2.6 has neither
 * per-row scales nor per-row zero points), and the same dequantizing step
 * is then a pass over its output, whereas our kernel applies it to its
 * accumulators before storing them.
 *
 * Build (no -march: the kernels are chosen at run time, as in gemm.c):
 *	gcc -std=gnu11 -O3 -Wall -Isrc/core -o bench_int8 bench/bench_int8.c \
 *		src/core/tensor_ops.c src/core/gemm.c -ldnnl -lopenblas -lm
 */
#include <cblas.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <oneapi/dnnl/dnnl.h>

#include "blas.h"
#include "tensor_ops.h"
#include "bench_util.h"

#define T512 __attribute__((target("avx512vnni,avx512bw,avx512f")))
#define T256 __attribute__((target("avx2,fma")))
#define INLINE inline __attribute__((always_inline))

/*
 * Weights are packed in panels of NR output rows; within a panel, group g
 * holds input columns 4g..4g+3 of its rows, 4 bytes per row: one vpdpbusd
 * multiplies 16 rows' groups (64 bytes) with one row of x's group
 * broadcast.  A panel streams once per block of MR rows of x.
 */
#define NR 32
#define MR 8
/* bytes ahead that the first block of rows prefetches weights (across panels) */
#define PREFETCH 1024

typedef struct QWeights
{
	int			n,
				k,
				k4;				/* groups of 4 input columns */
	int8_t	   *panels;			/* ceil(n / NR) panels of k4 · NR · 4 bytes */
	float	   *scale;			/* sw, padded to a whole panel with zeros */
	int32_t    *wsum;			/* Σ_k w[n][k], for the zero point of x */
} QWeights;

typedef struct QActs
{
	int			m,
				ld;				/* ld = 4 · k4, columns past k are 0 */
	uint8_t    *q;
	float	   *scale;
	int32_t    *zero;
} QActs;

static int	qmax = 255;			/* 127 for the AVX2 kernel (see there) */

static void *
xalloc(size_t bytes)
{
	void	   *p = aligned_alloc(64, (bytes + 63) & ~(size_t) 63);

	if (p == NULL)
		abort();
	memset(p, 0, bytes);
	return p;
}

/* w (n, k) row-major, s8, into panels; once, when the model would load */
static void
pack_weights(QWeights *qw, const int8_t *w, const float *sw, int n, int k)
{
	int			np = (n + NR - 1) / NR;

	qw->n = n;
	qw->k = k;
	qw->k4 = (k + 3) / 4;
	qw->panels = xalloc((size_t) np * qw->k4 * NR * 4);
	qw->scale = xalloc(sizeof(float) * np * NR);
	qw->wsum = xalloc(sizeof(int32_t) * np * NR);
	for (int r = 0; r < n; r++)
	{
		int8_t	   *panel = qw->panels + (size_t) (r / NR) * qw->k4 * NR * 4;
		int32_t		s = 0;

		for (int c = 0; c < k; c++)
		{
			panel[((size_t) (c / 4) * NR + r % NR) * 4 + c % 4] = w[(size_t) r * k + c];
			s += w[(size_t) r * k + c];
		}
		qw->scale[r] = sw[r];
		qw->wsum[r] = s;
	}
}

/*
 * Quantization of x, per row: the range [min(x, 0), max(x, 0)] onto
 * 0..qmax, so that 0 is exact.  Each product does it, so it is vectorized;
 * the rounding (to nearest even, x · 1/scale) is the same in both bodies.
 */
static void
row_params(float lo, float hi, float *scale, int32_t *zero)
{
	float		s = (hi - lo) / qmax;

	if (s == 0.0f)
		s = 1.0f;
	*scale = s;
	*zero = (int32_t) lrintf(-lo / s);
}

static void
quantize_scalar(QActs *qa, const float *x, int m, int k)
{
	for (int i = 0; i < m; i++)
	{
		const float *xi = x + (size_t) i * k;
		float		lo = 0.0f,
					hi = 0.0f,
					inv;

		for (int c = 0; c < k; c++)
		{
			lo = fminf(lo, xi[c]);
			hi = fmaxf(hi, xi[c]);
		}
		row_params(lo, hi, &qa->scale[i], &qa->zero[i]);
		inv = 1.0f / qa->scale[i];
		for (int c = 0; c < k; c++)
		{
			long		v = lrintf(xi[c] * inv) + qa->zero[i];

			qa->q[(size_t) i * qa->ld + c] = (uint8_t) (v < 0 ? 0 : v > qmax ? qmax : v);
		}
	}
}

T512 static void
quantize_avx512(QActs *qa, const float *x, int m, int k)
{
	for (int i = 0; i < m; i++)
	{
		const float *xi = x + (size_t) i * k;
		__m512		vlo = _mm512_setzero_ps(),
					vhi = _mm512_setzero_ps(),
					vinv;
		__m512i		vz,
					vmax = _mm512_set1_epi32(qmax);

		for (int c = 0; c < k; c += 16)
		{
			__mmask16	mk = k - c >= 16 ? 0xffff : (__mmask16) ((1u << (k - c)) - 1);
			__m512		v = _mm512_maskz_loadu_ps(mk, xi + c);

			vlo = _mm512_min_ps(vlo, v);
			vhi = _mm512_max_ps(vhi, v);
		}
		row_params(_mm512_reduce_min_ps(vlo), _mm512_reduce_max_ps(vhi),
				   &qa->scale[i], &qa->zero[i]);
		vinv = _mm512_set1_ps(1.0f / qa->scale[i]);
		vz = _mm512_set1_epi32(qa->zero[i]);
		for (int c = 0; c < k; c += 16)
		{
			__mmask16	mk = k - c >= 16 ? 0xffff : (__mmask16) ((1u << (k - c)) - 1);
			__m512i		v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(mk, xi + c), vinv));

			v = _mm512_min_epi32(_mm512_max_epi32(_mm512_add_epi32(v, vz), _mm512_setzero_si512()), vmax);
			_mm512_mask_cvtepi32_storeu_epi8(qa->q + (size_t) i * qa->ld + c, mk, v);
		}
	}
}

static int	have_avx512;

static void
quantize(QActs *qa, const float *x, int m, int k)
{
	if (have_avx512)
		quantize_avx512(qa, x, m, k);
	else
		quantize_scalar(qa, x, m, k);
}

/* 4 bytes of x as one int32, for a broadcast */
static INLINE int32_t
load4(const uint8_t *p)
{
	int32_t		v;

	memcpy(&v, p, 4);
	return v;
}

/*
 * acc += u8 x · s8 w in groups of 4.  GCC 12 pairs each _mm512_dpbusd_epi32
 * on an array of accumulators with a register copy (it does not see that
 * the accumulator is updated in place), which costs a third of the speed;
 * the instruction itself says so.
 */
static INLINE T512 __m512i
dpbusd(__m512i acc, __m512i x, __m512i w)
{
	__asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(x), "v"(w));
	return acc;
}

/*
 * One tile: mr (a constant in each inlined copy) rows of x by one panel.
 * 2 · mr accumulators + 2 weight vectors: 18 of the 32 zmm at mr = 8.
 */
static INLINE T512 void
vnni_tile(const int mr, const int prefetch, const QActs *qa, int m0, const QWeights *qw, int p, float *y, int ldy)
{
	const int8_t *panel = qw->panels + (size_t) p * qw->k4 * NR * 4;
	const uint8_t *xq = qa->q + (size_t) m0 * qa->ld;
	int			n0 = p * NR,
				left = qw->n - n0;
	__mmask16	mk0 = left >= 16 ? 0xffff : (__mmask16) ((1u << left) - 1),
				mk1 = left >= 32 ? 0xffff : left <= 16 ? 0 : (__mmask16) ((1u << (left - 16)) - 1);
	__m512i		acc[MR][2];
	__m512		sw0,
				sw1;
	__m512i		ws0,
				ws1;

	for (int i = 0; i < mr; i++)
		acc[i][0] = acc[i][1] = _mm512_setzero_si512();
	for (int g = 0; g < qw->k4; g++)
	{
		__m512i		w0 = _mm512_load_si512(panel + (size_t) g * NR * 4),
					w1 = _mm512_load_si512(panel + (size_t) g * NR * 4 + 64);

		/*
		 * The weights stream from memory for large N; with a store stream
		 * per row of x besides, the hardware prefetcher loses them.
		 */
		if (prefetch)
			_mm_prefetch((const char *) panel + (size_t) g * NR * 4 + PREFETCH, _MM_HINT_T0);

		for (int i = 0; i < mr; i++)
		{
			__m512i		xb = _mm512_set1_epi32(load4(xq + (size_t) i * qa->ld + 4 * g));

			acc[i][0] = dpbusd(acc[i][0], xb, w0);
			acc[i][1] = dpbusd(acc[i][1], xb, w1);
		}
	}
	/* the dequantizing step, in registers */
	sw0 = _mm512_loadu_ps(qw->scale + n0);
	sw1 = _mm512_loadu_ps(qw->scale + n0 + 16);
	ws0 = _mm512_loadu_si512(qw->wsum + n0);
	ws1 = _mm512_loadu_si512(qw->wsum + n0 + 16);
	for (int i = 0; i < mr; i++)
	{
		__m512i		z = _mm512_set1_epi32(qa->zero[m0 + i]);
		__m512		sx = _mm512_set1_ps(qa->scale[m0 + i]);
		float	   *yi = y + (size_t) (m0 + i) * ldy + n0;

		_mm512_mask_storeu_ps(yi, mk0,
							  _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i][0], _mm512_mullo_epi32(z, ws0))),
											_mm512_mul_ps(sx, sw0)));
		_mm512_mask_storeu_ps(yi + 16, mk1,
							  _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i][1], _mm512_mullo_epi32(z, ws1))),
											_mm512_mul_ps(sx, sw1)));
	}
}

T512 static void
linear_vnni(const QActs *qa, const QWeights *qw, float *y)
{
	int			np = (qw->n + NR - 1) / NR;

	/* panel outermost: it stays in L1/L2 while the blocks of x pass */
	for (int p = 0; p < np; p++)
		for (int m0 = 0; m0 < qa->m; m0 += MR)
		{
			switch (qa->m - m0 >= MR ? MR : qa->m - m0)
			{
				case 1: vnni_tile(1, m0 == 0, qa, m0, qw, p, y, qw->n); break;
				case 2: vnni_tile(2, m0 == 0, qa, m0, qw, p, y, qw->n); break;
				case 3: vnni_tile(3, m0 == 0, qa, m0, qw, p, y, qw->n); break;
				case 4: vnni_tile(4, m0 == 0, qa, m0, qw, p, y, qw->n); break;
				case 5: vnni_tile(5, m0 == 0, qa, m0, qw, p, y, qw->n); break;
				case 6: vnni_tile(6, m0 == 0, qa, m0, qw, p, y, qw->n); break;
				case 7: vnni_tile(7, m0 == 0, qa, m0, qw, p, y, qw->n); break;
				default: vnni_tile(8, m0 == 0, qa, m0, qw, p, y, qw->n); break;
			}
		}
}

/*
 * AVX2: vpmaddubsw multiplies u8 by s8 and adds pairs into s16 with
 * saturation, which 255 · 127 · 2 exceeds; hence activations of 0..127 on
 * this path (127 · 127 · 2 < 32767), so the sums stay exact.  vpmaddwd by
 * ones then adds the pairs into int32.  A panel is done in two halves of
 * 16 outputs (2 ymm each), 4 rows of x at a time: 8 accumulators, 16 ymm.
 */
#define MR2 4

static INLINE T256 void
avx2_tile(const int mr, const QActs *qa, int m0, const QWeights *qw, int p, int half, float *y, int ldy)
{
	const int8_t *panel = qw->panels + (size_t) p * qw->k4 * NR * 4 + half * 64;
	const uint8_t *xq = qa->q + (size_t) m0 * qa->ld;
	int			n0 = p * NR + half * 16;
	__m256i		ones = _mm256_set1_epi16(1);
	__m256i		acc[MR2][2];

	for (int i = 0; i < mr; i++)
		acc[i][0] = acc[i][1] = _mm256_setzero_si256();
	for (int g = 0; g < qw->k4; g++)
	{
		__m256i		w0 = _mm256_load_si256((const __m256i *) (panel + (size_t) g * NR * 4)),
					w1 = _mm256_load_si256((const __m256i *) (panel + (size_t) g * NR * 4 + 32));

		for (int i = 0; i < mr; i++)
		{
			__m256i		xb = _mm256_set1_epi32(load4(xq + (size_t) i * qa->ld + 4 * g));

			acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(_mm256_maddubs_epi16(xb, w0), ones));
			acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(_mm256_maddubs_epi16(xb, w1), ones));
		}
	}
	for (int i = 0; i < mr; i++)
		for (int h = 0; h < 2; h++)
		{
			int32_t		a[8];

			/* the last panel's tail goes through a buffer: AVX2 has no masked stores of bytes */
			_mm256_storeu_si256((__m256i *) a, acc[i][h]);
			for (int j = 0; j < 8 && n0 + 8 * h + j < qw->n; j++)
			{
				int			n = n0 + 8 * h + j;

				y[(size_t) (m0 + i) * ldy + n] =
					(float) (a[j] - qa->zero[m0 + i] * qw->wsum[n]) * (qa->scale[m0 + i] * qw->scale[n]);
			}
		}
}

T256 static void
linear_avx2(const QActs *qa, const QWeights *qw, float *y)
{
	int			np = (qw->n + NR - 1) / NR;

	for (int p = 0; p < np; p++)
		for (int half = 0; half < 2 && p * NR + half * 16 < qw->n; half++)
			for (int m0 = 0; m0 < qa->m; m0 += MR2)
			{
				switch (qa->m - m0 >= MR2 ? MR2 : qa->m - m0)
				{
					case 1: avx2_tile(1, qa, m0, qw, p, half, y, qw->n); break;
					case 2: avx2_tile(2, qa, m0, qw, p, half, y, qw->n); break;
					case 3: avx2_tile(3, qa, m0, qw, p, half, y, qw->n); break;
					default: avx2_tile(4, qa, m0, qw, p, half, y, qw->n); break;
				}
			}
}

/* oneDNN's int32 sums to y: the same dequantizing step, as a pass */
T512 static void
dequant_avx512(const QActs *qa, const QWeights *qw, const int32_t *acc, float *y)
{
	for (int i = 0; i < qa->m; i++)
	{
		__m512i		z = _mm512_set1_epi32(qa->zero[i]);
		__m512		sx = _mm512_set1_ps(qa->scale[i]);

		for (int n = 0; n < qw->n; n += 16)
		{
			__mmask16	mk = qw->n - n >= 16 ? 0xffff : (__mmask16) ((1u << (qw->n - n)) - 1);
			__m512i		a = _mm512_maskz_loadu_epi32(mk, acc + (size_t) i * qw->n + n);
			__m512i		c = _mm512_mullo_epi32(z, _mm512_loadu_si512(qw->wsum + n));

			_mm512_mask_storeu_ps(y + (size_t) i * qw->n + n, mk,
								  _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(a, c)),
												_mm512_mul_ps(sx, _mm512_loadu_ps(qw->scale + n))));
		}
	}
}

static void
dequant(const QActs *qa, const QWeights *qw, const int32_t *acc, float *y)
{
	if (have_avx512)
	{
		dequant_avx512(qa, qw, acc, y);
		return;
	}
	for (int i = 0; i < qa->m; i++)
		for (int n = 0; n < qw->n; n++)
			y[(size_t) i * qw->n + n] = (float) (acc[(size_t) i * qw->n + n] - qa->zero[i] * qw->wsum[n]) *
				(qa->scale[i] * qw->scale[n]);
}

/* ---- oneDNN ---- */

#define DNNL_OK(call) \
	do { \
		dnnl_status_t st_ = (call); \
		if (st_ != dnnl_success) \
		{ \
			fprintf(stderr, "%s: oneDNN status %d\n", #call, (int) st_); \
			exit(1); \
		} \
	} while (0)

typedef struct Dnnl
{
	dnnl_engine_t engine;
	dnnl_stream_t stream;
	dnnl_primitive_t matmul;
	dnnl_memory_t src,
				wei,
				dst;
	const char *impl;
} Dnnl;

/*
 * The primitive for one shape, and W reordered once into the layout it
 * chose (format "any"), as our panels are packed once: neither is timed.
 */
static void
dnnl_setup(Dnnl *d, const QActs *qa, const int8_t *w, int32_t *acc, int m, int n, int k)
{
	dnnl_memory_desc_t src_md,
				wuser_md,
				wany_md,
				dst_md;
	const dnnl_memory_desc_t *wmd;
	dnnl_dims_t src_dims = {m, k},
				src_strides = {qa->ld, 1},
				w_dims = {k, n},
				dst_dims = {m, n};
	dnnl_matmul_desc_t desc;
	dnnl_primitive_desc_t pd,
				rpd;
	dnnl_primitive_t reorder;
	dnnl_memory_t wuser;
	dnnl_exec_arg_t rargs[2];

	DNNL_OK(dnnl_engine_create(&d->engine, dnnl_cpu, 0));
	DNNL_OK(dnnl_stream_create(&d->stream, d->engine, dnnl_stream_default_flags));
	DNNL_OK(dnnl_memory_desc_init_by_strides(&src_md, 2, src_dims, dnnl_u8, src_strides));
	/* W (n, k) row-major is Wᵀ (k, n) in "ba" */
	DNNL_OK(dnnl_memory_desc_init_by_tag(&wuser_md, 2, w_dims, dnnl_s8, dnnl_ba));
	DNNL_OK(dnnl_memory_desc_init_by_tag(&wany_md, 2, w_dims, dnnl_s8, dnnl_format_tag_any));
	DNNL_OK(dnnl_memory_desc_init_by_tag(&dst_md, 2, dst_dims, dnnl_s32, dnnl_ab));
	DNNL_OK(dnnl_matmul_desc_init(&desc, &src_md, &wany_md, NULL, &dst_md));
	DNNL_OK(dnnl_primitive_desc_create(&pd, &desc, NULL, d->engine, NULL));
	DNNL_OK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &d->impl));
	wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
	DNNL_OK(dnnl_primitive_create(&d->matmul, pd));

	DNNL_OK(dnnl_memory_create(&wuser, &wuser_md, d->engine, (void *) w));
	DNNL_OK(dnnl_memory_create(&d->wei, wmd, d->engine, DNNL_MEMORY_ALLOCATE));
	DNNL_OK(dnnl_reorder_primitive_desc_create(&rpd, &wuser_md, d->engine, wmd, d->engine, NULL));
	DNNL_OK(dnnl_primitive_create(&reorder, rpd));
	rargs[0] = (dnnl_exec_arg_t) {DNNL_ARG_FROM, wuser};
	rargs[1] = (dnnl_exec_arg_t) {DNNL_ARG_TO, d->wei};
	DNNL_OK(dnnl_primitive_execute(reorder, d->stream, 2, rargs));
	DNNL_OK(dnnl_stream_wait(d->stream));
	dnnl_primitive_destroy(reorder);
	dnnl_primitive_desc_destroy(rpd);
	dnnl_memory_destroy(wuser);

	DNNL_OK(dnnl_memory_create(&d->src, &src_md, d->engine, qa->q));
	DNNL_OK(dnnl_memory_create(&d->dst, &dst_md, d->engine, acc));
	/* the string belongs to pd, which the primitive outlives: keep a copy */
	d->impl = strdup(d->impl);
	dnnl_primitive_desc_destroy(pd);
}

static void
dnnl_run(Dnnl *d)
{
	dnnl_exec_arg_t args[3] = {
		{DNNL_ARG_SRC, d->src}, {DNNL_ARG_WEIGHTS, d->wei}, {DNNL_ARG_DST, d->dst}
	};

	DNNL_OK(dnnl_primitive_execute(d->matmul, d->stream, 3, args));
	DNNL_OK(dnnl_stream_wait(d->stream));
}

static void
dnnl_teardown(Dnnl *d)
{
	dnnl_primitive_destroy(d->matmul);
	dnnl_memory_destroy(d->src);
	dnnl_memory_destroy(d->wei);
	dnnl_memory_destroy(d->dst);
	dnnl_stream_destroy(d->stream);
	dnnl_engine_destroy(d->engine);
	free((void *) d->impl);
}

/* ---- timing ---- */

enum
{
	IMPL_QUANT,					/* quantizing x alone (part of both int8 rows) */
	IMPL_DNNL_EXEC,				/* oneDNN's primitive alone */
	IMPL_DNNL,					/* quantize + oneDNN + dequantizing pass */
	IMPL_OWN,					/* quantize + our kernel */
	IMPL_SGEMM,					/* fp32 x · fp32 Wᵀ */
	IMPL_F32,					/* tf_linear, fp32 panels */
	IMPL_F16,					/* tf_linear, fp16 panels */
	NIMPL
};

static const char *const impl_names[NIMPL] = {
	"quant", "dnnl-exec", "dnnl", "own", "sgemm", "linear-f32", "linear-f16"
};

typedef struct Shape
{
	int			m,
				n,
				k;
	float	   *x,
			   *y;
	float	   *wf;				/* W as dequantized fp32, for the fp32 rows */
	void	   *pf32,
			   *pf16;
	QActs		qa;
	QWeights	qw;
	int32_t    *acc;
	Dnnl		dnnl;
	int			use_avx2;
} Shape;

static void
run_impl(Shape *s, int impl)
{
	switch (impl)
	{
		case IMPL_QUANT:
			quantize(&s->qa, s->x, s->m, s->k);
			break;
		case IMPL_DNNL_EXEC:
			dnnl_run(&s->dnnl);
			break;
		case IMPL_DNNL:
			quantize(&s->qa, s->x, s->m, s->k);
			dnnl_run(&s->dnnl);
			dequant(&s->qa, &s->qw, s->acc, s->y);
			break;
		case IMPL_OWN:
			quantize(&s->qa, s->x, s->m, s->k);
			if (s->use_avx2)
				linear_avx2(&s->qa, &s->qw, s->y);
			else
				linear_vnni(&s->qa, &s->qw, s->y);
			break;
		case IMPL_SGEMM:
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->m, s->n, s->k, 1.0f,
						s->x, s->k, s->wf, s->k, 0.0f, s->y, s->n);
			break;
		case IMPL_F32:
			tf_linear(s->m, s->n, s->k, s->y, s->x, s->pf32, TF_F32, NULL);
			break;
		case IMPL_F16:
			tf_linear(s->m, s->n, s->k, s->y, s->x, s->pf16, TF_F16, NULL);
			break;
	}
}

/* median seconds per call over `seconds` of calls (at least 5), after one warm-up call */
static double
time_impl(Shape *s, int impl, double seconds)
{
	static double t[100000];
	int			reps = 0;
	double		start;

	run_impl(s, impl);
	start = now();
	while (reps < 100000 && (reps < 5 || now() - start < seconds))
	{
		double		t0 = now();

		run_impl(s, impl);
		t[reps++] = now() - t0;
	}
	qsort(t, reps, sizeof(double), cmp_double);
	return t[reps / 2];
}

/* ---- checks ---- */

/*
 * max |y - ref| over the rows (all) and columns (every `step`-th) where
 * ref is the quantized product computed in double; also max |ref| for scale.
 */
static double
max_diff(const Shape *s, const int8_t *w, const float *sw, const float *y, int step, double *refmax)
{
	double		d = 0.0;

	*refmax = 0.0;
	for (int i = 0; i < s->m; i++)
		for (int n = 0; n < s->n; n += step)
		{
			double		acc = 0.0,
						ref;

			for (int c = 0; c < s->k; c++)
				acc += (double) s->qa.q[(size_t) i * s->qa.ld + c] * w[(size_t) n * s->k + c];
			ref = (double) s->qa.scale[i] * sw[n] * (acc - (double) s->qa.zero[i] * s->qw.wsum[n]);
			d = fmax(d, fabs(y[(size_t) i * s->n + n] - ref));
			*refmax = fmax(*refmax, fabs(ref));
		}
	return d;
}

__attribute__((target("f16c")))
static uint16_t
to_half(float f)
{
	return (uint16_t) _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

static void
bench_shape(int m, int n, int k, double seconds, int use_avx2)
{
	Shape		s = {.m = m, .n = n, .k = k, .use_avx2 = use_avx2};
	int8_t	   *w = xalloc((size_t) n * k);
	float	   *sw = xalloc(sizeof(float) * n);
	uint16_t   *wh = xalloc(sizeof(uint16_t) * (size_t) n * k);
	float	   *yref;
	double		t[NIMPL],
				refmax,
				dq,
				dd,
				dod,
				dsg;
	int			step = (double) m * n * k > 3e8 ? 97 : 1;

	/* weights like a trained layer's: roughly normal, per-row ranges that differ */
	s.x = xalloc(sizeof(float) * (size_t) m * k);
	s.y = xalloc(sizeof(float) * (size_t) m * n);
	yref = xalloc(sizeof(float) * (size_t) m * n);
	s.wf = xalloc(sizeof(float) * (size_t) n * k);
	srand(1);
	for (size_t i = 0; i < (size_t) m * k; i++)
		s.x[i] = ((float) rand() / RAND_MAX - 0.5f) * 4.0f;
	for (int r = 0; r < n; r++)
	{
		float		range = 0.02f + 0.08f * rand() / RAND_MAX,
					amax = 0.0f;
		float	   *row = s.wf + (size_t) r * k;

		for (int c = 0; c < k; c++)
		{
			row[c] = range * (((float) rand() / RAND_MAX - 0.5f) + ((float) rand() / RAND_MAX - 0.5f));
			amax = fmaxf(amax, fabsf(row[c]));
		}
		sw[r] = amax > 0.0f ? amax / 127.0f : 1.0f;
		for (int c = 0; c < k; c++)
		{
			w[(size_t) r * k + c] = (int8_t) lrintf(row[c] / sw[r]);
			/* the fp32 paths get the same (dequantized) weights */
			row[c] = w[(size_t) r * k + c] * sw[r];
			wh[(size_t) r * k + c] = to_half(row[c]);
		}
	}
	pack_weights(&s.qw, w, sw, n, k);
	s.qa.m = m;
	s.qa.ld = s.qw.k4 * 4;
	s.qa.q = xalloc((size_t) m * s.qa.ld);
	s.qa.scale = xalloc(sizeof(float) * m);
	s.qa.zero = xalloc(sizeof(int32_t) * m);
	s.acc = xalloc(sizeof(int32_t) * (size_t) m * n);
	s.pf32 = xalloc(tf_packed_size(n, k, TF_F32));
	tf_pack_panels(n, k, s.pf32, s.wf, TF_F32);
	s.pf16 = xalloc(tf_packed_size(n, k, TF_F16));
	tf_pack_panels(n, k, s.pf16, wh, TF_F16);
	free(wh);
	dnnl_setup(&s.dnnl, &s.qa, w, s.acc, m, n, k);

	/* checks: own and oneDNN against the double reference, and each other; sgemm for scale */
	run_impl(&s, IMPL_OWN);
	dq = max_diff(&s, w, sw, s.y, step, &refmax);
	memcpy(yref, s.y, sizeof(float) * (size_t) m * n);
	run_impl(&s, IMPL_DNNL);
	dd = max_diff(&s, w, sw, s.y, step, &refmax);
	dod = 0.0;
	for (size_t i = 0; i < (size_t) m * n; i++)
		dod = fmax(dod, fabs(s.y[i] - yref[i]));
	run_impl(&s, IMPL_SGEMM);
	dsg = 0.0;
	for (size_t i = 0; i < (size_t) m * n; i++)
		dsg = fmax(dsg, fabs(s.y[i] - yref[i]));

	for (int i = 0; i < NIMPL; i++)
		t[i] = time_impl(&s, i, seconds);

	printf("M=%d N=%d K=%d  [oneDNN: %s]\n", m, n, k, s.dnnl.impl);
	printf("  max|y|=%.3g  max abs diff: own-ref %.3g  dnnl-ref %.3g  own-dnnl %.3g  own-sgemm(fp32 x) %.3g\n",
		   refmax, dq, dd, dod, dsg);
	for (int i = 0; i < NIMPL; i++)
	{
		double		wbytes = i == IMPL_SGEMM || i == IMPL_F32 ? 4.0 : i == IMPL_F16 ? 2.0 : 1.0;

		if (i == IMPL_QUANT)
			printf("  %-10s %9.4f ms\n", impl_names[i], t[i] * 1e3);
		else
			printf("  %-10s %9.4f ms %8.1f GOP/s %7.1f weight GB/s\n", impl_names[i], t[i] * 1e3,
				   2.0 * m * n * k / t[i] / 1e9, wbytes * n * k / t[i] / 1e9);
	}
	/* one machine-readable line per shape, for collecting runs */
	printf("CSV,%d,%d,%d", m, n, k);
	for (int i = 0; i < NIMPL; i++)
		printf(",%.6f", t[i] * 1e3);
	printf(",%.3g,%.3g,%.3g,%.3g\n", dq, dd, dod, refmax);
	fflush(stdout);

	dnnl_teardown(&s.dnnl);
	free(s.x);
	free(s.y);
	free(yref);
	free(s.wf);
	free(s.pf32);
	free(s.pf16);
	free(w);
	free(sw);
	free(s.qw.panels);
	free(s.qw.scale);
	free(s.qw.wsum);
	free(s.qa.q);
	free(s.qa.scale);
	free(s.qa.zero);
	free(s.acc);
}

int
main(int argc, char **argv)
{
	static const int ms[] = {1, 4, 16, 64, 128};
	static const int nks[][2] = {{512, 512}, {2048, 512}, {512, 2048}, {58101, 512}};
	int			use_avx2 = 0;
	double		seconds = 0.25;
	int			a = 1;

	/*
	 * Debian's oneDNN runs on OpenMP, which reads OMP_NUM_THREADS when it
	 * loads, before main: so set it and start again.
	 */
	if (getenv("OMP_NUM_THREADS") == NULL || strcmp(getenv("OMP_NUM_THREADS"), "1") != 0)
	{
		setenv("OMP_NUM_THREADS", "1", 1);
		execv("/proc/self/exe", argv);
		perror("execv");
		return 1;
	}
	__builtin_cpu_init();
	have_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		__builtin_cpu_supports("avx512vnni");
	if (a < argc && strcmp(argv[a], "-avx2") == 0)
	{
		use_avx2 = 1;
		a++;
	}
	if (!have_avx512)
		use_avx2 = 1;
	if (use_avx2 && !__builtin_cpu_supports("avx2"))
	{
		fprintf(stderr, "bench_int8: needs AVX2 or AVX-512 VNNI\n");
		return 2;
	}
	if (use_avx2)
		qmax = 127;
	tf_blas_init();
	tf_set_blas_threads(1);
	{
		const dnnl_version_t *v = dnnl_version();

		printf("oneDNN %d.%d.%d (%s), kernel %s, OpenBLAS %s, activations 0..%d\n",
			   v->major, v->minor, v->patch, v->hash, use_avx2 ? "AVX2" : "AVX-512 VNNI",
			   openblas_get_corename(), qmax);
	}
	if (argc - a >= 3)
	{
		int			m = atoi(argv[a]),
					n = atoi(argv[a + 1]),
					k = atoi(argv[a + 2]);

		if (argc - a >= 4)
			seconds = atof(argv[a + 3]);
		if (m < 1 || n < 1 || k < 1)
			return 2;
		bench_shape(m, n, k, seconds, use_avx2);
		return 0;
	}
	if (argc - a == 1)
		seconds = atof(argv[a]);
	for (size_t j = 0; j < sizeof(nks) / sizeof(nks[0]); j++)
		for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++)
			bench_shape(ms[i], nks[j][0], nks[j][1], seconds, use_avx2);
	return 0;
}
