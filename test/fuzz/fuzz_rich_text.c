/*
 * libFuzzer harness for translate()'s path through markup and spans
 * without the model (src/core/markup_*.c, spans.c, rich_text.c,
 * placement.c); make fuzz-rich-text.  The first byte picks the format
 * (0: plain text, 1: HTML, 2: XML) and seeds a pseudo-random alignment;
 * the rest is the document.  Each unit (the text, or each block) loses
 * its spans, is "translated" (its words reversed, or kept: byte 0 bit 7),
 * gets an alignment from the seed (often nonsense), and is placed and
 * rendered.  Checked, abort() otherwise:
 *  - every span is in the result exactly once, byte for byte, at the
 *    range tf_unit_place gives it, and nothing else was added but spaces;
 *  - markup re-parses with the same elements as the input's tree (HTML:
 *    but for p, html, head and body, which libxml2 implies and merges as
 *    it reads; see markup_census.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "markup.h"
#include "rich_text.h"
#include "spans.h"
#include "fuzz_arena.h"
#include "markup_census.h"

bool		(*spm_interrupt_pending) (void) = NULL;

/* the server's interrupt hook (spm_model.c defines it there): none here */
void		(*spm_interrupt_hook) (void) = NULL;

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(what) (fprintf(stderr, "fuzz_rich_text: %s\n", what), abort())

static uint32_t
next_rand(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

/* The unit's text with its words in reverse order (whitespace kept in place), or as it is. */
static char *
translate_words(const TfUnit *u, bool reverse, const SpmAlloc *a, size_t *len)
{
	TfWord	   *w;
	int			n = tf_text_words(u->text, u->len, a, &w);
	char	   *t = a->alloc(a->ctx, u->len + 1);
	size_t		o = 0,
				pos = 0;

	if (n < 0 || t == NULL)
		FAIL("out of memory");
	for (int i = 0; i < n; i++)
	{
		const TfWord *x = reverse ? &w[n - 1 - i] : &w[i];

		memcpy(t + o, u->text + pos, w[i].start - pos);	/* the whitespace before word i */
		o += w[i].start - pos;
		memcpy(t + o, u->text + x->start, x->end - x->start);
		o += x->end - x->start;
		pos = w[i].end;
	}
	memcpy(t + o, u->text + pos, u->len - pos);
	o += u->len - pos;
	t[o] = '\0';
	*len = o;
	return t;
}

/* Place unit u's anchors in a pretend translation; check the spans; the result and its ranges. */
static void
place(const TfUnit *u, bool reverse, uint32_t *seed, const SpmAlloc *a, TfRendered *r)
{
	size_t		tlen,
				outlen,
				inserted = 0,
				trail = 0;
	char	   *t = translate_words(u, reverse, a, &tlen);
	TfWord	   *sw,
			   *tw;
	int			nsw = tf_text_words(u->text, u->len, a, &sw);
	int			ntw = tf_text_words(t, tlen, a, &tw);
	int		   *best_src = a->alloc(a->ctx, sizeof(int) * (ntw + 1));
	int		   *best_tgt = a->alloc(a->ctx, sizeof(int) * (nsw + 1));
	TfPlaced   *placed = a->alloc(a->ctx, sizeof(TfPlaced) * (u->nmarkup + 1));
	TfPlaced   *ranges;
	char	   *out;

	if (nsw < 0 || ntw < 0 || !best_src || !best_tgt || !placed)
		FAIL("out of memory");
	for (int i = 0; i < ntw; i++)
	{
		uint32_t	r = next_rand(seed);

		/* mostly the true alignment of the reversal, sometimes noise or out of range */
		best_src[i] = r % 8 == 0 ? (int) (r % (nsw + 3)) - 2 : reverse ? nsw - 1 - i : i;
	}
	for (int i = 0; i < nsw; i++)
	{
		uint32_t	r = next_rand(seed);

		best_tgt[i] = r % 8 == 0 ? (int) (r % (ntw + 3)) - 2 : reverse ? ntw - 1 - i : i;
	}
	if (tf_unit_place(u, t, tlen, best_src, best_tgt, a, &out, &outlen, placed, &ranges) < 0)
		FAIL("tf_unit_place failed");
	/* every span once, at its range; nothing else added but spaces */
	for (int i = 0; i < u->nanchors; i++)
	{
		const TfUnitAnchor *an = &u->anchors[i];

		if (ranges[i].start > ranges[i].end || ranges[i].end > outlen)
			FAIL("a range outside the result");
		if (an->insert == NULL)
			continue;
		if (ranges[i].end - ranges[i].start != an->insert_len ||
			memcmp(out + ranges[i].start, an->insert, an->insert_len) != 0)
			FAIL("a span is not at its range, byte for byte");
		for (int j = 0; j < i; j++)
			if (u->anchors[j].insert && ranges[j].start < ranges[i].end && ranges[i].start < ranges[j].end)
				FAIL("two spans overlap in the result");
		inserted += an->insert_len;
	}
	/* a text that ends with a span loses the translation's trailing whitespace (rich_text.c) */
	for (int i = 0; i < u->nanchors; i++)
		if (u->anchors[i].at_end)
		{
			while (trail < tlen && strchr(" \t\n\r\v\f", t[tlen - 1 - trail]) != NULL)
				trail++;
			break;
		}
	if (outlen + trail < tlen + inserted || outlen > tlen + inserted + 2 * (size_t) u->nanchors)
		FAIL("the result is not the translation plus the spans and spaces");
	if (strlen(out) != outlen)
		FAIL("the result has a NUL inside, or no NUL at its end");
	r->text = out;
	r->len = outlen;
	r->placed = placed;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Arena		arena = {0};
	SpmAlloc	a = {arena_alloc, &arena};
	int			fmt;
	bool		reverse;
	uint32_t	seed;
	const char *s;
	size_t		len;
	char		err[512];

	if (size < 2 || size > 16384 || !valid_utf8(data + 1, size - 1))
		return 0;
	fmt = data[0] % 3;
	reverse = (data[0] & 0x80) == 0;
	seed = data[0] * 2654435761u;
	s = (const char *) data + 1;
	len = size - 1;
	if (fmt == 0)
	{
		TfUnit		u;
		TfRendered	r;

		if (tf_unit_build(s, len, NULL, 0, TF_SPAN_ALL, &a, &u) < 0)
			FAIL("tf_unit_build failed");
		place(&u, reverse, &seed, &a, &r);
	}
	else
	{
		int			f = fmt == 1 ? TF_MARKUP_HTML : TF_MARKUP_XML;
		TfMarkupDoc *doc;
		const TfMarkupBlock *b;
		int			nb;
		TfRendered *r;
		char	   *out;
		size_t		outlen;
		uint64_t	before[4],
					after[4];

		if (tf_markup_parse(s, len, f, &a, &doc, err, sizeof(err)) < 0)
		{
			arena_free(&arena);
			return 0;
		}
		tf_markup_blocks(doc, &b, &nb);
		r = a.alloc(a.ctx, sizeof(TfRendered) * (nb + 1));
		for (int i = 0; i < nb; i++)
		{
			TfUnit		u;

			if (tf_unit_build(b[i].text, b[i].len, b[i].anchors, b[i].nanchors, TF_SPAN_ALL, &a, &u) < 0)
				FAIL("tf_unit_build failed");
			place(&u, reverse, &seed, &a, &r[i]);
		}
		if (tf_markup_render(doc, r, &a, &out, &outlen, err, sizeof(err)) < 0)
			FAIL("tf_markup_render failed");
		census(s, len, f, before);
		census(out, outlen, f, after);
		if (!(f == TF_MARKUP_HTML && colon_names(s, len)) &&
			(before[0] != after[0] || before[1] != after[1] || before[2] != after[2] ||
			 (f == TF_MARKUP_XML && before[3] != after[3])))
		{
			fprintf(stderr, "in:  %.*s\nout: %.*s\nelements %llu/%llu, implied %llu/%llu\n", (int) len, s, (int) outlen, out, (unsigned long long) before[0], (unsigned long long) after[0], (unsigned long long) before[3], (unsigned long long) after[3]);
			FAIL("the elements differ after rendering");
		}
	}
	arena_free(&arena);
	return 0;
}
