/*
 * weight_cache.c
 *		One copy of a model's packed weights for every backend: a file under
 *		the data directory, mapped read-only and shared, so the kernel's
 *		page cache holds the weights once (as llama.cpp does with mmap).
 *
 * The tables stay the truth.  A file is named by the cluster (its system
 * identifier), the database, the model and a fingerprint of the model's
 * rows: the random file_id written with the models (or tokenizers) row at
 * import, and each row's xmin and ctid (any INSERT, UPDATE or DELETE of
 * them changes it), seeded with the cluster and the database.  Its header
 * carries the build it was written by and a checksum (weight_file.c).
 *
 * Why not xmin and ctid alone: a crash loses the WAL tail of transactions
 * that had not committed (and, with synchronous_commit off, of some that
 * had), and their xids and ctids are handed out again, so a file built
 * from lost rows would be taken for new rows.  Three rules make that
 * impossible: the random file_id never repeats; a file is never published
 * from rows this transaction has not committed (such a backend keeps a
 * private copy); and the first backend to use the files after each start
 * of the server (crash recovery included: shared memory is new then)
 * removes every file of this cluster before anyone maps one.  A backend that
 * needs a model maps its file if it is there and checks out; otherwise it
 * reads the tables as before, writes the file (a temporary file, renamed
 * into place: two backends building at once leave one file, both usable),
 * and maps that.  Any failure to write (a read-only or full disk) is a
 * WARNING, and the backend keeps its own copy.
 *
 * The directory's name starts with pgsql_tmp, which pg_basebackup skips;
 * nothing in it is WAL-logged, so a standby or an upgraded cluster builds
 * its own files.
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

void
InitWeightCache(void)
{
	DefineCustomBoolVariable("transformer.shared_weights",
							 "Shares each model's packed weights between backends through a mapped file.",
							 "Off: each backend reads the model's tables into its own memory.",
							 &transformer_shared_weights,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomStringVariable("transformer.weight_cache_dir",
							   "Sets the directory of the shared weights files.",
							   "A relative path is taken from the data directory.",
							   &transformer_weight_cache_dir,
							   "pgsql_tmp_transformer",
							   PGC_SUSET,
							   0,
							   NULL, NULL, NULL);
}

/* the prefix of the model's files of cm's compute type */
static char *
model_prefix(const CachedModel *cm, const char *model)
{
	return psprintf("%s%s", cm->model.cfg.compute_bf16 ? BF16_PREFIX : cm->model.cfg.compute_int8 ? INT8_PREFIX : "",
					SharedFilePrefix(MyDatabaseId, model));
}

static char *
file_path(const CachedModel *cm, const char *model, uint64 fingerprint)
{
	return psprintf("%s/%s%016llx%s", transformer_weight_cache_dir, model_prefix(cm, model),
					(unsigned long long) fingerprint, FILE_SUFFIX);
}

/*
 * Map the file at path and point cm's weights into it; false (the file
 * left for rebuilding, a LOG line saying why) if it is missing or does
 * not check out.
 */
static bool
map_file(CachedModel *cm, const char *path, uint64 fingerprint, bool verify)
{
	int			fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	struct stat st;
	void	   *addr;
	const char *why;
	SharedMapping    *mapping;
	MemoryContextCallback *cb;
	TfLayerWeights *enc,
			   *dec;

	if (fd < 0)
		return false;
	if (fstat(fd, &st) != 0 || st.st_size < TF_WFILE_HEADER)
	{
		CloseTransientFile(fd);
		elog(LOG, "shared weights file \"%s\" is too short; rebuilding it", path);
		return false;
	}
	addr = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	CloseTransientFile(fd);
	if (addr == MAP_FAILED)
		return false;
	enc = MemoryContextAllocZero(cm->cxt, sizeof(TfLayerWeights) * (cm->model.cfg.enc_layers + 1));
	dec = MemoryContextAllocZero(cm->cxt, sizeof(TfLayerWeights) * (cm->model.cfg.dec_layers + 1));
	why = tf_wfile_open(addr, (size_t) st.st_size, &cm->model, enc, dec, SharedFileBuildTag(), fingerprint, verify);
	if (why != NULL)
	{
		munmap(addr, (size_t) st.st_size);
		memset(&cm->model.w, 0, sizeof(cm->model.w));
		elog(LOG, "shared weights file \"%s\" is not used: %s; rebuilding it", path, why);
		return false;
	}
	mapping = MemoryContextAlloc(cm->cxt, sizeof(SharedMapping));
	mapping->addr = addr;
	mapping->len = (Size) st.st_size;
	cb = MemoryContextAlloc(cm->cxt, sizeof(MemoryContextCallback));
	cb->func = SharedFileUnmap;
	cb->arg = mapping;
	MemoryContextRegisterResetCallback(cm->cxt, cb);
	cm->shared_file_bytes = (Size) st.st_size;
	return true;
}

bool
MapSharedWeights(CachedModel *cm, const char *model, uint64 fingerprint)
{
	if (!transformer_shared_weights)
		return false;
	SharedFileSweepAfterStart();
	return map_file(cm, file_path(cm, model, fingerprint), fingerprint, true);
}

void
RemoveSharedWeights(const char *model)
{
	SharedFileRemovePrefixed(SharedFilePrefix(MyDatabaseId, model), NULL);
	SharedFileRemovePrefixed(psprintf(BF16_PREFIX "%s", SharedFilePrefix(MyDatabaseId, model)), NULL);
	SharedFileRemovePrefixed(psprintf(INT8_PREFIX "%s", SharedFilePrefix(MyDatabaseId, model)), NULL);
}

bool
BuildSharedWeights(CachedModel *cm, const char *model, uint64 fingerprint, StoredTensor *tensors,
				   int ntensors)
{
	static uint32 counter = 0;
	char	   *path;
	char	   *tmp;
	size_t		bound;
	size_t		len;
	size_t		used;
	size_t		final;
	int			fd;
	char	   *out;
	const char *why;
	MemoryContext build_cxt;

	if (!transformer_shared_weights || fingerprint == 0)
		return false;
	path = file_path(cm, model, fingerprint);
	tmp = psprintf("%s/" TEMP_PREFIX "%d.%u", transformer_weight_cache_dir, MyProcPid, counter++);
	bound = ModelArenaBound(&cm->model, tensors, ntensors);
	len = tf_wfile_size(&cm->model, bound);

	fd = SharedFileCreate(tmp, path, len);
	if (fd < 0)
		return false;
	out = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (out == MAP_FAILED)
	{
		SharedFileCannotShare("map", tmp);
		CloseTransientFile(fd);
		unlink(tmp);
		return false;
	}

	/* packed into the file's arena (zeros, page-aligned: after the header and field table) */
	build_cxt = AllocSetContextCreate(cm->cxt, "transformer weights build", ALLOCSET_SMALL_SIZES);
	PG_TRY();
	{
		used = BuildModelWeightsInto(&cm->model, tensors, ntensors, build_cxt, out + (len - bound), bound);
	}
	PG_CATCH();
	{
		munmap(out, len);
		unlink(tmp);
		PG_RE_THROW();
	}
	PG_END_TRY();
	final = tf_wfile_size(&cm->model, used);
	why = tf_wfile_write(out, final, &cm->model, out + (len - bound), used, SharedFileBuildTag(), fingerprint);
	munmap(out, len);
	memset(&cm->model.w, 0, sizeof(cm->model.w));
	MemoryContextDelete(build_cxt);
	if (why == NULL && final < len && ftruncate(fd, (off_t) final) != 0)
		why = "could not cut the file to its size";
	CloseTransientFile(fd);
	if (why != NULL)
	{
		unlink(tmp);
		elog(WARNING, "could not write shared weights file \"%s\": %s", path, why);
		return false;
	}
	if (rename(tmp, path) != 0)
	{
		SharedFileCannotShare("rename", tmp);
		unlink(tmp);
		return false;
	}
	SharedFileRemovePrefixed(model_prefix(cm, model), path);
	SharedFileSweepOrphans();
	/* (if it cannot be mapped after all, the caller packs a private copy) */
	return map_file(cm, path, fingerprint, false);
}
