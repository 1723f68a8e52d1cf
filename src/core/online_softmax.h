/*
 * online_softmax.h
 *		Streaming softmax-weighted sums, the state of the aggregates.
 *
 * Part of the numeric core: no postgres.h.
 */
#ifndef ONLINE_SOFTMAX_H
#define ONLINE_SOFTMAX_H

/*
 * Online softmax-weighted sum (the state of the aggregates).
 *
 * A state of length TF_OSM_HEADER + d holds, in double:
 *   [0] rows seen, [1] running max score, [2] Σ exp(score - max),
 *   [3..] Σ exp(score - max) · value.
 * Adding a row with a larger score rescales what is there, so scores of any
 * finite magnitude neither overflow nor lose precision.
 */
#define TF_OSM_HEADER 3

void		tf_osm_init(int d, double *state);
void		tf_osm_add(int d, double *state, double score, const float *value);
void		tf_osm_merge(int d, double *state, const double *other);
/* out (d) = the weighted mean; state must have seen at least one row. */
void		tf_osm_result(int d, float *out, const double *state);

#endif							/* ONLINE_SOFTMAX_H */
