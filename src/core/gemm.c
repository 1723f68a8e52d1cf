/*
 * gemm.c
 *		Matrix products.  No postgres.h.
 *
 * tf_matmul (fp32, row-major, for attention): OpenBLAS's sgemm, except for
 * a few rows of a (decoding: one query per beam), where sgemm's packing of
 * b on every call costs more than the product; those are done here as dot
 * products, each row of b read once and met by up to 4 rows of a.
 *
 * tf_linear (x · Wᵀ + b for the model's layers): W is packed once, when the
 * model loads, into panels of TF_PANEL output rows stored column by column
 * (see tensor_ops.h), in its stored dtype.  A step of the kernel loads one
 * panel column (32 weights: one cache line in fp16), converts it in
 * registers, and multiplies it with the same input column of up to 12 rows
 * of x, each broadcast: the weights stream from memory once per call, in
 * half the bytes for fp16 and bf16, and no horizontal sums are needed.
 * Each output is accumulated over the input in order, one fused
 * multiply-add at a time, whatever the number of rows: a row's result does
 * not depend on the other rows, so a sentence decodes the same alone or in
 * a batch.
 *
 * An fp16 or bf16 panel met by more than one block of rows is converted
 * once (a chunk of it at AVX2), into an fp32 buffer that the tiles read:
 * converting in every tile took the multiply-adds' ports (at AVX2, fp16
 * ran at 0.7x fp32).  The AVX2 and portable kernels take a panel 256
 * inputs at a time (LINEAR_KC_*), keeping the sums in y between chunks,
 * so that the chunk stays in L1 while every block of rows passes.  For
 * products whose weights stream from memory, the AVX-512 kernel reads x
 * packed, a block of 12 rows column by column (pack_rows).  Each is the
 * same sums in the same order.
 *
 * One body per vector width (AVX-512, AVX2 + FMA, SSE2), chosen at run
 * time; the tile shapes are constants in every inlined copy, so the
 * accumulators stay in registers.
 */
#include "tensor_ops.h"
#include "blas.h"
#include "threads.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TF_X86 1
#endif

/* Up to this many rows of a, tf_matmul's products are done here. */
#define SMALL_M TF_SMALL_M

/* ------------------------------------------------------ packed panels */

size_t
tf_packed_size(size_t rows, size_t cols, TfDType dt)
{
	size_t		panels = (rows + TF_PANEL - 1) / TF_PANEL;

	if (dt == TF_I8)
		return tf_int8_packed_size(rows, cols);
	if (dt == TF_BF16D)
		return tf_bf16d_packed_size(rows, cols);
	return panels * TF_PANEL * cols * tf_dtype_size(dt);
}

void
tf_pack_panels(size_t rows, size_t cols, void *out, const void *w, TfDType dt)
{
	memset(out, 0, tf_packed_size(rows, cols, dt));
	tf_pack_panel_rows(rows, cols, out, w, dt, 0, rows);
}

void
tf_pack_panel_rows(size_t rows, size_t cols, void *out, const void *w, TfDType dt, size_t r0, size_t n)
{
	size_t		es = tf_dtype_size(dt);
	char	   *o = out;
	const char *in = w;

	(void) rows;
	for (size_t r = r0; r < r0 + n; r++)
	{
		size_t		base = (r / TF_PANEL) * TF_PANEL * cols;
		const char *row = in + (r - r0) * cols * es;

		for (size_t p = 0; p < cols; p++)
			memcpy(o + (base + p * TF_PANEL + r % TF_PANEL) * es, row + p * es, es);
	}
}

void
tf_packed_row(size_t rows, size_t cols, float *out, const void *packed, TfDType dt, size_t row)
{
	size_t		base = (row / TF_PANEL) * TF_PANEL * cols + row % TF_PANEL;

	if (dt == TF_I8)
	{
		tf_int8_packed_row(cols, out, packed, rows, row);
		return;
	}
	if (dt == TF_BF16D)
	{
		tf_bf16d_packed_row(cols, out, packed, row);
		return;
	}

	/*
	 * Each element is a cache line of its own (TF_PANEL apart): the raw
	 * values are gathered first in a tight loop, whose loads overlap, then
	 * converted (a call per element kept one miss in flight: 2.5% of the
	 * bundled model's batch, fetching the decoder's input embeddings from
	 * the tied output layer).
	 */
	if (dt == TF_F32)
	{
		const char *src = (const char *) packed + base * sizeof(float);

		for (size_t p = 0; p < cols; p++)
			memcpy(out + p, src + p * TF_PANEL * sizeof(float), sizeof(float));
		return;
	}
	for (size_t p0 = 0; p0 < cols; p0 += 256)
	{
		uint16_t	raw[256];
		size_t		n = cols - p0 < 256 ? cols - p0 : 256;
		const char *src = (const char *) packed + (base + p0 * TF_PANEL) * sizeof(uint16_t);

		for (size_t p = 0; p < n; p++)
			memcpy(raw + p, src + p * TF_PANEL * sizeof(uint16_t), sizeof(uint16_t));
		tf_to_float(n, out + p0, raw, dt);
	}
}

/* ------------------------------------------------------------- kernels */

/*
 * Each thread's buffers, kept between calls and freed when the thread ends
 * (a key's destructor: the pool's threads end when transformer.threads
 * changes): a panel converted to fp32, and x packed (pack_rows).
 */
typedef struct ThreadBuffers
{
	float	   *panel;			/* (TF_PANEL · kc) */
	size_t		panel_floats;
	float	   *xpack;			/* (rows · k) */
	size_t		xpack_floats;
} ThreadBuffers;

static __thread ThreadBuffers tbuf;
static pthread_key_t tbuf_key;
static pthread_once_t tbuf_once = PTHREAD_ONCE_INIT;
static bool tbuf_key_made;

static void
tbuf_free(void *arg)
{
	ThreadBuffers *b = arg;

	free(b->panel);
	free(b->xpack);
	memset(b, 0, sizeof(*b));
}

static void
tbuf_make_key(void)
{
	tbuf_key_made = pthread_key_create(&tbuf_key, tbuf_free) == 0;
}

/* *buf grown to at least floats (64-byte aligned); NULL if it cannot be had */
static float *
thread_buffer(float **buf, size_t *have, size_t floats)
{
	if (floats <= *have)
		return *buf;
	pthread_once(&tbuf_once, tbuf_make_key);
	if (!tbuf_key_made || pthread_setspecific(tbuf_key, &tbuf) != 0)
		return NULL;
	free(*buf);
	*buf = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
	*have = *buf ? floats : 0;
	return *buf;
}

/*
 * Inputs per chunk of a panel, for products of more than one block of
 * rows: k in equal chunks of at most linear_kc (0: whole panels).  Set by
 * the kernels chosen (LINEAR_KC_*, below) or by the unit tests.
 */
static size_t linear_kc;
static size_t linear_kc_test;

static size_t
linear_chunk(size_t k)
{
	size_t		kc = linear_kc_test ? linear_kc_test : linear_kc,
				chunks = kc ? (k + kc - 1) / kc : 1;

	return chunks > 1 ? (k + chunks - 1) / chunks : (k ? k : 1);
}

void
tf_linear_chunk_limit(size_t kc)
{
	linear_kc_test = kc;
}

/* this thread's buffer for a panel's chunk of kc inputs in fp32; NULL: convert as they go */
static float *
panel_buffer(size_t kc)
{
	return thread_buffer(&tbuf.panel, &tbuf.panel_floats, TF_PANEL * kc);
}


/*
 * tf_matmul for few rows: out[r][j] = alpha · a_r · b_j (+ beta · out[r][j])
 * for a tile of R rows of a by J rows of b, both with k columns.
 */
#define DEFINE_DOT_TILE(SFX, TARGET, W)											\
static inline __attribute__((always_inline, TARGET)) void						\
dot_tile_##SFX(size_t R, size_t J, size_t k, float *out, size_t ldo,			\
			   const float *a, size_t lda, const float *b, size_t ldb,			\
			   float alpha, float beta)											\
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
			bv[j] = *(const vf_##SFX *) (b + j * ldb + p);						\
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
				s += a[r * lda + q] * b[j * ldb + q];							\
			*o = beta == 0.0f ? alpha * s : alpha * s + beta * *o;				\
		}																		\
}																				\
																				\
/* out (m, n) = alpha · a (m, k) · bᵀ + beta · out, b (n, k) */				\
static __attribute__((TARGET)) void												\
gemm_nt_##SFX(size_t m, size_t n, size_t k, float *out, size_t ldo,			\
			  const float *a, size_t lda, const float *b, size_t ldb,			\
			  float alpha, float beta)											\
{																				\
	for (size_t j = 0; j < n; j += 4)											\
	{																			\
		size_t		J = n - j < 4 ? n - j : 4;									\
																				\
		for (size_t r = 0; r < m; r += 4)										\
		{																		\
			size_t		R = m - r < 4 ? m - r : 4;								\
			float	   *o = out + r * ldo + j;									\
			const float *ar = a + r * lda;										\
			const float *bj = b + j * ldb;										\
																				\
			switch (R * 4 + J)													\
			{																	\
				case 4 + 1: dot_tile_##SFX(1, 1, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 4 + 2: dot_tile_##SFX(1, 2, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 4 + 3: dot_tile_##SFX(1, 3, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 4 + 4: dot_tile_##SFX(1, 4, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 8 + 1: dot_tile_##SFX(2, 1, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 8 + 2: dot_tile_##SFX(2, 2, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 8 + 3: dot_tile_##SFX(2, 3, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 8 + 4: dot_tile_##SFX(2, 4, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 12 + 1: dot_tile_##SFX(3, 1, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 12 + 2: dot_tile_##SFX(3, 2, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 12 + 3: dot_tile_##SFX(3, 3, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 12 + 4: dot_tile_##SFX(3, 4, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 16 + 1: dot_tile_##SFX(4, 1, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 16 + 2: dot_tile_##SFX(4, 2, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				case 16 + 3: dot_tile_##SFX(4, 3, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
				default: dot_tile_##SFX(4, 4, k, o, ldo, ar, lda, bj, ldb, alpha, beta); break; \
			}																	\
		}																		\
	}																			\
}																				\
																				\
/* out (m, n) = alpha · a (m, k) · b (k, n) + beta · out: rows of b, scaled */	\
static __attribute__((TARGET)) void												\
gemm_nn_##SFX(size_t m, size_t n, size_t k, float *out, size_t ldo,			\
			  const float *a, size_t lda, const float *b, size_t ldb,			\
			  float alpha, float beta)											\
{																				\
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

/*
 * tf_matmul for one row of a against rows of b that lie anywhere (a beam's
 * cached keys and values, found through its ancestors' slots): the same
 * sums as dot_tile and gemm_nn, output by output, so the results are
 * bitwise those of tf_matmul on the same rows gathered into one matrix.
 *	 dot_rows:	out[j] = alpha · a · (rows[j] + off), j < n, over k
 *	 sum_rows:	out = Σ_p w[p] · (rows[p] + off), p < n, over k
 */
#define DEFINE_GATHER(SFX, TARGET, W)											\
static __attribute__((TARGET)) void												\
dot_rows_##SFX(size_t n, size_t k, float *out, const float *a,					\
			   const float *const *rows, size_t off, float alpha)				\
{																				\
	for (size_t j = 0; j < n; j += 4)											\
	{																			\
		size_t		J = n - j < 4 ? n - j : 4;									\
		vf_##SFX	acc[4];														\
		const float *b[4];														\
		size_t		p;															\
																				\
		for (size_t i = 0; i < J; i++)											\
		{																		\
			acc[i] = (vf_##SFX) {0};											\
			b[i] = rows[j + i] + off;											\
		}																		\
		for (p = 0; p + W <= k; p += W)											\
		{																		\
			vf_##SFX	av = *(const vf_##SFX *) (a + p);						\
																				\
			for (size_t i = 0; i < J; i++)										\
				acc[i] += av * *(const vf_##SFX *) (b[i] + p);					\
		}																		\
		for (size_t i = 0; i < J; i++)											\
		{																		\
			float		sum = HSUM_##SFX(acc[i]);								\
																				\
			for (size_t q = p; q < k; q++)										\
				sum += a[q] * b[i][q];											\
			out[j + i] = alpha * sum;											\
		}																		\
	}																			\
}																				\
																				\
static __attribute__((TARGET)) void												\
sum_rows_##SFX(size_t n, size_t k, float *out, const float *w,					\
			   const float *const *rows, size_t off)							\
{																				\
	for (size_t j = 0; j < k; j++)												\
		out[j] = 0.0f;															\
	for (size_t p = 0; p < n; p++)												\
	{																			\
		float		s = 1.0f * w[p];											\
		const float *bp = rows[p] + off;										\
																				\
		for (size_t j = 0; j < k; j++)											\
			out[j] += s * bp[j];												\
	}																			\
}

/*
 * tf_linear's kernel: y[r][j0 .. j0+32) = x_r · panel for R rows (R <= MR),
 * a panel column being NV native vectors of VW floats, LOADP(p, i) the
 * i-th; only `cols` outputs are stored (the last panel may be partly
 * padding).
 */
#define DEFINE_PANEL(SFX, DT, TARGET, MR, NV, VW, BT, LOADP)					\
static inline __attribute__((always_inline, TARGET)) void						\
panel_tile_##SFX##_##DT(size_t R, size_t k, float *y, size_t ldy, size_t cols,	\
						const float *x, size_t xsp, size_t xsr, const BT *panel,		\
						const char *next, size_t nrb, size_t pfn, const float *bias,	\
						bool first)												\
{																				\
	vf_##SFX	acc[MR][NV];													\
	size_t		pf = 0,															\
				due = 0;														\
																				\
	/* from 0, or on from the sums y holds (a later chunk of the inputs) */	\
	for (size_t r = 0; r < R; r++)												\
		for (size_t i = 0; i < NV; i++)											\
			acc[r][i] = first || cols < TF_PANEL ? (vf_##SFX) {0} :			\
				*(const vf_##SFX *) (y + r * ldy + i * VW);						\
	if (!first && cols < TF_PANEL)												\
		for (size_t r = 0; r < R; r++)											\
			for (size_t j = 0; j < cols; j++)									\
				acc[r][j / VW][j % VW] = y[r * ldy + j];						\
	for (size_t p = 0; p < k; p++)												\
	{																			\
		vf_##SFX	w[NV];														\
																				\
		/*																		\
		 * pfn rows (nrb bytes each) of the next panel from `next`, evenly	\
		 * over this tile's k steps, while this one computes: every block	\
		 * of rows takes its share, so that no tile asks memory for a		\
		 * whole panel at once.												\
		 * Into L2 only (prefetcht2): in L1 the next panel would evict this	\
		 * one's lines and x's, and hold the fill buffers that x's misses	\
		 * need while it comes from memory.									\
		 */																		\
		if (next && (due += pfn) >= k)											\
		{																		\
			due -= k;															\
			for (size_t i = 0; i < nrb; i += 64)								\
				__builtin_prefetch(next + pf * nrb + i, 0, 1);					\
			pf++;																\
		}																		\
		for (size_t i = 0; i < NV; i++)											\
			w[i] = LOADP(panel + p * TF_PANEL, i);								\
		for (size_t r = 0; r < R; r++)											\
		{																		\
			float		xv = x[p * xsp + r * xsr];								\
																				\
			for (size_t i = 0; i < NV; i++)										\
				acc[r][i] += xv * w[i];											\
		}																		\
	}																			\
	for (size_t r = 0; r < R; r++)												\
	{																			\
		if (cols == TF_PANEL && bias)											\
			for (size_t i = 0; i < NV; i++)										\
				*(vf_##SFX *) (y + r * ldy + i * VW) =							\
					acc[r][i] + *(const vf_##SFX *) (bias + i * VW);			\
		else if (cols == TF_PANEL)												\
			for (size_t i = 0; i < NV; i++)										\
				*(vf_##SFX *) (y + r * ldy + i * VW) = acc[r][i];				\
		else																	\
			for (size_t j = 0; j < cols; j++)									\
				y[r * ldy + j] = bias ? acc[r][j / VW][j % VW] + bias[j] :		\
					acc[r][j / VW][j % VW];										\
	}																			\
}																				\
																				\
/*																				\
 * The same for R rows (R <= 3) and 4 whole panels at once: with so few rows	\
 * one panel's accumulators are too few to hide the latency of the fused		\
 * multiply-adds; each output still sums in the same order.						\
 */																				\
static inline __attribute__((always_inline, TARGET)) void						\
panel4_tile_##SFX##_##DT(size_t R, size_t k, float *y, size_t ldy,				\
						 const float *x, size_t ldx, const BT *panel,			\
						 const float *bias)										\
{																				\
	vf_##SFX	acc[3][4][NV];													\
																				\
	for (size_t r = 0; r < R; r++)												\
		for (size_t q = 0; q < 4; q++)											\
			for (size_t i = 0; i < NV; i++)										\
				acc[r][q][i] = (vf_##SFX) {0};									\
	for (size_t p = 0; p < k; p++)												\
	{																			\
		vf_##SFX	w[4][NV];													\
																				\
		for (size_t q = 0; q < 4; q++)											\
			for (size_t i = 0; i < NV; i++)										\
				w[q][i] = LOADP(panel + (q * k + p) * TF_PANEL, i);				\
		for (size_t r = 0; r < R; r++)											\
		{																		\
			float		xv = x[r * ldx + p];									\
																				\
			for (size_t q = 0; q < 4; q++)										\
				for (size_t i = 0; i < NV; i++)									\
					acc[r][q][i] += xv * w[q][i];								\
		}																		\
	}																			\
	for (size_t r = 0; r < R; r++)												\
		for (size_t q = 0; q < 4; q++)											\
			for (size_t i = 0; i < NV; i++)										\
				*(vf_##SFX *) (y + r * ldy + q * TF_PANEL + i * VW) = bias ?	\
					acc[r][q][i] + *(const vf_##SFX *) (bias + q * TF_PANEL + i * VW) :	\
					acc[r][q][i];												\
}																				\
																				\
/*																				\
 * All m rows of x through steps [p0, p0 + kn) of one panel (cols outputs	\
 * from y's column j0 on; panel at step p0), in blocks of MR rows, each		\
 * prefetching its share of the next panel's same steps (next, nrb bytes	\
 * a panel column, or NULL).  x's rows (or packed blocks) are k apart.		\
 */																				\
static inline __attribute__((always_inline, TARGET)) void						\
panel_rows_##SFX##_##DT(size_t m, size_t n, size_t k, size_t p0, size_t kn,	\
						float *y, const float *x, const float *xp,				\
						const BT *panel, const char *next, size_t nrb,			\
						size_t cols, const float *bj, bool first)				\
{																				\
	size_t		nb = (m + MR - 1) / MR;											\
																				\
	for (size_t r = 0; r < m; r += MR)											\
	{																			\
		size_t		R = m - r < MR ? m - r : MR;								\
		size_t		lo = r / MR * kn / nb,										\
					pfn = (r / MR + 1) * kn / nb - lo;							\
		const char *nx = next ? next + (p0 + lo) * nrb : NULL;					\
		float	   *yr = y + r * n;												\
																				\
		if (xp)			/* a block of R rows, column by column */				\
		{																		\
			const float *xr = xp + r * k + p0 * R;								\
																				\
			switch (R)															\
			{																	\
				PANEL_CASES_##SFX(DT, 1)										\
			}																	\
		}																		\
		else																	\
		{																		\
			const float *xr = x + r * k + p0;									\
																				\
			switch (R)															\
			{																	\
				PANEL_CASES_##SFX(DT, 0)										\
			}																	\
		}																		\
	}																			\
}																				\
																				\
static __attribute__((TARGET)) void												\
linear_##SFX##_##DT(size_t m, size_t n, size_t k, float *y, const float *x,	\
					const float *xp, const void *packed, size_t jlo, size_t jhi,	\
					const float *bias)											\
{																				\
	const BT   *w = packed;														\
	size_t		j = jlo,														\
				nrb = TF_PANEL * sizeof(BT),									\
				kc = k ? k : 1;	/* inputs per chunk */							\
	float	   *wf = NULL;														\
																				\
	if (m <= 3 && MR > 1)														\
		for (; j + 4 * TF_PANEL <= jhi; j += 4 * TF_PANEL)						\
		{																		\
			const float *bj = bias ? bias + j : NULL;							\
																				\
			if (m == 1)															\
				panel4_tile_##SFX##_##DT(1, k, y + j, n, x, k, w + j * k, bj);	\
			else if (m == 2)													\
				panel4_tile_##SFX##_##DT(2, k, y + j, n, x, k, w + j * k, bj);	\
			else																\
				panel4_tile_##SFX##_##DT(3, k, y + j, n, x, k, w + j * k, bj);	\
		}																		\
	/*																			\
	 * With more than one block of rows, a panel is taken kc inputs at a	\
	 * time (the sums kept in y between chunks: the same order), so that	\
	 * the chunk stays in L1 while every block passes; a half-precision	\
	 * chunk is converted once, into this thread's buffer: converting in	\
	 * every tile took the multiply-adds' ports (at AVX2, fp16 ran at 0.7x	\
	 * fp32).  The same floats.												\
	 */																			\
	if (m > MR && j < jhi)														\
	{																			\
		kc = linear_chunk(k);													\
		if (sizeof(BT) != sizeof(float))										\
			wf = panel_buffer(kc);												\
	}																			\
	/* each panel is read from memory once and meets every row of x */		\
	for (; j < jhi; j += TF_PANEL)												\
	{																			\
		size_t		cols = jhi - j < TF_PANEL ? jhi - j : TF_PANEL;				\
		const BT   *panel = w + j * k;											\
		const float *bj = bias ? bias + j : NULL;								\
		const char *next = j + TF_PANEL < jhi ? (const char *) (panel + k * TF_PANEL) : NULL;	\
		size_t		p0 = 0;														\
																				\
		do		/* once, with no inputs: the bias */							\
		{																		\
			size_t		kn = k - p0 < kc ? k - p0 : kc;							\
			const float *b = p0 + kn == k ? bj : NULL;							\
			const BT   *chunk = panel + p0 * TF_PANEL;							\
																				\
			if (wf)																\
			{																	\
				for (size_t p = 0; p < kn; p++)									\
					for (size_t i = 0; i < NV; i++)								\
						*(vf_##SFX *) (wf + p * TF_PANEL + i * VW) =			\
							LOADP(chunk + p * TF_PANEL, i);						\
				panel_rows_##SFX##_f32(m, n, k, p0, kn, y + j, x, xp, wf, next, nrb, cols, b, p0 == 0);	\
			}																	\
			else																\
				panel_rows_##SFX##_##DT(m, n, k, p0, kn, y + j, x, xp, chunk, next, nrb, cols, b, p0 == 0);	\
			p0 += kn;															\
		} while (p0 < k);														\
	}																			\
}

/* PK: x packed (xp, a block of R rows column by column), else x's rows */
#define PANEL_CASE(SFX, DT, R, PK) case R: panel_tile_##SFX##_##DT(R, kn, yr, n, cols, xr, (PK) ? (R) : 1, \
	(PK) ? 1 : k, panel, nx, nrb, pfn, bj, first); break;

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

DEFINE_DOT_TILE(v4, target("arch=x86-64-v4"), 16)
DEFINE_DOT_TILE(v3, target("arch=x86-64-v3"), 8)
DEFINE_GATHER(v4, target("arch=x86-64-v4"), 16)
DEFINE_GATHER(v3, target("arch=x86-64-v3"), 8)

/* vector i of a panel column (32 weights), as floats */
#define V4_F32(p, i) (*(const vf_v4 *) ((p) + 16 * (i)))
#define V4_F16(p, i) ((vf_v4) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) ((p) + 16 * (i)))))
#define V4_BF16(p, i) ((vf_v4) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32( \
	_mm256_loadu_si256((const __m256i *) ((p) + 16 * (i)))), 16)))
#define V3_F32(p, i) (*(const vf_v3 *) ((p) + 8 * (i)))
#define V3_F16(p, i) ((vf_v3) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) ((p) + 8 * (i)))))
#define V3_BF16(p, i) ((vf_v3) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32( \
	_mm_loadu_si128((const __m128i *) ((p) + 8 * (i)))), 16)))

/* AVX-512: 12 rows x 2 zmm accumulators; AVX2: 3 rows x 4 ymm */
#define PANEL_CASES_v4(DT, PK) PANEL_CASE(v4, DT, 1, PK) PANEL_CASE(v4, DT, 2, PK) PANEL_CASE(v4, DT, 3, PK) \
	PANEL_CASE(v4, DT, 4, PK) PANEL_CASE(v4, DT, 5, PK) PANEL_CASE(v4, DT, 6, PK) PANEL_CASE(v4, DT, 7, PK) \
	PANEL_CASE(v4, DT, 8, PK) PANEL_CASE(v4, DT, 9, PK) PANEL_CASE(v4, DT, 10, PK) PANEL_CASE(v4, DT, 11, PK) \
	default: panel_tile_v4_##DT(12, kn, yr, n, cols, xr, (PK) ? 12 : 1, (PK) ? 1 : k, panel, nx, nrb, pfn, bj, first); break;
#define PANEL_CASES_v3(DT, PK) PANEL_CASE(v3, DT, 1, PK) PANEL_CASE(v3, DT, 2, PK) \
	default: panel_tile_v3_##DT(3, kn, yr, n, cols, xr, (PK) ? 3 : 1, (PK) ? 1 : k, panel, nx, nrb, pfn, bj, first); break;

DEFINE_PANEL(v4, f32, target("arch=x86-64-v4"), 12, 2, 16, float, V4_F32)
DEFINE_PANEL(v4, f16, target("arch=x86-64-v4"), 12, 2, 16, uint16_t, V4_F16)
DEFINE_PANEL(v4, bf16, target("arch=x86-64-v4"), 12, 2, 16, uint16_t, V4_BF16)
DEFINE_PANEL(v3, f32, target("arch=x86-64-v3"), 3, 4, 8, float, V3_F32)
DEFINE_PANEL(v3, f16, target("arch=x86-64-v3"), 3, 4, 8, uint16_t, V3_F16)
DEFINE_PANEL(v3, bf16, target("arch=x86-64-v3"), 3, 4, 8, uint16_t, V3_BF16)
#endif

/* the portable fallback: 4-wide vectors, one row at a time */
typedef float vf_base __attribute__((vector_size(16), aligned(4)));

#define HSUM_base(v) (((v)[0] + (v)[2]) + ((v)[1] + (v)[3]))
#define BASE_F32(p, i) (*(const vf_base *) ((p) + 4 * (i)))
#define BASE_HALF(p, i, CONV) ((vf_base) {CONV((p)[4 * (i)]), CONV((p)[4 * (i) + 1]), \
	CONV((p)[4 * (i) + 2]), CONV((p)[4 * (i) + 3])})
#define BASE_F16(p, i) BASE_HALF(p, i, tf_half_to_float)
#define BASE_BF16(p, i) BASE_HALF(p, i, tf_bf16_to_float)
#define PANEL_CASES_base(DT, PK) default: panel_tile_base_##DT(1, kn, yr, n, cols, xr, 1, k, panel, nx, nrb, pfn, bj, first); break;

DEFINE_DOT_TILE(base, unused, 4)
DEFINE_GATHER(base, unused, 4)
DEFINE_PANEL(base, f32, unused, 1, 8, 4, float, BASE_F32)
DEFINE_PANEL(base, f16, unused, 1, 8, 4, uint16_t, BASE_F16)
DEFINE_PANEL(base, bf16, unused, 1, 8, 4, uint16_t, BASE_BF16)

typedef void (*matmul_fn) (size_t, size_t, size_t, float *, size_t,
						   const float *, size_t, const float *, size_t, float, float);
typedef void (*linear_fn) (size_t, size_t, size_t, float *, const float *, const float *,
						   const void *, size_t, size_t, const float *);
typedef void (*dot_rows_fn) (size_t, size_t, float *, const float *, const float *const *, size_t, float);
typedef void (*sum_rows_fn) (size_t, size_t, float *, const float *, const float *const *, size_t);

static matmul_fn gemm_nt;
static matmul_fn gemm_nn;
static linear_fn linear_fns[3];	/* by TfDType */
static size_t linear_pack_rows;	/* the kernels' block of rows, if they read x packed; else 0 */
static dot_rows_fn dot_rows;
static sum_rows_fn sum_rows;

/*
 * Whether the panels read x packed, and in blocks of how many rows: the
 * AVX-512 tile of 12 rows reads its 12 inputs of a step from one place
 * (one line in 1.3 steps) rather than from 12 rows' lines at once, which
 * all miss L1 together every 16 steps.  On output layers that stream from
 * memory that was 1.05-1.16x (transformer-base's, 128 rows) and 1.15-1.34x
 * (NLLB-600M's); the AVX2 tile of 3 rows gained nothing (0.98-1.04x), so
 * it reads x's rows (docs/performance.md).
 */
#define PACK_ROWS_v4 12
#define PACK_ROWS_v3 0
#define PACK_ROWS_base 0

/*
 * Inputs per chunk of a panel.  The AVX2 tile (3 rows x 4 vectors) reads a
 * panel column per 12 multiply-adds, and every block of rows reads the
 * whole panel again: from L2 when k is large (a 1024-input panel is 128
 * KB).  In chunks of 256 inputs (32 KB in fp32) it stays in L1: 1.07-1.20x
 * on 128 rows of k 512-4096.  The AVX-512 tile reads a column per 24, and
 * chunks cost it 0-8%: whole panels.
 */
#define LINEAR_KC_v4 0
#define LINEAR_KC_v3 256
#define LINEAR_KC_base 256

#define PICK(SFX) \
	do { \
		gemm_nt = gemm_nt_##SFX; \
		gemm_nn = gemm_nn_##SFX; \
		dot_rows = dot_rows_##SFX; \
		sum_rows = sum_rows_##SFX; \
		linear_fns[TF_F32] = linear_##SFX##_f32; \
		linear_fns[TF_F16] = linear_##SFX##_f16; \
		linear_fns[TF_BF16] = linear_##SFX##_bf16; \
		linear_pack_rows = PACK_ROWS_##SFX; \
		linear_kc = LINEAR_KC_##SFX; \
	} while (0)

static bool
cpu_has_v4(void)
{
#ifdef TF_X86
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		__builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
		__builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("fma");
#else
	return false;
#endif
}

static bool
cpu_has_v3(void)
{
#ifdef TF_X86
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
	return false;
#endif
}

static void
pick_kernels(void)
{
	PICK(base);
#ifdef TF_X86
	if (cpu_has_v4())
		PICK(v4);
	else if (cpu_has_v3())
		PICK(v3);
#endif
}

int
tf_cpu_level(int level)
{
	int			best = cpu_has_v4() ? 2 : cpu_has_v3() ? 1 : 0;

	if (level < 0)
		return best;
	return level <= best ? level : -1;
}

const char *
tf_gemm_kernels(int level)
{
	int			lv = tf_cpu_level(level);

	if (lv < 0)
		return NULL;
	tf_int8_kernels(level < 0 ? level : lv);	/* auto may choose AMX, which no level names */
	tf_bf16_kernels(lv);
#ifdef TF_X86
	if (lv == 2)
		PICK(v4);
	else if (lv == 1)
		PICK(v3);
	else
#endif
		PICK(base);
	return tf_gemm_kernels_in_effect();
}

const char *
tf_gemm_kernels_in_effect(void)
{
	if (gemm_nn == NULL)
		pick_kernels();
#ifdef TF_X86
	if (linear_fns[TF_F32] == linear_v4_f32)
		return "avx512";
	if (linear_fns[TF_F32] == linear_v3_f32)
		return "avx2";
#endif
	return "portable";
}

void
tf_matmul(int m, int n, int k,
		  float *out, int ldo,
		  const float *a, int lda,
		  const float *b, int ldb,
		  bool trans_b, float alpha, float beta)
{
	if (m > SMALL_M && tf_blas_sgemm(m, n, k, out, ldo, a, lda, b, ldb, trans_b, alpha, beta))
		return;
	if (gemm_nn == NULL)
		pick_kernels();
	(trans_b ? gemm_nt : gemm_nn) (m, n, k, out, ldo, a, lda, b, ldb, alpha, beta);
}

void
tf_dot_rows(int n, int k, float *out, const float *a, const float *const *rows, size_t off, float alpha)
{
	if (gemm_nn == NULL)
		pick_kernels();
	dot_rows(n, k, out, a, rows, off, alpha);
}

void
tf_sum_rows(int n, int k, float *out, const float *w, const float *const *rows, size_t off)
{
	if (gemm_nn == NULL)
		pick_kernels();
	sum_rows(n, k, out, w, rows, off);
}

typedef struct LinearJob
{
	size_t		m,
				n,
				k;
	float	   *y;				/* (m, n) */
	const float *x;				/* (m, k) */
	const float *xp;			/* x packed by pack_rows, or NULL */
	const void *packed;			/* (n, k) in panels */
	TfDType		dt;
	const float *bias;			/* (n) or NULL */
} LinearJob;

static void
linear_part(void *arg, int part, int nparts)
{
	const LinearJob *j = arg;
	size_t		lo,
				hi;

	tf_column_block(j->n, part, nparts, &lo, &hi);
	if (lo >= hi)
		return;
	/* the bias is added as each output is stored: the same sum, one pass */
	linear_fns[j->dt] (j->m, j->n, j->k, j->y, j->x, j->xp, j->packed, lo, hi, j->bias);
}

/*
 * x packed for the panels: block b (rows b·mr .. b·mr + R) at xp + b·mr·k,
 * column by column (xp[b·mr·k + p·R + r]).  The buffer is this thread's,
 * kept between calls and grown to at most XPACK_BYTES (or one block of
 * rows, if more); tf_linear packs that many rows at a time.  The unit
 * tests lower both limits (tf_linear_pack_limits) to reach every path
 * with small products.
 */
#define XPACK_BYTES ((size_t) 4 << 20)
#define XPACK_MIN_COLS 1024

static size_t xpack_bytes = XPACK_BYTES;
static size_t xpack_min_cols = XPACK_MIN_COLS;

void
tf_linear_pack_limits(size_t bytes, size_t min_cols)
{
	xpack_bytes = bytes ? bytes : XPACK_BYTES;
	xpack_min_cols = min_cols ? min_cols : XPACK_MIN_COLS;
}

static float *
xpack_buffer(size_t floats)
{
	return thread_buffer(&tbuf.xpack, &tbuf.xpack_floats, floats);
}

/*
 * Column by column: the stores run straight on and the R rows' loads stay
 * in L1.  Row by row (stores R floats apart) took 1.0-2.1 ns a float at k
 * 1024-4096, this 0.28-0.52 (an AVX-512 gather of the R rows: no faster).
 */
static void
pack_rows(size_t m, size_t k, size_t mr, float *xp, const float *x)
{
	for (size_t r0 = 0; r0 < m; r0 += mr)
	{
		size_t		R = m - r0 < mr ? m - r0 : mr;
		float	   *dst = xp + r0 * k;
		const float *src = x + r0 * k;

		for (size_t p = 0; p < k; p++, dst += R)
			for (size_t r = 0; r < R; r++)
				dst[r] = src[r * k + p];
	}
}

void
tf_linear_columns(int rows, int out_dim, int in_dim, float *y, const float *x,
				  const void *packed, TfDType dt, const float *bias, int jlo, int jhi)
{
	if (gemm_nn == NULL)
		pick_kernels();
	linear_fns[dt] (rows, out_dim, in_dim, y, x, NULL, packed, jlo, jhi, bias);
}

void
tf_linear(int rows, int out_dim, int in_dim, float *y, const float *x,
		  const void *packed, TfDType dt, const float *bias)
{
	size_t		m = rows,
				n = out_dim,
				k = in_dim,
				mr,
				chunk = 0;
	int			parts;
	bool		pack;

	if (dt == TF_I8)
	{
		/* the bias is added in the dequantizing step */
		tf_linear_int8(rows, out_dim, in_dim, y, x, packed, bias);
		return;
	}
	if (dt == TF_BF16D)
	{
		tf_linear_bf16d(rows, out_dim, in_dim, y, x, packed, bias);
		return;
	}
	if (gemm_nn == NULL)
		pick_kernels();
	mr = linear_pack_rows;
	parts = tf_product_parts(rows, out_dim, in_dim);

	/*
	 * Packing costs about what 2 k steps of one tile do per input: worth
	 * it where each thread's part has XPACK_MIN_COLS outputs or more.  At
	 * 1024 outputs (NLLB-600M's attention and its FFN's second layer) it
	 * was 1.0-1.14x, the most when the VM was slow; at 512, 0.93-0.97x.
	 * Up to 3 rows take 4 panels at a time, unpacked.  Rows a time: whole
	 * blocks in XPACK_BYTES, at least one block.
	 */
	pack = mr > 0 && k > 0 && m > 3 && n / parts >= xpack_min_cols;
	if (pack)
	{
		chunk = xpack_bytes / sizeof(float) / k / mr * mr;
		if (chunk < mr)
			chunk = mr;
		pack = xpack_buffer((m < chunk ? m : chunk) * k) != NULL;
	}
	if (!pack)
	{
		LinearJob	job = {m, n, k, y, x, NULL, packed, dt, bias};

		tf_parallel(parts, linear_part, &job);
		return;
	}
	for (size_t r0 = 0; r0 < m; r0 += chunk)
	{
		size_t		mc = m - r0 < chunk ? m - r0 : chunk;
		LinearJob	job = {mc, n, k, y + r0 * n, x + r0 * k, tbuf.xpack, packed, dt, bias};

		pack_rows(mc, k, mr, tbuf.xpack, x + r0 * k);
		tf_parallel(parts, linear_part, &job);
	}
}
