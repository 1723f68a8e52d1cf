/*
 * product_parts.c
 *		How a product is shared between threads (tensor_ops.h): how many
 *		parts it is worth, and the columns of each.  Below the fp32 and the
 *		int8 products alike (gemm.c, gemm_int8.c), which both cut their work
 *		this way.  No postgres.h.
 */
#include "tensor_ops.h"
#include "threads.h"

/*
 * Column blocks of a product for part `part` of `nparts`: whole groups of 4
 * panels, so that every output is computed by the same kernel path, with
 * the same sums, however many threads share the product.
 */
void
tf_column_block(size_t n, int part, int nparts, size_t *lo, size_t *hi)
{
	size_t		unit = 4 * TF_PANEL,
				blocks = (n + unit - 1) / unit;

	*lo = blocks * part / nparts * unit;
	*hi = blocks * (part + 1) / nparts * unit;
	if (*lo > n)
		*lo = n;
	if (*hi > n)
		*hi = n;
}

/* how many threads a product of m x n x k multiply-adds is worth */
int
tf_product_parts(size_t m, size_t n, size_t k)
{
	size_t		macs = m * n * k,
				parts;

	if (tf_threads() <= 1 || macs < TF_PARALLEL_MIN_MACS)
		return 1;
	parts = tf_parallel_parts();
	/* at least one group of 4 panels each */
	if (parts > (n + 4 * TF_PANEL - 1) / (4 * TF_PANEL))
		parts = (n + 4 * TF_PANEL - 1) / (4 * TF_PANEL);
	return parts < 1 ? 1 : (int) parts;
}
