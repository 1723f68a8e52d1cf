/*
 * sql_quantize.c
 *		quantize_model(name, new_name, dtype): a copy of a model with its
 *		weight matrices in int8, stored beside the original.
 *
 * Every weight matrix (the linear layers, the embeddings, the output
 * layer) is quantized per output row, symmetrically, with an fp32 scale
 * (tf_quantize_rows, CTranslate2's scheme): "X.weight" becomes I8 and
 * "X.weight_scale" (rows) F32.  Biases, norms and positions become F32.
 * The copy is written as import_model() writes a model, with a safetensors
 * header of its own, so export_model(), pg_dump and the caches treat it as
 * any other.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/memutils.h"

#include "ext_tables.h"
#include "model_store.h"
#include "tensor_ops.h"

/* t's values as fp32, checked finite */
static float *
tensor_floats(const StoredTensor *t, Size numel)
{
	float	   *f = palloc_extended(sizeof(float) * (numel ? numel : 1), MCXT_ALLOC_HUGE);

	tf_to_float(numel, f, t->data, StoredDType(t));
	for (Size i = 0; i < numel; i++)
		if (!isfinite(f[i]))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("tensor \"%s\" contains NaN or infinity", t->name)));
	return f;
}

/* out := a copy of t, as dtype with the given bytes, allocated in cxt */
static void
new_tensor(StoredTensor *out, const StoredTensor *t, const char *name, const char *dtype,
		   int ndim, const int64 *shape, const void *data, Size nbytes, MemoryContext cxt)
{
	memset(out, 0, sizeof(*out));
	out->name = MemoryContextStrdup(cxt, name);
	strlcpy(out->dtype, dtype, sizeof(out->dtype));
	out->ndim = ndim;
	memcpy(out->shape, shape, sizeof(int64) * ndim);
	out->nbytes = nbytes;
	out->data = MemoryContextAllocExtended(cxt, nbytes ? nbytes : 1, MCXT_ALLOC_HUGE);
	memcpy((char *) out->data, data, nbytes);
}


PG_FUNCTION_INFO_V1(quantize_model);
Datum
quantize_model(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *new_name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *dtype = text_to_cstring(PG_GETARG_TEXT_PP(2));
	MemoryContext caller = CurrentMemoryContext;
	StoredTensor *src,
			   *dst;
	int			n,
				nout = 0;
	int64		params = 0;
	Size		hlen;
	char	   *header;
	ModelImport mi;
	int			level;

	if (pg_strcasecmp(dtype, "int8") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unsupported quantization dtype \"%s\"", dtype),
				 errhint("The supported dtype is int8.")));
	CheckModelName(new_name);
	if (strcmp(name, new_name) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the quantized copy of model \"%s\" needs a name of its own", name),
				 errdetail("quantize_model() stores the copy beside the original.")));
	RequireExtensionVersion020();

	level = ExtSpiConnect();
	ReadModelImport(name, caller, &mi);
	n = ReadModelTensors(name, &src, false);
	dst = MemoryContextAllocZero(caller, sizeof(StoredTensor) * (2 * n + 1));
	for (int i = 0; i < n; i++)
	{
		StoredTensor *t = &src[i];
		Size		numel = TensorNumel(t);
		float	   *f;

		CHECK_FOR_INTERRUPTS();
		params += numel;
		if (strcmp(t->dtype, "I8") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("model \"%s\" is already quantized", name),
					 errdetail("Tensor \"%s\" is int8.", t->name)));
		f = tensor_floats(t, numel);
		if (IsWeightMatrix(t))
		{
			Size		rows = t->shape[0],
						cols = t->shape[1];
			int8_t	   *q = palloc_extended(numel ? numel : 1, MCXT_ALLOC_HUGE);
			float	   *scale = palloc(sizeof(float) * rows);
			int64		sshape[1] = {(int64) rows};

			if (cols > TF_INT8_MAX_IN)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("matrix \"%s\" has %zu input columns; int8 supports at most %d",
								t->name, cols, TF_INT8_MAX_IN)));
			tf_quantize_rows(rows, cols, q, scale, f);
			new_tensor(&dst[nout++], t, t->name, "I8", t->ndim, t->shape, q, numel, caller);
			new_tensor(&dst[nout++], t, psprintf("%s_scale", t->name), "F32", 1, sshape,
					   scale, sizeof(float) * rows, caller);
			pfree(q);
			pfree(scale);
		}
		else
			new_tensor(&dst[nout++], t, t->name, "F32", t->ndim, t->shape, f,
					   sizeof(float) * numel, caller);
		pfree(f);
	}
	ExtSpiFinish(level);
	MemoryContextSwitchTo(caller);

	header = SafetensorsHeaderFor(dst, nout, "{\"format\":\"pt\",\"quantization\":\"int8 per output row, symmetric, fp32 scales in <name>_scale\"}", &hlen);
	mi.header = header;
	mi.hlen = hlen;
	mi.tensors = dst;
	mi.ntensors = nout;
	(void) StoreModel(new_name, &mi);
	PG_RETURN_INT64(params);
}
