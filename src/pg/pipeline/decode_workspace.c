/*
 * decode_workspace.c
 *		Decoding's buffers, kept from one call to the next, and the
 *		allocators the core's decoding takes (the workspace, or a memory
 *		context).
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/memutils.h"

#include "decode_workspace.h"

/*
 * Decoding's buffers (encoder scratch, key/value caches, logits), kept from
 * one call to the next so that translate() does not allocate them and
 * fault in fresh pages every time.  A call takes them from the workspace
 * in order; what does not fit comes from the caller's memory context, and
 * the next call grows the workspace to what this one needed, up to
 * transformer.decode_workspace (512 MB by default), held by the backend for
 * its lifetime.  (Fresh pages are dear: on a virtual machine, faulting in a
 * batch's key/value caches took a third of a batch's time.)  Nothing in
 * the core reads a buffer before writing it, so none is zeroed.
 *
 * One call holds it at a time: a nested call (a user's code run by a load
 * in the middle of ours) allocates from its own memory context instead,
 * so the outer call's buffers are never reused or freed under it.  The
 * holder releases it when done, or its (sub)transaction's abort does.
 */
/* transformer.decode_workspace, in kB */
int			decode_workspace_kb = 512 * 1024;
#define WORKSPACE_ALIGN 64

typedef struct Workspace
{
	char	   *raw;			/* in TopMemoryContext */
	char	   *base;			/* raw, aligned */
	Size		size;
	Size		used;			/* by the current call */
	Size		need;			/* what the current call asked for */
	bool		busy;			/* a call holds it */
	SubTransactionId owner;		/* the holder's subtransaction */
} Workspace;

static Workspace workspace;

/*
 * The core asks for its buffers by size; a model's configuration (which
 * any writer of our tables sets) can make one absurd: refuse it clearly.
 */
void
CheckBufferSize(size_t size)
{
	if (size > MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the model would need a buffer of %zu bytes", size),
				 errdetail("The limit is %zu bytes.", (size_t) MaxAllocSize),
				 errhint("Use a shorter input, a smaller beam_size or max_length, or fewer sentences at once.")));
}

void *
WorkspaceContextAlloc(void *ctx, size_t size)
{
	CheckBufferSize(size);
	return MemoryContextAlloc((MemoryContext) ctx, size);
}

static void *
workspace_alloc(void *ctx, size_t size)
{
	Size		bytes = TYPEALIGN(WORKSPACE_ALIGN, size);
	void	   *p;

	CheckBufferSize(size);
	workspace.need += bytes;
	if (workspace.used + bytes <= workspace.size)
	{
		p = workspace.base + workspace.used;
		workspace.used += bytes;
		return p;
	}
	return MemoryContextAlloc((MemoryContext) ctx, size);
}

/*
 * An allocator for one decoding call; overflow goes to cxt.  Hold it until
 * ReleaseWorkspace(); a nested caller gets plain memory from cxt.
 */
SpmAlloc
DecodeWorkspace(MemoryContext cxt)
{
	SpmAlloc	a = {workspace_alloc, cxt};

	if (workspace.busy)
	{
		a.alloc = WorkspaceContextAlloc;
		return a;
	}
	workspace.busy = true;
	workspace.owner = GetCurrentSubTransactionId();
	if (workspace.size > (Size) decode_workspace_kb * 1024)
	{
		/* the setting was lowered: give the memory back */
		pfree(workspace.raw);
		workspace.raw = NULL;
		workspace.size = 0;
	}
	if (workspace.need > workspace.size && workspace.need <= (Size) decode_workspace_kb * 1024)
	{
		/*
		 * Half as much again, within the limit: a longer batch next (a
		 * larger max_length) then fits, instead of faulting in a new
		 * workspace once more.
		 */
		Size		want = Min(workspace.need + workspace.need / 2, (Size) decode_workspace_kb * 1024);

		if (workspace.raw)
			pfree(workspace.raw);
		workspace.raw = NULL;
		workspace.size = 0;
		workspace.raw = MemoryContextAlloc(TopMemoryContext, want + WORKSPACE_ALIGN);
		workspace.base = (char *) TYPEALIGN(WORKSPACE_ALIGN, workspace.raw);
		workspace.size = want;
	}
	workspace.used = 0;
	workspace.need = 0;
	return a;
}

void
ReleaseWorkspace(SpmAlloc *a)
{
	if (a->alloc == workspace_alloc)
		workspace.busy = false;
}

/* An error in the holder's (sub)transaction releases the workspace. */
static void
workspace_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		workspace.busy = false;
}

static void
workspace_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						   SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB && workspace.busy && workspace.owner >= mySubid)
		workspace.busy = false;
}

void
InitDecodeWorkspace(void)
{
	RegisterXactCallback(workspace_xact_callback, NULL);
	RegisterSubXactCallback(workspace_subxact_callback, NULL);
}
