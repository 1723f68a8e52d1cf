/*
 * libFuzzer harness for the safetensors header reader (src/core/safetensors.c),
 * outside the server: the input is a whole file (8-byte length, header,
 * data); make fuzz-safetensors-header.
 */
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "fuzz_arena.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Arena		arena = {0};
	SpmAlloc	a = {arena_alloc, &arena};
	TfSafetensor *t;
	char		err[512];
	uint64_t	hlen = 0;
	int			n;

	if (size < 8)
		return 0;
	for (int i = 7; i >= 0; i--)
		hlen = (hlen << 8) | data[i];
	if (hlen > size - 8)
		return 0;
	n = tf_safetensors_header((const char *) data + 8, (size_t) hlen, size - 8 - hlen, &a, &t, err, sizeof(err));
	for (int i = 0; i < n; i++)
		if (t[i].begin > t[i].end || t[i].end > size - 8 - hlen || t[i].ndim > TF_SAFETENSORS_MAX_DIMS ||
			strlen(t[i].name) > hlen)
			abort();
	arena_free(&arena);
	return 0;
}
