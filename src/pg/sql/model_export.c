/*
 * model_export.c
 *		export_model(): a model's files written back into a server
 *		directory, byte for byte as imported (model_import.c reads them).
 */
#include "postgres.h"

#include <limits.h>
#include <math.h>
#include <sys/stat.h>

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "ext_tables.h"
#include "model_store.h"
#include "pg_arrays.h"
#include "safetensors.h"
#include "server_files.h"
#include "translate.h"
#include "tokenizer.h"
#include "tokenizer_share.h"
#include "weight_cache.h"

static void
WriteFile(const char *dir, const char *file, const char *data, Size len, bool append)
{
	char	   *path = psprintf("%s/%s", dir, file);
	FILE	   *f;
	mode_t		oumask;

	/* as COPY TO: files readable by others, never writable by them */
	oumask = umask(S_IWGRP | S_IWOTH);
	PG_TRY();
	{
		f = AllocateFile(path, append ? PG_BINARY_A : PG_BINARY_W);
	}
	PG_FINALLY();
	{
		umask(oumask);
	}
	PG_END_TRY();
	if (f == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\" for writing: %m", path)));
	if (len > 0 && fwrite(data, 1, len, f) != len)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", path)));
	if (FreeFile(f) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not close file \"%s\": %m", path)));
}

static bytea *
spi_bytea(int row, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, &isnull);

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("a stored file of the model is null")));
	return DatumGetByteaPP(d);
}

/*
 * export_model()'s directory, as COPY TO takes a file name: an absolute
 * path, and (canonicalized, symbolic links resolved as far as the path
 * exists) never inside the data directory.
 */
static char *
CheckExportDirectory(const char *dir)
{
	char	   *path = pstrdup(dir);
	char		real[PATH_MAX];	/* realpath() writes up to PATH_MAX */
	char	   *parent;

	if (!is_absolute_path(path))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("relative path not allowed for export_model"),
				 errhint("Give an absolute directory path on the server.")));
	canonicalize_path(path);
	/* the deepest part of the path that exists, with links resolved */
	parent = pstrdup(path);
	while (realpath(parent, real) == NULL)
	{
		if (strcmp(parent, "/") == 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not resolve path \"%s\": %m", path)));
		get_parent_directory(parent);
		if (parent[0] == '\0')
			strcpy(parent, "/");
	}
	if (path_is_prefix_of_path(DataDir, path) || path_is_prefix_of_path(DataDir, real) ||
		strcmp(DataDir, path) == 0 || strcmp(DataDir, real) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("cannot export a model into the data directory"),
				 errdetail("\"%s\" is inside \"%s\".", path, DataDir)));
	return path;
}

/*
 * An encoder's files as sentence-transformers lays them out, for
 * import_model() to read back: the tokenizer (vocab.txt with its settings
 * in tokenizer_config.json, or sentencepiece.bpe.model), modules.json,
 * 1_Pooling/config.json and sentence_bert_config.json from the embedding
 * settings.
 */
static void
WriteEncoderFiles(const char *dir, bytea *tok, const char *embedding)
{
	const char *t = VARDATA_ANY(tok);
	Size		len = VARSIZE_ANY_EXHDR(tok);
	Jsonb	   *e = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(embedding)));
	JsonbValue *v;
	char	   *pooling = "mean";
	bool		normalize = false;
	int			max_len = 512;
	StringInfoData j;

	v = getKeyJsonValueFromContainer(&e->root, "pooling", 7, NULL);
	if (v && v->type == jbvString)
		pooling = pnstrdup(v->val.string.val, v->val.string.len);
	v = getKeyJsonValueFromContainer(&e->root, "normalize", 9, NULL);
	normalize = v && v->type == jbvBool && v->val.boolean;
	v = getKeyJsonValueFromContainer(&e->root, "max_seq_length", 14, NULL);
	if (v && v->type == jbvNumeric)
		max_len = DatumGetInt32(DirectFunctionCall1(numeric_int4, NumericGetDatum(v->val.numeric)));

	if (IsWordPiece(t, len))
	{
		/* the options line: tokenizer.json's names; tokenizer_config.json's are BertTokenizer's */
		const char *opts = t + strlen(WORDPIECE_MAGIC);
		const char *nl = memchr(opts, '\n', len - (opts - t));
		Jsonb	   *o;
		JsonbValue *ov;

		if (nl == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("stored WordPiece tokenizer is damaged")));
		o = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(pnstrdup(opts, nl - opts))));
		WriteFile(dir, "vocab.txt", nl + 1, len - (nl + 1 - t), false);
		initStringInfo(&j);
		appendStringInfoString(&j, "{\n  \"tokenizer_class\": \"BertTokenizer\",\n  \"do_lower_case\": ");
		ov = getKeyJsonValueFromContainer(&o->root, "lowercase", 9, NULL);
		appendStringInfoString(&j, ov && ov->type == jbvBool && !ov->val.boolean ? "false" : "true");
		appendStringInfoString(&j, ",\n  \"strip_accents\": ");
		ov = getKeyJsonValueFromContainer(&o->root, "strip_accents", 13, NULL);
		appendStringInfoString(&j, ov == NULL || ov->type != jbvBool ? "null" : ov->val.boolean ? "true" : "false");
		appendStringInfoString(&j, ",\n  \"tokenize_chinese_chars\": ");
		ov = getKeyJsonValueFromContainer(&o->root, "handle_chinese_chars", 20, NULL);
		appendStringInfoString(&j, ov && ov->type == jbvBool && !ov->val.boolean ? "false" : "true");
		ov = getKeyJsonValueFromContainer(&o->root, "unk_token", 9, NULL);
		if (ov && ov->type == jbvString)
		{
			appendStringInfoString(&j, ",\n  \"unk_token\": ");
			escape_json(&j, pnstrdup(ov->val.string.val, ov->val.string.len));
		}
		appendStringInfo(&j, ",\n  \"model_max_length\": %d\n}\n", max_len);
		WriteFile(dir, "tokenizer_config.json", j.data, j.len, false);
	}
	else
	{
		WriteFile(dir, "sentencepiece.bpe.model", t, len, false);
		initStringInfo(&j);
		appendStringInfo(&j, "{\n  \"tokenizer_class\": \"XLMRobertaTokenizer\",\n  \"model_max_length\": %d\n}\n", max_len);
		WriteFile(dir, "tokenizer_config.json", j.data, j.len, false);
	}

	initStringInfo(&j);
	appendStringInfoString(&j, "[\n  {\"idx\": 0, \"name\": \"0\", \"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"},\n"
						   "  {\"idx\": 1, \"name\": \"1\", \"path\": \"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"}");
	if (normalize)
		appendStringInfoString(&j, ",\n  {\"idx\": 2, \"name\": \"2\", \"path\": \"2_Normalize\", \"type\": \"sentence_transformers.models.Normalize\"}");
	appendStringInfoString(&j, "\n]\n");
	WriteFile(dir, "modules.json", j.data, j.len, false);
	{
		char	   *pdir = psprintf("%s/1_Pooling", dir);

		if (mkdir(pdir, S_IRWXU | S_IRGRP | S_IXGRP | S_IROTH | S_IXOTH) != 0 && errno != EEXIST)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not create directory \"%s\": %m", pdir)));
		initStringInfo(&j);
		appendStringInfo(&j, "{\n  \"pooling_mode_cls_token\": %s,\n  \"pooling_mode_mean_tokens\": %s,\n"
						 "  \"pooling_mode_max_tokens\": %s,\n  \"pooling_mode_mean_sqrt_len_tokens\": %s\n}\n",
						 strcmp(pooling, "cls") == 0 ? "true" : "false", strcmp(pooling, "mean") == 0 ? "true" : "false",
						 strcmp(pooling, "max") == 0 ? "true" : "false",
						 strcmp(pooling, "mean_sqrt_len") == 0 ? "true" : "false");
		WriteFile(pdir, "config.json", j.data, j.len, false);
	}
	initStringInfo(&j);
	appendStringInfo(&j, "{\n  \"max_seq_length\": %d\n}\n", max_len);
	WriteFile(dir, "sentence_bert_config.json", j.data, j.len, false);
}

PG_FUNCTION_INFO_V1(export_model);
Datum
export_model(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *dir;
	Oid			types[1] = {TEXTOID};
	Datum		args[1] = {CStringGetTextDatum(name)};
	bytea	   *b;
	int			n;
	int			level;

	if (!superuser() && !has_privs_of_role(GetUserId(), ROLE_PG_WRITE_SERVER_FILES))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to write server files"),
				 errdetail("Only superusers and roles with the privileges of pg_write_server_files may write files on the server.")));
	dir = CheckExportDirectory(text_to_cstring(PG_GETARG_TEXT_PP(1)));

	level = ExtSpiConnect();
	SPI_execute_with_args(psprintf("SELECT m.config_json, m.vocab_json, m.safetensors_header, s.model, t.model, %s, %s "
								   "FROM %s m JOIN %s s ON s.name = m.source_tokenizer "
								   "JOIN %s t ON t.name = m.target_tokenizer WHERE m.name = $1",
								   ModelsHaveGenerationConfig() ? "m.generation_config_json, m.source_lang, m.target_lang" :
								   "NULL::bytea, NULL::text, NULL::text",
								   ExtensionTableHasColumn("transformer_models", "embedding") ?
								   "m.embedding::text" : "NULL::text",
								   ExtensionTableName("transformer_models"),
								   ExtensionTableName("transformer_tokenizers"),
								   ExtensionTableName("transformer_tokenizers")),
						  1, types, args, NULL, true, 1);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", name)));
	/* readable by all, as the files in it (COPY TO's files are): not the data directory's 0700 */
	if (mkdir(dir, S_IRWXU | S_IRGRP | S_IXGRP | S_IROTH | S_IXOTH) != 0 && errno != EEXIST)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create directory \"%s\": %m", dir)));
	b = spi_bytea(0, 1);
	WriteFile(dir, "config.json", VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b), false);
	{
		char	   *embedding = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 9);

		if (embedding != NULL)
		{
			WriteEncoderFiles(dir, spi_bytea(0, 4), embedding);
			goto weights;
		}
	}
	b = spi_bytea(0, 2);
	WriteFile(dir, "vocab.json", VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b), false);
	b = spi_bytea(0, 4);
	WriteFile(dir, "source.spm", VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b), false);
	b = spi_bytea(0, 5);
	WriteFile(dir, "target.spm", VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b), false);
	{
		bool		isnull;
		Datum		g = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 6, &isnull);

		bool		null_src,
					null_tgt;
		Datum		src = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 7, &null_src);
		Datum		tgt = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 8, &null_tgt);

		if (!isnull)
			WriteFile(dir, "generation_config.json", VARDATA_ANY(DatumGetByteaPP(g)),
					  VARSIZE_ANY_EXHDR(DatumGetByteaPP(g)), false);
		/* the languages, as import_model() reads them */
		if (!null_src || !null_tgt)
		{
			StringInfoData j;

			initStringInfo(&j);
			appendStringInfoString(&j, "{\n  \"source_lang\": ");
			if (null_src)
				appendStringInfoString(&j, "null");
			else
				escape_json(&j, TextDatumGetCString(src));
			appendStringInfoString(&j, ",\n  \"target_lang\": ");
			if (null_tgt)
				appendStringInfoString(&j, "null");
			else
				escape_json(&j, TextDatumGetCString(tgt));
			appendStringInfoString(&j, "\n}\n");
			WriteFile(dir, "tokenizer_config.json", j.data, j.len, false);
		}
	}
weights:
	b = spi_bytea(0, 3);
	WriteFile(dir, "model.safetensors", VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b), false);

	/* the tensors' bytes in file order, where the header put them */
	SPI_execute_with_args(psprintf("SELECT data, %s FROM %s WHERE model = $1 ORDER BY data_offset%s",
								   TensorsHaveParts() ? "part" : "0",
								   ExtensionTableName("transformer_tensors"),
								   TensorsHaveParts() ? ", part" : ""),
						  1, types, args, NULL, true, 0);
	n = 0;
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		CHECK_FOR_INTERRUPTS();
		b = spi_bytea(i, 1);
		WriteFile(dir, "model.safetensors", VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b), true);
		/* a tensor is counted once, by its first part */
		if (DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull)) == 0)
			n++;
	}
	ExtSpiFinish(level);
	PG_RETURN_INT32(n);
}

