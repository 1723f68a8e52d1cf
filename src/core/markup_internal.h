/*
 * markup_internal.h
 *		What the parts of the markup module share (markup.h is its face):
 *		libxml2's tree copied into ours (markup_tree.c), the parse with its
 *		limits and cancel (markup_parse.c), the tree cut into blocks of text
 *		(markup_blocks.c), and rendered back (markup_render.c).
 *		No postgres.h.
 */
#ifndef MARKUP_INTERNAL_H
#define MARKUP_INTERNAL_H

#include "markup.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <libxml/tree.h>

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

static inline bool
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

static inline bool
all_ws(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!is_ws((unsigned char) s[i]))
			return false;
	return true;
}

static inline void *
m_alloc(TfMarkupDoc *d, size_t n)
{
	void	   *p = d->oom ? NULL : d->alloc.alloc(d->alloc.ctx, n ? n : 1);

	if (p == NULL)
		d->oom = true;
	else
		memset(p, 0, n);
	return p;
}

static inline char *
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

/* An HTML <br>: in a block's text it is a newline after its point (else "Wiese.<br>Zwei" is one word). */
static inline bool
is_line_break(const TfMarkupDoc *d, const MNode *n)
{
	return d->format == TF_MARKUP_HTML && n->kind == MK_ELEM && strcmp(n->name, "br") == 0;
}

/* libxml2's tree into ours: -1 on running out of memory or depth (XML) (markup_tree.c) */
int			tf_markup_convert(TfMarkupDoc *d, xmlDocPtr xd, xmlNodePtr wrap, char *err, size_t errlen);

/* the blocks of text of the tree (markup_blocks.c) */
void		tf_markup_find_blocks(TfMarkupDoc *d);

#endif							/* MARKUP_INTERNAL_H */
