/*
 * sql_metrics.c
 *		The aggregates bleu(hypothesis, reference) and chrf(hypothesis,
 *		reference): per-row statistics summed in a flat double precision[]
 *		state (so partial states combine), the score at the end (metrics.c).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "metrics.h"
#include "input_limit.h"
#include "tokenizer.h"

/* The state: a 1-D float8[] of n finite statistics; ERROR otherwise. */
static double *
CheckState(ArrayType *a, int n)
{
	if (ARR_NDIM(a) != 1 || ARR_DIMS(a)[0] != n || ARR_ELEMTYPE(a) != FLOAT8OID || ARR_HASNULL(a))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("invalid metric state"),
				 errdetail("It must be a one-dimensional double precision[] of %d elements without nulls.", n)));
	return (double *) ARR_DATA_PTR(a);
}

static ArrayType *
NewState(const double *v, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * n);

	for (int i = 0; i < n; i++)
		d[i] = Float8GetDatum(v[i]);
	return construct_array(d, n, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
}

typedef void (*AddStats) (double *stats, const char *hyp, size_t hyp_len, const char *ref, size_t ref_len,
						  const SpmAlloc *a);

static Datum
Accumulate(FunctionCallInfo fcinfo, int n, AddStats add)
{
	double		stats[TF_CHRF_STATS];
	Size		hl,
				rl;
	char	   *hyp;
	char	   *ref;
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "metric", ALLOCSET_DEFAULT_SIZES);
	SpmAlloc	a = PgAllocator(cxt);
	ArrayType  *out;

	memcpy(stats, CheckState(PG_GETARG_ARRAYTYPE_P(0), n), sizeof(double) * n);
	hyp = ToUtf8(InputTextArg(fcinfo, 1), &hl);
	ref = ToUtf8(InputTextArg(fcinfo, 2), &rl);
	add(stats, hyp, hl, ref, rl, &a);
	MemoryContextDelete(cxt);
	out = NewState(stats, n);
	PG_RETURN_ARRAYTYPE_P(out);
}

PG_FUNCTION_INFO_V1(bleu_accum);
Datum
bleu_accum(PG_FUNCTION_ARGS)
{
	return Accumulate(fcinfo, TF_BLEU_STATS, tf_bleu_add);
}

PG_FUNCTION_INFO_V1(chrf_accum);
Datum
chrf_accum(PG_FUNCTION_ARGS)
{
	return Accumulate(fcinfo, TF_CHRF_STATS, tf_chrf_add);
}

/* The sum of two partial states of the same metric. */
PG_FUNCTION_INFO_V1(metric_combine);
Datum
metric_combine(PG_FUNCTION_ARGS)
{
	ArrayType  *a = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType  *b = PG_GETARG_ARRAYTYPE_P(1);
	int			n = ARR_NDIM(a) == 1 ? ARR_DIMS(a)[0] : -1;
	double		sum[TF_CHRF_STATS];
	const double *x;
	const double *y;

	if (n != TF_BLEU_STATS && n != TF_CHRF_STATS)
		CheckState(a, TF_BLEU_STATS);
	x = CheckState(a, n);
	y = CheckState(b, n);
	for (int i = 0; i < n; i++)
		sum[i] = x[i] + y[i];
	PG_RETURN_ARRAYTYPE_P(NewState(sum, n));
}

PG_FUNCTION_INFO_V1(bleu_final);
Datum
bleu_final(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(tf_bleu_score(CheckState(PG_GETARG_ARRAYTYPE_P(0), TF_BLEU_STATS)));
}

PG_FUNCTION_INFO_V1(chrf_final);
Datum
chrf_final(PG_FUNCTION_ARGS)
{
	PG_RETURN_FLOAT8(tf_chrf_score(CheckState(PG_GETARG_ARRAYTYPE_P(0), TF_CHRF_STATS)));
}
