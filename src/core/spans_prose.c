/*
 * spans_prose.c
 *		The scanners of the spans inside prose (spans.h): numbers, dates
 *		and ordinals, words and runs the model cannot encode, quotation
 *		marks, and list markers at the start of a line.  No postgres.h.
 */
#include "spans_internal.h"

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
size_t
span_scan_number(const Scan *sc, size_t i, size_t *skip)
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
bool
span_number_start(const Scan *sc, UChar32 c, UChar32 prev, size_t pstart)
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
size_t
span_scan_unknown_word(const Scan *sc, size_t i)
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
size_t
span_scan_unknown_run(const Scan *sc, size_t i)
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


static size_t numbered_marker(const Scan *sc, size_t i);

/* a quotation mark (TF_SPAN_QUOTE); ‘ between two letters is an apostrophe, as ’ always is */
bool
span_is_quote(UChar32 c, UChar32 prev, UChar32 next)
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
size_t
span_scan_list_marker(const Scan *sc, size_t i, UChar32 c, size_t next)
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
	while ((p = cp_before(sc, j, &st)) >= 0 && (p == ' ' || p == '\t' || span_is_quote(p, ' ', ' ')))
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
bool
span_has_numbered_list(const Scan *sc)
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
