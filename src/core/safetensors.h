/*
 * safetensors.h
 *		The header of a safetensors file: an 8-byte little-endian length,
 *		then a JSON object {name: {"dtype", "shape", "data_offsets"}, ...,
 *		"__metadata__": {...}}.  Part of the core: no postgres.h, so that a
 *		fuzzer drives it outside the server (test/fuzz/fuzz_safetensors.c).
 */
#ifndef SAFETENSORS_H
#define SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spm.h"				/* SpmAlloc */

#define TF_SAFETENSORS_MAX_DIMS 8
/* real checkpoints have a few hundred */
#define TF_SAFETENSORS_MAX_TENSORS 100000

typedef struct TfSafetensor
{
	char	   *name;			/* NUL-terminated UTF-8 */
	char		dtype[8];		/* as written, if it fits; else "" */
	int			ndim;
	int64_t		shape[TF_SAFETENSORS_MAX_DIMS];
	uint64_t	begin;			/* data_offsets, within the data section */
	uint64_t	end;
} TfSafetensor;

/*
 * Parse the JSON header (hlen bytes) of a file whose data section has
 * data_len bytes: every tensor's name, dtype, shape (non-negative
 * integers, at most TF_SAFETENSORS_MAX_DIMS) and data offsets (begin <= end
 * <= data_len).  Everything is checked: UTF-8, JSON syntax (nesting at
 * most 64 deep), types.  (A name given twice is two tensors.)  Returns the number of tensors,
 * *out allocated from a; or -1 with a sentence in err (errlen bytes).
 */
int			tf_safetensors_header(const char *json, size_t hlen, uint64_t data_len,
								  const SpmAlloc *a, TfSafetensor **out, char *err, size_t errlen);

/* Valid UTF-8, no overlong forms or surrogates (as PostgreSQL checks it); also the unpickler's. */
bool		tf_valid_utf8(const unsigned char *s, size_t n);

#endif							/* SAFETENSORS_H */
