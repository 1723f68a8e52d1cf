/*
 * placement.c
 *		Word alignment from cross-attention, and anchors placed by it.
 *		No postgres.h.
 *
 * The alignment is align()'s (sql/transformer.sql), moved into C so that
 * translate() can use it on every sentence that carries markup or spans.
 */
#include "placement.h"

#include <limits.h>
#include <string.h>

void
tf_align_words(const float *cross, int T, int S, const int *tword, int ntw,
			   const int *sword, int nsw, float *scratch, int *best_src, int *best_tgt)
{
	memset(scratch, 0, sizeof(float) * (size_t) ntw * (size_t) nsw);
	for (int t = 0; t < T; t++)
	{
		if (tword[t] < 0 || tword[t] >= ntw)
			continue;
		for (int s = 0; s < S; s++)
			if (sword[s] >= 0 && sword[s] < nsw)
				scratch[(size_t) tword[t] * nsw + sword[s]] += cross[(size_t) t * S + s];
	}
	/* (the mean over a word's pieces divides a whole row: the argmax over s is the sum's) */
	for (int w = 0; w < ntw; w++)
	{
		float		best = -1.0f;
		bool		has = false;

		best_src[w] = -1;
		for (int t = 0; t < T && !has; t++)
			has = tword[t] == w;
		if (!has)
			continue;
		for (int s = 0; s < nsw; s++)
			if (scratch[(size_t) w * nsw + s] > best)
			{
				best = scratch[(size_t) w * nsw + s];
				best_src[w] = s;
			}
	}
	/* the means: each row divided by its word's pieces */
	for (int w = 0; w < ntw; w++)
	{
		int			np = 0;

		for (int t = 0; t < T; t++)
			np += tword[t] == w;
		for (int s = 0; s < nsw && np > 1; s++)
			scratch[(size_t) w * nsw + s] /= (float) np;
	}
	for (int s = 0; s < nsw; s++)
	{
		float		best = -1.0f;

		best_tgt[s] = -1;
		for (int w = 0; w < ntw; w++)
			if (best_src[w] >= 0 && scratch[(size_t) w * nsw + s] > best)
			{
				best = scratch[(size_t) w * nsw + s];
				best_tgt[s] = w;
			}
	}
}

/* The slot (before target word k) after the target words aligned to source word s0 - 1. */
static int
slot_after(int ntw, const int *best_src, int nsw, const int *best_tgt, int s0)
{
	int			k,
				last = -1;

	if (s0 <= 0 || ntw == 0)
		return 0;
	if (s0 >= nsw)
		return ntw;
	k = s0 - 1;
	for (int t = 0; t < ntw; t++)
		if (best_src[t] == k)
			last = t;
	if (last < 0)
		last = best_tgt[k];
	if (last >= 0)
		return last + 1;
	/* nothing aligned: as far into the target as the source word is into the source */
	return (int) (((long long) s0 * ntw + nsw / 2) / nsw);
}

void
tf_place_anchors(int ntw, const int *best_src, int nsw, const int *best_tgt,
				 int n, const TfPlaceIn *in, TfPlaceOut *out)
{
	for (int i = 0; i < n; i++)
	{
		int			s0 = in[i].s0 < 0 ? 0 : in[i].s0 > nsw ? nsw : in[i].s0;
		int			s1 = in[i].s1 < s0 ? s0 : in[i].s1 > nsw ? nsw : in[i].s1;
		int			lo = INT_MAX,
					hi = -1;
		int			lower = 0,
					upper = ntw;
		int			p = in[i].parent;

		if (!in[i].point && s1 > s0)
		{
			for (int t = 0; t < ntw; t++)
				if (best_src[t] >= s0 && best_src[t] < s1)
				{
					lo = t < lo ? t : lo;
					hi = t > hi ? t : hi;
				}
			/* no target word chose these: take each one's choice */
			for (int s = s0; s < s1 && lo == INT_MAX; s++)
				if (best_tgt[s] >= 0 && best_tgt[s] < ntw)
					for (int s2 = s0; s2 < s1; s2++)
						if (best_tgt[s2] >= 0 && best_tgt[s2] < ntw)
						{
							lo = best_tgt[s2] < lo ? best_tgt[s2] : lo;
							hi = best_tgt[s2] > hi ? best_tgt[s2] : hi;
						}
		}
		if (hi >= 0)
		{
			out[i].t0 = lo;
			out[i].t1 = hi + 1;
		}
		else
			out[i].t0 = out[i].t1 = slot_after(ntw, best_src, nsw, best_tgt, s0);

		/* nesting: inside the parent, after the previous sibling */
		if (p >= 0 && p < i)
		{
			lower = out[p].t0;
			upper = out[p].t1;
		}
		for (int j = i - 1; j >= 0 && j > p; j--)
			if (in[j].parent == p)
			{
				if (out[j].t1 > lower)
					lower = out[j].t1;
				break;
			}
		if (lower > upper)
			lower = upper;
		if (out[i].t0 < lower)
			out[i].t0 = lower;
		if (out[i].t0 > upper)
			out[i].t0 = upper;
		if (out[i].t1 < out[i].t0)
			out[i].t1 = out[i].t0;
		if (out[i].t1 > upper)
			out[i].t1 = upper;
	}
}
