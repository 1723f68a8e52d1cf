/*
 * search.c
 *		Greedy and beam search over the decoder of model.c, one sentence or a
 *		batch: candidates, finished hypotheses, early stopping, KV cache
 *		reordering.  No postgres.h.  The decoding rules are those of
 *		tools/marian_torch.py, the PyTorch reference the tests compare
 *		against.
 */
#include "model.h"
#include "model_internal.h"
#include "threads.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Cand
{
	double		score;
	int			beam;
	int			tok;
} Cand;

static int
cand_cmp(const void *pa, const void *pb)
{
	const Cand *a = pa,
			   *b = pb;

	if (a->score != b->score)
		return a->score > b->score ? -1 : 1;
	if (a->beam != b->beam)
		return a->beam - b->beam;
	return a->tok - b->tok;
}

/*
 * The k best tokens of one processed row as candidates of beam b, appended
 * to out: score = base + logits[j] - shift.  Chosen on the floats, in the
 * order of (-logit, token); only the winners are shifted.
 */
static int
top_k(int vocab, const float *logits, int k, int beam, double base, double shift, Cand *out)
{
	int			n = 0;
	float		worst = -INFINITY;
	float		best[2 * TF_MAX_BEAMS];
	int			ids[2 * TF_MAX_BEAMS];

	for (int j = 0; j < vocab; j++)
	{
		float		v;
		int			i;

		/* once k are found, only a better one counts: skip to it (vectorized) */
		if (n == k)
		{
			j += (int) tf_find_above(vocab - j, logits + j, worst);
			if (j == vocab)
				break;
		}
		v = logits[j];
		/* ties go to the lower token id, met first */
		if (v == -INFINITY || (n == k && v <= worst))
			continue;
		i = n < k ? n++ : k - 1;
		while (i > 0 && best[i - 1] < v)
		{
			best[i] = best[i - 1];
			ids[i] = ids[i - 1];
			i--;
		}
		best[i] = v;
		ids[i] = j;
		worst = best[n - 1];
	}
	for (int i = 0; i < n; i++)
	{
		out[i].score = base + ((double) best[i] - shift);
		out[i].beam = beam;
		out[i].tok = ids[i];
	}
	return n;
}

/* The search for one sentence (see tools/marian_torch.py for the rules). */
typedef struct Search
{
	int			n_src;
	int			T;				/* decoding steps: its max_length - 1 */
	float	   *cross_k;		/* (layers, n_src, d) */
	float	   *cross_v;
	int			nb;				/* live beams */
	int		   *toks;			/* (K, T + 1) live beams, start token first */
	int		   *toks2;
	double	   *score;			/* (K) sums of processed log-probabilities */
	double	   *score2;
	int		   *parent;			/* (K) */
	/* finished hypotheses: the K best */
	int		   *fin_toks;		/* (K, T + 1) generated tokens, EOS excluded */
	int		   *fin_len;
	double	   *fin_score;		/* normalized by length ** length_penalty */
	int			nfin;
	bool		done;
} Search;

/* Keep a finished hypothesis if it is among the K best (BeamHypotheses.add). */
static void
add_finished(Search *h, int K, const int *toks, int len, double score)
{
	int			T1 = h->T + 1;
	int			slot = h->nfin;

	if (h->nfin == K)
	{
		slot = 0;
		for (int i = 1; i < K; i++)
			if (h->fin_score[i] < h->fin_score[slot])
				slot = i;
		if (score <= h->fin_score[slot])
			return;
	}
	else
		h->nfin++;
	memcpy(h->fin_toks + (size_t) slot * T1, toks, sizeof(int) * len);
	h->fin_len[slot] = len;
	h->fin_score[slot] = score;
}

/*
 * One greedy step (Hugging Face's _sample without sampling): the argmax of
 * the processed logits; EOS or the last position ends the sentence.
 */
static int
greedy_step(const TfConfig *c, const TfDecodeOptions *opt, Search *h, float *logits,
			int t, int *tmp)
{
	Cand		best;

	tf_process_logits(c, opt, false, logits, h->toks, t, tmp);
	if (top_k(c->vocab, logits, 1, 0, 0.0, 0.0, &best) == 0)
		best.tok = 0;			/* all -inf: torch.argmax gives the first */
	if (best.tok == c->eos_id)
	{
		add_finished(h, 1, h->toks + 1, t - 1, 0.0);
		return 0;
	}
	h->toks[t] = best.tok;
	h->parent[0] = 0;
	if (t == h->T)
	{
		add_finished(h, 1, h->toks + 1, t, 0.0);
		return 0;
	}
	return 1;
}

/*
 * One beam search step of one sentence (logits at rows[0..nb)), as
 * Hugging Face's _beam_search: the 2K best (beam, token) candidates; EOS
 * among the first K finishes a hypothesis (score / length ** length
 * penalty, the length counting the generated tokens with EOS); the best K
 * others are the new live beams; then the early-stopping rule.  Returns the
 * new live beam count, 0 when the sentence is done.
 */
static int
beam_step(const TfConfig *c, const TfDecodeOptions *opt, Search *h, float *logits,
		  int t, Cand *cands, Cand *top, int *tmp)
{
	int			K = opt->beam_size;
	int			T1 = h->T + 1;
	int			ncand = 0;
	int			nnew = 0;
	bool		last = t == h->T;

	for (int b = 0; b < h->nb; b++)
	{
		float	   *row = logits + (size_t) b * c->vocab;
		double		shift = tf_process_logits(c, opt, true, row, h->toks + (size_t) b * T1, t, tmp);

		ncand += top_k(c->vocab, row, 2 * K, b, h->score[b], shift, cands + ncand);
	}
	qsort(cands, ncand, sizeof(Cand), cand_cmp);
	if (ncand > 2 * K)
		ncand = 2 * K;
	memcpy(top, cands, sizeof(Cand) * ncand);

	for (int r = 0; r < ncand; r++)
	{
		const Cand *cd = &top[r];
		double		norm = cd->score / pow((double) t, opt->length_penalty);

		if (cd->tok == c->eos_id)
		{
			/* once full, early_stopping=True takes no more */
			if (r < K && !(h->nfin == K && opt->early_stopping == TF_EARLY_TRUE))
				add_finished(h, K, h->toks + (size_t) cd->beam * T1 + 1, t - 1, norm);
			continue;
		}
		if (last)
		{
			/* out of positions: the first K candidates finish as they are */
			if (r < K && !(h->nfin == K && opt->early_stopping == TF_EARLY_TRUE))
			{
				memcpy(tmp, h->toks + (size_t) cd->beam * T1 + 1, sizeof(int) * (t - 1));
				tmp[t - 1] = cd->tok;
				add_finished(h, K, tmp, t, norm);
			}
			continue;
		}
		if (nnew < K)
		{
			memcpy(h->toks2 + (size_t) nnew * T1, h->toks + (size_t) cd->beam * T1, sizeof(int) * t);
			h->toks2[(size_t) nnew * T1 + t] = cd->tok;
			h->score2[nnew] = cd->score;
			h->parent[nnew] = cd->beam;
			nnew++;
		}
	}
	if (last || nnew == 0)
		return 0;
	/* the new beams become the live ones: swap, not copy */
	{
		int		   *tt = h->toks;
		double	   *ts = h->score;

		h->toks = h->toks2;
		h->toks2 = tt;
		h->score = h->score2;
		h->score2 = ts;
	}

	/* _check_early_stop_heuristic: can the best live beam still beat the worst finished? */
	if (h->nfin == K)
	{
		double		worst = h->fin_score[0];
		double		len;

		for (int i = 1; i < K; i++)
			worst = h->fin_score[i] < worst ? h->fin_score[i] : worst;
		if (opt->early_stopping == TF_EARLY_TRUE)
			return 0;
		len = opt->early_stopping == TF_EARLY_NEVER && opt->length_penalty > 0.0 ?
			opt->max_length - 1 : t;
		if (worst >= h->score[0] / pow(len, opt->length_penalty))
			return 0;
	}
	return nnew;
}

/*
 * Beams moved: beam b continues parent[b] (an old beam of the same
 * sentence).  Its cache rows stay where they were written; it takes its
 * parent's row locations for positions 0 .. t-1.
 */
static inline int
imin(int a, int b)
{
	return a < b ? a : b;
}

static void
reorder_caches(RunState *s, int first, int nb, const int *parent, int t)
{
	bool		any = false;

	for (int b = 0; b < nb; b++)
		any |= parent[b] != b;
	if (!any)
		return;
	for (int b = 0; b < nb; b++)
		memcpy(s->anc_tmp + (size_t) b * s->T, s->anc + (size_t) (first + parent[b]) * s->T,
			   sizeof(int) * t);
	for (int b = 0; b < nb; b++)
		memcpy(s->anc + (size_t) (first + b) * s->T, s->anc_tmp + (size_t) b * s->T, sizeof(int) * t);
}

/*
 * The search step of every live sentence, on its rows' logits: sentences
 * are independent (each its own Search), so the threads of one call share
 * them, dealt in turn, each part with its own candidate and token buffers.
 */
typedef struct SentenceSteps
{
	const TfModel *m;
	const TfConfig *c;
	const TfDecodeOptions *opt;
	Search	   *hs;
	int			nsent;
	int			K;
	float	   *logits;			/* (rows, vocab) */
	const int  *first_row;		/* (nsent) each sentence's first row */
	const float *x;				/* (rows, d) the rows' last hidden states */
	bool		screen;			/* the logits are lm_head_screen's (greedy_screen.c) */
	float	   *scratch;		/* (parts, tf_screen_scratch_floats()) for the screen */
	int		   *nnew;			/* (nsent) out: its new live beams, 0 when done */
	Cand	   *cands;			/* (parts, K x 2K) */
	Cand	   *top;			/* (parts, 2K) */
	int		   *tmp;			/* (parts, tmp_len) */
	int			tmp_len;		/* the longest T + 1 */
	int			t;
} SentenceSteps;

static void
sentence_steps(void *arg, int part, int nparts)
{
	const SentenceSteps *j = arg;
	int			K = j->K;

	for (int i = part; i < j->nsent; i += nparts)
	{
		Search	   *h = &j->hs[i];
		float	   *logits = j->logits + (size_t) j->first_row[i] * j->c->vocab;
		int		   *tmp = j->tmp + (size_t) part * j->tmp_len;

		if (h->done)
			continue;
		if (K == 1 && j->screen)
			tf_screen_greedy_row(j->m, &j->opt[i], h->toks, j->t,
								 j->x + (size_t) j->first_row[i] * j->c->d_model, logits,
								 j->scratch + (size_t) part * tf_screen_scratch_floats(j->c), tmp);
		if (K == 1)
			j->nnew[i] = greedy_step(j->c, &j->opt[i], h, logits, j->t, tmp);
		else
			j->nnew[i] = beam_step(j->c, &j->opt[i], h, logits, j->t, j->cands + (size_t) part * K * 2 * K,
								   j->top + (size_t) part * 2 * K, tmp);
	}
}

int
tf_translate(const TfModel *m, int n, const int *src, const TfDecodeOptions *opt,
			 int **result, const SpmAlloc *a, void (*interrupt) (void))
{
	const int  *srcs[1] = {src};
	int			nout;

	tf_translate_batch(m, 1, srcs, &n, opt, result, &nout, a, interrupt);
	return nout;
}

void
tf_translate_batch(const TfModel *m, int nsent, const int *const *src, const int *n_src,
				   const TfDecodeOptions *opt, int **results, int *nresults,
				   const SpmAlloc *a, void (*interrupt) (void))
{
	const TfConfig *c = &m->cfg;
	int			d = c->d_model;
	int			K = opt[0].beam_size;
	int			L = c->dec_layers;
	int			maxrows = nsent * K;
	int			longest = 0;
	RunState	s;
	EncodeState enc;
	Search	   *hs = a->alloc(a->ctx, sizeof(Search) * nsent);
	StepRow    *rows = a->alloc(a->ctx, sizeof(StepRow) * maxrows);
	int			parts = tf_parallel_parts();	/* threads sharing a step */
	Cand	   *cands = a->alloc(a->ctx, sizeof(Cand) * (size_t) parts * K * 2 * K);
	Cand	   *top = a->alloc(a->ctx, sizeof(Cand) * (size_t) parts * 2 * K);
	int		   *first_row = a->alloc(a->ctx, sizeof(int) * nsent);
	int		   *nnew = a->alloc(a->ctx, sizeof(int) * nsent);
	int		   *tmp;
	float	   *memory;
	SentenceSteps steps;
	bool		screened = K == 1 && tf_screen_usable(m);

	/* Hugging Face's max_length counts the start token: max_length - 1 steps */
	s.slots = maxrows;
	s.T = 1;
	for (int i = 0; i < nsent; i++)
	{
		s.T = imax(s.T, opt[i].max_length - 1);
		longest = imax(longest, n_src[i]);
	}
	tmp = a->alloc(a->ctx, sizeof(int) * (size_t) parts * (s.T + 1));
	memory = a->alloc(a->ctx, sizeof(float) * (size_t) longest * d);
	tf_encode_state_alloc(m, longest, &enc, a);

	/* each sentence's encoder, then its cross-attention K and V, once */
	for (int i = 0; i < nsent; i++)
	{
		Search	   *h = &hs[i];
		int			n = n_src[i];
		int			T1 = imax(opt[i].max_length - 1, 1) + 1;

		if (interrupt)
			interrupt();
		memset(h, 0, sizeof(Search));
		h->n_src = n;
		h->T = T1 - 1;
		tf_encode_with(m, n, src[i], memory, &enc);
		h->cross_k = a->alloc(a->ctx, sizeof(float) * (size_t) L * n * d);
		h->cross_v = a->alloc(a->ctx, sizeof(float) * (size_t) L * n * d);
		for (int l = 0; l < L; l++)
		{
			const TfAttnWeights *X = &m->w.dec[l].cross_attn;

			linear(n, d, d, h->cross_k + (size_t) l * n * d, memory, X->k_w, X->k_b);
			linear(n, d, d, h->cross_v + (size_t) l * n * d, memory, X->v_w, X->v_b);
		}
		h->toks = a->alloc(a->ctx, sizeof(int) * (size_t) K * T1);
		h->toks2 = a->alloc(a->ctx, sizeof(int) * (size_t) K * T1);
		h->score = a->alloc(a->ctx, sizeof(double) * K);
		h->score2 = a->alloc(a->ctx, sizeof(double) * K);
		h->parent = a->alloc(a->ctx, sizeof(int) * K);
		h->fin_toks = a->alloc(a->ctx, sizeof(int) * (size_t) K * T1);
		h->fin_len = a->alloc(a->ctx, sizeof(int) * K);
		h->fin_score = a->alloc(a->ctx, sizeof(double) * K);
		h->nb = 1;
		h->toks[0] = c->decoder_start_id;
		h->score[0] = 0.0;
	}

	s.x = a->alloc(a->ctx, sizeof(float) * (size_t) maxrows * d);
	s.tmp = a->alloc(a->ctx, sizeof(float) * (size_t) maxrows * d);
	s.q = a->alloc(a->ctx, sizeof(float) * (size_t) maxrows * d);
	s.kv = a->alloc(a->ctx, sizeof(float) * (size_t) maxrows * d);
	s.att = a->alloc(a->ctx, sizeof(float) * (size_t) maxrows * d);
	s.out = a->alloc(a->ctx, sizeof(float) * (size_t) maxrows * d);
	s.hb = a->alloc(a->ctx, sizeof(float) * (size_t) maxrows * c->dec_ffn);
	s.logits = a->alloc(a->ctx, sizeof(float) * (size_t) maxrows * c->vocab);
	s.parts = parts;
	s.part_scores = (size_t) imax(s.T, TF_SMALL_M * longest);
	s.scores = a->alloc(a->ctx, sizeof(float) * parts * s.part_scores);
	s.kcache = a->alloc(a->ctx, sizeof(float) * (size_t) L * maxrows * s.T * d);
	s.vcache = a->alloc(a->ctx, sizeof(float) * (size_t) L * maxrows * s.T * d);
	s.anc = a->alloc(a->ctx, sizeof(int) * (size_t) maxrows * s.T);
	s.anc_tmp = a->alloc(a->ctx, sizeof(int) * (size_t) K * s.T);
	s.krows = a->alloc(a->ctx, sizeof(float *) * (size_t) parts * s.T);
	s.vrows = a->alloc(a->ctx, sizeof(float *) * (size_t) parts * s.T);
	steps = (SentenceSteps) {m, c, opt, hs, nsent, K, s.logits, first_row, s.x, false,
		screened ? a->alloc(a->ctx, sizeof(float) * (size_t) parts * tf_screen_scratch_floats(c)) : NULL,
	nnew, cands, top, tmp, s.T + 1, 0};

	for (int t = 1; t <= s.T; t++)
	{
		int			nr = 0;
		int			row0 = 0;

		if (interrupt)
			interrupt();
		/* the live beams of the sentences still searching, as rows */
		for (int i = 0; i < nsent; i++)
		{
			Search	   *h = &hs[i];

			if (h->done)
				continue;
			for (int b = 0; b < h->nb; b++)
			{
				StepRow    *r = &rows[nr++];

				r->tok = h->toks[(size_t) b * (h->T + 1) + t - 1];
				r->slot = i * K + b;
				r->n_src = h->n_src;
				r->cross_k = h->cross_k;
				r->cross_v = h->cross_v;
			}
		}
		if (nr == 0)
			break;
		/* a few greedy rows: the output layer's weights dominate, read in half the bytes */
		s.screen = steps.screen = screened && nr <= TF_SCREEN_ROWS;
		tf_decoder_step(m, &s, nr, rows, t - 1);

		/* each sentence's step on its rows' logits, the sentences shared by the threads */
		for (int i = 0; i < nsent; i++)
		{
			first_row[i] = row0;
			if (!hs[i].done)
				row0 += hs[i].nb;
		}
		steps.t = t;
		tf_parallel(imin(parts, nsent), sentence_steps, &steps);
		for (int i = 0; i < nsent; i++)
		{
			Search	   *h = &hs[i];

			if (h->done)
				continue;
			if (nnew[i] == 0)
			{
				h->done = true;
				continue;
			}
			if (K > 1)
				reorder_caches(&s, i * K, nnew[i], h->parent, t);
			h->nb = nnew[i];
		}
	}

	for (int i = 0; i < nsent; i++)
	{
		Search	   *h = &hs[i];
		int			best = 0;

		for (int j = 1; j < h->nfin; j++)
			if (h->fin_score[j] > h->fin_score[best])
				best = j;
		nresults[i] = h->nfin > 0 ? h->fin_len[best] : 0;
		results[i] = a->alloc(a->ctx, sizeof(int) * (size_t) (nresults[i] + 1));
		if (nresults[i] > 0)
			memcpy(results[i], h->fin_toks + (size_t) best * (h->T + 1), sizeof(int) * nresults[i]);
	}
}
