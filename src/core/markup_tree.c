/*
 * markup_tree.c
 *		libxml2's tree copied into ours (markup_internal.h) at once, each
 *		element marked verbatim, inline or void by its name and attributes.
 *		Walked with parent pointers: nothing recurses on the input.
 *		No postgres.h.
 */
#include "markup_internal.h"

#include <stdio.h>
#include <strings.h>

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
int
tf_markup_convert(TfMarkupDoc *d, xmlDocPtr xd, xmlNodePtr wrap, char *err, size_t errlen)
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
