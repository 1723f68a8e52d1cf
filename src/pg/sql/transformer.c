/*
 * transformer.c
 *		Module entry: PG_MODULE_MAGIC and the transformer.* settings.
 */
#include "postgres.h"

#include <unistd.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "blas.h"
#include "tensor_ops.h"
#include "threads.h"
#include "model_store.h"
#include "tokenizer.h"
#include "input_limit.h"
#include "weight_cache.h"
#include "decode_workspace.h"
#include "translate.h"
#include "jobs.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

extern char *transformer_default_model;

/*
 * transformer.threads: threads one call of this backend uses for its
 * products (threads.c's pool and OpenBLAS), at most transformer.max_threads
 */
static int	call_threads = 1;
static int	max_threads = 1;

/*
 * transformer.cpu_kernels: the level every kernel family is held to
 * (tf_cpu_kernels), TF_LEVEL_AUTO the best this CPU has
 */
static int	cpu_kernels = TF_LEVEL_AUTO;

static const struct config_enum_entry cpu_kernels_options[] = {
	{"auto", TF_LEVEL_AUTO, false},
	{"avx512", TF_LEVEL_AVX512, false},
	{"avx2", TF_LEVEL_AVX2, false},
	{"portable", TF_LEVEL_PORTABLE, false},
	{NULL, 0, false}
};

static bool
check_cpu_kernels(int *newval, void **extra, GucSource source)
{
	if (tf_cpu_level(*newval) >= 0)
		return true;
	/* SET fails with 22023 (invalid_parameter_value), as for any value refused */
	GUC_check_errmsg("this CPU has no %s", *newval == TF_LEVEL_AVX512 ? "AVX-512" : "AVX2");
	GUC_check_errdetail(*newval == TF_LEVEL_AVX512 ?
						"transformer.cpu_kernels = avx512 needs avx512f, avx512bw, avx512dq, avx512vl, avx512cd and FMA." :
						"transformer.cpu_kernels = avx2 needs AVX2 and FMA.");
	GUC_check_errhint("The best level this CPU has is \"%s\"; \"auto\" chooses it.",
					  tf_cpu_level(TF_LEVEL_AUTO) == TF_LEVEL_AVX512 ? "avx512" :
					  tf_cpu_level(TF_LEVEL_AUTO) == TF_LEVEL_AVX2 ? "avx2" : "portable");
	return false;
}

static void
assign_cpu_kernels(int newval, void *extra)
{
	/* the check hook let through only levels this CPU has: this cannot fail */
	(void) tf_cpu_kernels(newval);
}

/* The SentencePiece core's long loops honour cancel and statement_timeout. */
static void
check_interrupts(void)
{
	CHECK_FOR_INTERRUPTS();
}

/* whether CHECK_FOR_INTERRUPTS() would throw now: a cancel, a timeout or a termination */
static bool
interrupts_pending(void)
{
	return InterruptPending && (QueryCancelPending || ProcDiePending) && INTERRUPTS_CAN_BE_PROCESSED();
}

/* the threads in effect: the lower of the two settings */
static void
apply_threads(int threads, int max)
{
	int			n = threads < max ? threads : max;

	tf_threads_set(n);
	tf_set_blas_threads(n);
}

static void
assign_threads(int newval, void *extra)
{
	apply_threads(newval, max_threads);
}

static void
assign_max_threads(int newval, void *extra)
{
	apply_threads(call_threads, newval);
}

void
_PG_init(void)
{
	{
		long		cpus = sysconf(_SC_NPROCESSORS_ONLN);

		max_threads = cpus < 1 ? 1 : cpus > TF_MAX_THREADS ? TF_MAX_THREADS : (int) cpus;
	}
	DefineCustomIntVariable("transformer.max_threads",
							"Sets the most threads one call of a backend may use.",
							"transformer.threads is capped by this; the default is the number of CPUs.",
							&max_threads,
							max_threads, 1, TF_MAX_THREADS,
							PGC_SUSET,
							0,
							NULL, assign_max_threads, NULL);

	DefineCustomIntVariable("transformer.threads",
							"Sets the number of threads one call uses for its matrix products.",
							"PostgreSQL runs queries in parallel by process, so the default is 1; raise it "
							"to translate one long document on idle cores (capped by transformer.max_threads).",
							&call_threads,
							1, 1, TF_MAX_THREADS,
							PGC_USERSET,
							0,
							NULL, assign_threads, NULL);

	DefineCustomEnumVariable("transformer.cpu_kernels",
							 "Holds every kernel family to one level of CPU instructions.",
							 "auto runs the best this CPU has; avx512, avx2 and portable hold the fp32 and int8 "
							 "products, softmax, norms, activations and OpenBLAS's core to that level, for "
							 "comparisons and bug reports.",
							 &cpu_kernels,
							 TF_LEVEL_AUTO, cpu_kernels_options,
							 PGC_SUSET,
							 0,
							 check_cpu_kernels, assign_cpu_kernels, NULL);

	DefineCustomBoolVariable("transformer.greedy_screen",
							 "Lets greedy decoding read an fp32 output layer in bf16 first.",
							 "The tokens are the same either way: each logit is bounded, and the few tokens that "
							 "could win are computed in fp32 (see the manual's performance chapter); off reads "
							 "the whole fp32 layer at every step, for comparisons.",
							 &tf_greedy_screen,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("transformer.default_model",
							   "Sets the model that translate(input) uses.",
							   NULL,
							   &transformer_default_model,
							   "",
							   PGC_USERSET,
							   0,
							   NULL, NULL, NULL);

	DefineCustomRealVariable("transformer.max_length_factor",
							 "Caps translations at this many times the source tokens, against runaway output.",
							 "Applies when neither max_length nor max_new_tokens is given in the call; "
							 "0 leaves the model's max_length alone, as Hugging Face's generate() does.",
							 &transformer_max_length_factor,
							 3.0, 0.0, 1000.0,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("transformer.tensor_part_size",
							"Sets the most bytes of a tensor one row of transformer_tensors holds.",
							"A larger tensor is stored in several rows (part 0, 1, ...), so an import holds "
							"one part of it in memory, never the whole tensor.",
							&tensor_part_kb,
							64 * 1024, 1, 512 * 1024,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("transformer.decode_workspace",
							"Sets the most memory a backend keeps for decoding between calls.",
							"Decoding's buffers (key/value caches, logits) up to this size are reused by the "
							"next call instead of being allocated and faulted in again; 0 keeps none.",
							&decode_workspace_kb,
							512 * 1024, 0, 1024 * 1023,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("transformer.job_naptime",
							"Sets how often a database's job supervisor looks at its jobs' queues.",
							"A transaction that queues rows wakes the supervisor at once; this is the longest it sleeps.",
							&job_naptime_ms,
							250, 10, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("transformer.checkpoint_interval",
							"Sets how often a fine_tune() job saves its state.",
							"A job resumes from its last saved state after a restart or a crash; it also saves when "
							"it is paused, at each checkpoint it averages, and before it stores the new model.",
							&train_checkpoint_interval,
							300, 1, 24 * 3600,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("transformer.max_job_workers",
							"Sets the most background job workers of the cluster at once.",
							"Shared fairly between the roles whose jobs have rows queued; supervisors (one per "
							"database with unfinished jobs) are not counted.",
							&max_job_workers,
							2, 1, 64,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);

	/* resume unfinished jobs at every server start */
	if (process_shared_preload_libraries_in_progress)
		RegisterJobLauncher();
	InitModelStats();

	InitWeightCache();
	InitInputLimit();

	spm_interrupt_hook = check_interrupts;
	spm_interrupt_pending = interrupts_pending;
	InitTokenizerCache();
	InitModelCache();
	InitDecodeWorkspace();
	/* after every setting is defined: a placeholder of one defined later would be dropped */
	MarkGUCPrefixReserved("transformer");
	apply_threads(call_threads, max_threads);

	/* the first use of the library in a database after a server start: its jobs' supervisor */
	MaybeResumeJobs();
	model_use_hook = MaybeResumeJobs;
}
