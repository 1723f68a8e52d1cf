/*
 * fuzz_arena.h
 *		The libFuzzer harnesses' allocator for SpmAlloc: every block is
 *		freed after each input, so leaks are not reported, and a request
 *		over 1 GB aborts (the readers must bound what they allocate).
 */
#ifndef FUZZ_ARENA_H
#define FUZZ_ARENA_H

#include <stdlib.h>

typedef struct Arena
{
	void	  **ptrs;
	size_t		n,
				cap;
} Arena;

static void *
arena_alloc(void *ctx, size_t size)
{
	Arena	   *a = ctx;
	void	   *p;

	if (size > ((size_t) 1 << 30))
		abort();				/* the reader must bound its allocations */
	p = calloc(1, size ? size : 1);
	if (p == NULL)
		abort();
	if (a->n == a->cap)
	{
		a->cap = a->cap ? a->cap * 2 : 64;
		a->ptrs = realloc(a->ptrs, a->cap * sizeof(void *));
		if (a->ptrs == NULL)
			abort();
	}
	a->ptrs[a->n++] = p;
	return p;
}

static void
arena_free(Arena *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->ptrs[i]);
	free(a->ptrs);
}

#endif							/* FUZZ_ARENA_H */
