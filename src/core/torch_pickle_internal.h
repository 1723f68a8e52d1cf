/*
 * torch_pickle_internal.h
 *		What the pieces of the PyTorch checkpoint reader share, for use in
 *		them only (their interface is torch_pickle.h): the pickle machine's
 *		objects and state, its limits, and the functions one piece calls in
 *		another.  No postgres.h.
 *
 * Python's unpickler imports any module a pickle names and calls what it
 * finds there: a checkpoint from the internet can run os.system.  This one
 * knows a handful of names, and "calling" one builds a descriptor (an
 * empty dict, a tensor's storage, offset, shape and strides); any other
 * name or opcode stops it where it is met.  It is a plain loop over the
 * opcodes with an explicit stack: a pickle's nesting costs no C stack, and
 * no object is ever walked recursively (a pickle can make a list contain
 * itself).  Every count and size is bounded (see the limits below), so
 * that any bytes, hostile or corrupt, end in a message.
 *
 * The pieces, each calling only those listed before it:
 *
 *	torch_pickle_objects.c	the objects, their memory budget, the message
 *	torch_pickle_globals.c	the allowlist: the globals a state dict may
 *							name, and what calling each one builds
 *	torch_pickle_tensors.c	the storages the pickle names, and the state
 *							dict of tensors it leaves (the result)
 *	torch_pickle_machine.c	the input, the stack and the memo, the opcodes
 *	torch_checkpoint.c		the ZIP and legacy files around the pickle
 *
 * What torch.save(state_dict) writes (torch 1.13, pickle protocol 2 by
 * default, and protocols 1 to 5 on request):
 *
 *	collections.OrderedDict() with SETITEMS of
 *		name -> torch._utils._rebuild_tensor_v2(
 *				persistent id ('storage', torch.FloatStorage, key, location, numel),
 *				storage_offset, size, stride, requires_grad, OrderedDict())
 *	  (nn.Parameter wrapped in torch._utils._rebuild_parameter(tensor,
 *	  requires_grad, OrderedDict())), then BUILD with {'_metadata': ...}
 *	  for a module's state dict.
 *
 * In a ZIP archive (torch >= 1.6) the pickle is <prefix>/data.pkl and the
 * storage of key k is the entry <prefix>/data/k.  In the legacy format the
 * file is five pickles (magic number, protocol version, system info, the
 * object, the list of storage keys) followed by each storage in the list's
 * order, as an 8-byte little-endian element count and the raw elements.
 */
#ifndef TORCH_PICKLE_INTERNAL_H
#define TORCH_PICKLE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "torch_pickle.h"

/* Limits of one file's pickles (real checkpoints stay far below them). */
#define MAX_STACK		((size_t) 1 << 20)	/* Python batches SETITEMS by 1000 */
#define MAX_MARKS		1024	/* torch.save nests 4 deep */
#define MAX_MEMO		((uint64_t) 1 << 22)	/* ~10 entries a tensor */
#define MAX_STRING		((uint64_t) 16 * 1024 * 1024)
#define MAX_LINE		256		/* GLOBAL's module and name, INT */
#define MAX_STORAGES	TF_TORCH_MAX_TENSORS
#define MAX_BYTEORDER	16
/* the buffer a legacy file's pickles are read through */
#define WINDOW			65536

/* The storage types: the dtype of their elements, as safetensors names it. */
typedef struct DType
{
	const char *storage;		/* torch.<storage> */
	const char *dtype;
	const char *torch_name;
	int			size;
} DType;

typedef enum
{
	O_NONE,
	O_BOOL,
	O_INT,
	O_BIGINT,					/* a LONG1 beyond 64 bits: its bytes in str */
	O_FLOAT,
	O_STR,
	O_TUPLE,
	O_LIST,
	O_DICT,						/* keys and values alternate in seq */
	O_GLOBAL,
	O_STORAGE,
	O_TENSOR
} OType;

/* the globals a state dict names */
typedef enum
{
	G_ORDERED_DICT,
	G_REBUILD_TENSOR_V2,
	G_REBUILD_TENSOR,
	G_REBUILD_PARAMETER,
	G_STORAGE_TYPE
} GKind;

typedef struct Obj Obj;

typedef struct Tensor
{
	int			storage;
	uint64_t	view_offset;	/* of the storage view, in elements */
	uint64_t	view_numel;
	uint64_t	storage_offset; /* within the view, in elements */
	int			ndim;
	int64_t		shape[TF_TORCH_MAX_DIMS];
	int64_t		stride[TF_TORCH_MAX_DIMS];
} Tensor;

struct Obj
{
	OType		type;
	union
	{
		bool		b;
		int64_t		i;
		double		f;
		struct
		{
			char	   *s;			/* NUL-terminated (may hold NULs) */
			size_t		len;
		}			str;
		struct
		{
			Obj		  **v;
			uint32_t	n,
						cap;
		}			seq;
		struct
		{
			GKind		kind;
			int			dtype;		/* G_STORAGE_TYPE: index in tf_pickle_dtypes */
		}			g;
		struct
		{
			int			index;
			uint64_t	view_offset;
			uint64_t	view_numel;
		}			st;
		Tensor	   *t;
	}			u;
};

/* The pickle's bytes: all in memory, or read from the file through a window. */
typedef struct Src
{
	const unsigned char *buf;	/* bytes [start, start + len) */
	uint64_t	start;
	size_t		len;
	uint64_t	pos;			/* the next byte, absolute */
	uint64_t	end;			/* the first byte beyond the input */
	bool		capped;			/* end is TF_TORCH_MAX_PICKLE, not the file's */
	TfReadAt	read;			/* NULL: buf holds the whole input */
	void	   *ctx;
	unsigned char *window;
} Src;

typedef struct Vm
{
	const SpmAlloc *a;
	char	   *err;
	size_t		errlen;
	bool		failed;
	size_t		used;			/* bytes of objects, against the budget */
	Src			src;
	/* per pickle */
	Obj		  **stack;
	size_t		sp,
				stack_cap;
	size_t		marks[MAX_MARKS];
	int			nmarks;
	Obj		  **memo;
	uint64_t	memo_cap,
				memo_count;
	/* the storages of all the file's pickles, and a hash of their keys */
	TfTorchStorage *storages;
	int			nstorages,
				storages_cap;
	int		   *slots;			/* storage index + 1; 0: empty */
	uint32_t	nslots;			/* a power of 2 */
	uint32_t	seed;			/* of the keys' hash */
	size_t		probes;			/* slots looked at, for the interrupt hook */
	Obj		   *none,
			   *yes,
			   *no;
} Vm;

static inline uint32_t
le32(const unsigned char *p)
{
	return (uint32_t) p[0] | ((uint32_t) p[1] << 8) | ((uint32_t) p[2] << 16) | ((uint32_t) p[3] << 24);
}

static inline uint64_t
le64(const unsigned char *p)
{
	return (uint64_t) le32(p) | ((uint64_t) le32(p + 4) << 32);
}

/* torch_pickle_objects.c */

/* for messages: "... is a tuple", by OType */
extern const char *const tf_pickle_type_names[];

/* Set the message (the first one stays); returns false. */
bool		tf_pickle_fail(Vm *vm, const char *fmt,...) __attribute__((format(printf, 2, 3)));

/* Zeroed memory from the budget of TF_TORCH_MAX_OBJECT_BYTES, or NULL. */
void	   *tf_pickle_vm_alloc(Vm *vm, size_t size);
Obj		   *tf_pickle_new_obj(Vm *vm, OType type);
bool		tf_pickle_str_is(const Obj *o, const char *s);

/* The value of key s in dict d, or NULL. */
Obj		   *tf_pickle_dict_get(const Obj *d, const char *s);
bool		tf_pickle_nonneg_int(const Obj *o, uint64_t *v);

/* A machine with no pickle yet; false (and the message) if out of memory. */
bool		tf_pickle_vm_init(Vm *vm, const SpmAlloc *a, char *err, size_t errlen);

/* torch_pickle_globals.c */

/* The storage types: the dtype of their elements, as safetensors names it. */
extern const DType tf_pickle_dtypes[];

/* The global module.name if it is one a state dict needs; else refused. */
Obj		   *tf_pickle_find_global(Vm *vm, const char *module, size_t mlen, const char *name, size_t nlen);

/* REDUCE: callable(*args) for the few callables a state dict has. */
Obj		   *tf_pickle_reduce(Vm *vm, Obj *fn, Obj *args, uint64_t at);

/* torch_pickle_tensors.c */

/* The index of the storage with this key, or -1. */
int			tf_pickle_find_storage(Vm *vm, const char *key, size_t len);

/* BINPERSID: torch's persistent_load, a storage. */
Obj		   *tf_pickle_persistent_load(Vm *vm, Obj *pid, uint64_t at);

/*
 * The state dict the pickle left, into out: the number of tensors, or -1
 * with the message set.
 */
int			tf_pickle_state_dict(Vm *vm, Obj *res, TfTorchCheckpoint *out);

/* torch_pickle_machine.c */

/*
 * Run one pickle from vm->src.pos to its STOP: the object it leaves, or
 * NULL with the message set.
 */
Obj		   *tf_pickle_run(Vm *vm);

/* The pickle in memory. */
void		tf_pickle_src_mem(Vm *vm, const unsigned char *p, size_t len);

#endif							/* TORCH_PICKLE_INTERNAL_H */
