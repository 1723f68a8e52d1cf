/*
 * test_core.c
 *		Unit tests of the numeric core against PyTorch fixtures, and of the
 *		metrics' n-gram counts against a naive count, outside the server
 *		(make unittest).  Each case prints its max abs difference, in
 *		the spirit of llm.c's check_tensor.
 *
 * Fixture format (test/fixtures/core_ops.txt, from tools/gen_fixtures.py):
 *   case NAME OP p1 p2 p3 p4 p5 p6
 *   T LABEL COUNT v1 v2 ...        (one line per tensor)
 *   end
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "metrics.h"
#include "model_internal.h"
#include "online_softmax.h"
#include "spm.h"
#include "blas.h"
#include "tensor_ops.h"
#include "threads.h"
#include "train_layers.h"
#include "weight_file.h"

#define TOL 1e-5f
#define MAX_TENSORS 12

typedef struct Tensor
{
	char		label[32];
	int			count;
	float	   *data;
} Tensor;

typedef struct Case
{
	char		name[64];
	char		op[32];
	int			p[6];
	int			ntensors;
	Tensor		t[MAX_TENSORS];
} Case;

static int	passed = 0;
static int	failed = 0;

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

static const float *
get(const Case *c, const char *label, int count)
{
	for (int i = 0; i < c->ntensors; i++)
		if (strcmp(c->t[i].label, label) == 0)
		{
			if (c->t[i].count != count)
			{
				fprintf(stderr, "%s: tensor %s has %d values, expected %d\n",
						c->name, label, c->t[i].count, count);
				exit(2);
			}
			return c->t[i].data;
		}
	fprintf(stderr, "%s: no tensor %s\n", c->name, label);
	exit(2);
}

/* Compare, print the max abs difference, count the result. */
static void
check_tensor(const char *name, const char *what, const float *got,
			 const float *expected, int n, float tol)
{
	float		maxdiff = 0.0f;
	int			bad = 0;

	for (int i = 0; i < n; i++)
	{
		float		d = fabsf(got[i] - expected[i]);

		if (!(d <= tol))		/* NaN fails too */
			bad = 1;
		if (d > maxdiff || isnan(d))
			maxdiff = d;
	}
	printf("%-4s %-16s %-8s n=%-6d max abs diff %.3g\n",
		   bad ? "FAIL" : "ok", name, what, n, maxdiff);
	if (bad)
		failed++;
	else
		passed++;
}

/* ---- the training layers against torch.autograd (grad_ops.txt) ---- */

#define GRAD_TOL 1e-4f

/* Relative to the largest expected magnitude: the "relative error <= 1e-4". */
static void
check_rel(const char *name, const char *what, const float *got, const float *expected, int n)
{
	float		maxdiff = 0.0f,
				maxref = 0.0f;
	int			bad = 0;

	for (int i = 0; i < n; i++)
	{
		float		d = fabsf(got[i] - expected[i]);

		if (d > maxdiff || isnan(d))
			maxdiff = d;
		if (fabsf(expected[i]) > maxref)
			maxref = fabsf(expected[i]);
	}
	if (maxref < 1e-6f)
		maxref = 1e-6f;
	bad = !(maxdiff / maxref <= GRAD_TOL);
	printf("%-4s %-22s %-8s n=%-6d max rel diff %.3g\n",
		   bad ? "FAIL" : "ok", name, what, n, maxdiff / maxref);
	if (bad)
		failed++;
	else
		passed++;
}

static float *
zeros(size_t n)
{
	return xmalloc(n * sizeof(float));
}

static bool
run_grad_case(const Case *c)
{
	const int  *p = c->p;

	if (strcmp(c->op, "grad_linear") == 0)
	{
		int			n = p[0],
					o = p[1],
					in = p[2];
		float	   *y = zeros((size_t) n * o),
				   *dx = zeros((size_t) n * in),
				   *dw = zeros((size_t) o * in),
				   *db = zeros(o);
		const float *x = get(c, "x", n * in),
				   *w = get(c, "w", o * in);

		tf_linear_fw(n, o, in, y, x, w, get(c, "b", o));
		tf_linear_bw(n, o, in, dx, dw, db, get(c, "dy", n * o), x, w);
		check_rel(c->name, "y", y, get(c, "y", n * o), n * o);
		check_rel(c->name, "dx", dx, get(c, "dx", n * in), n * in);
		check_rel(c->name, "dw", dw, get(c, "dw", o * in), o * in);
		check_rel(c->name, "db", db, get(c, "db", o), o);
		free(y), free(dx), free(dw), free(db);
	}
	else if (strcmp(c->op, "grad_layer_norm") == 0)
	{
		int			n = p[0],
					d = p[1];
		float	   *y = zeros((size_t) n * d),
				   *dx = zeros((size_t) n * d),
				   *dg = zeros(d),
				   *db = zeros(d),
				   *mean = zeros(n),
				   *rstd = zeros(n);
		const float *x = get(c, "x", n * d),
				   *g = get(c, "g", d);

		tf_layer_norm_fw(n, d, y, mean, rstd, x, g, get(c, "b", d), 1e-5f);
		tf_layer_norm_bw(n, d, dx, dg, db, get(c, "dy", n * d), x, mean, rstd, g);
		check_rel(c->name, "y", y, get(c, "y", n * d), n * d);
		check_rel(c->name, "dx", dx, get(c, "dx", n * d), n * d);
		check_rel(c->name, "dg", dg, get(c, "dg", d), d);
		check_rel(c->name, "db", db, get(c, "db", d), d);
		free(y), free(dx), free(dg), free(db), free(mean), free(rstd);
	}
	else if (strcmp(c->op, "grad_act") == 0)
	{
		int			n = p[1];
		TfTrainAct	act = p[0] == 0 ? TF_TRAIN_RELU : p[0] == 1 ? TF_TRAIN_GELU : TF_TRAIN_SILU;
		float	   *y = zeros(n),
				   *dx = zeros(n);

		tf_activation_fw(act, n, y, get(c, "x", n));
		tf_activation_bw(act, n, dx, get(c, "dy", n), get(c, "x", n));
		check_rel(c->name, "y", y, get(c, "y", n), n);
		check_rel(c->name, "dx", dx, get(c, "dx", n), n);
		free(y), free(dx);
	}
	else if (strcmp(c->op, "grad_mha") == 0)
	{
		int			n = p[0],
					m = p[1],
					d = p[2],
					heads = p[3];
		const float *pad = get(c, "pad", m);
		unsigned char *key_pad = xmalloc(m);
		float	   *out = zeros((size_t) n * d),
				   *pr = zeros((size_t) heads * n * m),
				   *dq = zeros((size_t) n * d),
				   *dk = zeros((size_t) m * d),
				   *dv = zeros((size_t) m * d),
				   *scratch = zeros((size_t) 2 * n * m);
		const float *q = get(c, "q", n * d),
				   *k = get(c, "k", m * d),
				   *v = get(c, "v", m * d);

		for (int j = 0; j < m; j++)
			key_pad[j] = pad[j] != 0.0f;
		tf_mha_fw(n, m, d, heads, out, pr, NULL, q, k, v, p[4] != 0, p[5] ? key_pad : NULL, NULL, 1.0f);
		tf_mha_bw(n, m, d, heads, dq, dk, dv, scratch, get(c, "dy", n * d), pr, q, k, v, NULL, 1.0f);
		check_rel(c->name, "out", out, get(c, "out", n * d), n * d);
		check_rel(c->name, "p", pr, get(c, "p", heads * n * m), heads * n * m);
		check_rel(c->name, "dq", dq, get(c, "dq", n * d), n * d);
		check_rel(c->name, "dk", dk, get(c, "dk", m * d), m * d);
		check_rel(c->name, "dv", dv, get(c, "dv", m * d), m * d);
		free(key_pad), free(out), free(pr), free(dq), free(dk), free(dv), free(scratch);
	}
	else if (strcmp(c->op, "grad_embedding") == 0)
	{
		int			n = p[0],
					d = p[1],
					vocab = p[2],
					learned = p[3];
		const float *idf = get(c, "ids", n);
		int		   *ids = xmalloc(sizeof(int) * n);
		float	   *y = zeros((size_t) n * d),
				   *de = zeros((size_t) vocab * d),
				   *dpos = zeros((size_t) n * d);
		float		scale = sqrtf((float) d);

		for (int i = 0; i < n; i++)
			ids[i] = (int) idf[i];
		tf_embedding_fw(n, d, y, ids, get(c, "e", vocab * d), scale, get(c, "pos", n * d));
		tf_embedding_bw(n, d, de, learned ? dpos : NULL, get(c, "dy", n * d), ids, scale, -1);
		check_rel(c->name, "y", y, get(c, "y", n * d), n * d);
		check_rel(c->name, "de", de, get(c, "de", vocab * d), vocab * d);
		if (learned)
			check_rel(c->name, "dpos", dpos, get(c, "dpos", n * d), n * d);
		free(ids), free(y), free(de), free(dpos);
	}
	else if (strcmp(c->op, "cross_entropy") == 0)
	{
		int			n = p[0],
					vocab = p[1],
					counted;
		const float *tf = get(c, "targets", n);
		int		   *t = xmalloc(sizeof(int) * n);
		float	   *dz = zeros((size_t) n * vocab);
		float		loss;

		for (int i = 0; i < n; i++)
			t[i] = (int) tf[i];
		loss = (float) tf_cross_entropy(n, vocab, dz, &counted, get(c, "logits", n * vocab), t, p[2],
										p[3] / 1000.0f, 0);
		check_rel(c->name, "loss", &loss, get(c, "loss", 1), 1);
		check_rel(c->name, "dlogits", dz, get(c, "dlogits", n * vocab), n * vocab);
		free(t), free(dz);
	}
	else if (strcmp(c->op, "adam") == 0)
	{
		int			n = p[0];
		float	   *w = zeros(n),
				   *m = zeros(n),
				   *v = zeros(n);
		const float *lr = get(c, "lr", 3);
		const char *g[3] = {"g1", "g2", "g3"};
		TfAdam		a = {0.9, 0.98, 1e-9, 0};

		memcpy(w, get(c, "p0", n), sizeof(float) * n);
		for (int s = 0; s < 3; s++)
		{
			a.step++;
			tf_adam_step(n, w, m, v, get(c, g[s], n), &a, lr[s]);
		}
		check_rel(c->name, "exp_avg", m, get(c, "m3", n), n);
		check_rel(c->name, "exp_avg_sq", v, get(c, "v3", n), n);
		check_rel(c->name, "param", w, get(c, "p3", n), n);
		/* the steps themselves, which a check of the parameters alone dilutes */
		for (int i = 0; i < n; i++)
		{
			m[i] = w[i] - get(c, "p0", n)[i];
			v[i] = get(c, "p3", n)[i] - get(c, "p0", n)[i];
		}
		check_rel(c->name, "p3 - p0", m, v, n);
		free(w), free(m), free(v);
	}
	else if (strcmp(c->op, "noam") == 0)
	{
		const float *steps = get(c, "steps", 7);
		float		rates[7];

		for (int i = 0; i < 7; i++)
			rates[i] = (float) tf_noam_rate(p[0], (long) steps[i], p[1]);
		check_rel(c->name, "rate", rates, get(c, "rates", 7), 7);
	}
	else
		return false;
	return true;
}

static void
run_case(const Case *c)
{
	const int  *p = c->p;

	if (strcmp(c->op, "softmax") == 0)
	{
		int			n = p[0] * p[1];
		float	   *x = xmalloc(n * sizeof(float));

		memcpy(x, get(c, "x", n), n * sizeof(float));
		tf_softmax_rows(p[0], p[1], x);
		check_tensor(c->name, "softmax", x, get(c, "expected", n), n, TOL);
		free(x);
	}
	else if (strcmp(c->op, "layer_norm") == 0)
	{
		int			n = p[0] * p[1];
		float	   *y = xmalloc(n * sizeof(float));

		tf_layer_norm(p[0], p[1], y, get(c, "x", n), get(c, "gamma", p[1]),
					  get(c, "beta", p[1]), 1e-5f);
		check_tensor(c->name, "ln", y, get(c, "expected", n), n, TOL);
		free(y);
	}
	else if (strcmp(c->op, "relu") == 0 || strcmp(c->op, "gelu") == 0 ||
			 strcmp(c->op, "silu") == 0)
	{
		int			n = p[0];
		float	   *x = xmalloc(n * sizeof(float));

		memcpy(x, get(c, "x", n), n * sizeof(float));
		if (c->op[0] == 'r')
			tf_relu(n, x);
		else if (c->op[0] == 'g')
			tf_gelu(n, x);
		else
			tf_silu(n, x);
		check_tensor(c->name, c->op, x, get(c, "expected", n), n, TOL);
		free(x);
	}
	else if (strcmp(c->op, "attention") == 0 || strcmp(c->op, "mha") == 0)
	{
		int			mha = c->op[0] == 'm';
		int			n = p[0],
					m = p[1],
					dk = p[2],
					dv = mha ? p[2] : p[3],
					heads = mha ? p[3] : 1;
		const float *pad = get(c, "pad", m);
		unsigned char *key_pad = xmalloc(m);
		float	   *out = xmalloc((size_t) n * dv * sizeof(float));
		float	   *w = xmalloc((size_t) n * m * sizeof(float));
		AttnMask	mask = {.causal = p[4] != 0,.q_pos = 0,.key_pad = p[5] ? key_pad : NULL};

		for (int j = 0; j < m; j++)
			key_pad[j] = pad[j] != 0.0f;

		if (mha)
			tf_multihead_attention(n, m, dk, dv, heads, out, w,
								   get(c, "q", n * dk), get(c, "k", m * dk),
								   get(c, "v", m * dv), &mask);
		else
		{
			tf_attention(n, m, dk, dv, out, dv, w,
						 get(c, "q", n * dk), dk, get(c, "k", m * dk), dk,
						 get(c, "v", m * dv), dv, &mask);
			check_tensor(c->name, "weights", w, get(c, "weights", n * m), n * m, TOL);
		}
		check_tensor(c->name, "output", out, get(c, "expected", n * dv), n * dv, TOL);

		/* row by row with q_pos, as incremental decoding does it */
		if (!mha && mask.causal)
		{
			const float *q = get(c, "q", n * dk);

			for (int i = 0; i < n; i++)
			{
				AttnMask	row = mask;

				row.q_pos = i;
				tf_attention(1, m, dk, dv, out + (size_t) i * dv, dv, w,
							 q + (size_t) i * dk, dk, get(c, "k", m * dk), dk,
							 get(c, "v", m * dv), dv, &row);
			}
			check_tensor(c->name, "by row", out, get(c, "expected", n * dv), n * dv, TOL);
		}
		free(key_pad);
		free(out);
		free(w);
	}
	else if (strcmp(c->op, "osm") == 0)
	{
		int			n = p[0],
					d = p[1];
		const float *scores = get(c, "scores", n);
		const float *values = get(c, "values", n * d);
		double	   *a = xmalloc((TF_OSM_HEADER + d) * sizeof(double));
		double	   *b = xmalloc((TF_OSM_HEADER + d) * sizeof(double));
		float	   *out = xmalloc(d * sizeof(float));

		/* one pass */
		tf_osm_init(d, a);
		for (int i = 0; i < n; i++)
			tf_osm_add(d, a, scores[i], values + (size_t) i * d);
		tf_osm_result(d, out, a);
		check_tensor(c->name, "stream", out, get(c, "expected", d), d, TOL);

		/* two halves merged, as parallel workers do */
		tf_osm_init(d, a);
		tf_osm_init(d, b);
		for (int i = 0; i < n; i++)
			tf_osm_add(d, i % 3 == 0 ? a : b, scores[i], values + (size_t) i * d);
		tf_osm_merge(d, b, a);
		tf_osm_result(d, out, b);
		check_tensor(c->name, "merged", out, get(c, "expected", d), d, TOL);
		free(a);
		free(b);
		free(out);
	}
	else if (strcmp(c->op, "int8_linear") == 0)
	{
		/* against torch.quantize_per_channel's integers and its dequantized product */
		int			m = p[0],
					n = p[1],
					k = p[2];
		const float *x = get(c, "x", m * k);
		const float *w = get(c, "w", n * k);
		const float *wq_ref = get(c, "wq", n * k);
		const float *xq_ref = get(c, "xq", m * k);
		int8_t	   *q = xmalloc((size_t) n * k);
		float	   *sw = xmalloc(sizeof(float) * n);
		uint8_t    *xq = xmalloc((size_t) k + 4);
		void	   *packed = xmalloc(tf_packed_size(n, k, TF_I8));
		float	   *y = xmalloc(sizeof(float) * m * n);
		float	   *qf = xmalloc(sizeof(float) * n * k);
		float	   *xqf = xmalloc(sizeof(float) * m * k);

		tf_quantize_rows(n, k, q, sw, w);
		for (int i = 0; i < n * k; i++)
			qf[i] = q[i];
		check_tensor(c->name, "w quant", qf, wq_ref, n * k, 0.0f);
		for (int r = 0; r < m; r++)
		{
			float		sx;
			int32_t		zx;

			tf_quantize_input(k, xq, &sx, &zx, x + r * k);
			for (int i = 0; i < k; i++)
				xqf[r * k + i] = xq[i];
		}
		check_tensor(c->name, "x quant", xqf, xq_ref, m * k, 0.0f);
		tf_pack_int8(n, k, packed, q, sw);
		tf_linear(m, n, k, y, x, packed, TF_I8, get(c, "bias", n));
		check_tensor(c->name, "product", y, get(c, "expected", m * n), m * n, 2e-5f);
		check_tensor(c->name, "vs fp32", y, get(c, "fp32", m * n), m * n, 0.05f * sqrtf((float) k / 64));
		free(q);
		free(sw);
		free(xq);
		free(packed);
		free(y);
		free(qf);
		free(xqf);
	}
	else if (!run_grad_case(c))
	{
		fprintf(stderr, "%s: unknown op %s\n", c->name, c->op);
		exit(2);
	}
}

/*
 * tf_linear on packed fp32, fp16 and bf16 weights against a double
 * reference over the same (converted) weights, at row counts on both sides
 * of every tile size and widths with partial panels; each row's result must
 * be bitwise the same computed alone; tf_packed_row must give back the rows.
 */
static void
test_linear(const char *kernels)
{
	static const int shapes[][3] = {	/* rows, out, in */
		{1, 1, 1}, {1, 33, 17}, {4, 64, 256}, {13, 100, 70}, {12, 32, 5},
		{25, 45, 512}, {5, 8001, 64}, {128, 40, 96}, {1, 300, 40}, {2, 200, 33}, {3, 129, 16},
		{13, 40, 0}				/* no inputs: the bias alone */
	};
	const char *names[] = {"f32", "f16", "bf16"};

	srand(7);
	/*
	 * four times: at the default limits; with x packed for every product
	 * of 4 rows or more, in runs of one block of rows (at 4 kB) where k is
	 * 86 or more (gemm.c, pack_rows); with panels taken 16 inputs at a time
	 * (where more than one block of rows meets them); and both, in runs of
	 * many blocks (at 64 kB), so that packed blocks are taken in chunks
	 */
	for (int lim = 0; lim < 4; lim++)
	for (int dt = TF_F32; dt <= TF_BF16; dt++)
		for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++)
		{
			int			m = shapes[si][0],
						n = shapes[si][1],
						k = shapes[si][2];
			size_t		es = tf_dtype_size(dt);
			unsigned char *w = xmalloc(es * n * k);
			float	   *wf = xmalloc(sizeof(float) * n * k);
			void	   *packed = xmalloc(tf_packed_size(n, k, dt));
			float	   *x = xmalloc(sizeof(float) * m * k);
			float	   *bias = xmalloc(sizeof(float) * n);
			float	   *y = xmalloc(sizeof(float) * m * n);
			float	   *y1 = xmalloc(sizeof(float) * n);
			float	   *ref = xmalloc(sizeof(float) * m * n);
			float	   *row = xmalloc(sizeof(float) * k);
			char		label[64];
			int			alone_ok = 1;
			int			rows_ok = 1;

			for (int i = 0; i < n * k; i++)
			{
				float		v = (float) rand() / RAND_MAX - 0.5f;
				unsigned int bits;
				unsigned short h;

				memcpy(&bits, &v, 4);
				if (dt == TF_F32)
					memcpy(w + 4 * i, &v, 4);
				else
				{
					/* bf16: the high half; fp16: a random half in about (-1, 1) */
					h = dt == TF_BF16 ? (unsigned short) (bits >> 16) :
						(unsigned short) ((rand() & 0x83ff) | ((10 + rand() % 5) << 10));
					memcpy(w + 2 * i, &h, 2);
				}
			}
			tf_to_float(n * k, wf, w, dt);
			for (int i = 0; i < m * k; i++)
				x[i] = (float) rand() / RAND_MAX - 0.5f;
			for (int j = 0; j < n; j++)
				bias[j] = (float) rand() / RAND_MAX - 0.5f;
			for (int r = 0; r < m; r++)
				for (int j = 0; j < n; j++)
				{
					double		acc = bias[j];

					for (int p = 0; p < k; p++)
						acc += (double) x[r * k + p] * wf[j * k + p];
					ref[r * n + j] = (float) acc;
				}
			tf_pack_panels(n, k, packed, w, dt);
			tf_linear_pack_limits(lim == 1 ? 4096 : lim == 3 ? 65536 : 0, lim & 1 ? 1 : 0);
			tf_linear_chunk_limit(lim & 2 ? 16 : 0);
			tf_linear(m, n, k, y, x, packed, dt, bias);
			tf_linear_pack_limits(0, 0);
			tf_linear_chunk_limit(0);
			snprintf(label, sizeof(label), "%s_%s_%dx%dx%d%s%s", kernels, names[dt], m, n, k,
					 lim & 1 ? "_xpacked" : "", lim & 2 ? "_kc16" : "");
			check_tensor(label, "vs double", y, ref, m * n, 1e-4f * (1 + k / 64));
			for (int r = 0; r < m; r++)
			{
				tf_linear(1, n, k, y1, x + r * k, packed, dt, bias);
				if (memcmp(y1, y + r * n, sizeof(float) * n) != 0)
					alone_ok = 0;
			}
			for (int j = 0; j < n; j++)
			{
				tf_packed_row(n, k, row, packed, dt, j);
				if (memcmp(row, wf + j * k, sizeof(float) * k) != 0)
					rows_ok = 0;
			}
			printf("%-4s %-24s each row alone: %s; packed rows: %s\n",
				   alone_ok && rows_ok ? "ok" : "FAIL", label,
				   alone_ok ? "bitwise equal" : "DIFFERENT", rows_ok ? "equal" : "DIFFERENT");
			if (alone_ok && rows_ok)
				passed++;
			else
				failed++;
			free(w);
			free(wf);
			free(packed);
			free(x);
			free(bias);
			free(y);
			free(y1);
			free(ref);
			free(row);
		}
}

/*
 * int8 products: against a double reference over the same quantized
 * values (x's quantization done by tf_quantize_input), each family against
 * the portable one bitwise, each row alone against the block bitwise, and
 * the packed rows.  Shapes cross tiles, panels, groups of 4 and blocks of
 * quantized rows; the last one reaches TF_INT8_MAX_IN with the largest
 * sums there are (x of 255s against weights of -128).
 */
static void
test_int8(void)
{
	static const int shapes[][3] = {	/* rows, out, in */
		{1, 1, 1}, {1, 33, 17}, {4, 64, 256}, {13, 100, 70}, {12, 32, 5}, {9, 31, 3},
		{25, 45, 512}, {5, 8001, 64}, {128, 40, 96}, {1, 300, 40}, {2, 200, 33},
		{3, 129, 16}, {70, 65, 2048}, {300, 33, 300}, {2, 3, TF_INT8_MAX_IN}
	};
	const char *families[3] = {NULL, NULL, NULL};

	for (int level = 0; level <= 2; level++)
	{
		families[level] = tf_int8_kernels(level);
		if (level > 0 && strcmp(families[level], families[level - 1]) == 0)
			families[level] = NULL;		/* this CPU lacks it */
	}
	srand(11);
	for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++)
	{
		int			m = shapes[si][0],
					n = shapes[si][1],
					k = shapes[si][2];
		int			extreme = k == TF_INT8_MAX_IN;
		float	   *w = xmalloc(sizeof(float) * n * k);
		int8_t	   *q = xmalloc((size_t) n * k);
		float	   *sw = xmalloc(sizeof(float) * n);
		void	   *packed = xmalloc(tf_packed_size(n, k, TF_I8));
		float	   *x = xmalloc(sizeof(float) * m * k);
		float	   *bias = xmalloc(sizeof(float) * n);
		float	   *y0 = xmalloc(sizeof(float) * m * n);
		float	   *y = xmalloc(sizeof(float) * m * n);
		float	   *y1 = xmalloc(sizeof(float) * n);
		float	   *ref = xmalloc(sizeof(float) * m * n);
		float	   *row = xmalloc(sizeof(float) * k);
		uint8_t    *xq = xmalloc((size_t) k + 4);
		char		label[64];
		int			rows_ok = 1;

		for (int i = 0; i < n * k; i++)
			w[i] = extreme ? -1.0f : (float) rand() / RAND_MAX - 0.5f;
		for (int i = 0; i < m * k; i++)
			x[i] = extreme ? 3.0f : ((float) rand() / RAND_MAX - 0.3f) * 4.0f;
		for (int j = 0; j < n; j++)
			bias[j] = (float) rand() / RAND_MAX - 0.5f;
		tf_quantize_rows(n, k, q, sw, w);
		if (extreme)
			memset(q, 0x80, (size_t) n * k);	/* -128: not ours, but a stored row may hold it */
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
				ref[r * n + j] = (float) (acc * sx * sw[j] + bias[j]);
			}
		}
		tf_pack_int8(n, k, packed, q, sw);

		tf_int8_kernels(0);
		tf_linear(m, n, k, y0, x, packed, TF_I8, bias);
		for (int level = 0; level <= 2; level++)
		{
			int			alone_ok = 1;
			int			same_ok = 1;
			float		tol = 2e-6f * (1.0f + fabsf(extreme ? ref[0] : 8.0f * sqrtf((float) k)));

			if (families[level] == NULL)
				continue;
			tf_int8_kernels(level);
			tf_linear(m, n, k, y, x, packed, TF_I8, bias);
			snprintf(label, sizeof(label), "%s_i8_%dx%dx%d", families[level], m, n, k);
			check_tensor(label, "vs double", y, ref, m * n, tol);
			same_ok = memcmp(y, y0, sizeof(float) * m * n) == 0;
			for (int r = 0; r < m; r++)
			{
				tf_linear(1, n, k, y1, x + r * k, packed, TF_I8, bias);
				if (memcmp(y1, y + r * n, sizeof(float) * n) != 0)
					alone_ok = 0;
			}
			printf("%-4s %-24s each row alone: %s; vs portable: %s\n",
				   alone_ok && same_ok ? "ok" : "FAIL", label,
				   alone_ok ? "bitwise equal" : "DIFFERENT", same_ok ? "bitwise equal" : "DIFFERENT");
			if (alone_ok && same_ok)
				passed++;
			else
				failed++;
		}
		for (int j = 0; j < n && rows_ok; j++)
		{
			tf_packed_row(n, k, row, packed, TF_I8, j);
			for (int p = 0; p < k; p++)
				if (row[p] != (float) q[j * k + p] * sw[j])
					rows_ok = 0;
		}
		printf("%-4s i8_%dx%dx%d packed rows: %s\n", rows_ok ? "ok" : "FAIL", m, n, k,
			   rows_ok ? "equal" : "DIFFERENT");
		if (rows_ok)
			passed++;
		else
			failed++;
		free(w);
		free(q);
		free(sw);
		free(packed);
		free(x);
		free(bias);
		free(y0);
		free(y);
		free(y1);
		free(ref);
		free(row);
		free(xq);
	}
	tf_int8_kernels(-1);
}

/* ------------------------------------------------ the shared weights file */

static char *wf_arena;
static size_t wf_used;

static void *
wf_take(size_t bytes)
{
	void	   *p = wf_arena + wf_used;

	wf_used += (bytes + 63) & ~(size_t) 63;
	return p;
}

static TfMatrix
wf_matrix(size_t rows, size_t cols, TfDType dt)
{
	TfMatrix	m = {wf_take(tf_packed_size(rows, cols, dt)), dt};

	return m;
}

static void
wf_attn(TfAttnWeights *A, int d)
{
	A->q_w = wf_matrix(d, d, TF_I8);
	A->q_b = wf_take(4 * d);
	A->k_w = wf_matrix(d, d, TF_F16);
	A->k_b = wf_take(4 * d);
	A->v_w = wf_matrix(d, d, TF_F32);
	A->v_b = wf_take(4 * d);
	A->o_w = wf_matrix(d, d, TF_BF16);
	A->o_b = wf_take(4 * d);
	A->ln_g = wf_take(4 * d);
	A->ln_b = wf_take(4 * d);
}

static void
wf_check(const char *what, int ok)
{
	printf("%-4s weight file: %s\n", ok ? "ok" : "FAIL", what);
	if (ok)
		passed++;
	else
		failed++;
}

/*
 * The shared weights file: written and opened back, every weight at the
 * same place in the arena (tied matrices still tied); truncated, flipped,
 * of another fingerprint or build, or with an offset outside the arena
 * (its checksum made right), it is refused.
 */
static void
test_weight_file(void)
{
	TfModel		m,
				back;
	TfLayerWeights enc[1],
				dec[2],
				enc2[1],
				dec2[2];
	size_t		len;
	char	   *file,
			   *copy;
	const char *why;
	int			d = 8,
				ffn = 16;

	memset(&m, 0, sizeof(m));
	memset(enc, 0, sizeof(enc));
	memset(dec, 0, sizeof(dec));
	m.cfg.vocab = m.cfg.src_vocab = 40;
	m.cfg.d_model = d;
	m.cfg.enc_layers = 1;
	m.cfg.dec_layers = 2;
	m.cfg.enc_ffn = m.cfg.dec_ffn = ffn;
	m.cfg.max_pos = 10;
	wf_arena = aligned_alloc(64, 1 << 20);
	wf_used = 0;
	for (int i = 0; i < 1 << 20; i++)
		wf_arena[i] = (char) (i * 7 + 3);
	m.w.enc_embed = wf_matrix(40, d, TF_F32);
	m.w.dec_embed = m.w.lm_head = m.w.enc_embed;
	m.w.logits_bias = NULL;
	m.w.lm_head_screen = wf_matrix(40, d, TF_I8);
	m.w.lm_head_slack = wf_take(4 * tf_screen_slack_floats(40));
	m.w.enc_pos = wf_take(4 * 10 * d);
	m.w.dec_pos = m.w.enc_pos;
	m.w.enc = enc;
	m.w.dec = dec;
	for (int l = 0; l < 1; l++)
	{
		wf_attn(&enc[l].self_attn, d);
		enc[l].fc1_w = wf_matrix(ffn, d, TF_I8);
		enc[l].fc1_b = wf_take(4 * ffn);
		enc[l].fc2_w = wf_matrix(d, ffn, TF_F32);
		enc[l].fc2_b = wf_take(4 * d);
		enc[l].ln_g = wf_take(4 * d);
		enc[l].ln_b = wf_take(4 * d);
	}
	for (int l = 0; l < 2; l++)
	{
		wf_attn(&dec[l].self_attn, d);
		wf_attn(&dec[l].cross_attn, d);
		dec[l].fc1_w = wf_matrix(ffn, d, TF_F16);
		dec[l].fc1_b = wf_take(4 * ffn);
		dec[l].fc2_w = wf_matrix(d, ffn, TF_I8);
		dec[l].fc2_b = wf_take(4 * d);
		dec[l].ln_g = wf_take(4 * d);
		dec[l].ln_b = wf_take(4 * d);
	}

	len = tf_wfile_size(&m, wf_used);
	file = aligned_alloc(4096, (len + 4095) & ~(size_t) 4095);
	copy = aligned_alloc(4096, (len + 4095) & ~(size_t) 4095);
	why = tf_wfile_write(file, len, &m, wf_arena, wf_used, "test build", 42);
	wf_check("written", why == NULL);

	back.cfg = m.cfg;
	why = tf_wfile_open(file, len, &back, enc2, dec2, "test build", 42, 1);
	{
		const char *base = file + (len - wf_used);
		int			same = why == NULL &&
			(const char *) back.w.enc_embed.data - base == (const char *) m.w.enc_embed.data - wf_arena &&
			back.w.lm_head.data == back.w.enc_embed.data && back.w.logits_bias == NULL &&
			(const char *) back.w.lm_head_screen.data - base == (const char *) m.w.lm_head_screen.data - wf_arena &&
			back.w.lm_head_screen.dtype == TF_I8 &&
			(const char *) back.w.lm_head_slack - base == (const char *) m.w.lm_head_slack - wf_arena &&
			(const char *) dec2[1].cross_attn.o_b - base == (const char *) dec[1].cross_attn.o_b - wf_arena &&
			dec2[1].fc2_w.dtype == TF_I8 && enc2[0].self_attn.o_w.dtype == TF_BF16 &&
			memcmp(base, wf_arena, wf_used) == 0;

		wf_check("opened back: every weight where it was, tied ones tied, dtypes kept", same);
	}
	wf_check("the fingerprint is read back", tf_wfile_fingerprint(file, len) == 42);
	wf_check("truncated: refused", tf_wfile_open(file, len - 1, &back, enc2, dec2, "test build", 42, 1) != NULL);
	wf_check("another fingerprint: refused", tf_wfile_open(file, len, &back, enc2, dec2, "test build", 43, 1) != NULL);
	wf_check("another build: refused", tf_wfile_open(file, len, &back, enc2, dec2, "other build", 42, 1) != NULL);
	memcpy(copy, file, len);
	copy[len - 100] ^= 0x10;
	why = tf_wfile_open(copy, len, &back, enc2, dec2, "test build", 42, 1);
	wf_check("a flipped byte in the weights: refused by the checksum", why != NULL && strstr(why, "checksum") != NULL);
	memcpy(copy, file, len);
	copy[200] ^= 0x01;			/* in the header's build tag */
	wf_check("a flipped byte in the header: refused", tf_wfile_open(copy, len, &back, enc2, dec2, "test build", 42, 1) != NULL);
	memcpy(copy, file, len);
	{
		uint64_t	huge = (uint64_t) wf_used - 64;	/* the enc_embed offset: too close to the end */
		uint64_t	sum;

		memcpy(copy + TF_WFILE_HEADER, &huge, 8);
		sum = tf_checksum64(copy + 24, len - 24, 0);	/* from the build tag on */
		memcpy(copy + 16, &sum, 8);
		why = tf_wfile_open(copy, len, &back, enc2, dec2, "test build", 42, 1);
		wf_check("an offset past the arena, checksum made right: refused", why != NULL && strstr(why, "outside") != NULL);
	}
	m.cfg.vocab = m.cfg.src_vocab = 41;
	wf_check("another configuration: refused", tf_wfile_open(file, len, &m, enc2, dec2, "test build", 42, 1) != NULL);
	free(file);
	free(copy);
	free(wf_arena);
}

/* the first largest of a row, -1 if every value is -inf (greedy_step's top-1) */
static int
first_max(int n, const float *v)
{
	int			best = -1;

	for (int j = 0; j < n; j++)
		if (v[j] > -INFINITY && (best < 0 || v[j] > v[best]))
			best = j;
	return best;
}

/*
 * Greedy decoding's screen (greedy_screen.c) against the full fp32 output
 * layer: the same token after the logits processors, ties included, and
 * the candidates' logits bitwise the full product's.  The matrix has
 * clusters of rows a few int8 steps apart (the screen alone would rank them
 * wrongly), exact duplicates (ties), and 1000 rows (a cut panel); a
 * third of the inputs have an outlier (x's quantization error then
 * dominates the bound); the options ban the top token, penalize repeats,
 * force EOS.
 */
static void
test_greedy_screen(void)
{
	enum
	{
		V = 1000, D = 64, TRIALS = 3000
	};
	TfModel		m;
	TfDecodeOptions opt;
	float	   *w = malloc(sizeof(float) * V * D);
	float	   *packed = aligned_alloc(64, tf_packed_size(V, D, TF_F32));
	void	   *screen = aligned_alloc(64, tf_packed_size(V, D, TF_I8));
	float	   *slack = malloc(sizeof(float) * tf_screen_slack_floats(V));
	float	   *bias = malloc(sizeof(float) * V);
	float	   *full = malloc(sizeof(float) * V);
	float	   *row = malloc(sizeof(float) * V);
	float	   *scratch;
	float		x[D],
				wrow[D];
	int8_t		qrow[D];
	int			seq[4] = {0, 0, 0, 0};
	int			tmp[8];
	int			bad_off[2] = {0, 1};
	int			bad_ids[1];
	int			wrong = 0,
				unequal = 0,
				narrow = 0,
				decided = 0;

	srand(23);
	for (int i = 0; i < V * D; i++)
		w[i] = ((float) rand() / RAND_MAX - 0.5f) * 0.2f;
	/* clusters: rows 10c+1..10c+9 = row 10c, moved by a few bf16 ulps */
	for (int c = 0; c < V / 10; c++)
		for (int r = 1; r < 10; r++)
			for (int i = 0; i < D; i++)
				w[(10 * c + r) * D + i] = w[10 * c * D + i] *
					(1.0f + ((float) rand() / RAND_MAX - 0.5f) * 0.03f);
	memcpy(w + 999 * D, w + 990 * D, sizeof(float) * D);	/* a tie: the lower id wins */
	for (int j = 0; j < V; j++)
		bias[j] = ((float) rand() / RAND_MAX - 0.5f) * 0.01f;
	tf_pack_panels(V, D, packed, w, TF_F32);
	memset(screen, 0, tf_packed_size(V, D, TF_I8));
	tf_screen_pack_rows(V, D, screen, slack, packed, 0, 600, wrow, qrow);
	tf_screen_pack_rows(V, D, screen, slack, packed, 600, V - 600, wrow, qrow);

	memset(&m, 0, sizeof(m));
	m.cfg.vocab = V;
	m.cfg.d_model = D;
	m.cfg.eos_id = 2;
	m.w.lm_head = (TfMatrix) {packed, TF_F32};
	m.w.lm_head_screen = (TfMatrix) {screen, TF_I8};
	m.w.lm_head_slack = slack;
	m.w.logits_bias = bias;
	scratch = malloc(sizeof(float) * tf_screen_scratch_floats(&m.cfg));

	for (int t = 0; t < TRIALS; t++)
	{
		int			kind = t % 5;
		int			want,
					got,
					cands = 0;

		/* x: near a cluster's row, so that its rows decide */
		{
			int			c = rand() % (V / 10);

			for (int i = 0; i < D; i++)
				x[i] = w[10 * c * D + i] * 20.0f + ((float) rand() / RAND_MAX - 0.5f) * 0.5f;
			/* an outlier: x's own quantization steps grow coarse */
			if (t % 3 == 0)
				x[t % D] += 30.0f;
		}
		memset(&opt, 0, sizeof(opt));
		opt.beam_size = 1;
		opt.max_length = 100;
		opt.repetition_penalty = 1.0;
		opt.forced_eos_id = -1;
		opt.forced_bos_id = -1;
		tf_linear(1, V, D, full, x, packed, TF_F32, bias);
		if (kind == 1 || kind == 2)
		{
			/* ban (kind 1) or penalize (kind 2) the unprocessed winner */
			bad_ids[0] = first_max(V, full);
			seq[1] = seq[2] = bad_ids[0];
			if (kind == 1)
			{
				opt.nbad = 1;
				opt.bad_off = bad_off;
				opt.bad_ids = bad_ids;
			}
			else
				opt.repetition_penalty = 3.0;
		}
		if (kind == 3)
			opt.min_length = 10;
		if (kind == 4 && t % 10 == 4)
		{
			opt.forced_eos_id = 2;
			opt.max_length = 4;
		}
		memcpy(row, full, sizeof(float) * V);
		tf_process_logits(&m.cfg, &opt, false, row, seq, 3, tmp);
		want = first_max(V, row);

		tf_linear(1, V, D, row, x, screen, TF_I8, bias);
		tf_screen_greedy_row(&m, &opt, seq, 3, x, row, scratch, tmp);
		for (int j = 0; j < V; j++)
			if (row[j] > -INFINITY)
			{
				cands++;
				if (memcmp(&row[j], &full[j], 4) != 0)
					unequal++;
			}
		tf_process_logits(&m.cfg, &opt, false, row, seq, 3, tmp);
		got = first_max(V, row);
		wrong += got != want;
		narrow += cands <= 3 * TF_PANEL;
		/* the screen's own best differs: the fp32 pass decided */
		tf_linear(1, V, D, row, x, screen, TF_I8, bias);
		tf_process_logits(&m.cfg, &opt, false, row, seq, 3, tmp);
		decided += first_max(V, row) != want;
	}
	printf("%-4s greedy screen: %d of %d tokens as the full fp32 layer's (%d decided by the fp32 pass), "
		   "%d candidate logits not bitwise, %d steps with <= 3 panels\n",
		   wrong == 0 && unequal == 0 && decided >= 50 && narrow >= TRIALS * 9 / 10 ? "ok" : "FAIL",
		   TRIALS - wrong, TRIALS, decided, unequal, narrow);

	/*
	 * x's quantization alone decides: x = (30, 0.047, ..., 0.047) quantizes
	 * to (30, 0, ..., 0); row 0 = (0, 0.05, ..., 0.05) wins in fp32 (0.148)
	 * but screens to 0, row 1 = (0.00247, 0, ...) screens to its 0.074.
	 */
	{
		float		w2[TF_PANEL * D];
		int			got;

		memset(w2, 0, sizeof(w2));
		for (int i = 1; i < D; i++)
			w2[i] = 0.05f;
		w2[D] = 0.00247f;
		x[0] = 30.0f;
		for (int i = 1; i < D; i++)
			x[i] = 0.047f;
		memset(&opt, 0, sizeof(opt));
		opt.beam_size = 1;
		opt.max_length = 100;
		opt.repetition_penalty = 1.0;
		opt.forced_eos_id = -1;
		opt.forced_bos_id = -1;
		m.cfg.vocab = TF_PANEL;
		m.cfg.eos_id = 2;
		m.w.logits_bias = NULL;
		tf_pack_panels(TF_PANEL, D, packed, w2, TF_F32);
		memset(screen, 0, tf_packed_size(TF_PANEL, D, TF_I8));
		tf_screen_pack_rows(TF_PANEL, D, screen, slack, packed, 0, TF_PANEL, wrow, qrow);
		tf_linear(1, TF_PANEL, D, row, x, screen, TF_I8, NULL);
		decided = row[1] > row[0];
		tf_screen_greedy_row(&m, &opt, seq, 3, x, row, scratch, tmp);
		tf_process_logits(&m.cfg, &opt, false, row, seq, 3, tmp);
		got = first_max(TF_PANEL, row);
		printf("%-4s greedy screen: x's own quantization ranks row 1 first (%s), the fp32 pass row 0 (%d)\n",
			   decided && got == 0 ? "ok" : "FAIL", decided ? "yes" : "no", got);
		if (!(decided && got == 0))
			wrong++;

		/* an infinite input: no bound holds, the whole fp32 product instead */
		x[5] = INFINITY;
		tf_linear(1, TF_PANEL, D, full, x, packed, TF_F32, NULL);
		tf_linear(1, TF_PANEL, D, row, x, screen, TF_I8, NULL);
		tf_screen_greedy_row(&m, &opt, seq, 3, x, row, scratch, tmp);
		got = memcmp(row, full, sizeof(float) * TF_PANEL) == 0;
		printf("%-4s greedy screen: an infinite input gets the whole fp32 product\n", got ? "ok" : "FAIL");
		if (!got)
			wrong++;
	}
	if (wrong == 0 && unequal == 0 && narrow >= TRIALS * 9 / 10)
		passed++;
	else
		failed++;
	free(w);
	free(packed);
	free(screen);
	free(slack);
	free(bias);
	free(full);
	free(row);
	free(scratch);
}

/* tf_matmul with few rows of a (this file's kernels, not sgemm), both layouts of b. */
static void
test_small_matmul(const char *kernels)
{
	static const int shapes[][3] = {{1, 1, 1}, {1, 37, 64}, {3, 5, 17}, {16, 9, 33}, {7, 130, 8}};

	for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++)
		for (int trans = 0; trans <= 1; trans++)
		{
			int			m = shapes[si][0],
						n = shapes[si][1],
						k = shapes[si][2];
			float	   *a = xmalloc(sizeof(float) * m * k);
			float	   *b = xmalloc(sizeof(float) * n * k);
			float	   *out = xmalloc(sizeof(float) * m * n);
			float	   *ref = xmalloc(sizeof(float) * m * n);
			char		label[64];

			for (int i = 0; i < m * k; i++)
				a[i] = (float) rand() / RAND_MAX - 0.5f;
			for (int i = 0; i < n * k; i++)
				b[i] = (float) rand() / RAND_MAX - 0.5f;
			for (int i = 0; i < m * n; i++)
				out[i] = 1.0f;
			for (int r = 0; r < m; r++)
				for (int j = 0; j < n; j++)
				{
					double		acc = 0.0;

					for (int p = 0; p < k; p++)
						acc += (double) a[r * k + p] * (trans ? b[j * k + p] : b[p * n + j]);
					/* alpha 0.5, beta 1 on a matrix of ones */
					ref[r * n + j] = (float) (0.5 * acc + 1.0);
				}
			tf_matmul(m, n, k, out, n, a, k, b, trans ? k : n, trans, 0.5f, 1.0f);
			snprintf(label, sizeof(label), "%s_matmul_%s_%dx%dx%d", kernels, trans ? "nt" : "nn", m, n, k);
			check_tensor(label, "vs double", out, ref, m * n, 1e-5f * (1 + k / 16));
			free(a);
			free(b);
			free(out);
			free(ref);
		}
}

/* ---------------------------------------------------------------- metrics */

/* An allocator for the metrics: calloc, all freed at once */
typedef struct MetArena
{
	void	  **p;
	size_t		n,
				cap;
} MetArena;

static void *
met_alloc(void *ctx, size_t size)
{
	MetArena   *a = ctx;

	if (a->n == a->cap)
	{
		a->cap = a->cap ? 2 * a->cap : 64;
		a->p = realloc(a->p, a->cap * sizeof(void *));
		if (!a->p)
			exit(2);
	}
	return a->p[a->n++] = xmalloc(size);
}

static void
met_free(MetArena *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->p[i]);
	free(a->p);
	memset(a, 0, sizeof(*a));
}

/* Items as the naive reference sees them: split at ' ', '\t', '\n', U+00A0 (the only whitespace of the cases) */
typedef struct NaiveItems
{
	const char *s[4096];
	size_t		len[4096];
	int			n;
} NaiveItems;

static int
naive_ws(const char *s, size_t i, size_t n)
{
	if (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')
		return 1;
	if (i + 1 < n && (unsigned char) s[i] == 0xC2 && (unsigned char) s[i + 1] == 0xA0)
		return 2;
	return 0;
}

static void
naive_items(NaiveItems *it, const char *s, size_t n, int chars)
{
	size_t		i = 0;

	it->n = 0;
	while (i < n)
	{
		int			w = naive_ws(s, i, n);
		size_t		st = i;

		if (w)
		{
			i += w;
			continue;
		}
		i++;
		if (chars)
			while (i < n && ((unsigned char) s[i] & 0xC0) == 0x80)
				i++;
		else
			while (i < n && !naive_ws(s, i, n))
				i++;
		if (it->n == 4096)
		{
			fprintf(stderr, "naive_items: too many items\n");
			exit(2);
		}
		it->s[it->n] = s + st;
		it->len[it->n++] = i - st;
	}
}

static int
naive_eq(const NaiveItems *a, int i, const NaiveItems *b, int j, int n)
{
	for (int k = 0; k < n; k++)
		if (a->len[i + k] != b->len[j + k] || memcmp(a->s[i + k], b->s[j + k], a->len[i + k]) != 0)
			return 0;
	return 1;
}

static int
naive_count(const NaiveItems *a, int i, const NaiveItems *b, int n)
{
	int			c = 0;

	for (int j = 0; j + n <= b->n; j++)
		c += naive_eq(a, i, b, j, n);
	return c;
}

/* Σ over the distinct n-grams of h of min(count in h, count in r) */
static double
naive_matches(const NaiveItems *h, const NaiveItems *r, int n)
{
	double		m = 0;

	for (int i = 0; i + n <= h->n; i++)
	{
		int			first = 1;
		int			ch,
					cr;

		for (int j = 0; j < i && first; j++)
			first = !naive_eq(h, i, h, j, n);
		if (!first)
			continue;
		ch = naive_count(h, i, h, n);
		cr = naive_count(h, i, r, n);
		m += ch < cr ? ch : cr;
	}
	return m;
}

static NaiveItems naive_h,
			naive_r;

static void
naive_chrf(double *st, const char *h, size_t hl, const char *r, size_t rl)
{
	naive_items(&naive_h, h, hl, 1);
	naive_items(&naive_r, r, rl, 1);
	for (int n = 1; n <= TF_CHRF_ORDER; n++)
	{
		st[3 * (n - 1)] += naive_h.n >= n ? naive_h.n - n + 1 : 0;
		st[3 * (n - 1) + 1] += naive_r.n >= n ? naive_r.n - n + 1 : 0;
		st[3 * (n - 1) + 2] += naive_matches(&naive_h, &naive_r, n);
	}
}

static void
naive_bleu(double *st, const char *h, size_t hl, const char *r, size_t rl, const SpmAlloc *a)
{
	size_t		htl,
				rtl;
	const char *ht = tf_tokenize_13a(h, hl, a, &htl);
	const char *rt = tf_tokenize_13a(r, rl, a, &rtl);

	naive_items(&naive_h, ht, htl, 0);
	naive_items(&naive_r, rt, rtl, 0);
	st[0] += naive_h.n;
	st[1] += naive_r.n;
	for (int n = 1; n <= 4; n++)
	{
		st[1 + n] += naive_matches(&naive_h, &naive_r, n);
		st[5 + n] += naive_h.n >= n ? naive_h.n - n + 1 : 0;
	}
}

static unsigned long long met_rng = 88172645463325252ULL;

static unsigned
met_rand(void)
{
	met_rng ^= met_rng << 13;
	met_rng ^= met_rng >> 7;
	met_rng ^= met_rng << 17;
	return (unsigned) (met_rng >> 16);
}

/* n pieces drawn from pieces[0..np) */
static size_t
met_text(char *buf, size_t cap, const char *const *pieces, int np, int n)
{
	size_t		len = 0;

	for (int i = 0; i < n; i++)
	{
		const char *p = pieces[met_rand() % np];
		size_t		l = strlen(p);

		if (len + l >= cap)
			break;
		memcpy(buf + len, p, l);
		len += l;
	}
	buf[len] = '\0';
	return len;
}

/*
 * tf_bleu_add and tf_chrf_add against the naive counts above, bit for bit,
 * with the n-gram table's slots narrow and wide, its hashes whole and cut
 * to 3 bits (every n-gram then collides with others and is compared).
 */
static void
check_metrics_case(const char *name, const char *h, size_t hl, const char *r, size_t rl)
{
	MetArena	arena = {0};
	SpmAlloc	a = {met_alloc, &arena};
	double		want_b[TF_BLEU_STATS] = {0},
				want_c[TF_CHRF_STATS] = {0};
	static const char *const modes[] = {"", "wide", "3-bit hashes", "wide, 3-bit hashes"};

	naive_bleu(want_b, h, hl, r, rl, &a);
	naive_chrf(want_c, h, hl, r, rl);
	for (int mode = 0; mode < 4; mode++)
	{
		double		got_b[TF_BLEU_STATS] = {0},
					got_c[TF_CHRF_STATS] = {0};
		int			bad;

		tf_metrics_wide_bytes = (mode & 1) ? 0 : (size_t) 1 << 31;
		tf_metrics_hash_mask = (mode & 2) ? 0xE000000000000000ULL : ~(uint64_t) 0;
		tf_bleu_add(got_b, h, hl, r, rl, &a);
		tf_chrf_add(got_c, h, hl, r, rl, &a);
		bad = memcmp(got_b, want_b, sizeof(got_b)) != 0 || memcmp(got_c, want_c, sizeof(got_c)) != 0;
		printf("%-4s metrics %-22s %-18s BLEU matches %g/%g/%g/%g, chrF 6-gram matches %g of %g\n",
			   bad ? "FAIL" : "ok", name, modes[mode], got_b[2], got_b[3], got_b[4], got_b[5],
			   got_c[17], want_c[17]);
		if (bad)
		{
			failed++;
			for (int i = 0; i < TF_BLEU_STATS; i++)
				printf("     bleu[%d] %g, naive %g\n", i, got_b[i], want_b[i]);
			for (int i = 0; i < TF_CHRF_STATS; i++)
				printf("     chrf[%d] %g, naive %g\n", i, got_c[i], want_c[i]);
		}
		else
			passed++;
	}
	tf_metrics_wide_bytes = (size_t) 1 << 31;
	tf_metrics_hash_mask = ~(uint64_t) 0;
	met_free(&arena);
}

static long met_interrupts;

static void
met_count_interrupt(void)
{
	met_interrupts++;
}

static void
test_metrics(void)
{
	static char h[8192],
				r[8192];
	size_t		hl,
				rl;

	/* many repeated n-grams, more often on one side than the other, and equal ones across spaces */
	{
		static const char *const p[] = {"a", "b", "a", " ", "ab ", "\xc3\xa4", "\xc2\xa0", ".", "\n"};

		for (int k = 0; k < 3; k++)
		{
			hl = met_text(h, sizeof(h), p, 9, 1500);
			rl = met_text(r, sizeof(r), p, 9 - 3 * (k == 1), 900 + 400 * k);
			check_metrics_case(k == 0 ? "repeated" : k == 1 ? "repeated, ref poorer" : "repeated, ref longer",
							   h, hl, r, rl);
		}
		/* the same n-gram many times: the clipped count is the smaller */
		hl = met_text(h, sizeof(h), (const char *const[]) {"ab "}, 1, 700);
		rl = met_text(r, sizeof(r), (const char *const[]) {"ab "}, 1, 300);
		check_metrics_case("one n-gram, 700 vs 300", h, hl, r, rl);
		check_metrics_case("one n-gram, 300 vs 700", r, rl, h, hl);
	}
	/* all n-grams distinct: characters U+4E00..., words w0, w1, ...; the reference shares some */
	{
		size_t		n = 0,
					m = 0;

		for (int i = 0; i < 1200; i++)
		{
			unsigned	cp = 0x4E00 + i;
			char		c[3] = {(char) (0xE0 | (cp >> 12)), (char) (0x80 | ((cp >> 6) & 0x3F)), (char) (0x80 | (cp & 0x3F))};

			memcpy(h + n, c, 3);
			n += 3;
			if (i % 9 != 0)
			{
				memcpy(r + m, c, 3);
				m += 3;
			}
			if (i % 7 == 0)
				r[m++] = ' ';
		}
		check_metrics_case("distinct characters", h, n, r, m);
		n = m = 0;
		for (int i = 0; i < 800; i++)
		{
			n += sprintf(h + n, "w%d ", i);
			if (i % 6 != 3)
				m += sprintf(r + m, "w%d ", i);
		}
		check_metrics_case("distinct words", h, n, r, m);
	}
	/* empty and one-item sides */
	check_metrics_case("empty", "", 0, "a b", 3);
	check_metrics_case("one item", "x", 1, "x", 1);

	/* the interrupt hook: at least once per 64 KB scanned */
	{
		size_t		big = (size_t) 1 << 21;
		char	   *bh = xmalloc(big + 1),
				   *br = xmalloc(big + 1);
		MetArena	arena = {0};
		SpmAlloc	a = {met_alloc, &arena};
		double		st[TF_CHRF_STATS] = {0};
		long		want = (long) (2 * big / 65536);

		for (size_t i = 0; i < big; i++)
		{
			bh[i] = "abcde "[met_rand() % 6];
			br[i] = "abcdf "[met_rand() % 6];
		}
		spm_interrupt_hook = met_count_interrupt;
		met_interrupts = 0;
		tf_chrf_add(st, bh, big, br, big, &a);
		printf("%-4s metrics chrF on 2 x 2 MB: %ld interrupt checks (at least %ld)\n",
			   met_interrupts >= want ? "ok" : "FAIL", met_interrupts, want);
		met_interrupts >= want ? passed++ : failed++;
		met_interrupts = 0;
		tf_bleu_add(st, bh, big, br, big, &a);
		printf("%-4s metrics BLEU on 2 x 2 MB: %ld interrupt checks (at least %ld)\n",
			   met_interrupts >= want ? "ok" : "FAIL", met_interrupts, want);
		met_interrupts >= want ? passed++ : failed++;
		spm_interrupt_hook = NULL;
		met_free(&arena);
		free(bh);
		free(br);
	}
}

/*
 * Decoder self-attention over cache rows left where they were written
 * (tf_multihead_attention_rows, the beams' caches are never copied):
 * bitwise equal to tf_multihead_attention on the same rows gathered into
 * matrices, for every kernel family, key counts across tiles and tails.
 */
static void
test_attention_rows(const char *kernels)
{
	static const int shapes[][3] = {{1, 8, 1}, {3, 16, 2}, {5, 64, 4}, {17, 512, 8}, {40, 256, 4}, {97, 72, 6}};

	srand(31);
	for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++)
	{
		int			m = shapes[si][0],
					d = shapes[si][1],
					heads = shapes[si][2];
		float	   *pool = xmalloc(sizeof(float) * (size_t) 3 * m * d * 2);
		float	   *k = xmalloc(sizeof(float) * m * d);
		float	   *v = xmalloc(sizeof(float) * m * d);
		float	   *q = xmalloc(sizeof(float) * d);
		float	   *o1 = xmalloc(sizeof(float) * d);
		float	   *o2 = xmalloc(sizeof(float) * d);
		float	   *scratch = xmalloc(sizeof(float) * m);
		const float **kr = xmalloc(sizeof(float *) * m);
		const float **vr = xmalloc(sizeof(float *) * m);
		int			same;

		for (int i = 0; i < 3 * m * d * 2; i++)
			pool[i] = (float) rand() / RAND_MAX - 0.5f;
		for (int i = 0; i < d; i++)
			q[i] = (float) rand() / RAND_MAX - 0.5f;
		for (int j = 0; j < m; j++)
		{
			/* rows scattered over the pool, in no order */
			int			ks = rand() % (3 * m),
						vs = 3 * m + rand() % (3 * m);

			kr[j] = pool + (size_t) ks * d;
			vr[j] = pool + (size_t) vs * d;
			memcpy(k + (size_t) j * d, kr[j], sizeof(float) * d);
			memcpy(v + (size_t) j * d, vr[j], sizeof(float) * d);
		}
		tf_multihead_attention(1, m, d, d, heads, o1, scratch, q, k, v, NULL);
		tf_multihead_attention_rows(m, d, heads, o2, scratch, q, kr, vr);
		same = memcmp(o1, o2, sizeof(float) * d) == 0;
		printf("%-4s %s attention over scattered rows, %d keys, d %d, %d heads: %s\n", same ? "ok" : "FAIL",
			   kernels, m, d, heads, same ? "bitwise equal to the gathered matrices" : "DIFFERENT");
		if (same)
			passed++;
		else
			failed++;
		free(pool);
		free(k);
		free(v);
		free(q);
		free(o1);
		free(o2);
		free(scratch);
		free(kr);
		free(vr);
	}
}


/*
 * Threads for one call (threads.c): every part of a region runs exactly
 * once, and tf_linear gives bitwise the same result with 1 to 4 threads,
 * for every dtype and kernel family, on shapes past the threshold whose
 * column blocks end inside a panel, at a panel, or leave threads idle.
 */
static int	part_runs[16];

static void
count_part(void *arg, int part, int nparts)
{
	(void) arg;
	(void) nparts;
	__atomic_add_fetch(&part_runs[part], 1, __ATOMIC_RELAXED);
}

static void
test_threads(void)
{
	static const int shapes[][3] = {	/* rows, out, in */
		{1, 8001, 64}, {3, 1000, 512}, {40, 700, 256}, {2, 131, 1024}, {1, 512, 512}, {7, 2050, 96}
	};
	int			regions_ok = 1,
				blocks_ok = 1;

	for (int t = 1; t <= 4; t++)
	{
		tf_threads_set(t);
		for (int nparts = 1; nparts <= 9; nparts++)
			for (int rep = 0; rep < 50; rep++)
			{
				memset(part_runs, 0, sizeof(part_runs));
				tf_parallel(nparts, count_part, NULL);
				for (int p = 0; p < 16; p++)
					if (part_runs[p] != (p < nparts))
						regions_ok = 0;
			}
	}
	for (size_t n = 1; n < 3000; n += 97)
		for (int nparts = 1; nparts <= 5; nparts++)
		{
			size_t		end = 0;

			for (int p = 0; p < nparts; p++)
			{
				size_t		lo,
							hi;

				tf_column_block(n, p, nparts, &lo, &hi);
				if (lo != end || hi < lo || (hi != n && hi % (4 * TF_PANEL) != 0))
					blocks_ok = 0;
				end = hi;
			}
			if (end != n)
				blocks_ok = 0;
		}
	printf("%-4s threads: every part of a region once (1-4 threads, 1-9 parts x 50): %s; column blocks: %s\n",
		   regions_ok && blocks_ok ? "ok" : "FAIL", regions_ok ? "yes" : "NO", blocks_ok ? "whole" : "BROKEN");
	if (regions_ok && blocks_ok)
		passed++;
	else
		failed++;

	srand(23);
	for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++)
		for (int dt = TF_F32; dt <= TF_I8; dt++)
		{
			int			m = shapes[si][0],
						n = shapes[si][1],
						k = shapes[si][2];
			float	   *w = xmalloc(sizeof(float) * n * k);
			unsigned short *h = xmalloc(sizeof(unsigned short) * n * k);
			int8_t	   *q = xmalloc((size_t) n * k);
			float	   *sw = xmalloc(sizeof(float) * n);
			void	   *packed = xmalloc(tf_packed_size(n, k, dt));
			float	   *x = xmalloc(sizeof(float) * m * k);
			float	   *bias = xmalloc(sizeof(float) * n);
			float	   *y1 = xmalloc(sizeof(float) * m * n);
			float	   *yt = xmalloc(sizeof(float) * m * n);
			const char *names[] = {"f32", "f16", "bf16", "i8"};
			int			same = 1;

			for (int i = 0; i < n * k; i++)
			{
				unsigned int bits;

				w[i] = (float) rand() / RAND_MAX - 0.5f;
				memcpy(&bits, &w[i], 4);
				h[i] = dt == TF_BF16 ? (unsigned short) (bits >> 16) :
					(unsigned short) ((rand() & 0x83ff) | ((10 + rand() % 5) << 10));
			}
			for (int i = 0; i < m * k; i++)
				x[i] = (float) rand() / RAND_MAX - 0.5f;
			for (int j = 0; j < n; j++)
				bias[j] = (float) rand() / RAND_MAX - 0.5f;
			if (dt == TF_I8)
			{
				tf_quantize_rows(n, k, q, sw, w);
				tf_pack_int8(n, k, packed, q, sw);
			}
			else
				tf_pack_panels(n, k, packed, dt == TF_F32 ? (const void *) w : (const void *) h, dt);
			tf_threads_set(1);
			tf_linear(m, n, k, y1, x, packed, dt, bias);
			for (int t = 2; t <= 4; t++)
			{
				tf_threads_set(t);
				memset(yt, 0xff, sizeof(float) * m * n);
				tf_linear(m, n, k, yt, x, packed, dt, bias);
				if (memcmp(yt, y1, sizeof(float) * m * n) != 0)
					same = 0;
			}
			printf("%-4s threads %-4s %dx%dx%d: 2, 3 and 4 threads %s 1\n", same ? "ok" : "FAIL",
				   names[dt], m, n, k, same ? "bitwise equal to" : "DIFFER from");
			if (same)
				passed++;
			else
				failed++;
			free(w);
			free(h);
			free(q);
			free(sw);
			free(packed);
			free(x);
			free(bias);
			free(y1);
			free(yt);
		}
	tf_threads_set(1);
}

/* Run every case of a fixture file; the number of cases, -1 when it is malformed. */
static int
read_fixture(const char *path)
{
	FILE	   *f;
	char		word[64];
	Case		c;
	int			ncases = 0;

	f = fopen(path, "r");
	if (!f)
	{
		perror(path);
		return -1;
	}
	memset(&c, 0, sizeof(c));
	while (fscanf(f, "%63s", word) == 1)
	{
		if (word[0] == '#')
		{
			int			ch;

			while ((ch = fgetc(f)) != EOF && ch != '\n')
				;
		}
		else if (strcmp(word, "case") == 0)
		{
			memset(&c, 0, sizeof(c));
			if (fscanf(f, "%63s %31s %d %d %d %d %d %d", c.name, c.op, &c.p[0], &c.p[1],
					   &c.p[2], &c.p[3], &c.p[4], &c.p[5]) != 8)
				goto bad;
		}
		else if (strcmp(word, "T") == 0)
		{
			Tensor	   *t = &c.t[c.ntensors];

			if (c.ntensors == MAX_TENSORS ||
				fscanf(f, "%31s %d", t->label, &t->count) != 2 || t->count < 0)
				goto bad;
			t->data = xmalloc((size_t) t->count * sizeof(float));
			for (int i = 0; i < t->count; i++)
				if (fscanf(f, "%f", &t->data[i]) != 1)
					goto bad;
			c.ntensors++;
		}
		else if (strcmp(word, "end") == 0)
		{
			run_case(&c);
			ncases++;
			for (int i = 0; i < c.ntensors; i++)
				free(c.t[i].data);
			memset(&c, 0, sizeof(c));
		}
		else
			goto bad;
	}
	fclose(f);
	if (ncases == 0)
		fprintf(stderr, "no cases in %s\n", path);
	return ncases;

bad:
	fprintf(stderr, "%s: malformed fixture near '%s'\n", path, word);
	fclose(f);
	return -1;
}

int
main(int argc, char **argv)
{
	if (argc < 2)
	{
		fprintf(stderr, "usage: %s core_ops.txt [grad_ops.txt ...]\n", argv[0]);
		return 2;
	}
	tf_blas_init();
	tf_set_blas_threads(1);
	for (int i = 1; i < argc; i++)
		if (read_fixture(argv[i]) <= 0)
			return 2;

	/* every kernel family this CPU can run (fixture cases above: the default) */
	for (int level = 2; level >= 0; level--)
	{
		const char *kernels = tf_gemm_kernels(level);

		if (kernels)
		{
			test_linear(kernels);
			test_small_matmul(kernels);
			test_attention_rows(kernels);
		}
		else
			printf("skip kernels of level %d: not on this CPU\n", level);
	}
	tf_gemm_kernels(-1);
	test_int8();
	test_threads();
	test_weight_file();
	test_greedy_screen();
	test_metrics();

	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
