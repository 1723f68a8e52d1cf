/*
 * test_cpu_kernels.c
 *		transformer.cpu_kernels' core: tf_cpu_kernels(level) holds every
 *		kernel family to the level (make unittest).
 *
 * For each level this CPU has: tf_cpu_kernels names it, every family
 * reports it (tf_kernel_family reads the function pointers), OpenBLAS runs
 * a core of that level, and each family's results match a scalar
 * reference in double within the op's tolerance: softmax, log-sum-exp,
 * layer norm, ReLU, GELU, SiLU, dot, the finiteness test, fp32 products
 * (tf_linear, tf_matmul's few rows and sgemm) and int8 products.  The
 * AVX2 copies of the vector kernels agree with the portable ones bitwise
 * (the AVX-512 ones fuse multiply-adds), and int8 is bitwise the same in
 * every family (gemm_int8.c).  A level the CPU lacks changes nothing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "blas.h"
#include "tensor_ops.h"

extern char *openblas_get_corename(void);

static int	passed = 0;
static int	failed = 0;

static void
ok(int cond, const char *what, const char *level)
{
	printf("%-4s %-9s %s\n", cond ? "ok" : "FAIL", level, what);
	if (cond)
		passed++;
	else
		failed++;
}

static void *
xmalloc(size_t n)
{
	void	   *p = calloc(1, n ? n : 1);

	if (!p)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	return p;
}

static float
frand(float lo, float hi)
{
	return lo + (hi - lo) * (float) rand() / (float) RAND_MAX;
}

/* |got - ref| <= atol + rtol · |ref| everywhere; prints the worst */
static void
check_close(const char *what, const char *level, const float *got, const double *ref, size_t n,
			double atol, double rtol)
{
	double		worst = 0.0;
	int			bad = 0;

	for (size_t i = 0; i < n; i++)
	{
		double		d = fabs((double) got[i] - ref[i]);

		if (!(d <= atol + rtol * fabs(ref[i])))
			bad = 1;
		if (d > worst || isnan(d))
			worst = d;
	}
	printf("%-4s %-9s %-28s n=%-7zu max abs diff %.3g\n", bad ? "FAIL" : "ok", level, what, n, worst);
	if (bad)
		failed++;
	else
		passed++;
}

/* shapes that cross the 16 and 8 lanes, the flush every 1024 and the scalar tails */
static const int widths[] = {1, 3, 8, 15, 16, 17, 33, 512, 1023, 1024, 1040, 2049};
#define NWIDTHS (sizeof(widths) / sizeof(widths[0]))

static void
test_softmax(const char *level, float **keep)
{
	size_t		total = 0;
	size_t		at = 0;
	float	   *all;
	double	   *ref;

	for (size_t w = 0; w < NWIDTHS; w++)
		total += (size_t) 3 * widths[w];
	all = xmalloc(sizeof(float) * total);
	ref = xmalloc(sizeof(double) * total);
	srand(7);
	for (size_t w = 0; w < NWIDTHS; w++)
	{
		int			n = widths[w];
		float	   *x = all + at;

		for (int i = 0; i < 3 * n; i++)
			x[i] = frand(-20.0f, 20.0f);
		x[0] = -INFINITY;		/* a masked entry */
		for (int i = 0; i < n; i++)
			x[2 * n + i] = -INFINITY;	/* a row with every entry masked */
		for (int r = 0; r < 3; r++)
		{
			const float *xr = x + r * n;
			double		max = -INFINITY,
						sum = 0.0;

			for (int i = 0; i < n; i++)
				max = xr[i] > max ? xr[i] : max;
			for (int i = 0; i < n; i++)
				sum += max == -INFINITY ? 0.0 : exp((double) xr[i] - max);
			for (int i = 0; i < n; i++)
				ref[at + r * n + i] = max == -INFINITY ? 0.0 : exp((double) xr[i] - max) / sum;
		}
		tf_softmax_rows(3, n, x);
		at += (size_t) 3 * n;
	}
	check_close("softmax vs double", level, all, ref, total, 1e-7, 1e-6);
	*keep = all;
	free(ref);
}

static void
test_log_sum_exp(const char *level)
{
	float		got[NWIDTHS];
	double		ref[NWIDTHS];

	srand(8);
	for (size_t w = 0; w < NWIDTHS; w++)
	{
		int			n = widths[w];
		float	   *x = xmalloc(sizeof(float) * n);
		double		max = -INFINITY,
					sum = 0.0;

		for (int i = 0; i < n; i++)
			x[i] = frand(-30.0f, 10.0f);
		for (int i = 0; i < n; i++)
			max = x[i] > max ? x[i] : max;
		for (int i = 0; i < n; i++)
			sum += exp((double) x[i] - max);
		ref[w] = max + log(sum);
		got[w] = (float) tf_log_sum_exp(n, x);
		free(x);
	}
	check_close("log_sum_exp vs double", level, got, ref, NWIDTHS, 1e-6, 1e-6);
}

/*
 * tf_row_max and tf_find_above (beam search's scans of the logits) against
 * scalar loops: NaNs ignored by the maximum and found by the search (as
 * !(x <= t)), -inf, the answer in the vector body, in the tail and absent.
 */
static void
test_scans(const char *level)
{
	int			max_ok = 1,
				find_ok = 1;

	srand(9);
	for (size_t w = 0; w < NWIDTHS; w++)
	{
		int			n = widths[w];
		float	   *x = xmalloc(sizeof(float) * n);

		for (int trial = 0; trial < 40; trial++)
		{
			float		ref = -INFINITY,
						t;

			for (int i = 0; i < n; i++)
				x[i] = frand(-10.0f, 10.0f);
			if (trial % 4 == 1)
				x[rand() % n] = NAN;
			if (trial % 4 == 2)
				for (int i = 0; i < n; i++)
					x[i] = -INFINITY;
			if (trial % 4 == 3)
				x[n - 1] = 50.0f;	/* the maximum, the only one above 20, last */
			for (int i = 0; i < n; i++)
				ref = x[i] > ref ? x[i] : ref;
			if (tf_row_max(n, x) != ref)
				max_ok = 0;
			/* thresholds: the maximum (none above), 20, random ones */
			for (int q = 0; q < 4; q++)
			{
				size_t		want = n;

				t = q == 0 ? ref : q == 1 ? 20.0f : frand(-10.0f, 12.0f);
				for (int i = 0; i < n; i++)
					if (!(x[i] <= t))
					{
						want = i;
						break;
					}
				if (tf_find_above(n, x, t) != want)
					find_ok = 0;
			}
		}
		free(x);
	}
	ok(max_ok, "row_max equals the scalar maximum, NaNs ignored", level);
	ok(find_ok, "find_above finds the first x > t or NaN, as a scalar loop", level);
}

static void
test_layer_norm(const char *level, float **keep)
{
	int			rows = 5;
	size_t		total = 0,
				at = 0;
	float	   *all;
	double	   *ref;

	for (size_t w = 0; w < NWIDTHS; w++)
		total += (size_t) rows * widths[w];
	all = xmalloc(sizeof(float) * total);
	ref = xmalloc(sizeof(double) * total);
	srand(9);
	for (size_t w = 0; w < NWIDTHS; w++)
	{
		int			d = widths[w];
		float	   *x = xmalloc(sizeof(float) * rows * d);
		float	   *g = xmalloc(sizeof(float) * d);
		float	   *b = xmalloc(sizeof(float) * d);

		for (int i = 0; i < rows * d; i++)
			x[i] = frand(-3.0f, 5.0f);
		for (int i = 0; i < d; i++)
		{
			g[i] = frand(0.5f, 1.5f);
			b[i] = frand(-0.5f, 0.5f);
		}
		for (int r = 0; r < rows; r++)
		{
			double		mean = 0.0,
						var = 0.0;

			for (int i = 0; i < d; i++)
				mean += x[r * d + i];
			mean /= d;
			for (int i = 0; i < d; i++)
				var += (x[r * d + i] - mean) * (x[r * d + i] - mean);
			var /= d;
			for (int i = 0; i < d; i++)
				ref[at + r * d + i] = (x[r * d + i] - mean) / sqrt(var + 1e-5) * g[i] + b[i];
		}
		tf_layer_norm(rows, d, all + at, x, g, b, 1e-5f);
		free(x);
		free(g);
		free(b);
		at += (size_t) rows * d;
	}
	check_close("layer_norm vs double", level, all, ref, total, 1e-5, 1e-5);
	*keep = all;
	free(ref);
}

#define NACT 4099

static void
test_activations(const char *level, float **keep)
{
	float	   *x = xmalloc(sizeof(float) * 3 * NACT);
	double	   *ref = xmalloc(sizeof(double) * 3 * NACT);

	srand(10);
	for (int i = 0; i < NACT; i++)
	{
		float		v = frand(-12.0f, 12.0f);

		x[i] = x[NACT + i] = x[2 * NACT + i] = v;
		ref[i] = v > 0.0f ? v : 0.0;
		ref[NACT + i] = 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
		ref[2 * NACT + i] = v / (1.0 + exp(-(double) v));
	}
	tf_relu(NACT, x);
	tf_gelu(NACT, x + NACT);
	tf_silu(NACT, x + 2 * NACT);
	check_close("relu vs double", level, x, ref, NACT, 0.0, 0.0);
	check_close("gelu vs double (erf)", level, x + NACT, ref + NACT, NACT, 1e-6, 1e-6);
	check_close("silu vs double", level, x + 2 * NACT, ref + 2 * NACT, NACT, 1e-6, 1e-6);

	/* the derivatives (training): dx = dy · f'(x), in place on dy as the trainer calls them */
	{
		float	   *in = xmalloc(sizeof(float) * NACT);
		float	   *g = xmalloc(sizeof(float) * 2 * NACT);
		double	   *gref = xmalloc(sizeof(double) * 2 * NACT);

		for (int i = 0; i < NACT; i++)
		{
			double		v = in[i] = frand(-12.0f, 12.0f);
			double		dy = g[i] = g[NACT + i] = frand(-2.0f, 2.0f);
			double		s = 1.0 / (1.0 + exp(-v));

			gref[i] = dy * (0.5 * (1.0 + erf(v / sqrt(2.0))) + v * exp(-0.5 * v * v) / sqrt(2.0 * M_PI));
			gref[NACT + i] = dy * s * (1.0 + v * (1.0 - s));
		}
		tf_gelu_grad(NACT, g, g, in);
		tf_silu_grad(NACT, g + NACT, g + NACT, in);
		check_close("gelu' vs double (erf)", level, g, gref, NACT, 1e-6, 1e-5);
		check_close("silu' vs double", level, g + NACT, gref + NACT, NACT, 1e-6, 1e-5);
		free(in);
		free(g);
		free(gref);
	}
	*keep = x;
	free(ref);
}

static void
test_vector(const char *level)
{
	float		got[NWIDTHS];
	double		ref[NWIDTHS];
	int			finite_ok = 1;

	srand(12);
	for (size_t w = 0; w < NWIDTHS; w++)
	{
		int			n = widths[w];
		float	   *a = xmalloc(sizeof(float) * n);
		float	   *b = xmalloc(sizeof(float) * n);
		double		s = 0.0;

		for (int i = 0; i < n; i++)
		{
			a[i] = frand(-1.0f, 1.0f);
			b[i] = frand(-1.0f, 1.0f);
			s += (double) a[i] * b[i];
		}
		ref[w] = s;
		got[w] = (float) tf_dot(n, a, b);
		/* a NaN or an infinity at the first, the last and a middle place */
		if (!tf_all_finite(n, a))
			finite_ok = 0;
		for (int at = 0; at < 3; at++)
		{
			int			i = at == 0 ? 0 : at == 1 ? n - 1 : n / 2;
			float		keep = a[i];

			a[i] = at == 1 ? INFINITY : NAN;
			if (tf_all_finite(n, a))
				finite_ok = 0;
			a[i] = keep;
		}
		free(a);
		free(b);
	}
	check_close("dot vs double", level, got, ref, NWIDTHS, 1e-6, 1e-6);
	ok(finite_ok, "all_finite finds NaN and infinity anywhere", level);
}

/* fp32, fp16 products (tf_linear), few rows and sgemm (tf_matmul) against double */
static void
test_fp32(const char *level)
{
	static const int shapes[][3] = {{1, 70, 33}, {3, 129, 64}, {13, 100, 257}, {40, 64, 96}, {5, 200, 31}};

	srand(13);
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
	{
		int			m = shapes[s][0],
					n = shapes[s][1],
					k = shapes[s][2];
		float	   *x = xmalloc(sizeof(float) * m * k);
		float	   *w = xmalloc(sizeof(float) * n * k);
		uint16_t   *wh = xmalloc(sizeof(uint16_t) * n * k);
		float	   *wf = xmalloc(sizeof(float) * n * k);
		float	   *bias = xmalloc(sizeof(float) * n);
		void	   *p32 = xmalloc(tf_packed_size(n, k, TF_F32));
		void	   *p16 = xmalloc(tf_packed_size(n, k, TF_BF16));
		float	   *y = xmalloc(sizeof(float) * m * n);
		float	   *y32 = xmalloc(sizeof(float) * m * n);
		double	   *ref = xmalloc(sizeof(double) * m * n);
		double	   *ref16 = xmalloc(sizeof(double) * m * n);
		double	   *refmm = xmalloc(sizeof(double) * m * n);
		char		what[64];

		for (int i = 0; i < m * k; i++)
			x[i] = frand(-1.0f, 1.0f);
		for (int i = 0; i < n * k; i++)
		{
			uint32_t	bits;

			w[i] = frand(-1.0f, 1.0f);
			memcpy(&bits, &w[i], 4);
			wh[i] = (uint16_t) (bits >> 16);	/* bf16 by truncation */
			wf[i] = tf_bf16_to_float(wh[i]);
		}
		for (int j = 0; j < n; j++)
			bias[j] = frand(-1.0f, 1.0f);
		for (int r = 0; r < m; r++)
			for (int j = 0; j < n; j++)
			{
				double		a = 0.0,
							h = 0.0;

				for (int p = 0; p < k; p++)
				{
					a += (double) x[r * k + p] * w[j * k + p];
					h += (double) x[r * k + p] * wf[j * k + p];
				}
				ref[r * n + j] = a + bias[j];
				ref16[r * n + j] = h + bias[j];
				refmm[r * n + j] = 0.5 * a;
			}
		tf_pack_panels(n, k, p32, w, TF_F32);
		tf_pack_panels(n, k, p16, wh, TF_BF16);

		tf_linear(m, n, k, y, x, p32, TF_F32, bias);
		snprintf(what, sizeof(what), "linear f32 %dx%dx%d", m, n, k);
		check_close(what, level, y, ref, (size_t) m * n, 1e-5, 1e-5);
		tf_linear(m, n, k, y, x, p16, TF_BF16, bias);
		snprintf(what, sizeof(what), "linear bf16 %dx%dx%d", m, n, k);
		check_close(what, level, y, ref16, (size_t) m * n, 1e-5, 1e-5);
		/* the same sums as fp32 on the widened weights, converted as they go or a panel at once */
		tf_pack_panels(n, k, p32, wf, TF_F32);
		tf_linear(m, n, k, y32, x, p32, TF_F32, bias);
		snprintf(what, sizeof(what), "linear bf16 %dx%dx%d is fp32 on its values, bitwise", m, n, k);
		ok(memcmp(y, y32, sizeof(float) * m * n) == 0, what, level);
		/* few rows: gemm.c's kernels; more than TF_SMALL_M: OpenBLAS */
		tf_matmul(m, n, k, y, n, x, k, w, k, true, 0.5f, 0.0f);
		snprintf(what, sizeof(what), "matmul %s %dx%dx%d", m > TF_SMALL_M ? "sgemm" : "few", m, n, k);
		check_close(what, level, y, refmm, (size_t) m * n, 1e-5, 1e-5);
		free(x);
		free(w);
		free(wh);
		free(wf);
		free(bias);
		free(p32);
		free(p16);
		free(y);
		free(y32);
		free(ref);
		free(ref16);
		free(refmm);
	}
}

/* outputs of test_bf16d: 1·200 + 2·300 + 3·129 + 13·100 + 40·64 */
#define NB16D (200 + 600 + 387 + 1300 + 2560)

/* f to bf16 to nearest even, written apart from gemm_bf16.c's (the reference of the test) */
static float
bf16_round(float f)
{
	uint32_t	u;

	memcpy(&u, &f, 4);
	u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
	memcpy(&f, &u, 4);
	return f;
}

/*
 * bf16 computed in bf16 (TF_BF16D): against the definition, each output
 * summed in fp32 pair by pair (the odd column's product, then the even
 * one's) of the bf16-rounded x and W, bitwise; and against double on the
 * fp32 values, within bf16's precision.  The result is kept for the
 * bitwise check between levels.
 */
static void
test_bf16d(const char *level, float **keep)
{
	static const int shapes[][3] = {{1, 200, 33}, {2, 300, 64}, {3, 129, 65}, {13, 100, 257}, {40, 64, 96}};
	size_t		total = 0,
				at = 0;

	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		total += (size_t) shapes[s][0] * shapes[s][1];
	*keep = xmalloc(sizeof(float) * total);
	srand(17);
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
	{
		int			m = shapes[s][0],
					n = shapes[s][1],
					k = shapes[s][2];
		float	   *x = xmalloc(sizeof(float) * m * k);
		float	   *w = xmalloc(sizeof(float) * n * k);
		float	   *bias = xmalloc(sizeof(float) * n);
		void	   *packed = xmalloc(tf_packed_size(n, k, TF_BF16D));
		float	   *y = xmalloc(sizeof(float) * m * n);
		float	   *row = xmalloc(sizeof(float) * k);
		double	   *ref = xmalloc(sizeof(double) * m * n);
		double	   *exact = xmalloc(sizeof(double) * m * n);
		int			same = 1,
					rows_ok = 1;
		char		what[64];

		for (int i = 0; i < m * k; i++)
			x[i] = frand(-2.0f, 2.0f);
		for (int i = 0; i < n * k; i++)
			w[i] = frand(-0.5f, 0.5f);
		for (int j = 0; j < n; j++)
			bias[j] = frand(-1.0f, 1.0f);
		/* packed in two calls, as a model's parts come */
		tf_pack_bf16d_rows(n, k, packed, w, TF_F32, 0, n / 3);
		tf_pack_bf16d_rows(n, k, packed, w + (size_t) (n / 3) * k, TF_F32, n / 3, n - n / 3);
		for (int j = 0; j < n; j++)
		{
			tf_packed_row(n, k, row, packed, TF_BF16D, j);
			for (int p = 0; p < k; p++)
				rows_ok &= row[p] == bf16_round(w[j * k + p]);
		}
		for (int r = 0; r < m; r++)
			for (int j = 0; j < n; j++)
			{
				float		acc = 0.0f;
				double		d = 0.0;

				for (int p = 0; p < k; p += 2)
				{
					if (p + 1 < k)
					{
						volatile float t = bf16_round(x[r * k + p + 1]) * bf16_round(w[j * k + p + 1]);

						acc += t;
					}
					{
						volatile float t = bf16_round(x[r * k + p]) * bf16_round(w[j * k + p]);

						acc += t;
					}
				}
				for (int p = 0; p < k; p++)
					d += (double) x[r * k + p] * w[j * k + p];
				ref[r * n + j] = (double) (acc + bias[j]);
				exact[r * n + j] = d + bias[j];
			}
		tf_linear(m, n, k, y, x, packed, TF_BF16D, bias);
		for (int i = 0; i < m * n; i++)
			same &= y[i] == (float) ref[i];
		snprintf(what, sizeof(what), "bf16d %dx%dx%d as defined", m, n, k);
		ok(same && rows_ok, what, level);
		/* bf16 keeps 8 bits: a sum of k products of numbers each within 2^-8 */
		snprintf(what, sizeof(what), "bf16d %dx%dx%d vs fp32", m, n, k);
		check_close(what, level, y, exact, (size_t) m * n, 0.02 * sqrt((double) k), 0.0);
		memcpy(*keep + at, y, sizeof(float) * m * n);
		at += (size_t) m * n;
		free(x);
		free(w);
		free(bias);
		free(packed);
		free(y);
		free(row);
		free(ref);
		free(exact);
	}
}

/* int8 products against double on the same quantized values; the result is kept for the bitwise check */
static void
test_int8(const char *level, float **keep)
{
	int			m = 9,
				n = 100,
				k = 70;
	float	   *x = xmalloc(sizeof(float) * m * k);
	float	   *w = xmalloc(sizeof(float) * n * k);
	int8_t	   *q = xmalloc((size_t) n * k);
	float	   *sw = xmalloc(sizeof(float) * n);
	float	   *bias = xmalloc(sizeof(float) * n);
	void	   *packed = xmalloc(tf_packed_size(n, k, TF_I8));
	uint8_t    *xq = xmalloc((size_t) k + 4);
	float	   *y = xmalloc(sizeof(float) * m * n);
	double	   *ref = xmalloc(sizeof(double) * m * n);

	srand(14);
	for (int i = 0; i < m * k; i++)
		x[i] = frand(-2.0f, 3.0f);
	for (int i = 0; i < n * k; i++)
		w[i] = frand(-0.5f, 0.5f);
	for (int j = 0; j < n; j++)
		bias[j] = frand(-1.0f, 1.0f);
	tf_quantize_rows(n, k, q, sw, w);
	tf_pack_int8(n, k, packed, q, sw);
	for (int r = 0; r < m; r++)
	{
		float		sx;
		int32_t		zx;

		tf_quantize_input(k, xq, &sx, &zx, x + r * k);
		for (int j = 0; j < n; j++)
		{
			double		acc = 0.0;

			for (int p = 0; p < k; p++)
				acc += ((double) xq[p] - zx) * q[j * k + p];
			ref[r * n + j] = acc * sx * sw[j] + bias[j];
		}
	}
	tf_linear(m, n, k, y, x, packed, TF_I8, bias);
	check_close("linear int8 9x100x70", level, y, ref, (size_t) m * n, 1e-5, 1e-5);
	*keep = y;
	free(x);
	free(w);
	free(q);
	free(sw);
	free(bias);
	free(packed);
	free(xq);
	free(ref);
}

/*
 * every family reports the level; int8's AVX-512 kernels need VNNI besides,
 * and only auto may choose AMX
 */
static void
check_families(int level, const char *name, int is_auto)
{
	char		what[128];

	for (int f = 0; f < TF_KERNEL_FAMILIES; f++)
	{
		const char *got = tf_kernel_family(f);
		int			good = strcmp(got, name) == 0;

		if (f == TF_KERNELS_INT8 && level == TF_LEVEL_AVX512)
			good = strcmp(got, "avx512vnni") == 0 || strcmp(got, "avx2") == 0 ||
				(is_auto && strcmp(got, "amx") == 0);
		/* bf16 dot products: AVX512_BF16 where the CPU has it, else the portable sums */
		if (f == TF_KERNELS_BF16)
			good = strcmp(got, "portable") == 0 || (level == TF_LEVEL_AVX512 && strcmp(got, "avx512bf16") == 0);
		snprintf(what, sizeof(what), "family %s reports %s", tf_kernel_family_name(f), got);
		ok(good, what, name);
	}
}

/* OpenBLAS's core is of the level (its own choice, if of that level) */
static void
check_blas(int level, const char *name)
{
	static const char *const by_level[3][3] = {
		{"Prescott", NULL, NULL}, {"Haswell", "Zen", NULL}, {"SkylakeX", "Cooperlake", "SapphireRapids"}
	};
	const char *core = openblas_get_corename();
	int			good = 0;
	char		what[128];

	for (int i = 0; i < 3; i++)
		if (by_level[level][i] && strcasecmp(core, by_level[level][i]) == 0)
			good = 1;
	snprintf(what, sizeof(what), "OpenBLAS core %s", core);
	ok(good, what, name);
}

static int
same_bits(const float *a, const float *b, size_t n)
{
	return memcmp(a, b, sizeof(float) * n) == 0;
}

/*
 * OpenBLAS on demand (blas.h): the settings made before do not load it, nor
 * a product of TF_SMALL_M rows or fewer; the first larger product does, and
 * gives gemm.c's kernels' result (within rounding).
 */
static void
test_blas_on_demand(void)
{
	enum
	{
		M = 40, N = 24, K = 33
	};
	static float a[M * K],
				b[K * N],
				small[M * N],
				big[M * N];
	double		maxdiff = 0;
	char		what[128];

	tf_set_blas_threads(1);
	tf_cpu_kernels(TF_LEVEL_AUTO);
	ok(!tf_blas_loaded(), "OpenBLAS not loaded by setting its threads and the kernels' level", "on demand");
	for (int i = 0; i < M * K; i++)
		a[i] = (float) ((i * 37) % 101) / 50.0f - 1.0f;
	for (int i = 0; i < K * N; i++)
		b[i] = (float) ((i * 53) % 97) / 48.0f - 1.0f;
	/* the small products: row blocks of TF_SMALL_M rows, each gemm.c's */
	for (int r = 0; r < M; r += TF_SMALL_M)
		tf_matmul(M - r < TF_SMALL_M ? M - r : TF_SMALL_M, N, K, small + (size_t) r * N, N, a + (size_t) r * K, K,
				  b, N, false, 1.0f, 0.0f);
	ok(!tf_blas_loaded(), "OpenBLAS not loaded by products of TF_SMALL_M rows", "on demand");
	tf_matmul(M, N, K, big, N, a, K, b, N, false, 1.0f, 0.0f);
	ok(tf_blas_loaded(), "OpenBLAS loaded by the first product of more rows", "on demand");
	for (int i = 0; i < M * N; i++)
		maxdiff = fmax(maxdiff, fabs((double) big[i] - small[i]));
	snprintf(what, sizeof(what), "its product = gemm.c's (max abs diff %.2g)", maxdiff);
	ok(maxdiff < 1e-4, what, "on demand");
}

/* y (m, n) = tf_linear of int8 weights (n, k) on x (m, k), at the kernels in effect */
static float *
int8_product(int m, int n, int k)
{
	float	   *x = xmalloc(sizeof(float) * m * k);
	float	   *w = xmalloc(sizeof(float) * n * k);
	int8_t	   *q = xmalloc((size_t) n * k);
	float	   *sw = xmalloc(sizeof(float) * n);
	float	   *bias = xmalloc(sizeof(float) * n);
	void	   *packed = xmalloc(tf_packed_size(n, k, TF_I8));
	float	   *y = xmalloc(sizeof(float) * m * n);

	srand(m * 7 + n * 3 + k);
	for (int i = 0; i < m * k; i++)
		x[i] = frand(-2.0f, 3.0f);
	for (int i = 0; i < n * k; i++)
		w[i] = frand(-0.5f, 0.5f);
	for (int j = 0; j < n; j++)
		bias[j] = frand(-1.0f, 1.0f);
	tf_quantize_rows(n, k, q, sw, w);
	tf_pack_int8(n, k, packed, q, sw);
	tf_linear(m, n, k, y, x, packed, TF_I8, bias);
	free(x);
	free(w);
	free(q);
	free(sw);
	free(bias);
	free(packed);
	return y;
}

/*
 * int8 products of the given shapes at `level`, each bitwise as the
 * portable sums; named after `family`.
 */
static void
int8_shapes_bitwise(int level, const int (*shapes)[3], size_t nshapes, const char *family)
{
	char		what[128];

	for (size_t s = 0; s < nshapes; s++)
	{
		int			m = shapes[s][0],
					n = shapes[s][1],
					k = shapes[s][2];
		float	   *got,
				   *base;

		tf_cpu_kernels(level);
		got = int8_product(m, n, k);
		tf_cpu_kernels(TF_LEVEL_PORTABLE);
		base = int8_product(m, n, k);
		snprintf(what, sizeof(what), "int8 %dx%dx%d bitwise the same as portable", m, n, k);
		ok(same_bits(got, base, (size_t) m * n), what, family);
		free(got);
		free(base);
	}
	tf_cpu_kernels(TF_LEVEL_AUTO);
}

/*
 * AMX (auto, where the CPU and the kernel allow it): tiles of 16 and 32
 * rows, 64 columns of x at a time, a last panel cut short, blocks of
 * panels, rows left to VNNI, in_dim not a multiple of 64 (all VNNI).
 */
static void
test_int8_amx(void)
{
	static const int shapes[][3] = {
		{16, 32, 64}, {17, 100, 192}, {50, 100, 192}, {64, 33, 128}, {100, 70, 256}, {40, 64, 100},
		{40, 2100, 64}			/* three blocks of columns, the last cut short */
	};

	tf_cpu_kernels(TF_LEVEL_AUTO);
	if (strcmp(tf_kernel_family(TF_KERNELS_INT8), "amx") != 0)
	{
		printf("ok - # SKIP int8 amx: this CPU or kernel has no AMX (int8 kernels %s)\n",
			   tf_kernel_family(TF_KERNELS_INT8));
		return;
	}
	int8_shapes_bitwise(TF_LEVEL_AUTO, shapes, sizeof(shapes) / sizeof(shapes[0]), "amx");
}

/*
 * AVX2 with 3 rows or more (gemm_int8.c's block_avx2_wide): tiles of 3 rows
 * and the 1 or 2 left, the weights widened 64 groups of 4 columns at a time
 * (in_dim past 256 takes several chunks), a last panel cut short; 1 and 2
 * rows keep the narrow kernel.
 */
static void
test_int8_avx2(void)
{
	static const int shapes[][3] = {
		{3, 32, 64}, {4, 100, 300}, {5, 64, 520}, {2, 40, 300}, {1, 33, 260}, {7, 96, 256}, {128, 33, 1024},
		{3, 70, 130}, {4, 8, 2}
	};

	if (tf_cpu_kernels(TF_LEVEL_AVX2) == NULL)
	{
		printf("ok - # SKIP int8 avx2: this CPU has no AVX2\n");
		return;
	}
	int8_shapes_bitwise(TF_LEVEL_AVX2, shapes, sizeof(shapes) / sizeof(shapes[0]), "avx2");
}

int
main(void)
{
	static const char *const names[3] = {"portable", "avx2", "avx512"};
	const char *blas_auto;
	const char *best;
	size_t		nsoft = 0,
				nnorm = 0;
	float	   *base_soft = NULL,
			   *base_norm = NULL,
			   *base_act = NULL,
			   *base_i8 = NULL,
			   *base_b16 = NULL;

	test_blas_on_demand();
	blas_auto = tf_blas_init();
	tf_set_blas_threads(1);
	for (size_t w = 0; w < NWIDTHS; w++)
	{
		nsoft += (size_t) 3 * widths[w];
		nnorm += (size_t) 5 * widths[w];
	}

	/* portable first: the others are compared with it too */
	for (int level = TF_LEVEL_PORTABLE; level <= TF_LEVEL_AVX512; level++)
	{
		const char *got = tf_cpu_kernels(level);
		float	   *soft,
				   *norm,
				   *act,
				   *i8,
				   *b16;

		if (tf_cpu_level(level) < 0)
		{
			ok(got == NULL, "refused: this CPU lacks it", names[level]);
			continue;
		}
		ok(got != NULL && strcmp(got, names[level]) == 0, "tf_cpu_kernels names the level", names[level]);
		check_families(level, names[level], 0);
		check_blas(level, names[level]);
		test_softmax(names[level], &soft);
		test_log_sum_exp(names[level]);
		test_scans(names[level]);
		test_layer_norm(names[level], &norm);
		test_activations(names[level], &act);
		test_vector(names[level]);
		test_fp32(names[level]);
		test_int8(names[level], &i8);
		test_bf16d(names[level], &b16);
		if (level == TF_LEVEL_PORTABLE)
		{
			base_soft = soft;
			base_norm = norm;
			base_act = act;
			base_i8 = i8;
			base_b16 = b16;
			continue;
		}
		ok(same_bits(i8, base_i8, 9 * 100), "int8 bitwise the same as portable", names[level]);
		ok(same_bits(b16, base_b16, NB16D), "bf16d bitwise the same as portable", names[level]);
		free(b16);
		if (level == TF_LEVEL_AVX2)
		{
			ok(same_bits(soft, base_soft, nsoft), "softmax bitwise the same as portable", names[level]);
			ok(same_bits(norm, base_norm, nnorm), "layer_norm bitwise the same as portable", names[level]);
			ok(same_bits(act, base_act, 3 * NACT), "activations bitwise the same as portable", names[level]);
		}
		free(soft);
		free(norm);
		free(act);
		free(i8);
	}

	/* a level no CPU has changes nothing; auto is the best again, OpenBLAS its own choice */
	best = tf_cpu_kernels(TF_LEVEL_PORTABLE);
	ok(tf_cpu_kernels(TF_LEVEL_AVX512 + 1) == NULL && strcmp(tf_kernel_family(TF_KERNELS_SOFTMAX), "portable") == 0 &&
	   strcmp(tf_kernel_family(TF_KERNELS_FP32), "portable") == 0, "an unknown level changes nothing", best);
	best = tf_cpu_kernels(TF_LEVEL_AUTO);
	ok(best != NULL && strcmp(best, names[tf_cpu_level(TF_LEVEL_AUTO)]) == 0, "auto is the best level", best);
	check_families(tf_cpu_level(TF_LEVEL_AUTO), best, 1);
	test_int8_amx();
	test_int8_avx2();
	ok(strcmp(openblas_get_corename(), blas_auto) == 0, "auto: OpenBLAS's own choice again", best);

	free(base_soft);
	free(base_norm);
	free(base_act);
	free(base_i8);
	free(base_b16);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
