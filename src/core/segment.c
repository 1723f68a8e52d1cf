/*
 * segment.c
 *		Sentences of a UTF-8 text: ICU's sentence BreakIterator on the text
 *		as UTF-16, its boundaries mapped back to byte offsets.  No postgres.h.
 */
#include "segment.h"

#include <stdio.h>
#include <string.h>

#include <unicode/ubrk.h>
#include <unicode/uchar.h>
#include <unicode/ustring.h>
#include <unicode/utext.h>
#include <unicode/utf16.h>
#include <unicode/utf8.h>

/*
 * Is s[start..end) a one-letter abbreviation at its end: " X." (X a letter),
 * then whitespace?  e: where its trailing ' ', '\t', '\n' and '\r' start
 * (start at the earliest).
 */
static bool
ends_in_initial(const char *s, size_t start, size_t e, size_t end)
{
	int32_t		i;
	UChar32		c;

	if (e == end || e < start + 2 || s[e - 1] != '.')
		return false;
	/* the letter before the period, and before it a space or the start */
	i = (int32_t) (e - 1 - start);
	U8_PREV((const uint8_t *) s + start, 0, i, c);
	if (c < 0 || !u_isalpha(c))
		return false;
	return i == 0 || s[start + i - 1] == ' ' || s[start + i - 1] == '\t';
}

/* Does the sentence at s[start..end) begin with a lower-case letter or an initial ("B.")? */
static bool
continues_sentence(const char *s, size_t start, size_t end)
{
	int32_t		i = 0;
	int32_t		n = (int32_t) (end - start);
	UChar32		c;

	if (n == 0)
		return false;
	U8_NEXT((const uint8_t *) s + start, i, n, c);
	if (c < 0)
		return false;
	if (u_islower(c))
		return true;
	return u_isalpha(c) && i < n && s[start + i] == '.';
}

/*
 * Does s[start..e) end in a number of its own followed by a period ("am
 * 3.", "Nr. 15.")?  In German that period makes an ordinal or a date more
 * often than it ends a sentence.
 */
static bool
ends_in_number(const char *s, size_t start, size_t e)
{
	size_t		i = e - 1;

	if (e < start + 2 || s[e - 1] != '.' || s[e - 2] < '0' || s[e - 2] > '9')
		return false;
	while (i > start && ((s[i - 1] >= '0' && s[i - 1] <= '9') || s[i - 1] == '.'))
		i--;
	return i == start || s[i - 1] == ' ' || s[i - 1] == '\t' || s[i - 1] == '(';
}

/* Month names and their abbreviations, German and English, as a date writes them after "3." */
static const char *const month_names[] = {
	"Januar", "Jänner", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September",
	"Oktober", "November", "Dezember", "January", "February", "March", "May", "June", "July",
	"October", "December", "Jan", "Feb", "Mär", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Okt",
	"Oct", "Nov", "Dez", "Dec"
};

/* Does the sentence at s[start..end) begin with a month name (a whole word)? */
static bool
starts_with_month(const char *s, size_t start, size_t end)
{
	for (size_t m = 0; m < sizeof(month_names) / sizeof(month_names[0]); m++)
	{
		size_t		n = strlen(month_names[m]);
		int32_t		i = (int32_t) n;
		UChar32		c;

		if (end - start < n || memcmp(s + start, month_names[m], n) != 0)
			continue;
		if (start + n == end)
			return true;
		U8_NEXT((const uint8_t *) s + start, i, (int32_t) (end - start < 64 ? end - start : 64), c);
		if (c < 0 || !u_isalpha(c))
			return true;
	}
	return false;
}

/* White_Space, as u_isUWhiteSpace, of one UTF-16 unit */
static inline bool
is_ws(UChar c)
{
	return u_isUWhiteSpace(c);
}

/* A line or paragraph separator (in the whitespace before a boundary, it ends a paragraph) */
static inline bool
is_sep(UChar c)
{
	return c == '\n' || c == '\r' || c == 0x2028 || c == 0x2029 || c == 0x85 || c == '\f' || c == '\v';
}

/*
 * Does the suppressing iterator ss keep "w" from ending a sentence?  Asked
 * on "a w Xa" (w of n UTF-16 units): is there a boundary after "a w "?
 */
static bool
suppresses(UBreakIterator *ss, const UChar *w, int32_t n, UChar *buf)
{
	UErrorCode	status = U_ZERO_ERROR;
	int32_t		len = 0;
	bool		broken = false;

	buf[len++] = 'a';
	buf[len++] = ' ';
	memcpy(buf + len, w, sizeof(UChar) * n);
	len += n;
	buf[len++] = ' ';
	buf[len++] = 'X';
	buf[len++] = 'a';
	ubrk_setText(ss, buf, len, &status);
	if (U_FAILURE(status))
		return false;
	for (int32_t p = ubrk_first(ss); p != UBRK_DONE; p = ubrk_next(ss))
		broken |= p == n + 3;
	return !broken;
}

/*
 * ICU's suppressions match a word's end, so "er." (an abbreviation)
 * suppresses the break after "Wasser.": keep a suppression only if the
 * whole word (after the last space) is suppressed and none of its proper
 * suffixes is.
 */
static bool
whole_word_suppressed(UBreakIterator *ss, const UChar *u, int32_t end, UChar *buf, size_t *work)
{
	int32_t		start = end;

	/* (end: where the whitespace before the boundary starts; words past 64 units are not looked at) */
	while (start > 0 && end - start <= 64 && !is_ws(u[start - 1]))
		start--;
	if (end - start < 2 || end - start > 64)
		return false;
	*work += (size_t) (end - start) + 8;
	if (!suppresses(ss, u + start, end - start, buf))
	{
		/* at a sentence's start an abbreviation is capitalized: "Ca." is "ca." */
		UChar		w[64];

		if (U16_IS_SURROGATE(u[start]) || !u_isupper(u[start]))
			return false;
		memcpy(w, u + start, sizeof(UChar) * (size_t) (end - start));
		w[0] = (UChar) u_tolower(u[start]);
		if (!suppresses(ss, w, end - start, buf))
			return false;
	}
	/* (one letter and a period may be an initial of its own) */
	for (int32_t k = start + 1; k < end - 2; k++)
	{
		if (U16_IS_TRAIL(u[k]))
			continue;
		*work += (size_t) (end - k) + 8;
		if (suppresses(ss, u + k, end - k, buf))
			return false;
	}
	return true;
}

/*
 * The text as a UText of chunks of SEG_CHUNK units, so that the break
 * iterator, which may scan the whole text for one boundary, calls the
 * interrupt hook as it goes: at each chunk it enters.  context is the
 * UTF-16 text, a its length.
 */
#define SEG_CHUNK 16384

static UBool U_CALLCONV
seg_access(UText *ut, int64_t index, UBool forward)
{
	const int64_t len = ut->a;
	int64_t		clipped = index < 0 ? 0 : index > len ? len : index;
	int64_t		needed = clipped;
	int64_t		start;

	if (spm_interrupt_hook != NULL)
		spm_interrupt_hook();
	if (!forward && needed > 0)
		needed--;
	else if (forward && needed == len && needed > 0)
		needed--;
	start = needed - needed % SEG_CHUNK;
	if (ut->chunkContents == NULL || ut->chunkNativeStart != start)
	{
		ut->chunkContents = (const UChar *) ut->context + start;
		ut->chunkNativeStart = start;
		ut->chunkLength = (int32_t) (len - start < SEG_CHUNK ? len - start : SEG_CHUNK);
		ut->chunkNativeLimit = start + ut->chunkLength;
		ut->nativeIndexingLimit = ut->chunkLength;
	}
	ut->chunkOffset = (int32_t) (clipped - ut->chunkNativeStart);
	return forward ? ut->chunkOffset < ut->chunkLength : ut->chunkOffset > 0;
}

static int64_t U_CALLCONV
seg_native_length(UText *ut)
{
	return ut->a;
}

static UText *U_CALLCONV
seg_clone(UText *dest, const UText *src, UBool deep, UErrorCode *status)
{
	if (U_FAILURE(*status))
		return dest;
	if (deep)
	{
		*status = U_UNSUPPORTED_ERROR;
		return dest;
	}
	dest = utext_setup(dest, 0, status);
	if (U_FAILURE(*status))
		return dest;
	dest->providerProperties = src->providerProperties;
	dest->chunkNativeLimit = src->chunkNativeLimit;
	dest->nativeIndexingLimit = src->nativeIndexingLimit;
	dest->chunkNativeStart = src->chunkNativeStart;
	dest->chunkOffset = src->chunkOffset;
	dest->chunkLength = src->chunkLength;
	dest->chunkContents = src->chunkContents;
	dest->pFuncs = src->pFuncs;
	dest->context = src->context;
	dest->a = src->a;
	return dest;
}

static int32_t U_CALLCONV
seg_extract(UText *ut, int64_t start, int64_t limit, UChar *dest, int32_t destCapacity,
			UErrorCode *status)
{
	int64_t		len = ut->a;
	int32_t		n;

	if (U_FAILURE(*status))
		return 0;
	if (destCapacity < 0 || (dest == NULL && destCapacity > 0) || start > limit)
	{
		*status = U_ILLEGAL_ARGUMENT_ERROR;
		return 0;
	}
	start = start < 0 ? 0 : start > len ? len : start;
	limit = limit < start ? start : limit > len ? len : limit;
	n = (int32_t) (limit - start);
	memcpy(dest, (const UChar *) ut->context + start, sizeof(UChar) * (size_t) (n < destCapacity ? n : destCapacity));
	utext_setNativeIndex(ut, limit);
	if (n < destCapacity)
		dest[n] = 0;
	else if (n == destCapacity)
		*status = U_STRING_NOT_TERMINATED_WARNING;
	else
		*status = U_BUFFER_OVERFLOW_ERROR;
	return n;
}

static const UTextFuncs seg_funcs = {
	sizeof(UTextFuncs),
	0, 0, 0,
	seg_clone,
	seg_native_length,
	seg_access,
	seg_extract,
	NULL,						/* replace */
	NULL,						/* copy */
	NULL,						/* mapOffsetToNative: the index is native */
	NULL,						/* mapNativeIndexToUTF16 */
	NULL,						/* close */
	NULL, NULL, NULL
};

static void
seg_open(UText *ut, const UChar *u, int32_t ulen, UErrorCode *status)
{
	utext_setup(ut, 0, status);
	if (U_FAILURE(*status))
		return;
	ut->pFuncs = &seg_funcs;
	ut->context = u;
	ut->a = ulen;
	ut->chunkContents = NULL;
	seg_access(ut, 0, true);
}

/*
 * The iterators of the last locale, kept: opening one (the suppressions'
 * most of all) costs more than segmenting a sentence.  ICU owns their
 * memory, as it does for PostgreSQL's ICU collations.
 */
static char cached_locale[128];
static UBreakIterator *cached_bi;
static UBreakIterator *cached_ss;

static bool
open_iterators(const char *locale, UBreakIterator **bi, UBreakIterator **ss, UErrorCode *status)
{
	char		loc[128];

	if (cached_bi != NULL && strcmp(cached_locale, locale) == 0)
	{
		*bi = cached_bi;
		*ss = cached_ss;
		return true;
	}
	if (cached_bi)
		ubrk_close(cached_bi);
	if (cached_ss)
		ubrk_close(cached_ss);
	cached_bi = cached_ss = NULL;
	*bi = ubrk_open(UBRK_SENTENCE, locale, NULL, 0, status);
	*ss = NULL;
	/* the locale's standard suppressions, checked word by word */
	if (U_SUCCESS(*status) && strchr(locale, '@') == NULL)
	{
		snprintf(loc, sizeof(loc), "%s@ss=standard", locale);
		*ss = ubrk_open(UBRK_SENTENCE, loc, NULL, 0, status);
	}
	if (U_FAILURE(*status))
	{
		if (*bi)
			ubrk_close(*bi);
		if (*ss)
			ubrk_close(*ss);
		return false;
	}
	cached_bi = *bi;
	cached_ss = *ss;
	strcpy(cached_locale, locale);
	return true;
}

/*
 * Interrupts: the hook is called every SPM_INTERRUPT_WORK units of work,
 * a UTF-16 unit or a byte of the text looked at each, and at each chunk
 * of the text the break iterator enters.  Every pass below is linear in
 * the text: the whitespace before a boundary and the bytes of its
 * sentence come from scans that only move forward.
 */
int
tf_sentence_bounds(const char *s, size_t len, const char *locale, const SpmAlloc *a,
				   size_t **bounds, char *err, size_t errlen)
{
	UErrorCode	status = U_ZERO_ERROR;
	UChar	   *u;
	int32_t		ulen = 0;
	UBreakIterator *bi;
	UBreakIterator *ss = NULL;
	UText		ut = UTEXT_INITIALIZER;
	UChar		probe[80];
	size_t	   *b;
	size_t		bcap;
	int			n = 0;
	int32_t		prev;
	int32_t		p;
	size_t		bytes = 0;
	size_t		work = 0;
	int32_t		scan = 0;		/* u[0..scan) looked at: */
	int32_t		ws_start = 0;	/* where its trailing whitespace starts */
	int32_t		last_sep = 0;	/* after its last separator (0: none) */
	size_t		bscan = 0;		/* s[0..bscan) looked at: */
	size_t		bws_start = 0;	/* where its trailing ' ', '\t', '\n', '\r' start */

	if (len > (size_t) INT32_MAX / 2)
	{
		snprintf(err, errlen, "the text is too long to segment");
		return -1;
	}
	if (locale == NULL)
		locale = "";
	if (strlen(locale) > 100)
	{
		snprintf(err, errlen, "the locale name is too long");
		return -1;
	}

	/* to UTF-16, SPM_INTERRUPT_WORK bytes at a time, cut before a character */
	u = a->alloc(a->ctx, sizeof(UChar) * (len + 1));
	for (size_t off = 0; off < len;)
	{
		size_t		end = len - off > SPM_INTERRUPT_WORK ? off + SPM_INTERRUPT_WORK : len;
		int32_t		got = 0;

		if (end < len)
		{
			size_t		e = end;

			/* (more than 3 continuation bytes in a row are invalid wherever the cut) */
			while (e > off && end - e < 4 && U8_IS_TRAIL((uint8_t) s[e]))
				e--;
			if (e > off && !U8_IS_TRAIL((uint8_t) s[e]))
				end = e;
		}
		if (spm_interrupt_hook != NULL)
			spm_interrupt_hook();
		u_strFromUTF8(u + ulen, (int32_t) (len + 1 - (size_t) ulen), &got, s + off,
					  (int32_t) (end - off), &status);
		if (U_FAILURE(status))
		{
			snprintf(err, errlen, "could not convert the text to UTF-16: %s", u_errorName(status));
			return -1;
		}
		ulen += got;
		off = end;
	}
	/* (u_strFromUTF8 terminates u when there is room, as the one call did) */
	u[ulen] = 0;
	if (!open_iterators(locale, &bi, &ss, &status))
	{
		snprintf(err, errlen, "could not open a sentence break iterator for locale \"%s\": %s",
				 locale, u_errorName(status));
		return -1;
	}
	seg_open(&ut, u, ulen, &status);
	if (U_SUCCESS(status))
		ubrk_setUText(bi, &ut, &status);
	if (U_FAILURE(status))
	{
		snprintf(err, errlen, "could not segment the text: %s", u_errorName(status));
		return -1;
	}
	/*
	 * At most one boundary per UTF-16 unit, but a sentence is rarely so
	 * short: room for one per 64 units, twice as much when that fills.
	 */
	bcap = (size_t) ulen / 64 + 64;
	if (bcap > (size_t) ulen + 2)
		bcap = (size_t) ulen + 2;
	b = a->alloc(a->ctx, sizeof(size_t) * bcap);
	b[0] = 0;
	prev = ubrk_first(bi);
	while ((p = ubrk_next(bi)) != UBRK_DONE)
	{
		SPM_CHECK_INTERRUPTS_WORK(work, 16);
		/* the byte length of u[prev..p) in UTF-8 (preflights; no cut in a pair) */
		for (int32_t q = prev; q < p;)
		{
			int32_t		e = p - q > (int32_t) SPM_INTERRUPT_WORK ? q + (int32_t) SPM_INTERRUPT_WORK : p;
			int32_t		seg_bytes = 0;
			UErrorCode	st = U_ZERO_ERROR;

			if (e < p && U16_IS_LEAD(u[e - 1]))
				e++;
			u_strToUTF8(NULL, 0, &seg_bytes, u + q, e - q, &st);
			bytes += (size_t) seg_bytes;
			SPM_CHECK_INTERRUPTS_WORK(work, e - q);
			q = e;
		}
		/* the whitespace before p, and whether it has a separator */
		for (; scan < p; scan++)
		{
			if (!is_ws(u[scan]))
				ws_start = scan + 1;
			else if (is_sep(u[scan]))
				last_sep = scan + 1;
			SPM_CHECK_INTERRUPTS_WORK(work, 1);
		}
		for (; bscan < bytes; bscan++)
		{
			char		c = s[bscan];

			if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
				bws_start = bscan + 1;
			SPM_CHECK_INTERRUPTS_WORK(work, 1);
		}
		if (p < ulen && last_sep <= ws_start &&
			((ss && whole_word_suppressed(ss, u, ws_start, probe, &work)) ||
			 (ends_in_initial(s, b[n], bws_start > b[n] ? bws_start : b[n], bytes) &&
			  continues_sentence(s, bytes, len)) ||
			 (ends_in_number(s, b[n], bws_start > b[n] ? bws_start : b[n]) &&
			  (continues_sentence(s, bytes, len) || starts_with_month(s, bytes, len)))))
		{
			/* not the end of a sentence: the next one continues it */
		}
		else
			b[++n] = bytes;
		prev = p;
		if ((size_t) n + 2 >= bcap && bcap < (size_t) ulen + 2)
		{
			size_t	   *nb;

			bcap = bcap * 2 < (size_t) ulen + 2 ? bcap * 2 : (size_t) ulen + 2;
			nb = a->alloc(a->ctx, sizeof(size_t) * bcap);
			/* (copied 64 KB at a time: this may be a few hundred MB) */
			for (size_t i = 0; i <= (size_t) n; i += SPM_INTERRUPT_WORK / sizeof(size_t))
			{
				size_t		k = (size_t) n + 1 - i;

				if (k > SPM_INTERRUPT_WORK / sizeof(size_t))
					k = SPM_INTERRUPT_WORK / sizeof(size_t);
				memcpy(nb + i, b + i, sizeof(size_t) * k);
				SPM_CHECK_INTERRUPTS_WORK(work, sizeof(size_t) * k);
			}
			b = nb;
		}
	}
	/* the iterator must not keep pointing into u, which the caller frees */
	ubrk_setText(bi, probe, 0, &status);
	if (n == 0 || b[n] != len)
	{
		/* an empty text has no sentence; anything else ends at len */
		if (len > 0)
			b[++n] = len;
	}
	*bounds = b;
	return n;
}
