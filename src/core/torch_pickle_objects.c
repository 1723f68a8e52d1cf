/*
 * torch_pickle_objects.c
 *		The objects of the pickle machine (see torch_pickle_internal.h):
 *		their allocation against one budget for all of a file's pickles,
 *		the few questions asked of them (is it this string, this dict's
 *		value, a count), the machine's set-up, and its one message.  The
 *		bottom of the reader's pieces: everything else builds on these.
 *		No postgres.h.
 */
#include "torch_pickle_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* for messages: "... is a tuple" */
const char *const tf_pickle_type_names[] = {
	"None", "a bool", "an int", "an int", "a float", "a str", "a tuple", "a list", "a dict",
	"a global", "a storage", "a tensor"
};

bool
tf_pickle_fail(Vm *vm, const char *fmt,...)
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

/* Zeroed memory from the budget of TF_TORCH_MAX_OBJECT_BYTES, or NULL. */
void *
tf_pickle_vm_alloc(Vm *vm, size_t size)
{
	if (size > TF_TORCH_MAX_OBJECT_BYTES - vm->used)
	{
		tf_pickle_fail(vm, "the pickle builds more than %zu MB of objects; a state dict needs far less",
			 TF_TORCH_MAX_OBJECT_BYTES >> 20);
		return NULL;
	}
	vm->used += size;
	return vm->a->alloc(vm->a->ctx, size);
}

Obj *
tf_pickle_new_obj(Vm *vm, OType type)
{
	Obj		   *o = tf_pickle_vm_alloc(vm, sizeof(Obj));

	if (o)
		o->type = type;
	return o;
}

bool
tf_pickle_str_is(const Obj *o, const char *s)
{
	return o->type == O_STR && o->u.str.len == strlen(s) && memcmp(o->u.str.s, s, o->u.str.len) == 0;
}

/* The value of key s in dict d, or NULL. */
Obj *
tf_pickle_dict_get(const Obj *d, const char *s)
{
	for (uint32_t i = 0; i + 1 < d->u.seq.n; i += 2)
		if (tf_pickle_str_is(d->u.seq.v[i], s))
			return d->u.seq.v[i + 1];
	return NULL;
}

bool
tf_pickle_nonneg_int(const Obj *o, uint64_t *v)
{
	if (o->type != O_INT || o->u.i < 0)
		return false;
	*v = (uint64_t) o->u.i;
	return true;
}

bool
tf_pickle_vm_init(Vm *vm, const SpmAlloc *a, char *err, size_t errlen)
{
	memset(vm, 0, sizeof(Vm));
	vm->a = a;
	vm->err = err;
	vm->errlen = errlen;
	/* the stack's address: differs between processes where ASLR is on */
	vm->seed = (uint32_t) ((uintptr_t) vm >> 4) ^ (uint32_t) ((uint64_t) (uintptr_t) vm >> 32);
	if (errlen > 0)
		err[0] = '\0';
	vm->none = tf_pickle_new_obj(vm, O_NONE);
	vm->yes = tf_pickle_new_obj(vm, O_BOOL);
	vm->no = tf_pickle_new_obj(vm, O_BOOL);
	if (vm->yes)
		vm->yes->u.b = true;
	return !vm->failed;
}
