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

/*
 * The slot (before target word k) after the target words aligned to source
 * word s0 - 1: after the last one that chose it (max_t), else after the one
 * it chose.
 */
static int
slot_after(int ntw, const int *max_t, int nsw, const int *best_tgt, int s0)
{
	int			last;

	if (s0 <= 0 || ntw == 0)
		return 0;
	if (s0 >= nsw)
		return ntw;
	last = max_t[s0 - 1];
	if (last < 0)
		last = best_tgt[s0 - 1] < ntw ? best_tgt[s0 - 1] : -1;
	if (last >= 0)
		return last + 1;
	/* nothing aligned: as far into the target as the source word is into the source */
	return (int) (((long long) s0 * ntw + nsw / 2) / nsw);
}

/*
 * Linear in the words and anchors but for the words under each element
 * (each word is under at most as many elements as the markup nests deep):
 * the first and last target word that chose each source word are found
 * once, and each parent's last child is remembered.
 */
void
tf_place_anchors(int ntw, const int *best_src, int nsw, const int *best_tgt,
				 int n, const TfPlaceIn *in, TfPlaceOut *out, int *scratch)
{
	int		   *min_t = scratch;	/* (nsw) first target word that chose it, -1 */
	int		   *max_t = scratch + nsw;	/* (nsw) the last */
	int		   *last_child = scratch + 2 * nsw;	/* (n + 1) by parent + 1, -1 */

	for (int s = 0; s < nsw; s++)
		min_t[s] = max_t[s] = -1;
	for (int t = 0; t < ntw; t++)
		if (best_src[t] >= 0 && best_src[t] < nsw)
		{
			if (min_t[best_src[t]] < 0)
				min_t[best_src[t]] = t;
			max_t[best_src[t]] = t;
		}
	for (int i = 0; i <= n; i++)
		last_child[i] = -1;

	for (int i = 0; i < n; i++)
	{
		int			s0 = in[i].s0 < 0 ? 0 : in[i].s0 > nsw ? nsw : in[i].s0;
		int			s1 = in[i].s1 < s0 ? s0 : in[i].s1 > nsw ? nsw : in[i].s1;
		int			lo = INT_MAX,
					hi = -1;
		int			lower = 0,
					upper = ntw;
		int			p = in[i].parent >= 0 && in[i].parent < i ? in[i].parent : -1;

		if (!in[i].point && s1 > s0)
		{
			for (int s = s0; s < s1; s++)
				if (min_t[s] >= 0)
				{
					lo = min_t[s] < lo ? min_t[s] : lo;
					hi = max_t[s] > hi ? max_t[s] : hi;
				}
			/* no target word chose these: take each one's choice */
			for (int s = s0; s < s1 && hi < 0; s++)
				if (best_tgt[s] >= 0 && best_tgt[s] < ntw)
					for (int s2 = s; s2 < s1; s2++)
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
			out[i].t0 = out[i].t1 = slot_after(ntw, max_t, nsw, best_tgt, s0);

		/* nesting: inside the parent, after the previous sibling */
		if (p >= 0)
		{
			lower = out[p].t0;
			upper = out[p].t1;
		}
		if (last_child[p + 1] >= 0 && out[last_child[p + 1]].t1 > lower)
			lower = out[last_child[p + 1]].t1;
		last_child[p + 1] = i;
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
