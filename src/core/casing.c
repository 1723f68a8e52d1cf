/*
 * casing.c
 *		ALL-CAPS and Title Case text for a model trained on normally cased
 *		text: the style of a text, its words lowered (the caller's scorer
 *		choosing each word's casing) and a translation restored to the style.
 *		ICU's case mappings on UTF-8 (ucasemap), word by word, so all of it
 *		is linear in the text.  No postgres.h.
 */
#include "casing.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <unicode/ucasemap.h>
#include <unicode/uchar.h>
#include <unicode/utf8.h>

/* ICU's lengths are int32_t, and upper-casing may triple a text ("ΐ") */
#define MAX_TEXT	((size_t) (INT32_MAX / 3))

/* English words that Title Case leaves in lower case */
static const char *const minor_words[] = {
	"a", "an", "the", "and", "but", "or", "nor", "of", "in", "on", "at",
	"to", "for", "by", "with", "from", "up", "as"
};

/*
 * Upper and lower case by the simple mappings: a letter that would change.
 * ß and ª have none, so "STRAßE" stays all upper case; title-case digraphs
 * (ǅ) change both ways and are neither.
 */
static inline bool
is_up(UChar32 c)
{
	return u_tolower(c) != c && u_toupper(c) == c;
}

static inline bool
is_low(UChar32 c)
{
	return u_toupper(c) != c && u_tolower(c) == c;
}

static inline bool
is_word_char(UChar32 c)
{
	return c >= 0 && (u_hasBinaryProperty(c, UCHAR_ALPHABETIC) ||
					  (U_GET_GC_MASK(c) & (U_GC_M_MASK | U_GC_ND_MASK)) != 0);
}

/* Inside a word only: "don't", "well-known" */
static inline bool
is_joiner(UChar32 c)
{
	return c == '\'' || c == 0x2019 || c == '-' || c == 0x2010 || c == 0x2011;
}

static bool
is_minor(const char *w, int32_t n)
{
	for (size_t i = 0; i < sizeof(minor_words) / sizeof(minor_words[0]); i++)
		if ((size_t) n == strlen(minor_words[i]) && memcmp(w, minor_words[i], n) == 0)
			return true;
	return false;
}

/*
 * German words that are lower case inside a sentence, whatever a
 * vocabulary's scores say: articles, pronouns, prepositions, conjunctions,
 * auxiliaries and numbers.  Sentence starts make "Ein" likelier than "ein"
 * to a model trained on captions, and 18% of the ALL CAPS captions kept a
 * capital "Ein" inside: the rest is the vocabulary's to tell.
 */
static const char *const german_lower[] = {
	"der", "die", "das", "den", "dem", "des", "ein", "eine", "einen", "einem", "einer", "eines",
	"er", "es", "wir", "ihr", "ihm", "ihn", "ihnen", "sich", "man", "sein", "seine", "seinen",
	"seinem", "seiner", "ihre", "ihren", "ihrem", "ihrer", "deren", "dessen", "welche", "welcher",
	"in", "im", "an", "am", "auf", "aus", "bei", "beim", "mit", "nach", "von", "vom", "zu", "zum",
	"zur", "über", "unter", "vor", "hinter", "neben", "zwischen", "durch", "für", "gegen", "ohne",
	"um", "entlang", "während", "innerhalb", "außerhalb", "gegenüber",
	"und", "oder", "aber", "als", "wie", "weil", "dass", "wenn", "sowie",
	"ist", "sind", "hat", "haben", "wird", "werden", "nicht", "noch", "auch", "sehr",
	"zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun", "zehn", "elf", "zwölf",
	"viele", "einige", "mehrere", "alle", "jeder", "jede", "jedes", "andere", "anderen", "anderer"
};

static bool
is_german_lower(const char *w, int32_t n)
{
	for (size_t i = 0; i < sizeof(german_lower) / sizeof(german_lower[0]); i++)
		if ((size_t) n == strlen(german_lower[i]) && memcmp(w, german_lower[i], n) == 0)
			return true;
	return false;
}

/* "de" or "deu", alone or with a region, script or keywords */
static bool
is_german(const char *locale)
{
	size_t		n;

	if (locale == NULL || locale[0] != 'd' || locale[1] != 'e')
		return false;
	n = locale[2] == 'u' ? 3 : 2;
	return locale[n] == '\0' || locale[n] == '_' || locale[n] == '-' || locale[n] == '@';
}

/* "en" or "eng", alone or with a region, script or keywords */
static bool
is_english(const char *locale)
{
	size_t		n;

	if (locale == NULL || locale[0] != 'e' || locale[1] != 'n')
		return false;
	n = locale[2] == 'g' ? 3 : 2;
	return locale[n] == '\0' || locale[n] == '_' || locale[n] == '-' || locale[n] == '@';
}

typedef struct Scan
{
	const uint8_t *s;
	int32_t		len;
	int32_t		pos;
	bool		start;			/* the next word begins a sentence */
	size_t		work;			/* bytes looked at since the interrupt hook was last called */
} Scan;

#define SCAN_INIT(s, len)	{(const uint8_t *) (s), (int32_t) (len), 0, true, 0}

/*
 * The next word, [*ws, *we), and whether it begins a sentence; false at the
 * end of the text.  Every byte is looked at a bounded number of times.
 */
static bool
next_word(Scan *sc, int32_t *ws, int32_t *we, bool *start)
{
	const uint8_t *s = sc->s;
	int32_t		i = sc->pos,
				j;
	bool		term = false;	/* after a terminator (and closing marks) */
	UChar32		c;

	for (;; i = j)
	{
		if (i >= sc->len)
		{
			sc->pos = i;
			return false;
		}
		j = i;
		U8_NEXT(s, j, sc->len, c);
		SPM_CHECK_INTERRUPTS_WORK(sc->work, j - i);
		if (is_word_char(c))
			break;
		if (c == '\n' || c == '\r' || c == 0x2028 || c == 0x2029 ||
			c == 0x3002 || c == 0xFF01 || c == 0xFF1F ||	/* no space after these */
			(term && u_isUWhiteSpace(c)))
			sc->start = true;
		if (c >= 0 && (c == 0x2026 || u_hasBinaryProperty(c, UCHAR_S_TERM)))
			term = true;
		else if (!(term && c >= 0 && (c == '"' || c == '\'' ||
									  (U_GET_GC_MASK(c) & (U_GC_PE_MASK | U_GC_PF_MASK)))))
			term = false;
	}
	*ws = i;
	*start = sc->start;
	sc->start = false;
	for (i = j; i < sc->len; i = j)
	{
		j = i;
		U8_NEXT(s, j, sc->len, c);
		SPM_CHECK_INTERRUPTS_WORK(sc->work, j - i);
		if (is_joiner(c) && j < sc->len)
		{
			int32_t		k = j;
			UChar32		d;

			U8_NEXT(s, k, sc->len, d);
			if (!is_word_char(d))
				break;
			j = k;
		}
		else if (!is_word_char(c))
			break;
	}
	*we = sc->pos = i;
	return true;
}

typedef struct WordInfo
{
	int			nup;			/* upper-case letters */
	int			nlow;			/* lower- and title-case letters */
	int			ncased;
	bool		alpha;			/* has a letter, cased or not */
	bool		cap;			/* capitalized, see tf_case_style */
} WordInfo;

static void
word_info(Scan *sc, int32_t ws, int32_t we, WordInfo *w)
{
	const uint8_t *s = sc->s;
	int32_t		i = ws;
	UChar32		c,
				prev = 0;

	memset(w, 0, sizeof(*w));
	w->cap = true;
	while (i < we)
	{
		int32_t		at = i;

		U8_NEXT(s, i, we, c);
		SPM_CHECK_INTERRUPTS_WORK(sc->work, i - at);
		if (c < 0)
			continue;
		if (!w->alpha && u_isalpha(c))
			w->alpha = true;
		if (is_up(c) || u_istitle(c))
		{
			/* "O'Brien", "Well-Known": upper case after a joiner is a new start */
			if (w->ncased > 0 && !is_joiner(prev))
				w->cap = false;
			w->nup += is_up(c);
			w->nlow += !is_up(c);
			w->ncased++;
		}
		else if (is_low(c))
		{
			if (w->ncased == 0)
				w->cap = false;
			w->nlow++;
			w->ncased++;
		}
		prev = c;
	}
}

static inline bool
is_acronym(const WordInfo *w)
{
	return w->nup >= 2 && w->nlow == 0;
}

TfCaseStyle
tf_case_style(const char *s, size_t len)
{
	Scan		sc = SCAN_INIT(s, len);
	WordInfo	w;
	int32_t		ws,
				we;
	bool		start;
	int			nalpha = 0,
				ncased = 0,
				nup = 0,
				ncaplow = 0;
	bool		lower = false,
				title = true,
				last_minor = false;

	if (len > MAX_TEXT)
		return TF_CASE_MIXED;
	while (next_word(&sc, &ws, &we, &start))
	{
		word_info(&sc, ws, we, &w);
		if (w.ncased == 0)
		{
			nalpha += w.alpha;
			continue;
		}
		nalpha++;
		ncased++;
		nup += w.nup;
		lower |= w.nlow > 0;
		last_minor = false;
		if (is_acronym(&w))
			continue;
		if (w.cap)
			ncaplow += w.nlow > 0;
		else if (ncased > 1 && w.nup == 0 && is_minor(s + ws, we - ws))
			last_minor = true;	/* must not be the last word */
		else
			title = false;
	}
	if (2 * ncased < nalpha)
		return TF_CASE_MIXED;
	if (!lower && ncased >= 2 && nup >= 4)
		return TF_CASE_UPPER;
	if (title && !last_minor && ncased >= 3 && ncaplow >= 2)
		return TF_CASE_TITLE;
	return TF_CASE_MIXED;
}

/* -1, with the message for st: out of memory or an ICU error */
static int
failed(UErrorCode st, const char *locale, char *err, size_t errlen)
{
	if (st == U_MEMORY_ALLOCATION_ERROR)
		snprintf(err, errlen, "out of memory");
	else
		snprintf(err, errlen, "could not change the casing for locale \"%s\": %s",
				 locale, u_errorName(st));
	return -1;
}

/*
 * s[0..n) lower-cased (title: titlecased as a whole) into d (n + 1 bytes):
 * true if the result has exactly n bytes.  ICU errors other than a
 * too-small buffer go to *st.
 */
static bool
map_word(UCaseMap *m, bool title, const char *s, int32_t n, char *d, UErrorCode *st)
{
	UErrorCode	e = U_ZERO_ERROR;
	int32_t		r;

	if (title)
		r = ucasemap_utf8ToTitle(m, d, n + 1, s, n, &e);
	else
		r = ucasemap_utf8ToLower(m, d, n + 1, s, n, &e);
	if (e == U_BUFFER_OVERFLOW_ERROR)
		return false;
	if (U_FAILURE(e))
	{
		*st = e;
		return false;
	}
	return r == n;
}

int
tf_case_lower(TfCaseStyle style, const char *s, size_t len, const char *locale,
			  TfCaseScore score, void *arg, const SpmAlloc *a,
			  char **out, char *err, size_t errlen)
{
	Scan		sc = SCAN_INIT(s, len);
	UErrorCode	st = U_ZERO_ERROR;
	UCaseMap   *lm,
			   *tm;
	char	   *o,
			   *buf = NULL;
	size_t		bufsize = 0;
	WordInfo	w;
	int32_t		ws,
				we;
	bool		start;
	bool		german;

	if (len > MAX_TEXT)
		return snprintf(err, errlen, "the text is too long to change its casing"), -1;
	if (locale == NULL)
		locale = "";
	if ((o = a->alloc(a->ctx, len + 1)) == NULL)
		return failed(U_MEMORY_ALLOCATION_ERROR, locale, err, errlen);
	memcpy(o, s, len);
	o[len] = '\0';
	*out = o;
	if (style != TF_CASE_UPPER && style != TF_CASE_TITLE)
		return 0;

	german = is_german(locale);
	lm = ucasemap_open(locale, 0, &st);
	tm = ucasemap_open(locale, U_TITLECASE_WHOLE_STRING, &st);
	while (U_SUCCESS(st) && next_word(&sc, &ws, &we, &start))
	{
		int32_t		n = we - ws;
		const char *cand[3],
				   *best;
		int			k = 0;

		word_info(&sc, ws, we, &w);
		if (w.ncased == 0 || (style == TF_CASE_TITLE && is_acronym(&w)))
			continue;
		/* room for two candidates; grown by doubling, the caller frees it all */
		if (bufsize < 2 * ((size_t) n + 1))
		{
			bufsize = 2 * ((size_t) n + 1) > 2 * bufsize ? 2 * ((size_t) n + 1) : 2 * bufsize;
			if ((buf = a->alloc(a->ctx, bufsize)) == NULL)
			{
				st = U_MEMORY_ALLOCATION_ERROR;
				break;
			}
		}
		if (!start && map_word(lm, false, s + ws, n, buf, &st))
			cand[k++] = buf;
		if (map_word(tm, true, s + ws, n, buf + n + 1, &st))
			cand[k++] = buf + n + 1;
		if (style == TF_CASE_TITLE || (w.ncased >= 2 && w.ncased <= 3))
			cand[k++] = s + ws;
		/* candidates equal to an earlier one are dropped, so not scored */
		if (k == 3 && (memcmp(cand[2], cand[1], n) == 0 || memcmp(cand[2], cand[0], n) == 0))
			k--;
		if (k >= 2 && memcmp(cand[1], cand[0], n) == 0)
			cand[1] = cand[--k];
		if (k == 0)
			continue;
		best = cand[0];
		if (german && !start && cand[0] == buf && is_german_lower(buf, n))
			;					/* lower case, without asking */
		else if (score != NULL && k > 1)
		{
			double		bs = score(arg, cand[0], n);

			for (int i = 1; i < k; i++)
			{
				double		v = score(arg, cand[i], n);

				if (v > bs)
				{
					bs = v;
					best = cand[i];
				}
			}
		}
		memcpy(o + ws, best, n);
	}
	if (lm)
		ucasemap_close(lm);
	if (tm)
		ucasemap_close(tm);
	return U_FAILURE(st) ? failed(st, locale, err, errlen) : 0;
}

/* Where restore's output goes; d NULL: only measured */
typedef struct Out
{
	char	   *d;
	size_t		n;
	size_t		cap;
	const size_t *offs;
	size_t	   *new_offs;
	int			noffs;
	int			k;				/* offsets mapped so far */
} Out;

/*
 * t[ps..pe) has become r bytes at o->d + o->n: map the offsets in it.  An
 * offset inside keeps its distance from the end (only the first letter of a
 * titlecased word changes), clamped to the start.
 */
static void
emitted(Out *o, size_t ps, size_t pe, size_t r)
{
	for (; o->d && o->k < o->noffs && o->offs[o->k] < pe; o->k++)
	{
		size_t		back = pe - o->offs[o->k];

		o->new_offs[o->k] = (o->offs[o->k] <= ps || back > r) ? o->n : o->n + r - back;
	}
	o->n += r;
}

static void
copy(Out *o, const char *t, size_t ps, size_t pe)
{
	if (o->d)
		memcpy(o->d + o->n, t + ps, pe - ps);
	emitted(o, ps, pe, pe - ps);
}

/* t[ps..pe) upper-cased (title: its first letter titlecased); false on an ICU error */
static bool
map_piece(Out *o, UCaseMap *m, bool title, const char *t, size_t ps, size_t pe, UErrorCode *st)
{
	char	   *d = o->d ? o->d + o->n : NULL;
	int32_t		cap = o->d ? (int32_t) (o->cap - o->n) : 0;
	int32_t		r;
	UErrorCode	e = U_ZERO_ERROR;

	if (pe == ps)
		return true;
	if (title)
		r = ucasemap_utf8ToTitle(m, d, cap, t + ps, (int32_t) (pe - ps), &e);
	else
		r = ucasemap_utf8ToUpper(m, d, cap, t + ps, (int32_t) (pe - ps), &e);
	if (e == U_BUFFER_OVERFLOW_ERROR && o->d == NULL)
		e = U_ZERO_ERROR;
	if (U_FAILURE(e) || r < 0 || (o->d && (size_t) r > o->cap - o->n))
	{
		*st = U_FAILURE(e) ? e : U_BUFFER_OVERFLOW_ERROR;
		return false;
	}
	emitted(o, ps, pe, (size_t) r);
	return true;
}

/* One pass of tf_case_restore: into o->d, or measuring */
static bool
restore_pass(Out *o, UCaseMap *m, TfCaseStyle style, const char *t, size_t len,
			 bool english, UErrorCode *st)
{
	Scan		sc = SCAN_INIT(t, len);
	int32_t		ws,
				we,
				nws,
				nwe;
	bool		start,
				nstart,
				more;
	size_t		p = 0;

	o->n = 0;
	o->k = 0;
	if (style == TF_CASE_UPPER)
	{
		/* pieces between offsets, so that every offset is at a piece's start */
		for (int i = 0; i < o->noffs; i++)
		{
			if (!map_piece(o, m, false, t, p, o->offs[i], st))
				return false;
			p = o->offs[i];
		}
		if (!map_piece(o, m, false, t, p, len, st))
			return false;
		emitted(o, len, len + 1, 0);
		return true;
	}
	more = next_word(&sc, &nws, &nwe, &nstart);
	while (more)
	{
		ws = nws;
		we = nwe;
		start = nstart;
		more = next_word(&sc, &nws, &nwe, &nstart);
		copy(o, t, p, ws);
		/* minor words: the last word and sentence starts are capitalized */
		if (english && !start && more && is_minor(t + ws, we - ws))
			copy(o, t, ws, we);
		else if (!map_piece(o, m, true, t, ws, we, st))
			return false;
		p = we;
	}
	copy(o, t, p, len);
	emitted(o, len, len + 1, 0);
	return true;
}

int
tf_case_restore(TfCaseStyle style, const char *t, size_t len, const char *locale,
				const size_t *offs, int noffs, const SpmAlloc *a,
				char **out, size_t *outlen, size_t *new_offs,
				char *err, size_t errlen)
{
	UErrorCode	st = U_ZERO_ERROR;
	UCaseMap   *m;
	Out			o;

	if (len > MAX_TEXT)
		return snprintf(err, errlen, "the text is too long to change its casing"), -1;
	for (int i = 0; i < noffs; i++)
		if (offs[i] > len || (i > 0 && offs[i] < offs[i - 1]))
			return snprintf(err, errlen, "offset %d (%zu) is out of order or past the text (%zu bytes)",
							i, offs[i], len), -1;
	if (locale == NULL)
		locale = "";
	memset(&o, 0, sizeof(o));
	if (style != TF_CASE_UPPER && style != TF_CASE_TITLE)
	{
		if ((o.d = a->alloc(a->ctx, len + 1)) == NULL)
			return failed(U_MEMORY_ALLOCATION_ERROR, locale, err, errlen);
		memcpy(o.d, t, len);
		o.d[len] = '\0';
		*out = o.d;
		*outlen = len;
		if (noffs > 0)
			memcpy(new_offs, offs, noffs * sizeof(size_t));
		return 0;
	}
	m = ucasemap_open(locale, style == TF_CASE_TITLE ?
					  U_TITLECASE_WHOLE_STRING | U_TITLECASE_NO_LOWERCASE : 0, &st);

	/* measure, then write: the length changes ("ß" → "SS") */
	o.offs = offs;
	o.new_offs = new_offs;
	o.noffs = noffs;
	if (U_SUCCESS(st) && restore_pass(&o, m, style, t, len, is_english(locale), &st))
	{
		o.cap = o.n + 1;
		if ((o.d = a->alloc(a->ctx, o.cap)) == NULL)
			st = U_MEMORY_ALLOCATION_ERROR;
		else if (restore_pass(&o, m, style, t, len, is_english(locale), &st))
		{
			o.d[o.n] = '\0';
			*out = o.d;
			*outlen = o.n;
		}
	}
	if (m)
		ucasemap_close(m);
	return U_FAILURE(st) ? failed(st, locale, err, errlen) : 0;
}
