/*
 * torch_pickle_tensors.c
 *		The storages a pickle names and the state dict it leaves: BINPERSID's
 *		persistent ids become the file's storages (keyed by a hash of their
 *		keys, which come from the file), and the dict of name -> tensor is
 *		checked (names, contiguity, bounds) into the result,
 *		TfTorchCheckpoint.  No postgres.h.
 */
#include "torch_pickle_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"		/* tf_valid_utf8 */

/* ---- storages ---- */

/*
 * FNV-1a, seeded and finished with MurmurHash3's mix: the keys come from
 * the file, and keys made to collide would make every lookup a walk over
 * all the storages.  The seed is not secret, only different from process
 * to process (see tf_pickle_vm_init); the walks call the interrupt hook besides.
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
int
tf_pickle_find_storage(Vm *vm, const char *key, size_t len)
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
		tf_pickle_fail(vm, "the pickle names more than %d storages", MAX_STORAGES);
		return -1;
	}
	if (vm->nstorages == vm->storages_cap)
	{
		int			cap = vm->storages_cap ? vm->storages_cap * 2 : 16;
		TfTorchStorage *bigger = tf_pickle_vm_alloc(vm, sizeof(TfTorchStorage) * (size_t) cap);

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
		int		   *slots = tf_pickle_vm_alloc(vm, sizeof(int) * n);

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
	s->key = tf_pickle_vm_alloc(vm, len + 1);
	if (s->key == NULL)
		return -1;
	memcpy(s->key, key, len);
	strcpy(s->dtype, tf_pickle_dtypes[dtype].dtype);
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

/*
 * BINPERSID: torch's persistent_load.  The id of a storage is
 * ('storage', StorageType, key, location, numel), with in the legacy format
 * a sixth element, None or (view_key, offset, numel) for a view of it.
 */
Obj *
tf_pickle_persistent_load(Vm *vm, Obj *pid, uint64_t at)
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
		tf_pickle_fail(vm, "BINPERSID at byte %llu has a persistent id that is %s, not a storage's tuple",
			 (unsigned long long) at, tf_pickle_type_names[pid->type]);
		return NULL;
	}
	v = pid->u.seq.v;
	if (tf_pickle_str_is(v[0], "module"))
	{
		tf_pickle_fail(vm, "the pickle saves a whole nn.Module (with its source code), not a state dict; save model.state_dict() instead");
		return NULL;
	}
	if (!tf_pickle_str_is(v[0], "storage"))
	{
		tf_zip_quote(qkey, sizeof(qkey), v[0]->u.str.s, v[0]->u.str.len);
		tf_pickle_fail(vm, "BINPERSID at byte %llu has a persistent id of type \"%s\"; only storages are expected",
			 (unsigned long long) at, qkey);
		return NULL;
	}
	if (pid->u.seq.n != 5 && pid->u.seq.n != 6)
	{
		tf_pickle_fail(vm, "BINPERSID at byte %llu has a storage id of %u elements (5, or 6 in the legacy format, expected)",
			 (unsigned long long) at, (unsigned) pid->u.seq.n);
		return NULL;
	}
	if (v[1]->type != O_GLOBAL || v[1]->u.g.kind != G_STORAGE_TYPE || v[2]->type != O_STR ||
		v[3]->type != O_STR || !tf_pickle_nonneg_int(v[4], &numel))
	{
		tf_pickle_fail(vm, "BINPERSID at byte %llu has a storage id that is not (\"storage\", storage type, key, location, numel)",
			 (unsigned long long) at);
		return NULL;
	}
	dt = &tf_pickle_dtypes[v[1]->u.g.dtype];
	if (v[2]->u.str.len == 0 || v[2]->u.str.len > TF_ZIP_MAX_NAME ||
		memchr(v[2]->u.str.s, '\0', v[2]->u.str.len) != NULL)
	{
		tf_pickle_fail(vm, "BINPERSID at byte %llu has a storage key that is empty, too long or holds a NUL",
			 (unsigned long long) at);
		return NULL;
	}
	tf_zip_quote(qkey, sizeof(qkey), v[2]->u.str.s, v[2]->u.str.len);
	/* the storage's bytes must be countable in 63 bits */
	if (numel > (uint64_t) INT64_MAX / (uint64_t) dt->size)
	{
		tf_pickle_fail(vm, "storage \"%s\" has %llu elements, too many", qkey, (unsigned long long) numel);
		return NULL;
	}
	vnumel = numel;
	if (pid->u.seq.n == 6 && v[5]->type != O_NONE)
	{
		Obj		   *m = v[5];

		if (m->type != O_TUPLE || m->u.seq.n != 3 || m->u.seq.v[0]->type != O_STR ||
			!tf_pickle_nonneg_int(m->u.seq.v[1], &voff) || !tf_pickle_nonneg_int(m->u.seq.v[2], &vnumel))
		{
			tf_pickle_fail(vm, "storage \"%s\" has view metadata that is not (key, offset, numel)", qkey);
			return NULL;
		}
		if (vnumel > numel || voff > numel - vnumel)
		{
			tf_pickle_fail(vm, "storage \"%s\" has a view of %llu elements at %llu, beyond its %llu", qkey,
				 (unsigned long long) vnumel, (unsigned long long) voff, (unsigned long long) numel);
			return NULL;
		}
	}
	idx = tf_pickle_find_storage(vm, v[2]->u.str.s, v[2]->u.str.len);
	if (idx < 0)
		idx = add_storage(vm, v[2]->u.str.s, v[2]->u.str.len, v[1]->u.g.dtype, numel);
	else if (strcmp(vm->storages[idx].dtype, dt->dtype) != 0 || vm->storages[idx].numel != numel)
	{
		tf_pickle_fail(vm, "storage \"%s\" is named with two dtypes or sizes", qkey);
		return NULL;
	}
	if (idx < 0)
		return NULL;
	o = tf_pickle_new_obj(vm, O_STORAGE);
	if (o == NULL)
		return NULL;
	o->u.st.index = idx;
	o->u.st.view_offset = voff;
	o->u.st.view_numel = vnumel;
	return o;
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
			return tf_pickle_fail(vm, "tensor \"%s\" has more elements than its storage", qname);
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
				return tf_pickle_fail(vm, "tensor \"%s\" is a non-contiguous view (stride %s of shape %s); save it with .contiguous()",
							qname, st, sh);
			}
			expect *= (uint64_t) t->shape[k];
		}
	if (t->storage_offset > t->view_numel || numel > t->view_numel - t->storage_offset)
		return tf_pickle_fail(vm, "tensor \"%s\" (%llu elements at %llu) lies beyond its storage of %llu elements",
					qname, (unsigned long long) numel, (unsigned long long) t->storage_offset,
					(unsigned long long) t->view_numel);
	strcpy(out->dtype, s->dtype);
	out->storage = t->storage;
	/* all within the storage, whose bytes fit 63 bits (tf_pickle_persistent_load) */
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
int
tf_pickle_state_dict(Vm *vm, Obj *res, TfTorchCheckpoint *out)
{
	Obj		   *sd = res,
			   *inner;
	TfTorchTensor *t,
			   *sorted;
	uint32_t	n;

	if (res->type != O_DICT)
	{
		tf_pickle_fail(vm, "the pickle holds %s, not a state dict (a dict of tensors)", tf_pickle_type_names[res->type]);
		return -1;
	}
	if ((inner = tf_pickle_dict_get(res, "state_dict")) != NULL && inner->type == O_DICT)
		sd = inner;
	else if ((inner = tf_pickle_dict_get(res, "model")) != NULL && inner->type == O_DICT)
		sd = inner;
	n = sd->u.seq.n / 2;
	if (n > TF_TORCH_MAX_TENSORS)
	{
		tf_pickle_fail(vm, "the state dict has %u entries, more than %d", (unsigned) n, TF_TORCH_MAX_TENSORS);
		return -1;
	}
	t = tf_pickle_vm_alloc(vm, sizeof(TfTorchTensor) * (n ? n : 1));
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
			tf_pickle_fail(vm, "entry %u of the state dict has a key that is %s, not a name", (unsigned) i,
				 tf_pickle_type_names[k->type]);
			return -1;
		}
		tf_zip_quote(qname, sizeof(qname), k->u.str.s, k->u.str.len);
		if (k->u.str.len == 0 || k->u.str.len > TF_TORCH_MAX_NAME ||
			memchr(k->u.str.s, '\0', k->u.str.len) != NULL ||
			!tf_valid_utf8((const unsigned char *) k->u.str.s, k->u.str.len))
		{
			tf_pickle_fail(vm, "the state dict has a name (\"%s\") that is empty, longer than %d bytes, not UTF-8 or holds a NUL",
				 qname, TF_TORCH_MAX_NAME);
			return -1;
		}
		if (v->type != O_TENSOR)
		{
			tf_pickle_fail(vm, "the state dict's value for \"%s\" is %s, not a tensor", qname, tf_pickle_type_names[v->type]);
			return -1;
		}
		t[i].name = k->u.str.s;
		if (!check_tensor(vm, v->u.t, &t[i], qname))
			return -1;
	}
	/* a name twice: Python would keep the last, torch.save never writes it */
	if (n > 1)
	{
		sorted = tf_pickle_vm_alloc(vm, sizeof(TfTorchTensor) * n);
		if (sorted == NULL)
			return -1;
		memcpy(sorted, t, sizeof(TfTorchTensor) * n);
		qsort(sorted, n, sizeof(TfTorchTensor), cmp_names);
		for (uint32_t i = 1; i < n; i++)
			if (strcmp(sorted[i - 1].name, sorted[i].name) == 0)
			{
				char		qname[160];

				tf_zip_quote(qname, sizeof(qname), sorted[i].name, strlen(sorted[i].name));
				tf_pickle_fail(vm, "the state dict names \"%s\" twice", qname);
				return -1;
			}
	}
	out->ntensors = (int) n;
	out->tensors = t;
	out->nstorages = vm->nstorages;
	out->storages = vm->storages;
	return (int) n;
}
