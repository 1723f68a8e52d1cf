/*
 * bench_train.c
 *		The trainer (src/core/train_model.c) on a run that bench/train.py
 *		writes (test/unit/train_fixture.h's format): every step's forward,
 *		backward and Adam timed, one thread.  Prints one line per step
 *		("step K loss L ms T") and a summary: tokens a second (source +
 *		target), the state's bytes for the largest batch, and the peak RSS
 *		(VmHWM: getrusage's maxrss would count the parent that forked it).
 *		usage: bench_train DIR NAME
 *		BENCH_TRAIN_DUMP_EVERY=K BENCH_TRAIN_DUMP_PREFIX=P: the parameters
 *		after every K steps and after the last, to P.STEP.f32 (for
 *		tools/finetune_multi30k.py, which averages the last of them).
 *
 * Build: make bench-train
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "blas.h"
#include "tensor_ops.h"
#include "train_fixture.h"

int
main(int argc, char **argv)
{
	TrainFixture fx;
	TfTrainModel tm;
	TfTrainLimits lim = {0};
	TfTrainState *st;
	TfAdam		adam = {0.9, 0.98, 1e-9, 0};
	float	   *m,
			   *v;
	void	   *buf;
	size_t		state_bytes;
	double		total = 0.0;
	long		tokens = 0;
	long		hwm_kb = -1;
	char		line[256];
	FILE	   *status;

	if (argc != 3)
	{
		fprintf(stderr, "usage: %s DIR NAME\n", argv[0]);
		return 2;
	}
	tf_blas_init();
	tf_set_blas_threads(1);
	read_train_fixture(argv[1], argv[2], &fx);
	adam.eps = fx.adam_eps;
	if (tf_train_param_count(&fx.cfg, true, true) != fx.nparams || fx.batch > 1024)
	{
		fprintf(stderr, "the parameters do not fit the config\n");
		return 2;
	}
	bind_train_fixture(&fx, &tm);
	m = fixture_alloc(sizeof(float) * fx.nparams);
	v = fixture_alloc(sizeof(float) * fx.nparams);
	/* the state for the largest batch of the run */
	lim.sentences = fx.batch;
	lim.longest = 1;
	for (int s = 0; s < fx.steps; s++)
	{
		int			ns = 0,
					nt = 0;

		for (int b = 0; b < fx.batch; b++)
		{
			const FixturePair *p = &fx.pairs[((size_t) s * fx.batch + b) % fx.npairs];

			ns += p->n;
			nt += p->t;
			lim.longest = p->n > lim.longest ? p->n : lim.longest;
			lim.longest = p->t > lim.longest ? p->t : lim.longest;
		}
		lim.src_tokens = ns > lim.src_tokens ? ns : lim.src_tokens;
		lim.tgt_tokens = nt > lim.tgt_tokens ? nt : lim.tgt_tokens;
	}
	state_bytes = tf_train_state_size(&tm, &lim);
	buf = aligned_alloc(64, (state_bytes + 63) & ~(size_t) 63);
	if (!buf)
		return 2;
	memset(buf, 0, state_bytes);	/* its pages in before the clock, as a running job's are */
	st = tf_train_state_init(&tm, &lim, buf);

	for (int s = 0; s < fx.steps; s++)
	{
		const int  *src[1024],
				   *tgt[1024];
		int			n[1024],
					t[1024];
		int			nb = fixture_batch(&fx, s, src, n, tgt, t);
		double		t0 = now(),
					loss,
					dt;

		tm.drop.step = s + 1;
		loss = tf_train_batch(&tm, st, nb, src, n, tgt, t, fx.label_smoothing);
		tf_train_adam(&tm, m, v, &adam, fixture_rate(&fx, s + 1));
		dt = now() - t0;
		printf("step %d loss %.9g ms %.3f\n", s + 1, loss, dt * 1e3);
		fflush(stdout);
		if (getenv("BENCH_TRAIN_DUMP_EVERY") && getenv("BENCH_TRAIN_DUMP_PREFIX") &&
			((s + 1) % atoi(getenv("BENCH_TRAIN_DUMP_EVERY")) == 0 || s + 1 == fx.steps))
		{
			char		path[1024];
			FILE	   *out;

			snprintf(path, sizeof(path), "%s.%d.f32", getenv("BENCH_TRAIN_DUMP_PREFIX"), s + 1);
			out = fopen(path, "wb");
			if (!out || fwrite(tm.params, sizeof(float), tm.nparams, out) != tm.nparams || fclose(out) != 0)
			{
				perror(path);
				return 1;
			}
		}
		total += dt;
		for (int b = 0; b < nb; b++)
			tokens += n[b] + t[b];
	}
	status = fopen("/proc/self/status", "r");
	while (status && fgets(line, sizeof(line), status))
		if (strncmp(line, "VmHWM:", 6) == 0)
			hwm_kb = atol(line + 6);
	if (status)
		fclose(status);
	printf("summary steps %d tokens %ld seconds %.4f tokens_per_second %.1f state_bytes %zu "
		   "params %zu peak_rss_kb %ld\n",
		   fx.steps, tokens, total, tokens / total, state_bytes, fx.nparams, hwm_kb);
	return 0;
}
