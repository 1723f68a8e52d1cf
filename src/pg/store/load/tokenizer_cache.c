/*
 * tokenizer_cache.c
 *		The per-backend cache of tokenizers (backend_cache.c): a tokenizer's
 *		row read with SPI, then its shared file mapped (tokenizer_share.c),
 *		or a copy already loaded with the same bytes used, or one built.
 */
#include "postgres.h"

#include "common/cryptohash.h"
#include "common/sha2.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "backend_cache.h"
#include "tokenizer.h"
#include "tokenizer_share.h"
#include "weight_cache.h"

static void load_tokenizer(void *entry, const char *name);

static BackendCache tokenizer_cache = {
	.name = "transformer tokenizers",
	.tables = {"transformer_tokenizers", NULL},
	.entrysize = sizeof(Tokenizer),
	.load = load_tokenizer,
};

void
InitTokenizerCache(void)
{
	BackendCacheInit(&tokenizer_cache);
}

/* SHA-256 of a tokenizer's stored bytes: model file, then vocabulary. */
static void
content_digest(const char *model, Size model_len, const TokVocab *vocab, uint8 *digest)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);
	const char *vbytes = vocab->jsonb ? (const char *) vocab->jsonb : vocab->json;
	Size		vlen = vocab->jsonb ? VARSIZE(vocab->jsonb) : vocab->json ? vocab->json_len : 0;
	uint64		lens[3] = {model_len, vlen, vocab->jsonb ? 1 : 2};

	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) lens, sizeof(lens)) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) model, model_len) < 0 ||
		(vlen > 0 && pg_cryptohash_update(ctx, (const uint8 *) vbytes, vlen) < 0) ||
		pg_cryptohash_final(ctx, digest, PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not compute SHA-256: %s", pg_cryptohash_error(ctx));
	pg_cryptohash_free(ctx);
}

static bool
same_content(const void *entry, const void *digest)
{
	return memcmp(((const Tokenizer *) entry)->digest, digest, PG_SHA256_DIGEST_LENGTH) == 0;
}

/* Error context: which tokenizer was being loaded. */
static void
load_context(void *arg)
{
	errcontext("loading tokenizer \"%s\"", (const char *) arg);
}

/*
 * Read the row with SPI and build the tokenizer in its context.  The row
 * is untrusted (anyone with INSERT on the table wrote it): it gets the
 * checks of a file.  A tokenizer with the same bytes as one already loaded
 * (a model's source and target are often the same file) shares it.
 */
static void
load_tokenizer(void *e, const char *name)
{
	Tokenizer  *entry = (Tokenizer *) e;
	char	   *query;
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];
	bool		isnull;
	Datum		d;
	bytea	   *model;
	TokVocab	vocab = {NULL, NULL, 0};
	MemoryContext caller = CurrentMemoryContext;
	const Tokenizer *same;
	int			level;
	ErrorContextCallback errcb;
	uint64		fingerprint;
	char	   *version;

	errcb.callback = load_context;
	errcb.arg = (void *) name;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	args[0] = CStringGetTextDatum(name);
	level = ExtSpiConnect();

	/* the row's version first: a shared file of it is all this backend needs */
	query = psprintf("SELECT %s FROM %s WHERE name = $1", RowVersionSql("transformer_tokenizers"),
					 ExtensionTableName("transformer_tokenizers"));
	if (SPI_execute_with_args(query, 1, argtypes, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read transformer_tokenizers");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("tokenizer \"%s\" does not exist", name),
				 errhint("Load one with import_tokenizer() or load_tokenizer().")));
	/* rows of this transaction, or of tables without file_id, stay private (fingerprint 0) */
	version = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	fingerprint = 0;
	if (version != NULL && !RowIsUncommitted(version))
		fingerprint = TokenizerFingerprint(name, version);
	if (fingerprint != 0 && MapSharedTokenizer(entry, name, fingerprint))
	{
		ExtSpiFinish(level);
		error_context_stack = errcb.previous;
		return;
	}

	query = psprintf("SELECT model, vocab, %s FROM %s WHERE name = $1",
					 ExtensionTableHasColumn("transformer_tokenizers", "vocab_json") ?
					 "vocab_json" : "NULL::bytea",
					 ExtensionTableName("transformer_tokenizers"));
	if (SPI_execute_with_args(query, 1, argtypes, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read transformer_tokenizers");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("tokenizer \"%s\" does not exist", name)));

	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tokenizer \"%s\" has no model", name)));
	model = DatumGetByteaPP(d);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	if (!isnull)
		vocab.jsonb = DatumGetJsonbP(d);
	else
	{
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
		if (!isnull)
		{
			bytea	   *b = DatumGetByteaPP(d);

			vocab.json = VARDATA_ANY(b);
			vocab.json_len = VARSIZE_ANY_EXHDR(b);
		}
	}

	content_digest(VARDATA_ANY(model), VARSIZE_ANY_EXHDR(model), &vocab, entry->digest);
	same = BackendCacheFind(&tokenizer_cache, same_content, entry->digest);
	if (same != NULL)
	{
		Tokenizer	copy = *same;

		/* its memory lives as long as ours: both belong to this cache */
		memcpy(copy.name, entry->name, NAMEDATALEN);
		copy.cxt = entry->cxt;
		*entry = copy;
	}
	else
	{
		/* built, and shared for the next backends */
		MemoryContextSwitchTo(entry->cxt);
		LoadTokenizerShared(entry, name, fingerprint, VARDATA_ANY(model), VARSIZE_ANY_EXHDR(model), &vocab);
	}
	MemoryContextSwitchTo(caller);
	ExtSpiFinish(level);
	error_context_stack = errcb.previous;
}

Tokenizer *
GetTokenizer(const char *name)
{
	if (strlen(name) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("tokenizer \"%s\" does not exist", name)));
	return (Tokenizer *) BackendCacheGet(&tokenizer_cache, name);
}
