/*
 * input_limit.c
 *		The settings of user text (and transformer.invalid_utf8, read by
 *		ToUtf8).  transformer.max_input_bytes: every function that takes a user's text
 *		refuses more than this many bytes, so that no role can make a
 *		backend run for hours or take gigabytes (issue 23).  The size is
 *		checked on the datum as stored, before detoasting.
 */
#include "postgres.h"

#include <limits.h>

#include "access/detoast.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "input_limit.h"
#include "tokenizer.h"

/* 1 MB: above any document people translate in one call (a minute of translate()), far below harm */
int			transformer_max_input_bytes = 1024 * 1024;

/* transformer.invalid_utf8 (read by ToUtf8, sql_tokenizer.c) */
int			transformer_invalid_utf8 = INVALID_UTF8_ERROR;

static const struct config_enum_entry invalid_utf8_options[] = {
	{"error", INVALID_UTF8_ERROR, false},
	{"replace", INVALID_UTF8_REPLACE, false},
	{NULL, 0, false}
};

void
InitInputLimit(void)
{
	DefineCustomEnumVariable("transformer.invalid_utf8",
							 "Sets what text that is not valid UTF-8 gets in a SQL_ASCII database.",
							 "error: an error naming the byte; replace: each invalid byte is read as U+FFFD.",
							 &transformer_invalid_utf8,
							 INVALID_UTF8_ERROR,
							 invalid_utf8_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("transformer.max_input_bytes",
							"Sets the largest text, in bytes, a transformer function accepts.",
							"Larger inputs raise an error before they are read.  Only superusers can change it.",
							&transformer_max_input_bytes,
							1024 * 1024,
							1,
							INT_MAX,
							PGC_SUSET,
							GUC_UNIT_BYTE,
							NULL, NULL, NULL);
}

void
CheckInputSize(Datum value)
{
	Size		size = toast_raw_datum_size(value) - VARHDRSZ;

	if (size > (Size) transformer_max_input_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("input of %zu bytes exceeds transformer.max_input_bytes (%d bytes)",
						size, transformer_max_input_bytes),
				 errhint("Split the text, or ask a superuser to raise transformer.max_input_bytes.")));
}

text *
InputTextArg(FunctionCallInfo fcinfo, int argno)
{
	CheckInputSize(PG_GETARG_DATUM(argno));
	return PG_GETARG_TEXT_PP(argno);
}
