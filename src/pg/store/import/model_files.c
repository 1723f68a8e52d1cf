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
#include "utils/numeric.h"

#include "ext_tables.h"
#include "model_store.h"
#include "pg_arrays.h"
#include "safetensors.h"
#include "server_files.h"
#include "translate.h"
#include "tokenizer_share.h"
#include "weight_cache.h"

#define MAX_TEXT_FILE ((Size) 256 * 1024 * 1024)
/* a model's tokenizers are called "<model>/source" and "<model>/target" */
#define MAX_MODEL_NAME (NAMEDATALEN - 1 - 7)


int			tensor_part_kb = 64 * 1024;

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
 * Tensors that are located in files (mi->files) are read, checked and
 * stored one at a time, so the import holds one tensor, never the model.
 */
int64
StoreModel(const char *name, const ModelImport *mi)
{
	Jsonb	   *config = ParseJsonText("config.json", mi->config, mi->config_len);
	TokVocab	vocab = VocabFromFile("vocab.json", mi->vocab, mi->vocab_len);
	TokVocab	tgt_vocab = mi->tgt_vocab ?
		VocabFromFile("target_vocab.json", mi->tgt_vocab, mi->tgt_vocab_len) : vocab;
	Jsonb	   *generation = mi->gen ? ParseJsonText("generation_config.json", mi->gen, mi->gen_len) : NULL;
	Jsonb	   *languages = mi->languages;
	ModelGeneration gen;
	TfModel		model;
	int64		params = 0;
	double		total_bytes = 0;
	double		done_bytes = 0;
	int			next_tenth = 1;
	char	   *src_name = psprintf("%s/source", name);
	char	   *tgt_name = psprintf("%s/target", name);
	char	   *q;
	Tokenizer	tcheck;
	int			level;
	StoredTensor *tensors = mi->tensors;
	int			ntensors = mi->ntensors;
	bool		parts;
	Size		part_bytes;

	CheckModelName(name);
	memset(&model, 0, sizeof(model));
	ParseModelConfig(config, &model.cfg);
	ParseGenerationConfig(generation, config, &model.cfg, &gen, CurrentMemoryContext);
	if (mi->files != NULL)
		CheckModelShapes(&model, tensors, ntensors);
	else
	{
		MemoryContext check = AllocSetContextCreate(CurrentMemoryContext, "model check",
													ALLOCSET_DEFAULT_SIZES);

		BuildModelWeights(&model, tensors, ntensors, check, NULL);
		MemoryContextDelete(check);
	}
	for (int i = 0; i < ntensors; i++)
	{
		int64		numel = 1;
		size_t		len = strlen(tensors[i].name);

		total_bytes += tensors[i].nbytes;
		/* an int8 matrix's scales are not parameters */
		if (len > 13 && strcmp(tensors[i].name + len - 13, ".weight_scale") == 0)
			continue;
		for (int k = 0; k < tensors[i].ndim; k++)
			numel *= tensors[i].shape[k];
		params += numel;
	}

	/* the vocabularies' ids must index the embeddings */
	memset(&tcheck, 0, sizeof(tcheck));
	tcheck.cxt = AllocSetContextCreate(CurrentMemoryContext, "tokenizer check", ALLOCSET_DEFAULT_SIZES);
	BuildTokenizer(&tcheck, mi->src_spm, mi->src_len, &vocab);
	if (tcheck.nmodel > model.cfg.src_vocab)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("vocab.json has ids up to %d, but the model's vocabulary has %d entries",
						tcheck.nmodel - 1, model.cfg.src_vocab)));
	/* Marian's target-language tokens, >>fra<<, are in its vocabulary */
	if (languages == NULL && ConfigFamily(config) == FAMILY_MARIAN)
		languages = MarianLanguages(&tcheck);
	MemoryContextDelete(tcheck.cxt);
	if (mi->tgt_vocab)
	{
		memset(&tcheck, 0, sizeof(tcheck));
		tcheck.cxt = AllocSetContextCreate(CurrentMemoryContext, "tokenizer check", ALLOCSET_DEFAULT_SIZES);
		BuildTokenizer(&tcheck, mi->tgt_spm, mi->tgt_len, &tgt_vocab);
		if (tcheck.nmodel > model.cfg.vocab)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("target_vocab.json has ids up to %d, but the decoder's vocabulary has %d entries",
							tcheck.nmodel - 1, model.cfg.vocab)));
		MemoryContextDelete(tcheck.cxt);
	}
	if (languages != NULL)
		CheckLanguages(languages, &model.cfg, name);

	RequireExtensionVersion020();
	LockObjectName(EXT_LOCK_MODEL, name);
	RemoveSharedWeights(name);
	/* a WordPiece tokenizer is its vocab.txt: no piece -> id map */
	StoreTokenizer(src_name, mi->src_spm, mi->src_len,
				   IsWordPiece(mi->src_spm, mi->src_len) ? NULL : &vocab);
	StoreTokenizer(tgt_name, mi->tgt_spm, mi->tgt_len,
				   IsWordPiece(mi->tgt_spm, mi->tgt_len) ? NULL : &tgt_vocab);

	level = ExtSpiConnect();
	q = psprintf("DELETE FROM %s WHERE name = $1", ExtensionTableName("transformer_models"));
	{
		Oid			types[1] = {TEXTOID};
		Datum		args[1] = {CStringGetTextDatum(name)};

		if (SPI_execute_with_args(q, 1, types, args, NULL, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not replace model \"%s\"", name);
	}
	if (languages != NULL && !ExtensionTableHasColumn("transformer_models", "languages"))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("model \"%s\" needs version 0.6.0 of extension \"transformer\"", name),
				 errdetail("Its language tokens are stored in a column that version adds."),
				 errhint("Run ALTER EXTENSION transformer UPDATE.")));
	q = psprintf("INSERT INTO %s (name, config, config_json, vocab_json, safetensors_header, "
				 "source_tokenizer, target_tokenizer, generation_config, generation_config_json, "
				 "source_lang, target_lang%s) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11%s)",
				 ExtensionTableName("transformer_models"),
				 languages ? ", languages" : "", languages ? ", $12" : "");
	{
		Oid			types[12] = {TEXTOID, JSONBOID, BYTEAOID, BYTEAOID, BYTEAOID, TEXTOID, TEXTOID,
		JSONBOID, BYTEAOID, TEXTOID, TEXTOID, JSONBOID};
		Datum		args[12];
		char		nulls[12] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', mi->gen ? ' ' : 'n', mi->gen ? ' ' : 'n',
		mi->source_lang ? ' ' : 'n', mi->target_lang ? ' ' : 'n', ' '};

		args[0] = CStringGetTextDatum(name);
		args[1] = JsonbPGetDatum(config);
		args[2] = PointerGetDatum(ByteaOf(mi->config, mi->config_len));
		args[3] = PointerGetDatum(ByteaOf(mi->vocab, mi->vocab_len));
		args[4] = PointerGetDatum(ByteaOf(mi->header, 8 + mi->hlen));
		args[5] = CStringGetTextDatum(src_name);
		args[6] = CStringGetTextDatum(tgt_name);
		args[7] = generation ? JsonbPGetDatum(generation) : (Datum) 0;
		args[8] = mi->gen ? PointerGetDatum(ByteaOf(mi->gen, mi->gen_len)) : (Datum) 0;
		args[9] = mi->source_lang ? CStringGetTextDatum(mi->source_lang) : (Datum) 0;
		args[10] = mi->target_lang ? CStringGetTextDatum(mi->target_lang) : (Datum) 0;
		args[11] = languages ? JsonbPGetDatum(languages) : (Datum) 0;
		if (SPI_execute_with_args(q, languages ? 12 : 11, types, args, nulls, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not store model \"%s\"", name);
	}
	if (mi->embedding != NULL)
	{
		Oid			types[2] = {TEXTOID, JSONBOID};
		Datum		args[2] = {CStringGetTextDatum(name), JsonbPGetDatum(mi->embedding)};

		if (!ExtensionTableHasColumn("transformer_models", "embedding"))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("model \"%s\" needs version 0.8.0 of extension \"transformer\"", name),
					 errdetail("Encoder-only models keep their embedding settings in a column that version adds."),
					 errhint("Run ALTER EXTENSION transformer UPDATE.")));
		q = psprintf("UPDATE %s SET embedding = $2 WHERE name = $1", ExtensionTableName("transformer_models"));
		if (SPI_execute_with_args(q, 2, types, args, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not store model \"%s\"", name);
	}
	if (mi->segment_tokens > 0 && ExtensionTableHasColumn("transformer_models", "segment_tokens"))
	{
		Oid			types[2] = {TEXTOID, INT4OID};
		Datum		args[2] = {CStringGetTextDatum(name), Int32GetDatum(mi->segment_tokens)};

		q = psprintf("UPDATE %s SET segment_tokens = $2 WHERE name = $1", ExtensionTableName("transformer_models"));
		if (SPI_execute_with_args(q, 2, types, args, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not store model \"%s\"", name);
	}
	/*
	 * Each tensor in rows of at most transformer.tensor_part_size bytes
	 * (part 0, 1, ...; a multiple of 8, so no element is cut), each read,
	 * checked, stored and freed in turn: the import holds one part.
	 */
	parts = TensorsHaveParts();
	part_bytes = parts ? Max((Size) tensor_part_kb * 1024 / 8 * 8, 8) : MaxAllocSize;
	q = psprintf("INSERT INTO %s (model, name, shape, dtype, data_offset, data%s) "
				 "VALUES ($1, $2, $3, $4, $5, $6%s)", ExtensionTableName("transformer_tensors"),
				 parts ? ", part" : "", parts ? ", $7" : "");
	for (int i = 0; i < ntensors; i++)
	{
		StoredTensor *t = &tensors[i];
		Oid			types[7] = {TEXTOID, TEXTOID, INT8OID, TEXTOID, INT8OID, BYTEAOID, INT4OID};
		Datum		args[7];
		Datum	   *dims = palloc(sizeof(Datum) * (t->ndim + 1));
		int			npart = t->nbytes == 0 ? 1 : (int) ((t->nbytes + part_bytes - 1) / part_bytes);

		types[2] = INT8ARRAYOID;
		for (int k = 0; k < t->ndim; k++)
			dims[k] = Int64GetDatum(t->shape[k]);
		args[0] = CStringGetTextDatum(name);
		args[1] = CStringGetTextDatum(t->name);
		args[2] = PointerGetDatum(construct_array(dims, t->ndim, INT8OID, 8, true, TYPALIGN_DOUBLE));
		args[3] = CStringGetTextDatum(t->dtype);
		args[4] = Int64GetDatum(t->offset);
		for (int p = 0; p < npart; p++)
		{
			Size		off = (Size) p * part_bytes;
			Size		len = Min(part_bytes, t->nbytes - off);
			StoredTensor piece = *t;
			bytea	   *data;

			CHECK_FOR_INTERRUPTS();
			piece.nbytes = len;
			if (mi->files != NULL)
			{
				piece.src_offset = t->src_offset + off;
				data = ReadTensorBytea(mi->files, &piece);
			}
			else
			{
				data = ByteaOf(t->data + off, len);
				piece.data = VARDATA(data);
			}
			CheckTensorValues(&piece);
			args[5] = PointerGetDatum(data);
			args[6] = Int32GetDatum(p);
			if (SPI_execute_with_args(q, parts ? 7 : 6, types, args, NULL, false, 0) != SPI_OK_INSERT)
				elog(ERROR, "could not store tensor \"%s\"", t->name);
			pfree(data);
		}
		/* progress, for imports of more than 256 MB */
		done_bytes += t->nbytes;
		if (total_bytes > 256.0 * 1024 * 1024 && done_bytes >= total_bytes * next_tenth / 10.0)
		{
			ereport(NOTICE,
					(errmsg("model \"%s\": stored %d of %d tensors, %.0f of %.0f MB",
							name, i + 1, ntensors, done_bytes / 1048576.0, total_bytes / 1048576.0)));
			while (done_bytes >= total_bytes * next_tenth / 10.0)
				next_tenth++;
		}
	}
	ExtSpiFinish(level);
	return params;
}

static char *
ModelFilePath(const char *dir, const char *file)
{
	return psprintf("%s/%s", dir, file);
}

static bool
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
static char *
NeededFile(const char *dir, const char *file, const char *what, Size *len)
{
	if (!HasFile(dir, file))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FILE),
				 errmsg("model directory \"%s\" lacks %s", dir, file),
				 errdetail("It is %s.", what)));
	return ReadServerFile(ModelFilePath(dir, file), dir, MAX_TEXT_FILE, len);
}

static char *
OptionalFile(const char *dir, const char *file, Size *len)
{
	*len = 0;
	if (!HasFile(dir, file))
		return NULL;
	return ReadServerFile(ModelFilePath(dir, file), dir, MAX_TEXT_FILE, len);
}

/* A key of a JSON object, or NULL. */
static JsonbValue *
JsonKey(Jsonb *j, const char *key)
{
	if (j == NULL || !JB_ROOT_IS_OBJECT(j) || JB_ROOT_IS_SCALAR(j))
		return NULL;
	return getKeyJsonValueFromContainer(&j->root, key, strlen(key), NULL);
}

static bool
JsonTrue(Jsonb *j, const char *key)
{
	JsonbValue *v = JsonKey(j, key);

	return v != NULL && v->type == jbvBool && v->val.boolean;
}

/* ------------------------------------------------------------ languages */

typedef struct LangList
{
	int			n;
	char	  **code;
	char	  **token;
	int		   *id;
} LangList;

static void
lang_add(LangList *l, const char *code, const char *token, int id)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->code[i], code) == 0)
			return;
	if (l->n % 64 == 0)
	{
		l->code = l->n ? repalloc(l->code, sizeof(char *) * (l->n + 64)) : palloc(sizeof(char *) * 64);
		l->token = l->n ? repalloc(l->token, sizeof(char *) * (l->n + 64)) : palloc(sizeof(char *) * 64);
		l->id = l->n ? repalloc(l->id, sizeof(int) * (l->n + 64)) : palloc(sizeof(int) * 64);
	}
	l->code[l->n] = pstrdup(code);
	l->token[l->n] = pstrdup(token);
	l->id[l->n] = id;
	l->n++;
}

/* {"source": ..., "target": ..., "codes": [{"code", "token", "id"}, ...]} */
static Jsonb *
LanguagesJsonb(const LangList *l, const char *source, const char *target)
{
	StringInfoData s;

	if (l->n == 0)
		return NULL;
	initStringInfo(&s);
	appendStringInfo(&s, "{\"source\": \"%s\", \"target\": \"%s\", \"codes\": [", source, target);
	for (int i = 0; i < l->n; i++)
	{
		appendStringInfoString(&s, i ? ", {\"code\": " : "{\"code\": ");
		escape_json(&s, l->code[i]);
		appendStringInfoString(&s, ", \"token\": ");
		escape_json(&s, l->token[i]);
		appendStringInfo(&s, ", \"id\": %d}", l->id[i]);
	}
	appendStringInfoString(&s, "]}");
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(s.data)));
}

/* MarianTokenizer's language codes: >>fra<< pieces of the vocabulary */
Jsonb *
MarianLanguages(const Tokenizer *t)
{
	LangList	l;

	memset(&l, 0, sizeof(l));
	for (int id = 0; id < t->nmodel; id++)
	{
		const char *p = t->model_piece[id];
		uint32		len = t->model_piece_len[id];

		if (p != NULL && len > 4 && len <= 36 && strncmp(p, ">>", 2) == 0 &&
			strncmp(p + len - 2, "<<", 2) == 0)
		{
			char	   *token = pnstrdup(p, len);
			char	   *code = pnstrdup(p + 2, len - 4);

			lang_add(&l, code, token, id);
		}
	}
	return LanguagesJsonb(&l, "none", "prefix");
}

static bool
is_nllb_code(const char *s)
{
	/* NLLB's codes: ISO 639-3 language, ISO 15924 script, as deu_Latn */
	size_t		len = strlen(s);

	if (len != 8 || s[3] != '_')
		return false;
	for (int i = 0; i < 3; i++)
		if (s[i] < 'a' || s[i] > 'z')
			return false;
	return s[4] >= 'A' && s[4] <= 'Z' && s[5] >= 'a' && s[5] <= 'z' &&
		s[6] >= 'a' && s[6] <= 'z' && s[7] >= 'a' && s[7] <= 'z';
}

/* M2M100's language tokens: __de__; the code is de */
static char *
m2m100_code(const char *s)
{
	size_t		len = strlen(s);

	if (len < 5 || len > 36 || strncmp(s, "__", 2) != 0 || strcmp(s + len - 2, "__") != 0)
		return NULL;
	return pnstrdup(s + 2, len - 4);
}

static char *
token_content(JsonbValue *v)
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

static int
json_int(JsonbValue *v, int dflt)
{
	if (v == NULL || v->type != jbvNumeric)
		return dflt;
	return DatumGetInt32(DirectFunctionCall1(numeric_int4, NumericGetDatum(v->val.numeric)));
}

/*
 * The language tokens of an NLLB or M2M100 tokenizer, with their ids, as
 * transformers finds them: tokenizer_config.json's added_tokens_decoder
 * (id -> token), else tokenizer.json's added_tokens, else the
 * additional_special_tokens in order, numbered from first_id
 * (NllbTokenizer: after the SentencePiece pieces and the fairseq offset;
 * M2M100Tokenizer: after vocab.json).
 */
static void
find_language_tokens(const char *dir, Jsonb *tc, bool nllb, int first_id, LangList *l)
{
	JsonbValue *v = JsonKey(tc, "added_tokens_decoder");
	Size		len;
	char	   *s;

	if (v != NULL && v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data))
	{
		JsonbIterator *it = JsonbIteratorInit(v->val.binary.data);
		JsonbValue	k;
		JsonbIteratorToken tok;

		while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
		{
			char	   *idstr;
			char	   *content;
			char	   *code;
			char	   *end;
			long		id;

			if (tok != WJB_KEY)
				continue;
			idstr = pnstrdup(k.val.string.val, k.val.string.len);
			tok = JsonbIteratorNext(&it, &k, true);
			content = token_content(&k);
			id = strtol(idstr, &end, 10);
			if (content == NULL || *end != '\0' || id < 0 || id > INT_MAX)
				continue;
			code = nllb ? (is_nllb_code(content) ? content : NULL) : m2m100_code(content);
			if (code)
				lang_add(l, code, content, (int) id);
		}
		if (l->n > 0)
			return;
	}
	s = OptionalFile(dir, "tokenizer.json", &len);
	if (s != NULL)
	{
		Jsonb	   *tj = ParseJsonText("tokenizer.json", s, len);
		JsonbValue *added = JsonKey(tj, "added_tokens");

		if (added != NULL && added->type == jbvBinary && JsonContainerIsArray(added->val.binary.data))
		{
			int			n = JsonContainerSize(added->val.binary.data);

			for (int i = 0; i < n; i++)
			{
				JsonbValue *e = getIthJsonbValueFromContainer(added->val.binary.data, i);
				char	   *content;
				char	   *code;
				int			id;

				if (e == NULL || e->type != jbvBinary || !JsonContainerIsObject(e->val.binary.data))
					continue;
				content = token_content(e);
				id = json_int(getKeyJsonValueFromContainer(e->val.binary.data, "id", 2, NULL), -1);
				if (content == NULL || id < 0)
					continue;
				code = nllb ? (is_nllb_code(content) ? content : NULL) : m2m100_code(content);
				if (code)
					lang_add(l, code, content, id);
			}
		}
		pfree(s);
		if (l->n > 0)
			return;
	}
	/* additional_special_tokens, from tokenizer_config.json, else special_tokens_map.json */
	v = JsonKey(tc, "additional_special_tokens");
	if (v == NULL)
	{
		s = OptionalFile(dir, "special_tokens_map.json", &len);
		if (s != NULL)
			v = JsonKey(ParseJsonText("special_tokens_map.json", s, len), "additional_special_tokens");
	}
	if (v != NULL && v->type == jbvBinary && JsonContainerIsArray(v->val.binary.data))
	{
		int			n = JsonContainerSize(v->val.binary.data);
		int			next = first_id;

		for (int i = 0; i < n; i++)
		{
			char	   *content = token_content(getIthJsonbValueFromContainer(v->val.binary.data, i));
			char	   *code;

			if (content == NULL)
				continue;
			code = nllb ? (is_nllb_code(content) ? content : NULL) : m2m100_code(content);
			if (code)
				lang_add(l, code, content, next++);
		}
	}
}

/*
 * NllbTokenizer's ids of the SentencePiece pieces, as vocab.json text:
 * fairseq's <s> 0, <pad> 1, </s> 2, <unk> 3, then each piece at its
 * SentencePiece id + 1 (the fairseq offset).
 */
static char *
NllbVocab(const char *spm, Size spm_len, int *npieces, Size *len)
{
	SpmAlloc	a = PgAllocator(CurrentMemoryContext);
	char		err[256];
	SpmModel   *m = spm_load(spm, spm_len, &a, err, sizeof(err));
	StringInfoData s;

	if (m == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid SentencePiece model \"sentencepiece.bpe.model\""),
				 errdetail_internal("%s", err)));
	initStringInfo(&s);
	appendStringInfoString(&s, "{\"<s>\": 0, \"<pad>\": 1, \"</s>\": 2, \"<unk>\": 3");
	for (int i = 3; i < m->npieces; i++)
	{
		const SpmPiece *p = &m->pieces[i];

		if ((p->len == 3 && memcmp(p->str, "<s>", 3) == 0) ||
			(p->len == 4 && memcmp(p->str, "</s>", 4) == 0) ||
			(p->len == 5 && (memcmp(p->str, "<unk>", 5) == 0 || memcmp(p->str, "<pad>", 5) == 0)))
			continue;
		appendStringInfoString(&s, ", ");
		escape_json(&s, pnstrdup(p->str, p->len));
		appendStringInfo(&s, ": %d", i + 1);
	}
	appendStringInfoChar(&s, '}');
	*npieces = m->npieces;
	*len = s.len;
	return s.data;
}

/* ------------------------------------------------------------ encoders */

/*
 * XLMRobertaTokenizer's ids: fairseq's <s> 0, <pad> 1, </s> 2, <unk> 3,
 * each SentencePiece piece at its id + 1, and <mask> after them all.
 */
static char *
XlmrVocab(const char *spm, Size spm_len, Size *len)
{
	int			npieces;
	Size		l;
	char	   *v = NllbVocab(spm, spm_len, &npieces, &l);

	v[l - 1] = '\0';			/* the closing brace */
	v = psprintf("%s, \"<mask>\": %d}", v, npieces + 1);
	*len = strlen(v);
	return v;
}

/* A token named by tokenizer_config.json (a string or an AddedToken), or dflt. */
static char *
ConfigToken(Jsonb *tc, const char *key, const char *dflt)
{
	JsonbValue *v = JsonKey(tc, key);
	char	   *s = v ? token_content(v) : NULL;

	return s ? s : (char *) dflt;
}

/* tokenizer_config.json's boolean, else tokenizer.json's normalizer's, else dflt; -1 for null */
static int
BertSetting(Jsonb *tc, const char *tc_key, Jsonb *norm, const char *norm_key, int dflt)
{
	JsonbValue *v = JsonKey(tc, tc_key);

	if (v == NULL)
		v = JsonKey(norm, norm_key);
	if (v == NULL)
		return dflt;
	if (v->type == jbvNull)
		return -1;
	if (v->type != jbvBool)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tokenizer setting \"%s\" must be true, false or null", tc_key)));
	return v->val.boolean;
}

static void
CheckAsciiToken(const char *what, const char *s)
{
	if (strlen(s) == 0 || strlen(s) > 60)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tokenizer's %s must have 1 to 60 bytes", what)));
	for (const char *c = s; *c; c++)
		if ((unsigned char) *c < 0x20 || (unsigned char) *c >= 0x7f || *c == '"' || *c == '\\')
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("tokenizer's %s \"%s\" is not supported", what, s),
					 errdetail("WordPiece special tokens and prefixes of printable ASCII are supported.")));
}

/*
 * BertTokenizer's files: vocab.txt, with the normalizer's settings from
 * tokenizer_config.json (do_lower_case, strip_accents,
 * tokenize_chinese_chars; BertTokenizerFast lets them override
 * tokenizer.json's), else from tokenizer.json's BertNormalizer, else
 * BertTokenizer's defaults.  Stored as WORDPIECE_MAGIC, the options, vocab.txt.
 */
static void
ReadBertTokenizer(const char *dir, Jsonb *tc, ModelImport *mi, int *cls_id, int *sep_id)
{
	Size		vlen;
	char	   *vocab = NeededFile(dir, "vocab.txt", "BertTokenizer's vocabulary (WordPiece)", &vlen);
	Size		tjlen;
	char	   *tj = OptionalFile(dir, "tokenizer.json", &tjlen);
	Jsonb	   *norm = NULL;
	Jsonb	   *wpm = NULL;
	JsonbValue *tj_added = NULL;
	int			lower,
				strip,
				chinese;
	char	   *unk = ConfigToken(tc, "unk_token", "[UNK]");
	char	   *cls = ConfigToken(tc, "cls_token", "[CLS]");
	char	   *sep = ConfigToken(tc, "sep_token", "[SEP]");
	char	   *prefix = "##";
	int			max_chars = 100;
	StringInfoData b;
	Tokenizer	t;

	if (tj != NULL)
	{
		Jsonb	   *j = ParseJsonText("tokenizer.json", tj, tjlen);
		JsonbValue *n = JsonKey(j, "normalizer");
		JsonbValue *m = JsonKey(j, "model");

		if (n != NULL && n->type == jbvBinary && JsonContainerIsObject(n->val.binary.data))
			norm = JsonbValueToJsonb(n);
		if (m != NULL && m->type == jbvBinary && JsonContainerIsObject(m->val.binary.data))
			wpm = JsonbValueToJsonb(m);
		tj_added = JsonKey(j, "added_tokens");
		if (wpm != NULL)
		{
			char	   *p = JsonStringKey(wpm, "continuing_subword_prefix");

			if (p != NULL)
				prefix = p;
			max_chars = json_int(JsonKey(wpm, "max_input_chars_per_word"), 100);
		}
	}
	lower = BertSetting(tc, "do_lower_case", norm, "lowercase", 1);
	strip = BertSetting(tc, "strip_accents", norm, "strip_accents", -1);
	chinese = BertSetting(tc, "tokenize_chinese_chars", norm, "handle_chinese_chars", 1);
	CheckAsciiToken("unk_token", unk);
	CheckAsciiToken("continuing_subword_prefix", prefix);
	if (strlen(prefix) > 15)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tokenizer's continuing_subword_prefix must have 1 to 15 bytes")));
	if (max_chars < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tokenizer's max_input_chars_per_word must be positive")));

	initStringInfo(&b);
	appendStringInfoString(&b, WORDPIECE_MAGIC);
	appendStringInfo(&b, "{\"clean_text\": true, \"handle_chinese_chars\": %s, \"lowercase\": %s, "
					 "\"strip_accents\": %s, \"unk_token\": \"%s\", \"continuing_subword_prefix\": \"%s\", "
					 "\"max_input_chars_per_word\": %d, \"added_tokens\": [",
					 chinese != 0 ? "true" : "false", lower != 0 ? "true" : "false",
					 strip < 0 ? "null" : strip ? "true" : "false", unk, prefix, max_chars);
	/* the tokens split off first: tokenizer.json's added_tokens, else the special tokens */
	{
		int			nadded = 0;
		JsonbValue *added = tj_added;

		if (added != NULL && added->type == jbvBinary && JsonContainerIsArray(added->val.binary.data))
		{
			int			n = JsonContainerSize(added->val.binary.data);

			for (int i = 0; i < n; i++)
			{
				JsonbValue *e = getIthJsonbValueFromContainer(added->val.binary.data, i);
				char	   *content = e ? token_content(e) : NULL;

				if (content == NULL)
					continue;
				CheckAsciiToken("added token", content);
				appendStringInfo(&b, "%s\"%s\"", nadded++ ? ", " : "", content);
			}
		}
		else
		{
			const char *specials[] = {ConfigToken(tc, "pad_token", "[PAD]"), unk, cls, sep,
			ConfigToken(tc, "mask_token", "[MASK]")};

			for (int i = 0; i < lengthof(specials); i++)
			{
				CheckAsciiToken("special token", specials[i]);
				appendStringInfo(&b, "%s\"%s\"", nadded++ ? ", " : "", specials[i]);
			}
		}
	}
	appendStringInfoString(&b, "]}\n");
	appendBinaryStringInfo(&b, vocab, vlen);
	mi->src_spm = mi->tgt_spm = b.data;
	mi->src_len = mi->tgt_len = b.len;
	mi->vocab = "{}";
	mi->vocab_len = 2;

	memset(&t, 0, sizeof(t));
	t.cxt = AllocSetContextCreate(CurrentMemoryContext, "tokenizer check", ALLOCSET_DEFAULT_SIZES);
	BuildTokenizer(&t, b.data, b.len, NULL);
	*cls_id = tf_wordpiece_id(t.wp, cls, strlen(cls));
	*sep_id = tf_wordpiece_id(t.wp, sep, strlen(sep));
	if (*cls_id < 0 || *sep_id < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("vocab.txt lacks the token \"%s\"", *cls_id < 0 ? cls : sep),
				 errdetail("BertTokenizer puts it around every input.")));
	MemoryContextDelete(t.cxt);
}

/* A file named by modules.json: a path inside the directory. */
static char *
ModulePath(const char *dir, const char *path, const char *file)
{
	if (path[0] == '/' || strstr(path, "..") != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("modules.json names the path \"%s\", outside the model directory", path)));
	return path[0] ? psprintf("%s/%s", path, file) : pstrdup(file);
}

/*
 * sentence-transformers' pipeline: modules.json lists the modules (the
 * Transformer, then Pooling, optionally Normalize); 1_Pooling/config.json
 * says how; sentence_bert_config.json the longest input.  A directory
 * without modules.json is a plain Hugging Face model, which
 * sentence-transformers reads with mean pooling.
 */
static Jsonb *
ReadEmbeddingSettings(const char *dir, Jsonb *tc, const TfConfig *c, int cls_id, int sep_id)
{
	Size		len;
	char	   *s = OptionalFile(dir, "modules.json", &len);
	const char *pooling = "mean";
	bool		normalize = false;
	int			max_len = c->max_pos;

	if (s != NULL)
	{
		Jsonb	   *mods = ParseJsonText("modules.json", s, len);
		JsonbIterator *it;
		JsonbValue	v;
		JsonbIteratorToken tok;
		bool		have_pooling = false;

		if (!JB_ROOT_IS_ARRAY(mods) || JB_ROOT_IS_SCALAR(mods))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("modules.json must be a JSON array")));
		it = JsonbIteratorInit(&mods->root);
		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			Jsonb	   *m;
			char	   *type;
			JsonbValue *pv;
			char	   *path;

			if (tok != WJB_ELEM)
				continue;
			if (v.type != jbvBinary || !JsonContainerIsObject(v.val.binary.data))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("modules.json must list objects")));
			m = JsonbValueToJsonb(&v);
			pv = JsonKey(m, "type");
			type = pv && pv->type == jbvString ? pnstrdup(pv->val.string.val, pv->val.string.len) : "";
			pv = JsonKey(m, "path");
			path = pv && pv->type == jbvString ? pnstrdup(pv->val.string.val, pv->val.string.len) : "";
			if (strcmp(type, "sentence_transformers.models.Transformer") == 0)
				continue;
			if (strcmp(type, "sentence_transformers.models.Normalize") == 0)
			{
				normalize = true;
				continue;
			}
			if (strcmp(type, "sentence_transformers.models.Pooling") == 0 && !have_pooling)
			{
				Size		plen;
				char	   *pf = ModulePath(dir, path, "config.json");
				char	   *ps = NeededFile(dir, pf, "the configuration of the Pooling module modules.json lists", &plen);
				Jsonb	   *pc = ParseJsonText(pf, ps, plen);
				static const char *const modes[][2] = {
					{"pooling_mode_cls_token", "cls"}, {"pooling_mode_mean_tokens", "mean"},
					{"pooling_mode_max_tokens", "max"}, {"pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"},
					{"pooling_mode_weightedmean_tokens", NULL}, {"pooling_mode_lasttoken", NULL}
				};
				int			nmodes = 0;

				for (int i = 0; i < lengthof(modes); i++)
					if (JsonTrue(pc, modes[i][0]))
					{
						if (modes[i][1] == NULL)
							ereport(ERROR,
									(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
									 errmsg("pooling mode \"%s\" is not supported", modes[i][0]),
									 errhint("Supported are cls_token, mean_tokens, max_tokens and mean_sqrt_len_tokens.")));
						pooling = modes[i][1];
						nmodes++;
					}
				if (nmodes != 1)
					ereport(ERROR,
							(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							 errmsg("%s sets %d pooling modes", pf, nmodes),
							 errdetail("embed() supports exactly one (sentence-transformers concatenates several).")));
				have_pooling = true;
				continue;
			}
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("sentence-transformers module \"%s\" is not supported", type),
					 errdetail("embed() runs Transformer, Pooling and Normalize modules.")));
		}
	}
	s = OptionalFile(dir, "sentence_bert_config.json", &len);
	if (s != NULL)
	{
		Jsonb	   *sb = ParseJsonText("sentence_bert_config.json", s, len);

		max_len = json_int(JsonKey(sb, "max_seq_length"), max_len);
	}
	else
		max_len = json_int(JsonKey(tc, "model_max_length"), max_len) > 0 ?
			Min(json_int(JsonKey(tc, "model_max_length"), max_len), max_len) : max_len;
	max_len = Max(2, Min(max_len, c->max_pos));
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(
		psprintf("{\"pooling\": \"%s\", \"normalize\": %s, \"max_seq_length\": %d, \"cls_id\": %d, \"sep_id\": %d}",
				 pooling, normalize ? "true" : "false", max_len, cls_id, sep_id))));
}

/*
 * import_tokenizer(name, dir): a Hugging Face tokenizer directory on its
 * own, BertTokenizer's (vocab.txt) or XLMRobertaTokenizer's
 * (sentencepiece.bpe.model, fairseq's ids).  *vocab is NULL for WordPiece.
 */
void
ReadTokenizerDirectory(const char *dir, char **model, Size *len, char **vocab, Size *vlen)
{
	Size		tclen;
	char	   *tcs = OptionalFile(dir, "tokenizer_config.json", &tclen);
	Jsonb	   *tc = tcs ? ParseJsonText("tokenizer_config.json", tcs, tclen) : NULL;
	ModelImport mi;

	memset(&mi, 0, sizeof(mi));
	if (HasFile(dir, "vocab.txt"))
	{
		int			cls_id,
					sep_id;

		ReadBertTokenizer(dir, tc, &mi, &cls_id, &sep_id);
		*vocab = NULL;
		*vlen = 0;
	}
	else if (HasFile(dir, "sentencepiece.bpe.model"))
	{
		mi.src_spm = NeededFile(dir, "sentencepiece.bpe.model", "XLMRobertaTokenizer's SentencePiece model", &mi.src_len);
		*vocab = XlmrVocab(mi.src_spm, mi.src_len, vlen);
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FILE),
				 errmsg("directory \"%s\" has no tokenizer", dir),
				 errdetail("import_tokenizer() reads BertTokenizer's vocab.txt or XLMRobertaTokenizer's sentencepiece.bpe.model from a directory.")));
	*model = (char *) mi.src_spm;
	*len = mi.src_len;
}

/* An encoder-only directory's tokenizer and sentence-transformers settings. */
static void
ReadEncoderFiles(const char *dir, ModelFamily family, Jsonb *config, Jsonb *tc, ModelImport *mi)
{
	TfConfig	c;
	int			cls_id,
				sep_id;

	ParseModelConfig(config, &c);
	if (family == FAMILY_XLMR)
	{
		Size		len;
		char	   *spm = NeededFile(dir, "sentencepiece.bpe.model", "XLMRobertaTokenizer's SentencePiece model", &len);

		mi->src_spm = mi->tgt_spm = spm;
		mi->src_len = mi->tgt_len = len;
		mi->vocab = XlmrVocab(spm, len, &mi->vocab_len);
		cls_id = 0;				/* <s> */
		sep_id = 2;				/* </s> */
	}
	else
		ReadBertTokenizer(dir, tc, mi, &cls_id, &sep_id);
	mi->embedding = ReadEmbeddingSettings(dir, tc, &c, cls_id, sep_id);
}

/* A string key of tokenizer_config.json of at most 32 bytes, or dflt. */
static char *
LangKey(Jsonb *tc, const char *key, const char *dflt)
{
	char	   *s = tc ? JsonStringKey(tc, key) : NULL;

	return s ? s : (char *) dflt;
}

/*
 * An M2M100-family directory's tokenizer: NLLB-200's (sentencepiece.bpe.model
 * with the fairseq ids) or M2M100's (vocab.json and sentencepiece.bpe.model),
 * and where the source language token goes: NllbTokenizer puts it before
 * the text ([deu_Latn] ... </s>), or after it with legacy_behaviour
 * (... </s> deu_Latn); M2M100Tokenizer before ([__de__] ... </s>).  The
 * target language is forced as the first generated token.
 */
static void
ReadM2M100Tokenizer(const char *dir, Jsonb *tc, ModelImport *mi)
{
	char	   *cls = tc ? JsonStringKey(tc, "tokenizer_class") : NULL;
	bool		nllb = cls ? strncmp(cls, "Nllb", 4) == 0 : !HasFile(dir, "vocab.json");
	LangList	l;
	Size		len;
	char	   *spm = NeededFile(dir, "sentencepiece.bpe.model", "the SentencePiece model of the tokenizer", &len);
	const char *source;

	memset(&l, 0, sizeof(l));
	mi->src_spm = mi->tgt_spm = spm;
	mi->src_len = mi->tgt_len = len;
	if (nllb)
	{
		int			npieces;

		mi->vocab = NllbVocab(spm, len, &npieces, &mi->vocab_len);
		find_language_tokens(dir, tc, true, npieces + 1, &l);
		source = JsonTrue(tc, "legacy_behaviour") ? "suffix" : "prefix";
		mi->source_lang = LangKey(tc, "src_lang", "eng_Latn");
	}
	else
	{
		TokVocab	v;
		Tokenizer	t;

		mi->vocab = NeededFile(dir, "vocab.json", "M2M100Tokenizer's vocabulary", &mi->vocab_len);
		v = VocabFromFile("vocab.json", mi->vocab, mi->vocab_len);
		memset(&t, 0, sizeof(t));
		t.cxt = AllocSetContextCreate(CurrentMemoryContext, "tokenizer check", ALLOCSET_DEFAULT_SIZES);
		BuildTokenizer(&t, spm, len, &v);
		find_language_tokens(dir, tc, false, t.nmodel, &l);
		MemoryContextDelete(t.cxt);
		source = "prefix";
		mi->source_lang = LangKey(tc, "src_lang", "en");
	}
	mi->target_lang = LangKey(tc, "tgt_lang", NULL);
	if (l.n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model directory \"%s\" names no language tokens", dir),
				 errdetail("%s models need them: tokenizer_config.json's added_tokens_decoder or additional_special_tokens, or tokenizer.json's added_tokens.",
						   nllb ? "NLLB" : "M2M100")));
	mi->languages = LanguagesJsonb(&l, source, "forced_bos");
}

/* A Marian directory's tokenizers: source.spm, target.spm, vocab.json, and target_vocab.json if separate. */
static void
ReadMarianTokenizers(const char *dir, Jsonb *tc, ModelImport *mi)
{
	mi->src_spm = NeededFile(dir, "source.spm", "the SentencePiece model of the source language", &mi->src_len);
	mi->tgt_spm = NeededFile(dir, "target.spm", "the SentencePiece model of the target language", &mi->tgt_len);
	mi->vocab = NeededFile(dir, "vocab.json", "MarianTokenizer's vocabulary", &mi->vocab_len);
	if (JsonTrue(tc, "separate_vocabs"))
		mi->tgt_vocab = NeededFile(dir, "target_vocab.json",
								   "the target vocabulary of a tokenizer with separate_vocabs", &mi->tgt_vocab_len);
	mi->source_lang = tc ? JsonStringKey(tc, "source_lang") : NULL;
	mi->target_lang = tc ? JsonStringKey(tc, "target_lang") : NULL;
	/* the reliable segment length measure_segment_length() found, as the bundled model records it */
	{
		JsonbValue *v = JsonKey(tc, "segment_tokens");

		if (v != NULL && v->type == jbvNumeric)
		{
			int32		t = DatumGetInt32(DirectFunctionCall1(numeric_int4, NumericGetDatum(v->val.numeric)));

			if (t < 4 || t > 100000)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("segment_tokens in tokenizer_config.json must be between 4 and 100000, not %d", t)));
			mi->segment_tokens = t;
		}
	}
}

/*
 * Import a model directory as Hugging Face publishes it: config.json,
 * the weights (checkpoint_files.c), the tokenizer of its family,
 * generation_config.json and tokenizer_config.json if present.
 */
static int64
ImportDirectory(const char *name, const char *dir)
{
	ModelImport mi;
	CheckpointFiles files;
	Jsonb	   *config;
	Jsonb	   *tc = NULL;
	Size		len;
	char	   *s;
	ModelFamily family;

	memset(&mi, 0, sizeof(mi));
	{
		struct stat st;

		if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FILE),
					 errmsg("model directory \"%s\" does not exist", dir),
					 errhint("import_model() reads a directory on the database server, as the server's operating system user sees it.")));
	}
	mi.config = NeededFile(dir, "config.json", "the model's configuration", &mi.config_len);
	config = ParseJsonText("config.json", mi.config, mi.config_len);
	family = ConfigFamily(config);
	s = OptionalFile(dir, "tokenizer_config.json", &len);
	if (s != NULL)
		tc = ParseJsonText("tokenizer_config.json", s, len);

	mi.ntensors = LocateCheckpoint(dir, family, &files, &mi.tensors,
								   (char **) &mi.header, &mi.hlen);
	mi.files = &files;
	if (family == FAMILY_BERT || family == FAMILY_XLMR)
		ReadEncoderFiles(dir, family, config, tc, &mi);
	else if (family == FAMILY_M2M100)
		ReadM2M100Tokenizer(dir, tc, &mi);
	else
		ReadMarianTokenizers(dir, tc, &mi);
	/* optional, as in Hugging Face's from_pretrained() */
	mi.gen = OptionalFile(dir, "generation_config.json", &mi.gen_len);
	return StoreModel(name, &mi);
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
				 errhint("The extension bundles multi30k_de_en (translation) and multi30k_sentence_de_en (sentence embeddings); import other models with import_model(name, dir).")));

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
	{
		ModelImport mi;

		memset(&mi, 0, sizeof(mi));
		mi.config = VARDATA_ANY(config);
		mi.config_len = VARSIZE_ANY_EXHDR(config);
		mi.header = VARDATA_ANY(st);
		mi.hlen = hlen;
		mi.tensors = tensors;
		mi.ntensors = n;
		mi.src_spm = VARDATA_ANY(src);
		mi.src_len = VARSIZE_ANY_EXHDR(src);
		mi.tgt_spm = VARDATA_ANY(tgt);
		mi.tgt_len = VARSIZE_ANY_EXHDR(tgt);
		mi.vocab = VARDATA_ANY(vocab);
		mi.vocab_len = VARSIZE_ANY_EXHDR(vocab);
		mi.gen = gen ? VARDATA_ANY(gen) : NULL;
		mi.gen_len = gen ? VARSIZE_ANY_EXHDR(gen) : 0;
		PG_RETURN_INT64(StoreModel(name, &mi));
	}
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

