/*
 * sql_version.c
 *		transformer_version(): what this server runs, for bug reports and
 *		benchmark notes: the library's version, the kernels chosen at run
 *		time for this CPU, and the libraries it is linked with.
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"

#include <libxml/xmlversion.h>
#include <unicode/uversion.h>

#include "tensor_ops.h"
#include "threads.h"

/* OpenBLAS's own report of itself (cblas.h declares it, but not on every distribution) */
extern char *openblas_get_config(void);
extern char *openblas_get_corename(void);

PG_FUNCTION_INFO_V1(transformer_version);
Datum
transformer_version(PG_FUNCTION_ARGS)
{
	/* (re-choosing the best kernels picks the same ones the decoder uses) */
	const char *fp32 = tf_gemm_kernels(-1);
	const char *int8 = tf_int8_kernels(-1);
	char		icu[U_MAX_VERSION_STRING_LENGTH];
	UVersionInfo v;

	u_getVersion(v);
	u_versionToString(v, icu);
	PG_RETURN_TEXT_P(cstring_to_text(psprintf("transformer %s; kernels: fp32 %s, int8 %s; threads per call: %d; BLAS: %s (core %s); ICU %s; libxml2 %s",
											  TRANSFORMER_EXTVERSION, fp32, int8, tf_threads(), openblas_get_config(),
											  openblas_get_corename(), icu, LIBXML_DOTTED_VERSION)));
}
