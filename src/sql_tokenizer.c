/*
 * sql_tokenizer.c
 *		SQL entry points for tokenizers: import_tokenizer(), load_tokenizer(),
 *		drop_tokenizer(), tokenize(), tokens(), detokenize().
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "server_files.h"
#include "input_limit.h"
#include "tokenizer.h"
#include "weight_cache.h"

#define MAX_TOKENIZER_FILE ((Size) 256 * 1024 * 1024)

static void
CheckName(const char *name)
{
	if (name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tokenizer name must not be empty")));
	if (strlen(name) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("tokenizer name \"%s\" is too long", name),
				 errdetail("Names may have at most %d bytes.", NAMEDATALEN - 1)));
}

static inline void
CheckNotNull(FunctionCallInfo fcinfo, int arg, const char *name)
{
	if (PG_ARGISNULL(arg))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name)));
}

/* Text in the database encoding as UTF-8, which the tokenizer reads. */
char *
ToUtf8(text *t, Size *len)
{
	char	   *s = VARDATA_ANY(t);
	int			n = VARSIZE_ANY_EXHDR(t);
	char	   *u = pg_server_to_any(s, n, PG_UTF8);

	*len = (u == s) ? (Size) n : strlen(u);
	return u;
}

/* UTF-8 bytes as text in the database encoding. */
text *
FromUtf8(const char *s, Size len)
{
	char	   *conv = pg_any_to_server(s, (int) len, PG_UTF8);

	return cstring_to_text_with_len(conv, conv == s ? (int) len : (int) strlen(conv));
}

/* Check the model and vocabulary, then insert or replace the row. */
int32
StoreTokenizer(const char *name, const char *model, Size model_len, Jsonb *vocab)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "tokenizer check",
											  ALLOCSET_DEFAULT_SIZES);
	Tokenizer	t;
	int32		npieces;
	char	   *query;
	Oid			argtypes[3] = {TEXTOID, BYTEAOID, JSONBOID};
	Datum		args[3];
	char		nulls[3] = {' ', ' ', vocab ? ' ' : 'n'};
	bytea	   *bytes;
	int			level;

	CheckName(name);
	memset(&t, 0, sizeof(t));
	t.cxt = cxt;
	BuildTokenizer(&t, model, model_len, vocab);
	npieces = t.model->npieces;
	MemoryContextDelete(cxt);

	bytes = palloc(VARHDRSZ + model_len);
	SET_VARSIZE(bytes, VARHDRSZ + model_len);
	memcpy(VARDATA(bytes), model, model_len);
	args[0] = CStringGetTextDatum(name);
	args[1] = PointerGetDatum(bytes);
	args[2] = vocab ? JsonbPGetDatum(vocab) : (Datum) 0;

	/* a replaced row gets a new file_id (0.4.0's tables): never its old files' name */
	query = psprintf("INSERT INTO %s AS t (name, model, vocab) VALUES ($1, $2, $3) "
					 "ON CONFLICT (name) DO UPDATE SET model = EXCLUDED.model, "
					 "vocab = EXCLUDED.vocab, created = EXCLUDED.created%s",
					 ExtensionTableName("transformer_tokenizers"),
					 strcmp(RowVersionSql("transformer_tokenizers"), "NULL::text") != 0 ?
					 ", file_id = EXCLUDED.file_id" : "");
	LockObjectName(EXT_LOCK_TOKENIZER, name);
	RemoveSharedTokenizer(name);
	level = ExtSpiConnect();
	if (SPI_execute_with_args(query, 3, argtypes, args, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not store tokenizer \"%s\"", name);
	ExtSpiFinish(level);
	return npieces;
}

PG_FUNCTION_INFO_V1(import_tokenizer);
Datum
import_tokenizer(PG_FUNCTION_ARGS)
{
	char	   *name;
	char	   *path;
	char	   *model;
	Size		model_len;
	Jsonb	   *vocab = NULL;

	CheckNotNull(fcinfo, 0, "name");
	CheckNotNull(fcinfo, 1, "spm_path");
	CheckServerFileAccess("load_tokenizer()");

	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	path = text_to_cstring(PG_GETARG_TEXT_PP(1));
	model = ReadServerFile(path, MAX_TOKENIZER_FILE, &model_len);

	if (!PG_ARGISNULL(2))
	{
		char	   *vpath = text_to_cstring(PG_GETARG_TEXT_PP(2));
		Size		vlen;
		char	   *json = ReadServerFile(vpath, MAX_TOKENIZER_FILE, &vlen);

		/* JSON files are UTF-8; parse them with PostgreSQL's own parser */
		pg_verify_mbstr(PG_UTF8, json, (int) vlen, false);
		json = pg_any_to_server(json, (int) vlen, PG_UTF8);
		vocab = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(json)));
	}

	PG_RETURN_INT32(StoreTokenizer(name, model, model_len, vocab));
}

PG_FUNCTION_INFO_V1(load_tokenizer);
Datum
load_tokenizer(PG_FUNCTION_ARGS)
{
	bytea	   *model;

	CheckNotNull(fcinfo, 0, "name");
	CheckNotNull(fcinfo, 1, "spm");
	model = PG_GETARG_BYTEA_PP(1);

	PG_RETURN_INT32(StoreTokenizer(text_to_cstring(PG_GETARG_TEXT_PP(0)),
								   VARDATA_ANY(model), VARSIZE_ANY_EXHDR(model),
								   PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2)));
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

void
EncodeText(Tokenizer *tok, text *input, SpmEncoding *enc)
{
	SpmAlloc	a = PgAllocator(CurrentMemoryContext);
	Size		len;
	char	   *s = ToUtf8(input, &len);

	if (!spm_encode(tok->model, s, len, &a, enc))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("input is too long to tokenize"),
				 errdetail("The normalized text would exceed %zu bytes.",
						   SPM_MAX_NORMALIZED_BYTES)));
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
		pieces[i] = PointerGetDatum(FromUtf8(enc.tokens[i].str, enc.tokens[i].len));
	PG_RETURN_ARRAYTYPE_P(construct_array(pieces, enc.ntokens, TEXTOID, -1, false, TYPALIGN_INT));
}

char *
DecodeIds(Tokenizer *tok, const char *name, int n, const int32 *ids, Size *len)
{
	SpmModel   *m = tok->model;
	SpmAlloc	a = PgAllocator(CurrentMemoryContext);
	const char **strs;
	uint32	   *lens;
	char	   *text;

	/* checked before the arrays below are allocated (8 and 4 bytes an id) */
	if ((Size) n > SPM_MAX_NORMALIZED_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many ids to decode"),
				 errdetail("There are %d; the limit is %zu.", n, SPM_MAX_NORMALIZED_BYTES)));
	strs = palloc(sizeof(char *) * (n + 1));
	lens = palloc(sizeof(uint32) * (n + 1));
	for (int i = 0; i < n; i++)
	{
		int32		id = ids[i];
		bool		valid = tok->has_vocab ?
			(id >= 0 && id < tok->nmodel && tok->model_piece[id] != NULL) :
			(id >= 0 && id < m->npieces);

		if ((i & 65535) == 0)
			CHECK_FOR_INTERRUPTS();
		if (!valid)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("id %d is not in the vocabulary of tokenizer \"%s\"", id, name),
					 errdetail("Valid ids are 0 to %d.",
							   (tok->has_vocab ? tok->nmodel : m->npieces) - 1)));
		if (tok->has_vocab)
		{
			strs[i] = tok->model_piece[id];
			lens[i] = tok->model_piece_len[id];
		}
		else
		{
			strs[i] = m->pieces[id].str;
			lens[i] = m->pieces[id].len;
		}
	}

	text = spm_decode_pieces(m, n, strs, lens, &a, len);
	if (text == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("decoded text would be too long"),
				 errdetail("The limit is %zu bytes.", SPM_MAX_NORMALIZED_BYTES)));
	return text;
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
