/*
 * libFuzzer harness for the restricted pickle machine
 * (src/core/torch_pickle_*.c) alone, outside the server: the input is a
 * pickle (a checkpoint's data.pkl); make fuzz-torch-pickle.  Whatever is
 * accepted must hold: every tensor within its storage, at most 8
 * dimensions, nbytes = numel * element size, storages keyed and of a
 * known dtype; abort() otherwise.
 */
#include <stdlib.h>
#include <string.h>

#include "torch_pickle.h"
#include "fuzz_arena.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Arena		arena = {0};
	SpmAlloc	a = {arena_alloc, &arena};
	TfTorchCheckpoint c;
	char		err[512];
	int			n;

	n = tf_torch_unpickle(data, size, &a, &c, err, sizeof(err));
	if (n < -1 || (n < 0 && err[0] == '\0') || (n >= 0 && n != c.ntensors) ||
		(n >= 0 && c.nstorages < 0))
		abort();
	for (int i = 0; i < c.nstorages && n >= 0; i++)
	{
		const TfTorchStorage *s = &c.storages[i];
		int			es = tf_torch_dtype_size(s->dtype);

		if (es == 0 || s->key == NULL || s->key[0] == '\0' || s->offset != 0 ||
			s->numel > (uint64_t) INT64_MAX / (uint64_t) es)
			abort();
	}
	for (int i = 0; i < n; i++)
	{
		const TfTorchTensor *t = &c.tensors[i];
		const TfTorchStorage *s;
		int			es = tf_torch_dtype_size(t->dtype);
		uint64_t	numel = 1,
					sbytes;

		if (t->name == NULL || strlen(t->name) == 0 || strlen(t->name) > TF_TORCH_MAX_NAME ||
			t->ndim < 0 || t->ndim > TF_TORCH_MAX_DIMS || es == 0 ||
			t->storage < 0 || t->storage >= c.nstorages)
			abort();
		s = &c.storages[t->storage];
		sbytes = s->numel * (uint64_t) es;
		if (strcmp(s->dtype, t->dtype) != 0 || t->nbytes > sbytes || t->offset > sbytes - t->nbytes)
			abort();
		for (int k = 0; k < t->ndim; k++)
		{
			if (t->shape[k] < 0)
				abort();
			if (t->shape[k] != 0 && numel > sbytes / (uint64_t) t->shape[k])
				numel = UINT64_MAX;
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
