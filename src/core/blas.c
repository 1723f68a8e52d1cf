/*
 * blas.c
 *		OpenBLAS, loaded when a product first needs it (see blas.h), and the
 *		choice of its kernels.  No postgres.h.
 *
 * OpenBLAS.  Debian's is a DYNAMIC_ARCH build: at load it picks kernels by
 * CPU model (its "core"), and a model newer than the library falls back to
 * the generic SSE3 "Prescott" kernels, several times slower.  In that case,
 * and unless the user chose with OPENBLAS_CORETYPE, we choose by CPU
 * features.  An explicit transformer.cpu_kernels level holds OpenBLAS to a
 * core of that level too: the library's own choice if it is one, else
 * SkylakeX (avx512), Haswell (avx2) or Prescott (portable); it overrides
 * OPENBLAS_CORETYPE.
 *
 * The core is changed by setting OPENBLAS_CORETYPE and initialising the
 * library's dispatch again (gotoblas_dynamic_quit, which only forgets the
 * table of kernels, then gotoblas_dynamic_init, which reads the variable).
 * That is safe while no BLAS call is under way in the process: OpenBLAS's
 * threads and ours run a product only within one call from the thread that
 * changes it.  A build without those two functions simply keeps its core.
 */
#include "blas.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* the library's functions, once loaded (NULL: not loaded, or it has not that one) */
static struct
{
	__typeof__(&cblas_sgemm) sgemm;
	char	   *(*get_corename) (void);
	char	   *(*get_config) (void);
	void		(*set_num_threads) (int);
	void		(*dynamic_init) (void);
	void		(*dynamic_quit) (void);
}			blas;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static bool loaded;				/* set once, by load() */
static char load_error[200];

/* what was asked before the library was loaded: applied when it loads */
static int	wanted_threads = 1;
static int	wanted_level = -1;
static int	best_level = -1;		/* -1: not known, OpenBLAS's own choice stands */

/* the library's own choice, before we changed anything, and the user's OPENBLAS_CORETYPE */
static char blas_own[32];
static bool blas_user_chose;

/* the level of an OpenBLAS core's kernels: 2 AVX-512, 1 AVX2, 0 SSE3; -1 another */
static int
blas_core_level(const char *core)
{
	static const struct
	{
		const char *name;
		int			level;
	}			cores[] = {
		{"SkylakeX", 2}, {"Cooperlake", 2}, {"SapphireRapids", 2},
		{"Haswell", 1}, {"Zen", 1},
		{"Prescott", 0}
	};

	for (size_t i = 0; core && i < sizeof(cores) / sizeof(cores[0]); i++)
		if (strcasecmp(core, cores[i].name) == 0)
			return cores[i].level;
	return -1;
}

/* Hold the loaded OpenBLAS to level (-1: its own choice, mended). */
static void
blas_core(int level)
{
	static const char *const by_level[] = {"Prescott", "Haswell", "SkylakeX"};
	const char *core = blas.get_corename ? blas.get_corename() : NULL;
	const char *want;

	if (blas.dynamic_init == NULL || blas.dynamic_quit == NULL || core == NULL)
		return;
	if (blas_own[0] == '\0')
	{
		strncpy(blas_own, core, sizeof(blas_own) - 1);
		blas_user_chose = getenv("OPENBLAS_CORETYPE") != NULL;
	}

	if (level >= 0)
		want = blas_core_level(blas_own) == level ? blas_own : by_level[level];
	else if (blas_user_chose || strcasecmp(blas_own, "prescott") != 0 || best_level < 0)
		want = blas_own;
	else
		want = by_level[best_level];	/* the library does not know this CPU */

	if (strcasecmp(core, want) == 0)
		return;
	setenv("OPENBLAS_CORETYPE", want, 1);
	blas.dynamic_quit();
	blas.dynamic_init();
}

/* pthread_once: the first product may come from any of our threads */
static void
load(void)
{
	void	   *h = dlopen(TF_BLAS_LIBRARY, RTLD_NOW | RTLD_LOCAL);

	if (h == NULL)
	{
		const char *why = dlerror();

		snprintf(load_error, sizeof(load_error), "%s", why ? why : TF_BLAS_LIBRARY " cannot be opened");
		return;
	}
	blas.sgemm = (__typeof__(blas.sgemm)) dlsym(h, "cblas_sgemm");
	if (blas.sgemm == NULL)
	{
		snprintf(load_error, sizeof(load_error), "%s has no cblas_sgemm", TF_BLAS_LIBRARY);
		return;
	}
	blas.get_corename = (char *(*) (void)) dlsym(h, "openblas_get_corename");
	blas.get_config = (char *(*) (void)) dlsym(h, "openblas_get_config");
	blas.set_num_threads = (void (*) (int)) dlsym(h, "openblas_set_num_threads");
	blas.dynamic_init = (void (*) (void)) dlsym(h, "gotoblas_dynamic_init");
	blas.dynamic_quit = (void (*) (void)) dlsym(h, "gotoblas_dynamic_quit");
	blas_core(wanted_level);
	if (blas.set_num_threads)
		blas.set_num_threads(wanted_threads);
	loaded = true;
}

static bool
ensure_loaded(void)
{
	pthread_once(&load_once, load);
	return loaded;
}

bool
tf_blas_sgemm(int m, int n, int k, float *out, int ldo,
			  const float *a, int lda, const float *b, int ldb,
			  bool trans_b, float alpha, float beta)
{
	if (!ensure_loaded())
		return false;
	blas.sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
			   m, n, k, alpha, a, lda, b, ldb, beta, out, ldo);
	return true;
}

bool
tf_blas_sgemm_tn(int m, int n, int k, float *out, int ldo,
				 const float *a, int lda, const float *b, int ldb,
				 float alpha, float beta)
{
	if (!ensure_loaded())
		return false;
	blas.sgemm(CblasRowMajor, CblasTrans, CblasNoTrans,
			   m, n, k, alpha, a, lda, b, ldb, beta, out, ldo);
	return true;
}

const char *
tf_blas_load(void)
{
	return ensure_loaded() && blas.get_corename ? blas.get_corename() : NULL;
}

void
tf_set_blas_threads(int nthreads)
{
	wanted_threads = nthreads;
	if (loaded && blas.set_num_threads)
		blas.set_num_threads(nthreads);
}

void
tf_blas_hold(int level, int best)
{
	wanted_level = level;
	best_level = best > 2 ? 2 : best;
	if (loaded)
		blas_core(level);
}

bool
tf_blas_loaded(void)
{
	return loaded;
}

const char *
tf_blas_config(void)
{
	static char msg[256];

	if (ensure_loaded())
		return blas.get_config ? blas.get_config() : TF_BLAS_LIBRARY;
	snprintf(msg, sizeof(msg), "not available (%s)", load_error);
	return msg;
}

const char *
tf_blas_corename(void)
{
	return ensure_loaded() && blas.get_corename ? blas.get_corename() : "none";
}
