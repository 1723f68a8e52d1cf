/*
 * test_train.c
 *		The trainer (src/core/train_model.c) against PyTorch, outside the
 *		server (make unittest): 10 steps of Adam on three fixture models,
 *		a Marian one (post-norm, swish, final_logits_bias), an NLLB one
 *		(pre-norm, final norms, relu) and a Marian one with learned
 *		positions (pre-norm, final norms, GELU), from the same weights, pairs and
 *		rates as tools/gen_train_fixtures.py gave PyTorch, without dropout
 *		and with it (the same masks); each step's loss, and every weight
 *		after the 10 steps, within 1e-4.
 *
 *   test/unit/test_train test/fixtures/train
 *   TRAIN_DEBUG=1 ... prints each step's loss and where the weights drift most
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "tensor_ops.h"
#include "train_fixture.h"

static int	passed = 0;
static int	failed = 0;
static long interrupts = 0;

/* the interrupt hook a server would give (CHECK_FOR_INTERRUPTS): counted */
static void
count_interrupt(void)
{
	interrupts++;
}

static void
ok(int cond, const char *what, const char *name)
{
	printf("%s %s: %s\n", cond ? "ok  " : "FAIL", name, what);
	if (cond)
		passed++;
	else
		failed++;
}

static int
cmp_float(const void *a, const void *b)
{
	float		x = *(const float *) a,
				y = *(const float *) b;

	return x < y ? -1 : x > y;
}

static void
run_model(const char *dir, const char *name)
{
	TrainFixture fx;
	TfTrainModel tm;
	TfTrainLimits lim;
	TfTrainState *st;
	TfAdam		adam = {0.9, 0.98, 1e-9, 0};
	size_t		nfinal;
	float	   *final,
			   *m,
			   *v;
	void	   *buf;
	float		worst_loss = 0.0f,
				worst_w = 0.0f,
				maxw = 0.0f,
			   *diffs;
	char		what[160];

	read_train_fixture(dir, name, &fx);
	adam.eps = fx.adam_eps;
	ok(tf_train_param_count(&fx.cfg, fx.shared, fx.tied) == fx.nparams, "the layout has PyTorch's parameter count", name);
	final = fixture_f32(dir, name, ".final.f32", &nfinal);
	if (nfinal != fx.nparams || fx.nloss != fx.steps)
		exit(2);
	bind_train_fixture(&fx, &tm);
	tm.interrupt = count_interrupt;
	interrupts = 0;
	m = fixture_alloc(sizeof(float) * fx.nparams);
	v = fixture_alloc(sizeof(float) * fx.nparams);
	lim.sentences = fx.batch;
	lim.src_tokens = lim.tgt_tokens = fx.batch * FIXTURE_MAX_IDS;
	lim.longest = FIXTURE_MAX_IDS;
	buf = aligned_alloc(64, (tf_train_state_size(&tm, &lim) + 63) & ~(size_t) 63);
	st = tf_train_state_init(&tm, &lim, buf);

	for (int s = 0; s < fx.steps; s++)
	{
		const int  *src[64],
				   *tgt[64];
		int			n[64],
					t[64];
		double		loss;
		int			nb = fixture_batch(&fx, s, src, n, tgt, t);

		tm.drop.step = s + 1;
		loss = tf_train_batch(&tm, st, nb, src, n, tgt, t, fx.label_smoothing);
		tf_train_adam(&tm, m, v, &adam, fixture_rate(&fx, s + 1));
		if (getenv("TRAIN_DEBUG"))
			printf("  loss %d: %.9g vs %.9g\n", s + 1, loss, fx.want_loss[s]);
		if (fabs(loss - fx.want_loss[s]) / fabs(fx.want_loss[s]) > worst_loss)
			worst_loss = fabs(loss - fx.want_loss[s]) / fabs(fx.want_loss[s]);
	}
	diffs = fixture_alloc(sizeof(float) * tm.nparams);
	for (size_t i = 0; i < tm.nparams; i++)
	{
		float		dlt = fabsf(tm.params[i] - final[i]);

		diffs[i] = isnan(dlt) ? INFINITY : dlt;

		if (!(dlt <= worst_w))
		{
			worst_w = isnan(dlt) ? INFINITY : dlt;
			if (getenv("TRAIN_DEBUG"))
				printf("  worst so far: index %zu (%g vs %g)\n", i, tm.params[i], final[i]);
		}
		if (fabsf(final[i]) > maxw)
			maxw = fabsf(final[i]);
	}
	snprintf(what, sizeof(what), "the interrupt hook called between blocks: %ld times in %d steps (%d a step "
			 "expected at least)", interrupts, fx.steps, 2 * (fx.cfg.enc_layers + fx.cfg.dec_layers) + 1);
	ok(interrupts >= (long) fx.steps * (2 * (fx.cfg.enc_layers + fx.cfg.dec_layers) + 1), what, name);
	snprintf(what, sizeof(what), "the loss of each of %d steps as PyTorch's (max rel diff %.3g)", fx.steps,
			 worst_loss);
	ok(worst_loss <= 1e-4f, what, name);
	snprintf(what, sizeof(what), "%zu weights after %d steps as PyTorch's (max abs diff %.3g, largest weight %.3g)",
			 tm.nparams, fx.steps, worst_w, maxw);
	ok(worst_w <= 1e-4f, what, name);
	qsort(diffs, tm.nparams, sizeof(float), cmp_float);
	if (getenv("TRAIN_DEBUG"))
		printf("  |diff| quantiles: 50%% %.3g, 99%% %.3g, 99.9%% %.3g, 99.99%% %.3g, max %.3g\n",
			   diffs[tm.nparams / 2], diffs[tm.nparams * 99 / 100], diffs[tm.nparams * 999 / 1000],
			   diffs[tm.nparams * 9999 / 10000], diffs[tm.nparams - 1]);
	free(diffs);
	free(buf);
	free(final), free(m), free(v), free(tm.grads);
	free(fx.init), free(fx.pos), free(fx.pairs), free(fx.want_loss);
}

int
main(int argc, char **argv)
{
	if (argc != 2)
	{
		fprintf(stderr, "usage: %s test/fixtures/train\n", argv[0]);
		return 2;
	}
	tf_blas_init();
	tf_set_blas_threads(1);
	run_model(argv[1], "marian_swish");
	run_model(argv[1], "nllb_tiny");
	run_model(argv[1], "prenorm_gelu");
	run_model(argv[1], "marian_swish_dropout");
	run_model(argv[1], "nllb_tiny_dropout");
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
