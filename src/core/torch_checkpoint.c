/*
 * torch_checkpoint.c
 *		The files around the pickle machine, and the reader's entry points
 *		(torch_pickle.h): a ZIP archive (torch >= 1.6: <prefix>/data.pkl and
 *		the storages as entries <prefix>/data/k) or the legacy format (torch
 *		0.4 to 1.5: five pickles, then the storages' bytes), told apart by
 *		their first bytes; each storage is located in the file and each
 *		tensor's offset made the file's.  And the pickle alone, for the
 *		fuzzer and the tests.  No postgres.h.
 */
#include "torch_pickle_internal.h"

#include <stdio.h>
#include <string.h>

/* torch.serialization's MAGIC_NUMBER 0x1950a86a20f9469cfc6c as LONG1 writes it */
static const unsigned char legacy_magic[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
#define LEGACY_PROTOCOL 1001

int
tf_torch_unpickle(const unsigned char *pkl, size_t len, const SpmAlloc *a, TfTorchCheckpoint *out,
				  char *err, size_t errlen)
{
	Vm			vm;
	Obj		   *res;

	memset(out, 0, sizeof(TfTorchCheckpoint));
	if (!tf_pickle_vm_init(&vm, a, err, errlen))
		return -1;
	tf_pickle_src_mem(&vm, pkl, len);
	if ((res = tf_pickle_run(&vm)) == NULL)
		return -1;
	return tf_pickle_state_dict(&vm, res, out);
}

/* ---- the ZIP format ---- */

static int
read_entry(TfReadAt read, void *ctx, const TfZipEntry *e, void *buf, Vm *vm)
{
	if (e->size > 0 && read(ctx, e->data_offset, buf, (size_t) e->size) != 0)
	{
		tf_pickle_fail(vm, "cannot read entry \"%s\" of the archive", e->name);
		return -1;
	}
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
	/* (a fuzzer would rarely get past a checksum to the pickle) */
	if (tf_crc32(0, buf, (size_t) e->size) != e->crc32)
	{
		tf_pickle_fail(vm, "entry \"%s\" of the archive is corrupt (its CRC-32 does not match)", e->name);
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
		tf_pickle_fail(vm, "the archive is empty");
		return -1;
	}
	/* the one top-level directory: "archive", "pytorch_model", ... */
	slash = strchr(entries[0].name, '/');
	plen = slash ? (size_t) (slash - entries[0].name) : 0;
	for (int i = 0; i < n; i++)
		if (plen == 0 || strncmp(entries[i].name, entries[0].name, plen + 1) != 0)
		{
			tf_zip_quote(qname, sizeof(qname), entries[i].name, strlen(entries[i].name));
			tf_pickle_fail(vm, "the archive's entries are not all in one directory (\"%s\"); not a torch.save checkpoint", qname);
			return -1;
		}
	tf_zip_quote(qname, sizeof(qname), entries[0].name, plen);
	/* prefix + "/" + the longest name we look up */
	name = tf_pickle_vm_alloc(vm, plen + 2 + 5 + TF_ZIP_MAX_NAME + 1);
	if (name == NULL)
		return -1;
	memcpy(name, entries[0].name, plen + 1);
	strcpy(name + plen + 1, "constants.pkl");
	if (tf_zip_find(entries, n, name) != NULL)
	{
		tf_pickle_fail(vm, "the archive is a TorchScript model (torch.jit.save), not a torch.save state dict");
		return -1;
	}
	strcpy(name + plen + 1, "byteorder");
	if ((e = tf_zip_find(entries, n, name)) != NULL)
	{
		char		order[MAX_BYTEORDER + 1];

		if (e->size > MAX_BYTEORDER)
		{
			tf_pickle_fail(vm, "the archive's byteorder entry has %llu bytes", (unsigned long long) e->size);
			return -1;
		}
		if (read_entry(read, ctx, e, order, vm) != 0)
			return -1;
		if (e->size != 6 || memcmp(order, "little", 6) != 0)
		{
			char		qorder[64];

			tf_zip_quote(qorder, sizeof(qorder), order, (size_t) e->size);
			tf_pickle_fail(vm, "the checkpoint was saved with byte order \"%s\"; only little-endian is supported", qorder);
			return -1;
		}
	}
	strcpy(name + plen + 1, "data.pkl");
	if ((e = tf_zip_find(entries, n, name)) == NULL)
	{
		tf_pickle_fail(vm, "the archive has no %s/data.pkl; not a torch.save checkpoint", qname);
		return -1;
	}
	if (e->size > TF_TORCH_MAX_PICKLE)
	{
		tf_pickle_fail(vm, "%s/data.pkl has %llu bytes, more than %zu MB", qname, (unsigned long long) e->size,
			 TF_TORCH_MAX_PICKLE >> 20);
		return -1;
	}
	/* not from the objects' budget: it is bounded by itself */
	pkl = vm->a->alloc(vm->a->ctx, (size_t) e->size + 1);
	if (read_entry(read, ctx, e, pkl, vm) != 0)
		return -1;
	tf_pickle_src_mem(vm, pkl, (size_t) e->size);
	if ((res = tf_pickle_run(vm)) == NULL || tf_pickle_state_dict(vm, res, out) < 0)
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
			tf_pickle_fail(vm, "storage \"%s\" is not in the archive", qname);
			return -1;
		}
		if (e->size != nbytes)
		{
			tf_pickle_fail(vm, "storage \"%s\" has %llu bytes in the archive, but %llu elements of %s take %llu",
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
	res = tf_pickle_run(vm);
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
		tf_pickle_fail(vm, "the file is not a PyTorch checkpoint: it is a pickle, but not torch's magic number");
		return -1;
	}
	if ((o = legacy_pickle(vm, read, ctx, file_size, &pos)) == NULL)
		return -1;
	if (o->type != O_INT || o->u.i != LEGACY_PROTOCOL)
	{
		tf_pickle_fail(vm, "the checkpoint's legacy protocol version is not %d", LEGACY_PROTOCOL);
		return -1;
	}
	if ((o = legacy_pickle(vm, read, ctx, file_size, &pos)) == NULL)
		return -1;
	if (o->type != O_DICT)
	{
		tf_pickle_fail(vm, "the checkpoint's system description is %s, not a dict", tf_pickle_type_names[o->type]);
		return -1;
	}
	if ((le = tf_pickle_dict_get(o, "little_endian")) != NULL && le->type == O_BOOL && !le->u.b)
	{
		tf_pickle_fail(vm, "the checkpoint was saved on a big-endian machine; only little-endian is supported");
		return -1;
	}

	/* the state dict */
	if ((o = legacy_pickle(vm, read, ctx, file_size, &pos)) == NULL || tf_pickle_state_dict(vm, o, out) < 0)
		return -1;

	/* the keys of the storages, whose elements follow in this order */
	if ((keys = legacy_pickle(vm, read, ctx, file_size, &pos)) == NULL)
		return -1;
	if (keys->type != O_LIST)
	{
		tf_pickle_fail(vm, "the checkpoint's list of storages is %s, not a list", tf_pickle_type_names[keys->type]);
		return -1;
	}
	located = tf_pickle_vm_alloc(vm, (size_t) vm->nstorages + 1);
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
			tf_pickle_fail(vm, "the checkpoint's list of storages holds %s", tf_pickle_type_names[k->type]);
			return -1;
		}
		tf_zip_quote(qkey, sizeof(qkey), k->u.str.s, k->u.str.len);
		idx = tf_pickle_find_storage(vm, k->u.str.s, k->u.str.len);
		if (idx < 0)
		{
			tf_pickle_fail(vm, "the checkpoint's list of storages names \"%s\", which the pickle does not", qkey);
			return -1;
		}
		if (located[idx])
		{
			tf_pickle_fail(vm, "the checkpoint's list of storages names \"%s\" twice", qkey);
			return -1;
		}
		s = &vm->storages[idx];
		if (file_size < 8 || pos > file_size - 8 || read(ctx, pos, b, 8) != 0)
		{
			tf_pickle_fail(vm, "the file ends before storage \"%s\" at byte %llu", qkey, (unsigned long long) pos);
			return -1;
		}
		if (le64(b) != s->numel)
		{
			tf_pickle_fail(vm, "storage \"%s\" has %llu elements in the file, but the pickle says %llu", qkey,
				 (unsigned long long) le64(b), (unsigned long long) s->numel);
			return -1;
		}
		pos += 8;
		nbytes = s->numel * (uint64_t) tf_torch_dtype_size(s->dtype);
		if (nbytes > file_size - pos)
		{
			tf_pickle_fail(vm, "storage \"%s\" (%llu bytes at byte %llu) lies beyond the end of the file", qkey,
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
			tf_pickle_fail(vm, "storage \"%s\" has no data in the file", qkey);
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
	if (!tf_pickle_vm_init(&vm, a, err, errlen))
		return -1;
	if (hlen < 4 || read(ctx, 0, head, hlen) != 0)
	{
		tf_pickle_fail(&vm, "the file is too short (%llu bytes) to be a PyTorch checkpoint", (unsigned long long) file_size);
		return -1;
	}
	if (memcmp(head, "PK\003\004", 4) == 0 || memcmp(head, "PK\005\006", 4) == 0)
		return checkpoint_zip(&vm, read, ctx, file_size, out);
	/* torch < 0.4: a tar archive of pickles and storages */
	if (hlen >= 262 && memcmp(head + 257, "ustar", 5) == 0)
	{
		tf_pickle_fail(&vm, "the file is a tar archive, the checkpoint format of torch before 0.4, which is not supported; load it with torch and save it again");
		return -1;
	}
	if (head[0] == 0x80)
		return checkpoint_legacy(&vm, read, ctx, file_size, out);
	tf_pickle_fail(&vm, "the file is not a PyTorch checkpoint: neither a ZIP archive nor a pickle");
	return -1;
}
