/*
 * metrics_memory.c
 *		Peak memory and time of tf_bleu_add and tf_chrf_add on one big
 *		sentence pair (issue 23), outside the server: each case runs in a
 *		fresh child process, whose peak RSS (VmHWM, reset just before the
 *		call) less its RSS before the call is what the metric used.  The
 *		allocator is malloc + memset, as palloc0 touches what it gives.
 *
 *   make bench-metrics-memory [BENCH_METRICS_ARGS="1 10 40"]
 *   bench/metrics_memory [-k multi30k,zipf,distinct] [-m bleu,chrf] MB...
 *
 * Texts (hypothesis and a different reference, each MB * 2^20 bytes):
 *   multi30k  lines of ../shared/data/multi30k/train.en.gz, the reference
 *             in another order: realistic, repetitive past ~2 MB
 *   zipf      words of a 50,000-word vocabulary (random letters) drawn
 *             Zipf-distributed, sentences of 5 to 25 words with a period
 *   distinct  random lowercase letters in words of 1 to 10: (nearly) every
 *             character 6-gram and word 4-gram distinct, the worst case
 *
 * Compare with the code of another revision by building against its
 * metrics.c:
 *   git show main:src/core/metrics.c > /tmp/metrics_main.c
 *   make -B bench-metrics-memory METRICS_SRC=/tmp/metrics_main.c
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"

#define MULTI30K "../shared/data/multi30k/train.en.gz"

/* ------------------------------------------------------------ allocator */

static size_t allocated;

static void *
bench_alloc(void *ctx, size_t size)
{
	void	   *p;

	(void) ctx;
	if (size > ((size_t) 1 << 40))
	{
		fprintf(stderr, "allocation of %zu bytes refused\n", size);
		exit(3);
	}
	p = malloc(size ? size : 1);
	if (p == NULL)
	{
		fprintf(stderr, "out of memory (%zu bytes)\n", size);
		exit(3);
	}
	memset(p, 0, size);			/* as palloc0: every page touched */
	allocated += size;
	return p;					/* never freed: the child exits */
}

/* ------------------------------------------------------------ /proc */

static long
status_kb(const char *key)
{
	FILE	   *f = fopen("/proc/self/status", "r");
	char		line[256];
	long		v = -1;
	size_t		kl = strlen(key);

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, kl) == 0 && line[kl] == ':')
		{
			v = atol(line + kl + 1);
			break;
		}
	fclose(f);
	return v;
}

/* VmHWM := VmRSS (Linux 4.0+) */
static int
reset_peak(void)
{
	FILE	   *f = fopen("/proc/self/clear_refs", "w");
	int			ok;

	if (!f)
		return 0;
	ok = fputs("5", f) >= 0;
	return fclose(f) == 0 && ok;
}

/* ------------------------------------------------------------ texts */

static unsigned long long rng_state = 0x9E3779B97F4A7C15ULL;

static unsigned long long
rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

typedef struct Lines
{
	char	   *buf;
	char	  **line;
	size_t	   *len;
	size_t		n;
} Lines;

static Lines
read_multi30k(void)
{
	Lines		l = {0};
	FILE	   *p = popen("gzip -dc " MULTI30K, "r");
	size_t		cap = 1 << 22,
				n = 0,
				k;

	if (!p)
	{
		perror(MULTI30K);
		exit(2);
	}
	l.buf = malloc(cap);
	while ((k = fread(l.buf + n, 1, cap - n, p)) > 0)
	{
		n += k;
		if (n == cap)
			l.buf = realloc(l.buf, cap *= 2);
	}
	if (pclose(p) != 0 || n == 0)
	{
		fprintf(stderr, "cannot read %s (run from the repository root)\n", MULTI30K);
		exit(2);
	}
	for (size_t i = 0; i < n; i++)
		l.n += l.buf[i] == '\n';
	l.line = malloc(sizeof(char *) * l.n);
	l.len = malloc(sizeof(size_t) * l.n);
	l.n = 0;
	for (size_t i = 0, s = 0; i < n; i++)
		if (l.buf[i] == '\n')
		{
			l.line[l.n] = l.buf + s;
			l.len[l.n++] = i - s;
			s = i + 1;
		}
	return l;
}

/* size bytes of Multi30k lines joined by spaces, from line first on, every step-th (cyclic) */
static char *
text_multi30k(const Lines *l, size_t size, size_t first, size_t step)
{
	char	   *t = malloc(size + 1);
	size_t		n = 0,
				i = first % l->n;

	while (n < size)
	{
		size_t		k = l->len[i] < size - n ? l->len[i] : size - n;

		memcpy(t + n, l->line[i], k);
		n += k;
		if (n < size)
			t[n++] = ' ';
		i = (i + step) % l->n;
	}
	t[size] = '\0';
	return t;
}

static char **vocab;
static double *zipf_cdf;
#define VOCAB 50000

static void
make_vocab(void)
{
	double		sum = 0;

	vocab = malloc(sizeof(char *) * VOCAB);
	zipf_cdf = malloc(sizeof(double) * VOCAB);
	for (int i = 0; i < VOCAB; i++)
	{
		int			len = 2 + (int) (rng() % 10);

		vocab[i] = malloc(len + 1);
		for (int j = 0; j < len; j++)
			vocab[i][j] = 'a' + (char) (rng() % 26);
		vocab[i][len] = '\0';
		sum += 1.0 / (i + 1);
		zipf_cdf[i] = sum;
	}
	for (int i = 0; i < VOCAB; i++)
		zipf_cdf[i] /= sum;
}

static char *
text_zipf(size_t size)
{
	char	   *t = malloc(size + 1);
	size_t		n = 0;
	int			left = 0;

	while (n < size)
	{
		double		u = (double) (rng() >> 11) / 9007199254740992.0;
		int			lo = 0,
					hi = VOCAB - 1;
		const char *w;

		while (lo < hi)
		{
			int			mid = (lo + hi) / 2;

			if (zipf_cdf[mid] < u)
				lo = mid + 1;
			else
				hi = mid;
		}
		w = vocab[lo];
		for (size_t j = 0; w[j] && n < size; j++)
			t[n++] = w[j];
		if (left-- <= 0)
		{
			if (n < size)
				t[n++] = '.';
			left = 5 + (int) (rng() % 21);
		}
		if (n < size)
			t[n++] = ' ';
	}
	t[size] = '\0';
	return t;
}

static char *
text_distinct(size_t size)
{
	char	   *t = malloc(size + 1);
	size_t		n = 0;

	while (n < size)
	{
		int			len = 1 + (int) (rng() % 10);

		for (int j = 0; j < len && n < size; j++)
			t[n++] = 'a' + (char) (rng() % 26);
		if (n < size)
			t[n++] = ' ';
	}
	t[size] = '\0';
	return t;
}

/* ------------------------------------------------------------ a case */

static void
run_case(const char *kind, const char *metric, double mb, const Lines *l)
{
	size_t		size = (size_t) (mb * 1048576);
	char	   *hyp,
			   *ref;
	double		stats[TF_CHRF_STATS] = {0};
	long		rss0,
				hwm;
	struct timespec t0,
				t1;
	double		score;
	int			n = strcmp(metric, "bleu") == 0 ? TF_BLEU_STATS : TF_CHRF_STATS;

	if (strcmp(kind, "multi30k") == 0)
	{
		hyp = text_multi30k(l, size, 0, 1);
		ref = text_multi30k(l, size, l->n / 2, 7);
	}
	else if (strcmp(kind, "zipf") == 0)
	{
		make_vocab();
		hyp = text_zipf(size);
		ref = text_zipf(size);
	}
	else
	{
		hyp = text_distinct(size);
		ref = text_distinct(size);
	}
	if (!reset_peak())
	{
		fprintf(stderr, "cannot reset VmHWM (/proc/self/clear_refs)\n");
		exit(2);
	}
	rss0 = status_kb("VmRSS");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (n == TF_BLEU_STATS)
		tf_bleu_add(stats, hyp, size, ref, size, &(SpmAlloc) {bench_alloc, NULL});
	else
		tf_chrf_add(stats, hyp, size, ref, size, &(SpmAlloc) {bench_alloc, NULL});
	clock_gettime(CLOCK_MONOTONIC, &t1);
	hwm = status_kb("VmHWM");
	score = n == TF_BLEU_STATS ? tf_bleu_score(stats) : tf_chrf_score(stats);
	printf("| %-8s | %-4s | %5.0f | %9.1f | %7.2f | %9.1f | %7.2f | %8.3f |",
		   kind, metric, mb, (hwm - rss0) / 1024.0, (hwm - rss0) * 1024.0 / (2.0 * size),
		   allocated / 1048576.0, allocated / (2.0 * size),
		   (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	/* the statistics, to compare revisions: a checksum and the score */
	{
		double		sum = 0;

		for (int i = 0; i < n; i++)
			sum += stats[i] * (i + 1);
		printf(" %.6f | %.0f |\n", score, sum);
	}
	fflush(stdout);
}

int
main(int argc, char **argv)
{
	char	   *kinds = strdup("multi30k,zipf,distinct");
	char	   *metrics = strdup("bleu,chrf");
	Lines		l = {0};
	int			opt;

	while ((opt = getopt(argc, argv, "k:m:")) != -1)
	{
		if (opt == 'k')
			kinds = strdup(optarg);
		else if (opt == 'm')
			metrics = strdup(optarg);
		else
		{
			fprintf(stderr, "usage: %s [-k multi30k,zipf,distinct] [-m bleu,chrf] MB...\n", argv[0]);
			return 2;
		}
	}
	if (optind == argc)
	{
		fprintf(stderr, "usage: %s [-k multi30k,zipf,distinct] [-m bleu,chrf] MB...\n", argv[0]);
		return 2;
	}
	if (strstr(kinds, "multi30k"))
		l = read_multi30k();
	printf("peak: VmHWM less VmRSS before the call; B/B: per byte of hypothesis + reference\n\n");
	printf("| text     | what | MB/side | peak MB | peak B/B | alloc MB | alloc B/B | seconds | score | checksum |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|\n");
	fflush(stdout);
	for (char *k = strtok(kinds, ","); k; k = strtok(NULL, ","))
	{
		char	   *ms = strdup(metrics);
		char	   *save;

		for (char *m = strtok_r(ms, ",", &save); m; m = strtok_r(NULL, ",", &save))
		{
			char	   *ks = strdup(k);

			for (int i = optind; i < argc; i++)
			{
				pid_t		pid = fork();
				int			st;

				if (pid == 0)
				{
					run_case(ks, m, atof(argv[i]), &l);
					_exit(0);
				}
				waitpid(pid, &st, 0);
				if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
					printf("| %-8s | %-4s | %5s | failed (status %d) |\n", ks, m, argv[i], st);
			}
		}
	}
	return 0;
}
