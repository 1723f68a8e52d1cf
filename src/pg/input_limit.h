/*
 * input_limit.h
 *		transformer.max_input_bytes: the largest text a function takes,
 *		checked before the value is detoasted.
 */
#ifndef INPUT_LIMIT_H
#define INPUT_LIMIT_H

#include "postgres.h"

#include "fmgr.h"

extern int	transformer_max_input_bytes;

/* Define the setting; from _PG_init. */
extern void InitInputLimit(void);

/*
 * Argument argno as text, after an ERROR 54000 (program_limit_exceeded) if
 * its size is above transformer.max_input_bytes.  The size is the value's
 * own, read from its TOAST pointer: a 1 GB value is refused without being
 * read.
 */
extern text *InputTextArg(FunctionCallInfo fcinfo, int argno);

/* The same for a value already at hand (a datum of an aggregate's row, say). */
extern void CheckInputSize(Datum value);

#endif							/* INPUT_LIMIT_H */
