/*
 * torch_pickle.c
 *		A restricted pickle machine for PyTorch's state dicts, and the ZIP
 *		and legacy checkpoint formats around it.  No postgres.h.
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
#include "torch_pickle.h"
#include "safetensors.h"		/* tf_valid_utf8 */

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* torch.serialization's MAGIC_NUMBER 0x1950a86a20f9469cfc6c as LONG1 writes it */
static const unsigned char legacy_magic[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
#define LEGACY_PROTOCOL 1001

/* The storage types: the dtype of their elements, as safetensors names it. */
typedef struct DType
{
	const char *storage;		/* torch.<storage> */
	const char *dtype;
	const char *torch_name;
	int			size;
} DType;

static const DType dtypes[] = {
	{"FloatStorage", "F32", "float32", 4},
	{"HalfStorage", "F16", "float16", 2},
	{"BFloat16Storage", "BF16", "bfloat16", 2},
	{"CharStorage", "I8", "int8", 1},
	/* recognised, so that the glue can say which dtype it refuses */
	{"DoubleStorage", "F64", "float64", 8},
	{"LongStorage", "I64", "int64", 8},
	{"IntStorage", "I32", "int32", 4},
	{"ShortStorage", "I16", "int16", 2},
	{"ByteStorage", "U8", "uint8", 1},
	{"BoolStorage", "BOOL", "bool", 1},
};
#define NDTYPES ((int) (sizeof(dtypes) / sizeof(dtypes[0])))

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

/* for messages: "... is a tuple" */
static const char *const type_names[] = {
	"None", "a bool", "an int", "an int", "a float", "a str", "a tuple", "a list", "a dict",
	"a global", "a storage", "a tensor"
};

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
			int			dtype;		/* G_STORAGE_TYPE: index in dtypes */
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

static const char *const opnames[256] = {
	['('] = "MARK", ['.'] = "STOP", ['0'] = "POP", ['1'] = "POP_MARK", ['2'] = "DUP",
	['F'] = "FLOAT", ['I'] = "INT", ['J'] = "BININT", ['K'] = "BININT1", ['L'] = "LONG",
	['M'] = "BININT2", ['N'] = "NONE", ['P'] = "PERSID", ['Q'] = "BINPERSID",
	['R'] = "REDUCE", ['S'] = "STRING", ['T'] = "BINSTRING", ['U'] = "SHORT_BINSTRING",
	['V'] = "UNICODE", ['X'] = "BINUNICODE", ['a'] = "APPEND", ['b'] = "BUILD",
	['c'] = "GLOBAL", ['d'] = "DICT", ['}'] = "EMPTY_DICT", ['e'] = "APPENDS",
	['g'] = "GET", ['h'] = "BINGET", ['i'] = "INST", ['j'] = "LONG_BINGET",
	['l'] = "LIST", [']'] = "EMPTY_LIST", ['o'] = "OBJ", ['p'] = "PUT", ['q'] = "BINPUT",
	['r'] = "LONG_BINPUT", ['s'] = "SETITEM", ['t'] = "TUPLE", [')'] = "EMPTY_TUPLE",
	['u'] = "SETITEMS", ['G'] = "BINFLOAT", ['B'] = "BINBYTES", ['C'] = "SHORT_BINBYTES",
	[0x80] = "PROTO", [0x81] = "NEWOBJ", [0x82] = "EXT1", [0x83] = "EXT2", [0x84] = "EXT4",
	[0x85] = "TUPLE1", [0x86] = "TUPLE2", [0x87] = "TUPLE3", [0x88] = "NEWTRUE",
	[0x89] = "NEWFALSE", [0x8a] = "LONG1", [0x8b] = "LONG4", [0x8c] = "SHORT_BINUNICODE",
	[0x8d] = "BINUNICODE8", [0x8e] = "BINBYTES8", [0x8f] = "EMPTY_SET", [0x90] = "ADDITEMS",
	[0x91] = "FROZENSET", [0x92] = "NEWOBJ_EX", [0x93] = "STACK_GLOBAL", [0x94] = "MEMOIZE",
	[0x95] = "FRAME", [0x96] = "BYTEARRAY8", [0x97] = "NEXT_BUFFER", [0x98] = "READONLY_BUFFER",
};

static bool fail(Vm *vm, const char *fmt,...) __attribute__((format(printf, 2, 3)));

static bool
fail(Vm *vm, const char *fmt,...)
{
	va_list		ap;

	if (!vm->failed)
	{
		va_start(ap, fmt);
		vsnprintf(vm->err, vm->errlen, fmt, ap);
		va_end(ap);
		vm->failed = true;
	}
	return false;
}

static const char *
opname(unsigned char op)
{
	return opnames[op] ? opnames[op] : "an unknown opcode";
}

static uint32_t
le32(const unsigned char *p)
{
	return (uint32_t) p[0] | ((uint32_t) p[1] << 8) | ((uint32_t) p[2] << 16) | ((uint32_t) p[3] << 24);
}

static uint64_t
le64(const unsigned char *p)
{
	return (uint64_t) le32(p) | ((uint64_t) le32(p + 4) << 32);
}

/* Zeroed memory from the budget of TF_TORCH_MAX_OBJECT_BYTES, or NULL. */
static void *
vm_alloc(Vm *vm, size_t size)
{
	if (size > TF_TORCH_MAX_OBJECT_BYTES - vm->used)
	{
		fail(vm, "the pickle builds more than %zu MB of objects; a state dict needs far less",
			 TF_TORCH_MAX_OBJECT_BYTES >> 20);
		return NULL;
	}
	vm->used += size;
	return vm->a->alloc(vm->a->ctx, size);
}

static Obj *
new_obj(Vm *vm, OType type)
{
	Obj		   *o = vm_alloc(vm, sizeof(Obj));

	if (o)
		o->type = type;
	return o;
}

/* Append item to a tuple, list or dict (a key or a value). */
static bool
seq_push(Vm *vm, Obj *o, Obj *item)
{
	if (o->u.seq.n == o->u.seq.cap)
	{
		uint32_t	cap = o->u.seq.cap ? o->u.seq.cap * 2 : 8;
		Obj		  **v;

		/* the budget stops any sequence long before this */
		if (o->u.seq.cap >= UINT32_MAX / 4)
			return fail(vm, "a list or dict of the pickle is too long");
		v = vm_alloc(vm, sizeof(Obj *) * cap);
		if (v == NULL)
			return false;
		if (o->u.seq.n)
			memcpy(v, o->u.seq.v, sizeof(Obj *) * o->u.seq.n);
		o->u.seq.v = v;
		o->u.seq.cap = cap;
	}
	o->u.seq.v[o->u.seq.n++] = item;
	return true;
}

/* A tuple of the n objects at items (copied: items may be the stack). */
static Obj *
new_tuple(Vm *vm, Obj *const *items, size_t n)
{
	Obj		   *o = new_obj(vm, O_TUPLE);

	if (o == NULL)
		return NULL;
	if (n > 0)
	{
		o->u.seq.v = vm_alloc(vm, sizeof(Obj *) * n);
		if (o->u.seq.v == NULL)
			return NULL;
		memcpy(o->u.seq.v, items, sizeof(Obj *) * n);
	}
	o->u.seq.n = o->u.seq.cap = (uint32_t) n;
	return o;
}

static bool
str_is(const Obj *o, const char *s)
{
	return o->type == O_STR && o->u.str.len == strlen(s) && memcmp(o->u.str.s, s, o->u.str.len) == 0;
}

/* The value of key s in dict d, or NULL. */
static Obj *
dict_get(const Obj *d, const char *s)
{
	for (uint32_t i = 0; i + 1 < d->u.seq.n; i += 2)
		if (str_is(d->u.seq.v[i], s))
			return d->u.seq.v[i + 1];
	return NULL;
}

/* ---- the input ---- */

/* Copy the next n bytes of the pickle to dst (op at byte at wants them). */
static bool
take(Vm *vm, void *dst, uint64_t n, unsigned char op, uint64_t at)
{
	Src		   *s = &vm->src;
	unsigned char *d = dst;

	if (n > s->end - s->pos)
	{
		if (s->capped)
			return fail(vm, "the pickle is longer than %zu MB", TF_TORCH_MAX_PICKLE >> 20);
		return fail(vm, "the pickle ends inside %s at byte %llu", opname(op), (unsigned long long) at);
	}
	while (n > 0)
	{
		uint64_t	chunk;

		if (s->pos >= s->start && s->pos - s->start < s->len)
		{
			chunk = s->start + s->len - s->pos;
			if (chunk > n)
				chunk = n;
			memcpy(d, s->buf + (s->pos - s->start), (size_t) chunk);
		}
		else if (s->read == NULL)
			return fail(vm, "the pickle ends inside %s at byte %llu", opname(op), (unsigned long long) at);
		else if (n >= WINDOW / 2)
		{
			/* a long string: straight from the file */
			chunk = n;
			if (s->read(s->ctx, s->pos, d, (size_t) chunk) != 0)
				return fail(vm, "cannot read the pickle at byte %llu", (unsigned long long) s->pos);
		}
		else
		{
			uint64_t	w = s->end - s->pos;

			if (w > WINDOW)
				w = WINDOW;
			if (s->read(s->ctx, s->pos, s->window, (size_t) w) != 0)
				return fail(vm, "cannot read the pickle at byte %llu", (unsigned long long) s->pos);
			s->buf = s->window;
			s->start = s->pos;
			s->len = (size_t) w;
			continue;
		}
		d += chunk;
		s->pos += chunk;
		n -= chunk;
	}
	return true;
}

/* A line (GLOBAL's module or name, INT's digits) without its newline. */
static bool
take_line(Vm *vm, char *line, size_t *len, unsigned char op, uint64_t at)
{
	*len = 0;
	for (;;)
	{
		unsigned char c;

		if (!take(vm, &c, 1, op, at))
			return false;
		if (c == '\n')
			break;
		if (*len == MAX_LINE)
			return fail(vm, "%s at byte %llu has a line longer than %d bytes", opname(op),
						(unsigned long long) at, MAX_LINE);
		line[(*len)++] = (char) c;
	}
	line[*len] = '\0';
	return true;
}

/* ---- the stack and the memo ---- */

static bool
push(Vm *vm, Obj *o)
{
	if (o == NULL)
		return false;
	if (vm->sp == vm->stack_cap)
	{
		size_t		cap = vm->stack_cap * 2;
		Obj		  **s;

		if (cap > MAX_STACK)
			return fail(vm, "the pickle's stack grows beyond %zu objects", MAX_STACK);
		s = vm_alloc(vm, sizeof(Obj *) * cap);
		if (s == NULL)
			return false;
		memcpy(s, vm->stack, sizeof(Obj *) * vm->sp);
		vm->stack = s;
		vm->stack_cap = cap;
	}
	vm->stack[vm->sp++] = o;
	return true;
}

/* the bottom of the stack above the last MARK */
static size_t
base(const Vm *vm)
{
	return vm->nmarks ? vm->marks[vm->nmarks - 1] : 0;
}

static Obj *
pop(Vm *vm, unsigned char op, uint64_t at)
{
	if (vm->sp <= base(vm))
	{
		fail(vm, "%s at byte %llu finds the stack empty", opname(op), (unsigned long long) at);
		return NULL;
	}
	return vm->stack[--vm->sp];
}

static Obj *
top(Vm *vm, unsigned char op, uint64_t at)
{
	if (vm->sp <= base(vm))
	{
		fail(vm, "%s at byte %llu finds the stack empty", opname(op), (unsigned long long) at);
		return NULL;
	}
	return vm->stack[vm->sp - 1];
}

/* The objects above the last MARK, which is removed (with them). */
static bool
pop_mark(Vm *vm, Obj ***items, size_t *n, unsigned char op, uint64_t at)
{
	size_t		b;

	if (vm->nmarks == 0)
		return fail(vm, "%s at byte %llu has no MARK before it", opname(op), (unsigned long long) at);
	b = vm->marks[--vm->nmarks];
	*items = vm->stack + b;
	*n = vm->sp - b;
	vm->sp = b;
	return true;
}

static bool
memo_put(Vm *vm, uint64_t idx, unsigned char op, uint64_t at)
{
	Obj		   *o = top(vm, op, at);

	if (o == NULL)
		return false;
	if (idx >= MAX_MEMO)
		return fail(vm, "%s at byte %llu uses memo entry %llu, beyond %llu", opname(op),
					(unsigned long long) at, (unsigned long long) idx, (unsigned long long) MAX_MEMO);
	if (idx >= vm->memo_cap)
	{
		uint64_t	cap = vm->memo_cap * 2;
		Obj		  **m;

		if (cap <= idx)
			cap = idx + 1;
		if (cap > MAX_MEMO)
			cap = MAX_MEMO;
		m = vm_alloc(vm, sizeof(Obj *) * (size_t) cap);
		if (m == NULL)
			return false;
		memcpy(m, vm->memo, sizeof(Obj *) * (size_t) vm->memo_cap);
		vm->memo = m;
		vm->memo_cap = cap;
	}
	/* MEMOIZE stores at len(memo), Python's count of entries */
	if (vm->memo[idx] == NULL)
		vm->memo_count++;
	vm->memo[idx] = o;
	return true;
}

static bool
memo_get(Vm *vm, uint64_t idx, unsigned char op, uint64_t at)
{
	if (idx >= vm->memo_cap || vm->memo[idx] == NULL)
		return fail(vm, "%s at byte %llu reads memo entry %llu, which was never set", opname(op),
					(unsigned long long) at, (unsigned long long) idx);
	return push(vm, vm->memo[idx]);
}

/* ---- globals, storages, tensors ---- */

/* The global module.name if it is one a state dict needs; else refused. */
static Obj *
find_global(Vm *vm, const char *module, size_t mlen, const char *name, size_t nlen)
{
	Obj		   *o;
	char		qm[128],
				qn[128];

#define IS(s, l, lit) ((l) == sizeof(lit) - 1 && memcmp((s), (lit), (l)) == 0)
	o = new_obj(vm, O_GLOBAL);
	if (o == NULL)
		return NULL;
	if (IS(module, mlen, "collections") && IS(name, nlen, "OrderedDict"))
	{
		o->u.g.kind = G_ORDERED_DICT;
		return o;
	}
	if (IS(module, mlen, "torch._utils"))
	{
		if (IS(name, nlen, "_rebuild_tensor_v2"))
			o->u.g.kind = G_REBUILD_TENSOR_V2;
		else if (IS(name, nlen, "_rebuild_tensor"))
			o->u.g.kind = G_REBUILD_TENSOR;
		else if (IS(name, nlen, "_rebuild_parameter"))
			o->u.g.kind = G_REBUILD_PARAMETER;
		else
			goto refuse;
		return o;
	}
	/* torch.cuda.FloatStorage: checkpoints saved from a GPU by old torch */
	if (IS(module, mlen, "torch") || IS(module, mlen, "torch.cuda"))
		for (int i = 0; i < NDTYPES; i++)
			if (nlen == strlen(dtypes[i].storage) && memcmp(name, dtypes[i].storage, nlen) == 0)
			{
				o->u.g.kind = G_STORAGE_TYPE;
				o->u.g.dtype = i;
				return o;
			}
#undef IS
refuse:
	tf_zip_quote(qm, sizeof(qm), module, mlen);
	tf_zip_quote(qn, sizeof(qn), name, nlen);
	fail(vm, "pickle names the global \"%s.%s\", which a state dict never needs; refused", qm, qn);
	return NULL;
}

/*
 * FNV-1a, seeded and finished with MurmurHash3's mix: the keys come from
 * the file, and keys made to collide would make every lookup a walk over
 * all the storages.  The seed is not secret, only different from process
 * to process (see vm_init); the walks call the interrupt hook besides.
 */
static uint32_t
hash_key(const Vm *vm, const char *s, size_t len)
{
	uint32_t	h = 2166136261u ^ vm->seed;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char) s[i]) * 16777619u;
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

/* The index of the storage with this key, or -1. */
static int
find_storage(Vm *vm, const char *key, size_t len)
{
	if (vm->nslots == 0)
		return -1;
	for (uint32_t h = hash_key(vm, key, len) & (vm->nslots - 1);; h = (h + 1) & (vm->nslots - 1))
	{
		int			i = vm->slots[h] - 1;

		SPM_CHECK_INTERRUPTS_WORK(vm->probes, 1);

		if (i < 0)
			return -1;
		if (strlen(vm->storages[i].key) == len && memcmp(vm->storages[i].key, key, len) == 0)
			return i;
	}
}

static int
add_storage(Vm *vm, const char *key, size_t len, int dtype, uint64_t numel)
{
	TfTorchStorage *s;

	if (vm->nstorages >= MAX_STORAGES)
	{
		fail(vm, "the pickle names more than %d storages", MAX_STORAGES);
		return -1;
	}
	if (vm->nstorages == vm->storages_cap)
	{
		int			cap = vm->storages_cap ? vm->storages_cap * 2 : 16;
		TfTorchStorage *bigger = vm_alloc(vm, sizeof(TfTorchStorage) * (size_t) cap);

		if (bigger == NULL)
			return -1;
		if (vm->nstorages)
			memcpy(bigger, vm->storages, sizeof(TfTorchStorage) * (size_t) vm->nstorages);
		vm->storages = bigger;
		vm->storages_cap = cap;
	}
	/* at most half full */
	if ((uint32_t) (vm->nstorages + 1) * 2 > vm->nslots)
	{
		uint32_t	n = vm->nslots ? vm->nslots * 2 : 64;
		int		   *slots = vm_alloc(vm, sizeof(int) * n);

		if (slots == NULL)
			return -1;
		for (int i = 0; i < vm->nstorages; i++)
		{
			const char *k = vm->storages[i].key;
			uint32_t	h = hash_key(vm, k, strlen(k)) & (n - 1);

			while (slots[h])
			{
				SPM_CHECK_INTERRUPTS_WORK(vm->probes, 1);
				h = (h + 1) & (n - 1);
			}
			slots[h] = i + 1;
		}
		vm->slots = slots;
		vm->nslots = n;
	}
	s = &vm->storages[vm->nstorages];
	s->key = vm_alloc(vm, len + 1);
	if (s->key == NULL)
		return -1;
	memcpy(s->key, key, len);
	strcpy(s->dtype, dtypes[dtype].dtype);
	s->numel = numel;
	s->offset = 0;
	{
		uint32_t	h = hash_key(vm, key, len) & (vm->nslots - 1);

		while (vm->slots[h])
		{
			SPM_CHECK_INTERRUPTS_WORK(vm->probes, 1);
			h = (h + 1) & (vm->nslots - 1);
		}
		vm->slots[h] = vm->nstorages + 1;
	}
	return vm->nstorages++;
}

static bool
nonneg_int(const Obj *o, uint64_t *v)
{
	if (o->type != O_INT || o->u.i < 0)
		return false;
	*v = (uint64_t) o->u.i;
	return true;
}

/*
 * BINPERSID: torch's persistent_load.  The id of a storage is
 * ('storage', StorageType, key, location, numel), with in the legacy format
 * a sixth element, None or (view_key, offset, numel) for a view of it.
 */
static Obj *
persistent_load(Vm *vm, Obj *pid, uint64_t at)
{
	Obj		  **v;
	Obj		   *o;
	const DType *dt;
	uint64_t	numel,
				voff = 0,
				vnumel;
	int			idx;
	char		qkey[128];

	if (pid->type != O_TUPLE || pid->u.seq.n < 1 || pid->u.seq.v[0]->type != O_STR)
	{
		fail(vm, "BINPERSID at byte %llu has a persistent id that is %s, not a storage's tuple",
			 (unsigned long long) at, type_names[pid->type]);
		return NULL;
	}
	v = pid->u.seq.v;
	if (str_is(v[0], "module"))
	{
		fail(vm, "the pickle saves a whole nn.Module (with its source code), not a state dict; save model.state_dict() instead");
		return NULL;
	}
	if (!str_is(v[0], "storage"))
	{
		tf_zip_quote(qkey, sizeof(qkey), v[0]->u.str.s, v[0]->u.str.len);
		fail(vm, "BINPERSID at byte %llu has a persistent id of type \"%s\"; only storages are expected",
			 (unsigned long long) at, qkey);
		return NULL;
	}
	if (pid->u.seq.n != 5 && pid->u.seq.n != 6)
	{
		fail(vm, "BINPERSID at byte %llu has a storage id of %u elements (5, or 6 in the legacy format, expected)",
			 (unsigned long long) at, (unsigned) pid->u.seq.n);
		return NULL;
	}
	if (v[1]->type != O_GLOBAL || v[1]->u.g.kind != G_STORAGE_TYPE || v[2]->type != O_STR ||
		v[3]->type != O_STR || !nonneg_int(v[4], &numel))
	{
		fail(vm, "BINPERSID at byte %llu has a storage id that is not (\"storage\", storage type, key, location, numel)",
			 (unsigned long long) at);
		return NULL;
	}
	dt = &dtypes[v[1]->u.g.dtype];
	if (v[2]->u.str.len == 0 || v[2]->u.str.len > TF_ZIP_MAX_NAME ||
		memchr(v[2]->u.str.s, '\0', v[2]->u.str.len) != NULL)
	{
		fail(vm, "BINPERSID at byte %llu has a storage key that is empty, too long or holds a NUL",
			 (unsigned long long) at);
		return NULL;
	}
	tf_zip_quote(qkey, sizeof(qkey), v[2]->u.str.s, v[2]->u.str.len);
	/* the storage's bytes must be countable in 63 bits */
	if (numel > (uint64_t) INT64_MAX / (uint64_t) dt->size)
	{
		fail(vm, "storage \"%s\" has %llu elements, too many", qkey, (unsigned long long) numel);
		return NULL;
	}
	vnumel = numel;
	if (pid->u.seq.n == 6 && v[5]->type != O_NONE)
	{
		Obj		   *m = v[5];

		if (m->type != O_TUPLE || m->u.seq.n != 3 || m->u.seq.v[0]->type != O_STR ||
			!nonneg_int(m->u.seq.v[1], &voff) || !nonneg_int(m->u.seq.v[2], &vnumel))
		{
			fail(vm, "storage \"%s\" has view metadata that is not (key, offset, numel)", qkey);
			return NULL;
		}
		if (vnumel > numel || voff > numel - vnumel)
		{
			fail(vm, "storage \"%s\" has a view of %llu elements at %llu, beyond its %llu", qkey,
				 (unsigned long long) vnumel, (unsigned long long) voff, (unsigned long long) numel);
			return NULL;
		}
	}
	idx = find_storage(vm, v[2]->u.str.s, v[2]->u.str.len);
	if (idx < 0)
		idx = add_storage(vm, v[2]->u.str.s, v[2]->u.str.len, v[1]->u.g.dtype, numel);
	else if (strcmp(vm->storages[idx].dtype, dt->dtype) != 0 || vm->storages[idx].numel != numel)
	{
		fail(vm, "storage \"%s\" is named with two dtypes or sizes", qkey);
		return NULL;
	}
	if (idx < 0)
		return NULL;
	o = new_obj(vm, O_STORAGE);
	if (o == NULL)
		return NULL;
	o->u.st.index = idx;
	o->u.st.view_offset = voff;
	o->u.st.view_numel = vnumel;
	return o;
}

/*
 * _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
 * backward_hooks[, metadata]) and _rebuild_tensor(storage, storage_offset,
 * size, stride): a tensor's descriptor.  Whether it is contiguous and lies
 * within its storage is checked once its name is known (state_dict).
 */
static Obj *
rebuild_tensor(Vm *vm, Obj *args, const char *fn, uint64_t at)
{
	Obj		  **v = args->u.seq.v;
	Obj		   *o;
	Tensor	   *t;
	uint64_t	off;

	if (v[0]->type != O_STORAGE || !nonneg_int(v[1], &off) || v[2]->type != O_TUPLE ||
		v[3]->type != O_TUPLE)
	{
		fail(vm, "%s at byte %llu has arguments that are not (storage, offset, size, stride, ...)",
			 fn, (unsigned long long) at);
		return NULL;
	}
	if (v[2]->u.seq.n > TF_TORCH_MAX_DIMS || v[3]->u.seq.n != v[2]->u.seq.n)
	{
		fail(vm, "%s at byte %llu makes a tensor of %u dimensions with %u strides (at most %d)",
			 fn, (unsigned long long) at, (unsigned) v[2]->u.seq.n, (unsigned) v[3]->u.seq.n,
			 TF_TORCH_MAX_DIMS);
		return NULL;
	}
	o = new_obj(vm, O_TENSOR);
	t = vm_alloc(vm, sizeof(Tensor));
	if (o == NULL || t == NULL)
		return NULL;
	o->u.t = t;
	t->storage = v[0]->u.st.index;
	t->view_offset = v[0]->u.st.view_offset;
	t->view_numel = v[0]->u.st.view_numel;
	t->storage_offset = off;
	t->ndim = (int) v[2]->u.seq.n;
	for (int k = 0; k < t->ndim; k++)
	{
		Obj		   *d = v[2]->u.seq.v[k],
				   *s = v[3]->u.seq.v[k];

		if (d->type != O_INT || d->u.i < 0 || s->type != O_INT)
		{
			fail(vm, "%s at byte %llu has a size or stride that is not an integer (or a negative size)",
				 fn, (unsigned long long) at);
			return NULL;
		}
		t->shape[k] = d->u.i;
		t->stride[k] = s->u.i;
	}
	return o;
}

/* REDUCE: callable(*args) for the few callables a state dict has. */
static Obj *
reduce(Vm *vm, Obj *fn, Obj *args, uint64_t at)
{
	if (fn->type != O_GLOBAL)
	{
		fail(vm, "REDUCE at byte %llu calls %s; only a few functions of torch may be called",
			 (unsigned long long) at, type_names[fn->type]);
		return NULL;
	}
	if (args->type != O_TUPLE)
	{
		fail(vm, "REDUCE at byte %llu has arguments that are %s, not a tuple",
			 (unsigned long long) at, type_names[args->type]);
		return NULL;
	}
	switch (fn->u.g.kind)
	{
		case G_ORDERED_DICT:
			/* pickle writes an OrderedDict's items with SETITEMS, after () */
			if (args->u.seq.n != 0)
			{
				fail(vm, "REDUCE at byte %llu calls collections.OrderedDict with arguments", (unsigned long long) at);
				return NULL;
			}
			return new_obj(vm, O_DICT);
		case G_REBUILD_TENSOR_V2:
			if (args->u.seq.n != 6 && args->u.seq.n != 7)
			{
				fail(vm, "REDUCE at byte %llu calls torch._utils._rebuild_tensor_v2 with %u arguments (6 or 7 expected)",
					 (unsigned long long) at, (unsigned) args->u.seq.n);
				return NULL;
			}
			return rebuild_tensor(vm, args, "torch._utils._rebuild_tensor_v2", at);
		case G_REBUILD_TENSOR:
			if (args->u.seq.n != 4)
			{
				fail(vm, "REDUCE at byte %llu calls torch._utils._rebuild_tensor with %u arguments (4 expected)",
					 (unsigned long long) at, (unsigned) args->u.seq.n);
				return NULL;
			}
			return rebuild_tensor(vm, args, "torch._utils._rebuild_tensor", at);
		case G_REBUILD_PARAMETER:
			/* (data, requires_grad, backward_hooks): the tensor itself */
			if (args->u.seq.n != 3 || args->u.seq.v[0]->type != O_TENSOR)
			{
				fail(vm, "REDUCE at byte %llu calls torch._utils._rebuild_parameter with arguments that are not (tensor, requires_grad, hooks)",
					 (unsigned long long) at);
				return NULL;
			}
			return args->u.seq.v[0];
		case G_STORAGE_TYPE:
			break;
	}
	fail(vm, "REDUCE at byte %llu calls torch.%s; a state dict never constructs a storage",
		 (unsigned long long) at, dtypes[fn->u.g.dtype].storage);
	return NULL;
}

/* ---- the machine ---- */

/*
 * Run one pickle from vm->src.pos to its STOP: the object it leaves, or
 * NULL with the message set.  The memo and the stack are the pickle's own;
 * storages are the file's.
 */
static Obj *
run(Vm *vm)
{
	vm->stack_cap = 64;
	vm->stack = vm_alloc(vm, sizeof(Obj *) * vm->stack_cap);
	vm->sp = 0;
	vm->nmarks = 0;
	vm->memo_cap = 64;
	vm->memo = vm_alloc(vm, sizeof(Obj *) * vm->memo_cap);
	vm->memo_count = 0;
	if (vm->stack == NULL || vm->memo == NULL)
		return NULL;
	for (size_t ops = 0;; ops++)
	{
		uint64_t	at = vm->src.pos;
		unsigned char op,
					b[8];
		Obj		   *o,
				   *k,
				   *x;
		Obj		  **items = NULL;
		size_t		n = 0;
		uint64_t	len;
		char		line[MAX_LINE + 1],
					line2[MAX_LINE + 1];
		size_t		llen,
					llen2;

		SPM_CHECK_INTERRUPTS(ops);
		if (vm->src.pos >= vm->src.end)
		{
			if (vm->src.capped)
				fail(vm, "the pickle is longer than %zu MB", TF_TORCH_MAX_PICKLE >> 20);
			else
				fail(vm, "the pickle ends at byte %llu without STOP", (unsigned long long) at);
			return NULL;
		}
		if (!take(vm, &op, 1, 0, at))
			return NULL;
		switch (op)
		{
			case 0x80:			/* PROTO */
				if (!take(vm, b, 1, op, at))
					return NULL;
				if (b[0] > 5)
				{
					fail(vm, "the pickle has protocol %d, beyond Python's 5", b[0]);
					return NULL;
				}
				break;
			case 0x95:			/* FRAME: a length we need not use */
				if (!take(vm, b, 8, op, at))
					return NULL;
				if (le64(b) > vm->src.end - vm->src.pos)
				{
					fail(vm, "FRAME at byte %llu is longer than the pickle", (unsigned long long) at);
					return NULL;
				}
				break;
			case '.':			/* STOP */
				if ((o = pop(vm, op, at)) == NULL)
					return NULL;
				if (vm->sp != 0 || vm->nmarks != 0)
				{
					fail(vm, "the pickle stops at byte %llu with %zu more objects or marks on its stack",
						 (unsigned long long) at, vm->sp + (size_t) vm->nmarks);
					return NULL;
				}
				return o;
			case '(':			/* MARK */
				if (vm->nmarks == MAX_MARKS)
				{
					fail(vm, "the pickle nests deeper than %d at byte %llu", MAX_MARKS, (unsigned long long) at);
					return NULL;
				}
				vm->marks[vm->nmarks++] = vm->sp;
				break;
			case '}':			/* EMPTY_DICT */
				if (!push(vm, new_obj(vm, O_DICT)))
					return NULL;
				break;
			case ']':			/* EMPTY_LIST */
				if (!push(vm, new_obj(vm, O_LIST)))
					return NULL;
				break;
			case ')':			/* EMPTY_TUPLE */
				if (!push(vm, new_tuple(vm, NULL, 0)))
					return NULL;
				break;
			case 't':			/* TUPLE */
				if (!pop_mark(vm, &items, &n, op, at) || !push(vm, new_tuple(vm, items, n)))
					return NULL;
				break;
			case 0x85:			/* TUPLE1 */
			case 0x86:			/* TUPLE2 */
			case 0x87:			/* TUPLE3 */
				n = (size_t) (op - 0x84);
				if (vm->sp - base(vm) < n)
				{
					fail(vm, "%s at byte %llu finds the stack empty", opname(op), (unsigned long long) at);
					return NULL;
				}
				vm->sp -= n;
				if (!push(vm, new_tuple(vm, vm->stack + vm->sp, n)))
					return NULL;
				break;
			case 'X':			/* BINUNICODE */
			case 0x8c:			/* SHORT_BINUNICODE */
			case 0x8d:			/* BINUNICODE8 */
			case 'T':			/* BINSTRING (Python 2's str) */
			case 'U':			/* SHORT_BINSTRING */
				if (op == 0x8c || op == 'U')
				{
					if (!take(vm, b, 1, op, at))
						return NULL;
					len = b[0];
				}
				else if (op == 0x8d)
				{
					if (!take(vm, b, 8, op, at))
						return NULL;
					len = le64(b);
				}
				else
				{
					if (!take(vm, b, 4, op, at))
						return NULL;
					len = le32(b);
					if (op == 'T' && len > INT32_MAX)
					{
						fail(vm, "BINSTRING at byte %llu has a negative length", (unsigned long long) at);
						return NULL;
					}
				}
				if (len > MAX_STRING)
				{
					fail(vm, "%s at byte %llu has a string of %llu bytes, more than %llu", opname(op),
						 (unsigned long long) at, (unsigned long long) len, (unsigned long long) MAX_STRING);
					return NULL;
				}
				if (len > vm->src.end - vm->src.pos)
				{
					take(vm, b, len, op, at);	/* the message */
					return NULL;
				}
				if ((o = new_obj(vm, O_STR)) == NULL || (o->u.str.s = vm_alloc(vm, (size_t) len + 1)) == NULL ||
					!take(vm, o->u.str.s, len, op, at))
					return NULL;
				o->u.str.len = (size_t) len;
				if (!push(vm, o))
					return NULL;
				break;
			case 'J':			/* BININT */
			case 'K':			/* BININT1 */
			case 'M':			/* BININT2 */
				n = op == 'J' ? 4 : op == 'K' ? 1 : 2;
				memset(b, 0, sizeof(b));
				if (!take(vm, b, n, op, at) || (o = new_obj(vm, O_INT)) == NULL)
					return NULL;
				o->u.i = op == 'J' ? (int64_t) (int32_t) le32(b) : (int64_t) (b[0] | (b[1] << 8));
				if (!push(vm, o))
					return NULL;
				break;
			case 0x8a:			/* LONG1: little-endian two's complement */
				{
					unsigned char big[255];

					if (!take(vm, b, 1, op, at))
						return NULL;
					n = b[0];
					if (!take(vm, big, n, op, at))
						return NULL;
					if (n <= 8)
					{
						uint64_t	u = 0;

						if ((o = new_obj(vm, O_INT)) == NULL)
							return NULL;
						for (size_t j = n; j-- > 0;)
							u = (u << 8) | big[j];
						if (n > 0 && n < 8 && (big[n - 1] & 0x80))
							u |= ~(uint64_t) 0 << (8 * n);
						o->u.i = (int64_t) u;
					}
					else
					{
						if ((o = new_obj(vm, O_BIGINT)) == NULL || (o->u.str.s = vm_alloc(vm, n + 1)) == NULL)
							return NULL;
						memcpy(o->u.str.s, big, n);
						o->u.str.len = n;
					}
					if (!push(vm, o))
						return NULL;
					break;
				}
			case 'I':			/* INT: protocol 0 and 1 (and bools as 00, 01) */
				{
					uint64_t	u = 0;
					size_t		j = 0;
					bool		neg = false;

					if (!take_line(vm, line, &llen, op, at))
						return NULL;
					if (llen == 2 && line[0] == '0' && (line[1] == '0' || line[1] == '1'))
					{
						if (!push(vm, line[1] == '1' ? vm->yes : vm->no))
							return NULL;
						break;
					}
					if (j < llen && (line[j] == '-' || line[j] == '+'))
						neg = line[j++] == '-';
					if (j == llen)
						u = UINT64_MAX;
					for (; j < llen && u <= (uint64_t) INT64_MAX; j++)
					{
						if (line[j] < '0' || line[j] > '9' || u > (uint64_t) INT64_MAX / 10)
							u = UINT64_MAX;
						else
							u = u * 10 + (uint64_t) (line[j] - '0');
					}
					if (u > (uint64_t) INT64_MAX)
					{
						fail(vm, "INT at byte %llu is not an integer of 64 bits", (unsigned long long) at);
						return NULL;
					}
					if ((o = new_obj(vm, O_INT)) == NULL)
						return NULL;
					o->u.i = neg ? -(int64_t) u : (int64_t) u;
					if (!push(vm, o))
						return NULL;
					break;
				}
			case 'G':			/* BINFLOAT: big-endian */
				{
					uint64_t	u = 0;

					if (!take(vm, b, 8, op, at) || (o = new_obj(vm, O_FLOAT)) == NULL)
						return NULL;
					for (int j = 0; j < 8; j++)
						u = (u << 8) | b[j];
					memcpy(&o->u.f, &u, sizeof(double));
					if (!push(vm, o))
						return NULL;
					break;
				}
			case 'N':			/* NONE */
				if (!push(vm, vm->none))
					return NULL;
				break;
			case 0x88:			/* NEWTRUE */
			case 0x89:			/* NEWFALSE */
				if (!push(vm, op == 0x88 ? vm->yes : vm->no))
					return NULL;
				break;
			case 'q':			/* BINPUT */
				if (!take(vm, b, 1, op, at) || !memo_put(vm, b[0], op, at))
					return NULL;
				break;
			case 'r':			/* LONG_BINPUT */
				if (!take(vm, b, 4, op, at) || !memo_put(vm, le32(b), op, at))
					return NULL;
				break;
			case 0x94:			/* MEMOIZE */
				if (!memo_put(vm, vm->memo_count, op, at))
					return NULL;
				break;
			case 'h':			/* BINGET */
				if (!take(vm, b, 1, op, at) || !memo_get(vm, b[0], op, at))
					return NULL;
				break;
			case 'j':			/* LONG_BINGET */
				if (!take(vm, b, 4, op, at) || !memo_get(vm, le32(b), op, at))
					return NULL;
				break;
			case 'c':			/* GLOBAL: "module\nname\n" */
				if (!take_line(vm, line, &llen, op, at) || !take_line(vm, line2, &llen2, op, at) ||
					!push(vm, find_global(vm, line, llen, line2, llen2)))
					return NULL;
				break;
			case 0x93:			/* STACK_GLOBAL: module and name on the stack */
				if ((k = pop(vm, op, at)) == NULL || (o = pop(vm, op, at)) == NULL)
					return NULL;
				if (o->type != O_STR || k->type != O_STR)
				{
					fail(vm, "STACK_GLOBAL at byte %llu has operands that are not strings", (unsigned long long) at);
					return NULL;
				}
				if (!push(vm, find_global(vm, o->u.str.s, o->u.str.len, k->u.str.s, k->u.str.len)))
					return NULL;
				break;
			case 'R':			/* REDUCE */
				if ((x = pop(vm, op, at)) == NULL || (o = pop(vm, op, at)) == NULL ||
					!push(vm, reduce(vm, o, x, at)))
					return NULL;
				break;
			case 'b':			/* BUILD: an OrderedDict's _metadata, ignored */
				if ((x = pop(vm, op, at)) == NULL || (o = top(vm, op, at)) == NULL)
					return NULL;
				if (o->type != O_DICT)
				{
					fail(vm, "BUILD at byte %llu sets the state of %s; only an OrderedDict's is expected",
						 (unsigned long long) at, type_names[o->type]);
					return NULL;
				}
				break;
			case 's':			/* SETITEM */
				if ((x = pop(vm, op, at)) == NULL || (k = pop(vm, op, at)) == NULL ||
					(o = top(vm, op, at)) == NULL)
					return NULL;
				if (o->type != O_DICT)
				{
					fail(vm, "SETITEM at byte %llu stores into %s, not a dict", (unsigned long long) at,
						 type_names[o->type]);
					return NULL;
				}
				if (!seq_push(vm, o, k) || !seq_push(vm, o, x))
					return NULL;
				break;
			case 'u':			/* SETITEMS */
				if (!pop_mark(vm, &items, &n, op, at) || (o = top(vm, op, at)) == NULL)
					return NULL;
				if (o->type != O_DICT || n % 2 != 0)
				{
					fail(vm, "SETITEMS at byte %llu stores %zu objects into %s (pairs into a dict expected)",
						 (unsigned long long) at, n, type_names[o->type]);
					return NULL;
				}
				for (size_t j = 0; j < n; j++)
					if (!seq_push(vm, o, items[j]))
						return NULL;
				break;
			case 'a':			/* APPEND */
			case 'e':			/* APPENDS */
				if (op == 'a')
				{
					if ((x = pop(vm, op, at)) == NULL)
						return NULL;
					items = &x;
					n = 1;
				}
				else if (!pop_mark(vm, &items, &n, op, at))
					return NULL;
				if ((o = top(vm, op, at)) == NULL)
					return NULL;
				if (o->type != O_LIST)
				{
					fail(vm, "%s at byte %llu appends to %s, not a list", opname(op),
						 (unsigned long long) at, type_names[o->type]);
					return NULL;
				}
				for (size_t j = 0; j < n; j++)
					if (!seq_push(vm, o, items[j]))
						return NULL;
				break;
			case 'Q':			/* BINPERSID */
				if ((o = pop(vm, op, at)) == NULL || !push(vm, persistent_load(vm, o, at)))
					return NULL;
				break;
			default:
				if (opnames[op])
					fail(vm, "pickle opcode %s (0x%02x) at byte %llu is not allowed in a state dict; refused",
						 opnames[op], op, (unsigned long long) at);
				else
					fail(vm, "unknown pickle opcode 0x%02x at byte %llu", op, (unsigned long long) at);
				return NULL;
		}
	}
}

static bool
vm_init(Vm *vm, const SpmAlloc *a, char *err, size_t errlen)
{
	memset(vm, 0, sizeof(Vm));
	vm->a = a;
	vm->err = err;
	vm->errlen = errlen;
	/* the stack's address: differs between processes where ASLR is on */
	vm->seed = (uint32_t) ((uintptr_t) vm >> 4) ^ (uint32_t) ((uint64_t) (uintptr_t) vm >> 32);
	if (errlen > 0)
		err[0] = '\0';
	vm->none = new_obj(vm, O_NONE);
	vm->yes = new_obj(vm, O_BOOL);
	vm->no = new_obj(vm, O_BOOL);
	if (vm->yes)
		vm->yes->u.b = true;
	return !vm->failed;
}

/* The pickle in memory. */
static void
src_mem(Vm *vm, const unsigned char *p, size_t len)
{
	memset(&vm->src, 0, sizeof(Src));
	vm->src.buf = p;
	vm->src.len = len;
	vm->src.end = len;
}

/* ---- the state dict ---- */

static int
cmp_names(const void *x, const void *y)
{
	return strcmp(((const TfTorchTensor *) x)->name, ((const TfTorchTensor *) y)->name);
}

/* "(2, 3)" of n numbers, cut to fit out */
static void
format_dims(char *out, size_t outlen, const int64_t *v, int n)
{
	size_t		o = 0;

	o += (size_t) snprintf(out + o, outlen - o, "(");
	for (int k = 0; k < n && o < outlen; k++)
		o += (size_t) snprintf(out + o, outlen - o, "%s%lld", k ? ", " : "", (long long) v[k]);
	if (o < outlen)
		snprintf(out + o, outlen - o, n == 1 ? ",)" : ")");
}

/* A tensor of the state dict, named: contiguous, within its storage. */
static bool
check_tensor(Vm *vm, const Tensor *t, TfTorchTensor *out, const char *qname)
{
	const TfTorchStorage *s = &vm->storages[t->storage];
	int			size = tf_torch_dtype_size(s->dtype);
	uint64_t	numel = 1,
				expect = 1;
	bool		empty = false;

	for (int k = 0; k < t->ndim; k++)
		if (t->shape[k] == 0)
			empty = true;
	for (int k = 0; k < t->ndim; k++)
	{
		uint64_t	d = (uint64_t) t->shape[k];

		if (!empty && numel > t->view_numel / d)
			return fail(vm, "tensor \"%s\" has more elements than its storage", qname);
		numel = empty ? 0 : numel * d;
	}
	/* row-major: stride[k] is the product of the later sizes (any for size 1) */
	if (!empty)
		for (int k = t->ndim - 1; k >= 0; k--)
		{
			if (t->shape[k] != 1 && (uint64_t) t->stride[k] != expect)
			{
				char		st[200],
							sh[200];

				format_dims(st, sizeof(st), t->stride, t->ndim);
				format_dims(sh, sizeof(sh), t->shape, t->ndim);
				return fail(vm, "tensor \"%s\" is a non-contiguous view (stride %s of shape %s); save it with .contiguous()",
							qname, st, sh);
			}
			expect *= (uint64_t) t->shape[k];
		}
	if (t->storage_offset > t->view_numel || numel > t->view_numel - t->storage_offset)
		return fail(vm, "tensor \"%s\" (%llu elements at %llu) lies beyond its storage of %llu elements",
					qname, (unsigned long long) numel, (unsigned long long) t->storage_offset,
					(unsigned long long) t->view_numel);
	strcpy(out->dtype, s->dtype);
	out->storage = t->storage;
	/* all within the storage, whose bytes fit 63 bits (persistent_load) */
	out->offset = (t->view_offset + t->storage_offset) * (uint64_t) size;
	out->nbytes = numel * (uint64_t) size;
	out->ndim = t->ndim;
	memcpy(out->shape, t->shape, sizeof(int64_t) * (size_t) t->ndim);
	return true;
}

/*
 * The state dict the pickle left: a dict of name -> tensor, or one under
 * "state_dict" or "model" of the dict (a training checkpoint's other
 * entries are then not looked at).
 */
static int
state_dict(Vm *vm, Obj *res, TfTorchCheckpoint *out)
{
	Obj		   *sd = res,
			   *inner;
	TfTorchTensor *t,
			   *sorted;
	uint32_t	n;

	if (res->type != O_DICT)
	{
		fail(vm, "the pickle holds %s, not a state dict (a dict of tensors)", type_names[res->type]);
		return -1;
	}
	if ((inner = dict_get(res, "state_dict")) != NULL && inner->type == O_DICT)
		sd = inner;
	else if ((inner = dict_get(res, "model")) != NULL && inner->type == O_DICT)
		sd = inner;
	n = sd->u.seq.n / 2;
	if (n > TF_TORCH_MAX_TENSORS)
	{
		fail(vm, "the state dict has %u entries, more than %d", (unsigned) n, TF_TORCH_MAX_TENSORS);
		return -1;
	}
	t = vm_alloc(vm, sizeof(TfTorchTensor) * (n ? n : 1));
	if (t == NULL)
		return -1;
	for (uint32_t i = 0; i < n; i++)
	{
		Obj		   *k = sd->u.seq.v[2 * i],
				   *v = sd->u.seq.v[2 * i + 1];
		char		qname[160];

		SPM_CHECK_INTERRUPTS(i);
		if (k->type != O_STR)
		{
			fail(vm, "entry %u of the state dict has a key that is %s, not a name", (unsigned) i,
				 type_names[k->type]);
			return -1;
		}
		tf_zip_quote(qname, sizeof(qname), k->u.str.s, k->u.str.len);
		if (k->u.str.len == 0 || k->u.str.len > TF_TORCH_MAX_NAME ||
			memchr(k->u.str.s, '\0', k->u.str.len) != NULL ||
			!tf_valid_utf8((const unsigned char *) k->u.str.s, k->u.str.len))
		{
			fail(vm, "the state dict has a name (\"%s\") that is empty, longer than %d bytes, not UTF-8 or holds a NUL",
				 qname, TF_TORCH_MAX_NAME);
			return -1;
		}
		if (v->type != O_TENSOR)
		{
			fail(vm, "the state dict's value for \"%s\" is %s, not a tensor", qname, type_names[v->type]);
			return -1;
		}
		t[i].name = k->u.str.s;
		if (!check_tensor(vm, v->u.t, &t[i], qname))
			return -1;
	}
	/* a name twice: Python would keep the last, torch.save never writes it */
	if (n > 1)
	{
		sorted = vm_alloc(vm, sizeof(TfTorchTensor) * n);
		if (sorted == NULL)
			return -1;
		memcpy(sorted, t, sizeof(TfTorchTensor) * n);
		qsort(sorted, n, sizeof(TfTorchTensor), cmp_names);
		for (uint32_t i = 1; i < n; i++)
			if (strcmp(sorted[i - 1].name, sorted[i].name) == 0)
			{
				char		qname[160];

				tf_zip_quote(qname, sizeof(qname), sorted[i].name, strlen(sorted[i].name));
				fail(vm, "the state dict names \"%s\" twice", qname);
				return -1;
			}
	}
	out->ntensors = (int) n;
	out->tensors = t;
	out->nstorages = vm->nstorages;
	out->storages = vm->storages;
	return (int) n;
}

int
tf_torch_unpickle(const unsigned char *pkl, size_t len, const SpmAlloc *a, TfTorchCheckpoint *out,
				  char *err, size_t errlen)
{
	Vm			vm;
	Obj		   *res;

	memset(out, 0, sizeof(TfTorchCheckpoint));
	if (!vm_init(&vm, a, err, errlen))
		return -1;
	src_mem(&vm, pkl, len);
	if ((res = run(&vm)) == NULL)
		return -1;
	return state_dict(&vm, res, out);
}

/* ---- the ZIP format ---- */

static int
read_entry(TfReadAt read, void *ctx, const TfZipEntry *e, void *buf, Vm *vm)
{
	if (e->size > 0 && read(ctx, e->data_offset, buf, (size_t) e->size) != 0)
	{
		fail(vm, "cannot read entry \"%s\" of the archive", e->name);
		return -1;
	}
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
	/* (a fuzzer would rarely get past a checksum to the pickle) */
	if (tf_crc32(0, buf, (size_t) e->size) != e->crc32)
	{
		fail(vm, "entry \"%s\" of the archive is corrupt (its CRC-32 does not match)", e->name);
		return -1;
	}
#endif
	return 0;
}

static int
checkpoint_zip(Vm *vm, TfReadAt read, void *ctx, uint64_t file_size, TfTorchCheckpoint *out)
{
	TfZipEntry *entries;
	const TfZipEntry *e;
	int			n;
	size_t		plen;
	const char *slash;
	char	   *name;
	char		qname[160];
	unsigned char *pkl;
	Obj		   *res;

	n = tf_zip_directory(read, ctx, file_size, vm->a, &entries, vm->err, vm->errlen);
	if (n < 0)
	{
		vm->failed = true;
		return -1;
	}
	if (n == 0)
	{
		fail(vm, "the archive is empty");
		return -1;
	}
	/* the one top-level directory: "archive", "pytorch_model", ... */
	slash = strchr(entries[0].name, '/');
	plen = slash ? (size_t) (slash - entries[0].name) : 0;
	for (int i = 0; i < n; i++)
		if (plen == 0 || strncmp(entries[i].name, entries[0].name, plen + 1) != 0)
		{
			tf_zip_quote(qname, sizeof(qname), entries[i].name, strlen(entries[i].name));
			fail(vm, "the archive's entries are not all in one directory (\"%s\"); not a torch.save checkpoint", qname);
			return -1;
		}
	tf_zip_quote(qname, sizeof(qname), entries[0].name, plen);
	/* prefix + "/" + the longest name we look up */
	name = vm_alloc(vm, plen + 2 + 5 + TF_ZIP_MAX_NAME + 1);
	if (name == NULL)
		return -1;
	memcpy(name, entries[0].name, plen + 1);
	strcpy(name + plen + 1, "constants.pkl");
	if (tf_zip_find(entries, n, name) != NULL)
	{
		fail(vm, "the archive is a TorchScript model (torch.jit.save), not a torch.save state dict");
		return -1;
	}
	strcpy(name + plen + 1, "byteorder");
	if ((e = tf_zip_find(entries, n, name)) != NULL)
	{
		char		order[MAX_BYTEORDER + 1];

		if (e->size > MAX_BYTEORDER)
		{
			fail(vm, "the archive's byteorder entry has %llu bytes", (unsigned long long) e->size);
			return -1;
		}
		if (read_entry(read, ctx, e, order, vm) != 0)
			return -1;
		if (e->size != 6 || memcmp(order, "little", 6) != 0)
		{
			char		qorder[64];

			tf_zip_quote(qorder, sizeof(qorder), order, (size_t) e->size);
			fail(vm, "the checkpoint was saved with byte order \"%s\"; only little-endian is supported", qorder);
			return -1;
		}
	}
	strcpy(name + plen + 1, "data.pkl");
	if ((e = tf_zip_find(entries, n, name)) == NULL)
	{
		fail(vm, "the archive has no %s/data.pkl; not a torch.save checkpoint", qname);
		return -1;
	}
	if (e->size > TF_TORCH_MAX_PICKLE)
	{
		fail(vm, "%s/data.pkl has %llu bytes, more than %zu MB", qname, (unsigned long long) e->size,
			 TF_TORCH_MAX_PICKLE >> 20);
		return -1;
	}
	/* not from the objects' budget: it is bounded by itself */
	pkl = vm->a->alloc(vm->a->ctx, (size_t) e->size + 1);
	if (read_entry(read, ctx, e, pkl, vm) != 0)
		return -1;
	src_mem(vm, pkl, (size_t) e->size);
	if ((res = run(vm)) == NULL || state_dict(vm, res, out) < 0)
		return -1;

	/* storage k is the entry <prefix>/data/k, of exactly its elements' bytes */
	for (int i = 0; i < vm->nstorages; i++)
	{
		TfTorchStorage *s = &vm->storages[i];
		uint64_t	nbytes = s->numel * (uint64_t) tf_torch_dtype_size(s->dtype);

		SPM_CHECK_INTERRUPTS(i);
		snprintf(name + plen + 1, 5 + TF_ZIP_MAX_NAME + 1, "data/%s", s->key);
		tf_zip_quote(qname, sizeof(qname), s->key, strlen(s->key));
		if ((e = tf_zip_find(entries, n, name)) == NULL)
		{
			fail(vm, "storage \"%s\" is not in the archive", qname);
			return -1;
		}
		if (e->size != nbytes)
		{
			fail(vm, "storage \"%s\" has %llu bytes in the archive, but %llu elements of %s take %llu",
				 qname, (unsigned long long) e->size, (unsigned long long) s->numel,
				 tf_torch_dtype_torch_name(s->dtype), (unsigned long long) nbytes);
			return -1;
		}
		s->offset = e->data_offset;
	}
	for (int i = 0; i < out->ntensors; i++)
		out->tensors[i].offset += vm->storages[out->tensors[i].storage].offset;
	return out->ntensors;
}

/* ---- the legacy format ---- */

/* The next pickle of the file, from byte *pos; *pos is moved past it. */
static Obj *
legacy_pickle(Vm *vm, TfReadAt read, void *ctx, uint64_t file_size, uint64_t *pos)
{
	Obj		   *res;

	memset(&vm->src, 0, sizeof(Src));
	vm->src.read = read;
	vm->src.ctx = ctx;
	vm->src.window = vm->a->alloc(vm->a->ctx, WINDOW);
	vm->src.pos = *pos;
	vm->src.start = *pos;
	vm->src.end = file_size;
	if (file_size - *pos > TF_TORCH_MAX_PICKLE)
	{
		vm->src.end = *pos + TF_TORCH_MAX_PICKLE;
		vm->src.capped = true;
	}
	res = run(vm);
	*pos = vm->src.pos;
	return res;
}

static int
checkpoint_legacy(Vm *vm, TfReadAt read, void *ctx, uint64_t file_size, TfTorchCheckpoint *out)
{
	uint64_t	pos = 0;
	Obj		   *o,
			   *le,
			   *keys;
	bool	   *located;

	/* the magic number, the protocol version, the system's description */
	if ((o = legacy_pickle(vm, read, ctx, file_size, &pos)) == NULL)
		return -1;
	if (o->type != O_BIGINT || o->u.str.len != sizeof(legacy_magic) ||
		memcmp(o->u.str.s, legacy_magic, sizeof(legacy_magic)) != 0)
	{
		fail(vm, "the file is not a PyTorch checkpoint: it is a pickle, but not torch's magic number");
		return -1;
	}
	if ((o = legacy_pickle(vm, read, ctx, file_size, &pos)) == NULL)
		return -1;
	if (o->type != O_INT || o->u.i != LEGACY_PROTOCOL)
	{
		fail(vm, "the checkpoint's legacy protocol version is not %d", LEGACY_PROTOCOL);
		return -1;
	}
	if ((o = legacy_pickle(vm, read, ctx, file_size, &pos)) == NULL)
		return -1;
	if (o->type != O_DICT)
	{
		fail(vm, "the checkpoint's system description is %s, not a dict", type_names[o->type]);
		return -1;
	}
	if ((le = dict_get(o, "little_endian")) != NULL && le->type == O_BOOL && !le->u.b)
	{
		fail(vm, "the checkpoint was saved on a big-endian machine; only little-endian is supported");
		return -1;
	}

	/* the state dict */
	if ((o = legacy_pickle(vm, read, ctx, file_size, &pos)) == NULL || state_dict(vm, o, out) < 0)
		return -1;

	/* the keys of the storages, whose elements follow in this order */
	if ((keys = legacy_pickle(vm, read, ctx, file_size, &pos)) == NULL)
		return -1;
	if (keys->type != O_LIST)
	{
		fail(vm, "the checkpoint's list of storages is %s, not a list", type_names[keys->type]);
		return -1;
	}
	located = vm_alloc(vm, (size_t) vm->nstorages + 1);
	if (located == NULL)
		return -1;
	for (uint32_t i = 0; i < keys->u.seq.n; i++)
	{
		Obj		   *k = keys->u.seq.v[i];
		TfTorchStorage *s;
		unsigned char b[8];
		uint64_t	nbytes;
		int			idx;
		char		qkey[128];

		SPM_CHECK_INTERRUPTS(i);
		if (k->type != O_STR)
		{
			fail(vm, "the checkpoint's list of storages holds %s", type_names[k->type]);
			return -1;
		}
		tf_zip_quote(qkey, sizeof(qkey), k->u.str.s, k->u.str.len);
		idx = find_storage(vm, k->u.str.s, k->u.str.len);
		if (idx < 0)
		{
			fail(vm, "the checkpoint's list of storages names \"%s\", which the pickle does not", qkey);
			return -1;
		}
		if (located[idx])
		{
			fail(vm, "the checkpoint's list of storages names \"%s\" twice", qkey);
			return -1;
		}
		s = &vm->storages[idx];
		if (file_size < 8 || pos > file_size - 8 || read(ctx, pos, b, 8) != 0)
		{
			fail(vm, "the file ends before storage \"%s\" at byte %llu", qkey, (unsigned long long) pos);
			return -1;
		}
		if (le64(b) != s->numel)
		{
			fail(vm, "storage \"%s\" has %llu elements in the file, but the pickle says %llu", qkey,
				 (unsigned long long) le64(b), (unsigned long long) s->numel);
			return -1;
		}
		pos += 8;
		nbytes = s->numel * (uint64_t) tf_torch_dtype_size(s->dtype);
		if (nbytes > file_size - pos)
		{
			fail(vm, "storage \"%s\" (%llu bytes at byte %llu) lies beyond the end of the file", qkey,
				 (unsigned long long) nbytes, (unsigned long long) pos);
			return -1;
		}
		s->offset = pos;
		located[idx] = true;
		pos += nbytes;
	}
	for (int i = 0; i < vm->nstorages; i++)
		if (!located[i])
		{
			char		qkey[128];

			tf_zip_quote(qkey, sizeof(qkey), vm->storages[i].key, strlen(vm->storages[i].key));
			fail(vm, "storage \"%s\" has no data in the file", qkey);
			return -1;
		}
	for (int i = 0; i < out->ntensors; i++)
		out->tensors[i].offset += vm->storages[out->tensors[i].storage].offset;
	return out->ntensors;
}

int
tf_torch_checkpoint(TfReadAt read, void *ctx, uint64_t file_size, const SpmAlloc *a,
					TfTorchCheckpoint *out, char *err, size_t errlen)
{
	Vm			vm;
	unsigned char head[512];
	size_t		hlen = file_size < sizeof(head) ? (size_t) file_size : sizeof(head);

	memset(out, 0, sizeof(TfTorchCheckpoint));
	if (!vm_init(&vm, a, err, errlen))
		return -1;
	if (hlen < 4 || read(ctx, 0, head, hlen) != 0)
	{
		fail(&vm, "the file is too short (%llu bytes) to be a PyTorch checkpoint", (unsigned long long) file_size);
		return -1;
	}
	if (memcmp(head, "PK\003\004", 4) == 0 || memcmp(head, "PK\005\006", 4) == 0)
		return checkpoint_zip(&vm, read, ctx, file_size, out);
	/* torch < 0.4: a tar archive of pickles and storages */
	if (hlen >= 262 && memcmp(head + 257, "ustar", 5) == 0)
	{
		fail(&vm, "the file is a tar archive, the checkpoint format of torch before 0.4, which is not supported; load it with torch and save it again");
		return -1;
	}
	if (head[0] == 0x80)
		return checkpoint_legacy(&vm, read, ctx, file_size, out);
	fail(&vm, "the file is not a PyTorch checkpoint: neither a ZIP archive nor a pickle");
	return -1;
}

int
tf_torch_dtype_size(const char *dtype)
{
	for (int i = 0; i < NDTYPES; i++)
		if (strcmp(dtype, dtypes[i].dtype) == 0)
			return dtypes[i].size;
	return 0;
}

const char *
tf_torch_dtype_torch_name(const char *dtype)
{
	for (int i = 0; i < NDTYPES; i++)
		if (strcmp(dtype, dtypes[i].dtype) == 0)
			return dtypes[i].torch_name;
	return NULL;
}
