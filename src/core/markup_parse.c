/*
 * markup_parse.c
 *		HTML and XML parsed by libxml2 into our tree (markup_tree.c), then
 *		cut into blocks (markup_blocks.c): with a cap on attributes per tag
 *		and on nodes, libxml2's errors captured, and cancel heard while it
 *		parses.  No postgres.h.
 */
#include "markup_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include <libxml/HTMLparser.h>
#include <libxml/parser.h>
#include <libxml/xmlerror.h>

typedef struct ErrCapture
{
	int			line;
	int			level;
	int			depth_line;		/* libxml2 stopped at its depth limit here */
	int			huge_line;		/* ... or at its size limit for one text, value or name */
	char		msg[256];
} ErrCapture;

/* the first error of the highest level wins */
static void
on_error(void *ctx, xmlErrorPtr e)
{
	ErrCapture *c = ctx;
	size_t		n;

	if (e && e->code == XML_ERR_INTERNAL_ERROR && e->message && strstr(e->message, "depth"))
		c->depth_line = e->line ? e->line : 1;
	/* XML_MAX_TEXT_LENGTH (10,000,000 bytes) without XML_PARSE_HUGE: a limit, not invalid markup */
	if (e && e->message && c->huge_line == 0 &&
		(strstr(e->message, "Huge input lookup") || strstr(e->message, "huge text node") ||
		 strstr(e->message, "length too long") || strstr(e->message, "Name too long")))
		c->huge_line = e->line ? e->line : 1;
	if (e == NULL || (int) e->level <= c->level || e->level < XML_ERR_ERROR)
		return;
	c->level = (int) e->level;
	c->line = e->line;
	snprintf(c->msg, sizeof(c->msg), "%s", e->message ? e->message : "not well-formed");
	n = strlen(c->msg);
	while (n > 0 && is_ws((unsigned char) c->msg[n - 1]))
		c->msg[--n] = '\0';
}

static void
on_generic(void *ctx, const char *msg,...)
{
	(void) ctx;
	(void) msg;
}

/* the first of the tl bytes t in s[0..n), or NULL (memchr's speed, without _GNU_SOURCE's memmem) */
static const char *
find_str(const char *s, size_t n, const char *t, size_t tl)
{
	for (const char *p = s; n >= tl && (p = memchr(p, t[0], n - (tl - 1) - (size_t) (p - s))) != NULL; p++)
		if (memcmp(p + 1, t + 1, tl - 1) == 0)
			return p;
	return NULL;
}

bool
tf_markup_is_document(const char *s, size_t len, int format)
{
	size_t		i = 0;
	const char *e;

	if (len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0)
		i = 3;
	if (format == TF_MARKUP_XML && len - i > 5 && memcmp(s + i, "<?xml", 5) == 0 &&
		is_ws((unsigned char) s[i + 5]))
		return true;
	for (;;)
	{
		while (i < len && is_ws((unsigned char) s[i]))
			i++;
		if (len - i < 4 || memcmp(s + i, "<!--", 4) != 0)
			break;
		e = find_str(s + i + 4, len - i - 4, "-->", 3);
		if (e == NULL)
			return false;
		i = (size_t) (e - s) + 3;
	}
	if (len - i >= 9 && strncasecmp(s + i, "<!doctype", 9) == 0)
		return true;
	return format == TF_MARKUP_HTML && len - i >= 5 && strncasecmp(s + i, "<html", 5) == 0 &&
		(len - i == 5 || is_ws((unsigned char) s[i + 5]) || s[i + 5] == '>' || s[i + 5] == '/');
}

/* ---- limits and cancel while libxml2 parses ---- */

/* the first '<' followed by "/" and name (case-insensitive) in s[0..n), or NULL */
static const char *
find_end_tag(const char *s, size_t n, const char *name)
{
	size_t		nl = strlen(name);

	for (const char *p = s; (p = memchr(p, '<', n - (size_t) (p - s))) != NULL; p++)
		if ((size_t) (s + n - p) >= nl + 2 && p[1] == '/' && strncasecmp(p + 2, name, nl) == 0)
			return p;
	return NULL;
}

/*
 * One pass over the text before libxml2 sees it, for what libxml2 would
 * take long over without an event between (so without hearing a cancel):
 *  - the most attributes of any start tag: libxml2 compares each attribute
 *    with every one before it in its tag (quadratic: 95,000 attributes took
 *    a minute).  A name after whitespace is an attribute (an unquoted value
 *    after "= " counts too: an upper bound);
 *  - the longest tag, comment, CDATA section, processing instruction or
 *    declaration: libxml2 parses each whole before it reports it (a 10 MB
 *    attribute value took 240 ms in HTML), while text comes in pieces.
 * Comments run to "-->", CDATA sections to "]]>", processing instructions
 * to "?>" (in HTML to '>', as libxml2 ends them), unterminated ones to the
 * end; elsewhere '<' and a letter, '/' or '!' start a tag, which ends at a
 * '>' outside quotes.  In HTML the text of <script> and <style> is raw, as
 * libxml2 reads it, and skipped.
 */
typedef struct MarkupScan
{
	size_t		most_attrs;
	size_t		longest;		/* bytes */
} MarkupScan;

static MarkupScan
scan_markup(const char *s, size_t len, int format)
{
	MarkupScan	r = {0, 0};
	size_t		work = 0;
	const char *p = s;

	while ((p = memchr(p, '<', len - (size_t) (p - s))) != NULL)
	{
		size_t		i = (size_t) (p - s),
					end;		/* one past the token */
		const char *e;

		SPM_CHECK_INTERRUPTS_WORK(work, 64);
		if (i + 1 >= len)
			break;
		if (len - i >= 4 && memcmp(s + i, "<!--", 4) == 0)
		{
			e = find_str(s + i + 4, len - i - 4, "-->", 3);
			end = e ? (size_t) (e - s) + 3 : len;
		}
		else if (len - i >= 9 && memcmp(s + i, "<![CDATA[", 9) == 0)
		{
			e = find_str(s + i + 9, len - i - 9, "]]>", 3);
			end = e ? (size_t) (e - s) + 3 : len;
		}
		else if (s[i + 1] == '?' && format == TF_MARKUP_XML)
		{
			e = find_str(s + i + 2, len - i - 2, "?>", 2);
			end = e ? (size_t) (e - s) + 2 : len;
		}
		else if (s[i + 1] == '?')
		{
			e = memchr(s + i + 2, '>', len - i - 2);
			end = e ? (size_t) (e - s) + 1 : len;
		}
		else if (((s[i + 1] | 0x20) >= 'a' && (s[i + 1] | 0x20) <= 'z') || s[i + 1] == '/' || s[i + 1] == '!')
		{
			size_t		n = 0,
						j = i + 1;
			const char *raw = NULL; /* "script" or "style" */
			char		q = 0;
			bool		start = s[i + 1] != '/' && s[i + 1] != '!',
						after_space = false,
						after_eq = false;

			while (j < len && !is_ws(s[j]) && s[j] != '>' && s[j] != '/')
				j++;
			if (start && format == TF_MARKUP_HTML && j - i - 1 == 6 && strncasecmp(s + i + 1, "script", 6) == 0)
				raw = "script";
			else if (start && format == TF_MARKUP_HTML && j - i - 1 == 5 && strncasecmp(s + i + 1, "style", 5) == 0)
				raw = "style";
			/* a quote opens a value only after '=', as in libxml2; a name right after a value is an attribute too */
			for (; j < len; j++)
			{
				char		c = s[j];

				if (q)
				{
					if (c == q)
					{
						q = 0;
						after_space = true;
					}
					continue;
				}
				if (c == '>')
					break;
				if (after_eq && (c == '"' || c == '\''))
					q = c;
				else if (is_ws(c))
				{
					if (!after_eq)
						after_space = true;
					continue;
				}
				else if (c == '=')
				{
					after_eq = true;
					after_space = false;
					continue;
				}
				else if (c == '/')
					after_space = true;
				else if (after_space && !after_eq)
				{
					n++;
					after_space = false;
				}
				else if (after_eq)
				{
					/* an unquoted value runs to whitespace or '>' */
					while (j + 1 < len && !is_ws(s[j + 1]) && s[j + 1] != '>')
						j++;
					after_space = false;
				}
				after_eq = false;
			}
			end = j < len ? j + 1 : len;
			if (start && n > r.most_attrs)
				r.most_attrs = n;
			if (raw && end < len)
			{
				/* on to the end tag: what lies between is text to libxml2 */
				e = find_end_tag(s + end, len - end, raw);
				SPM_CHECK_INTERRUPTS_WORK(work, (e ? (size_t) (e - s) : len) - end);
				if (end - i > r.longest)
					r.longest = end - i;
				end = e ? (size_t) (e - s) : len;
				p = s + end;
				continue;
			}
		}
		else
		{
			p++;
			continue;
		}
		SPM_CHECK_INTERRUPTS_WORK(work, end - i);
		if (end - i > r.longest)
			r.longest = end - i;
		p = s + end;
		if (end >= len)
			break;
	}
	return r;
}

/*
 * The fragment's wrapper element: WRAP, or WRAP-1 ... WRAP-99 if the input
 * has an end tag that would close it early (an HTML end tag whose name
 * begins with the wrapper's closes it).  One pass; NULL if all 100 are taken.
 */
static const char *
wrapper_name(const char *s, size_t len, char *name, size_t namelen)
{
	bool		taken[100] = {false};
	size_t		wl = strlen(WRAP),
				work = 0;

	for (const char *p = s; (p = memchr(p, '<', len - (size_t) (p - s))) != NULL; p++)
	{
		size_t		rest = len - (size_t) (p - s);

		SPM_CHECK_INTERRUPTS_WORK(work, 64);
		if (rest < wl + 2 || p[1] != '/' || strncasecmp(p + 2, WRAP, wl) != 0)
			continue;
		taken[0] = true;
		/* "</WRAP-k..." takes k and, with a second digit, the k of two digits */
		if (rest > wl + 3 && p[wl + 2] == '-' && p[wl + 3] >= '1' && p[wl + 3] <= '9')
		{
			int			k = p[wl + 3] - '0';

			taken[k] = true;
			if (rest > wl + 4 && p[wl + 4] >= '0' && p[wl + 4] <= '9')
				taken[k * 10 + p[wl + 4] - '0'] = true;
		}
	}
	for (int k = 0; k < 100; k++)
		if (!taken[k])
		{
			if (k == 0)
				snprintf(name, namelen, "%s", WRAP);
			else
				snprintf(name, namelen, "%s-%d", WRAP, k);
			return name;
		}
	return NULL;
}

/*
 * While libxml2 parses, every node it builds is counted (for the node
 * limit: each is a malloc'd object, and freeing 250,000 of them after a
 * cancel takes tens of milliseconds) and every 256 nodes or so it is asked
 * whether a cancel is pending: the parser is then stopped, and the caller
 * tidies up before the interrupt is served (a longjmp out of libxml2 would
 * leave its state behind).  One parse at a time: libxml2 never calls back
 * into us while it runs.
 */
static struct
{
	xmlSAXHandler orig;			/* the handlers the wrappers call */
	xmlParserCtxtPtr ctxt;
	size_t		nodes;			/* elements, attributes, texts, comments, PIs, CDATA, references */
	size_t		work;			/* events, and an element's attributes */
	size_t		next_poll;		/* ask for a cancel once work reaches this */
	bool		in_text;		/* the last event was text: more joins the same text node */
	bool		interrupted;
	bool		too_many;
} prog;

/*
 * One more event of n nodes; false once the parser is stopped: the event is
 * then not passed on (xmlStopParser frees the input that its arguments
 * point into).  An element's attributes are work too, so a run of tags of
 * 1,000 attributes (each costing libxml2 a quadratic check of their names)
 * polls at every tag.
 */
static bool
progress(size_t n, size_t work)
{
	if (prog.interrupted || prog.too_many)
		return false;
	prog.nodes += n;
	prog.work += work;
	prog.in_text = false;
	if (prog.nodes > TF_MARKUP_MAX_NODES)
		prog.too_many = true;
	else if (prog.work < prog.next_poll)
		return true;
	else if (prog.next_poll = prog.work + 256, spm_interrupt_pending != NULL && spm_interrupt_pending())
		prog.interrupted = true;
	else
		return true;
	xmlStopParser(prog.ctxt);
	return false;
}

/* text: a node where a text starts (libxml2 joins what follows into it, entities too) */
static bool
progress_text(void)
{
	bool		more = prog.in_text;

	if (!progress(more ? 0 : 1, 1))
		return false;
	prog.in_text = true;
	return true;
}

static void
on_start(void *ctx, const xmlChar *name, const xmlChar **atts)
{
	size_t		n = 0;

	for (const xmlChar **a = atts; a && a[0]; a += 2)
		n++;
	if (progress(1 + n, 1 + n) && prog.orig.startElement)
		prog.orig.startElement(ctx, name, atts);
}

static void
on_start_ns(void *ctx, const xmlChar *localname, const xmlChar *prefix, const xmlChar *uri,
			int nns, const xmlChar **ns, int nattrs, int ndefaulted, const xmlChar **attrs)
{
	size_t		n = (size_t) (nattrs > 0 ? nattrs : 0) + (size_t) (nns > 0 ? nns : 0);

	if (progress(1 + n, 1 + n) && prog.orig.startElementNs)
		prog.orig.startElementNs(ctx, localname, prefix, uri, nns, ns, nattrs, ndefaulted, attrs);
}

/* an end tag ends a text: the next one is a new node */
static void
on_end(void *ctx, const xmlChar *name)
{
	prog.in_text = false;
	if (prog.orig.endElement)
		prog.orig.endElement(ctx, name);
}

static void
on_end_ns(void *ctx, const xmlChar *localname, const xmlChar *prefix, const xmlChar *uri)
{
	prog.in_text = false;
	if (prog.orig.endElementNs)
		prog.orig.endElementNs(ctx, localname, prefix, uri);
}

static void
on_characters(void *ctx, const xmlChar *ch, int len)
{
	if (progress_text() && prog.orig.characters)
		prog.orig.characters(ctx, ch, len);
}

static void
on_whitespace(void *ctx, const xmlChar *ch, int len)
{
	if (progress_text() && prog.orig.ignorableWhitespace)
		prog.orig.ignorableWhitespace(ctx, ch, len);
}

static void
on_cdata(void *ctx, const xmlChar *value, int len)
{
	if (progress(1, 1) && prog.orig.cdataBlock)
		prog.orig.cdataBlock(ctx, value, len);
}

static void
on_comment(void *ctx, const xmlChar *value)
{
	if (progress(1, 1) && prog.orig.comment)
		prog.orig.comment(ctx, value);
}

static void
on_pi(void *ctx, const xmlChar *target, const xmlChar *data)
{
	if (progress(1, 1) && prog.orig.processingInstruction)
		prog.orig.processingInstruction(ctx, target, data);
}

static void
on_reference(void *ctx, const xmlChar *name)
{
	if (progress(1, 1) && prog.orig.reference)
		prog.orig.reference(ctx, name);
}

/* the wrappers around ctxt's handlers */
static void
watch_parser(xmlParserCtxtPtr ctxt)
{
	memset(&prog, 0, sizeof(prog));
	prog.ctxt = ctxt;
	prog.orig = *ctxt->sax;
	ctxt->sax->startElement = prog.orig.startElement ? on_start : NULL;
	ctxt->sax->startElementNs = prog.orig.startElementNs ? on_start_ns : NULL;
	ctxt->sax->endElement = prog.orig.endElement ? on_end : NULL;
	ctxt->sax->endElementNs = prog.orig.endElementNs ? on_end_ns : NULL;
	ctxt->sax->characters = prog.orig.characters ? on_characters : NULL;
	/* (libxml2 tells blanks from text only when the two callbacks differ: keep them equal if they were) */
	ctxt->sax->ignorableWhitespace = prog.orig.ignorableWhitespace == prog.orig.characters ? ctxt->sax->characters :
		prog.orig.ignorableWhitespace ? on_whitespace : NULL;
	ctxt->sax->cdataBlock = prog.orig.cdataBlock ? on_cdata : NULL;
	ctxt->sax->comment = prog.orig.comment ? on_comment : NULL;
	ctxt->sax->processingInstruction = prog.orig.processingInstruction ? on_pi : NULL;
	ctxt->sax->reference = prog.orig.reference ? on_reference : NULL;
}

int
tf_markup_parse(const char *s, size_t len, int format, const SpmAlloc *a,
				TfMarkupDoc **docp, char *err, size_t errlen)
{
	TfMarkupDoc *d;
	ErrCapture	cap = {0, 0, 0, 0, ""};
	xmlStructuredErrorFunc saved_s;
	xmlGenericErrorFunc saved_g;
	void	   *saved_sctx,
			   *saved_gctx;
	xmlParserCtxtPtr ctxt;
	xmlDocPtr	xd = NULL;
	xmlNodePtr	wrap = NULL;
	char		wrapname[WRAP_MAX];
	const char *buf = s;
	size_t		blen = len;
	MarkupScan	scan;
	bool		document;
	int			rc = 0;

	*docp = NULL;
	if (err && errlen)
		err[0] = '\0';
	if (format != TF_MARKUP_HTML && format != TF_MARKUP_XML)
	{
		snprintf(err, errlen, "unknown markup format %d", format);
		return -1;
	}
	if (len > INT32_MAX - 64)
	{
		snprintf(err, errlen, "markup of %zu bytes is too long", len);
		return -1;
	}
	scan = scan_markup(s, len, format);
	if (scan.most_attrs > TF_MARKUP_MAX_ATTRS)
	{
		snprintf(err, errlen, "an element has more than %d attributes", TF_MARKUP_MAX_ATTRS);
		return TF_MARKUP_LIMIT;
	}
	if (scan.longest > TF_MARKUP_MAX_TOKEN)
	{
		snprintf(err, errlen, "a tag, comment, CDATA section or processing instruction is longer than %d bytes",
				 TF_MARKUP_MAX_TOKEN);
		return TF_MARKUP_LIMIT;
	}
	document = tf_markup_is_document(s, len, format);
	if (!document && wrapper_name(s, len, wrapname, sizeof(wrapname)) == NULL)
	{
		snprintf(err, errlen, "the input has end tags for all 100 names of the fragment's wrapper element");
		return TF_MARKUP_LIMIT;
	}
	d = a->alloc(a->ctx, sizeof(TfMarkupDoc));
	if (d == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	memset(d, 0, sizeof(TfMarkupDoc));
	d->alloc = *a;
	d->format = format;
	d->root.kind = MK_ROOT;
	d->root.block = -1;
	d->document = document;
	if (d->document && format == TF_MARKUP_XML)
	{
		size_t		i = len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
		const char *e = len - i > 5 && memcmp(s + i, "<?xml", 5) == 0 ? find_str(s + i, len - i, "?>", 2) : NULL;

		if (e != NULL)
		{
			d->decl = s + i;
			d->decl_len = (size_t) (e - s) + 2 - i;
		}
	}
	if (!d->document)
	{
		char	   *w = m_alloc(d, len + 2 * WRAP_MAX + 8);

		if (w == NULL)
		{
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		strcpy(d->wrapname, wrapname);
		blen = sprintf(w, "<%s>", wrapname);
		memcpy(w + blen, s, len);
		blen += len;
		blen += sprintf(w + blen, "</%s>", wrapname);
		buf = w;
	}

	/* libxml2 reports to us alone, and PostgreSQL's handlers come back after */
	xmlInitParser();
	saved_s = xmlStructuredError;
	saved_sctx = xmlStructuredErrorContext;
	saved_g = xmlGenericError;
	saved_gctx = xmlGenericErrorContext;
	xmlSetStructuredErrorFunc(&cap, on_error);
	xmlSetGenericErrorFunc(&cap, on_generic);
	if (format == TF_MARKUP_HTML)
	{
		ctxt = htmlNewParserCtxt();
		if (ctxt)
			watch_parser(ctxt);
		if (ctxt)
			xd = htmlCtxtReadMemory(ctxt, buf, (int) blen, NULL, "UTF-8",
									HTML_PARSE_RECOVER | HTML_PARSE_NOERROR |
									HTML_PARSE_NOWARNING | HTML_PARSE_NONET |
									HTML_PARSE_NODEFDTD |
									(d->document ? 0 : HTML_PARSE_NOIMPLIED));
	}
	else
	{
		ctxt = xmlNewParserCtxt();
		if (ctxt)
		{
			watch_parser(ctxt);
			xd = xmlCtxtReadMemory(ctxt, buf, (int) blen, NULL, "UTF-8",
								   XML_PARSE_NONET | XML_PARSE_NOERROR |
								   XML_PARSE_NOWARNING);
			if (xd && !ctxt->wellFormed)
			{
				xmlFreeDoc(xd);
				xd = NULL;
			}
		}
	}
	xmlSetStructuredErrorFunc(saved_sctx, saved_s);
	xmlSetGenericErrorFunc(saved_gctx, saved_g);

	if (ctxt == NULL)
	{
		snprintf(err, errlen, "out of memory");
		rc = -1;
	}
	else if (prog.interrupted)
	{
		snprintf(err, errlen, "interrupted");
		rc = TF_MARKUP_INTERRUPTED;
	}
	else if (prog.too_many)
	{
		snprintf(err, errlen, "more than %d nodes (elements, attributes, texts, comments, processing instructions)", TF_MARKUP_MAX_NODES);
		rc = TF_MARKUP_LIMIT;
	}
	else if (cap.depth_line)
	{
		/* libxml2 stops there: the rest would be lost */
		snprintf(err, errlen, "line %d: element nesting too deep (limit %d)",
				 cap.depth_line, TF_MARKUP_MAX_DEPTH);
		rc = TF_MARKUP_LIMIT;
	}
	else if (cap.huge_line)
	{
		/* parserInternals.h's XML_MAX_TEXT_LENGTH */
		snprintf(err, errlen, "line %d: a text, attribute value or name longer than libxml2's limit of 10,000,000 bytes",
				 cap.huge_line);
		rc = TF_MARKUP_LIMIT;
	}
	else if (xd == NULL && format == TF_MARKUP_XML)
	{
		if (cap.level)
			snprintf(err, errlen, "line %d: %s", cap.line, cap.msg);
		else
			snprintf(err, errlen, "not well-formed XML");
		rc = -1;
	}
	else if (xd)
	{
		if (!d->document)
			for (wrap = xd->children; wrap; wrap = wrap->next)
				if (wrap->type == XML_ELEMENT_NODE && strcmp((const char *) wrap->name, wrapname) == 0)
					break;
		rc = tf_markup_convert(d, xd, wrap, err, errlen);
	}
	if (xd)
		xmlFreeDoc(xd);
	if (ctxt && format == TF_MARKUP_HTML)
		htmlFreeParserCtxt(ctxt);
	else if (ctxt)
		xmlFreeParserCtxt(ctxt);
	if (rc < 0)
		return rc;
	tf_markup_find_blocks(d);
	if (d->oom)
	{
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	*docp = d;
	return 0;
}
