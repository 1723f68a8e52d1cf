/*
 * pathological.c
 *		The core's text passes on pathological shapes of text, outside the
 *		server (make pathological): sentence segmentation (segment.c),
 *		13a tokenization (metrics.c), SentencePiece normalize + encode
 *		(spm_normalize.c, spm_encode.c) with a unigram and a BPE model.
 *
 * For each shape at 1 MB and 4 MB (16 MB for the segmenter) it checks
 *   (a) time: ns per input byte under a bound per function, and per-byte
 *       time at 4 MB (16 MB) at most RATIO_MAX times that at 1 MB (4 MB):
 *       linear is 1, quadratic 4;
 *   (b) cancel latency: spm_interrupt_hook records when it is called; the
 *       longest wait without a call (from the start to the first call,
 *       between calls, from the last call to the end) is under GAP_MAX_MS.
 * A call that runs past CALL_CAP_S is cancelled as the server would: the
 * hook longjmps out (the segmenter's break iterator is reused afterwards,
 * and a cancelled segmentation is checked to leave no trace).
 *
 * usage: pathological [MODEL_DIR_ROOT]   (the repository, default ".")
 *
 * Measured on AMD EPYC (2 cores, Debian 12, ICU 72; gcc -O2), the review's
 * shape repeat('a', N - 4096) || repeat('x?', 2048) and the worst shapes:
 *
 *   before (segment.c of 447ee52, every 1,024 boundaries, quadratic word scan)
 *     review     1 MB  segment   see bench/README.md ("Pathological text")
 *   after: see bench/README.md.
 */
#include <malloc.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics.h"
#include "segment.h"
#include "spm.h"
#include "fuzz_arena.h"

#define MB ((size_t) 1 << 20)
#define GAP_MAX_MS 50.0
#define RATIO_MAX 2.5
#define CALL_CAP_S 10.0

/* ------------------------------------------------------------ the hook */

static double t_last;			/* the last call (or the start) */
static double gap_max;			/* seconds */
static long ncalls;
static double deadline;			/* cancel past this (0: never) */
static jmp_buf cancel_jb;

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void
hook(void)
{
	double		t = now();

	if (t - t_last > gap_max)
		gap_max = t - t_last;
	t_last = t;
	ncalls++;
	if (deadline > 0 && t > deadline)
		longjmp(cancel_jb, 1);
}

/* ------------------------------------------------------------- shapes */

static uint64_t rng = 0x9E3779B97F4A7C15ULL;

static uint32_t
rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t) (rng >> 11);
}

static size_t
put_utf8(char *o, uint32_t c)
{
	if (c < 0x80)
		return o[0] = (char) c, 1;
	if (c < 0x800)
		return o[0] = (char) (0xC0 | c >> 6), o[1] = (char) (0x80 | (c & 0x3F)), 2;
	if (c < 0x10000)
		return o[0] = (char) (0xE0 | c >> 12), o[1] = (char) (0x80 | ((c >> 6) & 0x3F)),
			o[2] = (char) (0x80 | (c & 0x3F)), 3;
	return o[0] = (char) (0xF0 | c >> 18), o[1] = (char) (0x80 | ((c >> 12) & 0x3F)),
		o[2] = (char) (0x80 | ((c >> 6) & 0x3F)), o[3] = (char) (0x80 | (c & 0x3F)), 4;
}

/* unit repeated while it fits in size bytes */
static size_t
repeat(char *o, size_t size, const char *unit)
{
	size_t		ul = strlen(unit),
				n = 0;

	while (n + ul <= size)
		memcpy(o + n, unit, ul), n += ul;
	return n;
}

typedef struct Shape
{
	const char *name;
	const char *unit;			/* repeated; NULL: generated */
} Shape;

static const Shape shapes[] = {
	{"review", NULL},			/* repeat('a', N - 4096) || repeat('x?', 2048) */
	{"endless_word", "Donaudampfschifffahrtsgesellschaft"},
	{"x?", "x?"},
	{"abbrev", "z. "},
	{"no_spaces", "Ein.Mann?F\xC3\xA4hrt!Rad,3.5-4;"},
	{"cjk", "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE6\x96\x87\xE7\xAB\xA0\xE3\x81\xA7\xE3\x81\x99\xE3\x80\x82"},
	{"combining", "a\xCC\x81\xCC\x88\xCC\xA3"},
	{"rtl", "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 \xD8\xA8\xD8\xA7\xD9\x84\xD8\xB9\xD8\xA7\xD9\x84\xD9\x85\xD8\x9F \xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D. "},
	{"emoji", "\xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD"},
	{"binary", NULL},			/* random bytes made valid UTF-8, no NUL */
	{"newlines", "\n"},
	{"spaces", " "},
	{"entities", "&amp;&quot;<skipped>-\n"},
};
#define NSHAPES ((int) (sizeof(shapes) / sizeof(shapes[0])))

static size_t
make_shape(const Shape *sh, char *o, size_t size)
{
	size_t		n = 0;

	if (sh->unit)
		return repeat(o, size, sh->unit);
	if (strcmp(sh->name, "review") == 0)
	{
		memset(o, 'a', size - 4096);
		return size - 4096 + repeat(o + size - 4096, 4096, "x?");
	}
	/* binary: bytes 1..0x7F as they are, others the start of a code point */
	rng = 0x9E3779B97F4A7C15ULL;
	while (n + 4 <= size)
	{
		uint32_t	r = rnd();
		uint32_t	b = r & 0xFF;

		if (b > 0 && b < 0x80)
			o[n++] = (char) b;
		else
		{
			uint32_t	c = (r >> 8) % 0x110000;

			if (c == 0 || (c >= 0xD800 && c < 0xE000))
				c = 0xFFFD;
			n += put_utf8(o + n, c);
		}
	}
	return n;
}

/* ---------------------------------------------------------- functions */

static SpmModel *models[2];
static const char *model_paths[2] = {"models/multi30k_de_en/source.spm", "test/fixtures/spm/tiny_bpe_bytes.model"};

enum
{
	F_SEGMENT, F_13A, F_SPM_UNIGRAM, F_SPM_BPE, F_BLEU, F_CHRF, NFUNCS
};
static const char *fnames[NFUNCS] = {"segment", "tokenize_13a", "spm_unigram", "spm_bpe", "bleu", "chrf"};
/* ns per input byte: 5x over the worst measured (bench/README.md); the metrics per byte of hypothesis and reference */
static const double ns_max[NFUNCS] = {1500, 500, 750, 750, 1500, 2500};

/*
 * Zeroed memory as the server's palloc0 gives it (PATHOLOGICAL_ZERO=1):
 * written, not left to calloc's fresh pages, so that zeroing counts in the
 * gaps as it does there.  Not the default: one memset of a big buffer is
 * no loop of ours, and its time is the machine's page faults.
 */
static bool zero_like_palloc0;

static void *
zalloc(void *ctx, size_t size)
{
	Arena	   *a = ctx;
	void	   *p = arena_alloc(ctx, 0);

	free(p);
	if (size > ((size_t) 1 << 30) - 1)
		abort();				/* MaxAllocSize: an ERROR in the server */
	p = malloc(size ? size : 1);
	if (p == NULL)
		abort();
	memset(p, 0, size);
	a->ptrs[a->n - 1] = p;
	return p;
}

/* Run f on s; false if cancelled at the deadline. */
static bool
run(int f, const char *s, size_t len, Arena *arena, size_t *result)
{
	SpmAlloc	a = {zero_like_palloc0 ? zalloc : arena_alloc, arena};
	char		err[256];

	if (setjmp(cancel_jb))
		return false;
	switch (f)
	{
		case F_SEGMENT:
			{
				size_t	   *b;
				int			n = tf_sentence_bounds(s, len, "de", &a, &b, err, sizeof(err));

				if (n < 0)
				{
					fprintf(stderr, "segment: %s\n", err);
					exit(2);
				}
				*result = (size_t) n;
				break;
			}
		case F_13A:
			tf_tokenize_13a(s, len, &a, result);
			break;
		case F_BLEU:
		case F_CHRF:
			{
				/* the text against itself: every n-gram matches, the tables hold them all */
				double		stats[TF_CHRF_STATS] = {0};

				if (f == F_BLEU)
					tf_bleu_add(stats, s, len, s, len, &a);
				else
					tf_chrf_add(stats, s, len, s, len, &a);
				*result = (size_t) stats[0];
				break;
			}
		default:
			{
				SpmEncoding enc;

				if (!spm_encode(models[f - F_SPM_UNIGRAM], s, len, &a, &enc))
				{
					fprintf(stderr, "spm_encode: too long\n");
					exit(2);
				}
				*result = (size_t) enc.ntokens;
			}
	}
	return true;
}

static void *
xalloc(void *ctx, size_t n)
{
	return arena_alloc(ctx, n);
}

static SpmModel *
load_model(const char *root, const char *path, Arena *arena)
{
	char		full[4096];
	FILE	   *fp;
	char	   *data;
	long		n;
	char		err[256];
	SpmAlloc	a = {xalloc, arena};
	SpmModel   *m;

	snprintf(full, sizeof(full), "%s/%s", root, path);
	fp = fopen(full, "rb");
	if (!fp)
	{
		perror(full);
		exit(2);
	}
	fseek(fp, 0, SEEK_END);
	n = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	data = malloc((size_t) n);
	if (!data || fread(data, 1, (size_t) n, fp) != (size_t) n)
		exit(2);
	fclose(fp);
	m = spm_load(data, (size_t) n, &a, err, sizeof(err));
	free(data);
	if (!m)
	{
		fprintf(stderr, "%s: %s\n", full, err);
		exit(2);
	}
	return m;
}

int
main(int argc, char **argv)
{
	const char *root = argc > 1 ? argv[1] : ".";
	const char *only = getenv("PATHOLOGICAL_ONLY");	/* a shape's name */
	Arena		marena = {0};
	char	   *buf = malloc(16 * MB);
	int			failures = 0;
	double		t_all = now();

	models[0] = load_model(root, model_paths[0], &marena);
	models[1] = load_model(root, model_paths[1], &marena);
	if (models[0]->model_type != SPM_UNIGRAM || models[1]->model_type != SPM_BPE)
	{
		fprintf(stderr, "unexpected model types\n");
		return 2;
	}
	spm_interrupt_hook = hook;
	zero_like_palloc0 = getenv("PATHOLOGICAL_ZERO") && strcmp(getenv("PATHOLOGICAL_ZERO"), "1") == 0;
	/*
	 * Freed memory stays with the process (no mmap, no trim), so that every
	 * run but the first finds its memory mapped: page faults, slow on a
	 * virtual machine, would otherwise make the time of a run the kernel's.
	 */
	mallopt(M_MMAP_MAX, 0);
	mallopt(M_TRIM_THRESHOLD, INT32_MAX);
	{
		/* and the most any run uses mapped from the start */
		char	   *warm = malloc((size_t) 1200 * MB);

		if (warm)
		{
			memset(warm, 1, (size_t) 1200 * MB);
			free(warm);
		}
	}

	/* a cancelled segmentation leaves nothing behind: the same bounds after it */
	{
		Arena		a1 = {0},
					a2 = {0};
		size_t		len = make_shape(&shapes[4], buf, 4 * MB);
		size_t		n1 = 0,
					n2 = 0;

		deadline = now() + 0.005;
		t_last = now();
		if (run(F_SEGMENT, buf, len, &a1, &n1))
		{
			printf("FAIL cancel: a segmentation of 4 MB not cancelled after 5 ms\n");
			failures++;
		}
		arena_free(&a1);
		deadline = now() + CALL_CAP_S;
		run(F_SEGMENT, buf, 4096, &a2, &n1);	/* a shorter text next: no stale state */
		arena_free(&a2);
		memset(&a2, 0, sizeof(a2));
		if (!run(F_SEGMENT, buf, len, &a2, &n1))
			n1 = 0;
		arena_free(&a2);
		memset(&a2, 0, sizeof(a2));
		deadline = now() + CALL_CAP_S;
		if (!run(F_SEGMENT, buf, len, &a2, &n2))
			n2 = 0;
		arena_free(&a2);
		deadline = 0;
		if (n1 != n2 || n1 < 1000)
		{
			printf("FAIL cancel: %zu then %zu sentences after a cancelled segmentation\n", n1, n2);
			failures++;
		}
	}

	printf("%-13s %6s %-13s %10s %9s %8s %12s\n", "shape", "size", "function", "ns/byte", "ms", "max gap", "result");
	for (int si = 0; si < NSHAPES; si++)
	{
		const Shape *sh = &shapes[si];

		if (only && strcmp(only, sh->name) != 0)
			continue;
		for (int f = 0; f < NFUNCS; f++)
		{
			double		prev_nspb = 0;

			for (size_t size = MB; size <= 16 * MB; size *= 4)
			{
				size_t		len = make_shape(sh, buf, size);
				size_t		result = 0;
				double		nspb = 1e300,
							ms = 0,
							gap = 1e300;
				const char *why = NULL;

				if (size == 16 * MB && f != F_SEGMENT)
					break;		/* SPM_MAX_NORMALIZED_BYTES; 13a: enough at 4 MB */
				/* the metrics (slowest per byte) at 4 MB on the two shapes of one endless item */
				if (size > MB && (f == F_BLEU || f == F_CHRF) && si > 1)
					break;

				/*
				 * Up to 3 runs while one fails, the least time and gap kept:
				 * a slow run of a shared machine is not the code's.
				 */
				for (int attempt = 0; attempt < 3; attempt++)
				{
					Arena		arena = {0};
					double		t0,
								t1;
					bool		done;

					gap_max = 0;
					ncalls = 0;
					t0 = t_last = now();
					deadline = t0 + CALL_CAP_S;
					done = run(f, buf, len, &arena, &result);
					t1 = now();
					deadline = 0;
					if (t1 - t_last > gap_max)
						gap_max = t1 - t_last;
					arena_free(&arena);
					if ((t1 - t0) * 1e9 / (double) len < nspb)
						nspb = (t1 - t0) * 1e9 / (double) len, ms = (t1 - t0) * 1e3;
					if (gap_max < gap)
						gap = gap_max;
					why = NULL;
					if (!done)
						why = "cancelled: ran past the cap";
					else if (nspb > ns_max[f])
						why = "too slow per byte";
					else if (prev_nspb > 0 && nspb > RATIO_MAX * prev_nspb && ms > 50)
						why = "superlinear: per-byte time grows";
					else if (gap * 1e3 > GAP_MAX_MS)
						why = "interrupt gap too long";
					if (!why || !done)
						break;
				}
				printf("%-13s %4zuMB %-13s %10.1f %9.1f %6.1fms %12zu%s%s\n", sh->name, size / MB, fnames[f],
					   nspb, ms, gap * 1e3, result, why ? "  FAIL " : "", why ? why : "");
				fflush(stdout);
				if (why)
				{
					failures++;
					break;		/* the next size would only take longer */
				}
				prev_nspb = nspb;
			}
		}
	}
	printf("%s: %d failures in %.1f s (bounds: ns/byte %.0f segment, %.0f 13a, %.0f spm; "
		   "growth x%.1f; gap %.0f ms)\n", failures ? "FAIL" : "ok", failures, now() - t_all,
		   ns_max[F_SEGMENT], ns_max[F_13A], ns_max[F_SPM_UNIGRAM], RATIO_MAX, GAP_MAX_MS);
	arena_free(&marena);
	return failures ? 1 : 0;
}
