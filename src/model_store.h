/*
 * model_store.h
 *		Models in tables: configuration parsing, tensors, the per-backend
 *		cache.  PostgreSQL glue around the core's TfModel.
 */
#ifndef MODEL_STORE_H
#define MODEL_STORE_H

#include "postgres.h"

#include "utils/jsonb.h"

#include "model.h"
#include "tokenizer.h"

#define MAX_TENSOR_DIMS 8

/* One tensor as stored: raw little-endian bytes of a safetensors dtype. */
typedef struct StoredTensor
{
	char	   *name;
	char		dtype[8];		/* F32, F16, BF16 */
	int			ndim;
	int64		shape[MAX_TENSOR_DIMS];
	int64		offset;			/* in the safetensors file's data section */
	const char *data;
	Size		nbytes;
} StoredTensor;

typedef struct CachedModel
{
	char		name[NAMEDATALEN];	/* hash key (CacheEntryHeader) */
	MemoryContext cxt;			/* the weights live here */
	TfModel		model;
	char		source_tokenizer[NAMEDATALEN];
	char		target_tokenizer[NAMEDATALEN];
	Size		weight_bytes;	/* bytes of the weights as held */
} CachedModel;

/* The model called name, loaded once per backend; ERROR if none. */
extern CachedModel *GetModel(const char *name);

/*
 * NULL if the tensor's dtype is known, its shape non-negative and its bytes
 * exactly shape x dtype size (overflow-checked); else a detail sentence.
 */
extern const char *TensorDefect(const StoredTensor *t);

/* Parse config.json into cfg; ERROR on anything missing or out of range. */
extern void ParseModelConfig(Jsonb *config, TfConfig *cfg);

/*
 * Point the weights of m at copies of the tensors (allocated in cxt):
 * matrices in their stored dtype, vectors in fp32,
 * checking every name and shape against the configuration.
 */
extern Size BuildModelWeights(TfModel *m, StoredTensor *tensors, int ntensors, MemoryContext cxt);

/* Register the cache invalidation callback; from _PG_init. */
extern void InitModelCache(void);

/* Register the callbacks that release decoding's workspace on abort; from _PG_init. */
extern void InitDecodeWorkspace(void);

#endif							/* MODEL_STORE_H */
