/*
 * model_dir.c
 *		A model directory's files and the JSON in them, as every reader of
 *		a directory (model_import.c, language_tokens.c, encoder_files.c)
 *		and the rows (model_rows.c) need them: a file the layout needs or
 *		may have, read within the directory and bounded; a JSON file parsed
 *		as jsonb (UTF-8 checked); a key, a flag, a short string, a number
 *		or a token of an object.  The bottom of the import's files.
 */
#include "postgres.h"

#include <sys/stat.h>

#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "model_import.h"
#include "server_files.h"

#define MAX_TEXT_FILE ((Size) 256 * 1024 * 1024)

Jsonb *
ParseJsonText(const char *what, const char *s, Size len)
{
	char	   *conv;

	/* JSON files are UTF-8 */
	if (!pg_verify_mbstr(PG_UTF8, s, (int) len, true))
		ereport(ERROR,
				(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
				 errmsg("%s is not valid UTF-8", what)));
	conv = pg_any_to_server(s, (int) len, PG_UTF8);
	if (conv == s)
		conv = pnstrdup(s, len);
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(conv)));
}

/* A string value of a JSON object, if it is one of at most 32 bytes; else NULL. */
char *
JsonStringKey(Jsonb *j, const char *key)
{
	JsonbValue *v;

	if (!JB_ROOT_IS_OBJECT(j) || JB_ROOT_IS_SCALAR(j))
		return NULL;
	v = getKeyJsonValueFromContainer(&j->root, key, strlen(key), NULL);
	if (v == NULL || v->type != jbvString || v->val.string.len == 0 || v->val.string.len > 32)
		return NULL;
	return pnstrdup(v->val.string.val, v->val.string.len);
}

static char *
ModelFilePath(const char *dir, const char *file)
{
	return psprintf("%s/%s", dir, file);
}

bool
HasFile(const char *dir, const char *file)
{
	struct stat st;
	char	   *path = ModelFilePath(dir, file);

	if (stat(path, &st) == 0)
		return true;
	if (errno != ENOENT)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not stat file \"%s\": %m", path)));
	return false;
}

/* A file the layout needs; ERROR naming it and what it is for if it is missing. */
char *
NeededFile(const char *dir, const char *file, const char *what, Size *len)
{
	if (!HasFile(dir, file))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FILE),
				 errmsg("model directory \"%s\" lacks %s", dir, file),
				 errdetail("It is %s.", what)));
	return ReadServerFile(ModelFilePath(dir, file), dir, MAX_TEXT_FILE, len);
}

char *
OptionalFile(const char *dir, const char *file, Size *len)
{
	*len = 0;
	if (!HasFile(dir, file))
		return NULL;
	return ReadServerFile(ModelFilePath(dir, file), dir, MAX_TEXT_FILE, len);
}

/* A key of a JSON object, or NULL. */
JsonbValue *
JsonKey(Jsonb *j, const char *key)
{
	if (j == NULL || !JB_ROOT_IS_OBJECT(j) || JB_ROOT_IS_SCALAR(j))
		return NULL;
	return getKeyJsonValueFromContainer(&j->root, key, strlen(key), NULL);
}

bool
JsonTrue(Jsonb *j, const char *key)
{
	JsonbValue *v = JsonKey(j, key);

	return v != NULL && v->type == jbvBool && v->val.boolean;
}

char *
JsonTokenContent(JsonbValue *v)
{
	if (v->type == jbvString)
		return pnstrdup(v->val.string.val, v->val.string.len);
	if (v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data))
	{
		JsonbValue *c = getKeyJsonValueFromContainer(v->val.binary.data, "content", 7, NULL);

		if (c != NULL && c->type == jbvString)
			return pnstrdup(c->val.string.val, c->val.string.len);
	}
	return NULL;
}

int
JsonInt(JsonbValue *v, int dflt)
{
	if (v == NULL || v->type != jbvNumeric)
		return dflt;
	return DatumGetInt32(DirectFunctionCall1(numeric_int4, NumericGetDatum(v->val.numeric)));
}
