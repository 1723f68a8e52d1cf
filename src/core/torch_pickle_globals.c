/*
 * torch_pickle_globals.c
 *		The restriction: the globals a state dict may name
 *		(collections.OrderedDict, torch._utils._rebuild_tensor_v2,
 *		_rebuild_tensor, _rebuild_parameter, and the storage types), and
 *		what "calling" each one with REDUCE builds: an empty dict, a
 *		tensor's descriptor, or the tensor a parameter wraps.  Any other
 *		global is refused where GLOBAL or STACK_GLOBAL names it, before
 *		anything is built from it.  The dtypes of the storage types live
 *		here too, with their sizes and PyTorch's names.  No postgres.h.
 */
#include "torch_pickle_internal.h"

#include <string.h>

/* by storage type; the index is an Obj's u.g.dtype */
const DType tf_pickle_dtypes[] = {
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
#define NDTYPES ((int) (sizeof(tf_pickle_dtypes) / sizeof(tf_pickle_dtypes[0])))

/* The global module.name if it is one a state dict needs; else refused. */
Obj *
tf_pickle_find_global(Vm *vm, const char *module, size_t mlen, const char *name, size_t nlen)
{
	Obj		   *o;
	char		qm[128],
				qn[128];

#define IS(s, l, lit) ((l) == sizeof(lit) - 1 && memcmp((s), (lit), (l)) == 0)
	o = tf_pickle_new_obj(vm, O_GLOBAL);
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
			if (nlen == strlen(tf_pickle_dtypes[i].storage) && memcmp(name, tf_pickle_dtypes[i].storage, nlen) == 0)
			{
				o->u.g.kind = G_STORAGE_TYPE;
				o->u.g.dtype = i;
				return o;
			}
#undef IS
refuse:
	tf_zip_quote(qm, sizeof(qm), module, mlen);
	tf_zip_quote(qn, sizeof(qn), name, nlen);
	tf_pickle_fail(vm, "pickle names the global \"%s.%s\", which a state dict never needs; refused", qm, qn);
	return NULL;
}

/*
 * _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
 * backward_hooks[, metadata]) and _rebuild_tensor(storage, storage_offset,
 * size, stride): a tensor's descriptor.  Whether it is contiguous and lies
 * within its storage is checked once its name is known
 * (tf_pickle_state_dict).
 */
static Obj *
rebuild_tensor(Vm *vm, Obj *args, const char *fn, uint64_t at)
{
	Obj		  **v = args->u.seq.v;
	Obj		   *o;
	Tensor	   *t;
	uint64_t	off;

	if (v[0]->type != O_STORAGE || !tf_pickle_nonneg_int(v[1], &off) || v[2]->type != O_TUPLE ||
		v[3]->type != O_TUPLE)
	{
		tf_pickle_fail(vm, "%s at byte %llu has arguments that are not (storage, offset, size, stride, ...)",
			 fn, (unsigned long long) at);
		return NULL;
	}
	if (v[2]->u.seq.n > TF_TORCH_MAX_DIMS || v[3]->u.seq.n != v[2]->u.seq.n)
	{
		tf_pickle_fail(vm, "%s at byte %llu makes a tensor of %u dimensions with %u strides (at most %d)",
			 fn, (unsigned long long) at, (unsigned) v[2]->u.seq.n, (unsigned) v[3]->u.seq.n,
			 TF_TORCH_MAX_DIMS);
		return NULL;
	}
	o = tf_pickle_new_obj(vm, O_TENSOR);
	t = tf_pickle_vm_alloc(vm, sizeof(Tensor));
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
			tf_pickle_fail(vm, "%s at byte %llu has a size or stride that is not an integer (or a negative size)",
				 fn, (unsigned long long) at);
			return NULL;
		}
		t->shape[k] = d->u.i;
		t->stride[k] = s->u.i;
	}
	return o;
}

/* REDUCE: callable(*args) for the few callables a state dict has. */
Obj *
tf_pickle_reduce(Vm *vm, Obj *fn, Obj *args, uint64_t at)
{
	if (fn->type != O_GLOBAL)
	{
		tf_pickle_fail(vm, "REDUCE at byte %llu calls %s; only a few functions of torch may be called",
			 (unsigned long long) at, tf_pickle_type_names[fn->type]);
		return NULL;
	}
	if (args->type != O_TUPLE)
	{
		tf_pickle_fail(vm, "REDUCE at byte %llu has arguments that are %s, not a tuple",
			 (unsigned long long) at, tf_pickle_type_names[args->type]);
		return NULL;
	}
	switch (fn->u.g.kind)
	{
		case G_ORDERED_DICT:
			/* pickle writes an OrderedDict's items with SETITEMS, after () */
			if (args->u.seq.n != 0)
			{
				tf_pickle_fail(vm, "REDUCE at byte %llu calls collections.OrderedDict with arguments", (unsigned long long) at);
				return NULL;
			}
			return tf_pickle_new_obj(vm, O_DICT);
		case G_REBUILD_TENSOR_V2:
			if (args->u.seq.n != 6 && args->u.seq.n != 7)
			{
				tf_pickle_fail(vm, "REDUCE at byte %llu calls torch._utils._rebuild_tensor_v2 with %u arguments (6 or 7 expected)",
					 (unsigned long long) at, (unsigned) args->u.seq.n);
				return NULL;
			}
			return rebuild_tensor(vm, args, "torch._utils._rebuild_tensor_v2", at);
		case G_REBUILD_TENSOR:
			if (args->u.seq.n != 4)
			{
				tf_pickle_fail(vm, "REDUCE at byte %llu calls torch._utils._rebuild_tensor with %u arguments (4 expected)",
					 (unsigned long long) at, (unsigned) args->u.seq.n);
				return NULL;
			}
			return rebuild_tensor(vm, args, "torch._utils._rebuild_tensor", at);
		case G_REBUILD_PARAMETER:
			/* (data, requires_grad, backward_hooks): the tensor itself */
			if (args->u.seq.n != 3 || args->u.seq.v[0]->type != O_TENSOR)
			{
				tf_pickle_fail(vm, "REDUCE at byte %llu calls torch._utils._rebuild_parameter with arguments that are not (tensor, requires_grad, hooks)",
					 (unsigned long long) at);
				return NULL;
			}
			return args->u.seq.v[0];
		case G_STORAGE_TYPE:
			break;
	}
	tf_pickle_fail(vm, "REDUCE at byte %llu calls torch.%s; a state dict never constructs a storage",
		 (unsigned long long) at, tf_pickle_dtypes[fn->u.g.dtype].storage);
	return NULL;
}

int
tf_torch_dtype_size(const char *dtype)
{
	for (int i = 0; i < NDTYPES; i++)
		if (strcmp(dtype, tf_pickle_dtypes[i].dtype) == 0)
			return tf_pickle_dtypes[i].size;
	return 0;
}

const char *
tf_torch_dtype_torch_name(const char *dtype)
{
	for (int i = 0; i < NDTYPES; i++)
		if (strcmp(dtype, tf_pickle_dtypes[i].dtype) == 0)
			return tf_pickle_dtypes[i].torch_name;
	return NULL;
}
