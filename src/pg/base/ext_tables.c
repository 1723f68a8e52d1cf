/*
 * ext_tables.c
 *		The extension's tables: names, OIDs, search_path-proof SPI, and the
 *		writers' lock.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_class.h"
#include "commands/event_trigger.h"
#include "fmgr.h"
#include "nodes/parsenodes.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "ext_tables.h"

/* locktag_field4 of our advisory locks: apart from pg_advisory_lock()'s 1 and 2 */
#define EXT_LOCK_CLASS 0x7466

int
ExtSpiConnect(void)
{
	int			level;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	/* as a function's SET clause does: restored by ExtSpiFinish or by abort */
	level = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);

	/*
	 * Under Citus our tables are reference tables, and translate() runs
	 * inside queries on shards: reading them there is a nested distributed
	 * query, which Citus refuses unless allowed.  A reference table is read
	 * from the node's own placement, so it is safe for these queries only.
	 */
	if (GetConfigOption("citus.allow_nested_distributed_execution", true, false) != NULL)
		(void) set_config_option("citus.allow_nested_distributed_execution", "on",
								 PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	return level;
}

void
ExtSpiFinish(int guc_level)
{
	AtEOXact_GUC(true, guc_level);
	SPI_finish();
}

/* The schema the extension was installed in (not exported before PG 16). */
static Oid
extension_schema(void)
{
	Oid			owner;

	return ExtensionSchemaAndOwner(&owner);
}

Oid
ExtensionSchemaAndOwner(Oid *owner)
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
	{
		nsp = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
		*owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
	}
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

Oid
RelationOwner(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

bool
IsExtensionTableOrShard(Oid relid)
{
	static const char *const tables[] = {"transformer_models", "transformer_tensors", "transformer_tokenizers"};
	Oid			nsp = extension_schema();
	char	   *relname;

	if (get_rel_namespace(relid) != nsp)
		return false;
	relname = get_rel_name(relid);
	if (relname == NULL)
		return false;
	for (int i = 0; i < lengthof(tables); i++)
	{
		size_t		n = strlen(tables[i]);
		Oid			table = get_relname_relid(tables[i], nsp);
		const char *p;

		if (!OidIsValid(table))
			continue;
		if (relid == table)
			return true;
		/* a Citus shard: "<table>_<shard id>", beside the table and of its owner */
		if (strncmp(relname, tables[i], n) != 0 || relname[n] != '_' || relname[n + 1] == '\0')
			continue;
		for (p = relname + n + 1; *p >= '0' && *p <= '9'; p++)
			;
		if (*p == '\0' && get_rel_relkind(relid) == RELKIND_RELATION &&
			RelationOwner(relid) == RelationOwner(table))
			return true;
	}
	return false;
}

char *
ExtensionTableName(const char *relname)
{
	return quote_qualified_identifier(get_namespace_name(extension_schema()), relname);
}

bool
ExtensionTableHasColumn(const char *relname, const char *column)
{
	return get_attnum(ExtensionTableOid(relname), column) != InvalidAttrNumber;
}

bool
ModelsHaveGenerationConfig(void)
{
	return ExtensionTableHasColumn("transformer_models", "generation_config");
}

void
RequireExtensionVersion020(void)
{
	if (!ModelsHaveGenerationConfig())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension transformer must be updated to version 0.2.0"),
				 errdetail("The installed library stores generation configurations, which version 0.1.0's tables lack."),
				 errhint("Run ALTER EXTENSION transformer UPDATE.")));
}

void
LockObjectName(ExtLockKind kind, const char *name)
{
	LOCKTAG		tag;

	/* a hash collision only makes two names wait for each other */
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId,
						 hash_bytes((const unsigned char *) name, (int) strlen(name)),
						 (uint32) kind, EXT_LOCK_CLASS);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

/*
 * The event trigger transformer_guard_drop, on DROP EXTENSION: dropping the
 * extension drops its tables, and with them every model and tokenizer.
 * As PostgreSQL does for dependent objects, that needs CASCADE: without
 * it, an ERROR names what would be lost.
 */
PG_FUNCTION_INFO_V1(transformer_guard_drop);
Datum
transformer_guard_drop(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	DropStmt   *stmt;
	bool		ours = false;
	int			level;
	int64		models,
				tokenizers;
	char	   *names;
	bool		isnull;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		elog(ERROR, "transformer_guard_drop: not called as an event trigger");
	trigdata = (EventTriggerData *) fcinfo->context;
	if (!IsA(trigdata->parsetree, DropStmt))
		PG_RETURN_VOID();
	stmt = (DropStmt *) trigdata->parsetree;
	if (stmt->removeType != OBJECT_EXTENSION || stmt->behavior == DROP_CASCADE)
		PG_RETURN_VOID();
	{
		ListCell   *lc;

		foreach(lc, stmt->objects)
			if (IsA(lfirst(lc), String) && strcmp(strVal(lfirst(lc)), "transformer") == 0)
				ours = true;
	}
	if (!ours || !OidIsValid(get_extension_oid("transformer", true)))
		PG_RETURN_VOID();

	level = ExtSpiConnect();
	if (SPI_execute(psprintf("SELECT (SELECT count(*) FROM %s), (SELECT count(*) FROM %s), "
							 "(SELECT string_agg(quote_ident(name), ', ' ORDER BY name) FROM "
							 "(SELECT name FROM %s ORDER BY name LIMIT 5) f)",
							 ExtensionTableName("transformer_models"), ExtensionTableName("transformer_tokenizers"),
							 ExtensionTableName("transformer_models")), true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not count the models");
	models = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	tokenizers = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	names = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);
	if (models > 0 || tokenizers > 0)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop extension transformer because its tables hold models or tokenizers"),
				 errdetail("transformer_models holds %lld rows%s%s%s, transformer_tokenizers %lld.",
						   (long long) models, names ? " (" : "", names ? names : "",
						   names ? (models > 5 ? ", ...)" : ")") : "", (long long) tokenizers),
				 errhint("Keep them with pg_dump or export_model() first; then DROP EXTENSION transformer CASCADE drops them with the extension.")));
	ExtSpiFinish(level);
	PG_RETURN_VOID();
}

/* Is transformer_tensors of 0.6.0 or later, a tensor in parts of at most 64 MB (its column part)? */
bool
TensorsHaveParts(void)
{
	return ExtensionTableHasColumn("transformer_tensors", "part");
}
