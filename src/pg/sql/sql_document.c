/*
 * sql_document.c
 *		Documents: sentences() (ICU's sentence rules), translating a text
 *		of any length sentence by sentence, and the languages of a model.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "ext_tables.h"
#include "input_limit.h"
#include "tokenizer.h"
#include "translate.h"

#define MAX_LOCALE 100

/* A locale name of letters, digits and _-@=; only, or "" for the root rules. */
static void
CheckLocale(const char *locale)
{
	if (strlen(locale) > MAX_LOCALE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("locale name is too long"),
				 errdetail("Locale names have at most %d bytes.", MAX_LOCALE)));
	for (const char *c = locale; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
			  *c == '_' || *c == '-' || *c == '@' || *c == '=' || *c == ';'))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid locale name \"%s\"", locale),
					 errhint("Use a language tag such as de, en_US or pt-BR.")));
}

PG_FUNCTION_INFO_V1(sentences);
Datum
sentences(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *locale = "";
	char	   *s;
	Size		len;
	size_t	   *b;
	int			n;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	if (PG_ARGISNULL(0))
		return (Datum) 0;
	if (!PG_ARGISNULL(1))
	{
		locale = text_to_cstring(PG_GETARG_TEXT_PP(1));
		CheckLocale(locale);
	}
	s = ToUtf8(InputTextArg(fcinfo, 0), &len);
	b = SentenceBounds(s, len, locale, &n);
	for (int i = 0; i < n; i++)
	{
		Datum		value = PointerGetDatum(FromUtf8(s + b[i], b[i + 1] - b[i]));
		bool		null = false;

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &value, &null);
	}
	return (Datum) 0;
}

/* ------------------------------------------------------------ languages */

PG_FUNCTION_INFO_V1(set_model_languages);
Datum
set_model_languages(PG_FUNCTION_ARGS)
{
	char	   *model;
	Oid			types[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		args[3];
	char		nulls[3] = {' ', PG_ARGISNULL(1) ? 'n' : ' ', PG_ARGISNULL(2) ? 'n' : ' '};
	int			level;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model must not be null")));
	model = text_to_cstring(PG_GETARG_TEXT_PP(0));
	for (int i = 1; i <= 2; i++)
		if (!PG_ARGISNULL(i))
			CheckLocale(text_to_cstring(PG_GETARG_TEXT_PP(i)));
	RequireExtensionVersion020();
	args[0] = PG_GETARG_DATUM(0);
	args[1] = PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1);
	args[2] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	LockObjectName(EXT_LOCK_MODEL, model);
	level = ExtSpiConnect();
	if (SPI_execute_with_args(psprintf("UPDATE %s SET source_lang = $2, target_lang = $3 WHERE name = $1",
									   ExtensionTableName("transformer_models")),
							  3, types, args, nulls, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not set the languages of model \"%s\"", model);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", model)));
	ExtSpiFinish(level);
	PG_RETURN_VOID();
}

/* model_languages(name): code, token, token_id of each language */
PG_FUNCTION_INFO_V1(model_languages);
Datum
model_languages(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	CachedModel *cm;

	InitMaterializedSRF(fcinfo, 0);
	cm = GetModel(name);
	for (int i = 0; i < cm->nlangs; i++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = CStringGetTextDatum(cm->lang_code[i]);
		values[1] = CStringGetTextDatum(cm->lang_token[i]);
		values[2] = Int32GetDatum(cm->lang_id[i]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
