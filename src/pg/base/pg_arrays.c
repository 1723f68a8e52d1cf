/*
 * pg_arrays.c
 *		Argument checks for real[] inputs and allocation of real[] results.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/memutils.h"

#include "pg_arrays.h"
#include "tensor_ops.h"

/* Element type, NULLs and non-finite values, for any dimensionality. */
static void
CheckElements(ArrayType *arr, const char *name)
{
	const float *data;
	int			n;

	if (ARR_ELEMTYPE(arr) != FLOAT4OID)
		elog(ERROR, "%s: expected a real[] argument", name);

	if (array_contains_nulls(arr))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not contain nulls", name)));

	n = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
	data = (const float *) ARR_DATA_PTR(arr);
	if (likely(tf_all_finite(n, data)))
		return;
	for (int i = 0; i < n; i++)
		if (unlikely(!isfinite(data[i])))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("%s must not contain NaN or infinity", name),
					 errdetail("Element %d (in row-major order) is %s.",
							   i + 1, isnan(data[i]) ? "NaN" :
							   data[i] > 0 ? "Infinity" : "-Infinity")));
}

Matrix
ArrayGetMatrix(ArrayType *arr, const char *name)
{
	Matrix		m;

	if (ARR_NDIM(arr) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("%s must not be empty", name)));
	if (ARR_NDIM(arr) != 2)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("%s must be a 2-D array", name),
				 errdetail("It has %d dimension%s.", ARR_NDIM(arr),
						   ARR_NDIM(arr) == 1 ? "" : "s"),
				 errhint("Write one row as '{{1,2,3}}', a matrix as '{{1,2},{3,4}}'.")));

	CheckElements(arr, name);

	m.rows = ARR_DIMS(arr)[0];
	m.cols = ARR_DIMS(arr)[1];
	m.data = (const float *) ARR_DATA_PTR(arr);
	return m;
}

const float *
ArrayGetVector(ArrayType *arr, const char *name, int *len)
{
	if (ARR_NDIM(arr) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("%s must not be empty", name)));
	if (ARR_NDIM(arr) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("%s must be a 1-D array", name),
				 errdetail("It has %d dimensions.", ARR_NDIM(arr))));

	CheckElements(arr, name);

	*len = ARR_DIMS(arr)[0];
	return (const float *) ARR_DATA_PTR(arr);
}

void
CheckFloatCount(double count, const char *what)
{
	/* leave room for the array header */
	double		limit = (double) (MaxAllocSize - 1024) / sizeof(float);

	if (count > limit)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s would be too large", what),
				 errdetail("It would have %.0f elements; the maximum is %.0f.",
						   count, limit)));
}

ArrayType *
NewFloat4Array(int rows, int cols)
{
	int			ndim = rows < 0 ? 1 : 2;
	int			dims[2];
	int			lbs[2] = {1, 1};
	double		count = rows < 0 ? (double) cols : (double) rows * cols;
	Size		nbytes;
	ArrayType  *result;

	CheckFloatCount(count, "result array");

	if (ndim == 1)
		dims[0] = cols;
	else
	{
		dims[0] = rows;
		dims[1] = cols;
	}

	nbytes = ARR_OVERHEAD_NONULLS(ndim) + (Size) count * sizeof(float);
	result = (ArrayType *) palloc0(nbytes);
	SET_VARSIZE(result, nbytes);
	result->ndim = ndim;
	result->dataoffset = 0;
	result->elemtype = FLOAT4OID;
	memcpy(ARR_DIMS(result), dims, ndim * sizeof(int));
	memcpy(ARR_LBOUND(result), lbs, ndim * sizeof(int));
	return result;
}
