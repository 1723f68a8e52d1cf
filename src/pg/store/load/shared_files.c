/*
 * shared_files.c
 *		What the shared files of models and tokenizers have in common (see
 *		weight_cache.c for why they are safe): the directory and the
 *		switch (transformer.weight_cache_dir, transformer.shared_weights),
 *		file names by cluster, database and name, the fingerprints of the
 *		rows a file is built from, creating, unmapping and removing files.
 *		Below weight_cache.c, tokenizer_share.c and weight_files.c, which
 *		all call it.
 */
#include "postgres.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "ext_tables.h"
#include "model_store.h"
#include "weight_cache.h"
#include "weight_file.h"

bool		transformer_shared_weights = true;
char	   *transformer_weight_cache_dir = NULL;

/* the build tag: the library's version and the core's layout */
const char *
SharedFileBuildTag(void)
{
	static char tag[64];

	if (tag[0] == '\0')
		snprintf(tag, sizeof(tag), "%s %s", TRANSFORMER_VERSION, tf_wfile_build_tag());
	return tag;
}

/* this cluster's system identifier, in every file name: a shared directory never mixes clusters */
uint64
SharedFileClusterId(void)
{
	return GetSystemIdentifier();
}

/* "<system identifier>_" */
char *
SharedFileClusterPrefix(void)
{
	return psprintf(UINT64_FORMAT "_", SharedFileClusterId());
}

/* "<system identifier>_<database>_<model name in hex>_" */
char *
SharedFilePrefix(Oid db, const char *model)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfo(&s, UINT64_FORMAT "_%u_", SharedFileClusterId(), db);
	for (const unsigned char *c = (const unsigned char *) model; *c; c++)
		appendStringInfo(&s, "%02x", *c);
	appendStringInfoChar(&s, '_');
	return s.data;
}

/* the seed of every fingerprint: the cluster and the database, then a kind */
static uint64
fingerprint_seed(uint64 kind)
{
	uint64		ids[3] = {SharedFileClusterId(), (uint64) MyDatabaseId, kind};

	return tf_checksum64(ids, sizeof(ids), 0x7472616e73ULL);
}

/* Is the xid in text (xmin::text) one of this transaction's, not yet committed? */
static bool
xid_text_is_ours(const char *xid)
{
	char	   *end;
	unsigned long v;

	errno = 0;
	v = strtoul(xid, &end, 10);
	if (errno != 0 || end == xid || v > PG_UINT32_MAX)
		return true;			/* unreadable: never publish */
	return TransactionIdIsCurrentTransactionId((TransactionId) v);
}

bool
RowIsUncommitted(const char *model_row)
{
	return xid_text_is_ours(model_row);
}

uint64
ModelFingerprint(const char *model, const char *model_row, bool *uncommitted)
{
	Oid			types[1] = {TEXTOID};
	Datum		args[1] = {CStringGetTextDatum(model)};
	uint64		h = tf_checksum64(model_row, strlen(model_row), fingerprint_seed(1));

	*uncommitted = RowIsUncommitted(model_row);
	/* inside the caller's ExtSpiConnect() */
	if (SPI_execute_with_args(psprintf("SELECT name, xmin::text, ctid::text FROM %s WHERE model = $1 "
									   "ORDER BY name COLLATE pg_catalog.\"C\"%s",
									   ExtensionTableName("transformer_tensors"),
									   TensorsHaveParts() ? ", part" : ""),
							  1, types, args, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read transformer_tensors");
	for (uint64 i = 0; i < SPI_processed; i++)
		for (int c = 1; c <= 3; c++)
		{
			char	   *v = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, c);

			if (v != NULL)
				h = tf_checksum64(v, strlen(v) + 1, h);
			if (c == 2 && (v == NULL || xid_text_is_ours(v)))
				*uncommitted = true;
		}
	return h ? h : 1;			/* 0 means none */
}

/* the fingerprint of a tokenizer's row (see tokenizer_share.c) */
uint64
TokenizerFingerprint(const char *name, const char *row)
{
	uint64		h = tf_checksum64(name, strlen(name) + 1, fingerprint_seed(2));

	h = tf_checksum64(row, strlen(row), h);
	return h ? h : 1;
}

void
SharedFileUnmap(void *arg)
{
	SharedMapping    *m = arg;

	if (m->addr != NULL)
		munmap(m->addr, m->len);
	m->addr = NULL;
}

/* Remove the files whose names start with prefix, but keep (a path, or NULL); and dead builders' temporary files. */
int
SharedFileRemovePrefixed(const char *prefix, const char *keep)
{
	DIR		   *dir = AllocateDir(transformer_weight_cache_dir);
	struct dirent *de;
	int			removed = 0;

	if (dir == NULL)
		return 0;
	while ((de = ReadDirExtended(dir, transformer_weight_cache_dir, LOG)) != NULL)
	{
		char	   *path = psprintf("%s/%s", transformer_weight_cache_dir, de->d_name);
		int			pid;

		if ((strncmp(de->d_name, prefix, strlen(prefix)) == 0 &&
			 (keep == NULL || strcmp(path, keep) != 0)) ||
			(sscanf(de->d_name, TEMP_PREFIX "%d.", &pid) == 1 && pid != MyProcPid &&
			 kill(pid, 0) != 0 && errno == ESRCH))
		{
			if (unlink(path) == 0)
				removed++;
		}
		pfree(path);
	}
	FreeDir(dir);
	return removed;
}

void
SharedFileCannotShare(const char *what, const char *path)
{
	ereport(WARNING,
			(errcode_for_file_access(),
			 errmsg("could not %s shared weights file \"%s\": %m", what, path),
			 errdetail("This backend keeps its own copy of the weights."),
			 errhint("Check the free space and permissions of \"%s\", or set transformer.shared_weights to off.",
					 transformer_weight_cache_dir)));
}

/*
 * A new temporary file of len bytes for the shared file path, its blocks
 * reserved, so that writing it through a mapping cannot end in SIGBUS on a
 * full disk: the fd, or -1 after a WARNING (nothing left behind).
 */
int
SharedFileCreate(const char *tmp, const char *path, size_t len)
{
	int			fd,
				rc;

	if (MakePGDirectory(transformer_weight_cache_dir) != 0 && errno != EEXIST)
	{
		SharedFileCannotShare("create the directory of", path);
		return -1;
	}
	fd = OpenTransientFile(tmp, O_RDWR | O_CREAT | O_EXCL | PG_BINARY);
	if (fd < 0)
	{
		SharedFileCannotShare("create", tmp);
		return -1;
	}
	rc = posix_fallocate(fd, 0, (off_t) len);
	if (rc != 0)
	{
		errno = rc;
		SharedFileCannotShare("allocate", tmp);
		CloseTransientFile(fd);
		unlink(tmp);
		return -1;
	}
	return fd;
}
