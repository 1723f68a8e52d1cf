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
#include "spans_internal.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include <unicode/uchar.h>
#include <unicode/utf8.h>

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
	sc.numbered = span_has_numbered_list(&sc);
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
		if ((e = span_scan_list_marker(&sc, i, c, nx)) != 0)
			kind = TF_SPAN_LIST;
		else
			switch (c)
		{
			case '`':
				e = span_scan_code(&sc, i, prev, &skip);
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
				e = span_scan_brace(&sc, i);
				kind = TF_SPAN_PLACEHOLDER;
				break;
			case '%':
				e = span_scan_percent(&sc, i, &kind);
				if (!e && at(&sc, i + 1) == '%')
					skip = i + 2;
				break;
			case '@':
			case '#':
				e = span_scan_tag(&sc, i, prev);
				kind = c == '@' ? TF_SPAN_MENTION : TF_SPAN_HASHTAG;
				/* "#4711": a number with its sign */
				if (!e && c == '#' && is_digit(at(&sc, i + 1)) && !is_word(prev) && prev != '&' &&
					(e = span_scan_number(&sc, i + 1, &skip)) != 0)
					kind = TF_SPAN_NUMBER;
				break;
			case '&':
				e = span_scan_entity(&sc, i);
				kind = TF_SPAN_SYMBOL;
				break;
			case '$':
				if (at(&sc, i + 1) == '{' && (e = span_scan_brace(&sc, i + 1)) != 0)
					kind = TF_SPAN_PLACEHOLDER;
				else if ((e = span_scan_dollar_param(&sc, i, prev)) != 0)
					kind = TF_SPAN_FORMAT;
				break;
		}
		if (!e && span_is_quote(c, prev, cp_at(&sc, nx, &skip_after)))
		{
			e = nx;
			kind = TF_SPAN_QUOTE;
		}
		/* the start of a run of local characters: an e-mail, then a URL */
		if (!e && is_local(c) && !is_local(prev))
		{
			e = span_scan_email(&sc, i, &start);
			kind = TF_SPAN_EMAIL;
		}
		if (!e && is_ascii_alpha(c) && !is_word(prev) && !in(".-_@/", prev))
		{
			start = i;
			e = span_scan_url(&sc, i);
			kind = TF_SPAN_URL;
		}
		if (!e && span_number_start(&sc, c, prev, pstart))
		{
			start = i;
			e = span_scan_number(&sc, i, &skip);
			kind = TF_SPAN_NUMBER;
		}
		/* what the model cannot encode: a word with such a letter, or a run of symbols */
		if (!e && cc != NULL && c > 0 && !u_isUWhiteSpace(c))
		{
			start = i;
			if (is_word(c))
				e = is_word(prev) ? 0 : span_scan_unknown_word(&sc, i);
			else if (!in(".,;:!?'\"()-", c))
				e = span_scan_unknown_run(&sc, i);
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

/* may a span be inside brackets that go with it?  A number, or a run the model does not know (no entity) */
static inline bool
bracketable(const char *s, const TfSpan *sp)
{
	return sp->kind == TF_SPAN_NUMBER || (sp->kind == TF_SPAN_SYMBOL && s[sp->start] != '&');
}

/*
 * "(± 2 m)", "[5 €]": brackets that hold only numbers, runs the model
 * does not know, spaces and units go whole as one span (a symbol if one
 * of them is, else a number), or the model drops the brackets and the
 * unit around the holes.  On every kind's spans, before the mask filters
 * (the mask does not change what is found).  In place; returns the new
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
		int			j = i,
					kind = TF_SPAN_NUMBER;

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

			if (j < n && sp[j].start == p && bracketable(s, &sp[j]))
			{
				kind = sp[j].kind == TF_SPAN_SYMBOL ? TF_SPAN_SYMBOL : kind;
				p = sp[j++].end;
			}
			else if (p < len && (s[p] == ' ' || s[p] == '\t'))
				p++;
			else if (p < len && p > st && s[p - 1] == ' ' && (u = unit_at(s, len, p)) != 0)
				p += u;
			else
				break;
		}
		if (p < len && s[p] == close && j > i)
		{
			sp[w] = (TfSpan) {st - 1, p + 1, kind};
			w++;
			i = j;
		}
		else
			sp[w++] = sp[i++];
	}
	return w;
}

/*
 * "Nr. #12", "No. 5", "Nº 3": a label that says "number" goes with the
 * number after it, or the model, given "... Nr." with the number taken out,
 * reads a sentence's end and drops the label and a full stop.  The label is
 * a whole word (no letter before it), then at most one space.  In place.
 */
static void
merge_number_labels(const char *s, TfSpan *sp, int n)
{
	static const char *const labels[] = {"Nr.", "nr.", "No.", "Nº", "\u2116"};

	for (int i = 0; i < n; i++)
	{
		size_t		st = sp[i].start;

		if (sp[i].kind != TF_SPAN_NUMBER)
			continue;
		if (st > 0 && s[st - 1] == ' ')
			st--;
		for (size_t l = 0; l < sizeof(labels) / sizeof(labels[0]); l++)
		{
			size_t		k = strlen(labels[l]);

			if (st >= k && memcmp(s + st - k, labels[l], k) == 0 &&
				(st == k || !(isalnum((unsigned char) s[st - k - 1]) || (unsigned char) s[st - k - 1] >= 0x80)) &&
				(i == 0 || sp[i - 1].end <= st - k))
			{
				sp[i].start = st - k;
				break;
			}
		}
	}
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
	size_t		n;
	int			m = 0;

	*spans = NULL;
	/* none of the mask's kinds: no allocation (a merged span is of one of its spans' kinds) */
	if (find(s, len, mask, cc, NULL) == 0)
		return 0;
	n = find(s, len, TF_SPAN_ALL, cc, NULL);
	if (n > (size_t) INT32_MAX)
		return -1;				/* the count is an int */
	*spans = a->alloc(a->ctx, n * sizeof(TfSpan));
	if (*spans == NULL)
		return -1;
	/* every kind found, the brackets and number labels merged, then the mask's kinds kept */
	find(s, len, TF_SPAN_ALL, cc, *spans);
	n = merge_bracketed(s, len, *spans, (int) n);
	merge_number_labels(s, *spans, (int) n);
	for (size_t i = 0; i < n; i++)
		if ((*spans)[i].kind & mask)
			(*spans)[m++] = (*spans)[i];
	if (m == 0)
		*spans = NULL;
	return m;
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
