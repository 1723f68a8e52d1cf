/*
 * model_rows.c
 *		A model's rows: StoreModel() checks an import (from a directory,
 *		from load_model()'s bytes, or quantized) and replaces the model's
 *		rows with it, its tensors a part at a time; load_model() and
 *		drop_model().  export_model() is model_export.c's.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "ext_tables.h"
#include "model_import.h"
#include "tokenizer.h"
#include "tokenizer_share.h"
#include "weight_cache.h"

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

static bytea *
ByteaOf(const char *data, Size len)
{
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	memcpy(VARDATA(b), data, len);
	return b;
}

/* A bytea column of SPI's first row, copied into cxt; NULL if null. */
static char *
row_bytes(int col, MemoryContext cxt, Size *len)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull);
	bytea	   *b;
	char	   *out;

	*len = 0;
	if (isnull)
		return NULL;
	b = DatumGetByteaPP(d);
	*len = VARSIZE_ANY_EXHDR(b);
	out = MemoryContextAlloc(cxt, *len + 1);
	memcpy(out, VARDATA_ANY(b), *len);
	out[*len] = '\0';
	return out;
}

static char *
row_text(int col, MemoryContext cxt)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull);

	return isnull ? NULL : MemoryContextStrdup(cxt, TextDatumGetCString(d));
}

/*
 * The rows of model name but its tensors, as StoreModel() takes them
 * (tensors and header left empty), allocated in cxt; inside
 * ExtSpiConnect().  ERROR if there is no such model or its rows are
 * damaged.  quantize_model() and fine_tune() store their copies from it.
 */
void
ReadModelImport(const char *name, MemoryContext cxt, ModelImport *mi)
{
	Oid			types[1] = {TEXTOID};
	Datum		args[1] = {CStringGetTextDatum(name)};

	memset(mi, 0, sizeof(*mi));
	SPI_execute_with_args(psprintf("SELECT m.config_json, m.vocab_json, m.generation_config_json, "
								   "s.model, t.model, m.source_lang, m.target_lang, "
								   "CASE WHEN t.vocab_json IS DISTINCT FROM s.vocab_json THEN t.vocab_json END, %s, %s, %s "
								   "FROM %s m JOIN %s s ON s.name = m.source_tokenizer "
								   "JOIN %s t ON t.name = m.target_tokenizer WHERE m.name = $1",
								   ExtensionTableHasColumn("transformer_models", "languages") ?
								   "m.languages" : "NULL::jsonb",
								   ExtensionTableHasColumn("transformer_models", "embedding") ?
								   "m.embedding" : "NULL::jsonb",
								   ExtensionTableHasColumn("transformer_models", "segment_tokens") ?
								   "m.segment_tokens" : "NULL::integer",
								   ExtensionTableName("transformer_models"),
								   ExtensionTableName("transformer_tokenizers"),
								   ExtensionTableName("transformer_tokenizers")),
						  1, types, args, NULL, true, 1);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", name)));
	mi->config = row_bytes(1, cxt, &mi->config_len);
	mi->vocab = row_bytes(2, cxt, &mi->vocab_len);
	mi->gen = row_bytes(3, cxt, &mi->gen_len);
	mi->src_spm = row_bytes(4, cxt, &mi->src_len);
	mi->tgt_spm = row_bytes(5, cxt, &mi->tgt_len);
	mi->source_lang = row_text(6, cxt);
	mi->target_lang = row_text(7, cxt);
	mi->tgt_vocab = row_bytes(8, cxt, &mi->tgt_vocab_len);
	for (int col = 9; col <= 10; col++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull);

		if (!isnull)
		{
			MemoryContext old = MemoryContextSwitchTo(cxt);
			Jsonb	   *j = DatumGetJsonbPCopy(d);

			MemoryContextSwitchTo(old);
			if (col == 9)
				mi->languages = j;
			else
				mi->embedding = j;
		}
	}
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 11, &isnull);

		/* the measured segment length goes with the copy (measure_segment_length() measures it again) */
		mi->segment_tokens = isnull ? 0 : DatumGetInt32(d);
	}
	if (mi->config == NULL || mi->vocab == NULL || mi->src_spm == NULL || mi->tgt_spm == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("model \"%s\" is damaged", name),
				 errdetail("Its configuration, vocabulary or a tokenizer is null."),
				 errhint("Drop it and import it again.")));
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
