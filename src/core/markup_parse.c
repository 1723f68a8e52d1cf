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

bool
tf_markup_is_document(const char *s, size_t len, int format)
{
	size_t		i = 0;

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
		for (i += 4; i + 3 <= len && memcmp(s + i, "-->", 3) != 0; i++)
			;
		if (i + 3 > len)
			return false;
		i += 3;
	}
	if (len - i >= 9 && strncasecmp(s + i, "<!doctype", 9) == 0)
		return true;
	return format == TF_MARKUP_HTML && len - i >= 5 && strncasecmp(s + i, "<html", 5) == 0 &&
		(len - i == 5 || is_ws((unsigned char) s[i + 5]) || s[i + 5] == '>' || s[i + 5] == '/');
}

/* ---- limits and cancel while libxml2 parses ---- */

/*
 * The most attributes of any start tag, by one pass over the text.
 * libxml2 compares each attribute with every one before it in its tag
 * (quadratic, and deaf to cancel: 95,000 attributes took a minute), so a
 * tag with too many is refused before anything parses.  Comments and CDATA
 * sections are skipped; elsewhere '<' and a letter start a tag, which ends
 * at a '>' outside quotes.  A name after whitespace is an attribute (an
 * unquoted value after "= " counts too: an upper bound).
 */
/* the first of three bytes t in s[0..n), or NULL */
static const char *
find3(const char *s, size_t n, const char *t)
{
	for (const char *p = s; n >= 3 && (p = memchr(p, t[0], n - 2 - (size_t) (p - s))) != NULL; p++)
		if (p[1] == t[1] && p[2] == t[2])
			return p;
	return NULL;
}

static size_t
most_attrs(const char *s, size_t len)
{
	size_t		most = 0;
	size_t		work = 0;

	for (size_t i = 0; i < len; i++)
	{
		const char *e;

		SPM_CHECK_INTERRUPTS_WORK(work, 1);
		if (s[i] != '<' || i + 1 >= len)
			continue;
		if (len - i >= 4 && memcmp(s + i, "<!--", 4) == 0)
		{
			e = find3(s + i + 4, len - i - 4, "-->");
			SPM_CHECK_INTERRUPTS_WORK(work, (e ? (size_t) (e - s) : len) - i);
			i = e ? (size_t) (e - s) + 2 : len;
		}
		else if (len - i >= 9 && memcmp(s + i, "<![CDATA[", 9) == 0)
		{
			e = find3(s + i + 9, len - i - 9, "]]>");
			SPM_CHECK_INTERRUPTS_WORK(work, (e ? (size_t) (e - s) : len) - i);
			i = e ? (size_t) (e - s) + 2 : len;
		}
		else if ((s[i + 1] | 0x20) >= 'a' && (s[i + 1] | 0x20) <= 'z')
		{
			size_t		n = 0,
						j = i + 1;
			char		q = 0;
			bool		after_space = false;

			while (j < len && !is_ws(s[j]) && s[j] != '>' && s[j] != '/')
				j++;
			for (; j < len; j++)
			{
				char		c = s[j];

				SPM_CHECK_INTERRUPTS_WORK(work, 1);
				if (q)
				{
					if (c == q)
						q = 0;
					continue;
				}
				if (c == '>')
					break;
				if (c == '"' || c == '\'')
					q = c;
				else if (is_ws(c) || c == '/')
				{
					after_space = true;
					continue;
				}
				else if (after_space && c != '=')
					n++;
				after_space = false;
			}
			if (n > most)
				most = n;
			i = j;
		}
	}
	return most;
}

/*
 * While libxml2 parses, every node it reports is counted (for the node
 * limit) and every 256th event asks whether a cancel is pending: the parser is
 * then stopped, and the caller tidies up before the interrupt is served
 * (a longjmp out of libxml2 would leave its state behind).  One parse at a
 * time: libxml2 never calls back into us while it runs.
 */
static struct
{
	xmlSAXHandler orig;			/* the handlers the wrappers call */
	xmlParserCtxtPtr ctxt;
	size_t		nodes;			/* elements, comments, PIs, CDATA, references (texts lie between) */
	size_t		events;
	bool		interrupted;
	bool		too_many;
} prog;

/*
 * One more event (a node when counted); false once the parser is stopped:
 * the event is then not passed on (xmlStopParser frees the input that its
 * arguments point into).
 */
static bool
progress(bool counted)
{
	if (prog.interrupted || prog.too_many)
		return false;
	prog.nodes += counted;
	if (prog.nodes > TF_MARKUP_MAX_NODES)
		prog.too_many = true;
	else if ((++prog.events & 255) == 0 && spm_interrupt_pending != NULL && spm_interrupt_pending())
		prog.interrupted = true;
	else
		return true;
	xmlStopParser(prog.ctxt);
	return false;
}

static void
on_start(void *ctx, const xmlChar *name, const xmlChar **atts)
{
	if (progress(true) && prog.orig.startElement)
		prog.orig.startElement(ctx, name, atts);
}

static void
on_start_ns(void *ctx, const xmlChar *localname, const xmlChar *prefix, const xmlChar *uri,
			int nns, const xmlChar **ns, int nattrs, int ndefaulted, const xmlChar **attrs)
{
	if (progress(true) && prog.orig.startElementNs)
		prog.orig.startElementNs(ctx, localname, prefix, uri, nns, ns, nattrs, ndefaulted, attrs);
}

static void
on_characters(void *ctx, const xmlChar *ch, int len)
{
	if (progress(false) && prog.orig.characters)
		prog.orig.characters(ctx, ch, len);
}

static void
on_whitespace(void *ctx, const xmlChar *ch, int len)
{
	if (progress(false) && prog.orig.ignorableWhitespace)
		prog.orig.ignorableWhitespace(ctx, ch, len);
}

static void
on_cdata(void *ctx, const xmlChar *value, int len)
{
	if (progress(true) && prog.orig.cdataBlock)
		prog.orig.cdataBlock(ctx, value, len);
}

static void
on_comment(void *ctx, const xmlChar *value)
{
	if (progress(true) && prog.orig.comment)
		prog.orig.comment(ctx, value);
}

static void
on_pi(void *ctx, const xmlChar *target, const xmlChar *data)
{
	if (progress(true) && prog.orig.processingInstruction)
		prog.orig.processingInstruction(ctx, target, data);
}

static void
on_reference(void *ctx, const xmlChar *name)
{
	if (progress(true) && prog.orig.reference)
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
	if (most_attrs(s, len) > TF_MARKUP_MAX_ATTRS)
	{
		snprintf(err, errlen, "an element has more than %d attributes", TF_MARKUP_MAX_ATTRS);
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
	d->document = tf_markup_is_document(s, len, format);
	if (d->document && format == TF_MARKUP_XML)
	{
		size_t		i = len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0,
					e;

		for (e = i; e + 2 <= len && memcmp(s + e, "?>", 2) != 0; e++)
			;
		if (len - i > 5 && memcmp(s + i, "<?xml", 5) == 0 && e + 2 <= len)
		{
			d->decl = s + i;
			d->decl_len = e + 2 - i;
		}
	}
	if (!d->document)
	{
		char	   *w = m_alloc(d, len + 2 * WRAP_MAX + 8),
					end[WRAP_MAX + 2];

		if (w == NULL)
		{
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		/* an HTML end tag of the wrapper would close it early */
		strcpy(wrapname, WRAP);
		for (int k = 1; k < 100; k++)
		{
			size_t		el = snprintf(end, sizeof(end), "</%s", wrapname),
						i;

			for (i = 0; i + el <= len && strncasecmp(s + i, end, el) != 0; i++)
				;
			if (i + el > len)
				break;
			snprintf(wrapname, sizeof(wrapname), "%s-%d", WRAP, k);
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
		snprintf(err, errlen, "more than %d nodes (elements, comments, processing instructions)", TF_MARKUP_MAX_NODES);
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
