/*
 * model_files.c
 *		A model's files and rows: import_model() (a Hugging Face Marian
 *		directory: config.json, model.safetensors read a tensor at a time,
 *		the tokenizers, generation_config.json, tokenizer_config.json),
 *		load_model() (their bytes), drop_model(); export_model() is
 *		model_export.c's.
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

#include "ext_tables.h"
#include "model_store.h"
#include "pg_arrays.h"
#include "safetensors.h"
#include "server_files.h"
#include "translate.h"
#include "tokenizer_share.h"
#include "weight_cache.h"

#define MAX_MODEL_FILE ((Size) 4 * 1024 * 1024 * 1024 - 1)
#define MAX_TEXT_FILE ((Size) 256 * 1024 * 1024)
#define MAX_HEADER ((Size) 100 * 1024 * 1024)
/* a model's tokenizers are called "<model>/source" and "<model>/target" */
#define MAX_MODEL_NAME (NAMEDATALEN - 1 - 7)


void
CheckModelName(const char *name)
{
	if (name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model name must not be empty")));
	if (strlen(name) > MAX_MODEL_NAME)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("model name \"%s\" is too long", name),
				 errdetail("Names may have at most %d bytes.", MAX_MODEL_NAME)));
}

static Jsonb *
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
static char *
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

static uint64
le64(const unsigned char *p)
{
	uint64		v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static void
bad_safetensors(const char *fmt, const char *arg) pg_attribute_noreturn();

static void
bad_safetensors(const char *fmt, const char *arg)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid safetensors file"),
			 errdetail(fmt, arg)));
}

/*
 * Parse a safetensors header (hdr: the 8 length bytes, then hlen of JSON)
 * before data_len bytes of data, with the core's reader (safetensors.c);
 * then the checks rows read back from the tables get too.  Each tensor's
 * offset is set, its data is left to the caller.
 */
static int
ParseSafetensorsHeader(const char *hdr, Size hlen, Size data_len, StoredTensor **out)
{
	SpmAlloc	a = PgAllocator(CurrentMemoryContext);
	TfSafetensor *st;
	StoredTensor *tensors;
	char		err[512];
	int			n = tf_safetensors_header(hdr + 8, hlen, data_len, &a, &st, err, sizeof(err));

	if (n < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid safetensors file"),
				 errdetail_internal("%s", err)));
	tensors = palloc0(sizeof(StoredTensor) * (n + 1));
	for (int i = 0; i < n; i++)
	{
		StoredTensor *t = &tensors[i];
		const char *defect;

		t->name = st[i].name;
		strlcpy(t->dtype, st[i].dtype, sizeof(t->dtype));
		if (strcmp(t->dtype, "F32") != 0 && strcmp(t->dtype, "F16") != 0 && strcmp(t->dtype, "BF16") != 0 &&
			strcmp(t->dtype, "I8") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("tensor \"%s\" has the unsupported dtype \"%s\"", t->name, st[i].dtype),
					 errhint("Supported are F32, F16, BF16 and I8.")));
		t->ndim = st[i].ndim;
		memcpy(t->shape, st[i].shape, sizeof(int64) * t->ndim);
		t->offset = (int64) st[i].begin;
		t->nbytes = (Size) (st[i].end - st[i].begin);
		/* the same checks as rows read back from the tables */
		defect = TensorDefect(t);
		if (defect != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid safetensors file"),
					 errdetail_internal("%s", defect)));
		if (t->nbytes > MaxAllocSize - VARHDRSZ)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("tensor \"%s\" is too large to store", t->name),
					 errdetail("It has %zu bytes; a value may have at most %zu.",
							   (size_t) t->nbytes, (size_t) (MaxAllocSize - VARHDRSZ))));
	}
	*out = tensors;
	return n;
}

/* The header length of a safetensors file that has len bytes; ERROR if it does not fit. */
static Size
SafetensorsHeaderLength(const char *first8, Size len)
{
	uint64		hlen;

	if (len < 8)
		bad_safetensors("The file has %s bytes, fewer than the 8 of the header length.", psprintf("%zu", len));
	hlen = le64((const unsigned char *) first8);
	if (hlen > len - 8 || hlen > MAX_HEADER || hlen < 2)
		bad_safetensors("The header length %s does not fit in the file.", psprintf(UINT64_FORMAT, hlen));
	return (Size) hlen;
}

/* A whole safetensors file in memory (bytes from the client). */
static int
ParseSafetensors(const char *buf, Size len, StoredTensor **out, Size *hlen_out)
{
	Size		hlen = SafetensorsHeaderLength(buf, len);
	int			n = ParseSafetensorsHeader(buf, hlen, len - 8 - hlen, out);

	for (int i = 0; i < n; i++)
		(*out)[i].data = buf + 8 + hlen + (*out)[i].offset;
	*hlen_out = hlen;
	return n;
}

/* Read exactly len bytes at offset, in pieces that cancel can interrupt. */
static void
ReadAt(FILE *f, const char *path, off_t offset, char *buf, Size len)
{
	const Size	piece = 16 * 1024 * 1024;

	if (fseeko(f, offset, SEEK_SET) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not seek in file \"%s\": %m", path)));
	for (Size done = 0; done < len; done += piece)
	{
		Size		n = Min(piece, len - done);

		CHECK_FOR_INTERRUPTS();
		if (fread(buf + done, 1, n, f) != n)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", path),
					 errdetail("It ended before the data its header describes.")));
	}
}

/*
 * A safetensors file on the server, read a tensor at a time: no allocation
 * is the size of the file (which may be over 1 GB).  *hdr gets the 8 + hlen
 * bytes of the header.
 */
static int
ReadSafetensorsFile(const char *path, StoredTensor **out, char **hdr, Size *hlen_out)
{
	FILE	   *f;
	Size		fsize;
	char		first8[8];
	Size		hlen;
	int			n;

	f = OpenServerFile(path, MAX_MODEL_FILE, &fsize);
	memset(first8, 0, sizeof(first8));
	if (fsize >= 8)
		ReadAt(f, path, 0, first8, 8);
	hlen = SafetensorsHeaderLength(first8, fsize);
	*hdr = palloc(8 + hlen);
	ReadAt(f, path, 0, *hdr, 8 + hlen);
	n = ParseSafetensorsHeader(*hdr, hlen, fsize - 8 - hlen, out);
	for (int i = 0; i < n; i++)
	{
		StoredTensor *t = &(*out)[i];
		char	   *data = palloc(Max(t->nbytes, 1));

		ReadAt(f, path, (off_t) (8 + hlen + t->offset), data, t->nbytes);
		t->data = data;
	}
	FreeFile(f);
	*hlen_out = hlen;
	return n;
}

static bytea *
ByteaOf(const char *data, Size len)
{
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	memcpy(VARDATA(b), data, len);
	return b;
}

/*
 * Check everything, then replace the model's rows: its configuration, its
 * tensors (bytes as in the file) and its two tokenizers.  All in the
 * caller's transaction: an error leaves nothing behind.  Writers of a name
 * queue on its lock, taken before any row (model, then tokenizers).
 */
int64
StoreModel(const char *name, const char *config_text, Size config_len,
		   const char *st_header, Size hlen, StoredTensor *tensors, int ntensors,
		   const char *src_spm, Size src_len, const char *tgt_spm, Size tgt_len,
		   const char *vocab_text, Size vocab_len, const char *gen_text, Size gen_len,
		   const char *source_lang, const char *target_lang)
{
	Jsonb	   *config = ParseJsonText("config.json", config_text, config_len);
	TokVocab	vocab = VocabFromFile("vocab.json", vocab_text, vocab_len);
	Jsonb	   *generation = gen_text ? ParseJsonText("generation_config.json", gen_text, gen_len) : NULL;
	ModelGeneration gen;
	TfModel		model;
	MemoryContext check = AllocSetContextCreate(CurrentMemoryContext, "model check",
												ALLOCSET_DEFAULT_SIZES);
	int64		params = 0;
	char	   *src_name = psprintf("%s/source", name);
	char	   *tgt_name = psprintf("%s/target", name);
	char	   *q;
	Tokenizer	tcheck;
	int			level;

	CheckModelName(name);
	memset(&model, 0, sizeof(model));
	ParseModelConfig(config, &model.cfg);
	ParseGenerationConfig(generation, config, &model.cfg, &gen, CurrentMemoryContext);
	BuildModelWeights(&model, tensors, ntensors, check, NULL);
	MemoryContextDelete(check);
	for (int i = 0; i < ntensors; i++)
	{
		int64		numel = 1;
		size_t		len = strlen(tensors[i].name);

		/* an int8 matrix's scales are not parameters */
		if (len > 13 && strcmp(tensors[i].name + len - 13, ".weight_scale") == 0)
			continue;
		for (int k = 0; k < tensors[i].ndim; k++)
			numel *= tensors[i].shape[k];
		params += numel;
	}

	/* the vocabulary's ids must index the embeddings */
	memset(&tcheck, 0, sizeof(tcheck));
	tcheck.cxt = AllocSetContextCreate(CurrentMemoryContext, "tokenizer check", ALLOCSET_DEFAULT_SIZES);
	BuildTokenizer(&tcheck, src_spm, src_len, &vocab);
	if (tcheck.nmodel > model.cfg.vocab)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("vocab.json has ids up to %d, but the model's vocabulary has %d entries",
						tcheck.nmodel - 1, model.cfg.vocab)));
	MemoryContextDelete(tcheck.cxt);

	RequireExtensionVersion020();
	LockObjectName(EXT_LOCK_MODEL, name);
	RemoveSharedWeights(name);
	StoreTokenizer(src_name, src_spm, src_len, &vocab);
	StoreTokenizer(tgt_name, tgt_spm, tgt_len, &vocab);

	level = ExtSpiConnect();
	q = psprintf("DELETE FROM %s WHERE name = $1", ExtensionTableName("transformer_models"));
	{
		Oid			types[1] = {TEXTOID};
		Datum		args[1] = {CStringGetTextDatum(name)};

		if (SPI_execute_with_args(q, 1, types, args, NULL, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not replace model \"%s\"", name);
	}
	q = psprintf("INSERT INTO %s (name, config, config_json, vocab_json, safetensors_header, "
				 "source_tokenizer, target_tokenizer, generation_config, generation_config_json, "
				 "source_lang, target_lang) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
				 ExtensionTableName("transformer_models"));
	{
		Oid			types[11] = {TEXTOID, JSONBOID, BYTEAOID, BYTEAOID, BYTEAOID, TEXTOID, TEXTOID,
		JSONBOID, BYTEAOID, TEXTOID, TEXTOID};
		Datum		args[11];
		char		nulls[11] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', gen_text ? ' ' : 'n', gen_text ? ' ' : 'n',
		source_lang ? ' ' : 'n', target_lang ? ' ' : 'n'};

		args[0] = CStringGetTextDatum(name);
		args[1] = JsonbPGetDatum(config);
		args[2] = PointerGetDatum(ByteaOf(config_text, config_len));
		args[3] = PointerGetDatum(ByteaOf(vocab_text, vocab_len));
		args[4] = PointerGetDatum(ByteaOf(st_header, 8 + hlen));
		args[5] = CStringGetTextDatum(src_name);
		args[6] = CStringGetTextDatum(tgt_name);
		args[7] = generation ? JsonbPGetDatum(generation) : (Datum) 0;
		args[8] = gen_text ? PointerGetDatum(ByteaOf(gen_text, gen_len)) : (Datum) 0;
		args[9] = source_lang ? CStringGetTextDatum(source_lang) : (Datum) 0;
		args[10] = target_lang ? CStringGetTextDatum(target_lang) : (Datum) 0;
		if (SPI_execute_with_args(q, 11, types, args, nulls, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not store model \"%s\"", name);
	}
	q = psprintf("INSERT INTO %s (model, name, shape, dtype, data_offset, data) "
				 "VALUES ($1, $2, $3, $4, $5, $6)", ExtensionTableName("transformer_tensors"));
	for (int i = 0; i < ntensors; i++)
	{
		StoredTensor *t = &tensors[i];
		Oid			types[6] = {TEXTOID, TEXTOID, INT8ARRAYOID, TEXTOID, INT8OID, BYTEAOID};
		Datum		args[6];
		Datum	   *dims = palloc(sizeof(Datum) * (t->ndim + 1));
		bytea	   *data = ByteaOf(t->data, t->nbytes);

		CHECK_FOR_INTERRUPTS();
		for (int k = 0; k < t->ndim; k++)
			dims[k] = Int64GetDatum(t->shape[k]);
		args[0] = CStringGetTextDatum(name);
		args[1] = CStringGetTextDatum(t->name);
		args[2] = PointerGetDatum(construct_array(dims, t->ndim, INT8OID, 8, true, TYPALIGN_DOUBLE));
		args[3] = CStringGetTextDatum(t->dtype);
		args[4] = Int64GetDatum(t->offset);
		args[5] = PointerGetDatum(data);
		if (SPI_execute_with_args(q, 6, types, args, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not store tensor \"%s\"", t->name);
		pfree(data);
	}
	ExtSpiFinish(level);
	return params;
}

static char *
ModelFilePath(const char *dir, const char *file)
{
	return psprintf("%s/%s", dir, file);
}

/* Read a model directory's five files and store them. */
static int64
ImportDirectory(const char *name, const char *dir)
{
	Size		config_len,
				hlen,
				src_len,
				tgt_len,
				vocab_len;
	char	   *config = ReadServerFile(ModelFilePath(dir, "config.json"), MAX_TEXT_FILE, &config_len);
	char	   *header;
	StoredTensor *tensors;
	int			n = ReadSafetensorsFile(ModelFilePath(dir, "model.safetensors"), &tensors, &header, &hlen);
	char	   *src = ReadServerFile(ModelFilePath(dir, "source.spm"), MAX_TEXT_FILE, &src_len);
	char	   *tgt = ReadServerFile(ModelFilePath(dir, "target.spm"), MAX_TEXT_FILE, &tgt_len);
	char	   *vocab = ReadServerFile(ModelFilePath(dir, "vocab.json"), MAX_TEXT_FILE, &vocab_len);
	char	   *gen_path = ModelFilePath(dir, "generation_config.json");
	char	   *gen = NULL;
	Size		gen_len = 0;
	char	   *source_lang = NULL;
	char	   *target_lang = NULL;
	struct stat st;

	/* optional, as in Hugging Face's from_pretrained() */
	if (stat(gen_path, &st) == 0)
		gen = ReadServerFile(gen_path, MAX_TEXT_FILE, &gen_len);
	else if (errno != ENOENT)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not stat file \"%s\": %m", gen_path)));
	/* the languages, from tokenizer_config.json where the directory has one */
	gen_path = ModelFilePath(dir, "tokenizer_config.json");
	if (stat(gen_path, &st) == 0)
	{
		Size		tc_len;
		char	   *tc = ReadServerFile(gen_path, MAX_TEXT_FILE, &tc_len);
		Jsonb	   *j = ParseJsonText("tokenizer_config.json", tc, tc_len);

		source_lang = JsonStringKey(j, "source_lang");
		target_lang = JsonStringKey(j, "target_lang");
	}
	return StoreModel(name, config, config_len, header, hlen, tensors, n,
					  src, src_len, tgt, tgt_len, vocab, vocab_len, gen, gen_len,
					  source_lang, target_lang);
}

PG_FUNCTION_INFO_V1(import_model);
Datum
import_model(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));

	CheckModelName(name);
	CheckServerFileAccess("load_model()");
	PG_RETURN_INT64(ImportDirectory(name, text_to_cstring(PG_GETARG_TEXT_PP(1))));
}

/*
 * import_model(name): a model bundled with the extension, installed by
 * make install under <sharedir>/extension/transformer_models/<name>.  The
 * path is fixed, so no server file privilege is needed.
 */
PG_FUNCTION_INFO_V1(import_bundled_model);
Datum
import_bundled_model(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char		share[MAXPGPATH];
	char	   *dir;
	struct stat st;

	CheckModelName(name);
	for (const char *c = name; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("no bundled model \"%s\"", name),
					 errdetail("Bundled models have names of lower-case letters, digits and underscores.")));
	get_share_path(my_exec_path, share);
	dir = psprintf("%s/extension/transformer_models/%s", share, name);
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("no bundled model \"%s\"", name),
				 errdetail("There is no directory \"%s\".", dir),
				 errhint("The extension bundles multi30k_de_en; import other models with import_model(name, dir).")));

	PG_RETURN_INT64(ImportDirectory(name, dir));
}

/* load_model(name, config, safetensors, source_spm, target_spm, vocab[, generation_config]) */
PG_FUNCTION_INFO_V1(load_model);
Datum
load_model(PG_FUNCTION_ARGS)
{
	char	   *name;
	bytea	   *config;
	bytea	   *st;
	bytea	   *src;
	bytea	   *tgt;
	bytea	   *vocab;
	bytea	   *gen = NULL;
	StoredTensor *tensors;
	Size		hlen;
	int			n;
	static const char *const argnames[6] = {"name", "config", "safetensors", "source_spm", "target_spm", "vocab"};

	/* all but generation_config are required (version 0.1.0 declared it STRICT) */
	for (int i = 0; i < 6; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not be null", argnames[i])));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	config = PG_GETARG_BYTEA_PP(1);
	st = PG_GETARG_BYTEA_PP(2);
	src = PG_GETARG_BYTEA_PP(3);
	tgt = PG_GETARG_BYTEA_PP(4);
	vocab = PG_GETARG_BYTEA_PP(5);
	if (PG_NARGS() > 6 && !PG_ARGISNULL(6))
		gen = PG_GETARG_BYTEA_PP(6);
	CheckModelName(name);
	n = ParseSafetensors(VARDATA_ANY(st), VARSIZE_ANY_EXHDR(st), &tensors, &hlen);
	PG_RETURN_INT64(StoreModel(name, VARDATA_ANY(config), VARSIZE_ANY_EXHDR(config),
							   VARDATA_ANY(st), hlen, tensors, n,
							   VARDATA_ANY(src), VARSIZE_ANY_EXHDR(src),
							   VARDATA_ANY(tgt), VARSIZE_ANY_EXHDR(tgt),
							   VARDATA_ANY(vocab), VARSIZE_ANY_EXHDR(vocab),
							   gen ? VARDATA_ANY(gen) : NULL, gen ? VARSIZE_ANY_EXHDR(gen) : 0,
							   NULL, NULL));
}

PG_FUNCTION_INFO_V1(drop_model);
Datum
drop_model(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *tok[2] = {psprintf("%s/source", name), psprintf("%s/target", name)};
	Oid			types[1] = {TEXTOID};
	Datum		args[1] = {PG_GETARG_DATUM(0)};
	bool		found;
	int			level;

	/* import's lock order: the model, then its tokenizers */
	LockObjectName(EXT_LOCK_MODEL, name);
	LockObjectName(EXT_LOCK_TOKENIZER, tok[0]);
	LockObjectName(EXT_LOCK_TOKENIZER, tok[1]);
	level = ExtSpiConnect();
	if (SPI_execute_with_args(psprintf("DELETE FROM %s WHERE name = $1",
									   ExtensionTableName("transformer_models")),
							  1, types, args, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not drop model \"%s\"", name);
	found = SPI_processed > 0;
	RemoveSharedWeights(name);
	for (int i = 0; i < 2; i++)
	{
		Datum		targs[1] = {CStringGetTextDatum(tok[i])};

		if (SPI_execute_with_args(psprintf("DELETE FROM %s WHERE name = $1",
										   ExtensionTableName("transformer_tokenizers")),
								  1, types, targs, NULL, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not drop tokenizer \"%s\"", tok[i]);
		RemoveSharedTokenizer(tok[i]);
	}
	ExtSpiFinish(level);
	PG_RETURN_BOOL(found);
}

