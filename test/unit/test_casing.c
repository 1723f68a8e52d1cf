/*
 * test_casing.c
 *		Unit tests of src/core/casing.c outside the server: style detection,
 *		lowering with a toy scorer, restoring with offsets, the byte-length
 *		rule, out-of-memory, random input and timing on 16 MB texts.
 *
 * gcc -std=gnu11 -O2 -Wall -Wextra -Isrc/core -o test/unit/test_casing \
 *     test/unit/test_casing.c src/core/casing.c -licuuc
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "casing.h"

/* the server's interrupt hook (spm_model.c defines it there): none here */
void		(*spm_interrupt_hook) (void) = NULL;

/* seconds for each 16 MB case; sanitizers are 5-10 times slower */
#if defined(__SANITIZE_ADDRESS__)
#define TIME_LIMIT 60.0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TIME_LIMIT 60.0
#endif
#endif
#ifndef TIME_LIMIT
#define TIME_LIMIT 6.0
#endif

static int	ntest = 0;
static int	nfailed = 0;

/* s on one line: line breaks as \n */
static void
put(const char *s)
{
	for (; *s; s++)
		if (*s == '\n')
			fputs("\\n", stdout);
		else
			putchar(*s);
}

static void
check(int ok, const char *name, const char *detail)
{
	ntest++;
	printf("%sok %d - ", ok ? "" : "not ", ntest);
	put(name);
	if (!ok && detail)
	{
		fputs(": ", stdout);
		put(detail);
	}
	putchar('\n');
	nfailed += !ok;
}

/* An arena of malloc'd blocks, freed together; fail_after >= 0: NULL after that many */
typedef struct Arena
{
	void	  **blocks;
	int			n,
				cap;
	int			fail_after;
} Arena;

static void *
arena_alloc(void *ctx, size_t size)
{
	Arena	   *ar = ctx;
	void	   *p;

	if (ar->fail_after >= 0 && ar->n >= ar->fail_after)
		return NULL;
	if (ar->n == ar->cap)
	{
		ar->cap = ar->cap ? 2 * ar->cap : 16;
		ar->blocks = realloc(ar->blocks, ar->cap * sizeof(void *));
	}
	p = calloc(1, size ? size : 1);
	if (p == NULL)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	ar->blocks[ar->n++] = p;
	return p;
}

static void
arena_free(Arena *ar)
{
	for (int i = 0; i < ar->n; i++)
		free(ar->blocks[i]);
	free(ar->blocks);
	memset(ar, 0, sizeof(*ar));
	ar->fail_after = -1;
}

static Arena arena = {NULL, 0, 0, -1};
static SpmAlloc alloc = {arena_alloc, &arena};

/* The toy scorer: 1 for a word of the list, with its casing, else 0 */
static const char *const vocab[] = {
	"Mann", "Fahrrad", "Hund", "ein", "fährt", "der", "Besuch", "heute", "ist", "lang",
	"a", "man", "rides", "bike", "I", "love", "the", "USA", "NASA", "O'Brien", "we",
	"istanbul", "güzel", "elma", "kırmızı", "Straße", "EU", NULL
};
static int	nscored = 0;

static double
toy_score(void *arg, const char *w, size_t n)
{
	(void) arg;
	nscored++;
	for (int i = 0; vocab[i]; i++)
		if (strlen(vocab[i]) == n && memcmp(vocab[i], w, n) == 0)
			return 1.0;
	return 0.0;
}

static double
cheap_score(void *arg, const char *w, size_t n)
{
	(void) arg;
	return (double) (unsigned char) w[n - 1];
}

static const char *
style_name(TfCaseStyle s)
{
	return s == TF_CASE_UPPER ? "UPPER" : s == TF_CASE_TITLE ? "TITLE" : "MIXED";
}

static void
t_style(const char *s, TfCaseStyle want)
{
	char		name[256],
				detail[64];
	TfCaseStyle got = tf_case_style(s, strlen(s));

	snprintf(name, sizeof(name), "style \"%s\" is %s", s, style_name(want));
	snprintf(detail, sizeof(detail), "got %s", style_name(got));
	check(got == want, name, detail);
}

static void
t_lower(TfCaseStyle style, const char *s, const char *locale, TfCaseScore score, const char *want)
{
	char		name[512],
				detail[512],
				err[256] = "";
	char	   *out = NULL;
	int			rc = tf_case_lower(style, s, strlen(s), locale, score, NULL, &alloc, &out, err, sizeof(err));

	snprintf(name, sizeof(name), "lower %s \"%s\" (%s) → \"%s\"", style_name(style), s, locale, want);
	snprintf(detail, sizeof(detail), "rc %d, got \"%s\" %s", rc, rc == 0 ? out : "", err);
	check(rc == 0 && strlen(out) == strlen(s) && strcmp(out, want) == 0, name, detail);
	arena_free(&arena);
	arena.fail_after = -1;
}

static void
t_restore(TfCaseStyle style, const char *t, const char *locale, const char *want,
		  const size_t *offs, const size_t *want_offs, int noffs)
{
	char		name[512],
				detail[1024],
				err[256] = "";
	char	   *out = NULL;
	size_t		outlen = 0,
				new_offs[16];
	int			rc = tf_case_restore(style, t, strlen(t), locale, offs, noffs, &alloc,
									 &out, &outlen, new_offs, err, sizeof(err));
	int			ok = rc == 0 && outlen == strlen(want) && strcmp(out, want) == 0;
	int			dl;

	dl = snprintf(detail, sizeof(detail), "rc %d, got \"%s\" %s offs", rc, rc == 0 ? out : "", err);
	for (int i = 0; i < noffs; i++)
	{
		ok = ok && new_offs[i] == want_offs[i];
		dl += snprintf(detail + dl, sizeof(detail) - dl, " %zu", rc == 0 ? new_offs[i] : 0);
	}
	snprintf(name, sizeof(name), "restore %s \"%s\" (%s) → \"%s\"%s", style_name(style), t,
			 locale, want, noffs ? " with offsets" : "");
	check(ok, name, detail);
	arena_free(&arena);
}

/* CPU time: the limits are on the work, not on how busy the machine is */
static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* TF_PATHOLOGICAL_MB (default 16; make unittest takes 2) */
static size_t big_mb = 16;
#define BIG (big_mb << 20)

/* s repeated into a BIG-byte buffer (whole copies only, NUL-terminated) */
static char *
repeat(const char *s, size_t *len)
{
	size_t		n = strlen(s),
				k = BIG / n;
	char	   *b = malloc(k * n + 1);

	for (size_t i = 0; i < k; i++)
		memcpy(b + i * n, s, n);
	b[k * n] = '\0';
	*len = k * n;
	return b;
}

static void
t_timing(const char *what, const char *unit, TfCaseStyle want_style, const char *locale)
{
	size_t		len,
				outlen;
	char	   *s = repeat(unit, &len),
			   *out,
			   *back,
				err[256],
				name[256];
	size_t		offs[2] = {0, len},
				new_offs[2];
	double		t0 = now(),
				t1,
				t2,
				t3;
	TfCaseStyle st = tf_case_style(s, len);
	int			rc;

	t1 = now();
	rc = tf_case_lower(want_style, s, len, locale, cheap_score, NULL, &alloc, &out, err, sizeof(err));
	t2 = now();
	rc |= tf_case_restore(want_style, out, len, locale, offs, 2, &alloc, &back, &outlen, new_offs,
						  err, sizeof(err));
	t3 = now();
	snprintf(name, sizeof(name), "%zu MB %s: style %s %.2f s, lower %.2f s, restore %.2f s", big_mb,
			 what, style_name(st), t1 - t0, t2 - t1, t3 - t2);
	check(rc == 0 && st == want_style && strlen(out) == len && new_offs[1] == outlen &&
		  t3 - t0 < TIME_LIMIT, name, err);
	arena_free(&arena);
	free(s);
}

static size_t hook_calls = 0;

static void
count_hook(void)
{
	hook_calls++;
}

/*
 * A long word's letters are counted with interrupt checks: over one word of
 * BIG bytes, two passes (the letters' count among them) each run the hook
 * about every 64 KB.  A count, not a time: the same on a loaded machine,
 * where a cancel's latency moves (limits:translate then missed this once).
 */
static void
t_interrupts(void)
{
	size_t		len;
	char	   *s = repeat("HUNDKATZEMAUS", &len),
				name[128];

	hook_calls = 0;
	spm_interrupt_hook = count_hook;
	(void) tf_case_style(s, len);
	spm_interrupt_hook = NULL;
	snprintf(name, sizeof(name), "one word of %zu MB: the interrupt hook ran %zu times (at least %zu)",
			 big_mb, hook_calls, 3 * len / (128 * 1024));
	check(hook_calls >= 3 * len / (128 * 1024), name, NULL);
	free(s);
}

/* Random strings from an alphabet of awkward characters: no crash, lengths kept */
static void
t_random(void)
{
	static const char *const alpha[] = {
		"A", "a", "I", "i", "İ", "ı", "ß", "ẞ", "Σ", "ς", "σ", "Ǆ", "ǅ", "ǆ", "ŉ", "ΐ", "ﬁ",
		"\xcc\x81", "我", "😀", " ", ". ", "! ", "'", "-", "’", "\n", "1", "É", "Ω", "ª",
		"\xff", "\xc3", "ij", "IJ", "\"", ")", "。"
	};
	static const char *const locales[] = {"", "tr", "de", "el", "nl", "en", "lt", "az"};
	int			bad = 0;
	char		s[200],
				err[256],
			   *out,
			   *back;
	size_t		outlen,
				offs[4],
				new_offs[4];

	srand(42);
	for (int it = 0; it < 20000; it++)
	{
		size_t		n = 0;
		int			k = rand() % 40;
		const char *loc = locales[rand() % 8];

		for (int i = 0; i < k; i++)
		{
			const char *p = alpha[rand() % (sizeof(alpha) / sizeof(alpha[0]))];

			memcpy(s + n, p, strlen(p));
			n += strlen(p);
		}
		s[n] = '\0';
		for (int i = 0; i < 4; i++)
			offs[i] = n ? (size_t) rand() % (n + 1) : 0;
		for (int i = 1; i < 4; i++)
			for (int j = i; j > 0 && offs[j] < offs[j - 1]; j--)
			{
				size_t		x = offs[j];

				offs[j] = offs[j - 1];
				offs[j - 1] = x;
			}
		for (int style = 0; style < 3; style++)
		{
			if (tf_case_lower(style, s, n, loc, toy_score, NULL, &alloc, &out, err, sizeof(err)) != 0 ||
				memchr(out, '\0', n) != NULL || out[n] != '\0')
				bad++;
			if (tf_case_restore(style, s, n, loc, offs, 4, &alloc, &back, &outlen, new_offs, err, sizeof(err)) != 0 ||
				back[outlen] != '\0' || new_offs[3] > outlen || new_offs[0] > new_offs[1] ||
				new_offs[1] > new_offs[2] || new_offs[2] > new_offs[3] ||
				(offs[3] == n && new_offs[3] != outlen) || (offs[0] == 0 && new_offs[0] != 0))
				bad++;
		}
		(void) tf_case_style(s, n);
		arena_free(&arena);
	}
	check(bad == 0, "20000 random strings: lowered length kept, restored offsets ascending and in bounds", NULL);
}

int
main(void)
{
	char		err[256],
			   *out;
	size_t		outlen;

	if (getenv("TF_PATHOLOGICAL_MB") != NULL && atoi(getenv("TF_PATHOLOGICAL_MB")) > 0)
		big_mb = (size_t) atoi(getenv("TF_PATHOLOGICAL_MB"));

	/* style */
	t_style("EIN MANN FÄHRT FAHRRAD.", TF_CASE_UPPER);
	t_style("Ein Mann fährt Fahrrad.", TF_CASE_MIXED);
	t_style("Ein Mann Fährt Fahrrad", TF_CASE_TITLE);
	t_style("USA", TF_CASE_MIXED);
	t_style("OK", TF_CASE_MIXED);
	t_style("NASA!", TF_CASE_MIXED);
	t_style("Der Besuch der NASA", TF_CASE_MIXED);
	t_style("A MAN RIDES A BIKE", TF_CASE_UPPER);
	t_style("", TF_CASE_MIXED);
	t_style("12345 678, 9.", TF_CASE_MIXED);
	t_style("A Man on a Bike", TF_CASE_TITLE);
	t_style("The Lord of the Rings", TF_CASE_TITLE);
	t_style("A Man to Talk To", TF_CASE_TITLE);
	t_style("A Man to Talk to", TF_CASE_MIXED);
	t_style("the Lord of Rings", TF_CASE_MIXED);
	t_style("Hello World", TF_CASE_MIXED);
	t_style("The man is here.", TF_CASE_MIXED);
	t_style("I love the USA.", TF_CASE_MIXED);
	t_style("Visit NASA Today", TF_CASE_TITLE);
	t_style("O'Brien Buys Well-Known Farm", TF_CASE_TITLE);
	t_style("DIE STRAßE IST LANG", TF_CASE_UPPER);
	t_style("ΤΟ ΣΠΙΤΙ ΚΑΙ Ο ΚΟΣΜΟΣ", TF_CASE_UPPER);
	t_style("İSTANBUL VE İZMİR", TF_CASE_UPPER);
	t_style("E\xcc\x81\x43OLE ET MAISON", TF_CASE_UPPER);
	t_style("😀 HELLO WORLD 😀", TF_CASE_UPPER);
	t_style("我爱北京 我爱北京 USA", TF_CASE_MIXED);
	t_style("我爱北京天安门", TF_CASE_MIXED);
	t_style("COVID-19 IST DA", TF_CASE_UPPER);
	t_style("THE iPhone IS NEW", TF_CASE_MIXED);
	t_style("ǄEMAL ǄEMAL", TF_CASE_UPPER);
	t_style("ǅEMAL ǄEMAL ǄEMAL", TF_CASE_MIXED);
	t_style("ǅemal Ǉubav Ǌego", TF_CASE_TITLE);

	/* lowering */
	t_lower(TF_CASE_UPPER, "EIN MANN FÄHRT FAHRRAD.", "de", toy_score, "Ein Mann fährt Fahrrad.");
	t_lower(TF_CASE_UPPER, "DER HUND FÄHRT. EIN MANN!\nDER HUND", "de", toy_score,
			"Der Hund fährt. Ein Mann!\nDer Hund");
	t_lower(TF_CASE_UPPER, "«DER HUND.» EIN MANN", "de", toy_score, "«Der Hund.» Ein Mann");
	t_lower(TF_CASE_UPPER, "A MAN RIDES A BIKE", "en", toy_score, "A man rides a bike");
	t_lower(TF_CASE_UPPER, "I LOVE THE USA", "en", toy_score, "I love the USA");
	t_lower(TF_CASE_UPPER, "WE LOVE NASA", "en", toy_score, "We love nasa");
	t_lower(TF_CASE_UPPER, "EU UND USA", "de", toy_score, "EU und USA");
	t_lower(TF_CASE_UPPER, "EIN MANN", "de", NULL, "Ein mann");
	t_lower(TF_CASE_UPPER, "COVID-19 IST 3D, 2024 LANG", "de", toy_score, "Covid-19 ist 3d, 2024 lang");
	t_lower(TF_CASE_UPPER, "DER HUND 😀 我爱 FÄHRT", "de", toy_score, "Der Hund 😀 我爱 fährt");
	t_lower(TF_CASE_UPPER, "KALOS ΚΑΛΟΣ ΚΟΣΜΟΣ", "el", toy_score, "Kalos καλος κοσμος");
	t_lower(TF_CASE_UPPER, "É\xcc\x81\x43OLE UND E\xcc\x81\x43OLE", "fr", toy_score,
			"É\xcc\x81\x63ole und e\xcc\x81\x63ole");
	t_lower(TF_CASE_UPPER, "WELL-KNOWN MAN'S DON'T", "en", toy_score, "Well-known man's don't");
	t_lower(TF_CASE_UPPER, "1. THE MAN", "en", toy_score, "1. The man");
	t_lower(TF_CASE_UPPER, "3 MAN", "en", toy_score, "3 man");
	t_lower(TF_CASE_UPPER, "DER 3.5 HUND", "de", toy_score, "Der 3.5 Hund");
	t_lower(TF_CASE_UPPER, "DER HUND。EIN MANN", "de", toy_score, "Der Hund。Ein Mann");
	/* the byte-length rule: Turkish İ → i and I → ı, ẞ → ß */
	t_lower(TF_CASE_UPPER, "ÇOK GÜZEL İSTANBUL", "tr", toy_score, "Çok güzel İstanbul");
	t_lower(TF_CASE_UPPER, "ÇOK KIRMIZI ELMA", "tr", toy_score, "Çok KIRMIZI elma");
	t_lower(TF_CASE_UPPER, "ÇOK KIRMIZI ELMA", "", toy_score, "Çok kirmizi elma");
	t_lower(TF_CASE_UPPER, "DIE STRAẞE IST LANG", "de", toy_score, "Die STRAẞE ist lang");
	t_lower(TF_CASE_UPPER, "DIE STRAßE IST LANG", "de", toy_score, "Die Straße ist lang");
	t_lower(TF_CASE_UPPER, "DE IJSSEL IS LANG", "nl", toy_score, "De ijssel is lang");
	t_lower(TF_CASE_TITLE, "Der Besuch Der NASA Heute", "de", toy_score, "Der Besuch der NASA heute");
	t_lower(TF_CASE_TITLE, "Ein Mann Fährt Fahrrad", "de", toy_score, "Ein Mann fährt Fahrrad");
	t_lower(TF_CASE_TITLE, "A Man on a Bike", "en", toy_score, "A man on a bike");
	t_lower(TF_CASE_TITLE, "O'Brien Rides A Bike", "en", toy_score, "O'Brien rides a bike");
	t_lower(TF_CASE_TITLE, "Ǆemal Ǆemal ǅemal", "hr", toy_score, "ǅemal ǆemal ǆemal");
	t_lower(TF_CASE_MIXED, "EIN MANN fährt", "de", toy_score, "EIN MANN fährt");
	t_lower(TF_CASE_UPPER, "", "de", toy_score, "");
	t_lower(TF_CASE_UPPER, "\xff\xfe" "ABC \xc3 DEF", "de", toy_score, "\xff\xfe" "Abc \xc3 def");

	/* restoring */
	{
		size_t		o1[] = {0, 4, 11, 12, 16, 20},
					w1[] = {0, 4, 11, 12, 16, 20};

		t_restore(TF_CASE_UPPER, "Die Straße ist lang", "de", "DIE STRASSE IST LANG", o1, w1, 6);
	}
	{
		size_t		o2[] = {0, 0, 2, 2, 5},
					w2[] = {0, 0, 2, 2, 5};

		t_restore(TF_CASE_UPPER, "ab cd", "", "AB CD", o2, w2, 5);
	}
	{
		size_t		o3[] = {0, 6, 10, 12},
					w3[] = {0, 5, 9, 11};

		t_restore(TF_CASE_UPPER, "ﬁsh und ß", "de", "FISH UND SS", o3, w3, 4);
	}
	{
		size_t		o4[] = {0, 4, 9},
					w4[] = {0, 4, 9};

		t_restore(TF_CASE_UPPER, "οδός σου", "el", "ΟΔΟΣ ΣΟΥ", o4, w4, 3);
	}
	t_restore(TF_CASE_UPPER, "istanbul", "tr", "İSTANBUL", NULL, NULL, 0);
	t_restore(TF_CASE_UPPER, "a man 😀 我", "en", "A MAN 😀 我", NULL, NULL, 0);
	t_restore(TF_CASE_TITLE, "a man on a bike", "en", "A Man on a Bike", NULL, NULL, 0);
	t_restore(TF_CASE_TITLE, "the lord of the rings", "en_US", "The Lord of the Rings", NULL, NULL, 0);
	t_restore(TF_CASE_TITLE, "what it is for", "eng_Latn", "What It Is For", NULL, NULL, 0);
	t_restore(TF_CASE_TITLE, "war and peace. and more", "en", "War and Peace. And More", NULL, NULL, 0);
	t_restore(TF_CASE_TITLE, "ein mann in berlin", "de", "Ein Mann In Berlin", NULL, NULL, 0);
	t_restore(TF_CASE_TITLE, "the USA and iPhone, well-known", "en", "The USA and IPhone, Well-known", NULL, NULL, 0);
	t_restore(TF_CASE_TITLE, "de ijssel", "nl", "De IJssel", NULL, NULL, 0);
	t_restore(TF_CASE_TITLE, "1st class 3d", "en", "1st Class 3d", NULL, NULL, 0);
	{
		size_t		o5[] = {0, 4, 8, 9, 15},
					w5[] = {0, 5, 9, 10, 16};

		t_restore(TF_CASE_TITLE, "istanbul güzel", "tr", "İstanbul Güzel", o5, w5, 5);
	}
	{
		size_t		o6[] = {0, 5, 13},
					w6[] = {0, 5, 13};

		t_restore(TF_CASE_MIXED, "a man on a", "en", "a man on a", o6, w6, 0);
		t_restore(TF_CASE_MIXED, "Ein Mann fährt", "de", "Ein Mann fährt", o6, w6, 3);
	}
	t_restore(TF_CASE_TITLE, "", "en", "", NULL, NULL, 0);
	{
		size_t		bad1[] = {3, 2},
					bad2[] = {0, 99},
					no[2];
		int			rc1 = tf_case_restore(TF_CASE_UPPER, "abcd", 4, "", bad1, 2, &alloc, &out, &outlen, no, err, sizeof(err));
		int			rc2 = tf_case_restore(TF_CASE_MIXED, "abcd", 4, "", bad2, 2, &alloc, &out, &outlen, no, err, sizeof(err));

		check(rc1 == -1 && rc2 == -1 && strstr(err, "offset") != NULL,
			  "restore: descending offsets or offsets past the text are an error", err);
		arena_free(&arena);
	}

	/* out of memory */
	for (int n = 0; n < 2; n++)
	{
		int			rc;

		arena.fail_after = n;
		rc = tf_case_lower(TF_CASE_UPPER, "EIN MANN", 8, "de", toy_score, NULL, &alloc, &out, err, sizeof(err));
		check(rc == -1 && strcmp(err, "out of memory") == 0,
			  n == 0 ? "lower: no memory for the output" : "lower: no memory for the candidates", err);
		arena_free(&arena);
		arena.fail_after = 0;
		rc = tf_case_restore(n ? TF_CASE_TITLE : TF_CASE_MIXED, "ein mann", 8, "de", NULL, 0, &alloc,
							 &out, &outlen, NULL, err, sizeof(err));
		check(rc == -1 && strcmp(err, "out of memory") == 0, "restore: no memory for the output", err);
		arena_free(&arena);
		arena.fail_after = -1;
	}

	/* the scorer is asked once per distinct candidate */
	nscored = 0;
	tf_case_lower(TF_CASE_TITLE, "Ein Mann Fährt Fahrrad", 23, "de", toy_score, NULL, &alloc, &out, err, sizeof(err));
	check(nscored == 6, "title: candidates equal to the word are not scored twice", NULL);
	arena_free(&arena);

	t_random();

	/* pathological sizes */
	t_timing("\"A A A …\"", "A ", TF_CASE_UPPER, "en");
	t_timing("all-caps German", "EIN MANN FÄHRT MIT DEM FAHRRAD ZUR STRAßE. ", TF_CASE_UPPER, "de");
	t_timing("Title Case English", "A Man on a Bike Rides Home ", TF_CASE_TITLE, "en");
	t_timing("one word \"AAAA…\" and \"A A\"", "AAAAAAAAAAAAAAAA", TF_CASE_MIXED, "en");
	t_interrupts();
	{
		size_t		len,
					outlen2;
		char	   *s = repeat("a a ", &len),
				   *o2;
		double		t0 = now();
		int			rc;
		char		name[128];

		rc = tf_case_restore(TF_CASE_TITLE, s, len, "en", NULL, 0, &alloc, &o2, &outlen2, NULL, err, sizeof(err));
		snprintf(name, sizeof(name), "%zu MB \"a a a …\" restored to Title Case in %.2f s", big_mb, now() - t0);
		check(rc == 0 && outlen2 == len && o2[0] == 'A' && o2[2] == 'a' && o2[len - 2] == 'A' &&
			  now() - t0 < TIME_LIMIT, name, err);
		arena_free(&arena);
		free(s);
	}
	{
		size_t		len;
		char	   *s = repeat("AAAAAAAAAAAAAAAA", &len);
		double		t0 = now();
		int			rc = tf_case_lower(TF_CASE_UPPER, s, len, "en", toy_score, NULL, &alloc, &out, err, sizeof(err));
		char		name[128];

		snprintf(name, sizeof(name), "one %zu MB word lowered in %.2f s", big_mb, now() - t0);
		check(rc == 0 && out[0] == 'A' && out[1] == 'a' && out[len - 1] == 'a' && now() - t0 < TIME_LIMIT, name, err);
		arena_free(&arena);
		free(s);
	}

	printf("1..%d\n", ntest);
	if (nfailed)
		printf("# %d of %d failed\n", nfailed, ntest);
	return nfailed ? 1 : 0;
}
