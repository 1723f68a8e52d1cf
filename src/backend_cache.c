/*
 * backend_cache.c
 *		Per-backend caches of tokenizers and models.
 *
 * An object is read from its table the first time a backend uses it,
 * built once, and kept in its own memory context under CacheMemoryContext.
 * A statement trigger on the tables sends a relcache invalidation for them
 * on any change (transformer_invalidate_cache()); every backend's callback
 * then marks the cache stale, and the next lookup starts afresh.  An abort
 * marks it stale too, since rows read in an aborted (sub)transaction may be
 * gone.  The old contexts are handed to the current (sub)transaction, so
 * pointers taken in the running call stay valid until it ends.  The
 * per-call cost is a flag test and a hash probe.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "backend_cache.h"

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
	Oid			rel = get_relname_relid(relname, extension_schema());

	if (!OidIsValid(rel))
		elog(ERROR, "table %s of extension transformer is missing", relname);
	return rel;
}

char *
ExtensionTableName(const char *relname)
{
	return quote_qualified_identifier(get_namespace_name(extension_schema()), relname);
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
relcache_callback(Datum arg, Oid relid)
{
	BackendCache *c = (BackendCache *) DatumGetPointer(arg);

	if (relid == InvalidOid || relid == c->oids[0] || relid == c->oids[1])
		c->stale = true;
}

static void
xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		((BackendCache *) arg)->stale = true;
}

static void
subxact_callback(SubXactEvent event, SubTransactionId mySubid,
				 SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		((BackendCache *) arg)->stale = true;
}

void
BackendCacheInit(BackendCache *c)
{
	CacheRegisterRelcacheCallback(relcache_callback, PointerGetDatum(c));
	RegisterXactCallback(xact_callback, c);
	RegisterSubXactCallback(subxact_callback, c);
}

static void
reset(BackendCache *c)
{
	HASHCTL		ctl;

	if (c->cxt != NULL)
		MemoryContextSetParent(c->cxt, CurTransactionContext);
	c->cxt = AllocSetContextCreate(CacheMemoryContext, "transformer cache", ALLOCSET_DEFAULT_SIZES);
	MemoryContextSetIdentifier(c->cxt, c->name);
	ctl.keysize = NAMEDATALEN;
	ctl.entrysize = c->entrysize;
	ctl.hcxt = c->cxt;
	c->hash = hash_create(c->name, 8, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	for (int i = 0; i < 2; i++)
		c->oids[i] = c->tables[i] ? ExtensionTableOid(c->tables[i]) : InvalidOid;
	c->stale = false;
}

void *
BackendCacheGet(BackendCache *c, const char *key)
{
	CacheEntryHeader *entry;
	bool		found;

	if (c->hash == NULL || c->stale)
		reset(c);

	entry = hash_search(c->hash, key, HASH_FIND, &found);
	if (found)
		return entry;

	entry = hash_search(c->hash, key, HASH_ENTER, &found);
	entry->cxt = AllocSetContextCreate(c->cxt, "transformer cache entry", ALLOCSET_DEFAULT_SIZES);
	MemoryContextSetIdentifier(entry->cxt, MemoryContextStrdup(entry->cxt, key));
	PG_TRY();
	{
		c->load(entry, key);
	}
	PG_CATCH();
	{
		/* leave no half-built entry behind */
		MemoryContextDelete(entry->cxt);
		hash_search(c->hash, key, HASH_REMOVE, NULL);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return entry;
}
