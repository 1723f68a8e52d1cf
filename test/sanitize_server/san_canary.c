/*
 * Two deliberate bugs, built and loaded like the extension, so that
 * test/sanitize_server/run.sh can show that the sanitizers report from
 * inside a backend before it counts reports: a read past a malloc'd block
 * (ASan) and a shift past the width of int (UBSan).  Not part of the extension.
 */
#include "postgres.h"
#include "fmgr.h"

#include <stdlib.h>

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(san_canary_heap);
PG_FUNCTION_INFO_V1(san_canary_ub);

Datum
san_canary_heap(PG_FUNCTION_ARGS)
{
	int32		n = PG_GETARG_INT32(0);
	volatile int32 *p = malloc(sizeof(int32) * (n > 0 ? n : 1));
	int32		v;

	for (int32 i = 0; i < n; i++)
		p[i] = i;
	v = p[n];					/* one past the end */
	free((void *) p);
	PG_RETURN_INT32(v);
}

Datum
san_canary_ub(PG_FUNCTION_ARGS)
{
	int32		shift = PG_GETARG_INT32(0);
	volatile int32 one = 1;

	PG_RETURN_INT32(one << shift);	/* undefined for shift >= 32 */
}
