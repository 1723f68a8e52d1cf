/*
 * tensor_ops.h
 *		The numeric core: dense float32 kernels on raw row-major buffers.
 *
 * Nothing here includes postgres.h, so the core can be unit-tested and
 * benchmarked outside the server (test/unit, bench/).  Conventions, after
 * ggml and llama2.c: sizes first, then the output, then const inputs; the
 * caller owns every buffer; no kernel allocates.  Matrices are row-major
 * with an explicit leading dimension (the distance between two rows) where
 * a kernel may work on a column block of a wider matrix.
 */
#ifndef TENSOR_OPS_H
#define TENSOR_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Element types of stored weights (safetensors F32, F16, BF16, I8).  TF_I8
 * is for matrices only: int8 per output row with an fp32 scale
 * (gemm_int8.c).
 */
typedef enum TfDType
{
	TF_F32,
	TF_F16,
	TF_BF16,
	TF_I8,
	TF_BF16D					/* packed only: bf16 computed in bf16 (gemm_bf16.c) */
} TfDType;

/*
 * Load OpenBLAS now (a program that will use it anyway), its kernels fit for
 * this CPU (see blas.c); returns its core's name (NULL without OpenBLAS).
 * The server leaves it to the first product that needs it (blas.h).
 */
const char *tf_blas_init(void);

/*
 * Levels of kernels (transformer.cpu_kernels): TF_LEVEL_AUTO the best this
 * CPU has; AVX-512 (avx512f/bw/dq/vl/cd and FMA), AVX2 + FMA, portable
 * (baseline x86-64, or plain C elsewhere).
 */
#define TF_LEVEL_AUTO (-1)
#define TF_LEVEL_PORTABLE 0
#define TF_LEVEL_AVX2 1
#define TF_LEVEL_AVX512 2

/* What level means on this CPU: the best for TF_LEVEL_AUTO, level itself if this CPU has it, else -1. */
int			tf_cpu_level(int level);

/*
 * Hold every kernel family to level: fp32 and int8 products (gemm.c,
 * gemm_int8.c), softmax, norms, activations and the vector helpers (here),
 * and OpenBLAS's core (see tensor_ops.c).  Returns the level's name
 * ("avx512", "avx2", "portable"), or NULL, changing nothing, if this CPU
 * lacks it.  Call it from one thread, while no kernel runs.
 */
const char *tf_cpu_kernels(int level);

/* The kernel families, for tf_kernel_family. */
typedef enum TfKernelFamily
{
	TF_KERNELS_FP32,			/* tf_linear (fp32, fp16, bf16), tf_matmul's few rows, tf_dot_rows, tf_sum_rows */
	TF_KERNELS_INT8,			/* tf_linear on int8 */
	TF_KERNELS_SOFTMAX,			/* tf_softmax_rows, tf_log_sum_exp */
	TF_KERNELS_NORMS,			/* tf_layer_norm */
	TF_KERNELS_ACTIVATIONS,		/* tf_relu, tf_gelu, tf_silu and their derivatives */
	TF_KERNELS_VECTOR,			/* tf_dot, tf_all_finite */
	TF_KERNELS_BF16				/* tf_linear on TF_BF16D (the compute type bf16) */
} TfKernelFamily;
#define TF_KERNEL_FAMILIES 7

/*
 * The kernels in effect for a family, read from the function pointers
 * themselves: "avx512", "avx2", "portable", or for int8 "avx512vnni".
 */
const char *tf_kernel_family(TfKernelFamily family);

/* The family's name: "fp32", "int8", "softmax", "norms", "activations", "vector". */
const char *tf_kernel_family_name(TfKernelFamily family);

/*
 * out (m, n) = a (m, k) · b (k, n), or a · bᵀ with b (n, k) when trans_b.
 * OpenBLAS's sgemm (blas.h), or for at most TF_SMALL_M rows of a, and
 * without OpenBLAS, gemm.c's kernels, whose every output is the same
 * whatever m is; beta = 1 accumulates into out.
 */
#define TF_SMALL_M 16
void		tf_matmul(int m, int n, int k,
					  float *out, int ldo,
					  const float *a, int lda,
					  const float *b, int ldb,
					  bool trans_b, float alpha, float beta);

/*
 * tf_matmul for one row of a whose b is given by row pointers (each row
 * at rows[j] + off): out (n) = alpha · a (k) · bᵀ, and out (k) = w (n) · b.
 * Bitwise the same as tf_matmul on those rows copied into one matrix.
 */
void		tf_dot_rows(int n, int k, float *out, const float *a, const float *const *rows, size_t off,
						float alpha);
void		tf_sum_rows(int n, int k, float *out, const float *w, const float *const *rows, size_t off);

/*
 * Weight matrices W (out, in), as torch.nn.Linear keeps them, are packed
 * for tf_linear into panels of TF_PANEL rows of W, each stored column by
 * column: element (r, p) is at ((r / 32) · in + p) · 32 + r % 32.  The last
 * panel is padded with zeros.  Packed matrices keep their dtype.
 */
#define TF_PANEL 32

/*
 * Bytes of a (rows, cols) matrix packed in panels.  TF_I8 packs groups of 4
 * columns (gemm_int8.c), followed by the rows' scales and sums.
 */
size_t		tf_packed_size(size_t rows, size_t cols, TfDType dt);

/* Pack w (rows, cols), row-major, into out (tf_packed_size bytes); not TF_I8. */
void		tf_pack_panels(size_t rows, size_t cols, void *out, const void *w, TfDType dt);
/*
 * Pack rows [r0, r0 + n) of w (rows, cols) into out, w pointing at row r0:
 * a matrix packed part by part as its bytes arrive.  out must start zeroed
 * (the padding rows are not written); tf_pack_panels is memset + all rows.
 */
void		tf_pack_panel_rows(size_t rows, size_t cols, void *out, const void *w, TfDType dt,
							   size_t r0, size_t n);

/* out (cols) = row `row` of a packed (rows, cols) matrix, as fp32 (embedding lookups). */
void		tf_packed_row(size_t rows, size_t cols, float *out, const void *packed, TfDType dt,
						  size_t row);

/*
 * y (rows, out) = x (rows, in) · Wᵀ + bias with W packed (above); bias may
 * be NULL.  fp16 and bf16 are converted to fp32 (in registers, or a panel
 * at a time for many rows: the same floats).  Each row's result is
 * independent of the other rows.  gemm.c.
 */
void		tf_linear(int rows, int out_dim, int in_dim, float *y, const float *x,
					  const void *packed, TfDType dt, const float *bias);
/*
 * tf_linear's outputs [jlo, jhi) only (y still (rows, out_dim)), in one
 * thread, bitwise as tf_linear gives them; fp32, fp16, bf16.
 */
void		tf_linear_columns(int rows, int out_dim, int in_dim, float *y, const float *x,
							  const void *packed, TfDType dt, const float *bias, int jlo, int jhi);
/*
 * For the unit tests: tf_linear packs x in runs of at most `bytes` (one
 * block of rows at least) when a thread's part has min_cols outputs or
 * more; 0, 0 restores the defaults (4 MB, 1024).
 */
void		tf_linear_pack_limits(size_t bytes, size_t min_cols);
/* Test hook: tf_linear's inputs per chunk of a panel (0: the default). */
void		tf_linear_chunk_limit(size_t kc);

/*
 * Threads (threads.h): a product of at least TF_PARALLEL_MIN_MACS
 * multiply-adds is shared by tf_product_parts(m, n, k) threads, each taking
 * the columns tf_column_block gives it (whole groups of 4 panels), so the
 * result is bitwise the same for any number of threads.
 */
#define TF_PARALLEL_MIN_MACS ((size_t) 1 << 17)
int			tf_product_parts(size_t m, size_t n, size_t k);
void		tf_column_block(size_t n, int part, int nparts, size_t *lo, size_t *hi);

/* ---- int8 (gemm_int8.c) ---- */

/* The largest input dimension of an int8 matrix: its int32 sums cannot overflow. */
#define TF_INT8_MAX_IN 65536

/*
 * q (rows, cols), scale (rows) := w quantized per row, symmetrically:
 * scale = max |w_row| / 127, q = round(w · (1 / scale)) to nearest even,
 * in -127..127 (a row of zeros: scale 0, q 0).
 */
void		tf_quantize_rows(size_t rows, size_t cols, int8_t *q, float *scale, const float *w);

/* Pack q (rows, cols) with its row scales into out (tf_packed_size(.., TF_I8) bytes). */
void		tf_pack_int8(size_t rows, size_t cols, void *out, const int8_t *q, const float *scale);
/* The same for rows [r0, r0 + n), q and scale pointing at row r0's (out zeroed, as above). */
void		tf_pack_int8_rows(size_t rows, size_t cols, void *out, const int8_t *q, const float *scale,
							  size_t r0, size_t n);
size_t		tf_int8_packed_size(size_t rows, size_t cols);
void		tf_int8_packed_row(size_t cols, float *out, const void *packed, size_t rows, size_t row);

/*
 * One row of x (k) quantized for an int8 product: [min(x, 0), max(x, 0)]
 * onto 0..255, scale = range / 255, zero = round(-min / scale); q padded
 * with zeros to a multiple of 4 columns.
 */
void		tf_quantize_input(size_t k, uint8_t *q, float *scale, int32_t *zero, const float *x);

/* tf_linear on int8 weights (in_dim <= TF_INT8_MAX_IN). */
void		tf_linear_int8(int rows, int out_dim, int in_dim, float *y, const float *x,
						   const void *packed, const float *bias);

/* ---- bf16 computed in bf16, the opt-in compute type (gemm_bf16.c) ---- */

/* The largest input dimension of a TF_BF16D matrix (a row of x rounded on the stack). */
#define TF_BF16_MAX_IN 65536

/*
 * Pack rows [r0, r0 + n) of w (rows, cols) of dtype src (F32, F16, BF16),
 * w pointing at row r0, as TF_BF16D: rounded to bf16 (to nearest even), in
 * panels of pairs of columns.  out zeroed first (tf_packed_size bytes).
 */
void		tf_pack_bf16d_rows(size_t rows, size_t cols, void *out, const void *w, TfDType src,
							   size_t r0, size_t n);
size_t		tf_bf16d_packed_size(size_t rows, size_t cols);
void		tf_bf16d_packed_row(size_t cols, float *out, const void *packed, size_t row);

/*
 * tf_linear on TF_BF16D weights (in_dim <= TF_BF16_MAX_IN): x rounded to
 * bf16, products summed in fp32 as AVX512_BF16's vdpbf16ps does.
 */
void		tf_linear_bf16d(int rows, int out_dim, int in_dim, float *y, const float *x,
							const void *packed, const float *bias);

/* Choose the bf16 kernels: AVX512_BF16 at level 2 or -1 where the CPU has it, else portable. */
const char *tf_bf16_kernels(int level);
const char *tf_bf16_kernels_in_effect(void);

/*
 * Choose the int8 kernels (as tf_gemm_kernels, which calls it): -1 the
 * best, 2 AVX-512 VNNI, 1 AVX2, 0 portable; falls back to the best below
 * the level this CPU has.  Returns the name of those chosen.
 */
const char *tf_int8_kernels(int level);
const char *tf_int8_kernels_in_effect(void);

/*
 * Choose the kernels of tf_linear and tf_matmul, and the int8 ones: -1 by
 * CPU features (the default), 2 AVX-512, 1 AVX2 + FMA, 0 portable.
 * Returns their name, or NULL, changing nothing, if this CPU lacks them.
 * The server calls tf_cpu_kernels, which calls this.
 */
const char *tf_gemm_kernels(int level);
const char *tf_gemm_kernels_in_effect(void);

/* out (n) = n values of dtype dt as fp32. */
void		tf_to_float(size_t n, float *out, const void *w, TfDType dt);

size_t		tf_dtype_size(TfDType dt);
float		tf_half_to_float(uint16_t h);
float		tf_bf16_to_float(uint16_t h);

/* x (rows, cols) := softmax over each row, in place; max-subtracted, sum in double. */
void		tf_softmax_rows(int rows, int cols, float *x);

/* log Σ exp(x[i]), max-subtracted, summed in double; -inf entries add nothing. */
double		tf_log_sum_exp(int n, const float *x);

/* The same, the maximum of x already known. */
double		tf_log_sum_exp_max(int n, const float *x, float max);

/* max(x) over n values, NaNs ignored; -inf if there are none. */
float		tf_row_max(size_t n, const float *x);

/* The first i < n with !(x[i] <= t): greater than t, or NaN; n if none. */
size_t		tf_find_above(size_t n, const float *x, float t);

/* out (rows, d) = layer_norm(x) · gamma + beta over the last dimension. */
void		tf_layer_norm(int rows, int d, float *out, const float *x,
						  const float *gamma, const float *beta, float eps);

/* Element-wise activations, in place on n values. */
void		tf_relu(size_t n, float *x);
void		tf_gelu(size_t n, float *x);	/* exact, erf form (torch default) */
void		tf_silu(size_t n, float *x);	/* x·sigmoid(x), a.k.a. swish */

/* dx = dy · f'(x) for n values, the derivatives of tf_silu and tf_gelu (training). */
void		tf_silu_grad(size_t n, float *dx, const float *dy, const float *x);
void		tf_gelu_grad(size_t n, float *dx, const float *dy, const float *x);

/* Σ a[i]·b[i] accumulated in double. */
double		tf_dot(int n, const float *a, const float *b);

/* true if none of the n values is NaN or infinite. */
bool		tf_all_finite(size_t n, const float *x);

#endif							/* TENSOR_OPS_H */
