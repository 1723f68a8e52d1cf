/*
 * rich_text.c
 *		Units of text with anchors: spans out before translation, spans
 *		and markup back after it.  No postgres.h.
 *
 * Offsets are bytes of UTF-8.  Words are runs without whitespace: what the
 * model's pieces group into (a piece that starts with U+2581 starts one),
 * so the alignment of pieces maps onto them.
 */
#include "rich_text.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include "placement.h"
#include "spans.h"

static bool
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static void *
alloc0(const SpmAlloc *a, size_t n)
{
	void	   *p = a->alloc(a->ctx, n ? n : 1);

	if (p != NULL)
		memset(p, 0, n ? n : 1);
	return p;
}

/* -------------------------------------------------------------- words */

static bool
is_punct_at(const char *s, size_t len, size_t i, size_t *next)
{
	int32_t		k = (int32_t) i;
	UChar32		c;

	U8_NEXT((const uint8_t *) s, k, (int32_t) len, c);
	*next = (size_t) k;
	return c >= 0 && u_ispunct(c);
}

static bool
is_punct_before(const char *s, size_t start, size_t end, size_t *prev)
{
	int32_t		k = (int32_t) (end - start);
	UChar32		c;

	U8_PREV((const uint8_t *) s + start, 0, k, c);
	*prev = start + (size_t) k;
	return c >= 0 && u_ispunct(c);
}

int
tf_text_words(const char *s, size_t len, const SpmAlloc *a, TfWord **words)
{
	int			n = 0;
	size_t		i = 0;
	TfWord	   *w;

	/* counted first: the allocator has no realloc */
	for (size_t k = 0; k < len; k++)
	{
		n += !is_space(s[k]) && (k == 0 || is_space(s[k - 1]));
		SPM_CHECK_INTERRUPTS(k);
	}
	w = alloc0(a, sizeof(TfWord) * ((size_t) n + 1));
	if (w == NULL)
		return -1;
	n = 0;
	while (i < len)
	{
		size_t		st,
					cs,
					ce,
					nx;

		for (; i < len && is_space(s[i]); i++)
			SPM_CHECK_INTERRUPTS(i);
		if (i >= len)
			break;
		st = i;
		for (; i < len && !is_space(s[i]); i++)
			SPM_CHECK_INTERRUPTS(i);
		cs = st;
		ce = i;
		while (cs < ce && is_punct_at(s, ce, cs, &nx))
			cs = nx;
		while (ce > cs && is_punct_before(s, cs, ce, &nx))
			ce = nx;
		if (cs == ce)
		{
			cs = st;			/* punctuation only: all of it */
			ce = i;
		}
		w[n].start = st;
		w[n].end = i;
		w[n].cs = cs;
		w[n].ce = ce;
		n++;
	}
	*words = w;
	return n;
}

int
tf_word_at(const TfWord *w, int n, size_t o)
{
	int			lo = 0,
				hi = n;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (w[mid].start < o)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The first word that ends after offset o (n if none). */
static int
word_ending_after(const TfWord *w, int n, size_t o)
{
	int			lo = 0,
				hi = n;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (w[mid].end <= o)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* -------------------------------------------------------------- build */

static int
cmp_size(const void *a, const void *b)
{
	size_t		x = *(const size_t *) a,
				y = *(const size_t *) b;

	return x < y ? -1 : x > y;
}

/*
 * Bytes taken out before offset o: of the spans (with the space each takes
 * along, rm_end) wholly before o, and of the one o is in.  cum: the running
 * sums of what each takes out.
 */
static size_t
removed_before(const TfSpan *spans, const size_t *rm_end, const size_t *cum, int n, size_t o)
{
	int			lo = 0,
				hi = n;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (rm_end[mid] <= o)
			lo = mid + 1;
		else
			hi = mid;
	}
	return cum[lo] + (lo < n && spans[lo].start < o ? o - spans[lo].start : 0);
}

int
tf_unit_build(const char *s, size_t len, const TfAnchor *ma, int nma, unsigned keep,
			  const SpmAlloc *a, TfUnit *u)
{
	return tf_unit_build_checked(s, len, ma, nma, keep, NULL, a, u);
}

int
tf_unit_build_checked(const char *s, size_t len, const TfAnchor *ma, int nma, unsigned keep,
					  const TfCharCheck *cc, const SpmAlloc *a, TfUnit *u)
{
	TfSpan	   *spans = NULL;
	int			nspans = 0;
	TfSpan	   *used;
	size_t	   *rm_end;			/* where what a used span takes out ends: the span, and a space after it */
	size_t	   *cum;
	size_t	   *edges;
	int			nused = 0;
	int		   *index_of_markup;
	int		   *open;
	int			nopen = 0;
	int			k = 0;
	size_t		pos = 0,
				o = 0;

	memset(u, 0, sizeof(*u));
	if (keep != 0 && len > 0 && (nspans = tf_find_spans_checked(s, len, keep, cc, a, &spans)) < 0)
		return -1;
	used = alloc0(a, sizeof(TfSpan) * ((size_t) nspans + 1));
	cum = alloc0(a, sizeof(size_t) * ((size_t) nspans + 2));
	rm_end = alloc0(a, sizeof(size_t) * ((size_t) nspans + 1));
	edges = alloc0(a, sizeof(size_t) * (2 * (size_t) nma + 1));
	index_of_markup = alloc0(a, sizeof(int) * ((size_t) nma + 1));
	open = alloc0(a, sizeof(int) * ((size_t) nma + 1));
	u->anchors = alloc0(a, sizeof(TfUnitAnchor) * ((size_t) nma + (size_t) nspans + 1));
	if (!used || !cum || !rm_end || !edges || !index_of_markup || !open || !u->anchors)
		return -1;

	/* a span stays text if an element starts or ends inside it */
	for (int j = 0; j < nma; j++)
	{
		edges[2 * j] = ma[j].start;
		edges[2 * j + 1] = ma[j].end;
	}
	qsort(edges, 2 * (size_t) nma, sizeof(size_t), cmp_size);
	for (int i = 0; i < nspans; i++)
	{
		int			lo = 0,
					hi = 2 * nma;

		while (lo < hi)			/* the first edge after the span's start */
		{
			int			mid = lo + (hi - lo) / 2;

			if (edges[mid] <= spans[i].start)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo == 2 * nma || edges[lo] >= spans[i].end)
		{
			size_t		e = spans[i].end;

			/*
			 * A span between spaces (or at the start) takes the space after
			 * it along: "3 Hunde" is "Hunde", not " Hunde", and "a URL b"
			 * "a b"; the anchor remembers the spaces.
			 */
			if (e < len && is_space(s[e]) && (spans[i].start == 0 || is_space(s[spans[i].start - 1])) &&
				(lo == 2 * nma || edges[lo] > e) && (i + 1 >= nspans || spans[i + 1].start > e))
				e++;
			used[nused] = spans[i];
			rm_end[nused] = e;
			cum[nused + 1] = cum[nused] + (e - spans[i].start);
			nused++;
		}
	}

	/* the text without the spans */
	u->text = a->alloc(a->ctx, len - cum[nused] + 1);
	if (u->text == NULL)
		return -1;
	for (int i = 0; i < nused; i++)
	{
		memcpy(u->text + o, s + pos, used[i].start - pos);
		o += used[i].start - pos;
		pos = rm_end[i];
	}
	memcpy(u->text + o, s + pos, len - pos);
	o += len - pos;
	u->text[o] = '\0';
	u->len = o;
	u->nmarkup = nma;

	/*
	 * Markup anchors and spans merged in source order (an anchor that
	 * starts where a span does holds it); offsets into the new text.  The
	 * open elements are a stack: the span's parent is the innermost.
	 */
	for (int i = 0, j = 0; i < nma || j < nused;)
	{
		TfUnitAnchor *an = &u->anchors[k];

		if (i < nma && (j >= nused || ma[i].start <= used[j].start))
		{
			an->start = ma[i].start - removed_before(used, rm_end, cum, nused, ma[i].start);
			an->end = ma[i].end - removed_before(used, rm_end, cum, nused, ma[i].end);
			if (an->end < an->start)
				an->end = an->start;
			an->point = ma[i].point;
			an->parent = ma[i].parent >= 0 && ma[i].parent < i ? index_of_markup[ma[i].parent] : -1;
			an->markup = i;
			an->ws_before = ma[i].start > 0 && ma[i].start <= len && is_space(s[ma[i].start - 1]);
			an->ws_after = ma[i].end < len && is_space(s[ma[i].end]);
			index_of_markup[i] = k++;
			if (!ma[i].point)
			{
				while (nopen > 0 && open[nopen - 1] != ma[i].parent)
					nopen--;
				open[nopen++] = i;
			}
			i++;
		}
		else
		{
			an->start = an->end = used[j].start - cum[j];
			an->point = true;
			an->insert = s + used[j].start;
			an->insert_len = used[j].end - used[j].start;
			an->markup = -1;
			an->ws_before = used[j].start == 0 || is_space(s[used[j].start - 1]);
			an->ws_after = used[j].end == len || is_space(s[used[j].end]);
			an->at_end = used[j].end == len;
			an->line_start = used[j].kind == TF_SPAN_LIST;
			while (nopen > 0 && !(ma[open[nopen - 1]].start <= used[j].start &&
								  used[j].end <= ma[open[nopen - 1]].end))
				nopen--;
			an->parent = nopen > 0 ? index_of_markup[open[nopen - 1]] : -1;
			k++;
			j++;
		}
	}
	u->nanchors = k;
	return 0;
}

/* -------------------------------------------------------------- place */

/* A point put into the translation: a span's bytes, or a markup point's place. */
typedef struct Item
{
	size_t		pos;			/* in the translation */
	int			anchor;
	size_t		start,			/* in the result */
				end;
} Item;

static int
cmp_item(const void *a, const void *b)
{
	const Item *x = a,
			   *y = b;

	if (x->pos != y->pos)
		return x->pos < y->pos ? -1 : 1;
	return x->anchor - y->anchor;
}

/* Does s[0..len) end where no space goes: nothing, whitespace, an opening bracket or quote? */
static bool
opens(const char *s, size_t len)
{
	int32_t		k = (int32_t) len;
	UChar32		c;

	if (len == 0)
		return true;
	U8_PREV((const uint8_t *) s, 0, k, c);
	if (c < 0)
		return true;
	return u_isspace(c) || u_charType(c) == U_START_PUNCTUATION || u_charType(c) == U_INITIAL_PUNCTUATION;
}

/* Does s[i..len) start with a letter, digit or opening bracket, before which a space goes? */
static bool
wants_space_before(const char *s, size_t len, size_t i)
{
	int32_t		k = (int32_t) i;
	UChar32		c;

	if (i >= len)
		return false;
	U8_NEXT((const uint8_t *) s, k, (int32_t) len, c);
	return c >= 0 && (u_isalnum(c) || u_charType(c) == U_START_PUNCTUATION ||
					  u_charType(c) == U_INITIAL_PUNCTUATION);
}

/* Bytes the items put in before offset o of the translation (total: all of them). */
static size_t
added_before(const Item *items, const size_t *added, int n, size_t o, size_t total)
{
	int			lo = 0,
				hi = n;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (items[mid].pos < o)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n ? added[lo] : total;
}

int
tf_unit_place(const TfUnit *u, const char *t, size_t tlen,
			  const int *best_src, const int *best_tgt, const SpmAlloc *a,
			  char **out, size_t *outlen, TfPlaced *placed, TfPlaced **ranges)
{
	int			n = u->nanchors;
	TfWord	   *sw,
			   *tw;
	int			nsw = tf_text_words(u->text, u->len, a, &sw);
	int			ntw = tf_text_words(t, tlen, a, &tw);
	TfPlaceIn  *in = alloc0(a, sizeof(TfPlaceIn) * ((size_t) n + 1));
	TfPlaceOut *po = alloc0(a, sizeof(TfPlaceOut) * ((size_t) n + 1));
	Item	   *items = alloc0(a, sizeof(Item) * ((size_t) n + 1));
	size_t	   *added = alloc0(a, sizeof(size_t) * ((size_t) n + 1));
	size_t	   *rs = alloc0(a, sizeof(size_t) * ((size_t) n + 1));
	size_t	   *re = alloc0(a, sizeof(size_t) * ((size_t) n + 1));
	size_t	   *empty_at = alloc0(a, sizeof(size_t) * ((size_t) n + 1));
	TfPlaced   *rg = alloc0(a, sizeof(TfPlaced) * ((size_t) n + 1));
	int			nitems = 0;
	size_t		cap = tlen + 1,
				len = 0,
				pos = 0;
	char	   *buf;

	if (nsw < 0 || ntw < 0 || !in || !po || !items || !added || !rs || !re || !empty_at || !rg)
		return -1;
	for (int i = 0; i < n; i++)
	{
		const TfUnitAnchor *an = &u->anchors[i];

		in[i].parent = an->parent;
		in[i].point = an->point;
		if (an->point)
			in[i].s0 = in[i].s1 = tf_word_at(sw, nsw, an->start);
		else
		{
			in[i].s0 = word_ending_after(sw, nsw, an->start);
			in[i].s1 = tf_word_at(sw, nsw, an->end);
			if (in[i].s1 < in[i].s0)
				in[i].s1 = in[i].s0;
		}
		cap += an->insert_len + 2;
	}
	{
		int		   *scratch = a->alloc(a->ctx, sizeof(int) * TF_PLACE_SCRATCH(nsw, n));

		if (scratch == NULL)
			return -1;
		tf_place_anchors(ntw, best_src, nsw, best_tgt, n, in, po, scratch);
	}

	/* the points, in order of place */
	for (int i = 0; i < n; i++)
	{
		const TfUnitAnchor *an = &u->anchors[i];
		int			k = po[i].t0;

		if (!an->point)
			continue;
		if (ntw == 0)
			items[nitems].pos = an->start < tlen ? an->start : tlen;
		else if (an->start == 0 && an->insert != NULL && u->len > 0 && is_space(u->text[0]) &&
				 is_space(t[0]))
		{
			/* only spans before it ("„- Ein"): first, before the whitespace the spans left */
			items[nitems].pos = 0;
		}
		else if (an->line_start)
		{
			/* the start of the target line of the word aligned to the source word after it */
			int			s0 = in[i].s0;
			int			tk = s0 >= 0 && s0 < nsw && best_tgt[s0] >= 0 && best_tgt[s0] < ntw ? best_tgt[s0] :
				k < ntw ? k : ntw - 1;
			size_t		p = tw[tk].start;

			while (p > 0 && t[p - 1] != '\n')
				p--;
			while (p < tlen && (t[p] == ' ' || t[p] == '\t'))
				p++;
			items[nitems].pos = p;
		}
		else if (k == 0)
			items[nitems].pos = tw[0].start;
		else if (an->insert != NULL && an->ws_before && !an->ws_after && k < ntw &&
				 wants_space_before(u->text, u->len, an->start) &&
				 !(i + 1 < n && u->anchors[i + 1].point && u->anchors[i + 1].start == an->start))
		{
			/*
			 * glued to the word after it (not to another span, nor to the
			 * sentence's full stop: "#12."), as an opening quote is: right
			 * before that word's target
			 */
			items[nitems].pos = tw[k].start;
		}
		else
		{
			/* after the word's punctuation if it was after the source word's ("Wiese.<br>") */
			int			sp = in[i].s0 - 1;

			items[nitems].pos = sp >= 0 && sp < nsw && sw[sp].ce < sw[sp].end && an->start >= sw[sp].end ?
				tw[k - 1].end : tw[k - 1].ce;
		}
		items[nitems].anchor = i;
		nitems++;
	}
	qsort(items, nitems, sizeof(Item), cmp_item);

	/* the translation with the spans in, a space where the source had one */
	buf = a->alloc(a->ctx, cap);
	if (buf == NULL)
		return -1;
	for (int k = 0; k < nitems; k++)
	{
		const TfUnitAnchor *an = &u->anchors[items[k].anchor];

		memcpy(buf + len, t + pos, items[k].pos - pos);
		len += items[k].pos - pos;
		pos = items[k].pos;
		added[k] = len - pos;
		/* spans side by side keep the space between them ("Bar“ ★★★": “ is Pi, yet closes here) */
		if (an->ws_before && (!opens(buf, len) ||
							  (k > 0 && items[k - 1].pos == pos && u->anchors[items[k - 1].anchor].ws_after &&
							   len > 0 && buf[len - 1] != ' ')))
			buf[len++] = ' ';
		items[k].start = len;
		if (an->insert)
		{
			memcpy(buf + len, an->insert, an->insert_len);
			len += an->insert_len;
		}
		items[k].end = len;
		if (an->ws_after && wants_space_before(t, tlen, pos))
			buf[len++] = ' ';
		rg[items[k].anchor].start = items[k].start;
		rg[items[k].anchor].end = items[k].end;
	}
	memcpy(buf + len, t + pos, tlen - pos);
	len += tlen - pos;
	buf[len] = '\0';

	/* the elements' ranges, moved by what went in before them ... */
	for (int i = 0; i < n; i++)
	{
		size_t		os,
					oe;

		if (u->anchors[i].point)
			continue;
		os = po[i].t1 > po[i].t0 ? tw[po[i].t0].cs :
			ntw == 0 ? (u->anchors[i].start < tlen ? u->anchors[i].start : tlen) :
			po[i].t0 == 0 ? tw[0].cs : tw[po[i].t0 - 1].ce;
		oe = po[i].t1 > po[i].t0 ? tw[po[i].t1 - 1].ce : os;
		rs[i] = os + added_before(items, added, nitems, os, len - tlen);
		re[i] = oe + added_before(items, added, nitems, oe, len - tlen);
		if (re[i] < rs[i])
			re[i] = rs[i];
		if (po[i].t1 == po[i].t0)
		{
			/* no words: around its points only, if it has any */
			empty_at[i] = rs[i];
			rs[i] = SIZE_MAX;
			re[i] = 0;
		}
	}
	/* ... and around the points inside them */
	for (int k = 0; k < nitems; k++)
		for (int p = u->anchors[items[k].anchor].parent; p >= 0 && p < n; p = u->anchors[p].parent)
		{
			rs[p] = items[k].start < rs[p] ? items[k].start : rs[p];
			re[p] = items[k].end > re[p] ? items[k].end : re[p];
		}
	for (int i = 0; i < n; i++)
	{
		if (u->anchors[i].point)
			continue;
		if (rs[i] == SIZE_MAX)
			rs[i] = re[i] = empty_at[i];
		rg[i].start = rs[i];
		rg[i].end = re[i];
	}
	/*
	 * A text that ends with a span ("... Bar ★★★") ends so: the whitespace
	 * before the span, left at the end of the unit's text, went back with
	 * the span already (ws_before), not again after the translation.
	 */
	for (int i = 0; i < n; i++)
		if (u->anchors[i].at_end && u->len > 0 && is_space(u->text[u->len - 1]))
		{
			while (len > 0 && is_space(buf[len - 1]))
				len--;
			buf[len] = '\0';
			for (int r = 0; r < n; r++)
			{
				rg[r].start = rg[r].start > len ? len : rg[r].start;
				rg[r].end = rg[r].end > len ? len : rg[r].end;
			}
			break;
		}
	for (int i = 0; i < n && placed != NULL; i++)
		if (u->anchors[i].markup >= 0 && u->anchors[i].markup < u->nmarkup)
			placed[u->anchors[i].markup] = rg[i];
	*out = buf;
	*outlen = len;
	if (ranges != NULL)
		*ranges = rg;
	return 0;
}
