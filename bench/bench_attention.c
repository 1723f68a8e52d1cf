/*
 * bench_attention.c
 *		Time the core's tf_attention outside the server.
 *		usage: bench_attention N M D REPS  ->  prints the median seconds per call
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "attention.h"
#include "blas.h"
#include "tensor_ops.h"
#include "bench_util.h"

int
main(int argc, char **argv)
{
	int			n,
				m,
				d,
				reps;
	float	   *q,
			   *k,
			   *v,
			   *out,
			   *scratch;
	double	   *times;

	if (argc != 5)
	{
		fprintf(stderr, "usage: %s N M D REPS\n", argv[0]);
		return 2;
	}
	n = atoi(argv[1]);
	m = atoi(argv[2]);
	d = atoi(argv[3]);
	reps = atoi(argv[4]);
	if (n < 1 || m < 1 || d < 1 || reps < 1)
		return 2;

	tf_blas_init();
	tf_set_blas_threads(1);
	q = malloc(sizeof(float) * n * d);
	k = malloc(sizeof(float) * m * d);
	v = malloc(sizeof(float) * m * d);
	out = malloc(sizeof(float) * n * d);
	scratch = malloc(sizeof(float) * n * m);
	times = malloc(sizeof(double) * reps);
	srand(42);
	for (int i = 0; i < n * d; i++)
		q[i] = (float) rand() / RAND_MAX - 0.5f;
	for (int i = 0; i < m * d; i++)
	{
		k[i] = (float) rand() / RAND_MAX - 0.5f;
		v[i] = (float) rand() / RAND_MAX - 0.5f;
	}

	for (int r = 0; r < reps; r++)
	{
		double		t0 = now();

		tf_attention(n, m, d, d, out, d, scratch, q, d, k, d, v, d, NULL);
		times[r] = now() - t0;
	}
	qsort(times, reps, sizeof(double), cmp_double);
	printf("%.9f\n", times[reps / 2]);
	return 0;
}
