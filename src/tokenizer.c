/*
 * tokenizer.c
 *		The per-backend cache of tokenizers.
 *
 * A tokenizer is read from transformer_tokenizers with SPI the first time a
 * backend uses it, parsed once, and kept in its own memory context under
 * CacheMemoryContext.  A statement trigger on the table sends a relcache
 * invalidation for it on any change; every backend's callback then marks
 * the cache stale, and the next lookup starts afresh.  The old contexts are
 * handed to the current transaction, so pointers taken earlier in it stay
 * valid until it ends.  The per-call cost is a flag test and a hash probe.
 */
#include "postgres.h"

#include "access/xact.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "tokenizer.h"

/* Model ids above this are refused: real vocabularies have ~10^5. */
#define MAX_VOCAB_ID 10000000

static HTAB *tokenizers = NULL;
static MemoryContext cache_cxt = NULL;
static bool cache_stale = false;
static Oid	table_oid = InvalidOid;

static void *
pg_alloc(void *ctx, size_t size)
{
	return MemoryContextAllocZero((MemoryContext) ctx, size);
}

SpmAlloc
PgAllocator(MemoryContext cxt)
{
	SpmAlloc	a = {pg_alloc, cxt};

	return a;
}

/* The schema the extension was installed in (not exported before PG 16). */
static Oid
extension_schema(void)
{
	Oid			ext = get_extension_oid("transformer", false);
	Oid			nsp = InvalidOid;
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(ext));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		nsp = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	if (!OidIsValid(nsp))
		elog(ERROR, "extension transformer has no schema");
	return nsp;
}

Oid
ExtensionTableOid(const char *relname)
{
	Oid			nsp = extension_schema();
	Oid			rel = get_relname_relid(relname, nsp);

	if (!OidIsValid(rel))
		elog(ERROR, "table %s of extension transformer is missing", relname);
	return rel;
}

char *
ExtensionTableName(const char *relname)
{
	Oid			nsp = extension_schema();

	return quote_qualified_identifier(get_namespace_name(nsp), relname);
}

/*
 * Rows read in a (sub)transaction that aborts may be gone: an abort empties
 * the cache too (the relcache invalidations of an aborted change are not
 * sent).
 */
static void
xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		cache_stale = true;
}

static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		cache_stale = true;
}

static void
invalidate_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == table_oid)
		cache_stale = true;
}

void
InitTokenizerCache(void)
{
	CacheRegisterRelcacheCallback(invalidate_callback, (Datum) 0);
	RegisterXactCallback(xact_callback, NULL);
	RegisterSubXactCallback(subxact_callback, NULL);
}

PG_FUNCTION_INFO_V1(transformer_invalidate_cache);
Datum
transformer_invalidate_cache(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "transformer_invalidate_cache: not called as a trigger");
	/* reaches every backend at commit, and this one at the next command */
	CacheInvalidateRelcacheByRelid(RelationGetRelid(td->tg_relation));
	return PointerGetDatum(NULL);
}

static void
reset_cache(void)
{
	HASHCTL		ctl;

	/*
	 * Pointers into the old cache may still be held by the running call:
	 * the old context goes to the current (sub)transaction, which frees it
	 * when it ends.
	 */
	if (cache_cxt != NULL)
		MemoryContextSetParent(cache_cxt, CurTransactionContext);
	cache_cxt = AllocSetContextCreate(CacheMemoryContext, "transformer tokenizers",
									  ALLOCSET_DEFAULT_SIZES);
	ctl.keysize = NAMEDATALEN;
	ctl.entrysize = sizeof(Tokenizer);
	ctl.hcxt = cache_cxt;
	tokenizers = hash_create("transformer tokenizers", 8, &ctl,
							 HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	table_oid = ExtensionTableOid("transformer_tokenizers");
	cache_stale = false;
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
build_vocab(Tokenizer *t, Jsonb *vocab)
{
	SpmAlloc	a = PgAllocator(t->cxt);
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

	keys = MemoryContextAllocZero(t->cxt, sizeof(char *) * (n + 1));
	lens = MemoryContextAllocZero(t->cxt, sizeof(uint32) * (n + 1));
	ids = MemoryContextAllocZero(t->cxt, sizeof(int32) * (n + 1));
	t->nmodel = 0;

	it = JsonbIteratorInit(&vocab->root);
	while ((r = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (r == WJB_KEY)
		{
			char	   *key;

			if (count >= n)
				elog(ERROR, "vocabulary has more keys than it says");
			key = MemoryContextAlloc(t->cxt, v.val.string.len + 1);
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

	if (!spm_map_build(&t->vocab, count, keys, lens, ids, &a, &dup))
		elog(ERROR, "vocabulary repeats the piece \"%s\"", keys[dup]);

	/* the inverse: model id -> piece */
	t->model_piece = MemoryContextAllocZero(t->cxt, sizeof(char *) * (t->nmodel + 1));
	t->model_piece_len = MemoryContextAllocZero(t->cxt, sizeof(uint32) * (t->nmodel + 1));
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
	t->spm_to_model = MemoryContextAllocZero(t->cxt, sizeof(int32) * m->npieces);
	for (int i = 0; i < m->npieces; i++)
	{
		int32		id = spm_map_get(&t->vocab, m->pieces[i].str, m->pieces[i].len);

		t->spm_to_model[i] = id >= 0 ? id : t->vocab_unk;
	}
	t->has_vocab = true;
}

void
BuildTokenizer(Tokenizer *t, const char *model, Size model_len, Jsonb *vocab)
{
	SpmAlloc	a = PgAllocator(t->cxt);
	char		err[256];

	t->model = spm_load(model, model_len, &a, err, sizeof(err));
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
		build_vocab(t, vocab);
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

/* Read the row with SPI and build the tokenizer in entry->cxt. */
static void
load_tokenizer(Tokenizer *entry, const char *name)
{
	char	   *query;
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];
	bool		isnull;
	Datum		d;
	bytea	   *model;
	Jsonb	   *vocab = NULL;
	MemoryContext caller = CurrentMemoryContext;

	query = psprintf("SELECT model, vocab FROM %s WHERE name = $1",
					 ExtensionTableName("transformer_tokenizers"));
	args[0] = CStringGetTextDatum(name);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(query, 1, argtypes, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read transformer_tokenizers");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("tokenizer \"%s\" does not exist", name),
				 errhint("Load one with import_tokenizer() or load_tokenizer().")));

	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	model = DatumGetByteaPP(d);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	if (!isnull)
		vocab = DatumGetJsonbP(d);

	MemoryContextSwitchTo(entry->cxt);
	BuildTokenizer(entry, VARDATA_ANY(model), VARSIZE_ANY_EXHDR(model), vocab);
	MemoryContextSwitchTo(caller);
	SPI_finish();
}

Tokenizer *
GetTokenizer(const char *name)
{
	Tokenizer  *entry;
	bool		found;

	if (strlen(name) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("tokenizer \"%s\" does not exist", name)));

	if (tokenizers == NULL || cache_stale)
		reset_cache();

	entry = hash_search(tokenizers, name, HASH_FIND, &found);
	if (found)
		return entry;

	entry = hash_search(tokenizers, name, HASH_ENTER, &found);
	entry->cxt = AllocSetContextCreate(cache_cxt, "transformer tokenizer",
									   ALLOCSET_DEFAULT_SIZES);
	entry->model = NULL;
	PG_TRY();
	{
		load_tokenizer(entry, name);
	}
	PG_CATCH();
	{
		/* leave no half-built entry behind */
		MemoryContextDelete(entry->cxt);
		hash_search(tokenizers, name, HASH_REMOVE, NULL);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return entry;
}
