/*
 * sql_tokenizer.c
 *		SQL entry points for tokenizers: import_tokenizer(), load_tokenizer(),
 *		drop_tokenizer(), tokenize(), tokens(), detokenize().
 */
#include "postgres.h"

#include <sys/stat.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "ext_tables.h"
#include "server_files.h"
#include "input_limit.h"
#include "tokenizer.h"
#include "tokenizer_share.h"
#include "weight_cache.h"

#define MAX_TOKENIZER_FILE ((Size) 256 * 1024 * 1024)

static inline void
CheckNotNull(FunctionCallInfo fcinfo, int arg, const char *name)
{
	if (PG_ARGISNULL(arg))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name)));
}

PG_FUNCTION_INFO_V1(import_tokenizer);
Datum
import_tokenizer(PG_FUNCTION_ARGS)
{
	char	   *name;
	char	   *path;
	char	   *model;
	Size		model_len;
	TokVocab	vocab = {NULL, NULL, 0};

	CheckNotNull(fcinfo, 0, "name");
	CheckNotNull(fcinfo, 1, "spm_path");
	CheckServerFileAccess("load_tokenizer()");

	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	path = text_to_cstring(PG_GETARG_TEXT_PP(1));
	{
		struct stat st;

		/* a directory: a Hugging Face tokenizer's files */
		if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		{
			char	   *json;
			Size		vlen;

			if (!PG_ARGISNULL(2))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("a tokenizer directory takes no vocab_path"),
						 errdetail("Its vocabulary is one of its files.")));
			ReadTokenizerDirectory(path, &model, &model_len, &json, &vlen);
			if (json != NULL)
				vocab = VocabFromFile("the vocabulary", json, vlen);
			PG_RETURN_INT32(StoreTokenizer(name, model, model_len, json ? &vocab : NULL));
		}
	}
	model = ReadServerFile(path, NULL, MAX_TOKENIZER_FILE, &model_len);

	if (!PG_ARGISNULL(2))
	{
		char	   *vpath = text_to_cstring(PG_GETARG_TEXT_PP(2));
		Size		vlen;
		char	   *json = ReadServerFile(vpath, NULL, MAX_TOKENIZER_FILE, &vlen);

		/* JSON files are UTF-8: jsonb in a UTF8 database, the file's bytes in others */
		vocab = VocabFromFile("the vocabulary file", json, vlen);
	}

	PG_RETURN_INT32(StoreTokenizer(name, model, model_len, &vocab));
}

PG_FUNCTION_INFO_V1(load_tokenizer);
Datum
load_tokenizer(PG_FUNCTION_ARGS)
{
	bytea	   *model;

	CheckNotNull(fcinfo, 0, "name");
	CheckNotNull(fcinfo, 1, "spm");
	model = PG_GETARG_BYTEA_PP(1);

	{
		TokVocab	vocab = {PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2), NULL, 0};

		PG_RETURN_INT32(StoreTokenizer(text_to_cstring(PG_GETARG_TEXT_PP(0)),
									   VARDATA_ANY(model), VARSIZE_ANY_EXHDR(model), &vocab));
	}
}

PG_FUNCTION_INFO_V1(drop_tokenizer);
Datum
drop_tokenizer(PG_FUNCTION_ARGS)
{
	char	   *query;
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1] = {PG_GETARG_DATUM(0)};
	bool		found;
	int			level;

	query = psprintf("DELETE FROM %s WHERE name = $1",
					 ExtensionTableName("transformer_tokenizers"));
	LockObjectName(EXT_LOCK_TOKENIZER, text_to_cstring(PG_GETARG_TEXT_PP(0)));
	RemoveSharedTokenizer(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	level = ExtSpiConnect();
	if (SPI_execute_with_args(query, 1, argtypes, args, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not drop tokenizer");
	found = SPI_processed > 0;
	ExtSpiFinish(level);
	PG_RETURN_BOOL(found);
}

/* Encode the text argument 0 with the tokenizer named by argument 1. */
static void
Encode(FunctionCallInfo fcinfo, Tokenizer **tok, SpmEncoding *enc)
{
	*tok = GetTokenizer(text_to_cstring(PG_GETARG_TEXT_PP(1)));
	EncodeText(*tok, InputTextArg(fcinfo, 0), enc);
}

PG_FUNCTION_INFO_V1(tokenize);
Datum
tokenize(PG_FUNCTION_ARGS)
{
	Tokenizer  *tok;
	SpmEncoding enc;
	Datum	   *ids;

	Encode(fcinfo, &tok, &enc);
	ids = palloc(sizeof(Datum) * (enc.ntokens + 1));
	for (int i = 0; i < enc.ntokens; i++)
		ids[i] = Int32GetDatum(TokenModelId(tok, &enc.tokens[i]));
	PG_RETURN_ARRAYTYPE_P(construct_array(ids, enc.ntokens, INT4OID, 4, true, TYPALIGN_INT));
}

PG_FUNCTION_INFO_V1(tokens);
Datum
tokens(PG_FUNCTION_ARGS)
{
	Tokenizer  *tok;
	SpmEncoding enc;
	Datum	   *pieces;

	Encode(fcinfo, &tok, &enc);
	pieces = palloc(sizeof(Datum) * (enc.ntokens + 1));
	for (int i = 0; i < enc.ntokens; i++)
		pieces[i] = PointerGetDatum(PieceToText(enc.tokens[i].str, enc.tokens[i].len));
	PG_RETURN_ARRAYTYPE_P(construct_array(pieces, enc.ntokens, TEXTOID, -1, false, TYPALIGN_INT));
}

PG_FUNCTION_INFO_V1(detokenize);
Datum
detokenize(PG_FUNCTION_ARGS)
{
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(0);
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	Tokenizer  *tok = GetTokenizer(name);
	char	   *text;
	Size		len;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("ids must be a 1-D array")));
	if (array_contains_nulls(arr))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("ids must not contain nulls")));
	text = DecodeIds(tok, name, ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr)),
					 (int32 *) ARR_DATA_PTR(arr), &len);
	PG_RETURN_TEXT_P(FromUtf8(text, len));
}
