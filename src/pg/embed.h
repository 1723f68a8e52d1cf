/*
 * embed.h
 *		Sentence embeddings (sql_embed.c), for the SQL functions and the
 *		embedding jobs (src/worker/job_worker.c).
 */
#ifndef EMBED_H
#define EMBED_H

#include "postgres.h"

#include "utils/array.h"

#include "model_store.h"

/* Vectors of count texts (out[i] NULL where in[i] is), each as embed(text, model) gives it. */
extern void EmbedTexts(CachedModel *cm, const char *model, int count, text **in, ArrayType **out);

#endif							/* EMBED_H */
