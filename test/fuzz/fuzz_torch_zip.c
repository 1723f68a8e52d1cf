/*
 * libFuzzer harness for the PyTorch checkpoint reader (src/core/torch_zip.c,
 * src/core/torch_checkpoint.c, src/core/torch_pickle_*.c), outside the
 * server: the input is a whole file (a ZIP archive, a legacy stream,
 * anything), read through a callback as the server reads a file; make
 * fuzz-torch-zip.  Built with FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, so
 * that data.pkl's CRC-32 is not checked and mutations reach the pickle.
 * Whatever is accepted must hold: every entry, storage and tensor lies
 * within the file, each tensor within its storage, with at most 8
 * dimensions and nbytes = numel * element size; abort() otherwise.
 */
#include <stdlib.h>
#include <string.h>

#include "torch_pickle.h"
#include "torch_zip.h"
#include "fuzz_arena.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct Mem
{
	const uint8_t *p;
	size_t		len;
} Mem;

static int
read_mem(void *ctx, uint64_t off, void *buf, size_t len)
{
	Mem		   *m = ctx;

	if (off > m->len || len > m->len - off)
		return -1;
	memcpy(buf, m->p + off, len);
	return 0;
}

static int
within(uint64_t off, uint64_t len, uint64_t limit)
{
	return len <= limit && off <= limit - len;
}

static void
check_zip(Mem *m, const SpmAlloc *a)
{
	TfZipEntry *e;
	char		err[512];
	int			n = tf_zip_directory(read_mem, m, m->len, a, &e, err, sizeof(err));

	if (n < -1 || (n < 0 && err[0] == '\0'))
		abort();
	for (int i = 0; i < n; i++)
	{
		if (e[i].name == NULL || e[i].name[0] == '\0' || strlen(e[i].name) > TF_ZIP_MAX_NAME ||
			!within(e[i].data_offset, e[i].size, m->len))
			abort();
		if (i > 0 && strcmp(e[i - 1].name, e[i].name) >= 0)
			abort();			/* sorted, unique */
		if (tf_zip_find(e, n, e[i].name) != &e[i])
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Arena		arena = {0};
	SpmAlloc	a = {arena_alloc, &arena};
	Mem			m = {data, size};
	TfTorchCheckpoint c;
	char		err[512];
	int			n;

	check_zip(&m, &a);
	n = tf_torch_checkpoint(read_mem, &m, size, &a, &c, err, sizeof(err));
	if (n < -1 || (n < 0 && err[0] == '\0') || (n >= 0 && n != c.ntensors))
		abort();
	for (int i = 0; i < c.nstorages && n >= 0; i++)
	{
		const TfTorchStorage *s = &c.storages[i];
		int			es = tf_torch_dtype_size(s->dtype);

		if (es == 0 || s->key == NULL || s->numel > UINT64_MAX / (uint64_t) es ||
			!within(s->offset, s->numel * (uint64_t) es, size))
			abort();
	}
	for (int i = 0; i < n; i++)
	{
		const TfTorchTensor *t = &c.tensors[i];
		const TfTorchStorage *s;
		int			es = tf_torch_dtype_size(t->dtype);
		uint64_t	numel = 1;

		if (t->name == NULL || strlen(t->name) == 0 || strlen(t->name) > TF_TORCH_MAX_NAME ||
			t->ndim < 0 || t->ndim > TF_TORCH_MAX_DIMS || es == 0 ||
			t->storage < 0 || t->storage >= c.nstorages)
			abort();
		s = &c.storages[t->storage];
		if (strcmp(s->dtype, t->dtype) != 0 || !within(t->offset, t->nbytes, size) ||
			t->offset < s->offset || !within(t->offset - s->offset, t->nbytes, s->numel * (uint64_t) es))
			abort();
		for (int k = 0; k < t->ndim; k++)
		{
			if (t->shape[k] < 0)
				abort();
			if (t->shape[k] != 0 && numel > size / (uint64_t) t->shape[k])
				numel = UINT64_MAX;		/* then it cannot match nbytes */
			else if (numel != UINT64_MAX)
				numel *= (uint64_t) t->shape[k];
		}
		for (int k = 0; k < t->ndim; k++)
			if (t->shape[k] == 0)
				numel = 0;
		if (numel == UINT64_MAX || numel * (uint64_t) es != t->nbytes)
			abort();
	}
	arena_free(&arena);
	return 0;
}
