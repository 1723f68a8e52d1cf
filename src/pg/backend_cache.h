/*
 * backend_cache.h
 *		Per-backend caches of objects stored in the extension's tables
 *		(tokenizers, models), dropped when those tables change.
 */
#ifndef BACKEND_CACHE_H
#define BACKEND_CACHE_H

#include "postgres.h"

#include "utils/hsearch.h"

#include "ext_tables.h"

/* Every cached entry starts with these two fields. */
typedef struct CacheEntryHeader
{
	char		key[NAMEDATALEN];
	MemoryContext cxt;			/* the entry's memory */
} CacheEntryHeader;

typedef struct BackendCache
{
	/* set by the owner */
	const char *name;			/* for memory contexts */
	const char *tables[2];		/* changes to these invalidate (NULL: unused) */
	Size		entrysize;
	/* fill an entry (header set), allocating in entry->cxt; ERROR if none */
	void		(*load) (void *entry, const char *key);

	/* state */
	HTAB	   *hash;
	MemoryContext cxt;
	bool		stale;			/* our tables changed: start afresh */
	uint64		generation;		/* resets so far */
	Oid			oids[2];
} BackendCache;

/* Register the invalidation callback; from _PG_init. */
extern void BackendCacheInit(BackendCache *cache);

/*
 * The entry for key, loaded on first use.  Valid until the transaction
 * ends, even if the cache is dropped meanwhile (by a change to our tables,
 * possibly in a nested call).
 */
extern void *BackendCacheGet(BackendCache *cache, const char *key);

/* The first complete entry for which match(entry, arg) is true, or NULL. */
extern void *BackendCacheFind(BackendCache *cache, bool (*match) (const void *entry, const void *arg),
							  const void *arg);

#endif							/* BACKEND_CACHE_H */
