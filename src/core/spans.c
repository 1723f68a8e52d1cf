/*
 * spans.c
 *		The spans of a text a translation keeps verbatim (spans.h): small
 *		hand-written scanners in a left-to-right pass (made twice: to count,
 *		then to fill), ICU only for character classes.  No postgres.h.
 *
 * Linear time: at each position the scanners either find a span, and the
 * pass jumps past it, or give up after a bounded read, or after a read no
 * scanner of their kind repeats: an e-mail's local part is read only from
 * the start of its run, a number that fails is skipped whole, a code fence
 * without a closing fence remembers how far there is none.
 */
#include "spans.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

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
static UChar32
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
static UChar32
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
static bool
is_local(UChar32 c)
{
	return is_word(c) || c == '.' || c == '+' || c == '-';
}

/*
 * `code`: the run of backticks at i up to the next run as long; *skip past
 * the opening run.  A search that fails records where it stopped, so an
 * opener of the same length before there fails at once.
 */
static size_t
scan_code(Scan *sc, size_t i, UChar32 prev, size_t *skip)
{
	size_t		r = 0,
				j,
				k,
				nx;

	while (at(sc, i + r) == '`')
		r++;
	*skip = i + r;
	if (r > MAX_FENCE || is_word(prev) || sc->none[r] > i)
		return 0;
	for (j = i + r; j < sc->len;)
	{
		if (sc->s[j] == '\n' && r < 3)
			break;				/* inline code stays on its line */
		if (sc->s[j] != '`')
		{
			j++;
			continue;
		}
		for (k = j; at(sc, k) == '`'; k++)
			;
		if (k - j == r && !is_word(cp_at(sc, k, &nx)))
			return k;
		j = k;
	}
	sc->none[r] = j;
	return 0;
}

/* {name}, {{ name }}, {{{name}}} at i (and after a $: ${var}) */
static size_t
scan_brace(const Scan *sc, size_t i)
{
	size_t		k = 0,
				j,
				lim;
	bool		blank = true;

	while (k < 4 && at(sc, i + k) == '{')
		k++;
	if (k == 4)
		return 0;				/* a longer run: the last three may open one */
	j = i + k;
	lim = sc->len - j < MAX_FIELD ? sc->len : j + MAX_FIELD;
	if (k == 1)
	{
		/* a format field: {}, {0}, {name.attr[0]}, then !r, :spec */
		while (j < lim && (is_digit(at(sc, j)) || is_ascii_alpha(at(sc, j)) ||
						   in("_.[]", at(sc, j))))
			j++;
		if (at(sc, j) == '!' && in("rsa", at(sc, j + 1)))
			j += 2;
		if (at(sc, j) == ':')
			while (j < lim && at(sc, j) > ' ' && at(sc, j) != '{' && at(sc, j) != '}')
				j++;
		return at(sc, j) == '}' ? j + 1 : 0;
	}
	/* a template's {{ expression }}: anything but braces and line ends */
	for (; j < lim && at(sc, j) != '{' && at(sc, j) != '}' && at(sc, j) != '\n'; j++)
		if (at(sc, j) != ' ' && at(sc, j) != '\t')
			blank = false;
	for (size_t e = 0; e < k; e++)
		if (at(sc, j + e) != '}')
			return 0;
	return blank ? 0 : j + k;
}

/* $1..$99 at i ('$'), after no word */
static size_t
scan_dollar_param(const Scan *sc, size_t i, UChar32 prev)
{
	size_t		j = i + 1,
				nx;

	while (is_digit(at(sc, j)) && j < i + 3)
		j++;
	if (j == i + 1 || is_word(prev) || is_word(cp_at(sc, j, &nx)))
		return 0;
	if ((at(sc, j) == '.' || at(sc, j) == ',') && is_digit(at(sc, j + 1)))
		return 0;				/* $5.99: a price */
	return j;
}

static size_t
skip_digits(const Scan *sc, size_t j)
{
	while (is_digit(at(sc, j)))
		j++;
	return j;
}

/* %(name)s (a placeholder) or a printf directive (a format) at i ('%') */
static size_t
scan_percent(const Scan *sc, size_t i, int *kind)
{
	size_t		j = i + 1,
				nx;
	const char *conv = "diouxXeEfFgGaAcspn@";

	*kind = TF_SPAN_FORMAT;
	if (at(sc, j) == '(')
	{
		for (j++; j < i + MAX_FIELD && (is_ascii_alpha(at(sc, j)) || is_digit(at(sc, j)) || at(sc, j) == '_'); j++)
			;
		if (j == i + 2 || at(sc, j) != ')')
			return 0;
		j++;
		*kind = TF_SPAN_PLACEHOLDER;
		conv = "diouxXeEfFgGcrsa";
	}
	else if (is_digit(at(sc, j)) && at(sc, skip_digits(sc, j)) == '$')
		j = skip_digits(sc, j) + 1; /* %1$s */
	/* flags (not ' ': "10 % der" is prose), width, precision, length */
	while (in("-+#0'", at(sc, j)))
		j++;
	j = at(sc, j) == '*' ? j + 1 : skip_digits(sc, j);
	if (at(sc, j) == '.')
		j = at(sc, j + 1) == '*' ? j + 2 : skip_digits(sc, j + 1);
	while (in("hlLqjzt", at(sc, j)) && j < i + MAX_FIELD)
		j++;
	if (!in(conv, at(sc, j)))
		return 0;
	j++;
	/* "50 %ige", "%sKB": a word, not a directive */
	if (*kind == TF_SPAN_FORMAT && is_word(cp_at(sc, j, &nx)))
		return 0;
	return j;
}

/* @name or #name at i, after no word */
static size_t
scan_tag(const Scan *sc, size_t i, UChar32 prev)
{
	size_t		j = i + 1,
				nx;
	bool		letter = false;
	UChar32		c;

	if (is_word(prev) || prev == '@' || prev == '#' || prev == '&')
		return 0;
	while (is_word(c = cp_at(sc, j, &nx)))
	{
		letter |= is_alpha(c);
		j = nx;
	}
	if (!letter || (sc->s[i] == '@' && c == '@'))
		return 0;
	return j;
}

/* local@domain.tld from the run of local characters at i; *start after its leading . + - */
static size_t
scan_email(const Scan *sc, size_t i, size_t *start)
{
	size_t		j = i,
				nx,
				label,
				end = 0;
	int			labels = 0;
	bool		tld;
	UChar32		c;

	while (is_local(c = cp_at(sc, j, &nx)))
		j = nx;
	if (c != '@')
		return 0;
	for (*start = i; *start < j && in(".+-", at(sc, *start)); (*start)++)
		;
	if (*start == j)
		return 0;
	/* labels of letters, digits and - joined by single dots */
	for (j++;; j = end + 1)
	{
		label = j;
		tld = true;
		while (is_label(c = cp_at(sc, j, &nx)))
		{
			tld &= is_alpha(c);
			j = nx;
		}
		if (j == label)
			return 0;			/* nothing after the @ */
		labels++;
		end = j;
		if (at(sc, j) != '.' || !is_label(cp_at(sc, j + 1, &nx)))
			break;
	}
	/* the last label: two letters at least */
	if (labels < 2 || !tld || end - label < 2)
		return 0;
	return end;
}

/* a URL at i: a scheme or www. */
static size_t
scan_url(const Scan *sc, size_t i)
{
	static const char *const prefixes[] = {"https://", "http://", "ftp://", "ftps://", "www."};
	size_t		plen = 0,
				j,
				nx;
	int			paren = 0,
				bracket = 0;
	UChar32		c;

	if (!in("hHfFwW", at(sc, i)))
		return 0;				/* the common case, quickly */
	for (int p = 0; p < 5 && plen == 0; p++)
	{
		size_t		n = strlen(prefixes[p]);

		if (sc->len - i >= n && strncasecmp(sc->s + i, prefixes[p], n) == 0)
			plen = n;
	}
	if (plen == 0)
		return 0;
	j = i + plen;
	if (plen == 4)
	{
		/* www.: a host name with one more dot */
		while (is_label(c = cp_at(sc, j, &nx)))
			j = nx;
		if (j == i + plen || at(sc, j) != '.' || !is_label(cp_at(sc, j + 1, &nx)))
			return 0;
	}
	for (j = i + plen; j < sc->len; j = nx)
	{
		c = cp_at(sc, j, &nx);
		if (c <= ' ' || c == 0x7f || c == '<' || c == '>' || c == '"' || c == '`' ||
			(c >= 0x80 && (u_isUWhiteSpace(c) || u_iscntrl(c) ||
						   u_hasBinaryProperty(c, UCHAR_QUOTATION_MARK))))
			break;
		paren += (c == '(') - (c == ')');
		bracket += (c == '[') - (c == ']');
	}
	/* sentence punctuation after it, a bracket closing nothing in it */
	while (j > i + plen)
	{
		int			b = at(sc, j - 1);

		if (in(".,;:!?'", b))
			j--;
		else if (b == ')' && paren < 0)
			j--, paren++;
		else if (b == ']' && bracket < 0)
			j--, bracket++;
		else if (j - 3 >= i + plen && memcmp(sc->s + j - 3, "\xE2\x80\xA6", 3) == 0)
			j -= 3;
		else
			break;
	}
	return j > i + plen ? j : 0;
}

/* the word at j, lower-cased (Ä as ä), in list (NUL-separated, "" ends it)? */
static bool
word_in(const Scan *sc, size_t j, size_t end, const char *list)
{
	char		w[16];
	size_t		n = 0;

	for (; j < end; j++)
	{
		int			b = at(sc, j);

		if (b == 0xC3 && at(sc, j + 1) == 0x84)
		{
			w[n++] = (char) 0xC3;
			w[n++] = (char) 0xA4;
			j++;
		}
		else
			w[n++] = (char) (b >= 'A' && b <= 'Z' ? b + 32 : b);
		if (n >= sizeof(w) - 1)
			return false;
	}
	w[n] = '\0';
	for (; *list; list += strlen(list) + 1)
		if (strcmp(w, list) == 0)
			return true;
	return false;
}

static const char months[] =
"januar\0jänner\0februar\0märz\0april\0mai\0juni\0juli\0august\0september\0oktober\0"
"november\0dezember\0january\0february\0march\0may\0june\0july\0october\0december\0"
"jan\0feb\0mär\0mrz\0apr\0jun\0jul\0aug\0sep\0sept\0okt\0oct\0nov\0dez\0dec\0";

/* German words that come before an ordinal: "der 2. Platz", "am 20. Dann" */
static const char determiners[] =
"der\0die\0das\0den\0dem\0des\0am\0im\0zum\0zur\0vom\0beim\0jeden\0jedem\0jeder\0jedes\0";

/*
 * Is the period before j an ordinal's, of the number starting at numstart?
 * Spaces, then a lower-case word, a month's name, or any word after a
 * determiner.  A capital after the period may start the next sentence.
 */
static bool
is_ordinal(const Scan *sc, size_t numstart, size_t j)
{
	size_t		nx,
				w,
				st;
	UChar32		c;

	c = cp_at(sc, j, &nx);
	if (!is_hspace(c))
		return false;
	while (is_hspace(c))
	{
		j = nx;
		c = cp_at(sc, j, &nx);
	}
	if (!is_alpha(c))
		return false;
	if (!is_upper(c))
		return true;
	/* the word after (a few letters, bounded) */
	for (w = j; is_alpha(c) && w - j < 16; c = cp_at(sc, w, &nx))
		w = nx;
	if (!is_alpha(c) && word_in(sc, j, w, months))
		return true;
	/* the word before, across one to eight spaces */
	for (j = numstart; j > 0 && numstart - j < 8 && (sc->s[j - 1] == ' ' || sc->s[j - 1] == '\t'); j--)
		;
	if (j == numstart)
		return false;
	for (w = j; w > 0 && j - w < 8 && is_ascii_alpha(sc->s[w - 1]); w--)
		;
	return w < j && !is_word(cp_before(sc, w, &st)) && word_in(sc, w, j, determiners);
}

/*
 * A number at i (a digit, or a sign or currency sign before one); *skip
 * past what was read when it is none (a word like "3D": read once).
 */
static size_t
scan_number(const Scan *sc, size_t i, size_t *skip)
{
	size_t		j = i,
				nx,
				g,
				first = 0,
				last = 0;
	int			groups = 0;
	bool		plain = true,
				dots = true,
				phone = sc->s[i] == '+';
	UChar32		c = cp_at(sc, i, &nx);

	*skip = nx;
	if (!is_digit(c))
	{
		plain = false;
		j = nx;
		if (!is_digit(at(sc, j)))
			return 0;
	}
	for (;;)
	{
		g = j;
		j = skip_digits(sc, j);
		last = j - g;
		if (++groups == 1)
			first = last;
		c = at(sc, j);
		if ((in(".,:/-", c) || (phone && c == ' ')) && is_digit(at(sc, j + 1)))
		{
			dots &= c == '.';
			j++;
			continue;
		}
		break;
	}
	c = cp_at(sc, j, &nx);
	if (c == '%' || c == 0x2030 || is_currency(c))
	{
		j = nx;
		plain = false;
	}
	else if ((c == ' ' || c == 0xA0 || c == 0x202F) && (at(sc, nx) == '%' || cp_at(sc, nx, &g) == 0x2030) &&
			 !is_word(cp_at(sc, nx + (at(sc, nx) == '%' ? 1 : 3), &g)) && at(sc, nx + 1) != '%')
	{
		/* "40 %", as German and French write it (a space, a no-break space or a narrow one) */
		j = nx + (at(sc, nx) == '%' ? 1 : 3);
		plain = false;
	}
	*skip = j;
	/* glued to a word: "3D", "15kg", "19-jährige", "5.Liga" */
	c = cp_at(sc, j, &nx);
	if (is_word(c) || ((c == '-' || c == '/' || c == '.') && is_word(cp_at(sc, nx, &g))))
		return 0;
	if (plain && c == '.' && last <= 2 && (groups == 1 || (groups == 2 && dots && first <= 2)) &&
		is_ordinal(sc, i, j + 1))
		return j + 1;
	return j;
}

/* may a number start at i, after prev (starting at pstart)? */
static bool
number_start(const Scan *sc, UChar32 c, UChar32 prev, size_t pstart)
{
	size_t		st;

	if (is_word(prev) || !(is_digit(c) || c == '+' || c == '-' || c == 0x2212 || is_currency(c)))
		return false;
	/* "COVID-19", "Nr.5": joined to the word before */
	return !((prev == '-' || prev == '.' || prev == '/') && is_word(cp_before(sc, pstart, &st)));
}

/* does the model know the character at i (ending at next)?  ASCII letters, digits and spaces always */
static bool
known_at(const Scan *sc, size_t i, size_t next, UChar32 c)
{
	if (sc->cc == NULL || (c >= 0 && c < 0x80 && (is_digit(c) || is_ascii_alpha(c) || c == ' ' || c == '\n')))
		return true;
	return sc->cc->known(sc->cc->arg, sc->s + i, next - i);
}

/* joins or modifies the character before it: ZWJ, variation selectors, skin tones, tags, keycap */
static inline bool
is_joining(UChar32 c)
{
	return c == 0x200D || (c >= 0xFE00 && c <= 0xFE0F) || (c >= 0x1F3FB && c <= 0x1F3FF) ||
		(c >= 0xE0020 && c <= 0xE007F) || c == 0x20E3 || (c >= 0xE0100 && c <= 0xE01EF);
}

/*
 * A word at i (its first character) with a character the model does not
 * know: its end, the whole word kept; 0 when it knows them all.
 */
static size_t
scan_unknown_word(const Scan *sc, size_t i)
{
	size_t		j = i,
				nx;
	bool		unknown = false;
	UChar32		c;

	while (is_word(c = cp_at(sc, j, &nx)) || (j > i && is_joining(c)))
	{
		unknown |= !known_at(sc, j, nx, c);
		j = nx;
	}
	return unknown ? j : 0;
}

/* a run of characters the model does not know from i (not a word's): its end, or 0 */
static size_t
scan_unknown_run(const Scan *sc, size_t i)
{
	size_t		j = i,
				nx;
	UChar32		c;

	for (;;)
	{
		c = cp_at(sc, j, &nx);
		if (nx == j)
			break;
		if (j > i && is_joining(c))
			;
		else if (c < 0 || is_word(c) || u_isUWhiteSpace(c) || known_at(sc, j, nx, c))
			break;
		j = nx;
	}
	return j;
}

/* &name; &#123; &#x1F; at i: its end, or 0 */
static size_t
scan_entity(const Scan *sc, size_t i)
{
	size_t		j = i + 1;
	int			n = 0;

	if (at(sc, j) == '#')
	{
		bool		hex = at(sc, j + 1) == 'x' || at(sc, j + 1) == 'X';

		j += 1 + hex;
		while (n < 7 && (is_digit(at(sc, j)) ||
						 (hex && ((at(sc, j) | 0x20) >= 'a' && (at(sc, j) | 0x20) <= 'f'))))
			j++, n++;
	}
	else
		while (n < 32 && (is_ascii_alpha(at(sc, j)) || (n > 0 && is_digit(at(sc, j)))))
			j++, n++;
	return n > 0 && at(sc, j) == ';' ? j + 1 : 0;
}

static size_t numbered_marker(const Scan *sc, size_t i);

/* a quotation mark (TF_SPAN_QUOTE); ‘ between two letters is an apostrophe, as ’ always is */
static bool
is_quote(UChar32 c, UChar32 prev, UChar32 next)
{
	switch (c)
	{
		case 0x201E:			/* „ */
		case 0x201C:			/* “ */
		case 0x201D:			/* ” */
		case 0x00AB:			/* « */
		case 0x00BB:			/* » */
		case 0x2039:			/* ‹ */
		case 0x203A:			/* › */
		case 0x201A:			/* ‚ */
		case '"':
			return true;
		case 0x2018:			/* ‘ */
			return !(is_word(prev) && is_word(next));
		default:
			return false;
	}
}

/* a list marker at i, at the start of a line (after spaces and quotation marks only) and before a space: its end, or 0 */
static size_t
scan_list_marker(const Scan *sc, size_t i, UChar32 c, size_t next)
{
	size_t		j = i,
				st,
				e = 0;
	UChar32		p;

	/* a marker and a space first: the walk back is then over the spaces before a marker only (linear) */
	if (in("-*+", c) || c == 0x2022 || c == 0x00B7 || c == 0x2023 || c == 0x25E6 || c == 0x25AA ||
		c == 0x2013 || c == 0x2014)
		e = next;
	else if (sc->numbered)
		e = numbered_marker(sc, i);
	if (!e || (at(sc, e) != ' ' && at(sc, e) != '\t'))
		return 0;
	/* only spaces back to the line's start, and quotation marks ("„- Ein Hund ...") */
	while ((p = cp_before(sc, j, &st)) >= 0 && (p == ' ' || p == '\t' || is_quote(p, ' ', ' ')))
		j = st;
	if (p >= 0 && p != '\n' && p != '\r' && p != 0x2028 && p != 0x2029)
		return 0;
	return e;
}

/* "1." "12)" "a)" at i: its end, or 0 */
static size_t
numbered_marker(const Scan *sc, size_t i)
{
	size_t		e = i;

	while (e - i < 3 && is_digit(at(sc, e)))
		e++;
	if (e > i)
		return in(".)", at(sc, e)) ? e + 1 : 0;
	return is_ascii_alpha(at(sc, i)) && at(sc, i + 1) == ')' ? i + 2 : 0;
}

/*
 * Do two lines or more start (after spaces) with "1. " "2) " "a) " ...?
 * Only then are they a list's markers: one "3. Liga" at the start of a
 * text is an ordinal, and a number.
 */
static bool
has_numbered_list(const Scan *sc)
{
	int			lines = 0;
	size_t		work = 0;

	for (size_t i = 0; i < sc->len && lines < 2;)
	{
		size_t		e,
					nl;

		while (i < sc->len && (sc->s[i] == ' ' || sc->s[i] == '\t'))
			i++;
		e = numbered_marker(sc, i);
		lines += e && (at(sc, e) == ' ' || at(sc, e) == '\t');
		nl = i;
		while (nl < sc->len && sc->s[nl] != '\n')
			nl++;
		SPM_CHECK_INTERRUPTS_WORK(work, nl + 1 - i);
		i = nl + 1;
	}
	return lines >= 2;
}

/*
 * One pass over s: the spans of the kinds in mask written to out (when not
 * NULL), counted.  Run twice, to count and then to fill an array of the
 * right size: SpmAlloc has no realloc, and a growing array would leave
 * its old copies in the caller's context.
 */
static size_t
find(const char *s, size_t len, unsigned mask, const TfCharCheck *cc, TfSpan *out)
{
	Scan		sc;
	size_t		n = 0,
				i = 0,
				done = 0,
				work = 0,
				last_end = 0;	/* the end of the last span found, of any kind */

	memset(&sc, 0, sizeof(sc));
	sc.s = s;
	sc.len = len;
	sc.cc = cc;
	sc.numbered = has_numbered_list(&sc);
	while (i < len)
	{
		size_t		nx,
					pstart,
					skip_after,
					skip,
					start = i,
					e = 0;
		UChar32		c = cp_at(&sc, i, &nx);
		UChar32		prev = cp_before(&sc, i, &pstart);
		int			kind = 0;

		/* (the scanners look ahead at most a span's length: i bounds the work) */
		SPM_CHECK_INTERRUPTS_WORK(work, i - done);
		done = i;

		skip = nx;
		/* before the rest: "1. " and "- " at a line's start are no number */
		if ((e = scan_list_marker(&sc, i, c, nx)) != 0)
			kind = TF_SPAN_LIST;
		else
			switch (c)
		{
			case '`':
				e = scan_code(&sc, i, prev, &skip);
				kind = TF_SPAN_CODE;
				break;
			case '\\':
				if (at(&sc, i + 1) == '\\')
					skip = i + 2;	/* a literal backslash: "\\n" is no \n */
				else if (in("ntr", at(&sc, i + 1)))
					e = i + 2;
				kind = TF_SPAN_FORMAT;
				break;
			case '{':
				e = scan_brace(&sc, i);
				kind = TF_SPAN_PLACEHOLDER;
				break;
			case '%':
				e = scan_percent(&sc, i, &kind);
				if (!e && at(&sc, i + 1) == '%')
					skip = i + 2;
				break;
			case '@':
			case '#':
				e = scan_tag(&sc, i, prev);
				kind = c == '@' ? TF_SPAN_MENTION : TF_SPAN_HASHTAG;
				/* "#4711": a number with its sign */
				if (!e && c == '#' && is_digit(at(&sc, i + 1)) && !is_word(prev) && prev != '&' &&
					(e = scan_number(&sc, i + 1, &skip)) != 0)
					kind = TF_SPAN_NUMBER;
				break;
			case '&':
				e = scan_entity(&sc, i);
				kind = TF_SPAN_SYMBOL;
				break;
			case '$':
				if (at(&sc, i + 1) == '{' && (e = scan_brace(&sc, i + 1)) != 0)
					kind = TF_SPAN_PLACEHOLDER;
				else if ((e = scan_dollar_param(&sc, i, prev)) != 0)
					kind = TF_SPAN_FORMAT;
				break;
		}
		if (!e && is_quote(c, prev, cp_at(&sc, nx, &skip_after)))
		{
			e = nx;
			kind = TF_SPAN_QUOTE;
		}
		/* the start of a run of local characters: an e-mail, then a URL */
		if (!e && is_local(c) && !is_local(prev))
		{
			e = scan_email(&sc, i, &start);
			kind = TF_SPAN_EMAIL;
		}
		if (!e && is_ascii_alpha(c) && !is_word(prev) && !in(".-_@/", prev))
		{
			start = i;
			e = scan_url(&sc, i);
			kind = TF_SPAN_URL;
		}
		if (!e && number_start(&sc, c, prev, pstart))
		{
			start = i;
			e = scan_number(&sc, i, &skip);
			kind = TF_SPAN_NUMBER;
		}
		/* what the model cannot encode: a word with such a letter, or a run of symbols */
		if (!e && cc != NULL && c > 0 && !u_isUWhiteSpace(c))
		{
			start = i;
			if (is_word(c))
				e = is_word(prev) ? 0 : scan_unknown_word(&sc, i);
			else if (!in(".,;:!?'\"()-", c))
				e = scan_unknown_run(&sc, i);
			if (e == i)
				e = 0;
			/* "(日本)": its brackets with it, or the model drops them around the hole */
			if (e && pstart >= last_end && ((prev == '(' && at(&sc, e) == ')') || (prev == '[' && at(&sc, e) == ']')))
				start = pstart, e++;
			kind = TF_SPAN_SYMBOL;
		}
		if (e)
		{
			if ((kind & mask) && out)
				out[n] = (TfSpan) {start, e, kind};
			n += (kind & mask) != 0;
			i = last_end = e;
		}
		else
			i = skip > nx ? skip : nx;
	}
	return n;
}

/* a unit after a number, as "(± 2 m)" writes it: its length at s + i, or 0 */
static size_t
unit_at(const char *s, size_t len, size_t i)
{
	static const char *const units[] = {
		"mm", "cm", "km", "m", "mg", "kg", "g", "t", "ml", "l", "s", "ms", "min", "h",
		"Hz", "kHz", "W", "kW", "kWh", "V", "A", "km/h", "m/s", "\u00B0C", "\u00B0F", "\u00B0"
	};
	size_t		best = 0;

	for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++)
	{
		size_t		n = strlen(units[u]);

		if (n > best && n <= len - i && memcmp(s + i, units[u], n) == 0 &&
			(i + n == len || !(isalnum((unsigned char) s[i + n]) || (unsigned char) s[i + n] >= 0x80)))
			best = n;
	}
	return best;
}

/*
 * "(± 2 m)", "[5 €]": brackets that hold only numbers and symbols, spaces
 * and units go whole as one span (the first one's kind), or the model drops the
 * brackets and the unit around the holes.  In place; returns the new
 * count.  Linear: a group that fails ends where its scan stopped, before
 * the next group's "(".
 */
static int
merge_bracketed(const char *s, size_t len, TfSpan *sp, int n)
{
	int			w = 0;

	for (int i = 0; i < n;)
	{
		size_t		st = sp[i].start,
					p;
		char		close;
		int			j = i;

		if (st == 0 || (s[st - 1] != '(' && s[st - 1] != '[') || (w > 0 && sp[w - 1].end >= st))
		{
			sp[w++] = sp[i++];
			continue;
		}
		close = s[st - 1] == '(' ? ')' : ']';
		p = st;
		for (;;)
		{
			size_t		u;

			if (j < n && sp[j].start == p && (sp[j].kind & (TF_SPAN_NUMBER | TF_SPAN_SYMBOL)))
				p = sp[j++].end;
			else if (p < len && (s[p] == ' ' || s[p] == '\t'))
				p++;
			else if (p < len && p > st && s[p - 1] == ' ' && (u = unit_at(s, len, p)) != 0)
				p += u;
			else
				break;
		}
		if (p < len && s[p] == close && j > i)
		{
			sp[w] = (TfSpan) {st - 1, p + 1, sp[i].kind};
			w++;
			i = j;
		}
		else
			sp[w++] = sp[i++];
	}
	return w;
}

int
tf_find_spans(const char *s, size_t len, unsigned mask, const SpmAlloc *a, TfSpan **spans)
{
	return tf_find_spans_checked(s, len, mask, NULL, a, spans);
}

int
tf_find_spans_checked(const char *s, size_t len, unsigned mask, const TfCharCheck *cc,
					  const SpmAlloc *a, TfSpan **spans)
{
	size_t		n = find(s, len, mask, cc, NULL);

	*spans = NULL;
	if (n == 0)
		return 0;
	if (n > (size_t) INT32_MAX)
		return -1;				/* the count is an int */
	*spans = a->alloc(a->ctx, n * sizeof(TfSpan));
	if (*spans == NULL)
		return -1;
	find(s, len, mask, cc, *spans);
	return merge_bracketed(s, len, *spans, (int) n);
}

static const char *const kind_names[] = {
	"url", "email", "number", "placeholder", "format", "mention", "hashtag", "code", "symbol", "list", "quote"
};
#define NKINDS ((int) (sizeof(kind_names) / sizeof(kind_names[0])))

unsigned
tf_span_kind_by_name(const char *name, size_t len)
{
	for (int b = 0; b < NKINDS; b++)
		if (strlen(kind_names[b]) == len && memcmp(name, kind_names[b], len) == 0)
			return 1u << b;
	return 0;
}

const char *
tf_span_kind_name(int kind)
{
	for (int b = 0; b < NKINDS; b++)
		if (kind == (1 << b))
			return kind_names[b];
	return NULL;
}
