/*
 * markup.c
 *		HTML and XML as blocks of translatable text with inline anchors, and
 *		rendered back around translated text (markup.h).  libxml2 parses;
 *		its tree is copied into our own at once.  Nothing here recurses on
 *		the input: trees are walked with parent pointers, depth is bounded.
 *		No postgres.h.
 */
#include "markup.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libxml/HTMLparser.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

/* a fragment is parsed inside this element (WRAP, WRAP-1, ... if the input has its end tag) */
#define WRAP "tf-fragment"
#define WRAP_MAX (sizeof(WRAP) + 12)

enum
{
	MK_ROOT, MK_ELEM, MK_TEXT, MK_CDATA, MK_COMMENT, MK_PI, MK_ENTREF, MK_DTD
};

#define F_VERB		0x01		/* verbatim element itself */
#define F_INVERB	0x02		/* it or an ancestor verbatim */
#define F_INLINE	0x04		/* HTML: inline by name */
#define F_HASBLOCK	0x08		/* HTML: a non-inline element below */
#define F_CONTAINER	0x10		/* XML: non-whitespace text among children */
#define F_VOID		0x20		/* HTML void element: no end tag */

typedef struct MAttr
{
	const char *name;
	const char *value;			/* XML: serialized; HTML: decoded */
	size_t		len;
	int			block;			/* its block, or -1 */
} MAttr;

typedef struct MNode
{
	struct MNode *parent,
			   *first,
			   *last,
			   *next;
	const char *name;			/* element, PI target, entity */
	const char *text;			/* text, CDATA, comment, PI data, DTD */
	size_t		len;
	MAttr	   *attrs;
	int			nattrs;
	int			block;			/* a run starts here: its block, else -1 */
	uint8_t		kind,
				flags;
} MNode;

/* what render needs about a block beyond TfMarkupBlock */
typedef struct BlockInfo
{
	MNode	   *first,
			   *last;			/* the run (element content) */
	size_t		lead,
				trail;			/* edge whitespace left outside */
	MNode	  **anodes;			/* anchor j's node */
	MAttr	   *attr;			/* an attribute's block */
} BlockInfo;

struct TfMarkupDoc
{
	int			format;
	bool		document;
	bool		oom;
	SpmAlloc	alloc;
	MNode		root;
	const char *decl;			/* XML declaration as written */
	size_t		decl_len;
	TfMarkupBlock *blocks;
	BlockInfo  *info;
	int			nblocks,
				capblocks;
	char		wrapname[WRAP_MAX];	/* a fragment's wrapper element, "" if none */
};

static const char *const inline_names[] = {
	"a", "abbr", "b", "bdi", "bdo", "br", "cite", "code", "data", "del", "dfn",
	"em", "font", "i", "img", "ins", "kbd", "label", "mark", "q", "s", "samp",
	"script", "small", "span", "strong", "style", "sub", "sup", "textarea",
	"time", "u", "var", "wbr", NULL
};
static const char *const verbatim_names[] = {
	"code", "pre", "script", "style", "kbd", "samp", "var", "textarea", NULL
};
static const char *const void_names[] = {
	"area", "base", "basefont", "br", "col", "embed", "frame", "hr", "img",
	"input", "isindex", "keygen", "link", "meta", "param", "source", "track",
	"wbr", NULL
};
static const char *const text_attrs[] = {
	"title", "alt", "placeholder", "aria-label", NULL
};

static bool
in_list(const char *const *list, const char *s)
{
	for (; *list; list++)
		if (strcmp(*list, s) == 0)
			return true;
	return false;
}

static inline bool
is_ws(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

static bool
all_ws(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!is_ws((unsigned char) s[i]))
			return false;
	return true;
}

static void *
m_alloc(TfMarkupDoc *d, size_t n)
{
	void	   *p = d->oom ? NULL : d->alloc.alloc(d->alloc.ctx, n ? n : 1);

	if (p == NULL)
		d->oom = true;
	else
		memset(p, 0, n);
	return p;
}

static char *
m_strdup(TfMarkupDoc *d, const char *s, size_t n)
{
	char	   *p = m_alloc(d, n + 1);

	if (p)
	{
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

/* ---- parsing ---- */

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

static void
add_child(MNode *par, MNode *n)
{
	n->parent = par;
	if (par->last)
		par->last->next = n;
	else
		par->first = n;
	par->last = n;
}

static const char *
qname(TfMarkupDoc *d, const xmlChar *prefix, const xmlChar *name)
{
	size_t		p = prefix ? strlen((const char *) prefix) : 0,
				n = strlen((const char *) name);
	char	   *s = m_alloc(d, p + n + 2);

	if (s == NULL)
		return "";
	if (p)
	{
		memcpy(s, prefix, p);
		s[p++] = ':';
	}
	memcpy(s + p, name, n + 1);
	return s;
}

/* XML attribute text serialized: & < " escaped, and whitespace the parser would normalize */
static size_t
xml_attr_escape(char *out, const char *s)
{
	size_t		o = 0;

	for (; *s; s++)
	{
		const char *r = NULL;

		switch (*s)
		{
			case '&': r = "&amp;"; break;
			case '<': r = "&lt;"; break;
			case '"': r = "&quot;"; break;
			case '\n': r = "&#10;"; break;
			case '\r': r = "&#13;"; break;
			case '\t': r = "&#9;"; break;
		}
		if (out)
		{
			if (r)
				memcpy(out + o, r, strlen(r));
			else
				out[o] = *s;
		}
		o += r ? strlen(r) : 1;
	}
	return o;
}

static void
copy_attrs(TfMarkupDoc *d, xmlNodePtr x, MNode *n)
{
	int			k = 0;
	bool		html = d->format == TF_MARKUP_HTML;

	for (xmlNsPtr ns = x->nsDef; ns; ns = ns->next)
		k++;
	for (xmlAttrPtr at = x->properties; at; at = at->next)
		k++;
	if (k == 0 || (n->attrs = m_alloc(d, k * sizeof(MAttr))) == NULL)
		return;
	for (xmlNsPtr ns = x->nsDef; ns; ns = ns->next)
	{
		MAttr	   *m = &n->attrs[n->nattrs++];
		const char *href = ns->href ? (const char *) ns->href : "";
		char	   *v = m_alloc(d, xml_attr_escape(NULL, href) + 1);

		m->name = qname(d, ns->prefix ? BAD_CAST "xmlns" : NULL,
						ns->prefix ? ns->prefix : BAD_CAST "xmlns");
		m->block = -1;
		if (v)
			m->len = xml_attr_escape(v, href);
		m->value = v ? v : "";
	}
	for (xmlAttrPtr at = x->properties; at; at = at->next)
	{
		MAttr	   *m = &n->attrs[n->nattrs++];
		size_t		len = 0;
		char	   *v = NULL;

		m->name = qname(d, at->ns ? at->ns->prefix : NULL, at->name);
		m->block = -1;
		/* text decoded (HTML) or escaped (XML), entity references kept */
		for (int pass = 0; pass < 2; pass++)
		{
			for (xmlNodePtr c = at->children; c; c = c->next)
			{
				const char *t = (const char *) c->content;

				if (c->type == XML_ENTITY_REF_NODE)
				{
					if (pass)
						sprintf(v + len, "&%s;", (const char *) c->name);
					len += strlen((const char *) c->name) + 2;
				}
				else if (c->type == XML_TEXT_NODE && t)
				{
					size_t		k2 = html ? strlen(t) : xml_attr_escape(NULL, t);

					if (pass && html)
						memcpy(v + len, t, k2);
					else if (pass)
						xml_attr_escape(v + len, t);
					len += k2;
				}
			}
			if (pass == 0)
			{
				if ((v = m_alloc(d, len + 1)) == NULL)
					return;
				m->len = len;
				len = 0;
			}
		}
		m->value = v;
	}
}

static bool
attr_is(const MNode *n, const char *local, const char *value, bool word)
{
	for (int i = 0; i < n->nattrs; i++)
	{
		const char *nm = strrchr(n->attrs[i].name, ':');
		const char *v = n->attrs[i].value;

		nm = nm ? nm + 1 : n->attrs[i].name;
		if (strcmp(nm, local) != 0)
			continue;
		if (!word)
			return strcasecmp(v, value) == 0;
		for (size_t k = strlen(value); (v = strstr(v, value)) != NULL; v += k)
			if ((v == n->attrs[i].value || is_ws((unsigned char) v[-1])) &&
				(v[k] == '\0' || is_ws((unsigned char) v[k])))
				return true;
	}
	return false;
}

/* an element of x at depth (its parent par at depth - 1) */
static MNode *
new_elem(TfMarkupDoc *d, xmlNodePtr x, MNode *par)
{
	MNode	   *n = m_alloc(d, sizeof(MNode));
	bool		html = d->format == TF_MARKUP_HTML;

	if (n == NULL)
		return NULL;
	n->kind = MK_ELEM;
	n->block = -1;
	n->name = qname(d, x->ns ? x->ns->prefix : NULL, x->name);
	copy_attrs(d, x, n);
	/* the same in XML (DocBook, XHTML and most vocabularies name code so), names compared exactly */
	if (in_list(verbatim_names, n->name) || attr_is(n, "translate", "no", false) ||
		attr_is(n, "class", "notranslate", true))
		n->flags |= F_VERB | F_INVERB;
	n->flags |= par->flags & F_INVERB;
	if (html && in_list(inline_names, n->name))
		n->flags |= F_INLINE;
	/* (libxml2 does not know every void element: wbr may get children) */
	if (html && x->children == NULL && in_list(void_names, n->name))
		n->flags |= F_VOID;
	/* an inline element around a block is not inline */
	if (html && !(n->flags & F_INLINE) && !(par->flags & F_INVERB))
		for (MNode *p = par; p && p->kind == MK_ELEM && !(p->flags & F_HASBLOCK); p = p->parent)
			p->flags |= F_HASBLOCK;
	add_child(par, n);
	return n;
}

static MNode *
new_leaf(TfMarkupDoc *d, MNode *par, int kind, const xmlChar *name, const xmlChar *text)
{
	MNode	   *n = m_alloc(d, sizeof(MNode));

	if (n == NULL)
		return NULL;
	n->kind = kind;
	n->block = -1;
	n->flags = par->flags & F_INVERB;
	n->name = name ? m_strdup(d, (const char *) name, strlen((const char *) name)) : "";
	if (text)
		n->len = strlen((const char *) text);
	/*
	 * An unclosed script, style or comment runs to the end of the input:
	 * past it, to our wrapper's end tag, which must not come out.
	 */
	if (d->wrapname[0] != '\0' && kind != MK_PI && n->len >= strlen(d->wrapname) + 3)
	{
		size_t		k = strlen(d->wrapname);
		const char *tail = (const char *) text + n->len - k - 3;

		if (tail[0] == '<' && tail[1] == '/' && strncasecmp(tail + 2, d->wrapname, k) == 0 && tail[k + 2] == '>')
			n->len -= k + 3;
	}
	n->text = m_strdup(d, text ? (const char *) text : "", n->len);
	if (kind == MK_TEXT && !all_ws(n->text, n->len))
		par->flags |= F_CONTAINER;
	add_child(par, n);
	return n;
}

/* libxml2's tree into ours: -1 on running out of memory or depth (XML) */
static int
convert(TfMarkupDoc *d, xmlDocPtr xd, xmlNodePtr wrap, char *err, size_t errlen)
{
	MNode	   *par = &d->root;
	int			depth = 0;
	xmlNodePtr	x = xd->children;
	size_t		seen = 0;

	while (x && !d->oom)
	{
		bool		down = false;

		/* (libxml2's tree is freed by the caller: no longjmp from here) */
		if ((++seen & 1023) == 0 && spm_interrupt_pending != NULL && spm_interrupt_pending())
		{
			snprintf(err, errlen, "interrupted");
			return TF_MARKUP_INTERRUPTED;
		}

		switch (x->type)
		{
			case XML_ELEMENT_NODE:
				if (x != wrap && depth >= TF_MARKUP_MAX_DEPTH)
				{
					snprintf(err, errlen, "line %d: element nesting too deep (limit %d)",
							 (int) x->line, TF_MARKUP_MAX_DEPTH);
					return TF_MARKUP_LIMIT;
				}
				if (x != wrap)
				{
					MNode	   *n = new_elem(d, x, par);

					x->_private = n;
					if (n && x->children)
					{
						par = n;
						depth++;
					}
				}
				down = x->children != NULL;
				break;
			case XML_TEXT_NODE:
				new_leaf(d, par, MK_TEXT, NULL, x->content);
				break;
			case XML_CDATA_SECTION_NODE:
				new_leaf(d, par, MK_CDATA, NULL, x->content);
				break;
			case XML_COMMENT_NODE:
				new_leaf(d, par, MK_COMMENT, NULL, x->content);
				break;
			case XML_PI_NODE:
				new_leaf(d, par, MK_PI, x->name, x->content);
				break;
			case XML_ENTITY_REF_NODE:
				new_leaf(d, par, MK_ENTREF, x->name, NULL);
				break;
			case XML_DTD_NODE:
				if (d->document)	/* a fragment's (HTML) is misplaced: dropped */
				{
					xmlBufferPtr b = xmlBufferCreate();
					MNode	   *n;

					if (b == NULL)
						d->oom = true;
					else if (xmlNodeDump(b, xd, x, 0, 0) >= 0 &&
							 (n = new_leaf(d, par, MK_DTD, NULL, NULL)) != NULL)
					{
						n->len = xmlBufferLength(b);
						n->text = m_strdup(d, (const char *) xmlBufferContent(b), n->len);
					}
					xmlBufferFree(b);
				}
				break;
			default:
				break;
		}
		if (down)
		{
			x = x->children;
			continue;
		}
		while (x && x->next == NULL)
		{
			x = x->parent;
			if (x == NULL || x->type != XML_ELEMENT_NODE)
				x = NULL;
			else if (x->_private == par && par != &d->root)
			{
				par = par->parent;
				depth--;
			}
		}
		if (x)
			x = x->next;
	}
	if (d->oom)
		snprintf(err, errlen, "out of memory");
	return d->oom ? -1 : 0;
}

/* ---- blocks ---- */

static int
new_block(TfMarkupDoc *d)
{
	if (d->nblocks == d->capblocks)
	{
		int			cap = d->capblocks ? d->capblocks * 2 : 16;
		TfMarkupBlock *b = m_alloc(d, cap * sizeof(TfMarkupBlock));
		BlockInfo  *in = m_alloc(d, cap * sizeof(BlockInfo));

		if (b == NULL || in == NULL)
			return -1;
		if (d->nblocks)
		{
			memcpy(b, d->blocks, d->nblocks * sizeof(TfMarkupBlock));
			memcpy(in, d->info, d->nblocks * sizeof(BlockInfo));
		}
		d->blocks = b;
		d->info = in;
		d->capblocks = cap;
	}
	return d->nblocks++;
}

static void
attr_blocks(TfMarkupDoc *d, MNode *n)
{
	if (d->format != TF_MARKUP_HTML || (n->flags & F_INVERB))
		return;
	for (int i = 0; i < n->nattrs; i++)
	{
		MAttr	   *m = &n->attrs[i];
		int			b;

		if (!in_list(text_attrs, m->name) || all_ws(m->value, m->len) ||
			(b = new_block(d)) < 0)
			continue;
		d->blocks[b].text = m->value;
		d->blocks[b].len = m->len;
		d->blocks[b].attr = m->name;
		d->info[b].attr = m;
		m->block = b;
	}
}

static bool
run_member(const TfMarkupDoc *d, const MNode *n)
{
	if (n->kind == MK_DTD)
		return false;
	if (d->format == TF_MARKUP_XML)
		return (n->parent->flags & F_CONTAINER) != 0;
	return n->kind != MK_ELEM ||
		((n->flags & F_INLINE) && ((n->flags & F_VERB) || !(n->flags & F_HASBLOCK)));
}

/* is n an anchor kept whole at a point (nothing of it in the text)? */
static inline bool
is_point(const MNode *n)
{
	return n->kind != MK_TEXT && (n->kind != MK_ELEM || (n->flags & (F_VERB | F_VOID)));
}

/* An HTML <br>: in a block's text it is a newline after its point (else "Wiese.<br>Zwei" is one word). */
static inline bool
is_line_break(const TfMarkupDoc *d, const MNode *n)
{
	return d->format == TF_MARKUP_HTML && n->kind == MK_ELEM && strcmp(n->name, "br") == 0;
}

/*
 * The run first..last (siblings): pass 0 counts text, anchors and whether
 * there is anything to translate; pass 1 fills the block (if any) and
 * gives the attributes inside their blocks.
 */
static void
make_run(TfMarkupDoc *d, MNode *first, MNode *last)
{
	size_t		bytes = 0,
				lead = 0,
				trail = 0,
				pos = 0;
	int			nanch = 0,
				b = -1,
				cur = -1;
	bool		has_text = false;
	char	   *text = NULL;
	TfAnchor   *anch = NULL;
	MNode	  **anodes = NULL;

	if (first->kind == MK_TEXT)
		while (lead < first->len && is_ws((unsigned char) first->text[lead]))
			lead++;
	if (last->kind == MK_TEXT)
		while (trail < last->len - (first == last ? lead : 0) &&
			   is_ws((unsigned char) last->text[last->len - 1 - trail]))
			trail++;
	for (int pass = 0; pass < 2; pass++)
	{
		if (pass == 1 && has_text)
		{
			if ((b = new_block(d)) < 0 || (text = m_alloc(d, bytes + 1)) == NULL ||
				(anch = m_alloc(d, (nanch ? nanch : 1) * sizeof(TfAnchor))) == NULL ||
				(anodes = m_alloc(d, (nanch ? nanch : 1) * sizeof(MNode *))) == NULL)
				return;
			first->block = b;
			nanch = 0;
		}
		for (MNode *top = first;; top = top->next)
		{
			MNode	   *n = top;

			for (;;)
			{
				bool		down = false;

				if (n->kind == MK_TEXT)
				{
					size_t		s = n == first ? lead : 0,
								e = n->len - (n == last ? trail : 0);

					if (pass == 0)
					{
						bytes += e - s;
						has_text = has_text || !all_ws(n->text + s, e - s);
					}
					else if (b >= 0)
					{
						memcpy(text + pos, n->text + s, e - s);
						pos += e - s;
					}
				}
				else if (pass == 0)
				{
					nanch++;
					bytes += is_line_break(d, n);
				}
				else
				{
					if (b >= 0)
					{
						anch[nanch].start = anch[nanch].end = pos;
						anch[nanch].parent = cur;
						anch[nanch].point = is_point(n);
						anch[nanch].name = n->kind == MK_ELEM ? n->name :
							n->kind == MK_COMMENT ? "#comment" : n->kind == MK_PI ? "#pi" :
							n->kind == MK_CDATA ? "#cdata" : "#entity";
						anodes[nanch] = n;
						if (!is_point(n))
							cur = nanch;
						nanch++;
						/* a line break is whitespace to the model: the text gets a newline after it */
						if (is_line_break(d, n))
							text[pos++] = '\n';
					}
					if (n->kind == MK_ELEM)
						attr_blocks(d, n);
				}
				down = n->kind == MK_ELEM && !is_point(n) && n->first;
				if (down)
				{
					n = n->first;
					continue;
				}
				/* leaving n and the elements it ends */
				for (;;)
				{
					if (pass == 1 && b >= 0 && n->kind == MK_ELEM && !is_point(n))
					{
						anch[cur].end = pos;
						cur = anch[cur].parent;
					}
					if (n == top || n->next)
						break;
					n = n->parent;
				}
				if (n == top)
					break;
				n = n->next;
			}
			if (top == last)
				break;
		}
	}
	if (b < 0)
		return;
	text[pos] = '\0';
	d->blocks[b].text = text;
	d->blocks[b].len = pos;
	d->blocks[b].anchors = anch;
	d->blocks[b].nanchors = nanch;
	d->blocks[b].container = first->parent != NULL && first->parent->kind == MK_ELEM ? first->parent->name : NULL;
	d->info[b].first = first;
	d->info[b].last = last;
	d->info[b].lead = lead;
	d->info[b].trail = trail;
	d->info[b].anodes = anodes;
}

static void
find_blocks(TfMarkupDoc *d)
{
	MNode	   *n = d->root.first;
	size_t		work = 0;

	while (n && !d->oom)
	{
		SPM_CHECK_INTERRUPTS_WORK(work, 64);
		if (run_member(d, n))
		{
			MNode	   *last = n;

			while (last->next && run_member(d, last->next))
				last = last->next;
			make_run(d, n, last);
			n = last;
		}
		else if (n->kind == MK_ELEM && !(n->flags & F_VERB))
		{
			attr_blocks(d, n);
			if (n->first)
			{
				n = n->first;
				continue;
			}
		}
		while (n != &d->root && n->next == NULL)
			n = n->parent;
		n = n == &d->root ? NULL : n->next;
	}
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
		rc = convert(d, xd, wrap, err, errlen);
	}
	if (xd)
		xmlFreeDoc(xd);
	if (ctxt && format == TF_MARKUP_HTML)
		htmlFreeParserCtxt(ctxt);
	else if (ctxt)
		xmlFreeParserCtxt(ctxt);
	if (rc < 0)
		return rc;
	find_blocks(d);
	if (d->oom)
	{
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	*docp = d;
	return 0;
}

void
tf_markup_blocks(const TfMarkupDoc *doc, const TfMarkupBlock **blocks, int *nblocks)
{
	*blocks = doc->blocks;
	*nblocks = doc->nblocks;
}

/* ---- rendering ---- */

typedef struct Out
{
	TfMarkupDoc *d;
	const TfRendered *r;
	size_t	   *spans;
	char	   *p;
	size_t		len,
				cap;
	bool		html;
	bool		oom;
	bool		raw_lt;			/* the script text so far ends in '<' */
} Out;

static void
put(Out *o, const char *s, size_t n)
{
	if (o->oom || n == 0)
		return;
	if (o->len + n + 1 > o->cap)
	{
		size_t		cap = o->cap ? o->cap : 256;
		char	   *p;

		while (cap < o->len + n + 1)
			cap *= 2;
		if ((p = o->d->alloc.alloc(o->d->alloc.ctx, cap)) == NULL)
		{
			o->oom = true;
			return;
		}
		if (o->len)
			memcpy(p, o->p, o->len);
		o->p = p;
		o->cap = cap;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = '\0';
}

static inline void
puts_(Out *o, const char *s)
{
	put(o, s, strlen(s));
}

/* character data (attr: an attribute value); XML forbids C0 controls, U+FFFE, U+FFFF */
static void
put_escaped(Out *o, const char *s, size_t n, bool attr)
{
	const unsigned char *p = (const unsigned char *) s;
	size_t		done = 0;

	if (n == 0)
		return;
	for (size_t i = 0; i < n; i++)
	{
		const char *r = NULL;
		size_t		skip = 1;

		switch (p[i])
		{
			case '&': r = "&amp;"; break;
			case '<': r = "&lt;"; break;
			case '>': r = attr ? NULL : "&gt;"; break;
			case '"': r = attr ? "&quot;" : NULL; break;
			case '\r': r = o->html ? NULL : "&#13;"; break;
			case '\n': r = attr && !o->html ? "&#10;" : NULL; break;
			case '\t': r = attr && !o->html ? "&#9;" : NULL; break;
			default:
				if (!o->html && p[i] < 0x20)
					r = "\xEF\xBF\xBD";
				else if (!o->html && p[i] == 0xEF && i + 2 < n && p[i + 1] == 0xBF &&
						 (p[i + 2] & 0xFE) == 0xBE)
				{
					r = "\xEF\xBF\xBD";
					skip = 3;
				}
		}
		if (r == NULL)
			continue;
		put(o, s + done, i - done);
		puts_(o, r);
		i += skip - 1;
		done = i + 1;
	}
	put(o, s + done, n - done);
}

/* a start tag; true if an end tag must follow (empty: no content) */
static bool
open_tag(Out *o, const MNode *n, bool empty)
{
	o->raw_lt = false;
	puts_(o, "<");
	puts_(o, n->name);
	for (int i = 0; i < n->nattrs; i++)
	{
		const MAttr *m = &n->attrs[i];
		const TfRendered *r = m->block >= 0 && o->r && o->r[m->block].text ? &o->r[m->block] : NULL;

		puts_(o, " ");
		puts_(o, m->name);
		puts_(o, "=\"");
		if (m->block >= 0 && o->spans)
			o->spans[2 * m->block] = o->len;
		if (o->html)
			put_escaped(o, r ? r->text : m->value, r ? r->len : m->len, true);
		else
			put(o, m->value, m->len);
		if (m->block >= 0 && o->spans)
			o->spans[2 * m->block + 1] = o->len;
		puts_(o, "\"");
	}
	if (o->html && (n->flags & F_VOID))
	{
		puts_(o, ">");
		return false;
	}
	puts_(o, !o->html && empty ? "/>" : ">");
	return o->html || !empty;
}

static void
close_tag(Out *o, const MNode *n)
{
	puts_(o, "</");
	puts_(o, n->name);
	puts_(o, ">");
}

static void emit_subtree(Out *o, MNode *top);

static int
cmp_key(const void *a, const void *b)
{
	const size_t *x = a,
			   *y = b;

	/* {start, end, index} */
	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return x[2] < y[2] ? -1 : x[2] > y[2];
}

static size_t
u8fix(const char *t, size_t len, size_t x)
{
	if (x > len)
		x = len;
	while (x > 0 && x < len && ((unsigned char) t[x] & 0xC0) == 0x80)
		x--;
	return x;
}

/* block b's text with its anchors, the ranges repaired (markup.h) */
static void
emit_block(Out *o, int b)
{
	const TfMarkupBlock *src = &o->d->blocks[b];
	const BlockInfo *in = &o->d->info[b];
	const TfRendered *r = o->r && o->r[b].text ? &o->r[b] : NULL;
	const char *t = r ? r->text : src->text;
	size_t		len = r ? r->len : src->len,
				pos = 0;
	int			n = src->nanchors,
				par = -1,
				j;
	size_t	   *s,
			   *e,
			   *keys;
	int		   *cnt,
			   *grp,
			   *first,
			   *next;

	if (o->spans)
		o->spans[2 * b] = o->len;
	s = m_alloc(o->d, (n + 1) * sizeof(size_t) * 5);
	cnt = m_alloc(o->d, (n + 2) * sizeof(int) * 4);
	if (s == NULL || cnt == NULL)
	{
		o->oom = true;
		return;
	}
	e = s + n + 1;
	keys = e + n + 1;			/* 3 per anchor */
	grp = cnt + n + 2;
	first = grp + n + 2;
	next = first + n + 2;
	for (j = 0; j < n; j++)
	{
		const TfAnchor *an = &src->anchors[j];

		s[j] = r ? (r->placed ? r->placed[j].start : len) : an->start;
		e[j] = r ? (r->placed ? r->placed[j].end : len) : an->end;
		cnt[an->parent + 1 + 1]++;
		first[j] = next[j] = -1;
	}
	first[n] = -1;
	/* children grouped by parent (g = parent + 1), in index order */
	for (j = 1; j <= n + 1; j++)
		cnt[j] += cnt[j - 1];
	for (j = 0; j < n; j++)
		grp[cnt[src->anchors[j].parent + 1]++] = j;
	/* cnt[g] now ends group g; parents come before children */
	for (int g = 0, at = 0; g <= n; g++)
	{
		size_t		ps = g ? s[g - 1] : 0,
					pe = g ? e[g - 1] : len,
					prev = ps;
		int			k = cnt[g] - at,
					last = -1;

		for (int i = 0; i < k; i++)
		{
			int			c = grp[at + i];
			size_t		cs = u8fix(t, len, s[c]),
						ce = src->anchors[c].point ? cs : u8fix(t, len, e[c]);

			cs = cs < ps ? ps : cs > pe ? pe : cs;
			ce = ce < cs ? cs : ce > pe ? pe : ce;
			keys[3 * i] = cs;
			keys[3 * i + 1] = ce;
			keys[3 * i + 2] = (size_t) c;
		}
		qsort(keys, k, 3 * sizeof(size_t), cmp_key);
		for (int i = 0; i < k; i++)
		{
			int			c = (int) keys[3 * i + 2];

			s[c] = keys[3 * i] < prev ? prev : keys[3 * i];
			e[c] = keys[3 * i + 1] < s[c] ? s[c] : keys[3 * i + 1];
			prev = e[c];
			if (last < 0)
				first[g == 0 ? n : g - 1] = c;
			else
				next[last] = c;
			last = c;
		}
		at = cnt[g];
	}
	/* the anchors as a tree, text between them */
	j = first[n];
	for (;;)
	{
		if (j >= 0)
		{
			MNode	   *nd = in->anodes[j];

			/* (a <br>'s newline may have been passed over: nothing starts before pos) */
			if (s[j] > pos)
			{
				put_escaped(o, t + pos, s[j] - pos, false);
				pos = s[j];
			}
			if (src->anchors[j].point)
			{
				emit_subtree(o, nd);
				/* the newline that stands for a <br> in the text, if it follows it still */
				if (is_line_break(o->d, nd) && pos < (par < 0 ? len : e[par]) && t[pos] == '\n')
					pos++;
				j = next[j];
				continue;
			}
			if (!open_tag(o, nd, s[j] == e[j] && first[j] < 0))
			{
				j = next[j];
				continue;
			}
			par = j;
			j = first[j];
			continue;
		}
		if ((par < 0 ? len : e[par]) > pos)
		{
			put_escaped(o, t + pos, (par < 0 ? len : e[par]) - pos, false);
			pos = par < 0 ? len : e[par];
		}
		if (par < 0)
			break;
		close_tag(o, in->anodes[par]);
		j = next[par];
		par = src->anchors[par].parent;
	}
	if (o->spans)
		o->spans[2 * b + 1] = o->len;
}

/*
 * HTML script or style text, raw, but never its own end tag: libxml2 drops
 * control characters ("</sc\x03ript") and may split the text, so a "</"
 * that could begin one, even across nodes, becomes "<\/".
 */
static void
put_raw(Out *o, const MNode *n)
{
	const char *name = n->parent->kind == MK_ELEM ? n->parent->name : "script";
	size_t		k = strlen(name),
				done = 0;

	for (size_t i = 0; i < n->len; i++)
		if (n->text[i] == '/' && (i ? n->text[i - 1] == '<' : o->raw_lt) &&
			(i + 1 + k > n->len ? (n->next != NULL && n->next->kind == MK_TEXT) :
			 strncasecmp(n->text + i + 1, name, k) == 0))
		{
			put(o, n->text + done, i - done);
			puts_(o, "\\");
			done = i;
		}
	put(o, n->text + done, n->len - done);
	o->raw_lt = n->len && n->text[n->len - 1] == '<';
}

/*
 * The content of a comment or processing instruction, which must not end
 * it early when read again: C0 controls but tab, LF and CR are left out
 * (libxml2 drops them as it reads, so "--\x1e>" would become "-->"), and
 * a space goes into each end met inside ("-- >").
 */
static void
put_guarded(Out *o, const char *s, size_t n, const char *end)
{
	size_t		el = strlen(end);
	char		last[4] = {0};	/* the last bytes written */

	for (size_t i = 0; i < n; i++)
	{
		unsigned char c = (unsigned char) s[i];

		if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
			continue;
		if (c == (unsigned char) end[el - 1] && memcmp(last + 4 - (el - 1), end, el - 1) == 0)
		{
			put(o, " ", 1);
			memset(last, 0, sizeof(last));
		}
		put(o, &s[i], 1);
		memmove(last, last + 1, 3);
		last[3] = (char) c;
	}
}

static void
emit_leaf(Out *o, const MNode *n)
{
	if (n->kind != MK_TEXT && n->kind != MK_CDATA)
		o->raw_lt = false;
	switch (n->kind)
	{
		case MK_TEXT:
			if (o->html && n->parent->kind == MK_ELEM &&
				(strcmp(n->parent->name, "script") == 0 || strcmp(n->parent->name, "style") == 0))
				put_raw(o, n);
			else
				put_escaped(o, n->text, n->len, false);
			break;
		case MK_CDATA:
			if (o->html)
				put_raw(o, n);
			else
			{
				puts_(o, "<![CDATA[");
				put(o, n->text, n->len);
				puts_(o, "]]>");
			}
			break;
		case MK_COMMENT:
			puts_(o, "<!--");
			put_guarded(o, n->text, n->len, "-->");
			puts_(o, "-->");
			break;
		case MK_PI:
			puts_(o, "<?");
			puts_(o, n->name);
			if (n->len)
				puts_(o, " ");
			put_guarded(o, n->text, n->len, "?>");
			puts_(o, o->html ? ">" : "?>");
			break;
		case MK_ENTREF:
			puts_(o, "&");
			puts_(o, n->name);
			puts_(o, ";");
			break;
		case MK_DTD:
			put(o, n->text, n->len);
			break;
	}
}

/* top and everything below it, in document order, without recursion */
static void
emit_subtree(Out *o, MNode *top)
{
	MNode	   *n = top;
	size_t		work = 0;

	for (;;)
	{
		bool		closes = false;

		SPM_CHECK_INTERRUPTS_WORK(work, 64);

		/* (top may begin a run as the point it is in it) */
		if (n->block >= 0 && n != top)
		{
			const BlockInfo *in = &o->d->info[n->block];

			put_escaped(o, n->text, in->lead, false);
			emit_block(o, n->block);
			n = in->last;
			if (n->kind == MK_TEXT)
				put_escaped(o, n->text + n->len - in->trail, in->trail, false);
		}
		else if (n->kind == MK_ELEM)
		{
			closes = open_tag(o, n, n->first == NULL);
			if (closes && n->first)
			{
				n = n->first;
				continue;
			}
		}
		else if (n->kind == MK_ROOT)
		{
			if (n->first)
			{
				n = n->first;
				continue;
			}
		}
		else
			emit_leaf(o, n);
		if (closes)
			close_tag(o, n);
		for (;;)
		{
			if (o->d->document && n->parent == &o->d->root)
				puts_(o, "\n");
			if (n == top || n->next)
				break;
			n = n->parent;
			if (n->kind == MK_ELEM)
				close_tag(o, n);
		}
		if (n == top)
			break;
		n = n->next;
	}
}

int
tf_markup_render_spans(const TfMarkupDoc *doc, const TfRendered *r, const SpmAlloc *a,
					   char **out, size_t *outlen, size_t *spans, char *err, size_t errlen)
{
	TfMarkupDoc *d = (TfMarkupDoc *) doc;
	Out			o = {0};
	SpmAlloc	saved = d->alloc;

	/* the scratch memory comes from the caller's allocator this time */
	d->alloc = *a;
	d->oom = false;
	o.d = d;
	o.r = r;
	o.spans = spans;
	o.html = doc->format == TF_MARKUP_HTML;
	if (spans)
		memset(spans, 0, 2 * doc->nblocks * sizeof(size_t));
	put(&o, "", 0);
	if (doc->decl)
	{
		put(&o, doc->decl, doc->decl_len);
		puts_(&o, "\n");
	}
	emit_subtree(&o, &d->root);
	if (o.p == NULL && !o.oom)
		put(&o, " ", 1), o.len = 0, o.p[0] = '\0';
	d->alloc = saved;
	if (o.oom || d->oom)
	{
		d->oom = false;
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	*out = o.p;
	*outlen = o.len;
	return 0;
}

int
tf_markup_render(const TfMarkupDoc *doc, const TfRendered *r, const SpmAlloc *a,
				 char **out, size_t *outlen, char *err, size_t errlen)
{
	return tf_markup_render_spans(doc, r, a, out, outlen, NULL, err, errlen);
}
