/*
 * decode_workspace.h
 *		Decoding's buffers, kept from one call to the next
 *		(decode_workspace.c).
 */
#ifndef DECODE_WORKSPACE_H
#define DECODE_WORKSPACE_H

#include "postgres.h"

#include "spm.h"				/* SpmAlloc */

/* ERROR if the core asks for a buffer larger than one allocation may be. */
extern void CheckBufferSize(size_t size);

/* An SpmAlloc's function: memory from the MemoryContext ctx, size checked. */
extern void *WorkspaceContextAlloc(void *ctx, size_t size);

/*
 * An allocator for one decoding call; overflow goes to cxt.  Hold it until
 * ReleaseWorkspace(); a nested caller gets plain memory from cxt.
 */
extern SpmAlloc DecodeWorkspace(MemoryContext cxt);
extern void ReleaseWorkspace(SpmAlloc *a);

/* transformer.decode_workspace: the most bytes (in kB) kept between calls */
extern int	decode_workspace_kb;

/* At load: an error in the holder's (sub)transaction releases the workspace. */
extern void InitDecodeWorkspace(void);

#endif							/* DECODE_WORKSPACE_H */
