/*
 * pg_arrays.h
 *		Checked views of real[] arguments as dense float buffers, and the
 *		allocation of real[] results.  PostgreSQL glue.
 */
#ifndef PG_ARRAYS_H
#define PG_ARRAYS_H

#include "postgres.h"

#include "utils/array.h"

/* A 2-D real[] seen as a row-major matrix; data points into the array. */
typedef struct Matrix
{
	int			rows;
	int			cols;
	const float *data;
} Matrix;

/*
 * Check that `arr` (the argument called `name`) is a non-empty 2-D real[]
 * without NULLs, NaN or infinities, and return it as a matrix.  No copy.
 */
extern Matrix ArrayGetMatrix(ArrayType *arr, const char *name);

/* The same for a non-empty 1-D real[]; its length goes to *len. */
extern const float *ArrayGetVector(ArrayType *arr, const char *name, int *len);

/*
 * A new real[] of the given shape (1-D when rows < 0, else rows × cols),
 * zero-filled; the caller writes ARR_DATA_PTR.  The size is checked before
 * anything is allocated.
 */
extern ArrayType *NewFloat4Array(int rows, int cols);

/* Refuse a buffer of `count` floats that palloc could not give. */
extern void CheckFloatCount(double count, const char *what);

#endif							/* PG_ARRAYS_H */
