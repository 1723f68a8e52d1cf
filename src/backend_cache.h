/*
 * backend_cache.h
 *		Per-backend caches of objects stored in the extension's tables
 *		(tokenizers, models), dropped when those tables change.
 */
#ifndef BACKEND_CACHE_H
#define BACKEND_CACHE_H

#include "postgres.h"

#include "utils/hsearch.h"

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
	bool		stale;
	Oid			oids[2];
} BackendCache;

/* Register the invalidation callbacks; from _PG_init. */
extern void BackendCacheInit(BackendCache *cache);

/* The entry for key, loaded on first use; valid until the (sub)transaction ends. */
extern void *BackendCacheGet(BackendCache *cache, const char *key);

/* OID of a table of the extension, looked up in the extension's schema. */
extern Oid	ExtensionTableOid(const char *relname);

/* Quoted schema-qualified name of a table of the extension, for SPI. */
extern char *ExtensionTableName(const char *relname);

#endif							/* BACKEND_CACHE_H */
