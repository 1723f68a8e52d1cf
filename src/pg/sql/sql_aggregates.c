/*
 * sql_aggregates.c
 *		softmax_weighted_sum(score, value) and attend(query, key, value):
 *		Σ softmax(score)_i · value_i over a group, in one streaming pass.
 *
 * The state is a flat double precision[] (see online_softmax.h): '{}' before
 * the first row, then TF_OSM_HEADER + d numbers.  As float8_accum does, the
 * transition and combine functions update their first argument in place when
 * called as an aggregate, so a row costs no allocation.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"

#include "online_softmax.h"
#include "pg_arrays.h"
#include "tensor_ops.h"

/* The state's value dimension, or 0 for the empty initial state. */
static int
StateDim(ArrayType *state)
{
	int			n;

	if (ARR_NDIM(state) == 0)
		return 0;
	if (ARR_NDIM(state) != 1 || ARR_ELEMTYPE(state) != FLOAT8OID ||
		ARR_HASNULL(state) || ARR_DIMS(state)[0] <= TF_OSM_HEADER)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("invalid softmax_weighted_sum state"),
				 errdetail("The state must be '{}' or a 1-D double precision array of more than %d elements.",
						   TF_OSM_HEADER)));
	n = ARR_DIMS(state)[0];
	return n - TF_OSM_HEADER;
}

static inline void
CheckSameDim(int expected, int got, const char *what)
{
	if (expected != got)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("%s dimensions differ", what),
				 errdetail("The lengths are %d and %d.", expected, got)));
}

static inline void
CheckScore(double score)
{
	if (!isfinite(score))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("score must be finite"),
				 errdetail("The score is %s.", isnan(score) ? "NaN" :
						   score > 0 ? "Infinity" : "-Infinity")));
}

/* A fresh state for values of d elements. */
static ArrayType *
NewState(int d)
{
	Size		nbytes = ARR_OVERHEAD_NONULLS(1) + sizeof(double) * (TF_OSM_HEADER + d);
	ArrayType  *state = (ArrayType *) palloc0(nbytes);

	SET_VARSIZE(state, nbytes);
	state->ndim = 1;
	state->dataoffset = 0;
	state->elemtype = FLOAT8OID;
	*ARR_DIMS(state) = TF_OSM_HEADER + d;
	*ARR_LBOUND(state) = 1;
	tf_osm_init(d, (double *) ARR_DATA_PTR(state));
	return state;
}

/*
 * The state to update for a row of dimension d: the argument itself when we
 * may scribble on it, else a copy; a new one for the first row.
 */
static ArrayType *
StateForUpdate(FunctionCallInfo fcinfo, int d)
{
	ArrayType  *state;
	int			sd;

	if (AggCheckCallContext(fcinfo, NULL))
		state = PG_GETARG_ARRAYTYPE_P(0);
	else
		state = PG_GETARG_ARRAYTYPE_P_COPY(0);

	sd = StateDim(state);
	if (sd == 0)
		return NewState(d);
	CheckSameDim(sd, d, "value");
	return state;
}

PG_FUNCTION_INFO_V1(softmax_weighted_sum_accum);
Datum
softmax_weighted_sum_accum(PG_FUNCTION_ARGS)
{
	double		score = PG_GETARG_FLOAT8(1);
	int			d;
	const float *value = ArrayGetVector(PG_GETARG_ARRAYTYPE_P(2), "value", &d);
	ArrayType  *state;

	CheckScore(score);
	state = StateForUpdate(fcinfo, d);
	tf_osm_add(d, (double *) ARR_DATA_PTR(state), score, value);
	PG_RETURN_ARRAYTYPE_P(state);
}

PG_FUNCTION_INFO_V1(attend_accum);
Datum
attend_accum(PG_FUNCTION_ARGS)
{
	int			dq,
				dk,
				dv;
	const float *query = ArrayGetVector(PG_GETARG_ARRAYTYPE_P(1), "query", &dq);
	const float *key = ArrayGetVector(PG_GETARG_ARRAYTYPE_P(2), "key", &dk);
	const float *value = ArrayGetVector(PG_GETARG_ARRAYTYPE_P(3), "value", &dv);
	ArrayType  *state;
	double		score;

	CheckSameDim(dq, dk, "query and key");
	score = tf_dot(dk, query, key) / sqrt((double) dk);
	state = StateForUpdate(fcinfo, dv);
	tf_osm_add(dv, (double *) ARR_DATA_PTR(state), score, value);
	PG_RETURN_ARRAYTYPE_P(state);
}

PG_FUNCTION_INFO_V1(softmax_weighted_sum_combine);
Datum
softmax_weighted_sum_combine(PG_FUNCTION_ARGS)
{
	ArrayType  *other = PG_GETARG_ARRAYTYPE_P(1);
	int			od = StateDim(other);
	ArrayType  *state;
	int			sd;

	if (od == 0)
		PG_RETURN_DATUM(PG_GETARG_DATUM(0));

	if (AggCheckCallContext(fcinfo, NULL))
		state = PG_GETARG_ARRAYTYPE_P(0);
	else
		state = PG_GETARG_ARRAYTYPE_P_COPY(0);

	sd = StateDim(state);
	if (sd == 0)
		PG_RETURN_ARRAYTYPE_P(other);
	CheckSameDim(sd, od, "value");

	tf_osm_merge(sd, (double *) ARR_DATA_PTR(state), (double *) ARR_DATA_PTR(other));
	PG_RETURN_ARRAYTYPE_P(state);
}

PG_FUNCTION_INFO_V1(softmax_weighted_sum_final);
Datum
softmax_weighted_sum_final(PG_FUNCTION_ARGS)
{
	ArrayType  *state = PG_GETARG_ARRAYTYPE_P(0);
	int			d = StateDim(state);
	ArrayType  *result;

	/* no rows (or only NULL ones): NULL, like sum() */
	if (d == 0)
		PG_RETURN_NULL();

	result = NewFloat4Array(-1, d);
	tf_osm_result(d, (float *) ARR_DATA_PTR(result), (double *) ARR_DATA_PTR(state));
	PG_RETURN_ARRAYTYPE_P(result);
}
