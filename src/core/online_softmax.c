/*
 * online_softmax.c
 *		Σ softmax(score)_i · value_i in one streaming pass, with running-max
 *		rescaling (Milakov & Gimelshein, "Online normalizer calculation for
 *		softmax", 2018).  No postgres.h.
 */
#include "online_softmax.h"

#include <math.h>

#define OSM_ROWS(s)	((s)[0])
#define OSM_MAX(s)	((s)[1])
#define OSM_SUM(s)	((s)[2])
#define OSM_ACC(s)	((s) + TF_OSM_HEADER)

void
tf_osm_init(int d, double *state)
{
	OSM_ROWS(state) = 0.0;
	OSM_MAX(state) = -INFINITY;
	OSM_SUM(state) = 0.0;
	for (int j = 0; j < d; j++)
		OSM_ACC(state)[j] = 0.0;
}

void
tf_osm_add(int d, double *state, double score, const float *value)
{
	double	   *acc = OSM_ACC(state);

	OSM_ROWS(state) += 1.0;

	if (score > OSM_MAX(state))
	{
		/* new maximum: rescale what is there, the new row weighs exp(0) */
		double		scale = exp(OSM_MAX(state) - score);

		OSM_MAX(state) = score;
		OSM_SUM(state) = OSM_SUM(state) * scale + 1.0;
		for (int j = 0; j < d; j++)
			acc[j] = acc[j] * scale + value[j];
	}
	else
	{
		double		w = exp(score - OSM_MAX(state));

		OSM_SUM(state) += w;
		for (int j = 0; j < d; j++)
			acc[j] += w * value[j];
	}
}

void
tf_osm_merge(int d, double *state, const double *other)
{
	double		max;
	double		sa;
	double		sb;

	if (OSM_ROWS(other) == 0.0)
		return;
	if (OSM_ROWS(state) == 0.0)
	{
		for (int j = 0; j < TF_OSM_HEADER + d; j++)
			state[j] = other[j];
		return;
	}

	max = fmax(OSM_MAX(state), OSM_MAX(other));
	sa = exp(OSM_MAX(state) - max);
	sb = exp(OSM_MAX(other) - max);

	OSM_ROWS(state) += OSM_ROWS(other);
	OSM_MAX(state) = max;
	OSM_SUM(state) = OSM_SUM(state) * sa + OSM_SUM(other) * sb;
	for (int j = 0; j < d; j++)
		OSM_ACC(state)[j] = OSM_ACC(state)[j] * sa + OSM_ACC(other)[j] * sb;
}

void
tf_osm_result(int d, float *out, const double *state)
{
	double		inv = 1.0 / OSM_SUM(state);

	for (int j = 0; j < d; j++)
		out[j] = (float) (OSM_ACC(state)[j] * inv);
}
