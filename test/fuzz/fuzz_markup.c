/*
 * libFuzzer harness for the HTML/XML block reader and renderer
 * (src/core/markup_*.c) alone, outside the server; make fuzz-markup.  The
 * first byte picks the format (bit 0: XML) and seeds the ranges; the rest
 * is the markup.  Rendered with the source blocks and with translations
 * (each block's words reversed, anchors at pseudo-random, often invalid
 * ranges), the output must re-parse, hold the same elements as the
 * input's tree, render again to itself (source), and each block's span
 * with its tags stripped must be its text.  abort() otherwise.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/HTMLparser.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include "markup.h"
#include "fuzz_arena.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(what) (fprintf(stderr, "fuzz_markup: %s\n", what), abort())

#include "markup_census.h"

void		(*spm_interrupt_hook) (void) = NULL;
bool		(*spm_interrupt_pending) (void) = NULL;

static bool
is_void(const char *name)
{
	static const char *const v[] = {"br", "img", "wbr", NULL};

	for (int i = 0; v[i]; i++)
		if (strcmp(v[i], name) == 0)
			return true;
	return false;
}

/* s[0..n) without tags, &amp; &lt; &gt; &quot; &#13; decoded, into out; its length */
static size_t
strip(const char *s, size_t n, char *out)
{
	size_t		k = 0;

	for (size_t i = 0; i < n; i++)
	{
		static const char *const ent[][2] = {{"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"},
		{"&quot;", "\""}, {"&#13;", "\r"}, {"&#10;", "\n"}, {"&#9;", "\t"}};
		int			e;

		if (s[i] == '<')
		{
			char		q = 0;

			for (i++; i < n && (q || s[i] != '>'); i++)
				if (q && s[i] == q)
					q = 0;
				else if (!q && (s[i] == '"' || s[i] == '\''))
					q = s[i];
			continue;
		}
		for (e = 0; e < 7 && s[i] == '&'; e++)
			if (strncmp(s + i, ent[e][0], strlen(ent[e][0])) == 0)
				break;
		if (s[i] == '&' && e < 7)
		{
			out[k++] = ent[e][1][0];
			i += strlen(ent[e][0]) - 1;
		}
		else
			out[k++] = s[i];
	}
	return k;
}

/* every element block whose points are void elements: its span stripped is its text */
static void
check_spans(const char *out, size_t outlen, const size_t *spans, const TfMarkupBlock *b,
			int nb, const TfRendered *r, int fmt)
{
	for (int i = 0; i < nb; i++)
	{
		const char *t = r ? r[i].text : b[i].text;
		size_t		tl = r ? r[i].len : b[i].len,
					k;
		bool		skip = false;
		char	   *st;

		if (spans[2 * i] > spans[2 * i + 1] || spans[2 * i + 1] > outlen)
			FAIL("line 160: if (spans[2 * i] > spans[2 * i + 1] || spans[2 * i");
		for (int j = 0; j < b[i].nanchors; j++)
			if (b[i].anchors[j].point && (fmt == TF_MARKUP_XML || !is_void(b[i].anchors[j].name) ||
										  strcmp(b[i].anchors[j].name, "br") == 0))
				skip = true;
		if (skip)
			continue;
		st = malloc(spans[2 * i + 1] - spans[2 * i] + 1);
		k = strip(out + spans[2 * i], spans[2 * i + 1] - spans[2 * i], st);
		if (k != tl || memcmp(st, t, k) != 0)
			FAIL("line 169: if (k != tl || memcmp(st, t, k) != 0)");
		free(st);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Arena		arena = {0};
	SpmAlloc	a = {arena_alloc, &arena};
	TfMarkupDoc *doc,
			   *doc2;
	const TfMarkupBlock *b;
	TfRendered *r;
	char		err[512],
			   *out1,
			   *out2,
			   *out3;
	size_t		len1,
				len2,
				len3,
			   *spans;
	int			fmt,
				nb;
	uint64_t	rng,
				c_in[4],
				c1[4],
				c3[4];

	if (size < 1 || !valid_utf8(data + 1, size - 1))
		return 0;
	fmt = (data[0] & 1) ? TF_MARKUP_XML : TF_MARKUP_HTML;
	rng = data[0] * 0x9E3779B97F4A7C15ULL + size;
	if (tf_markup_parse((const char *) data + 1, size - 1, fmt, &a, &doc, err, sizeof(err)) != 0)
	{
		if (err[0] == '\0')
			FAIL("line 205: if (err[0] == '0')");
		arena_free(&arena);
		return 0;
	}
	tf_markup_blocks(doc, &b, &nb);
	spans = arena_alloc(&arena, (2 * nb + 1) * sizeof(size_t));

	/* (a) the source: re-parses, renders to itself again */
	if (tf_markup_render_spans(doc, NULL, &a, &out1, &len1, spans, err, sizeof(err)) != 0 ||
		strlen(out1) != len1)
		FAIL("line 215: if (tf_markup_render_spans(doc, NULL, &a, &out1, &");
	check_spans(out1, len1, spans, b, nb, NULL, fmt);
	if (tf_markup_parse(out1, len1, fmt, &a, &doc2, err, sizeof(err)) != 0 ||
		tf_markup_render(doc2, NULL, &a, &out2, &len2, err, sizeof(err)) != 0)
		FAIL("line 219: if (tf_markup_parse(out1, len1, fmt, &a, &doc2, er");
	if (fmt == TF_MARKUP_XML && (len1 != len2 || memcmp(out1, out2, len1) != 0))
		FAIL("line 221: if (fmt == TF_MARKUP_XML && (len1 != len2 || memcm");

	/* (b) translations: each block's words reversed, anchors anywhere */
	r = arena_alloc(&arena, (nb + 1) * sizeof(TfRendered));
	for (int i = 0; i < nb; i++)
	{
		char	   *t = arena_alloc(&arena, b[i].len + 2);
		TfPlaced   *pl = arena_alloc(&arena, (b[i].nanchors + 1) * sizeof(TfPlaced));
		size_t		o = 0,
					e = b[i].len;

		while (e > 0)
		{
			size_t		s;

			while (e > 0 && strchr(" \t\n\r\f", b[i].text[e - 1]))
				e--;
			for (s = e; s > 0 && !strchr(" \t\n\r\f", b[i].text[s - 1]); s--)
				;
			if (s == e)
				break;
			if (o)
				t[o++] = ' ';
			memcpy(t + o, b[i].text + s, e - s);
			o += e - s;
			e = s;
		}
		if (o == 0)
			t[o++] = 'x';
		for (int j = 0; j < b[i].nanchors; j++)
		{
			rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
			pl[j].start = (rng >> 33) % (o + 3);
			pl[j].end = (rng >> 13) % 7 == 0 ? SIZE_MAX : pl[j].start + (rng >> 20) % (o + 1);
		}
		r[i].text = t;
		r[i].len = o;
		r[i].placed = (rng & 0x300) == 0x300 ? NULL : pl;
	}
	if (tf_markup_render_spans(doc, r, &a, &out3, &len3, spans, err, sizeof(err)) != 0 ||
		strlen(out3) != len3)
		FAIL("line 262: if (tf_markup_render_spans(doc, r, &a, &out3, &len");
	check_spans(out3, len3, spans, b, nb, r, fmt);
	if (tf_markup_parse(out3, len3, fmt, &a, &doc2, err, sizeof(err)) != 0)
		FAIL("line 265: if (tf_markup_parse(out3, len3, fmt, &a, &doc2, er");
	census((const char *) data + 1, size - 1, fmt, c_in);
	census(out1, len1, fmt, c1);
	census(out3, len3, fmt, c3);
	if (getenv("FUZZ_MARKUP_SHOW"))
		fprintf(stderr, "out1: %s\nout3: %s\ncensus %d %d %d %d %d %d %d\n", out1, out3, (int) c1[1], (int) c3[1], (int) c1[3],
				(int) c_in[0], (int) c1[0], (int) c3[0], (int) c3[3]);
	/* (p, html, head and body apart: libxml2 implies and merges them; see markup_census.h) */
	if (!(fmt == TF_MARKUP_HTML && colon_names((const char *) data + 1, size - 1)) &&
		(memcmp(c1, c3, 3 * sizeof(uint64_t)) != 0 ||
		 (fmt == TF_MARKUP_XML && memcmp(c_in, c1, sizeof(c1)) != 0)))
		FAIL("the elements of the source's rendering and the translation's differ");
	arena_free(&arena);
	return 0;
}
