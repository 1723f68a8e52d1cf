/*
 * train_fixture.h
 *		Reading a training run as tools/gen_train_fixtures.py and
 *		bench/train.py write it, for test/unit/test_train.c and
 *		bench/bench_train.c (static functions: include it once):
 *
 *   NAME.txt        'config ...' (the model), 'train steps S batch B rate R
 *                   warmup W label_smoothing E', optionally 'adam eps E',
 *                   'decay FROM' (the paper's inverse square root decay as
 *                   if FROM steps were behind) and
 *                   'dropout hidden H attention A activation C seed S',
 *                   'pair N ids... T ids...'
 *                   lines, and optionally 'step K loss L rate R' lines
 *   NAME.init.f32   the parameters, float32, in train_model.h's order
 *   NAME.pos.f32    the positions of tokens 0..63 (encoder, then decoder),
 *                   then final_logits_bias (vocab) when 'bias 1'
 */
#ifndef TRAIN_FIXTURE_H
#define TRAIN_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_model.h"

#define FIXTURE_POSITIONS 64
#define FIXTURE_MAX_IDS FIXTURE_POSITIONS
#define FIXTURE_MAX_STEPS 100000

typedef struct FixturePair
{
	int			n,
				t;
	int			src[FIXTURE_MAX_IDS];
	int			tgt[FIXTURE_MAX_IDS];
} FixturePair;

typedef struct TrainFixture
{
	TfConfig	cfg;
	size_t		nparams;
	int			has_bias;
	bool		shared;			/* one embedding table for both stacks */
	bool		tied;			/* the output layer is the target embedding */
	FixturePair *pairs;
	int			npairs;
	int			steps,
				batch,
				warmup;
	double		base_rate;
	float		label_smoothing;
	TfTrainDropout drop;		/* 'dropout hidden H attention A activation C seed S', else zeros */
	double		adam_eps;		/* 'adam eps E', else 1e-9 */
	long		decay_from;		/* 'decay FROM': the rate times sqrt(FROM / (FROM + step)), else 0: none */
	double	   *want_loss;		/* (steps), when the file gives them */
	int			nloss;
	float	   *init;			/* (nparams) */
	float	   *pos;			/* positions, then the bias */
} TrainFixture;

static void *
fixture_alloc(size_t n)
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
fixture_f32(const char *dir, const char *name, const char *suffix, size_t *count)
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
	out = fixture_alloc(len);
	if (fread(out, 1, len, f) != (size_t) len)
	{
		perror(path);
		exit(2);
	}
	fclose(f);
	*count = len / sizeof(float);
	return out;
}

static int
fixture_ids(FILE *f, int *ids)
{
	int			n;

	if (fscanf(f, "%d", &n) != 1 || n < 1 || n > FIXTURE_MAX_IDS)
		return -1;
	for (int i = 0; i < n; i++)
		if (fscanf(f, "%d", &ids[i]) != 1)
			return -1;
	return n;
}

/* the value after key in the config line, or dflt if the line has no key (fixtures before it) */
static int
fixture_config_or(const char *line, const char *key, int dflt)
{
	char		pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), " %s ", key);
	p = strstr(line, pat);
	return p ? atoi(p + strlen(pat)) : dflt;
}

/* the value after key in the config line */
static int
fixture_config(const char *line, const char *key)
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
read_train_fixture(const char *dir, const char *name, TrainFixture *fx)
{
	char		path[1024],
				line[4096],
				word[32];
	FILE	   *f;
	TfConfig   *c = &fx->cfg;
	int			cap = 64;
	size_t		ninit,
				npos;

	memset(fx, 0, sizeof(*fx));
	fx->adam_eps = 1e-9;
	fx->pairs = fixture_alloc(sizeof(FixturePair) * cap);
	fx->want_loss = fixture_alloc(sizeof(double) * FIXTURE_MAX_STEPS);
	snprintf(path, sizeof(path), "%s/%s.txt", dir, name);
	f = fopen(path, "r");
	if (!f)
	{
		perror(path);
		exit(2);
	}
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
			c->vocab = c->src_vocab = fixture_config(line, "vocab");
			c->d_model = fixture_config(line, "d");
			c->enc_layers = fixture_config(line, "enc_layers");
			c->dec_layers = fixture_config(line, "dec_layers");
			c->enc_heads = fixture_config(line, "enc_heads");
			c->dec_heads = fixture_config(line, "dec_heads");
			c->enc_ffn = fixture_config(line, "enc_ffn");
			c->dec_ffn = fixture_config(line, "dec_ffn");
			c->activation = (TfActivation[]) {TF_ACT_RELU, TF_ACT_GELU, TF_ACT_SWISH}[fixture_config(line, "act") % 3];
			c->pre_norm = fixture_config(line, "pre_norm");
			c->final_norm = fixture_config(line, "final_norm");
			c->scale_embedding = fixture_config(line, "scale_embedding");
			c->pad_id = fixture_config(line, "pad");
			c->eos_id = fixture_config(line, "eos");
			c->decoder_start_id = fixture_config(line, "start");
			c->ln_eps = 1e-5f;
			fx->has_bias = fixture_config(line, "bias");
			fx->nparams = fixture_config(line, "params");
			/* learned positions are parameters (trained); the others are the .pos.f32 rows */
			c->positions = fixture_config_or(line, "learned_pos", 0) ? TF_POS_LEARNED : TF_POS_SINUSOIDAL_HALF;
			c->max_pos = fixture_config_or(line, "max_pos", FIXTURE_POSITIONS);
			fx->shared = fixture_config_or(line, "shared", 1);
			fx->tied = fixture_config_or(line, "tied", 1);
		}
		else if (strcmp(word, "train") == 0)
		{
			if (fscanf(f, " steps %d batch %d rate %lf warmup %d label_smoothing %f", &fx->steps, &fx->batch,
					   &fx->base_rate, &fx->warmup, &fx->label_smoothing) != 5)
				exit(2);
		}
		else if (strcmp(word, "decay") == 0)
		{
			if (fscanf(f, " %ld", &fx->decay_from) != 1 || fx->decay_from < 0)
				exit(2);
		}
		else if (strcmp(word, "adam") == 0)
		{
			if (fscanf(f, " eps %lf", &fx->adam_eps) != 1)
				exit(2);
		}
		else if (strcmp(word, "dropout") == 0)
		{
			if (fscanf(f, " hidden %f attention %f activation %f seed %llu", &fx->drop.hidden, &fx->drop.attention,
					   &fx->drop.activation, &fx->drop.seed) != 4)
				exit(2);
		}
		else if (strcmp(word, "pair") == 0)
		{
			FixturePair *p;

			if (fx->npairs == cap)
			{
				cap *= 2;
				fx->pairs = realloc(fx->pairs, sizeof(FixturePair) * cap);
				if (!fx->pairs)
					exit(2);
			}
			p = &fx->pairs[fx->npairs++];
			if ((p->n = fixture_ids(f, p->src)) < 0 || (p->t = fixture_ids(f, p->tgt)) < 0)
			{
				fprintf(stderr, "%s: a bad pair\n", path);
				exit(2);
			}
		}
		else if (strcmp(word, "step") == 0)
		{
			int			s;
			double		loss,
						rate;

			if (fscanf(f, "%d loss %lf rate %lf", &s, &loss, &rate) != 3 || s < 1 || s > FIXTURE_MAX_STEPS)
				exit(2);
			fx->want_loss[s - 1] = loss;
			fx->nloss = s;
		}
		else
		{
			fprintf(stderr, "%s: unexpected '%s'\n", path, word);
			exit(2);
		}
	}
	fclose(f);
	fx->init = fixture_f32(dir, name, ".init.f32", &ninit);
	fx->pos = fixture_f32(dir, name, ".pos.f32", &npos);
	if (ninit != fx->nparams ||
		npos != (size_t) 2 * FIXTURE_POSITIONS * c->d_model + (fx->has_bias ? c->vocab : 0))
	{
		fprintf(stderr, "%s: the .f32 files do not fit the config\n", name);
		exit(2);
	}
}

/* tm over fx's parameters (shared and tied embeddings unless the config says not), with zeroed gradients */
static void
bind_train_fixture(TrainFixture *fx, TfTrainModel *tm)
{
	memset(tm, 0, sizeof(*tm));
	tm->cfg = fx->cfg;
	tm->shared = fx->shared;
	tm->tied = fx->tied;
	tm->nparams = fx->nparams;
	tm->params = fx->init;
	tm->grads = fixture_alloc(sizeof(float) * fx->nparams);
	tf_train_bind(&tm->cfg, tm->shared, tm->tied, tm->params, &tm->p);
	tf_train_bind(&tm->cfg, tm->shared, tm->tied, tm->grads, &tm->g);
	tm->enc_pos = fx->pos;
	tm->dec_pos = fx->pos + FIXTURE_POSITIONS * fx->cfg.d_model;
	tm->logits_bias = fx->has_bias ? fx->pos + 2 * FIXTURE_POSITIONS * fx->cfg.d_model : NULL;
	tm->drop = fx->drop;
}

/* the rate of step s (from 1): warm-up, then constant or decaying */
static double
fixture_rate(const TrainFixture *fx, long s)
{
	double		r = tf_warmup_rate(fx->base_rate, s, fx->warmup);

	if (fx->decay_from > 0)
		r *= sqrt((double) fx->decay_from / (double) (fx->decay_from + s));
	return r;
}

/* the pairs of batch s (batch consecutive pairs, wrapping around) as arrays */
static int
fixture_batch(const TrainFixture *fx, int s, const int **src, int *n, const int **tgt, int *t)
{
	for (int b = 0; b < fx->batch; b++)
	{
		const FixturePair *p = &fx->pairs[((size_t) s * fx->batch + b) % fx->npairs];

		src[b] = p->src;
		tgt[b] = p->tgt;
		n[b] = p->n;
		t[b] = p->t;
	}
	return fx->batch;
}

#endif							/* TRAIN_FIXTURE_H */
