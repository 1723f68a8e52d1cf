/*
 * backend_cache.c
 *		Per-backend caches of tokenizers and models.
 *
 * An object is read from its table the first time a backend uses it,
 * built once, and kept in its own memory context under CacheMemoryContext.
 * A statement trigger on the tables sends a relcache invalidation for them
 * on any change (transformer_invalidate_cache()); every backend's callback
 * then marks the cache stale, and the next lookup starts afresh.  Nothing
 * else drops it: an error or rollback that changed none of our tables
 * costs no reload, and one that did is undone by PostgreSQL replaying the
 * aborted (sub)transaction's invalidations locally.
 *
 * Re-entrancy: loading runs SPI, and a user's code can run inside it and
 * call us again.  So an entry is built off the hash and entered only when
 * complete, and a reset hands the old entries to TopTransactionContext, so
 * that pointers held by a running (outer) call stay valid until the
 * transaction ends.  The per-call cost is a flag test and a hash probe.
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "utils/inval.h"
#include "utils/memutils.h"

#include "backend_cache.h"

PG_FUNCTION_INFO_V1(transformer_invalidate_cache);
Datum
transformer_invalidate_cache(PG_FUNCTION_ARGS)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "transformer_invalidate_cache: not called as a trigger");
	/* on any other table (a superuser's own trigger, say) it does nothing */
	if (!IsExtensionTableOrShard(RelationGetRelid(((TriggerData *) fcinfo->context)->tg_relation)))
		return PointerGetDatum(NULL);
	/*
	 * Reaches every backend at commit, and this one at the next command.
	 * The extension's tables by name, not the trigger's relation: under
	 * Citus the trigger fires on a shard of the table, which no cache
	 * watches.
	 */
	CacheInvalidateRelcacheByRelid(ExtensionTableOid("transformer_models"));
	CacheInvalidateRelcacheByRelid(ExtensionTableOid("transformer_tensors"));
	CacheInvalidateRelcacheByRelid(ExtensionTableOid("transformer_tokenizers"));
	return PointerGetDatum(NULL);
}

static void
relcache_callback(Datum arg, Oid relid)
{
	BackendCache *c = (BackendCache *) DatumGetPointer(arg);

	if (relid == InvalidOid || relid == c->oids[0] || relid == c->oids[1])
		c->stale = true;
}

void
BackendCacheInit(BackendCache *c)
{
	CacheRegisterRelcacheCallback(relcache_callback, PointerGetDatum(c));
}

static void
reset(BackendCache *c)
{
	HASHCTL		ctl;

	Assert(IsTransactionState());
	if (c->cxt != NULL)
		MemoryContextSetParent(c->cxt, TopTransactionContext);
	c->cxt = NULL;
	c->hash = NULL;
	c->cxt = AllocSetContextCreate(CacheMemoryContext, "transformer cache", ALLOCSET_DEFAULT_SIZES);
	MemoryContextSetIdentifier(c->cxt, c->name);
	ctl.keysize = NAMEDATALEN;
	ctl.entrysize = c->entrysize;
	ctl.hcxt = c->cxt;
	c->hash = hash_create(c->name, 8, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	c->stale = false;
	for (int i = 0; i < 2; i++)
		c->oids[i] = c->tables[i] ? ExtensionTableOid(c->tables[i]) : InvalidOid;
	c->generation++;
}

void *
BackendCacheGet(BackendCache *c, const char *key)
{
	CacheEntryHeader *entry;
	CacheEntryHeader *built;
	uint64		generation;
	MemoryContext cxt;
	bool		found;

	if (c->hash == NULL || c->stale)
		reset(c);

	entry = hash_search(c->hash, key, HASH_FIND, NULL);
	if (entry != NULL)
		return entry;

	/*
	 * Build it off the hash, in memory that an error frees with the
	 * caller's; only a complete entry becomes visible.
	 */
	generation = c->generation;
	cxt = AllocSetContextCreate(CurrentMemoryContext, "transformer cache entry", ALLOCSET_DEFAULT_SIZES);
	MemoryContextSetIdentifier(cxt, MemoryContextStrdup(cxt, key));
	built = MemoryContextAllocZero(cxt, c->entrysize);
	strlcpy(built->key, key, NAMEDATALEN);
	built->cxt = cxt;
	c->load(built, key);

	if (c->stale || c->generation != generation)
	{
		/*
		 * Our tables changed while it loaded (perhaps in a nested call): it
		 * may show the old rows, so it serves this call only.
		 */
		MemoryContextSetParent(built->cxt, TopTransactionContext);
		return built;
	}
	entry = hash_search(c->hash, key, HASH_ENTER, &found);
	if (found)
	{
		/* a nested call loaded it meanwhile */
		MemoryContextDelete(built->cxt);
		return entry;
	}
	memcpy(entry, built, c->entrysize);
	MemoryContextSetParent(entry->cxt, c->cxt);
	return entry;
}

void *
BackendCacheFind(BackendCache *c, bool (*match) (const void *entry, const void *arg), const void *arg)
{
	HASH_SEQ_STATUS seq;
	void	   *entry;

	if (c->hash == NULL || c->stale)
		return NULL;
	hash_seq_init(&seq, c->hash);
	while ((entry = hash_seq_search(&seq)) != NULL)
		if (match(entry, arg))
		{
			hash_seq_term(&seq);
			return entry;
		}
	return NULL;
}
