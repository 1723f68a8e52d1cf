/*
 * bench_util.h
 *		Timing helpers shared by the C benchmarks.
 */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <time.h>

static inline double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* for qsort: ascending doubles */
static inline int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

#endif							/* BENCH_UTIL_H */
