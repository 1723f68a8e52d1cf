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

/*
 * The model's generation config, as Hugging Face reads it: from
 * generation_config.json when the model has one (GenerationConfig's
 * defaults for what it lacks), else from config.json
 * (GenerationConfig.from_model_config: MarianConfig's defaults, then
 * GenerationConfig's).  translate()'s NULL options take these.
 */
typedef struct ModelGeneration
{
	int			num_beams;
	double		length_penalty;
	TfEarlyStopping early_stopping;
	int			max_length;		/* start token included */
	int			max_new_tokens; /* -1: unset */
	int			min_length;
	int			no_repeat_ngram_size;
	double		repetition_penalty;
	int			forced_eos_id;	/* -1: none */
	bool		renormalize;
	int			nbad;
	int		   *bad_off;		/* (nbad + 1) */
	int		   *bad_ids;
} ModelGeneration;

typedef struct CachedModel
{
	char		name[NAMEDATALEN];	/* hash key (CacheEntryHeader) */
	MemoryContext cxt;			/* the weights live here */
	TfModel		model;
	ModelGeneration gen;
	char		source_lang[33];	/* "" if unknown */
	char		target_lang[33];
	char		source_tokenizer[NAMEDATALEN];
	char		target_tokenizer[NAMEDATALEN];
	Size		weight_bytes;	/* bytes of the weights as held */
	Size		shared_file_bytes;	/* > 0: mapped from the shared file of this size */
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
 * Parse the generation config (generation_config.json, or NULL to read
 * config.json's keys) into gen, allocating in cxt; its token ids
 * (decoder_start_token_id, eos_token_id) override cfg's.  ERROR on
 * anything out of range.
 */
extern void ParseGenerationConfig(Jsonb *generation, Jsonb *config, TfConfig *cfg,
								  ModelGeneration *gen, MemoryContext cxt);

/*
 * Point the weights of m at copies of the tensors (allocated in cxt):
 * matrices in their stored dtype, vectors in fp32,
 * checking every name and shape against the configuration.  All of them
 * lie in one arena, returned in *arena if arena is not NULL; the bytes
 * used are returned.
 */
extern Size BuildModelWeights(TfModel *m, StoredTensor *tensors, int ntensors, MemoryContext cxt,
							  const char **arena);

/*
 * The tensors of model `name` (in file order), checked as untrusted rows
 * (ERROR "model is damaged"); inside ExtSpiConnect(): the data lives in
 * SPI's memory until ExtSpiFinish().
 */
extern int	ReadModelTensors(const char *name, StoredTensor **out);

/* The core's dtype of a stored tensor (its dtype already checked by TensorDefect). */
extern TfDType StoredDType(const StoredTensor *t);

/* A weight matrix (kept in its dtype, quantizable), not a vector or positions? */
extern bool IsWeightMatrix(const StoredTensor *t);

/* model_files.c */
extern void CheckModelName(const char *name);
extern int64 StoreModel(const char *name, const char *config_text, Size config_len,
						const char *st_header, Size hlen, StoredTensor *tensors, int ntensors,
						const char *src_spm, Size src_len, const char *tgt_spm, Size tgt_len,
						const char *vocab_text, Size vocab_len, const char *gen_text, Size gen_len,
						const char *source_lang, const char *target_lang);

/* Register the cache invalidation callback; from _PG_init. */
extern void InitModelCache(void);

#endif							/* MODEL_STORE_H */
