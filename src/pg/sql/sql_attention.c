/*
 * sql_attention.c
 *		SQL entry points self_attention(), attention_weights() and
 *		multihead_attention(): fetch arguments, check them, call the core.
 *
 * The work is split into blocks of query rows so that the score buffer stays
 * small and a cancel or statement_timeout is honoured between blocks.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"

#include "attention.h"
#include "pg_arrays.h"

/* Scores computed per block: 1M floats (4 MB) is a few ms of work. */
#define SCORES_PER_BLOCK (1 << 20)

static inline void
CheckSameCols(Matrix a, const char *aname, Matrix b, const char *bname)
{
	if (a.cols != b.cols)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("%s and %s must have the same number of columns", aname, bname),
				 errdetail("%s is %dx%d and %s is %dx%d.",
						   aname, a.rows, a.cols, bname, b.rows, b.cols)));
}

static inline void
CheckSameRows(Matrix a, const char *aname, Matrix b, const char *bname)
{
	if (a.rows != b.rows)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("%s and %s must have the same number of rows", aname, bname),
				 errdetail("%s is %dx%d and %s is %dx%d.",
						   aname, a.rows, a.cols, bname, b.rows, b.cols)));
}

static inline void
CheckHeads(int heads, Matrix q, Matrix v)
{
	if (heads < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("heads must be at least 1")));
	if (q.cols % heads != 0 || v.cols % heads != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("heads must divide the number of columns of q, k and v"),
				 errdetail("%d heads do not divide %d (q, k) and %d (v) columns.",
						   heads, q.cols, v.cols)));
}

static inline int
RowsPerBlock(int n, int m)
{
	int			rows = SCORES_PER_BLOCK / m;

	return rows < 1 ? 1 : (rows > n ? n : rows);
}

/*
 * out (n, v.cols) = attention of q over (k, v) with `heads` heads, computed
 * block by block of query rows.
 */
static ArrayType *
AttendBlocks(Matrix q, Matrix k, Matrix v, int heads, bool causal)
{
	ArrayType  *result = NewFloat4Array(q.rows, v.cols);
	float	   *out = (float *) ARR_DATA_PTR(result);
	int			block = RowsPerBlock(q.rows, k.rows);
	float	   *scratch;

	CheckFloatCount((double) block * k.rows, "attention score buffer");
	scratch = palloc((Size) block * k.rows * sizeof(float));

	for (int r = 0; r < q.rows; r += block)
	{
		int			nb = Min(block, q.rows - r);
		AttnMask	mask = {.causal = causal,.q_pos = r,.key_pad = NULL};

		CHECK_FOR_INTERRUPTS();
		tf_multihead_attention(nb, k.rows, q.cols, v.cols, heads,
							   out + (size_t) r * v.cols, scratch,
							   q.data + (size_t) r * q.cols, k.data, v.data,
							   &mask);
	}
	pfree(scratch);
	return result;
}

PG_FUNCTION_INFO_V1(self_attention);
Datum
self_attention(PG_FUNCTION_ARGS)
{
	Matrix		q = ArrayGetMatrix(PG_GETARG_ARRAYTYPE_P(0), "q");
	Matrix		k = ArrayGetMatrix(PG_GETARG_ARRAYTYPE_P(1), "k");
	Matrix		v = ArrayGetMatrix(PG_GETARG_ARRAYTYPE_P(2), "v");
	bool		causal = PG_GETARG_BOOL(3);

	CheckSameCols(q, "q", k, "k");
	CheckSameRows(k, "k", v, "v");

	PG_RETURN_ARRAYTYPE_P(AttendBlocks(q, k, v, 1, causal));
}

PG_FUNCTION_INFO_V1(multihead_attention);
Datum
multihead_attention(PG_FUNCTION_ARGS)
{
	Matrix		q = ArrayGetMatrix(PG_GETARG_ARRAYTYPE_P(0), "q");
	Matrix		k = ArrayGetMatrix(PG_GETARG_ARRAYTYPE_P(1), "k");
	Matrix		v = ArrayGetMatrix(PG_GETARG_ARRAYTYPE_P(2), "v");
	int32		heads = PG_GETARG_INT32(3);
	bool		causal = PG_GETARG_BOOL(4);

	CheckSameCols(q, "q", k, "k");
	CheckSameRows(k, "k", v, "v");
	CheckHeads(heads, q, v);

	PG_RETURN_ARRAYTYPE_P(AttendBlocks(q, k, v, heads, causal));
}

PG_FUNCTION_INFO_V1(attention_weights);
Datum
attention_weights(PG_FUNCTION_ARGS)
{
	Matrix		q = ArrayGetMatrix(PG_GETARG_ARRAYTYPE_P(0), "q");
	Matrix		k = ArrayGetMatrix(PG_GETARG_ARRAYTYPE_P(1), "k");
	bool		causal = PG_GETARG_BOOL(2);
	ArrayType  *result;
	float	   *w;
	int			block;

	CheckSameCols(q, "q", k, "k");

	/* n × m may be far larger than the inputs: refused before allocating */
	CheckFloatCount((double) q.rows * k.rows, "attention weight matrix");
	result = NewFloat4Array(q.rows, k.rows);
	w = (float *) ARR_DATA_PTR(result);
	block = RowsPerBlock(q.rows, k.rows);

	for (int r = 0; r < q.rows; r += block)
	{
		int			nb = Min(block, q.rows - r);
		AttnMask	mask = {.causal = causal,.q_pos = r,.key_pad = NULL};

		CHECK_FOR_INTERRUPTS();
		tf_attention_weights(nb, k.rows, q.cols, w + (size_t) r * k.rows,
							 q.data + (size_t) r * q.cols, q.cols,
							 k.data, k.cols, &mask);
	}

	PG_RETURN_ARRAYTYPE_P(result);
}
