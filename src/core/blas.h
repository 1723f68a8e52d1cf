/*
 * blas.h
 *		OpenBLAS, loaded when a product first needs it.
 *
 * Linking OpenBLAS made every process that loads the extension pay for it:
 * about 14,000 symbol relocations of its kernel tables, its CPU probe and its
 * thread pool, several milliseconds of a new connection's first call, for
 * calls that may never run a product of more than TF_SMALL_M rows (gemm.c's
 * own kernels do those).  So the library is opened (dlopen) at the first
 * product that wants it, and the settings made before (threads, the core
 * that transformer.cpu_kernels holds it to) are applied then.  Without
 * OpenBLAS, tf_blas_sgemm() says so and gemm.c's kernels do every product.
 * No postgres.h.
 */
#ifndef TF_BLAS_H
#define TF_BLAS_H

#include <stdbool.h>

/* the shared object opened: Debian's libopenblas0, whichever of its variants is chosen */
#define TF_BLAS_LIBRARY "libopenblas.so.0"

/*
 * out (m, n) = alpha · a (m, k) · b (k, n) (or bᵀ with b (n, k) when trans_b)
 * + beta · out, row major, by OpenBLAS's sgemm (loaded now if it is not).
 * false: OpenBLAS cannot be loaded, nothing was computed.
 */
bool		tf_blas_sgemm(int m, int n, int k, float *out, int ldo,
						  const float *a, int lda, const float *b, int ldb,
						  bool trans_b, float alpha, float beta);

/*
 * out (m, n) = alpha · aᵀ · b + beta · out, a (k, m) and b (k, n) row
 * major: a weight's gradient, dW = dYᵀ · X.  false: no OpenBLAS.
 */
bool		tf_blas_sgemm_tn(int m, int n, int k, float *out, int ldo,
							 const float *a, int lda, const float *b, int ldb,
							 float alpha, float beta);

/* Load OpenBLAS now; its core's name, NULL without it.  (tensor_ops.h's tf_blas_init() holds it first.) */
const char *tf_blas_load(void);

/* Threads of OpenBLAS's products: now if it is loaded, else when it loads. */
void		tf_set_blas_threads(int nthreads);

/*
 * Hold OpenBLAS's core to a kernel level: now, or when it loads.  -1: its own
 * choice, mended to best (the best level this CPU has, tf_cpu_level(-1)) when
 * it does not know this CPU.
 */
void		tf_blas_hold(int level, int best);

/* Whether OpenBLAS has been loaded in this process (by a product, or tf_blas_init). */
bool		tf_blas_loaded(void);

/* Its build configuration and core, loading it; "not available: WHY" without it. */
const char *tf_blas_config(void);
const char *tf_blas_corename(void);

#endif							/* TF_BLAS_H */
