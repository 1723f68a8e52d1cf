/*
 * torch_pickle.h
 *		PyTorch checkpoints (pytorch_model.bin, *.pt) read without Python:
 *		a restricted pickle machine that understands exactly what
 *		torch.save(state_dict) writes and refuses everything else, and the
 *		two container formats around it (the ZIP archive of torch >= 1.6,
 *		and the legacy stream of torch 0.4 to 1.5 and of
 *		_use_new_zipfile_serialization=False).  Part of the core: no
 *		postgres.h, so that fuzzers drive it outside the server
 *		(test/fuzz/fuzz_torch_pickle.c, test/fuzz/fuzz_torch_zip.c).
 *
 * Nothing in a pickle is ever executed: a pickle only ever names a few
 * allowed functions (collections.OrderedDict, torch._utils._rebuild_*,
 * the storage types), and "calling" them builds a descriptor.  Any other
 * global (os.system, builtins.eval, ...) or opcode is refused where it is
 * met, before anything is built from it.
 */
#ifndef TORCH_PICKLE_H
#define TORCH_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "spm.h"				/* SpmAlloc */
#include "torch_zip.h"			/* TfReadAt */

#define TF_TORCH_MAX_DIMS 8
/* the state dicts of the largest models have a few thousand tensors */
#define TF_TORCH_MAX_TENSORS 1000000
/* a tensor's name (real ones have at most a few hundred bytes) */
#define TF_TORCH_MAX_NAME 4096
/* the main pickle (data.pkl): a few hundred KB for the largest models */
#define TF_TORCH_MAX_PICKLE ((size_t) 256 * 1024 * 1024)
/* all the objects the machine builds from one file */
#define TF_TORCH_MAX_OBJECT_BYTES ((size_t) 64 * 1024 * 1024)

typedef struct TfTorchStorage
{
	char	   *key;			/* "0", "1", ... (ZIP); a number (legacy) */
	char		dtype[8];		/* as safetensors names it: "F32", "I64", ... */
	uint64_t	numel;			/* elements */
	uint64_t	offset;			/* of its first byte in the file (0 from
								 * tf_torch_unpickle) */
} TfTorchStorage;

typedef struct TfTorchTensor
{
	char	   *name;			/* NUL-terminated UTF-8, the state dict's key */
	char		dtype[8];		/* "F32", "F16", "BF16", "I8"; or another
								 * dtype to refuse: "F64", "I64", "I32",
								 * "I16", "U8", "BOOL" */
	int			storage;		/* index into the checkpoint's storages */
	uint64_t	offset;			/* byte offset of its first element in the
								 * file (tf_torch_unpickle: in its storage) */
	uint64_t	nbytes;			/* numel * element size */
	int			ndim;
	int64_t		shape[TF_TORCH_MAX_DIMS];
} TfTorchTensor;

/*
 * Tensors in the state dict's order.  Tied weights (two names, one tensor
 * or one storage at one offset) are two tensors with the same storage,
 * offset and nbytes.
 */
typedef struct TfTorchCheckpoint
{
	int			ntensors;
	TfTorchTensor *tensors;
	int			nstorages;
	TfTorchStorage *storages;
} TfTorchCheckpoint;

/*
 * Read a checkpoint of file_size bytes, a ZIP archive or the legacy format
 * (told apart by the first bytes; the tar format of torch < 0.4 is
 * recognised and refused).  The file is read through the callback: only
 * the directory and the pickles are held in memory, never the tensors'
 * bytes.  The pickle must be a state dict, str -> tensor (possibly as
 * {"state_dict": {...}} or {"model": {...}}); each tensor a contiguous
 * row-major view of its storage, which must lie within the file.  Returns
 * the number of tensors, *out allocated from a; or -1 with a sentence in
 * err (errlen bytes).
 */
int			tf_torch_checkpoint(TfReadAt read, void *ctx, uint64_t file_size, const SpmAlloc *a,
								TfTorchCheckpoint *out, char *err, size_t errlen);

/*
 * The pickle machine alone (for the fuzzer and the tests): the state dict
 * in len bytes of pickle (a ZIP checkpoint's data.pkl, or the main pickle
 * of a legacy one).  Storages are keyed but not located: their offsets are
 * 0 and a tensor's offset is within its storage.  Returns the number of
 * tensors, or -1 with a sentence in err.
 */
int			tf_torch_unpickle(const unsigned char *pkl, size_t len, const SpmAlloc *a,
							  TfTorchCheckpoint *out, char *err, size_t errlen);

/*
 * The element size of a dtype of TfTorchTensor, and the name PyTorch gives
 * it ("float32", "int64", ...) for messages; 0 and NULL if unknown.
 */
int			tf_torch_dtype_size(const char *dtype);
const char *tf_torch_dtype_torch_name(const char *dtype);

#endif							/* TORCH_PICKLE_H */
