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
#include <unicode/utf16.h>
#include <unicode/utf8.h>

/* Is s[start..end) a one-letter abbreviation at its end: " X." (X a letter), then whitespace? */
static bool
ends_in_initial(const char *s, size_t start, size_t end)
{
	size_t		e = end;
	int32_t		i;
	UChar32		c;

	while (e > start && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\n' || s[e - 1] == '\r'))
		e--;
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

/* Is there a line or paragraph separator in the whitespace before u[boundary]? */
static bool
ends_paragraph(const UChar *u, int32_t boundary)
{
	for (int32_t k = boundary; k > 0 && u_isUWhiteSpace(u[k - 1]); k--)
		if (u[k - 1] == '\n' || u[k - 1] == '\r' || u[k - 1] == 0x2028 || u[k - 1] == 0x2029 ||
			u[k - 1] == 0x85 || u[k - 1] == '\f' || u[k - 1] == '\v')
			return true;
	return false;
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
whole_word_suppressed(UBreakIterator *ss, const UChar *u, int32_t boundary, UChar *buf)
{
	int32_t		end = boundary;
	int32_t		start;

	while (end > 0 && u_isUWhiteSpace(u[end - 1]))
		end--;
	start = end;
	while (start > 0 && !u_isUWhiteSpace(u[start - 1]))
		start--;
	if (end - start < 2 || end - start > 64)
		return false;
	if (!suppresses(ss, u + start, end - start, buf))
		return false;
	/* (one letter and a period may be an initial of its own) */
	for (int32_t k = start + 1; k < end - 2; k++)
		if (!U16_IS_TRAIL(u[k]) && suppresses(ss, u + k, end - k, buf))
			return false;
	return true;
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

int
tf_sentence_bounds(const char *s, size_t len, const char *locale, const SpmAlloc *a,
				   size_t **bounds, char *err, size_t errlen)
{
	UErrorCode	status = U_ZERO_ERROR;
	UChar	   *u;
	int32_t		ulen;
	UBreakIterator *bi;
	UBreakIterator *ss = NULL;
	UChar		probe[80];
	size_t	   *b;
	int			n = 0;
	int32_t		prev;
	int32_t		p;
	size_t		bytes = 0;

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

	u = a->alloc(a->ctx, sizeof(UChar) * (len + 1));
	u_strFromUTF8(u, (int32_t) len + 1, &ulen, s, (int32_t) len, &status);
	if (U_FAILURE(status))
	{
		snprintf(err, errlen, "could not convert the text to UTF-16: %s", u_errorName(status));
		return -1;
	}
	if (!open_iterators(locale, &bi, &ss, &status))
	{
		snprintf(err, errlen, "could not open a sentence break iterator for locale \"%s\": %s",
				 locale, u_errorName(status));
		return -1;
	}
	ubrk_setText(bi, u, ulen, &status);
	if (U_FAILURE(status))
	{
		snprintf(err, errlen, "could not segment the text: %s", u_errorName(status));
		return -1;
	}
	/* at most one boundary per UTF-16 unit */
	b = a->alloc(a->ctx, sizeof(size_t) * ((size_t) ulen + 2));
	b[0] = 0;
	prev = ubrk_first(bi);
	while ((p = ubrk_next(bi)) != UBRK_DONE)
	{
		int32_t		seg_bytes = 0;
		UErrorCode	st = U_ZERO_ERROR;

		if ((n & 1023) == 0 && spm_interrupt_hook != NULL)
			spm_interrupt_hook();
		/* the byte length of u[prev..p) in UTF-8 (a preflight) */
		u_strToUTF8(NULL, 0, &seg_bytes, u + prev, p - prev, &st);
		bytes += (size_t) seg_bytes;
		if (p < ulen && !ends_paragraph(u, p) &&
			((ss && whole_word_suppressed(ss, u, p, probe)) ||
			 (ends_in_initial(s, b[n], bytes) && continues_sentence(s, bytes, len))))
		{
			/* not the end of a sentence: the next one continues it */
		}
		else
			b[++n] = bytes;
		prev = p;
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
