/*
 * tokenizer.c
 *		Tokenizers from transformer_tokenizers: building them (model file
 *		and Marian vocabulary) and the per-backend cache (backend_cache.c).
 */
#include "postgres.h"


#include "common/cryptohash.h"
#include "common/sha2.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "backend_cache.h"
#include "tokenizer.h"
#include "weight_cache.h"

/* Model ids above this are refused: real vocabularies have ~10^5. */
#define MAX_VOCAB_ID 10000000

static void load_tokenizer(void *entry, const char *name);

static BackendCache tokenizer_cache = {
	.name = "transformer tokenizers",
	.tables = {"transformer_tokenizers", NULL},
	.entrysize = sizeof(Tokenizer),
	.load = load_tokenizer,
};

static void *
pg_alloc(void *ctx, size_t size)
{
	if (size > MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the tokenizer would need a buffer of %zu bytes", size),
				 errdetail("The limit is %zu bytes.", (size_t) MaxAllocSize)));
	return MemoryContextAllocZero((MemoryContext) ctx, size);
}

SpmAlloc
PgAllocator(MemoryContext cxt)
{
	SpmAlloc	a = {pg_alloc, cxt};

	return a;
}

void
InitTokenizerCache(void)
{
	BackendCacheInit(&tokenizer_cache);
}

/* A vocabulary value as a model id: a non-negative integer in range. */
static int32
vocab_id(JsonbValue *v, const char *key, int keylen)
{
	char	   *s;
	char	   *end;
	long		id;

	if (v->type != jbvNumeric)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("vocabulary entry \"%.*s\" is not a number", keylen, key)));
	s = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
	id = strtol(s, &end, 10);
	if (*end != '\0' || id < 0 || id > MAX_VOCAB_ID)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("vocabulary entry \"%.*s\" has the invalid id %s", keylen, key, s),
				 errdetail("Ids must be integers from 0 to %d.", MAX_VOCAB_ID)));
	return (int32) id;
}

static void
build_vocab(Tokenizer *t, const SpmAlloc *a, Jsonb *vocab)
{
	SpmModel   *m = t->model;
	int			n = JB_ROOT_COUNT(vocab);
	const char **keys;
	uint32	   *lens;
	int32	   *ids;
	int			count = 0;
	int			dup;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken r;
	const SpmPiece *unk = &m->pieces[m->unk_id];

	if (!JB_ROOT_IS_OBJECT(vocab) || JB_ROOT_IS_SCALAR(vocab))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the vocabulary must be a JSON object mapping pieces to ids")));

	keys = a->alloc(a->ctx, sizeof(char *) * (n + 1));
	lens = a->alloc(a->ctx, sizeof(uint32) * (n + 1));
	ids = a->alloc(a->ctx, sizeof(int32) * (n + 1));
	t->nmodel = 0;

	it = JsonbIteratorInit(&vocab->root);
	while ((r = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (r == WJB_KEY)
		{
			char	   *key;

			if ((count & 1023) == 0)
				CHECK_FOR_INTERRUPTS();
			if (count >= n)
				elog(ERROR, "vocabulary has more keys than it says");
			key = a->alloc(a->ctx, v.val.string.len + 1);
			memcpy(key, v.val.string.val, v.val.string.len);
			key[v.val.string.len] = '\0';
			keys[count] = key;
			lens[count] = (uint32) v.val.string.len;
		}
		else if (r == WJB_VALUE)
		{
			ids[count] = vocab_id(&v, keys[count], (int) lens[count]);
			if (ids[count] >= t->nmodel)
				t->nmodel = ids[count] + 1;
			count++;
		}
	}

	if (!spm_map_build(&t->vocab, count, keys, lens, ids, a, &dup))
		elog(ERROR, "vocabulary repeats the piece \"%s\"", keys[dup]);

	/* the inverse: model id -> piece */
	t->model_piece = a->alloc(a->ctx, sizeof(char *) * (t->nmodel + 1));
	t->model_piece_len = a->alloc(a->ctx, sizeof(uint32) * (t->nmodel + 1));
	for (int i = 0; i < count; i++)
	{
		if (t->model_piece[ids[i]] != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("vocabulary maps both \"%s\" and \"%s\" to id %d",
							t->model_piece[ids[i]], keys[i], ids[i])));
		t->model_piece[ids[i]] = keys[i];
		t->model_piece_len[ids[i]] = lens[i];
	}

	t->vocab_unk = spm_map_get(&t->vocab, unk->str, unk->len);
	if (t->vocab_unk < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the vocabulary has no entry for the unknown piece \"%s\"", unk->str)));

	/* as Marian's tokenizer: pieces outside the vocabulary are unknown */
	t->spm_to_model = a->alloc(a->ctx, sizeof(int32) * m->npieces);
	for (int i = 0; i < m->npieces; i++)
	{
		int32		id = spm_map_get(&t->vocab, m->pieces[i].str, m->pieces[i].len);

		if ((i & 4095) == 0)
			CHECK_FOR_INTERRUPTS();
		t->spm_to_model[i] = id >= 0 ? id : t->vocab_unk;
	}
	t->has_vocab = true;
}

void
BuildTokenizer(Tokenizer *t, const char *model, Size model_len, Jsonb *vocab)
{
	SpmAlloc	a = PgAllocator(t->cxt);

	BuildTokenizerWith(t, &a, model, model_len, vocab);
}

void
BuildTokenizerWith(Tokenizer *t, const SpmAlloc *a, const char *model, Size model_len, Jsonb *vocab)
{
	char		err[256];

	t->model = spm_load(model, model_len, a, err, sizeof(err));
	if (t->model == NULL)
	{
		/* the core's messages are lower-case phrases; a detail is a sentence */
		err[0] = (char) pg_toupper((unsigned char) err[0]);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid SentencePiece model"),
				 errdetail("%s.", err)));
	}
	t->has_vocab = false;
	if (vocab != NULL)
		build_vocab(t, a, vocab);
}

int32
TokenModelId(const Tokenizer *t, const SpmToken *tok)
{
	int32		id;

	if (!t->has_vocab)
		return tok->id;
	if (tok->id != t->model->unk_id)
		return t->spm_to_model[tok->id];
	/* an unknown's piece is its text, which the vocabulary may still know */
	id = spm_map_get(&t->vocab, tok->str, tok->len);
	return id >= 0 ? id : t->vocab_unk;
}

/* SHA-256 of a tokenizer's stored bytes: model file, then vocabulary. */
static void
content_digest(const char *model, Size model_len, Jsonb *vocab, uint8 *digest)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);
	uint64		lens[2] = {model_len, vocab ? VARSIZE(vocab) : 0};

	if (pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) lens, sizeof(lens)) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) model, model_len) < 0 ||
		(vocab && pg_cryptohash_update(ctx, (const uint8 *) vocab, VARSIZE(vocab)) < 0) ||
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
	Jsonb	   *vocab = NULL;
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

	query = psprintf("SELECT model, vocab FROM %s WHERE name = $1",
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
		vocab = DatumGetJsonbP(d);

	content_digest(VARDATA_ANY(model), VARSIZE_ANY_EXHDR(model), vocab, entry->digest);
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
		LoadTokenizerShared(entry, name, fingerprint, VARDATA_ANY(model), VARSIZE_ANY_EXHDR(model), vocab);
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
