/*
 * ext_tables.h
 *		The extension's own tables: their names and OIDs, SPI on them that is
 *		immune to the caller's search_path, and the lock that serializes
 *		writers of one model or tokenizer.
 */
#ifndef EXT_TABLES_H
#define EXT_TABLES_H

#include "postgres.h"

/*
 * SPI_connect() with search_path set to "pg_catalog, pg_temp" until
 * ExtSpiFinish(): every operator, function and type in our queries resolves
 * to the system's, whatever the caller has planted in its path (the
 * CVE-2018-1058 class).  Returns the GUC nest level to pass back; an error
 * in between unwinds both.
 */
extern int	ExtSpiConnect(void);
extern void ExtSpiFinish(int guc_level);

/* The extension's schema, and its owner in *owner (who runs the job bookkeeping). */
extern Oid	ExtensionSchemaAndOwner(Oid *owner);

/* OID of a table of the extension, looked up in the extension's schema. */
extern Oid	ExtensionTableOid(const char *relname);

/*
 * Is relid one of the extension's three tables, or under Citus a shard of
 * one ("<table>_<shard id>" in the same schema, of the same owner)?
 */
/* The owner of a table; InvalidOid if it is gone. */
extern Oid	RelationOwner(Oid relid);

extern bool IsExtensionTableOrShard(Oid relid);

/* Quoted schema-qualified name of a table of the extension, for SPI. */
extern char *ExtensionTableName(const char *relname);

/* Whether a table of the extension has the column (this library also serves older versions' tables). */
extern bool ExtensionTableHasColumn(const char *relname, const char *column);

/* Has transformer_tensors the column part (0.6.0's tables)? */
extern bool TensorsHaveParts(void);

/*
 * Whether transformer_models has the generation_config columns of version
 * 0.2.0: this library also serves a database not yet updated from 0.1.0.
 */
extern bool ModelsHaveGenerationConfig(void);

/* ERROR unless it has them, with a hint to update the extension. */
extern void RequireExtensionVersion020(void);

/*
 * Writers (import, replace, drop) of one model or one tokenizer name hold
 * this lock until the transaction ends, taken before any row: model first,
 * then its tokenizers, so concurrent writers queue instead of deadlocking.
 */
typedef enum ExtLockKind
{
	EXT_LOCK_MODEL = 1,
	EXT_LOCK_TOKENIZER = 2
} ExtLockKind;

extern void LockObjectName(ExtLockKind kind, const char *name);

#endif							/* EXT_TABLES_H */
