/*
 * test_train.c
 *		The trainer (src/core/train_model.c) against PyTorch, outside the
 *		server (make unittest): 10 steps of Adam on two fixture models,
 *		a Marian one (post-norm, swish, final_logits_bias) and an NLLB one
 *		(pre-norm, final norms, relu), from the same weights, pairs and
 *		rates as tools/gen_train_fixtures.py gave PyTorch; each step's loss,
 *		and every weight after the 10 steps, within 1e-4.
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
#include "train_model.h"

#define MAX_PAIRS 64
#define MAX_IDS 64

static int	passed = 0;
static int	failed = 0;

static void
ok(int cond, const char *what, const char *name)
{
	printf("%s %s: %s\n", cond ? "ok  " : "FAIL", name, what);
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

static float *
read_f32(const char *dir, const char *name, const char *suffix, size_t *count)
{
	char		path[1024];
	FILE	   *f;
	long		len;
	float	   *out;

	snprintf(path, sizeof(path), "%s/%s%s", dir, name, suffix);
	f = fopen(path, "rb");
	if (!f || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
	{
		perror(path);
		exit(2);
	}
	out = xmalloc(len);
	if (fread(out, 1, len, f) != (size_t) len)
	{
		perror(path);
		exit(2);
	}
	fclose(f);
	*count = len / sizeof(float);
	return out;
}

typedef struct Pair
{
	int			n,
				t;
	int			src[MAX_IDS];
	int			tgt[MAX_IDS];
} Pair;

static int
read_ids(FILE *f, int *ids)
{
	int			n;

	if (fscanf(f, "%d", &n) != 1 || n < 1 || n > MAX_IDS)
		return -1;
	for (int i = 0; i < n; i++)
		if (fscanf(f, "%d", &ids[i]) != 1)
			return -1;
	return n;
}

/* the value after key in the config line */
static int
config_int(const char *line, const char *key)
{
	char		pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), " %s ", key);
	p = strstr(line, pat);
	if (!p)
	{
		fprintf(stderr, "no %s in the config\n", key);
		exit(2);
	}
	return atoi(p + strlen(pat));
}

static void
run_model(const char *dir, const char *name)
{
	char		path[1024],
				line[4096],
				word[32];
	FILE	   *f;
	TfTrainModel tm;
	TfConfig   *c = &tm.cfg;
	Pair	   *pairs = xmalloc(sizeof(Pair) * MAX_PAIRS);
	int			npairs = 0,
				steps = 0,
				batch = 0,
				warmup = 0,
				has_bias = 0;
	float		eps = 0.0f;
	double		base_rate = 0.0;
	double		want_loss[64];
	size_t		ninit,
				nfinal,
				npos;
	float	   *init,
			   *final,
			   *pos,
			   *m,
			   *v;
	void	   *buf;
	TfTrainState *st;
	TfTrainLimits lim;
	TfAdam		adam = {0.9, 0.98, 1e-9, 0};
	float		worst_loss = 0.0f,
				worst_w = 0.0f,
				maxw = 0.0f;
	char		what[128];

	snprintf(path, sizeof(path), "%s/%s.txt", dir, name);
	f = fopen(path, "r");
	if (!f)
	{
		perror(path);
		exit(2);
	}
	memset(&tm, 0, sizeof(tm));
	while (fscanf(f, "%31s", word) == 1)
	{
		if (word[0] == '#')
		{
			if (!fgets(line, sizeof(line), f))
				break;
		}
		else if (strcmp(word, "config") == 0)
		{
			line[0] = ' ';
			if (!fgets(line + 1, sizeof(line) - 1, f))
				exit(2);
			c->vocab = c->src_vocab = config_int(line, "vocab");
			c->d_model = config_int(line, "d");
			c->enc_layers = config_int(line, "enc_layers");
			c->dec_layers = config_int(line, "dec_layers");
			c->enc_heads = config_int(line, "enc_heads");
			c->dec_heads = config_int(line, "dec_heads");
			c->enc_ffn = config_int(line, "enc_ffn");
			c->dec_ffn = config_int(line, "dec_ffn");
			c->activation = (TfActivation[]) {TF_ACT_RELU, TF_ACT_GELU, TF_ACT_SWISH}[config_int(line, "act")];
			c->pre_norm = config_int(line, "pre_norm");
			c->final_norm = config_int(line, "final_norm");
			c->scale_embedding = config_int(line, "scale_embedding");
			c->pad_id = config_int(line, "pad");
			c->eos_id = config_int(line, "eos");
			c->decoder_start_id = config_int(line, "start");
			c->ln_eps = 1e-5f;
			has_bias = config_int(line, "bias");
			tm.nparams = config_int(line, "params");
		}
		else if (strcmp(word, "train") == 0)
		{
			if (fscanf(f, " steps %d batch %d rate %lf warmup %d label_smoothing %f", &steps, &batch, &base_rate,
					   &warmup, &eps) != 5)
				exit(2);
		}
		else if (strcmp(word, "pair") == 0)
		{
			Pair	   *p = &pairs[npairs++];

			if (npairs > MAX_PAIRS || (p->n = read_ids(f, p->src)) < 0 || (p->t = read_ids(f, p->tgt)) < 0)
				exit(2);
		}
		else if (strcmp(word, "step") == 0)
		{
			int			s;
			double		loss,
						rate;

			if (fscanf(f, "%d loss %lf rate %lf", &s, &loss, &rate) != 3 || s < 1 || s > 64)
				exit(2);
			want_loss[s - 1] = loss;
		}
		else
		{
			fprintf(stderr, "%s: unexpected '%s'\n", path, word);
			exit(2);
		}
	}
	fclose(f);

	tm.shared = tm.tied = true;
	ok(tf_train_param_count(c, true, true) == tm.nparams, "the layout has PyTorch's parameter count", name);
	init = read_f32(dir, name, ".init.f32", &ninit);
	final = read_f32(dir, name, ".final.f32", &nfinal);
	pos = read_f32(dir, name, ".pos.f32", &npos);
	if (ninit != tm.nparams || nfinal != tm.nparams)
		exit(2);
	tm.params = init;
	tm.grads = xmalloc(sizeof(float) * tm.nparams);
	m = xmalloc(sizeof(float) * tm.nparams);
	v = xmalloc(sizeof(float) * tm.nparams);
	tf_train_bind(c, true, true, tm.params, &tm.p);
	tf_train_bind(c, true, true, tm.grads, &tm.g);
	tm.enc_pos = pos;
	tm.dec_pos = pos + 64 * c->d_model;
	tm.logits_bias = has_bias ? pos + 2 * 64 * c->d_model : NULL;
	lim.sentences = batch;
	lim.src_tokens = lim.tgt_tokens = batch * MAX_IDS;
	lim.longest = MAX_IDS;
	buf = aligned_alloc(64, (tf_train_state_size(&tm, &lim) + 63) & ~(size_t) 63);
	st = tf_train_state_init(&tm, &lim, buf);

	for (int s = 0; s < steps; s++)
	{
		const int  *src[MAX_PAIRS],
				   *tgt[MAX_PAIRS];
		int			n[MAX_PAIRS],
					t[MAX_PAIRS];
		double		loss;
		double		rate = tf_warmup_rate(base_rate, s + 1, warmup);

		for (int b = 0; b < batch; b++)
		{
			const Pair *p = &pairs[s * batch + b];

			src[b] = p->src;
			tgt[b] = p->tgt;
			n[b] = p->n;
			t[b] = p->t;
		}
		loss = tf_train_batch(&tm, st, batch, src, n, tgt, t, eps);
		tf_train_adam(&tm, m, v, &adam, rate);
		if (getenv("TRAIN_DEBUG"))
			printf("  loss %d: %.9g vs %.9g\n", s + 1, loss, want_loss[s]);
		if (fabs(loss - want_loss[s]) / fabs(want_loss[s]) > worst_loss)
			worst_loss = fabs(loss - want_loss[s]) / fabs(want_loss[s]);
	}
	for (size_t i = 0; i < tm.nparams; i++)
	{
		float		dlt = fabsf(tm.params[i] - final[i]);

		if (!(dlt <= worst_w))
		{
			worst_w = isnan(dlt) ? INFINITY : dlt;
			if (getenv("TRAIN_DEBUG"))
				printf("  worst so far: index %zu (%g vs %g)\n", i, tm.params[i], final[i]);
		}
		if (fabsf(final[i]) > maxw)
			maxw = fabsf(final[i]);
	}
	snprintf(what, sizeof(what), "the loss of each of %d steps as PyTorch's (max rel diff %.3g)", steps, worst_loss);
	ok(worst_loss <= 1e-4f, what, name);
	snprintf(what, sizeof(what), "%zu weights after %d steps as PyTorch's (max abs diff %.3g, largest weight %.3g)",
			 tm.nparams, steps, worst_w, maxw);
	ok(worst_w <= 1e-4f, what, name);
	free(buf);
	free(init), free(final), free(pos), free(m), free(v), free(tm.grads), free(pairs);
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
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
