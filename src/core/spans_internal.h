/*
 * spans_internal.h
 *		What the scanners of spans (spans.h) share: the scan over a text,
 *		its character classes, and the scanners that spans.c's pass calls,
 *		those of code and the web in spans_web.c, those of prose in
 *		spans_prose.c.  No postgres.h.
 */
#ifndef SPANS_INTERNAL_H
#define SPANS_INTERNAL_H

#include "spans.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#define MAX_FENCE 32			/* longer runs of backticks are literal */
#define MAX_FIELD 64			/* bytes inside a placeholder's braces */

typedef struct Scan
{
	const char *s;
	size_t		len;
	const TfCharCheck *cc;		/* NULL: every character is known */
	bool		numbered;		/* two lines or more start as a numbered list's */
	/* no closing run of r backticks starts before none[r] (past an opener) */
	size_t		none[MAX_FENCE + 1];
} Scan;

/* the byte at i, -1 past the end */
static inline int
at(const Scan *sc, size_t i)
{
	return i < sc->len ? (uint8_t) sc->s[i] : -1;
}

/* the code point at i, *next after it; negative when ill-formed or past the end */
static inline UChar32
cp_at(const Scan *sc, size_t i, size_t *next)
{
	const uint8_t *p = (const uint8_t *) sc->s + i;
	int32_t		k = 0;
	UChar32		c;

	if (i >= sc->len)
	{
		*next = i;
		return -1;
	}
	if (p[0] < 0x80)
	{
		*next = i + 1;
		return p[0];
	}
	/* a window of 4 bytes: int32_t offsets whatever len is */
	U8_NEXT(p, k, (int32_t) (sc->len - i < 4 ? sc->len - i : 4), c);
	*next = i + k;
	return c;
}

/* the code point before i, *start where it begins; -1 at the start */
static inline UChar32
cp_before(const Scan *sc, size_t i, size_t *start)
{
	size_t		base = i > 4 ? i - 4 : 0;
	int32_t		k = (int32_t) (i - base);
	UChar32		c;

	*start = i;
	if (i == 0)
		return -1;
	if ((uint8_t) sc->s[i - 1] < 0x80)
	{
		*start = i - 1;
		return (uint8_t) sc->s[i - 1];
	}
	U8_PREV((const uint8_t *) sc->s + base, 0, k, c);
	*start = base + k;
	return c;
}

/* is c one of set's (ASCII) characters?  Not NUL, not a code point whose low byte matches */
static inline bool
in(const char *set, int c)
{
	if (c <= 0 || c >= 0x80)
		return false;
	for (; *set; set++)			/* not strchr: inlined, the sets are short */
		if (*set == c)
			return true;
	return false;
}

#define is_digit(c) ((c) >= '0' && (c) <= '9')
#define is_ascii_alpha(c) (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z'))
#define is_alpha(c) ((c) < 0x80 ? is_ascii_alpha(c) : u_isalpha(c))
#define is_upper(c) ((c) < 0x80 ? ((c) >= 'A' && (c) <= 'Z') : (u_isupper(c) || u_istitle(c)))
/* a space within a line */
#define is_hspace(c) ((c) == ' ' || (c) == '\t' || ((c) >= 0x80 && u_charType(c) == U_SPACE_SEPARATOR))
#define is_currency(c) ((c) == '$' || ((c) >= 0x80 && u_charType(c) == U_CURRENCY_SYMBOL))

/* a letter, digit (any script), combining mark or _: part of a word */
static inline bool
is_word(UChar32 c)
{
	if (c < 0)
		return false;
	if (c < 0x80)
		return is_digit(c) || is_ascii_alpha(c) || c == '_';
	return u_isalnum(c) || (U_GET_GC_MASK(c) & U_GC_M_MASK) != 0;
}

/* a character of a host name's label */
static inline bool
is_label(UChar32 c)
{
	return (is_word(c) && c != '_') || c == '-';
}

/* a character of an e-mail's local part */
static inline bool
is_local(UChar32 c)
{
	return is_word(c) || c == '.' || c == '+' || c == '-';
}

static inline size_t
skip_digits(const Scan *sc, size_t j)
{
	while (is_digit(at(sc, j)))
		j++;
	return j;
}

/* spans_web.c: code, placeholders, format directives, mentions and hashtags, e-mails, URLs, entities */
/*
 * `code`: the run of backticks at i up to the next run as long; *skip past
 * the opening run.  A search that fails records where it stopped, so an
 * opener of the same length before there fails at once.
 */
extern size_t span_scan_code(Scan *sc, size_t i, UChar32 prev, size_t *skip);

/* {name}, {{ name }}, {{{name}}} at i (and after a $: ${var}) */
extern size_t span_scan_brace(const Scan *sc, size_t i);

/* $1..$99 at i ('$'), after no word */
extern size_t span_scan_dollar_param(const Scan *sc, size_t i, UChar32 prev);

/* %(name)s (a placeholder) or a printf directive (a format) at i ('%') */
extern size_t span_scan_percent(const Scan *sc, size_t i, int *kind);

/* @name or #name at i, after no word */
extern size_t span_scan_tag(const Scan *sc, size_t i, UChar32 prev);

/* local@domain.tld from the run of local characters at i; *start after its leading . + - */
extern size_t span_scan_email(const Scan *sc, size_t i, size_t *start);

/* a URL at i: a scheme or www. */
extern size_t span_scan_url(const Scan *sc, size_t i);

/* &name; &#123; &#x1F; at i: its end, or 0 */
extern size_t span_scan_entity(const Scan *sc, size_t i);

/* spans_prose.c: numbers, what the model does not know, quotation marks, list markers */
/*
 * A number at i (a digit, or a sign or currency sign before one); *skip
 * past what was read when it is none (a word like "3D": read once).
 */
extern size_t span_scan_number(const Scan *sc, size_t i, size_t *skip);

/* may a number start at i, after prev (starting at pstart)? */
extern bool span_number_start(const Scan *sc, UChar32 c, UChar32 prev, size_t pstart);

/*
 * A word at i (its first character) with a character the model does not
 * know: its end, the whole word kept; 0 when it knows them all.
 */
extern size_t span_scan_unknown_word(const Scan *sc, size_t i);

/* a run of characters the model does not know from i (not a word's): its end, or 0 */
extern size_t span_scan_unknown_run(const Scan *sc, size_t i);

/* a quotation mark (TF_SPAN_QUOTE); ‘ between two letters is an apostrophe, as ’ always is */
extern bool span_is_quote(UChar32 c, UChar32 prev, UChar32 next);

/* a list marker at i, at the start of a line (after spaces and quotation marks only) and before a space: its end, or 0 */
extern size_t span_scan_list_marker(const Scan *sc, size_t i, UChar32 c, size_t next);

/*
 * Do two lines or more start (after spaces) with "1. " "2) " "a) " ...?
 * Only then are they a list's markers: one "3. Liga" at the start of a
 * text is an ordinal, and a number.
 */
extern bool span_has_numbered_list(const Scan *sc);

#endif							/* SPANS_INTERNAL_H */
