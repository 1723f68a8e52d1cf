/*
 * sql_version.c
 *		transformer_version(): what this server runs, for bug reports and
 *		benchmark notes: the library's version, the kernels chosen at run
 *		time for this CPU (or held by transformer.cpu_kernels), and the
 *		libraries it is linked with.
 */
#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include <libxml/xmlversion.h>
#include <unicode/uversion.h>

#include "blas.h"
#include "tensor_ops.h"
#include "threads.h"


PG_FUNCTION_INFO_V1(transformer_version);
Datum
transformer_version(PG_FUNCTION_ARGS)
{
	StringInfoData kernels;
	char		icu[U_MAX_VERSION_STRING_LENGTH];
	UVersionInfo v;

	/* each family's kernels as its function pointers stand (tf_kernel_family) */
	initStringInfo(&kernels);
	for (int f = 0; f < TF_KERNEL_FAMILIES; f++)
		appendStringInfo(&kernels, "%s%s %s", f ? ", " : "", tf_kernel_family_name(f), tf_kernel_family(f));
	u_getVersion(v);
	u_versionToString(v, icu);
	PG_RETURN_TEXT_P(cstring_to_text(psprintf("transformer %s; kernels: %s (transformer.cpu_kernels %s); threads per call: %d; BLAS: %s (core %s); ICU %s; libxml2 %s",
											  TRANSFORMER_EXTVERSION, kernels.data,
											  GetConfigOption("transformer.cpu_kernels", false, false),
											  tf_threads(), tf_blas_config(),
											  tf_blas_corename(), icu, LIBXML_DOTTED_VERSION)));
}
