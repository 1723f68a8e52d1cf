/*
 * document_plan.h
 *		A document's text as parts, its sentences as jobs to translate
 *		(document_plan.c), for translate_document.c.
 */
#ifndef DOCUMENT_PLAN_H
#define DOCUMENT_PLAN_H

#include "casing.h"
#include "model_store.h"
#include "tokenizer.h"

/* A unit as parts: its own bytes, or a sentence's translation. */
typedef struct Part
{
	int			job;			/* -1: the bytes u[off..off+len) */
	size_t		off;
	size_t		len;
} Part;

typedef struct DocPlan
{
	Part	   *parts;
	int			nparts;
	int			cap;
} DocPlan;

typedef struct Jobs
{
	const char **s;				/* UTF-8 sentences to translate */
	size_t	   *len;
	int			n;
	int			cap;
	MemoryContext scratch;		/* count_tokens()'s, reset on each call */
	/* casing: NULL, or the scorer's argument; each job's style */
	void	   *casing;
	const char *locale;
	TfCaseStyle current;
	TfCaseStyle *style;
} Jobs;

typedef struct VocabArg
{
	Tokenizer  *tok;
	MemoryContext scratch;
} VocabArg;

static inline bool
doc_is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/*
 * A text u[0..len) as parts: its sentences (or, if !split, the whole text)
 * cut further if too long, as jobs; the whitespace kept.  ALL CAPS and
 * Title Case sentences are lowered in u when jobs->casing is set.
 */
extern void PlanDocument(CachedModel *cm, Tokenizer *tok, int limit, bool split, const char *u, size_t len,
						 DocPlan *plan, Jobs *jobs);

/* The most tokens a sentence may have: the model's positions, or its reliable length if shorter. */
extern int	SegmentLimit(CachedModel *cm);

/* Does s[0..len) end with sentence punctuation (closing quotes and brackets aside)? */
extern bool EndsSentence(const char *s, size_t len);

#endif							/* DOCUMENT_PLAN_H */
