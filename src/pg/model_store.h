/*
 * model_store.h
 *		Models in tables: configuration parsing, tensors, the per-backend
 *		cache.  PostgreSQL glue around the core's TfModel.
 */
#ifndef MODEL_STORE_H
#define MODEL_STORE_H

#include "postgres.h"

#include "access/htup.h"
#include "access/tupdesc.h"
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
	/* where an import finds the bytes (checkpoint_files.c) */
	int			src_file;
	uint64		src_offset;
	int			alias_of;		/* an earlier tensor with the same bytes, or -1 */
	/*
	 * Or, data NULL, the rows that hold the bytes (parts 0, 1, ... of
	 * transformer_tensors, column 4 of desc), detoasted one at a time as
	 * the tensor is packed (ReadModelTensors(..., lazy)).
	 */
	HeapTuple  *rows;
	int			nrows;
	TupleDesc	desc;
} StoredTensor;

/* The files of a checkpoint (checkpoint_files.c). */
typedef struct CheckpointFiles
{
	int			nfiles;
	char	  **paths;
	const char *dir;			/* the model directory, which every path lies inside */
	const char *layout;			/* "model.safetensors", "sharded pytorch_model.bin", ... */
} CheckpointFiles;

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
	int			segment_tokens;	/* the longest segment it translates reliably; 0: unknown */
	char		source_tokenizer[NAMEDATALEN];
	char		target_tokenizer[NAMEDATALEN];
	Size		weight_bytes;	/* bytes of the weights as held */
	Size		shared_file_bytes;	/* > 0: mapped from the shared file of this size */
	/* language tokens (model_languages.c) */
	int			nlangs;
	char	  **lang_code;		/* (nlangs) deu_Latn, de, fra */
	char	  **lang_token;		/* (nlangs) deu_Latn, __de__, >>fra<< */
	int		   *lang_id;		/* (nlangs) */
	int			lang_source;	/* where the source language's token goes: LANG_* */
	bool		lang_forced_bos;	/* the target's is forced first (else it starts the source) */
	/* embed(): sentence-transformers' settings (transformer_models.embedding) */
	TfPooling	pooling;
	bool		normalize;
	int			max_seq_length; /* tokens, the two special ones included */
	int			cls_id;			/* the first token of an encoder-only model's input */
	int			sep_id;			/* its last */
} CachedModel;

enum
{
	LANG_NONE, LANG_PREFIX, LANG_SUFFIX
};

/* model_languages.c */
extern void LoadLanguages(CachedModel *cm, Jsonb *languages, const char *model);
extern bool IsLanguageToken(const CachedModel *cm, int id);

/* model_stats.c: per-model statistics in shared memory (with shared_preload_libraries) */
extern void InitModelStats(void);
extern void RecordModelCall(const char *model, int64 sentences, int64 tokens_in, int64 tokens_out, double ms);
extern void RecordModelCache(const char *model, bool hit);

/*
 * Called at every GetModel(), if set: _PG_init sets it to MaybeResumeJobs(),
 * so that the first use of a model after a server start resumes the jobs.
 */
extern void (*model_use_hook) (void);

/* The model called name, loaded once per backend; ERROR if none. */
extern CachedModel *GetModel(const char *name);

/*
 * GetModel() for embed(): with transformer.compute_type = auto (the
 * default), the model's int8 copy (its float matrices quantized at load).
 */
extern CachedModel *GetEmbeddingModel(const char *name);

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
 * The same into an arena the caller gives: zeroed, 64-byte aligned, of at
 * least ModelArenaBound() bytes (a shared file being written, so that a
 * model is packed once, straight where it is used).
 */
extern Size BuildModelWeightsInto(TfModel *m, StoredTensor *tensors, int ntensors, MemoryContext cxt,
								  char *arena, Size arena_bytes);
extern Size ModelArenaBound(const TfModel *m, const StoredTensor *tensors, int ntensors);

/* BuildModelWeights()'s checks of names and shapes only (tensors' data unread). */
extern void CheckModelShapes(TfModel *m, StoredTensor *tensors, int ntensors);

/* BuildModelWeights()'s checks of one tensor's values (finite; int8 scales >= 0). */
extern void CheckTensorValues(const StoredTensor *t);

/* The families of model_type (model_config.c). */
typedef enum ModelFamily
{
	FAMILY_MARIAN,
	FAMILY_M2M100,
	FAMILY_BERT,				/* encoder-only: BertModel, WordPiece */
	FAMILY_XLMR					/* encoder-only: XLMRobertaModel, SentencePiece + fairseq ids */
} ModelFamily;

extern ModelFamily ConfigFamily(Jsonb *config);

/* GetModel() of a model that translates: ERROR for an encoder-only one. */
extern CachedModel *GetTranslationModel(const char *name);

/* transformer_models.embedding ({"pooling", "normalize", "max_seq_length", "cls_id", "sep_id"}) into cm; NULL: a translation model's defaults */
extern void ParseEmbeddingSettings(Jsonb *j, CachedModel *cm, const char *name);

/*
 * The tensors of model `name` (in file order), checked as untrusted rows
 * (ERROR "model is damaged"); inside ExtSpiConnect(): the data lives in
 * SPI's memory until ExtSpiFinish().  lazy: the bytes are not read, only
 * their rows kept (StoredTensor.rows), for BuildModelWeights() to read
 * part by part: the peak is then the packed weights and one part.
 */
extern int	ReadModelTensors(const char *name, StoredTensor **out, bool lazy);

/* ERROR (XX001) "model is damaged", with the detail given. */
extern void ModelDamaged(const char *model, const char *detail) pg_attribute_noreturn();

/* A stored tensor's number of values (its shape checked by TensorDefect). */
extern Size TensorNumel(const StoredTensor *t);

/* The core's dtype of a stored tensor (its dtype already checked by TensorDefect). */
extern TfDType StoredDType(const StoredTensor *t);

/* A weight matrix (kept in its dtype, quantizable), not a vector or positions? */
extern bool IsWeightMatrix(const StoredTensor *t);

/* checkpoint_files.c */

/*
 * The weights of a checkpoint directory, located but not read: the tensors
 * to store (tied aliases dropped) and the safetensors header describing
 * them laid end to end (8 + *hlen bytes).
 */
extern int	LocateCheckpoint(const char *dir, ModelFamily family, CheckpointFiles *files, StoredTensor **out,
							 char **header, Size *hlen);
/* One located tensor's bytes in a new bytea; t->data points into it. */
extern bytea *ReadTensorBytea(const CheckpointFiles *files, StoredTensor *t);
/* A whole safetensors file in memory (bytes from the client); data points into buf. */
extern int	ParseSafetensors(const char *buf, Size len, StoredTensor **out, Size *hlen_out);
/* A safetensors header for tensors laid out in order (sets their offsets). */
extern char *SafetensorsHeaderFor(StoredTensor *t, int n, const char *metadata, Size *hlen);

/* What StoreModel() stores: the files of a model, as bytes. */
typedef struct ModelImport
{
	const char *config;			/* config.json */
	Size		config_len;
	const char *header;			/* the safetensors header: 8 + hlen bytes */
	Size		hlen;
	StoredTensor *tensors;
	int			ntensors;
	const CheckpointFiles *files;	/* the tensors' bytes are read from these;
									 * NULL: they are in memory */
	const char *src_spm;
	Size		src_len;
	const char *tgt_spm;
	Size		tgt_len;
	const char *vocab;			/* vocab.json: piece -> id (the source's) */
	Size		vocab_len;
	const char *tgt_vocab;		/* the target's, if separate; else NULL */
	Size		tgt_vocab_len;
	const char *gen;			/* generation_config.json, or NULL */
	Size		gen_len;
	const char *source_lang;	/* or NULL */
	const char *target_lang;
	Jsonb	   *languages;		/* language tokens (see model_languages()), or NULL */
	int			segment_tokens;	/* tokenizer_config.json's segment_tokens (ours), or 0 */
	Jsonb	   *embedding;		/* an encoder's embed() settings (see ParseEmbeddingSettings), or NULL */
} ModelImport;

/* model_rows.c */
/* transformer.tensor_part_size (kB): the most bytes of a tensor one row holds */
extern int	tensor_part_kb;
extern void CheckModelName(const char *name);
extern int64 StoreModel(const char *name, const ModelImport *mi);
/* A model's rows but its tensors, as StoreModel() takes them (inside ExtSpiConnect()). */
extern void ReadModelImport(const char *name, MemoryContext cxt, ModelImport *mi);
/* language_tokens.c: a Marian vocabulary's >>fra<< tokens as the languages jsonb; NULL if none. */
extern Jsonb *MarianLanguages(const Tokenizer *t);

/* model_languages.c: ERROR unless languages is well-formed for cfg (untrusted rows). */
extern void CheckLanguages(Jsonb *languages, const TfConfig *cfg, const char *model);

/* Register the cache invalidation callback; from _PG_init. */
extern void InitModelCache(void);

#endif							/* MODEL_STORE_H */
