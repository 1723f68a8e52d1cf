/*
 * spans_web.c
 *		The scanners of the spans that code and the web write (spans.h):
 *		`code`, {placeholders}, printf and $1 directives, @mentions and
 *		#hashtags, e-mail addresses, URLs, and entities written as text.
 *		Each reads a bounded way or records where it stopped (spans.c says
 *		why the pass stays linear).  No postgres.h.
 */
#include "spans_internal.h"

/*
 * `code`: the run of backticks at i up to the next run as long; *skip past
 * the opening run.  A search that fails records where it stopped, so an
 * opener of the same length before there fails at once.
 */
size_t
span_scan_code(Scan *sc, size_t i, UChar32 prev, size_t *skip)
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
size_t
span_scan_brace(const Scan *sc, size_t i)
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
size_t
span_scan_dollar_param(const Scan *sc, size_t i, UChar32 prev)
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


/* %(name)s (a placeholder) or a printf directive (a format) at i ('%') */
size_t
span_scan_percent(const Scan *sc, size_t i, int *kind)
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
size_t
span_scan_tag(const Scan *sc, size_t i, UChar32 prev)
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
size_t
span_scan_email(const Scan *sc, size_t i, size_t *start)
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
size_t
span_scan_url(const Scan *sc, size_t i)
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

/* &name; &#123; &#x1F; at i: its end, or 0 */
size_t
span_scan_entity(const Scan *sc, size_t i)
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
