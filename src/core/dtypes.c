/*
 * dtypes.c
 *		The element types of stored weights (tensor_ops.h's TfDType): their
 *		sizes and their conversion to fp32.  Below the kernels (gemm.c,
 *		gemm_bf16.c) that both need them.  No postgres.h.
 */
#include "tensor_ops.h"

#include <string.h>

float
tf_half_to_float(uint16_t h)
{
	uint32_t	sign = (uint32_t) (h & 0x8000) << 16;
	uint32_t	exp = (h >> 10) & 0x1f;
	uint32_t	mant = h & 0x3ff;
	uint32_t	bits;
	float		f;

	if (exp == 0)
	{
		/* zero or subnormal: mant · 2^-24 */
		f = (float) mant * 5.9604644775390625e-8f;
		return sign ? -f : f;
	}
	if (exp == 31)
		bits = sign | 0x7f800000u | (mant << 13);
	else
		bits = sign | ((exp + 112) << 23) | (mant << 13);
	memcpy(&f, &bits, sizeof(f));
	return f;
}

float
tf_bf16_to_float(uint16_t h)
{
	uint32_t	bits = (uint32_t) h << 16;
	float		f;

	memcpy(&f, &bits, sizeof(f));
	return f;
}

size_t
tf_dtype_size(TfDType dt)
{
	return dt == TF_F32 ? 4 : dt == TF_I8 ? 1 : 2;	/* (TF_BF16D: 2) */
}

/* element i of w; w need not be aligned (tensors come from bytea) */
static inline float
element_to_float(const void *w, TfDType dt, size_t i)
{
	float		f;
	uint16_t	h;

	if (dt == TF_F32)
	{
		memcpy(&f, (const char *) w + 4 * i, 4);
		return f;
	}
	memcpy(&h, (const char *) w + 2 * i, 2);
	return dt == TF_F16 ? tf_half_to_float(h) : tf_bf16_to_float(h);
}

void
tf_to_float(size_t n, float *out, const void *w, TfDType dt)
{
	if (dt == TF_F32)
		memcpy(out, w, sizeof(float) * n);
	else
		for (size_t i = 0; i < n; i++)
			out[i] = element_to_float(w, dt, i);
}
