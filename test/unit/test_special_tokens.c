/*
 * test_special_tokens.c
 *		Unit tests of src/core/special_tokens.c: where special tokens
 *		written in a text are found (the earliest, then the longest, as
 *		Hugging Face's Trie.split), Python's whitespace at either end, and
 *		16 MB texts (TF_PATHOLOGICAL_MB) that must take linear time with
 *		NLLB's 207 tokens: at most 60 ms per MB.
 *		Prints TAP-like lines; exits 1 on any failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "special_tokens.h"

/* under AddressSanitizer (make sanitize) everything is some 10 times slower */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifdef SANITIZED
#define MS_PER_MB 600
#else
#define MS_PER_MB 60
#endif

static int	failures;

static void
check(int ok, const char *what)
{
	printf("%s - %s\n", ok ? "ok" : "not ok", what);
	if (!ok)
		failures++;
}

/* the tokens found in s, written "offset:token " */
static void
found(const TfSpecialSet *set, const char *s, char *out, size_t cap)
{
	size_t		pos = 0,
				at,
				used = 0;
	int			k;

	out[0] = '\0';
	while ((k = tf_special_next(set, s, strlen(s), pos, &at)) >= 0)
	{
		used += snprintf(out + used, cap - used, "%zu:%.*s ", at, (int) set->tok[k].len, set->tok[k].str);
		pos = at + set->tok[k].len;
	}
}

static TfSpecialToken
tok(const char *s, int id)
{
	TfSpecialToken t = {s, (uint32_t) strlen(s), id, false, false};

	return t;
}

/* CPU time: the limits are on the work, not on how busy the machine is */
static double
seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int
main(void)
{
	TfSpecialToken toks[] = {tok("<s>", 0), tok("<pad>", 1), tok("</s>", 2), tok("<unk>", 3), tok("<mask>", 4),
	tok("<pa", 5), tok("deu_Latn", 6), tok("deu_Latnx", 7), tok("", 8)};
	TfSpecialSet set;
	char		out[512];
	static const struct
	{
		const char *text;
		const char *want;
	}			cases[] = {
		{"a <pad> b", "2:<pad> "},
		{"<pad><pad>", "0:<pad> 5:<pad> "},
		{"<pa d>", "0:<pa "},	/* the longest that matches: <pad> does not */
		{"x</s>y<s>", "1:</s> 6:<s> "},
		{"deu_Latnx deu_Latn", "0:deu_Latnx 10:deu_Latn "},
		{"Größe <unk> 東京<mask>", "8:<unk> 20:<mask> "},
		{"< s> <pa", "5:<pa "},
		{"", ""},
	};
	TfSpecialToken many[207];
	char		codes[207][16];
	const char *mb = getenv("TF_PATHOLOGICAL_MB");
	size_t		n = (size_t) (mb ? atoi(mb) : 16) * 1024 * 1024;
	char	   *big = malloc(n + 1);
	char		unit_code[24];
	double		t0,
				t1;
	size_t		at;

	tf_special_set_init(&set, 9, toks);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		char		what[256];

		found(&set, cases[i].text, out, sizeof(out));
		snprintf(what, sizeof(what), "\"%s\" -> \"%s\" (got \"%s\")", cases[i].text, cases[i].want, out);
		check(strcmp(out, cases[i].want) == 0, what);
	}
	check(tf_special_next(&set, "<pad>", 5, 1, &at) < 0, "a search from inside a token does not find it");

	check(tf_trailing_space("a \t\n", 4) == 3, "trailing ASCII whitespace");
	check(tf_trailing_space("a\xc2\xa0\xe3\x80\x80", 6) == 5, "trailing NBSP and U+3000 (Python's isspace)");
	check(tf_trailing_space("a\xe2\x80\x8b", 4) == 0, "U+200B is no whitespace");
	check(tf_trailing_space("   ", 3) == 3 && tf_trailing_space("", 0) == 0, "all whitespace, and nothing");
	check(tf_leading_space(" \xe2\x80\x83x ", 6) == 4, "leading space and U+2003");
	check(tf_trailing_space("\x80\x80\x80 ", 4) == 1, "broken UTF-8 before a space stops the walk");

	/* NLLB's shape: 202 language codes and five more, over texts that keep matching their first letters */
	for (int i = 0; i < 207; i++)
	{
		snprintf(codes[i], sizeof(codes[i]), "%c%c%c_Latn", 'a' + i % 26, 'a' + (i / 26) % 26, 'a' + i % 7);
		many[i] = tok(codes[i], 1000 + i);
	}
	snprintf(unit_code, sizeof(unit_code), "%s ", codes[5]);
	tf_special_set_init(&set, 207, many);
	for (int shape = 0; shape < 3; shape++)
	{
		const char *unit = shape == 0 ? "aaa_Lati" : shape == 1 ? "<" : unit_code;
		size_t		ulen = strlen(unit),
					count = 0,
					pos = 0;
		char		what[128];

		for (size_t i = 0; i < n; i++)
			big[i] = unit[i % ulen];
		big[n] = '\0';
		t0 = seconds();
		for (int k; (k = tf_special_next(&set, big, n, pos, &at)) >= 0; pos = at + set.tok[k].len)
			count++;
		t1 = seconds();
		snprintf(what, sizeof(what), "%zu MB of \"%s\": %zu tokens, %.1f ms per MB (at most %d)",
				 n >> 20, unit, count, (t1 - t0) * 1e3 / (n >> 20), MS_PER_MB);
		check((t1 - t0) * 1e3 / (n >> 20) <= MS_PER_MB && (shape == 2 ? count == (n + 1) / ulen : count == 0), what);
	}
	free(big);
	return failures > 0;
}
