/*
 * train_weights.h
 *		A stored model as the trainer's fp32 parameters, and trained
 *		parameters stored as a new model (pipeline/train_weights.c), for
 *		fine_tune()'s worker; and the training pairs' token ids
 *		(pipeline/translate.c's TrainingIds).
 */
#ifndef TRAIN_WEIGHTS_H
#define TRAIN_WEIGHTS_H

#include "postgres.h"

#include "train_model.h"

typedef struct TrainWeights
{
	TfTrainModel tm;			/* params and grads allocated, bound */
	float	   *positions;		/* (max_pos, d) the sinusoidal table, source and target */
	float	   *logits_bias;	/* (vocab) Marian's final_logits_bias, or NULL */
	int			nnames;
	TfTrainNamed *names;		/* (nnames) every parameter under its checkpoint name */
	/* the config's dropout rates (0 where it has none) */
	float		dropout;
	float		attention_dropout;
	float		activation_dropout;
} TrainWeights;

/*
 * Model `name`'s weights as fp32 parameters (fp16, bf16 and int8 matrices
 * from their fp32 values), allocated in cxt.
 * ERROR for a model the trainer cannot train (encoder-only, learned
 * positions, embeddings shared in part).
 */
extern void LoadTrainWeights(const char *name, TrainWeights *w, MemoryContext cxt);

/*
 * Store params (w's layout) as new_name: model's config, tokenizers and
 * settings, every tensor in fp32 in model's order, with the safetensors
 * metadata given (a JSON object).  One transaction's rows: a model being
 * written is never half visible.
 */
extern void StoreTrainedModel(const char *model, const char *new_name, const TrainWeights *w,
							  const float *params, const char *metadata);

#endif							/* TRAIN_WEIGHTS_H */
