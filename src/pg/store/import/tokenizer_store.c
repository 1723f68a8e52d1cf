/*
 * tokenizer_store.c
 *		A tokenizer checked and stored as a row of transformer_tokenizers
 *		(import_tokenizer(), load_tokenizer(), and a model's import), its
 *		shared file removed.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "ext_tables.h"
#include "tokenizer.h"
#include "tokenizer_share.h"

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

/* Check the model and vocabulary, then insert or replace the row. */
int32
StoreTokenizer(const char *name, const char *model, Size model_len, const TokVocab *vocab)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "tokenizer check",
											  ALLOCSET_DEFAULT_SIZES);
	Tokenizer	t;
	int32		npieces;
	char	   *query;
	Oid			argtypes[4] = {TEXTOID, BYTEAOID, JSONBOID, BYTEAOID};
	Datum		args[4];
	char		nulls[4] = {' ', ' ', vocab && vocab->jsonb ? ' ' : 'n', vocab && vocab->json ? ' ' : 'n'};
	bytea	   *bytes;
	bool		has_vocab_json = ExtensionTableHasColumn("transformer_tokenizers", "vocab_json");
	int			level;

	CheckName(name);
	memset(&t, 0, sizeof(t));
	t.cxt = cxt;
	BuildTokenizer(&t, model, model_len, vocab);
	npieces = t.wp ? t.wp->ntokens : t.model->npieces;
	MemoryContextDelete(cxt);

	bytes = palloc(VARHDRSZ + model_len);
	SET_VARSIZE(bytes, VARHDRSZ + model_len);
	memcpy(VARDATA(bytes), model, model_len);
	args[0] = CStringGetTextDatum(name);
	args[1] = PointerGetDatum(bytes);
	args[2] = vocab && vocab->jsonb ? JsonbPGetDatum(vocab->jsonb) : (Datum) 0;
	args[3] = (Datum) 0;
	if (vocab && vocab->json)
	{
		bytea	   *vb = palloc(VARHDRSZ + vocab->json_len);

		if (!has_vocab_json)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("extension transformer must be updated to version 0.4.0"),
					 errdetail("The vocabulary cannot be stored as jsonb in encoding \"%s\", and the tables lack vocab_json.",
							   GetDatabaseEncodingName()),
					 errhint("Run ALTER EXTENSION transformer UPDATE.")));
		SET_VARSIZE(vb, VARHDRSZ + vocab->json_len);
		memcpy(VARDATA(vb), vocab->json, vocab->json_len);
		args[3] = PointerGetDatum(vb);
	}

	/* a replaced row gets a new file_id (0.4.0's tables): never its old files' name */
	if (has_vocab_json)
		query = psprintf("INSERT INTO %s AS t (name, model, vocab, vocab_json) VALUES ($1, $2, $3, $4) "
						 "ON CONFLICT (name) DO UPDATE SET model = EXCLUDED.model, "
						 "vocab = EXCLUDED.vocab, vocab_json = EXCLUDED.vocab_json, created = EXCLUDED.created, "
						 "file_id = EXCLUDED.file_id",
						 ExtensionTableName("transformer_tokenizers"));
	else
		query = psprintf("INSERT INTO %s AS t (name, model, vocab) VALUES ($1, $2, $3) "
						 "ON CONFLICT (name) DO UPDATE SET model = EXCLUDED.model, "
						 "vocab = EXCLUDED.vocab, created = EXCLUDED.created",
						 ExtensionTableName("transformer_tokenizers"));
	LockObjectName(EXT_LOCK_TOKENIZER, name);
	RemoveSharedTokenizer(name);
	level = ExtSpiConnect();
	if (SPI_execute_with_args(query, has_vocab_json ? 4 : 3, argtypes, args, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not store tokenizer \"%s\"", name);
	ExtSpiFinish(level);
	return npieces;
}
