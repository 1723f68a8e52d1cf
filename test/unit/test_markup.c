/*
 * test_markup.c
 *		src/core/markup_*.c outside the server: blocks and anchors of HTML and
 *		XML, rendering with source and with translated text, repaired
 *		ranges, hostile input.  Prints ok/not ok per check, exits 1 on a
 *		failure.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "markup.h"

void		(*spm_interrupt_hook) (void) = NULL;
bool		(*spm_interrupt_pending) (void) = NULL;

static int	ntests,
			nfailed;

typedef struct Arena
{
	void	  **ptrs;
	size_t		n,
				cap;
} Arena;

static void *
arena_alloc(void *ctx, size_t size)
{
	Arena	   *a = ctx;
	void	   *p = calloc(1, size ? size : 1);

	if (p == NULL)
		abort();
	if (a->n == a->cap)
	{
		a->cap = a->cap ? a->cap * 2 : 64;
		a->ptrs = realloc(a->ptrs, a->cap * sizeof(void *));
		if (a->ptrs == NULL)
			abort();
	}
	a->ptrs[a->n++] = p;
	return p;
}

static Arena arena;
static SpmAlloc alloc = {arena_alloc, &arena};

static void
check(int ok, const char *fmt,...)
{
	va_list		ap;
	char		msg[512];

	ntests++;
	if (!ok)
		nfailed++;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	for (char *c = msg; *c; c++)
		if (*c == '\n')
			*c = ' ';
	printf("%s %d - %s\n", ok ? "ok" : "not ok", ntests, msg);
}

static TfMarkupDoc *
parse(const char *s, int fmt)
{
	TfMarkupDoc *d;
	char		err[256];

	if (tf_markup_parse(s, strlen(s), fmt, &alloc, &d, err, sizeof(err)) != 0)
	{
		printf("# parse failed: %s\n", err);
		return NULL;
	}
	return d;
}

/* blocks as one string: text|name[s,e)p^parent ... ; next block */
static char *
dump(const TfMarkupDoc *d)
{
	static char buf[8192];
	const TfMarkupBlock *b;
	int			nb;
	size_t		o = 0;

	buf[0] = '\0';
	if (d == NULL)
		return "(null)";
	tf_markup_blocks(d, &b, &nb);
	for (int i = 0; i < nb && o < sizeof(buf) - 512; i++)
	{
		o += snprintf(buf + o, sizeof(buf) - o, "%s%s%s%.*s", i ? " ; " : "",
					  b[i].attr ? b[i].attr : "", b[i].attr ? "=" : "", (int) b[i].len, b[i].text);
		for (int j = 0; j < b[i].nanchors && o < sizeof(buf) - 256; j++)
			o += snprintf(buf + o, sizeof(buf) - o, "|%s[%zu,%zu)%s%s", b[i].anchors[j].name,
						  b[i].anchors[j].start, b[i].anchors[j].end,
						  b[i].anchors[j].point ? "p" : "",
						  b[i].anchors[j].parent >= 0 ? "^" : "");
	}
	return buf;
}

static char *
render(const TfMarkupDoc *d, const TfRendered *r)
{
	char	   *out;
	size_t		len;
	char		err[256];

	if (d == NULL || tf_markup_render(d, r, &alloc, &out, &len, err, sizeof(err)) != 0)
		return "(render failed)";
	if (strlen(out) != len)
		return "(bad length)";
	return out;
}

static void
expect_blocks(const char *in, int fmt, const char *want)
{
	char	   *got = dump(parse(in, fmt));

	check(strcmp(got, want) == 0, "blocks of %.60s", in);
	if (strcmp(got, want) != 0)
		printf("#   got:  %s\n#   want: %s\n", got, want);
}

static void
expect_identity(const char *in, int fmt, const char *want)
{
	char	   *got = render(parse(in, fmt), NULL);

	if (want == NULL)
		want = in;
	check(strcmp(got, want) == 0, "identity render of %.60s", in);
	if (strcmp(got, want) != 0)
		printf("#   got:  %s\n#   want: %s\n", got, want);
}

/* element names with their counts, of a libxml2 tree, sorted into a string */
static void
count_xml(xmlNodePtr n, char *acc, size_t cap)
{
	for (; n; n = n->next)
		if (n->type == XML_ELEMENT_NODE)
		{
			strncat(acc, (const char *) n->name, cap - strlen(acc) - 2);
			strncat(acc, " ", cap - strlen(acc) - 2);
			count_xml(n->children, acc, cap);
		}
}

static int
cmpc(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* the element names of XML text s (wrapped), sorted: NULL if not well-formed */
static char *
xml_names(const char *s)
{
	size_t		n = strlen(s);
	char	   *w = malloc(n + 32),
			   *acc = calloc(1, 65536),
			   *out = calloc(1, 65536),
			   *words[4096];
	int			nw = 0;
	xmlDocPtr	doc;

	if (w == NULL || acc == NULL || out == NULL)
		abort();
	sprintf(w, "<w>%s</w>", s);
	doc = xmlReadMemory(w, (int) strlen(w), NULL, "UTF-8", XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_NONET);
	free(w);
	if (doc == NULL)
		return NULL;
	count_xml(xmlDocGetRootElement(doc)->children, acc, 65536);
	xmlFreeDoc(doc);
	for (char *t = strtok(acc, " "); t && nw < 4096; t = strtok(NULL, " "))
		words[nw++] = t;
	qsort(words, nw, sizeof(char *), cmpc);
	for (int i = 0; i < nw; i++)
		strcat(strcat(out, words[i]), " ");
	free(acc);
	return out;
}

/* the text of s with tags removed and &amp; &lt; &gt; &quot; decoded */
static char *
strip(const char *s, size_t n)
{
	char	   *o = malloc(n + 1);
	size_t		k = 0;

	for (size_t i = 0; i < n; i++)
	{
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
		if (s[i] == '&')
		{
			static const char *const ent[][2] = {{"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#13;", "\r"}};
			int			e;

			for (e = 0; e < 5; e++)
				if (strncmp(s + i, ent[e][0], strlen(ent[e][0])) == 0)
					break;
			if (e < 5)
			{
				o[k++] = ent[e][1][0];
				i += strlen(ent[e][0]) - 1;
				continue;
			}
		}
		o[k++] = s[i];
	}
	o[k] = '\0';
	return o;
}

static void
test_html_blocks(void)
{
	expect_blocks("<p>Ein Mann fährt <b>Fahrrad</b>.</p>", TF_MARKUP_HTML,
				  "Ein Mann fährt Fahrrad.|b[16,23)");
	expect_identity("<p>Ein Mann fährt <b>Fahrrad</b>.</p>", TF_MARKUP_HTML, NULL);
	expect_blocks("Hallo <b>Welt</b>", TF_MARKUP_HTML, "Hallo Welt|b[6,10)");
	expect_identity("Hallo <b>Welt</b>", TF_MARKUP_HTML, NULL);
	expect_blocks("<p>a <b>b <i>c</i> d</b> e</p>", TF_MARKUP_HTML, "a b c d e|b[2,7)|i[4,5)^");
	expect_blocks("<p>one<br>two <img src=\"x.png\"> three</p>", TF_MARKUP_HTML,
				  "one\ntwo  three|br[3,3)p|img[8,8)p");
	expect_blocks("<p>Run <code>ls -l</code> now</p>", TF_MARKUP_HTML, "Run  now|code[4,4)p");
	expect_identity("<p>Run <code>ls -l</code> now</p>", TF_MARKUP_HTML, NULL);
	expect_blocks("<div><pre>x <b>y</b></pre><script>if (a < b) s = \"<p>\";</script><style>p > b {}</style><p>Hi</p></div>",
				  TF_MARKUP_HTML, "Hi");
	expect_identity("<div><pre>x <b>y</b></pre><script>if (a < b) s = \"<p>\";</script><style>p > b {}</style><p>Hi</p></div>",
					TF_MARKUP_HTML, NULL);
	expect_blocks("<p>Ask <span translate=\"no\">Foo Bar</span> or <span class=\"x notranslate\">Baz</span>.</p><div translate=\"no\"><p>Nope</p></div>",
				  TF_MARKUP_HTML, "Ask  or .|span[4,4)p|span[8,8)p");
	expect_blocks("<p title=\"A title\">See <img alt=\"a cat\" src=\"c.jpg\"> here <a href=\"#\" title=\"Link\">now</a></p><img alt=\"lone\">",
				  TF_MARKUP_HTML, "title=A title ; See  here now|img[4,4)p|a[10,13) ; alt=a cat ; title=Link ; alt=lone");
	expect_blocks("<p>Fish &amp; chips&nbsp;&#233;t&eacute;</p>", TF_MARKUP_HTML, "Fish & chips\xC2\xA0\xC3\xA9t\xC3\xA9");
	expect_identity("<p>Fish &amp; chips&nbsp;&#233;</p>", TF_MARKUP_HTML, "<p>Fish &amp; chips\xC2\xA0\xC3\xA9</p>");
	expect_blocks("<ul>\n  <li>One <em>two</em></li>\n  <li>  Three  </li>\n</ul>", TF_MARKUP_HTML,
				  "One two|em[4,7) ; Three");
	expect_identity("<ul>\n  <li>One <em>two</em></li>\n  <li>  Three  </li>\n</ul>", TF_MARKUP_HTML, NULL);
	expect_blocks("<p>Hi <!-- note --> there</p>", TF_MARKUP_HTML, "Hi  there|#comment[3,3)p");
	expect_blocks("<p><code>only code</code></p><p> </p>", TF_MARKUP_HTML, "");
	expect_blocks("<table><tr><td>A</td><td>B <a href=x><div>blk</div></a></td></tr></table>", TF_MARKUP_HTML,
				  "A ; B ; blk");
	expect_identity("<p>x<input type=\"checkbox\" checked disabled></p><img alt=\"\">", TF_MARKUP_HTML,
					"<p>x<input type=\"checkbox\" checked=\"checked\" disabled=\"disabled\"></p><img alt=\"\">");
}

/* what fuzzing found */
static void
test_regressions(void)
{
	/* a run beginning with a point */
	expect_blocks("<p><!-- c -->Hello <br>world</p>", TF_MARKUP_HTML, "Hello \nworld|#comment[0,0)p|br[6,6)p");
	expect_identity("<p><!-- c -->Hello <br>world</p>", TF_MARKUP_HTML, NULL);
	/* libxml2 gives wbr children: then it is no void element */
	expect_identity("<li>y<wbr><t>b</t></li>", TF_MARKUP_HTML, "<li>y<wbr><t>b</t></wbr></li>");
	/* a DOCTYPE inside a fragment is dropped */
	expect_identity("<p>a</p><!DOCTYPE html><p>b</p>", TF_MARKUP_HTML, "<p>a</p><p>b</p>");
	/* libxml2 drops the control character: the script text must not end the script */
	expect_identity("<script>a</sc\x03ript>b</script><p>x</p>", TF_MARKUP_HTML,
					"<script>a<\\/script>b</script><p>x</p>");
}

static void
test_html_document(void)
{
	const char *doc = "<!DOCTYPE html>\n<html lang=\"de\"><head><title>Titel</title><meta charset=\"utf-8\"></head><body><h1>Hallo <i>Welt</i></h1>\n<p>Ein <b>Test</b>.</p></body></html>\n";

	expect_blocks(doc, TF_MARKUP_HTML, "Titel ; Hallo Welt|i[6,10) ; Ein Test.|b[4,8)");
	expect_identity(doc, TF_MARKUP_HTML, NULL);
	check(tf_markup_is_document(doc, strlen(doc), TF_MARKUP_HTML), "doctype is a document");
	check(!tf_markup_is_document("<p>x</p>", 8, TF_MARKUP_HTML), "p is a fragment");
}

static void
test_html_malformed(void)
{
	expect_blocks("<p>a <b>b <i>c</p> d", TF_MARKUP_HTML, "a b c|b[2,5)|i[4,5)^ ; d");
	expect_identity("<p>a <b>b <i>c</p> d", TF_MARKUP_HTML, "<p>a <b>b <i>c</i></b></p> d");
	expect_blocks("<div><p>open <b>bold", TF_MARKUP_HTML, "open bold|b[5,9)");
	expect_identity("<div><p>open <b>bold", TF_MARKUP_HTML, "<div><p>open <b>bold</b></p></div>");
	expect_blocks("stray </x> end </tf-fragment> after", TF_MARKUP_HTML, "stray  end  after");
	expect_identity("stray </x> end </tf-fragment> after</tf-fragment-1>", TF_MARKUP_HTML, "stray  end  after");
	expect_identity("<p a=1 b='2' c=\"&amp;\"/>x &< y", TF_MARKUP_HTML, "<p a=\"1\" b=\"2\" c=\"&amp;\"></p>x &amp;&lt; y");
	/* the fragment's wrapper is a name that no end tag in the input begins: not 0-11 here */
	{
		char		in[4096],
					want[1024],
				   *p = in,
				   *w = want;
		TfMarkupDoc *d;
		char		err[256];

		p += sprintf(p, "a");
		w += sprintf(w, "a");
		for (int k = 0; k < 12; k++)
		{
			p += k ? sprintf(p, " </TF-fragment-%d> x%d", k, k) : sprintf(p, " </tf-fragment> x%d", k);
			w += sprintf(w, "  x%d", k);
		}
		expect_blocks(in, TF_MARKUP_HTML, want);
		/* all 100 names taken: refused, not cut */
		p = in;
		for (int k = 0; k < 100; k++)
			p += k ? sprintf(p, "</tf-fragment-%d>", k) : sprintf(p, "</tf-fragment>");
		check(tf_markup_parse(in, strlen(in), TF_MARKUP_HTML, &alloc, &d, err, sizeof(err)) == TF_MARKUP_LIMIT,
			  "end tags of all 100 wrapper names are refused: %s", err);
	}
}

static void
test_xml(void)
{
	TfMarkupDoc *d;
	char		err[256];
	const char *bad = "<p>one\ntwo\nthree</b></p>";
	const char *ns = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<doc xmlns=\"urn:a\" xmlns:x=\"urn:x\">\n  <x:para id=\"1\">Hello <x:em>big</x:em> world<![CDATA[ <raw> ]]>!</x:para>\n  <note translate=\"no\">keep</note>\n</doc>\n";
	int			rc;

	rc = tf_markup_parse(bad, strlen(bad), TF_MARKUP_XML, &alloc, &d, err, sizeof(err));
	check(rc == -1 && strncmp(err, "line 3: Opening and ending tag mismatch: p line 1 and b", 55) == 0,
		  "malformed XML: %s", err);
	check(!tf_markup_is_document(bad, strlen(bad), TF_MARKUP_XML), "a fragment's error is content");
	rc = tf_markup_parse("<?xml version=\"1.0\"?>\n<a>", 26, TF_MARKUP_XML, &alloc, &d, err, sizeof(err));
	check(rc == -1 && tf_markup_is_document("<?xml version=\"1.0\"?>\n<a>", 26, TF_MARKUP_XML) &&
		  strncmp(err, "line 2:", 7) == 0, "malformed XML document: %s", err);
	expect_blocks("Hello <b>world</b>", TF_MARKUP_XML, "Hello world|b[6,11)");
	expect_identity("Hello <b>world</b> <i/>", TF_MARKUP_XML, NULL);
	expect_blocks("<a>\n <b>x <c/> y</b>\n <d>  </d>\n</a><e>z</e>", TF_MARKUP_XML, "x  y|c[2,2) ; z");
	expect_blocks(ns, TF_MARKUP_XML, "Hello big world!|x:em[6,9)|#cdata[15,15)p");
	expect_identity(ns, TF_MARKUP_XML, NULL);
	expect_identity("<!DOCTYPE r [<!ENTITY e \"ent\">]>\n<r>a &e; b &amp; &#233;</r>", TF_MARKUP_XML,
					"<!DOCTYPE r [\n<!ENTITY e \"ent\">\n]>\n<r>a &e; b &amp; \xC3\xA9</r>\n");
	expect_blocks("<!DOCTYPE r [<!ENTITY e \"ent\">]>\n<r>a &e; b</r>", TF_MARKUP_XML, "a  b|#entity[2,2)p");
	expect_identity("<!DOCTYPE a [<!ENTITY e \"E\">]><a t=\"x&amp;&lt;&quot;&#10;y\" u='&e;'><?pi data?><!--c--></a>", TF_MARKUP_XML,
					"<!DOCTYPE a [\n<!ENTITY e \"E\">\n]>\n<a t=\"x&amp;&lt;&quot;&#10;y\" u=\"&e;\"><?pi data?><!--c--></a>\n");
	rc = tf_markup_parse("<a>&undefined;</a>", 18, TF_MARKUP_XML, &alloc, &d, err, sizeof(err));
	check(rc == -1, "undefined entity: %s", err);
	{
		const char *lol = "<!DOCTYPE l [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\"><!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\"><!ENTITY d \"&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;\"><!ENTITY e \"&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;\"><!ENTITY f \"&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;\"><!ENTITY g \"&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;\">]><l>&g;&g;&g;&g;&g;&g;&g;&g;</l>";
		clock_t		t0 = clock();

		rc = tf_markup_parse(lol, strlen(lol), TF_MARKUP_XML, &alloc, &d, err, sizeof(err));
		check((double) (clock() - t0) / CLOCKS_PER_SEC < 2.0, "entity expansion bounded (rc %d %s)", rc, rc ? err : "");
	}
	{
		const char *ext = "<!DOCTYPE r [<!ENTITY x SYSTEM \"file:///etc/passwd\">]><r>&x;</r>";

		rc = tf_markup_parse(ext, strlen(ext), TF_MARKUP_XML, &alloc, &d, err, sizeof(err));
		check(rc != 0 || strstr(render(d, NULL), "root:") == NULL, "external entity not loaded");
	}
}

/* render with translations and bad ranges: well-formed, every element once, text stripped = translation */
static void
test_render_ranges(void)
{
	const char *in = "<doc><p>Ein <b>Mann <i>fährt</i></b> <x:y xmlns:x=\"u\"/> <c translate=\"no\">k</c> Fahrrad.</p><p>Zwei</p></doc>";
	TfMarkupDoc *d = parse(in, TF_MARKUP_XML);
	const TfMarkupBlock *b;
	int			nb;
	const char *names = xml_names(in);
	static const size_t bad[][8] = {
		{0, 5, 2, 9, 14, 14, 3, 3},				/* reasonable */
		{100, 2, 7, 300, 5, 1, 99, 99},			/* reversed, out of bounds */
		{3, 9, 0, 20, 1, 4, 2, 2},				/* child outside parent */
		{1, 2, 1, 2, 1, 2, 1, 2},				/* all the same, inside a character */
		{SIZE_MAX, SIZE_MAX, SIZE_MAX, 0, SIZE_MAX, SIZE_MAX, 0, SIZE_MAX},
	};
	const char *tr = "A man ríde\xC3\xA9s a bïcycle & <more>.";

	if (d == NULL)
	{
		check(0, "parse for ranges");
		return;
	}
	tf_markup_blocks(d, &b, &nb);
	check(nb == 2 && b[0].nanchors == 4, "ranges: blocks %s", dump(d));
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
	{
		TfPlaced	pl[4];
		TfRendered	r[2];
		size_t		spans[4];
		char	   *out,
				   *got,
				   *st;
		size_t		olen;
		char		err[256];
		int			rc;

		for (int j = 0; j < 4; j++)
			pl[j].start = bad[k][2 * j], pl[j].end = bad[k][2 * j + 1];
		r[0].text = tr;
		r[0].len = strlen(tr);
		r[0].placed = pl;
		r[1].text = "Two";
		r[1].len = 3;
		r[1].placed = NULL;
		rc = tf_markup_render_spans(d, r, &alloc, &out, &olen, spans, err, sizeof(err));
		got = rc == 0 ? xml_names(out) : NULL;
		check(got && strcmp(got, names) == 0, "bad ranges %zu: well-formed, same elements: %s", k, rc == 0 ? out : err);
		/* the verbatim point's own text 'k' is the one thing stripping leaves */
		st = strip(out + spans[0], spans[1] - spans[0]);
		if (strchr(st, 'k'))
			memmove(strchr(st, 'k'), strchr(st, 'k') + 1, strlen(strchr(st, 'k')));
		check(strcmp(st, tr) == 0, "bad ranges %zu: stripped block is the translation (%s)", k, st);
		free(got);
		free(st);
	}
	free((void *) names);
}

static void
test_round_trip(void)
{
	static const char *const html[] = {
		"<div><p>a <b>b <i>c</i></b> d<br>e</p><ul><li>x</li><li><a href=\"u?a=1&amp;b=2\">y</a></li></ul></div>",
		"<p>x <span translate=\"no\">y <b>z</b></span> w</p><!-- c --><p title=\"t\">q</p>",
	};

	for (size_t i = 0; i < sizeof(html) / sizeof(html[0]); i++)
	{
		char	   *once = render(parse(html[i], TF_MARKUP_HTML), NULL);
		char	   *twice = render(parse(once, TF_MARKUP_HTML), NULL);

		check(strcmp(once, html[i]) == 0 && strcmp(once, twice) == 0, "round trip %zu", i);
	}
}

static void
test_limits(void)
{
	size_t		n = 10000,
				len;
	char	   *s = malloc(n * 8 + 64),
			   *p = s,
			   *out;
	TfMarkupDoc *d;
	char		err[256];
	int			rc;
	clock_t		t0;

	for (size_t i = 0; i < n; i++)
		p += sprintf(p, "<b>");
	p += sprintf(p, "deep");
	rc = tf_markup_parse(s, p - s, TF_MARKUP_HTML, &alloc, &d, err, sizeof(err));
	check(rc == TF_MARKUP_LIMIT && strcmp(err, "line 1: element nesting too deep (limit 256)") == 0, "HTML 10000 deep: %s", err);
	rc = tf_markup_parse(s + 3 * 10000 - 3 * 255, 3 * 255 + 4, TF_MARKUP_HTML, &alloc, &d, err, sizeof(err));
	check(rc == 0 && tf_markup_render(d, NULL, &alloc, &out, &len, err, sizeof(err)) == 0 &&
		  strstr(out, "deep</b>") != NULL, "HTML 255 deep is fine");
	p = s;
	for (size_t i = 0; i < n; i++)
		p += sprintf(p, "<b>");
	for (size_t i = 0; i < n; i++)
		p += sprintf(p, "</b>");
	rc = tf_markup_parse(s, p - s, TF_MARKUP_XML, &alloc, &d, err, sizeof(err));
	check(rc == TF_MARKUP_LIMIT, "XML 10000 deep: %s", err);
	free(s);

	/* 1 MB of paragraphs */
	len = 1 << 20;
	s = malloc(len + 64);
	p = s;
	while ((size_t) (p - s) < len)
		p += sprintf(p, "<p>Ein Mann f\xC3\xA4hrt <b>Fahrrad</b> &amp; <i>x</i><br></p>\n");
	t0 = clock();
	rc = tf_markup_parse(s, p - s, TF_MARKUP_HTML, &alloc, &d, err, sizeof(err));
	if (rc == 0)
		rc = tf_markup_render(d, NULL, &alloc, &out, &len, err, sizeof(err));
	check(rc == 0 && strcmp(out, s) == 0, "1 MB HTML parsed and rendered back (%.2f s)",
		  (double) (clock() - t0) / CLOCKS_PER_SEC);
	t0 = clock();
	p = s;
	while ((size_t) (p - s) < (1 << 20))
		p += sprintf(p, "<b>x");
	rc = tf_markup_parse(s, p - s, TF_MARKUP_HTML, &alloc, &d, err, sizeof(err));
	if (rc == 0)
		rc = tf_markup_render(d, NULL, &alloc, &out, &len, err, sizeof(err));
	check(rc == TF_MARKUP_LIMIT, "1 MB of unclosed <b>: %s (%.2f s)", err, (double) (clock() - t0) / CLOCKS_PER_SEC);
	t0 = clock();
	p = s;
	while ((size_t) (p - s) < (1 << 20))
		p += sprintf(p, "<p>x <i>y</i> <img alt=\"z\"></p>");
	rc = tf_markup_parse(s, p - s, TF_MARKUP_HTML, &alloc, &d, err, sizeof(err));
	if (rc == 0)
	{
		const TfMarkupBlock *b;
		int			nb;
		TfRendered *r;

		tf_markup_blocks(d, &b, &nb);
		r = calloc(nb, sizeof(TfRendered));
		for (int i = 0; i < nb; i++)
			r[i].text = "a much longer translated sentence", r[i].len = 33;
		rc = tf_markup_render(d, r, &alloc, &out, &len, err, sizeof(err));
		free(r);
	}
	check(rc == 0, "1 MB of blocks translated (%.2f s)", (double) (clock() - t0) / CLOCKS_PER_SEC);
	free(s);
}

static int	pending_after;		/* calls of pending() until it says yes; -1: never */
static int	pending_calls;

static bool
pending(void)
{
	pending_calls++;
	return pending_after >= 0 && pending_calls > pending_after;
}

/* element, attribute and node limits; a pending cancel stops libxml2 (issue 38) */
static void
test_caps(void)
{
	size_t		cap = 16 << 20;
	char	   *s = malloc(cap),
			   *p;
	TfMarkupDoc *d;
	char		err[256];
	int			rc;
	clock_t		t0;

	for (int fmt = TF_MARKUP_HTML; fmt <= TF_MARKUP_XML; fmt++)
	{
		const char *f = fmt == TF_MARKUP_HTML ? "HTML" : "XML";

		p = s + sprintf(s, "<p");
		for (int i = 1; i <= TF_MARKUP_MAX_ATTRS; i++)
			p += sprintf(p, " a%d=\"1\"", i);
		sprintf(p, ">Ein Hund.</p>");
		rc = tf_markup_parse(s, strlen(s), fmt, &alloc, &d, err, sizeof(err));
		check(rc == 0, "%s: an element with %d attributes parses", f, TF_MARKUP_MAX_ATTRS);
		/* one more is refused (and fails at once where the count is skipped, before the shape below) */
		p = s + sprintf(s, "<p");
		for (int i = 1; i <= TF_MARKUP_MAX_ATTRS + 1; i++)
			p += sprintf(p, " a%d=\"1\"", i);
		sprintf(p, ">Ein Hund.</p>");
		rc = tf_markup_parse(s, strlen(s), fmt, &alloc, &d, err, sizeof(err));
		check(rc == TF_MARKUP_LIMIT, "%s: an element with %d attributes is refused: %s", f, TF_MARKUP_MAX_ATTRS + 1,
			  rc == TF_MARKUP_LIMIT ? err : "parsed");
		/* the review's shape, 95,000 attributes: refused before libxml2's quadratic check */
		p = s + sprintf(s, "<p");
		for (int i = 1; i <= 95000; i++)
			p += sprintf(p, " a%d=1", i);
		sprintf(p, ">Ein Hund.</p>");
		t0 = clock();
		rc = tf_markup_parse(s, strlen(s), fmt, &alloc, &d, err, sizeof(err));
		check(rc == TF_MARKUP_LIMIT && strcmp(err, "an element has more than 1000 attributes") == 0 &&
			  clock() - t0 < CLOCKS_PER_SEC / 10, "%s: 95,000 attributes refused at once: %s (%.3f s)", f, err,
			  (double) (clock() - t0) / CLOCKS_PER_SEC);
		/* attributes without whitespace between them count (libxml2's HTML parser takes them all) */
		p = s + sprintf(s, "<p");
		for (int i = 1; i <= TF_MARKUP_MAX_ATTRS + 1; i++)
			p += sprintf(p, i == 1 ? " a%d=\"1\"" : "a%d=\"1\"", i);
		sprintf(p, ">Ein Hund.</p>");
		rc = tf_markup_parse(s, strlen(s), fmt, &alloc, &d, err, sizeof(err));
		check(rc == TF_MARKUP_LIMIT, "%s: %d attributes without spaces between are refused: %s", f,
			  TF_MARKUP_MAX_ATTRS + 1, rc == TF_MARKUP_LIMIT ? err : "parsed");
		/*
		 * a tag, comment, CDATA section or PI of TF_MARKUP_MAX_TOKEN bytes
		 * parses, one byte more is refused (libxml2 reads each whole, deaf to
		 * cancel); a longer text parses (it comes in pieces)
		 */
		for (int kind = 0; kind < 4; kind++)
		{
			static const char *const open[] = {"<p title=\"", "<!--", "<![CDATA[", "<?pi "};
			static const char *const close[] = {"\">", "-->", "]]>", "?>"};
			size_t		ol = strlen(open[kind]),
						cl = strlen(close[kind]);

			if (kind == 2 && fmt == TF_MARKUP_HTML)
				continue;		/* no CDATA sections in HTML */
			for (int over = 0; over <= 1; over++)
			{
				size_t		n = TF_MARKUP_MAX_TOKEN + over;

				p = s + sprintf(s, "<d>");
				memcpy(p, open[kind], ol);
				memset(p + ol, 'x', n - ol - cl);
				memcpy(p + n - cl, close[kind], cl);
				strcpy(p + n, kind == 0 ? "x</p></d>" : "</d>");
				rc = tf_markup_parse(s, strlen(s), fmt, &alloc, &d, err, sizeof(err));
				check(over ? rc == TF_MARKUP_LIMIT && strstr(err, "longer than 1048576 bytes") : rc == 0,
					  "%s: %s...%s of %zu bytes: %s", f, open[kind], close[kind], n, rc ? err : "parsed");
			}
		}
		p = s + sprintf(s, "<d>");
		memset(p, 'x', 3 * TF_MARKUP_MAX_TOKEN);
		strcpy(p + 3 * TF_MARKUP_MAX_TOKEN, "</d>");
		rc = tf_markup_parse(s, strlen(s), fmt, &alloc, &d, err, sizeof(err));
		check(rc == 0, "%s: a text of %d bytes parses: %s", f, 3 * TF_MARKUP_MAX_TOKEN, err);
		/* HTML's <script> is raw text: a "<!--" in it starts no comment */
		if (fmt == TF_MARKUP_HTML)
		{
			p = s + sprintf(s, "<script>var s = '<!--'; a<b; c = \"it's\";");
			memset(p, ' ', 2 * TF_MARKUP_MAX_TOKEN);
			sprintf(p + 2 * TF_MARKUP_MAX_TOKEN, "</SCRIPT><p>Ein Hund.</p>");
			rc = tf_markup_parse(s, strlen(s), fmt, &alloc, &d, err, sizeof(err));
			check(rc == 0, "HTML: a script of 2 MB with \"<!--\" in it parses: %s", err);
		}
		/* quoted '>' and attributes inside a comment do not count */
		p = s + sprintf(s, "<!-- <p");
		for (int i = 1; i <= 2000; i++)
			p += sprintf(p, " a%d", i);
		p += sprintf(p, "> --><p title=\"a > b");
		for (int i = 1; i <= 2000; i++)
			p += sprintf(p, " a%d", i);
		sprintf(p, "\">x</p>");
		rc = tf_markup_parse(s, strlen(s), fmt, &alloc, &d, err, sizeof(err));
		check(rc == 0, "%s: names in a comment or a quoted value are no attributes: %s", f, err);
		/* a million and one nodes */
		p = s + sprintf(s, "<d>");
		for (int i = 0; i < TF_MARKUP_MAX_NODES + 1; i++)
			p += sprintf(p, "<i></i>");
		sprintf(p, "</d>");
		rc = tf_markup_parse(s, strlen(s), fmt, &alloc, &d, err, sizeof(err));
		check(rc == TF_MARKUP_LIMIT && strstr(err, "more than 250000 nodes") != NULL, "%s: %s", f, err);
		/* attributes and texts are nodes too: 130,000 of each with as many elements are too many */
		for (int k = 0; k < 2; k++)
		{
			static const char *const unit[] = {"x<br/>", "<i a=\"1\"/>"};
			static const char *const what[] = {"130,000 texts between 130,000 elements",
			"130,000 elements of an attribute"};

			p = s + sprintf(s, "<d>");
			for (int i = 0; i < 130000; i++)
				p += sprintf(p, "%s", unit[k]);
			sprintf(p, "</d>");
			rc = tf_markup_parse(s, strlen(s), fmt, &alloc, &d, err, sizeof(err));
			check(rc == TF_MARKUP_LIMIT && strstr(err, "more than 250000 nodes") != NULL,
				  "%s: %s: %s", f, what[k], rc ? err : "parsed");
		}
		/* ... and work between polls: tags of 300 attributes poll at each */
		p = s + sprintf(s, "<d>");
		for (int i = 0; i < 300; i++)
		{
			p += sprintf(p, "<p");
			for (int k = 0; k < 300; k++)
				p += sprintf(p, " a%d=\"1\"", k);
			p += sprintf(p, ">x</p>");
		}
		sprintf(p, "</d>");
		spm_interrupt_pending = pending;
		pending_after = -1;
		pending_calls = 0;
		rc = tf_markup_parse(s, strlen(s), fmt, &alloc, &d, err, sizeof(err));
		check(rc == 0 && pending_calls >= 300, "%s: 300 tags of 300 attributes polled %d times: %s", f, pending_calls, err);
		spm_interrupt_pending = NULL;
		/* a pending cancel stops the parse: the caller serves it and may retry */
		p = s + sprintf(s, "<d>");
		for (int i = 0; i < 100000; i++)
			p += sprintf(p, "<b>x</b>");
		sprintf(p, "</d>");
		spm_interrupt_pending = pending;
		pending_after = 3;
		pending_calls = 0;
		rc = tf_markup_parse(s, strlen(s), fmt, &alloc, &d, err, sizeof(err));
		check(rc == TF_MARKUP_INTERRUPTED && pending_calls == 4, "%s: stopped at the 4th poll (%d): %s", f, pending_calls, err);
		/* stopped inside a text: its characters are not passed on (they pointed into freed input) */
		p = s + sprintf(s, "<d>");
		for (int i = 0; i < 100000; i++)
			p += sprintf(p, "x&amp;");
		sprintf(p, "</d>");
		pending_after = 3;
		pending_calls = 0;
		rc = tf_markup_parse(s, strlen(s), fmt, &alloc, &d, err, sizeof(err));
		check(rc == TF_MARKUP_INTERRUPTED, "%s: stopped in a text: %s", f, err);
		pending_after = -1;
		/* entities are no nodes: 600,000 of them in one text parse */
		p = s + sprintf(s, "<d>");
		for (int i = 0; i < 600000; i++)
			p += sprintf(p, "&amp;&#65;");
		sprintf(p, "</d>");
		rc = tf_markup_parse(s, strlen(s), fmt, &alloc, &d, err, sizeof(err));
		check(rc == 0, "%s: 1,200,000 entities in a text: %s", f, err);
		pending_after = -1;
		pending_calls = 0;
		rc = tf_markup_parse(s, strlen(s), fmt, &alloc, &d, err, sizeof(err));
		check(rc == 0 && pending_calls >= 200000 / 256, "%s: polled every 256 events (%d polls)", f, pending_calls);
		spm_interrupt_pending = NULL;
	}
	free(s);
}

/* free what the arena handed out since mark */
static void
arena_release(size_t mark)
{
	while (arena.n > mark)
		free(arena.ptrs[--arena.n]);
}

static double
cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* a document of about n bytes of a shape: test/limits/run.py's markup shapes */
static size_t
make_shape(char *s, size_t n, int shape, int fmt)
{
	char	   *p = s;
	size_t		i;

#define UNTIL(unit) for (i = 0; (size_t) (p - s) + 64 < n; i++) p += sprintf(p, unit)
	switch (shape)
	{
		case 0:					/* attributes (a=1 repeated: refused past 1000) */
			p += sprintf(p, "<p ");
			UNTIL("a=1 ");
			p += sprintf(p, ">Ein Hund.</p>");
			break;
		case 1:					/* distinct attribute names */
			p += sprintf(p, "<p");
			for (i = 1; (size_t) (p - s) + 64 < n; i++)
				p += sprintf(p, " a%zu=1", i);
			p += sprintf(p, ">Ein Hund.</p>");
			break;
		case 2:					/* one long attribute value */
			p += sprintf(p, "<p title=\"");
			UNTIL("Ein Hund ");
			p += sprintf(p, "\">x</p>");
			break;
		case 3:					/* entities and character references */
			p += sprintf(p, "<p>");
			UNTIL("&amp;&#65;&lt;");
			p += sprintf(p, "</p>");
			break;
		case 4:					/* inline elements */
			UNTIL("<b>x</b>");
			break;
		case 5:					/* line breaks */
			p += sprintf(p, "<p>");
			if (fmt == TF_MARKUP_XML)
				UNTIL("Ein Hund<br/>");
			else
				UNTIL("Ein Hund<br>");
			p += sprintf(p, "</p>");
			break;
		case 6:					/* a wide tree */
			UNTIL("<div><p>Ein Hund.</p></div>");
			break;
		case 7:					/* a deep one */
			for (i = 0; i < 200; i++)
				p += sprintf(p, "<i>");
			for (i = 0; (size_t) (p - s) + 1000 < n; i++)
				p += sprintf(p, "<p>Ein Hund.</p>");
			for (i = 0; i < 200; i++)
				p += sprintf(p, "</i>");
			break;
		case 8:					/* comments and processing instructions */
			p += sprintf(p, "<p>");
			UNTIL("x<!--c--><?pi x?>");
			p += sprintf(p, "</p>");
			break;
		default:				/* a run without spaces */
			p += sprintf(p, "<p>");
			memset(p, 'a', n - 64);
			p += n - 64;
			p += sprintf(p, "</p>");
			break;
	}
#undef UNTIL
	return p - s;
}

/*
 * Parse, blocks and render of each shape at 1, 8 and 16 MB (at most
 * TF_PATHOLOGICAL_MB): time per byte, which must not grow with the size
 * (linear), whether the document was read or refused at a cap (issue 38).
 */
static void
test_shape_times(void)
{
	static const char *const names[] = {"attributes", "attr_names", "long_attr", "entities", "inline", "br", "wide",
	"deep", "comments", "no_spaces"};
	const char *env = getenv("TF_PATHOLOGICAL_MB");
	int			max_mb = env ? atoi(env) : 16;
	int			sizes[3] = {1, 8 < max_mb ? 8 : max_mb, 16 < max_mb ? 16 : max_mb};
	char	   *s = malloc((size_t) sizes[2] * 1024 * 1024 + 1024);

	for (int fmt = TF_MARKUP_HTML; fmt <= TF_MARKUP_XML; fmt++)
		for (int shape = 0; shape < 10; shape++)
		{
			double		ns_per_byte[3];
			char		line[256];
			size_t		used = 0;

			for (int k = 0; k < 3; k++)
			{
				size_t		len = make_shape(s, (size_t) sizes[k] * 1024 * 1024, shape, fmt);
				int			rc = 0;
				char		err[256];

				/* the faster of 2 runs, in CPU time: one run on a busy machine measured 3x */
				ns_per_byte[k] = 1e30;
				for (int run = 0; run < 2; run++)
				{
					size_t		mark = arena.n,
								outlen;
					TfMarkupDoc *d;
					TfMarkupBlock *b;
					int			nb;
					char	   *out;
					double		t0 = cpu_now();

					rc = tf_markup_parse(s, len, fmt, &alloc, &d, err, sizeof(err));
					if (rc == 0)
					{
						tf_markup_blocks(d, (const TfMarkupBlock **) &b, &nb);
						rc = tf_markup_render(d, NULL, &alloc, &out, &outlen, err, sizeof(err));
					}
					t0 = (cpu_now() - t0) * 1e9 / len;
					ns_per_byte[k] = t0 < ns_per_byte[k] ? t0 : ns_per_byte[k];
					arena_release(mark);
				}
				used += snprintf(line + used, sizeof(line) - used, " %d MB %.0f ns/B (%s);", sizes[k], ns_per_byte[k],
								 rc == 0 ? "read" : rc == TF_MARKUP_LIMIT ? "54000" : err);
			}
			/* linear: per byte, the largest no slower than 2.5 x the 1 MB run, give or take 20 ns */
			check(ns_per_byte[2] <= 2.5 * ns_per_byte[0] + 20 && ns_per_byte[1] <= 2.5 * ns_per_byte[0] + 20,
				  "%s %s:%s", fmt == TF_MARKUP_HTML ? "HTML" : "XML", names[shape], line);
		}
	free(s);
}

int
main(void)
{
	test_html_blocks();
	test_regressions();
	test_html_document();
	test_html_malformed();
	test_xml();
	test_render_ranges();
	test_round_trip();
	test_limits();
	test_caps();
	test_shape_times();
	printf("%d tests, %d failed\n", ntests, nfailed);
	for (size_t i = 0; i < arena.n; i++)
		free(arena.ptrs[i]);
	free(arena.ptrs);
	return nfailed ? 1 : 0;
}
