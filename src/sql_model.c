/*
 * sql_model.c
 *		SQL entry points for models: import_model() (a Hugging Face Marian
 *		directory, or its files' bytes), export_model(), drop_model(),
 *		embed(), encode(), translate().
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
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "ext_tables.h"
#include "model_store.h"
#include "pg_arrays.h"
#include "server_files.h"
#include "translate.h"

#define MAX_MODEL_FILE ((Size) 4 * 1024 * 1024 * 1024 - 1)
#define MAX_TEXT_FILE ((Size) 256 * 1024 * 1024)
#define MAX_HEADER ((Size) 100 * 1024 * 1024)
/* a model's tokenizers are called "<model>/source" and "<model>/target" */
#define MAX_MODEL_NAME (NAMEDATALEN - 1 - 7)

char	   *transformer_default_model = NULL;

static void
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

static int64
json_int64(JsonbValue *v, const char *tensor)
{
	char	   *s;
	char	   *end;
	long long	n;

	if (v == NULL || v->type != jbvNumeric)
		bad_safetensors("Tensor \"%s\" has a malformed shape or data_offsets.", tensor);
	s = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
	errno = 0;
	n = strtoll(s, &end, 10);
	if (*end != '\0' || errno != 0 || n < 0)
		bad_safetensors("Tensor \"%s\" has a malformed shape or data_offsets.", tensor);
	return (int64) n;
}

/*
 * Parse a safetensors header: an 8-byte little-endian header length and
 * the JSON {name: {dtype, shape, data_offsets}} (hdr, 8 + hlen bytes),
 * before data_len bytes of data.  Every offset and size is checked against
 * data_len; each tensor's offset is set, its data is left to the caller.
 */
static int
ParseSafetensorsHeader(const char *hdr, Size hlen, Size data_len, StoredTensor **out)
{
	Jsonb	   *header;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken r;
	StoredTensor *tensors;
	int			n = 0;
	char	   *key = NULL;

	header = ParseJsonText("safetensors header", hdr + 8, hlen);
	if (!JB_ROOT_IS_OBJECT(header) || JB_ROOT_IS_SCALAR(header))
		bad_safetensors("The header is not a JSON object%s.", "");

	tensors = palloc0(sizeof(StoredTensor) * (JB_ROOT_COUNT(header) + 1));
	it = JsonbIteratorInit(&header->root);
	while ((r = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (r == WJB_KEY)
		{
			key = pnstrdup(v.val.string.val, v.val.string.len);
			if ((n & 255) == 0)
				CHECK_FOR_INTERRUPTS();
		}
		else if (r == WJB_VALUE && strcmp(key, "__metadata__") != 0)
		{
			StoredTensor *t = &tensors[n];
			JsonbValue *dtype,
					   *shape,
					   *offsets;
			int64		begin,
						end;
			const char *defect;

			if (v.type != jbvBinary)
				bad_safetensors("Tensor \"%s\" is not described by an object.", key);
			dtype = getKeyJsonValueFromContainer(v.val.binary.data, "dtype", 5, NULL);
			shape = getKeyJsonValueFromContainer(v.val.binary.data, "shape", 5, NULL);
			offsets = getKeyJsonValueFromContainer(v.val.binary.data, "data_offsets", 12, NULL);
			if (dtype == NULL || dtype->type != jbvString || shape == NULL ||
				shape->type != jbvBinary || offsets == NULL || offsets->type != jbvBinary)
				bad_safetensors("Tensor \"%s\" lacks dtype, shape or data_offsets.", key);

			t->name = key;
			snprintf(t->dtype, sizeof(t->dtype), "%.*s", dtype->val.string.len, dtype->val.string.val);
			if (strcmp(t->dtype, "F32") != 0 && strcmp(t->dtype, "F16") != 0 && strcmp(t->dtype, "BF16") != 0)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("tensor \"%s\" has the unsupported dtype \"%.*s\"", key,
								dtype->val.string.len, dtype->val.string.val),
						 errhint("Supported are F32, F16 and BF16.")));

			t->ndim = JsonContainerSize(shape->val.binary.data);
			if (!JsonContainerIsArray(shape->val.binary.data) || t->ndim > MAX_TENSOR_DIMS)
				bad_safetensors("Tensor \"%s\" has a malformed shape.", key);
			for (int k = 0; k < t->ndim; k++)
				t->shape[k] = json_int64(getIthJsonbValueFromContainer(shape->val.binary.data, k), key);
			if (!JsonContainerIsArray(offsets->val.binary.data) ||
				JsonContainerSize(offsets->val.binary.data) != 2)
				bad_safetensors("Tensor \"%s\" has malformed data_offsets.", key);
			begin = json_int64(getIthJsonbValueFromContainer(offsets->val.binary.data, 0), key);
			end = json_int64(getIthJsonbValueFromContainer(offsets->val.binary.data, 1), key);
			if (begin > end || (uint64) end > data_len)
				bad_safetensors("The data of tensor \"%s\" lies outside the file.", key);
			t->offset = begin;
			t->nbytes = (Size) (end - begin);
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
						 errmsg("tensor \"%s\" is too large to store", key),
						 errdetail("It has %zu bytes; a value may have at most %zu.",
								   (size_t) t->nbytes, (size_t) (MaxAllocSize - VARHDRSZ))));
			n++;
		}
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
	struct stat st;
	char		first8[8];
	Size		hlen;
	int			n;

	f = AllocateFile(path, PG_BINARY_R);
	if (f == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\" for reading: %m", path)));
	if (fstat(fileno(f), &st) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not stat file \"%s\": %m", path)));
	if (!S_ISREG(st.st_mode))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a regular file", path)));
	if ((uint64) st.st_size > MAX_MODEL_FILE)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("file \"%s\" is too large", path),
				 errdetail("It has %lld bytes; the limit is " UINT64_FORMAT ".",
						   (long long) st.st_size, (uint64) MAX_MODEL_FILE)));
	memset(first8, 0, sizeof(first8));
	if (st.st_size >= 8)
		ReadAt(f, path, 0, first8, 8);
	hlen = SafetensorsHeaderLength(first8, (Size) st.st_size);
	*hdr = palloc(8 + hlen);
	ReadAt(f, path, 0, *hdr, 8 + hlen);
	n = ParseSafetensorsHeader(*hdr, hlen, (Size) st.st_size - 8 - hlen, out);
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
static int64
StoreModel(const char *name, const char *config_text, Size config_len,
		   const char *st_header, Size hlen, StoredTensor *tensors, int ntensors,
		   const char *src_spm, Size src_len, const char *tgt_spm, Size tgt_len,
		   const char *vocab_text, Size vocab_len, const char *gen_text, Size gen_len,
		   const char *source_lang, const char *target_lang)
{
	Jsonb	   *config = ParseJsonText("config.json", config_text, config_len);
	Jsonb	   *vocab = ParseJsonText("vocab.json", vocab_text, vocab_len);
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
	BuildModelWeights(&model, tensors, ntensors, check);
	MemoryContextDelete(check);
	for (int i = 0; i < ntensors; i++)
	{
		int64		numel = 1;

		for (int k = 0; k < tensors[i].ndim; k++)
			numel *= tensors[i].shape[k];
		params += numel;
	}

	/* the vocabulary's ids must index the embeddings */
	memset(&tcheck, 0, sizeof(tcheck));
	tcheck.cxt = AllocSetContextCreate(CurrentMemoryContext, "tokenizer check", ALLOCSET_DEFAULT_SIZES);
	BuildTokenizer(&tcheck, src_spm, src_len, vocab);
	if (tcheck.nmodel > model.cfg.vocab)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("vocab.json has ids up to %d, but the model's vocabulary has %d entries",
						tcheck.nmodel - 1, model.cfg.vocab)));
	MemoryContextDelete(tcheck.cxt);

	RequireExtensionVersion020();
	LockObjectName(EXT_LOCK_MODEL, name);
	StoreTokenizer(src_name, src_spm, src_len, vocab);
	StoreTokenizer(tgt_name, tgt_spm, tgt_len, vocab);

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
	SPI_execute_with_args(psprintf("SELECT m.config_json, m.vocab_json, m.safetensors_header, s.model, t.model, %s "
								   "FROM %s m JOIN %s s ON s.name = m.source_tokenizer "
								   "JOIN %s t ON t.name = m.target_tokenizer WHERE m.name = $1",
								   ModelsHaveGenerationConfig() ? "m.generation_config_json" : "NULL::bytea",
								   ExtensionTableName("transformer_models"),
								   ExtensionTableName("transformer_tokenizers"),
								   ExtensionTableName("transformer_tokenizers")),
						  1, types, args, NULL, true, 1);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", name)));
	if (MakePGDirectory(dir) != 0 && errno != EEXIST)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create directory \"%s\": %m", dir)));
	b = spi_bytea(0, 1);
	WriteFile(dir, "config.json", VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b), false);
	b = spi_bytea(0, 2);
	WriteFile(dir, "vocab.json", VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b), false);
	b = spi_bytea(0, 4);
	WriteFile(dir, "source.spm", VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b), false);
	b = spi_bytea(0, 5);
	WriteFile(dir, "target.spm", VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b), false);
	{
		bool		isnull;
		Datum		g = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 6, &isnull);

		if (!isnull)
			WriteFile(dir, "generation_config.json", VARDATA_ANY(DatumGetByteaPP(g)),
					  VARSIZE_ANY_EXHDR(DatumGetByteaPP(g)), false);
	}
	b = spi_bytea(0, 3);
	WriteFile(dir, "model.safetensors", VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b), false);

	/* the tensors' bytes in file order, where the header put them */
	SPI_execute_with_args(psprintf("SELECT data FROM %s WHERE model = $1 ORDER BY data_offset",
								   ExtensionTableName("transformer_tensors")),
						  1, types, args, NULL, true, 0);
	n = (int) SPI_processed;
	for (int i = 0; i < n; i++)
	{
		CHECK_FOR_INTERRUPTS();
		b = spi_bytea(i, 1);
		WriteFile(dir, "model.safetensors", VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b), true);
	}
	ExtSpiFinish(level);
	PG_RETURN_INT32(n);
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
	for (int i = 0; i < 2; i++)
	{
		Datum		targs[1] = {CStringGetTextDatum(tok[i])};

		if (SPI_execute_with_args(psprintf("DELETE FROM %s WHERE name = $1",
										   ExtensionTableName("transformer_tokenizers")),
								  1, types, targs, NULL, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not drop tokenizer \"%s\"", tok[i]);
	}
	ExtSpiFinish(level);
	PG_RETURN_BOOL(found);
}

/* ---------------------------------------------------------- inference */

/* Source ids of input as Marian's tokenizer makes them: pieces, then EOS. */
static int *
SourceIds(CachedModel *cm, const char *model, text *input, int *n)
{
	Tokenizer  *tok = GetTokenizer(cm->source_tokenizer);
	const TfConfig *c = &cm->model.cfg;
	SpmEncoding enc;
	int		   *ids;

	EncodeText(tok, input, &enc);
	if (enc.ntokens == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("input text is empty"),
				 errdetail("It has no tokens once whitespace is normalized."),
				 errhint("Leave out empty rows, e.g. WHERE btrim(body) <> ''.")));
	if (enc.ntokens + 1 > c->max_pos)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("input text is too long for model \"%s\"", model),
				 errdetail("It has %d tokens with the end-of-sentence token; the model has %d positions.",
						   enc.ntokens + 1, c->max_pos),
				 errhint("Split the text into sentences.")));
	ids = palloc(sizeof(int) * (enc.ntokens + 1));
	for (int i = 0; i < enc.ntokens; i++)
	{
		ids[i] = TokenModelId(tok, &enc.tokens[i]);
		if (ids[i] >= c->vocab)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("model \"%s\" is damaged", model),
					 errdetail("Its source tokenizer \"%s\" gives the id %d, but the model's vocabulary has %d entries.",
							   cm->source_tokenizer, ids[i], c->vocab),
					 errhint("Drop it and import it again.")));
	}
	ids[enc.ntokens] = c->eos_id;
	*n = enc.ntokens + 1;
	return ids;
}

/*
 * Decoding's buffers (encoder scratch, key/value caches, logits), kept from
 * one call to the next so that translate() does not allocate them and
 * fault in fresh pages every time.  A call takes them from the workspace
 * in order; what does not fit comes from the caller's memory context, and
 * the next call grows the workspace to what this one needed, up to
 * WORKSPACE_MAX bytes, held by the backend for its lifetime.  Nothing in
 * the core reads a buffer before writing it, so none is zeroed.
 *
 * One call holds it at a time: a nested call (a user's code run by a load
 * in the middle of ours) allocates from its own memory context instead,
 * so the outer call's buffers are never reused or freed under it.  The
 * holder releases it when done, or its (sub)transaction's abort does.
 */
#define WORKSPACE_MAX ((Size) 64 * 1024 * 1024)
#define WORKSPACE_ALIGN 64

typedef struct Workspace
{
	char	   *raw;			/* in TopMemoryContext */
	char	   *base;			/* raw, aligned */
	Size		size;
	Size		used;			/* by the current call */
	Size		need;			/* what the current call asked for */
	bool		busy;			/* a call holds it */
	SubTransactionId owner;		/* the holder's subtransaction */
} Workspace;

static Workspace workspace;

/*
 * The core asks for its buffers by size; a model's configuration (which
 * any writer of our tables sets) can make one absurd: refuse it clearly.
 */
static void
CheckBufferSize(size_t size)
{
	if (size > MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the model would need a buffer of %zu bytes", size),
				 errdetail("The limit is %zu bytes.", (size_t) MaxAllocSize),
				 errhint("Use a shorter input, a smaller beam_size or max_length, or fewer sentences at once.")));
}

static void *
context_alloc(void *ctx, size_t size)
{
	CheckBufferSize(size);
	return MemoryContextAlloc((MemoryContext) ctx, size);
}

static void *
workspace_alloc(void *ctx, size_t size)
{
	Size		bytes = TYPEALIGN(WORKSPACE_ALIGN, size);
	void	   *p;

	CheckBufferSize(size);
	workspace.need += bytes;
	if (workspace.used + bytes <= workspace.size)
	{
		p = workspace.base + workspace.used;
		workspace.used += bytes;
		return p;
	}
	return MemoryContextAlloc((MemoryContext) ctx, size);
}

/*
 * An allocator for one decoding call; overflow goes to cxt.  Hold it until
 * ReleaseWorkspace(); a nested caller gets plain memory from cxt.
 */
static SpmAlloc
DecodeWorkspace(MemoryContext cxt)
{
	SpmAlloc	a = {workspace_alloc, cxt};

	if (workspace.busy)
	{
		a.alloc = context_alloc;
		return a;
	}
	workspace.busy = true;
	workspace.owner = GetCurrentSubTransactionId();
	if (workspace.need > workspace.size && workspace.need <= WORKSPACE_MAX)
	{
		if (workspace.raw)
			pfree(workspace.raw);
		workspace.raw = NULL;
		workspace.size = 0;
		workspace.raw = MemoryContextAlloc(TopMemoryContext, workspace.need + WORKSPACE_ALIGN);
		workspace.base = (char *) TYPEALIGN(WORKSPACE_ALIGN, workspace.raw);
		workspace.size = workspace.need;
	}
	workspace.used = 0;
	workspace.need = 0;
	return a;
}

static void
ReleaseWorkspace(SpmAlloc *a)
{
	if (a->alloc == workspace_alloc)
		workspace.busy = false;
}

/* An error in the holder's (sub)transaction releases the workspace. */
static void
workspace_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		workspace.busy = false;
}

static void
workspace_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						   SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB && workspace.busy && workspace.owner >= mySubid)
		workspace.busy = false;
}

void
InitDecodeWorkspace(void)
{
	RegisterXactCallback(workspace_xact_callback, NULL);
	RegisterSubXactCallback(workspace_subxact_callback, NULL);
}

PG_FUNCTION_INFO_V1(embed);
Datum
embed(PG_FUNCTION_ARGS)
{
	char	   *model = text_to_cstring(PG_GETARG_TEXT_PP(1));
	CachedModel *cm = GetModel(model);
	int			n;
	int		   *ids = SourceIds(cm, model, PG_GETARG_TEXT_PP(0), &n);
	ArrayType  *result = NewFloat4Array(n, cm->model.cfg.d_model);

	tf_embed(&cm->model, n, ids, (float *) ARR_DATA_PTR(result));
	PG_RETURN_ARRAYTYPE_P(result);
}

PG_FUNCTION_INFO_V1(encode);
Datum
encode(PG_FUNCTION_ARGS)
{
	char	   *model = text_to_cstring(PG_GETARG_TEXT_PP(1));
	CachedModel *cm = GetModel(model);
	int			n;
	int		   *ids = SourceIds(cm, model, PG_GETARG_TEXT_PP(0), &n);
	ArrayType  *result = NewFloat4Array(n, cm->model.cfg.d_model);
	SpmAlloc	a = DecodeWorkspace(CurrentMemoryContext);

	tf_encode(&cm->model, n, ids, (float *) ARR_DATA_PTR(result), &a);
	ReleaseWorkspace(&a);
	PG_RETURN_ARRAYTYPE_P(result);
}

static void
check_interrupts(void)
{
	CHECK_FOR_INTERRUPTS();
}

/* transformer.max_length_factor: the runaway guard */
double		transformer_max_length_factor = 3.0;

void
GetCallOptions(FunctionCallInfo fcinfo, CallOptions *o)
{
	for (int i = 0; i < NUM_CALL_OPTIONS; i++)
	{
		int			arg = FIRST_OPTION_ARG + i;

		o->given[i] = PG_NARGS() > arg && !PG_ARGISNULL(arg);
		o->value[i] = o->given[i] ? PG_GETARG_DATUM(arg) : (Datum) 0;
	}
}

static void
bad_option(const char *option, const char *range, const char *value) pg_attribute_noreturn();

static void
bad_option(const char *option, const char *range, const char *value)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s must be %s", option, range),
			 errdetail("It is %s.", value)));
}

static int
int_option(const CallOptions *o, int which, const char *option, int dflt, int min, int max)
{
	int32		v;

	if (!o->given[which])
		return dflt;
	v = DatumGetInt32(o->value[which]);
	if (v < min || v > max)
		bad_option(option, psprintf("between %d and %d", min, max), psprintf("%d", v));
	return v;
}

/*
 * Decoding options for n source ids: each call option, or the model's
 * generation config, with Hugging Face's precedence (max_new_tokens over
 * max_length).  When the length comes from the model, the runaway guard
 * caps it at max_length_factor times the source tokens.
 */
static void
DecodeOptions(CachedModel *cm, const char *model, int n, const CallOptions *o, TfDecodeOptions *opt)
{
	const TfConfig *c = &cm->model.cfg;
	const ModelGeneration *g = &cm->gen;
	int			max_new;

	opt->beam_size = int_option(o, OPT_BEAM_SIZE, "beam_size", g->num_beams, 1, TF_MAX_BEAMS);
	opt->length_penalty = g->length_penalty;
	if (o->given[OPT_LENGTH_PENALTY])
	{
		opt->length_penalty = DatumGetFloat8(o->value[OPT_LENGTH_PENALTY]);
		if (!isfinite(opt->length_penalty))
			bad_option("length_penalty", "finite", psprintf("%g", opt->length_penalty));
	}
	opt->early_stopping = !o->given[OPT_EARLY_STOPPING] ? g->early_stopping :
		DatumGetBool(o->value[OPT_EARLY_STOPPING]) ? TF_EARLY_TRUE : TF_EARLY_FALSE;
	opt->repetition_penalty = g->repetition_penalty;
	if (o->given[OPT_REPETITION_PENALTY])
	{
		opt->repetition_penalty = DatumGetFloat8(o->value[OPT_REPETITION_PENALTY]);
		if (!isfinite(opt->repetition_penalty) || opt->repetition_penalty <= 0)
			bad_option("repetition_penalty", "a positive number", psprintf("%g", opt->repetition_penalty));
	}
	opt->no_repeat_ngram_size = int_option(o, OPT_NO_REPEAT_NGRAM_SIZE, "no_repeat_ngram_size",
										   g->no_repeat_ngram_size, 0, INT_MAX);
	opt->min_length = int_option(o, OPT_MIN_LENGTH, "min_length", g->min_length, 0, INT_MAX);

	/* GenerationConfig: max_new_tokens, when set, decides; the start token counts */
	max_new = int_option(o, OPT_MAX_NEW_TOKENS, "max_new_tokens", g->max_new_tokens, 1, c->max_pos);
	if (max_new > 0)
		opt->max_length = Min(max_new, c->max_pos) + 1;
	else if (o->given[OPT_MAX_LENGTH])
	{
		opt->max_length = DatumGetInt32(o->value[OPT_MAX_LENGTH]);
		if (opt->max_length < 1 || opt->max_length > c->max_pos + 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("max_length must be between 1 and %d for model \"%s\"", c->max_pos + 1, model),
					 errdetail("It is %d.  As in Hugging Face's generate(), it counts the decoder start token, so the model's %d positions allow %d.",
							   opt->max_length, c->max_pos, c->max_pos + 1)));
	}
	else
		opt->max_length = g->max_length;
	if (!o->given[OPT_MAX_LENGTH] && !o->given[OPT_MAX_NEW_TOKENS] && transformer_max_length_factor > 0)
		opt->max_length = Min(opt->max_length, 1 + (int) ceil(transformer_max_length_factor * n));

	opt->forced_eos_id = g->forced_eos_id;
	opt->renormalize = g->renormalize;
	opt->nbad = g->nbad;
	opt->bad_off = g->bad_off;
	opt->bad_ids = g->bad_ids;
}

/* Bytes of one of the decoder's key and value caches for rows beams of up to max_length. */
static double
CacheBytes(CachedModel *cm, int rows, int max_length)
{
	const TfConfig *c = &cm->model.cfg;

	return (double) c->dec_layers * rows * max_length * c->d_model * sizeof(float);
}

/* ERROR before decoding if a cache would exceed what one allocation may take. */
static void
CheckCacheSize(CachedModel *cm, const char *model, int rows, int max_length)
{
	double		bytes = CacheBytes(cm, rows, max_length);

	if (bytes > (double) MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("decoding with model \"%s\" would need a key/value cache of %.0f MB", model, bytes / (1024.0 * 1024.0)),
				 errdetail("%d beams of up to %d tokens; the limit is %zu MB.",
						   rows, max_length, (size_t) (MaxAllocSize / (1024 * 1024))),
				 errhint("Use a smaller beam_size or max_length.")));
}

/* The target ids for one text (palloc'd); options NULL-able as in the SQL signature. */
static int
GenerateIds(CachedModel *cm, const char *model, text *input, const CallOptions *o, int **out)
{
	int			n;
	int		   *src = SourceIds(cm, model, input, &n);
	TfDecodeOptions opt;
	SpmAlloc	a;
	int		   *ids;
	int			nout;

	DecodeOptions(cm, model, n, o, &opt);
	CheckCacheSize(cm, model, opt.beam_size, opt.max_length);
	a = DecodeWorkspace(CurrentMemoryContext);
	nout = tf_translate(&cm->model, n, src, &opt, &ids, &a, check_interrupts);
	*out = palloc(sizeof(int) * (nout + 1));
	memcpy(*out, ids, sizeof(int) * nout);
	ReleaseWorkspace(&a);
	return nout;
}

static char *
ModelArg(FunctionCallInfo fcinfo, int arg)
{
	if (PG_ARGISNULL(arg))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model must not be null")));
	return text_to_cstring(PG_GETARG_TEXT_PP(arg));
}

PG_FUNCTION_INFO_V1(translate_text);
Datum
translate_text(PG_FUNCTION_ARGS)
{
	char	   *model;
	CallOptions o;
	text	   *in;
	text	   *out;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	model = ModelArg(fcinfo, 1);
	GetCallOptions(fcinfo, &o);
	in = PG_GETARG_TEXT_PP(0);
	TranslateDocuments(GetModel(model), model, 1, &in, &o, &out);
	PG_RETURN_TEXT_P(out);
}

PG_FUNCTION_INFO_V1(generate);
Datum
generate(PG_FUNCTION_ARGS)
{
	char	   *model;
	int		   *out;
	int			n;
	Datum	   *d;
	CallOptions o;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	model = ModelArg(fcinfo, 1);
	GetCallOptions(fcinfo, &o);
	n = GenerateIds(GetModel(model), model, PG_GETARG_TEXT_PP(0), &o, &out);
	d = palloc(sizeof(Datum) * (n + 1));
	for (int i = 0; i < n; i++)
		d[i] = Int32GetDatum(out[i]);
	PG_RETURN_ARRAYTYPE_P(construct_array(d, n, INT4OID, 4, true, TYPALIGN_INT));
}

PG_FUNCTION_INFO_V1(translate_default);
Datum
translate_default(PG_FUNCTION_ARGS)
{
	char	   *model = transformer_default_model;
	CallOptions o;
	text	   *in;
	text	   *out;

	if (model == NULL || model[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("no model to translate with"),
				 errhint("Set transformer.default_model, or call translate(input, model).")));
	memset(&o, 0, sizeof(o));
	in = PG_GETARG_TEXT_PP(0);
	TranslateDocuments(GetModel(model), model, 1, &in, &o, &out);
	PG_RETURN_TEXT_P(out);
}

/* translate(text[]): sentences decoded together, at most this many ... */
#define BATCH_SENTENCES 32
/* ... and this many beams in all */
#define BATCH_ROWS 128
/* elements of one translate(text[]) call (its bookkeeping stays far under 1 GB) */
#define MAX_BATCH_INPUTS 1000000

/*
 * Translate n sentences (text in the database encoding, each with tokens
 * and within the model's positions) together into out: sentences decode
 * in groups of BATCH_ROWS beams at most, so the weights are read once per
 * step for all of them; each result is the one a sentence alone gets.
 * Each group's buffers are the workspace's, and what did not fit goes
 * with batch_cxt.
 */
void
TranslateSentences(CachedModel *cm, const char *model, int n, text **in, const CallOptions *o, text **out)
{
	Tokenizer  *tgt = GetTokenizer(cm->target_tokenizer);
	int		  **srcs = palloc(sizeof(int *) * (n + 1));
	int		   *nsrc = palloc(sizeof(int) * (n + 1));
	TfDecodeOptions *opts = palloc(sizeof(TfDecodeOptions) * (n + 1));
	MemoryContext batch_cxt;

	/* every input checked before any decoding */
	for (int i = 0; i < n; i++)
	{
		srcs[i] = SourceIds(cm, model, in[i], &nsrc[i]);
		DecodeOptions(cm, model, nsrc[i], o, &opts[i]);
		CheckCacheSize(cm, model, opts[i].beam_size, opts[i].max_length);
	}

	batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "transformer batch", ALLOCSET_DEFAULT_SIZES);
	for (int first = 0; first < n;)
	{
		int			k = opts[first].beam_size;
		int			group = Max(1, Min(BATCH_SENTENCES, BATCH_ROWS / k));
		int			count = Min(group, n - first);
		int			longest = 0;
		int		  **ids;
		int		   *nids;
		MemoryContext old = MemoryContextSwitchTo(batch_cxt);
		SpmAlloc	a = DecodeWorkspace(batch_cxt);

		/* fewer sentences at once if their caches would be too large */
		for (int j = 0; j < count; j++)
			longest = Max(longest, opts[first + j].max_length);
		while (count > 1 && CacheBytes(cm, count * k, longest) > (double) MaxAllocSize)
			count /= 2;
		ids = palloc(sizeof(int *) * count);
		nids = palloc(sizeof(int) * count);
		tf_translate_batch(&cm->model, count, (const int *const *) srcs + first, nsrc + first,
						   opts + first, ids, nids, &a, check_interrupts);
		MemoryContextSwitchTo(old);
		/* the ids are read below, before anything else can decode */
		for (int j = 0; j < count; j++)
		{
			Size		len;
			char	   *str = DecodeIds(tgt, cm->target_tokenizer, nids[j], ids[j], &len);

			out[first + j] = FromUtf8(str, len);
		}
		ReleaseWorkspace(&a);
		MemoryContextReset(batch_cxt);
		first += count;
	}
	MemoryContextDelete(batch_cxt);
}

/* translate(inputs text[], model, ...): each element a document */
PG_FUNCTION_INFO_V1(translate_batch);
Datum
translate_batch(PG_FUNCTION_ARGS)
{
	ArrayType  *inputs;
	char	   *model;
	CachedModel *cm;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	text	  **docs;
	text	  **outs;
	Datum	   *d;
	int			dims[1];
	int			lbs[1] = {1};
	CallOptions o;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	GetCallOptions(fcinfo, &o);
	inputs = PG_GETARG_ARRAYTYPE_P(0);
	model = ModelArg(fcinfo, 1);
	cm = GetModel(model);
	if (ARR_NDIM(inputs) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("inputs must be a 1-D array")));
	deconstruct_array(inputs, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n > MAX_BATCH_INPUTS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many inputs to translate at once"),
				 errdetail("There are %d; the limit is %d.", n, MAX_BATCH_INPUTS),
				 errhint("Translate groups of rows, e.g. GROUP BY id / 32.")));
	docs = palloc(sizeof(text *) * (n + 1));
	outs = palloc(sizeof(text *) * (n + 1));
	d = palloc(sizeof(Datum) * (n + 1));
	for (int i = 0; i < n; i++)
		docs[i] = nulls[i] ? NULL : DatumGetTextPP(elems[i]);
	TranslateDocuments(cm, model, n, docs, &o, outs);
	for (int i = 0; i < n; i++)
		d[i] = outs[i] ? PointerGetDatum(outs[i]) : (Datum) 0;
	dims[0] = n;
	PG_RETURN_ARRAYTYPE_P(construct_md_array(d, nulls, n > 0 ? 1 : 0, dims, lbs,
											 TEXTOID, -1, false, TYPALIGN_INT));
}
