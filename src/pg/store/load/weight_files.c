/*
 * weight_files.c
 *		The directory of the shared files (weight_cache.c writes and maps
 *		them): what each file is, transformer_weight_files(), and the sweeps
 *		-- every file of the cluster at the first use after a start of the
 *		server, and files of dropped databases and of names that no longer
 *		exist at each backend's first use.
 */
#include "postgres.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "ext_tables.h"
#include "model_store.h"
#include "weight_cache.h"

/* ------------------------------------------------------------- listing */

/*
 * What a file of the directory is: its kind, database and name, and its
 * state against the rows now visible.  Inside ExtSpiConnect().
 */
typedef struct FileInfo
{
	bool		parsed;
	bool		tok;
	bool		bf16;			/* a model's weights with the compute type bf16 */
	bool		int8;			/* ... int8 */
	Oid			db;
	char		name[NAMEDATALEN];
	const char *state;
} FileInfo;

static FileInfo
file_info(const char *d_name)
{
	FileInfo	fi;
	const char *rest;
	unsigned int db;
	char		hex[2 * NAMEDATALEN + 1];
	unsigned long long fp,
				sysid;

	memset(&fi, 0, sizeof(fi));
	fi.tok = strncmp(d_name, TOK_PREFIX, strlen(TOK_PREFIX)) == 0;
	fi.bf16 = strncmp(d_name, BF16_PREFIX, strlen(BF16_PREFIX)) == 0;
	fi.int8 = strncmp(d_name, INT8_PREFIX, strlen(INT8_PREFIX)) == 0;
	rest = d_name + (fi.tok ? strlen(TOK_PREFIX) : fi.bf16 ? strlen(BF16_PREFIX) :
					 fi.int8 ? strlen(INT8_PREFIX) : 0);
	fi.state = "unknown";
	if (strncmp(d_name, TEMP_PREFIX, strlen(TEMP_PREFIX)) == 0)
		fi.state = "being written";
	else if (sscanf(rest, "%llu_%u_%128[0-9a-f]_%16llx" FILE_SUFFIX, &sysid, &db, hex, &fp) == 4 &&
			 strlen(hex) % 2 == 0 && strlen(hex) / 2 < NAMEDATALEN)
	{
		size_t		n = strlen(hex) / 2;
		Oid			types[1] = {TEXTOID};
		Datum		args[1];
		const char *table;

		for (size_t i = 0; i < n; i++)
		{
			unsigned int b;

			sscanf(hex + 2 * i, "%2x", &b);
			fi.name[i] = (char) b;
		}
		fi.name[n] = '\0';
		fi.db = (Oid) db;
		fi.parsed = true;
		if ((uint64) sysid != SharedFileClusterId())
		{
			fi.state = "other cluster";
			return fi;
		}
		if (fi.db != MyDatabaseId)
		{
			args[0] = ObjectIdGetDatum(fi.db);
			types[0] = OIDOID;
			SPI_execute_with_args("SELECT FROM pg_catalog.pg_database WHERE oid = $1", 1, types, args, NULL, true, 1);
			fi.state = SPI_processed > 0 ? "other database" : "dropped database";
			return fi;
		}
		args[0] = CStringGetTextDatum(fi.name);
		table = fi.tok ? "transformer_tokenizers" : "transformer_models";
		SPI_execute_with_args(psprintf("SELECT %s FROM %s WHERE name = $1", RowVersionSql(table),
									   ExtensionTableName(table)),
							  1, types, args, NULL, true, 1);
		if (SPI_processed == 0)
			fi.state = "orphan";
		else
		{
			char	   *row = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
			bool		uncommitted = false;
			uint64		now;

			if (row == NULL)
				fi.state = "stale";
			else
			{
				now = fi.tok ? TokenizerFingerprint(fi.name, row) : ModelFingerprint(fi.name, row, &uncommitted);
				fi.state = now == (uint64) fp ? "current" : "stale";
			}
		}
	}
	return fi;
}

/*
 * After a file is written: remove the files nobody can use any more, those
 * of dropped databases and of names this database no longer has (left by
 * rolled-back imports, say).  Stale files of live names go when a new file
 * of the same name is written.  Inside ExtSpiConnect().
 */
void
SharedFileSweepOrphans(void)
{
	DIR		   *dir = AllocateDir(transformer_weight_cache_dir);
	struct dirent *de;

	if (dir == NULL)
		return;
	while ((de = ReadDirExtended(dir, transformer_weight_cache_dir, LOG)) != NULL)
	{
		FileInfo	fi;

		if (de->d_name[0] == '.')
			continue;
		fi = file_info(de->d_name);
		if (fi.parsed && (strcmp(fi.state, "orphan") == 0 || strcmp(fi.state, "dropped database") == 0))
			unlink(psprintf("%s/%s", transformer_weight_cache_dir, de->d_name));
	}
	FreeDir(dir);
}

/*
 * A row's version as SQL: xmin, ctid and the random file_id written at
 * import.  Tables of 0.3.0 (not yet updated) have no file_id: NULL, and
 * their models are not shared.
 */
const char *
RowVersionSql(const char *table)
{
	if (!ExtensionTableHasColumn(table, "file_id"))
		return "NULL::text";
	return "xmin::text || ' ' || ctid::text || ' ' || file_id::text";
}

/*
 * The state of the directory since this start of the server, in shared
 * memory: a small struct from the slack PostgreSQL leaves for libraries
 * that were not preloaded, so new after every start and every crash
 * restart.  0: nobody has swept yet; 1: a backend is sweeping; 2: swept.
 */
typedef struct WeightCacheShared
{
	pg_atomic_uint32 state;
} WeightCacheShared;

/* Remove every file of this cluster and every dead builder's temporary file. */
static void
remove_cluster_files(void)
{
	const char *mine = SharedFileClusterPrefix();
	int			removed = SharedFileRemovePrefixed(mine, NULL) +
		SharedFileRemovePrefixed(psprintf(TOK_PREFIX "%s", mine), NULL) +
		SharedFileRemovePrefixed(psprintf(BF16_PREFIX "%s", mine), NULL) +
		SharedFileRemovePrefixed(psprintf(INT8_PREFIX "%s", mine), NULL);

	if (removed > 0)
		elog(LOG, "removed %d shared weights files left from before the server started", removed);
}

/*
 * Before the first file is used after a start of the server: the first
 * backend removes every file of this cluster (a file may have been built
 * from rows a crash took away); the others wait for it.  Then, once per
 * backend, the files of dropped databases and of names this database no
 * longer has.
 */
void
SharedFileSweepAfterStart(void)
{
	static bool done_here = false;
	WeightCacheShared *shared;
	bool		found;
	uint32		expected = 0;

	if (done_here)
		return;
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("transformer weight cache", sizeof(WeightCacheShared), &found);
	if (!found)
		pg_atomic_init_u32(&shared->state, 0);
	LWLockRelease(AddinShmemInitLock);

	if (pg_atomic_compare_exchange_u32(&shared->state, &expected, 1))
	{
		PG_TRY();
		{
			remove_cluster_files();
		}
		PG_FINALLY();
		{
			pg_atomic_write_u32(&shared->state, 2);
		}
		PG_END_TRY();
	}
	else
		while (pg_atomic_read_u32(&shared->state) != 2)
		{
			CHECK_FOR_INTERRUPTS();
			pg_usleep(1000L);
		}
	done_here = true;
	SharedFileSweepOrphans();
}

PG_FUNCTION_INFO_V1(transformer_weight_files);
Datum
transformer_weight_files(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DIR		   *dir;
	struct dirent *de;
	int			level;

	InitMaterializedSRF(fcinfo, 0);
	dir = AllocateDir(transformer_weight_cache_dir);
	if (dir == NULL)
		return (Datum) 0;		/* no directory: no files */
	level = ExtSpiConnect();
	while ((de = ReadDirExtended(dir, transformer_weight_cache_dir, LOG)) != NULL)
	{
		Datum		values[6];
		bool		nulls[6] = {false, false, true, true, false, false};
		char	   *path = psprintf("%s/%s", transformer_weight_cache_dir, de->d_name);
		struct stat st;
		FileInfo	fi;

		CHECK_FOR_INTERRUPTS();
		if (de->d_name[0] == '.' || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		fi = file_info(de->d_name);
		values[0] = CStringGetTextDatum(de->d_name);
		values[1] = CStringGetTextDatum(fi.tok ? "tokenizer" : fi.bf16 ? "weights bf16" : fi.int8 ? "weights int8" : "weights");
		if (fi.parsed)
		{
			values[2] = ObjectIdGetDatum(fi.db);
			values[3] = CStringGetTextDatum(fi.name);
			nulls[2] = nulls[3] = false;
		}
		values[4] = Int64GetDatum((int64) st.st_size);
		values[5] = CStringGetTextDatum(fi.state);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	FreeDir(dir);
	ExtSpiFinish(level);
	return (Datum) 0;
}
