/*
 * weight_cache.h
 *		Packed weights shared between backends through mapped files
 *		(weight_cache.c; the format is weight_file.c's).
 */
#ifndef WEIGHT_CACHE_H
#define WEIGHT_CACHE_H

#include "postgres.h"

#include "model_store.h"

/* the library's version, part of every file's build tag (transformer.control's default_version) */
#define TRANSFORMER_VERSION "0.4.0"

extern bool transformer_shared_weights;
extern char *transformer_weight_cache_dir;

/* Define the settings; from _PG_init. */
extern void InitWeightCache(void);

/*
 * The SQL expression of a row's version in table (xmin, ctid, file_id as
 * text), or "NULL::text" for tables without file_id (0.3.0's: no sharing).
 */
extern const char *RowVersionSql(const char *table);

/* Is a row version (RowVersionSql's text) this transaction's own, not yet committed? */
extern bool RowIsUncommitted(const char *row);

/*
 * A fingerprint of the model's rows: model_row (RowVersionSql's text of
 * the models row) and every tensor row's name, xmin and ctid, seeded with
 * the cluster and the database; *uncommitted tells whether any of those
 * rows is this transaction's own (never published: a private copy).
 * Inside ExtSpiConnect().
 */
extern uint64 ModelFingerprint(const char *model, const char *model_row, bool *uncommitted);

/*
 * Point cm's weights into the model's shared file if it exists and checks
 * out.  The first call after a start of the server removes every file of
 * the cluster first.
 */
extern bool MapSharedWeights(CachedModel *cm, const char *model, uint64 fingerprint);

/*
 * Pack the model's tensors (read lazily: ReadModelTensors(..., true))
 * straight into a new shared file and point cm's weights into it: the
 * peak is the packed weights and one part of a tensor, not the tensors,
 * a private arena and the file.  false, cm's weights unset, if sharing
 * is off, fingerprint is 0 (rows not committed are never published), or
 * the file cannot be written (a WARNING or LOG says why): the caller
 * packs a private copy.  An ERROR while packing (a damaged tensor) removes
 * the file being written.
 */
extern bool BuildSharedWeights(CachedModel *cm, const char *model, uint64 fingerprint,
							   StoredTensor *tensors, int ntensors);

/* Remove the model's files in this database (drop, re-import). */
extern void RemoveSharedWeights(const char *model);

/* The fingerprint of a tokenizer's row (tokenizers are shared the same way: tokenizer_share.c). */
extern uint64 TokenizerFingerprint(const char *name, const char *row);

/*
 * The shared files' machinery, for tokenizer_share.c: names, the build
 * tag, writing, removing and sweeping.
 */
/* this cluster's system identifier, in every file name and fingerprint; and as "<id>_" */
extern uint64 SharedFileClusterId(void);
extern char *SharedFileClusterPrefix(void);

#define FILE_SUFFIX ".tfw"
#define TEMP_PREFIX "tmp."
#define TOK_PREFIX "tok_"
/* a model's weights with the compute type bf16 (transformer.compute_type): another file */
#define BF16_PREFIX "b16_"
/* ... and with the compute type int8 */
#define INT8_PREFIX "i8_"

/* A mapping, released with the cache entry's memory (SharedFileUnmap as its reset callback). */
typedef struct SharedMapping
{
	void	   *addr;
	Size		len;
} SharedMapping;

extern void SharedFileUnmap(void *arg);

/* the build tag: the library's version and the core's layout */
extern const char *SharedFileBuildTag(void);

/* "<system identifier>_<database>_<name in hex>_" */
extern char *SharedFilePrefix(Oid db, const char *model);

/* A WARNING: could not <what> the shared file path; this backend keeps its own copy. */
extern void SharedFileCannotShare(const char *what, const char *path);

/*
 * A new temporary file of len bytes for the shared file path, its blocks
 * reserved: the fd, or -1 after a WARNING (nothing left behind).
 */
extern int	SharedFileCreate(const char *tmp, const char *path, size_t len);

/*
 * Remove the files whose names start with prefix, but keep (a path, or
 * NULL), and dead builders' temporary files; how many it removed.
 */
extern int	SharedFileRemovePrefixed(const char *prefix, const char *keep);

/* Remove the files of dropped databases and names gone.  Inside ExtSpiConnect(). */
extern void SharedFileSweepOrphans(void);

/* The first use after a start of the server removes every file of the cluster. */
extern void SharedFileSweepAfterStart(void);

#endif							/* WEIGHT_CACHE_H */
