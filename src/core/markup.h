/*
 * markup.h
 *		HTML and XML as blocks of translatable text with inline anchors, and
 *		the document rendered back around translated text.  Part of the
 *		core: no postgres.h (test/unit/test_markup.c,
 *		test/fuzz/fuzz_markup.c).
 *
 * libxml2 parses; its tree is copied at once into one allocated from the
 * caller's SpmAlloc and freed before tf_markup_parse returns, so no
 * libxml2 memory outlives the call (the caller may longjmp away later).
 * libxml2's global error handlers are saved and restored around the parse:
 * nothing is printed.  (If the allocator does not return while the tree
 * is copied, the libxml2 tree, malloc'd, leaks.)
 *
 * A block is a maximal run of text and inline elements inside a
 * non-inline element (HTML: by element name; XML: an element with
 * non-whitespace text among its children is a block container, its
 * whole content one block).  Whitespace at the edges of a run, in the
 * run's own text nodes, stays outside the block.  Verbatim content (code,
 * pre, script, style, kbd, samp, var, textarea, translate="no",
 * class="notranslate", comments, processing instructions, CDATA, XML
 * entity references) is never translated: inside a block it is a point
 * anchor, elsewhere it is reproduced.  HTML title, alt, placeholder and
 * aria-label attributes are blocks of their own.
 *
 * Nesting is bounded at TF_MARKUP_MAX_DEPTH, for HTML too: libxml2 (without
 * XML_PARSE_HUGE) stops parsing there and would lose the rest, so deeper
 * input is an error ("line 1: element nesting too deep (limit 256)"), in a
 * fragment from a depth of 256 (the wrapper element counts), else 257.
 */
#ifndef MARKUP_H
#define MARKUP_H

#include <stdbool.h>
#include <stddef.h>

#include "spm.h"				/* SpmAlloc */

#define TF_MARKUP_HTML 1
#define TF_MARKUP_XML 2
#define TF_MARKUP_MAX_DEPTH 256
#define TF_MARKUP_MAX_ATTRS 1000	/* attributes of one element */
#define TF_MARKUP_MAX_TOKEN 1048576	/* bytes of a tag, comment, CDATA section or PI: libxml2 reads each whole, deaf to cancel */
#define TF_MARKUP_MAX_NODES 250000	/* elements, comments, PIs of a document (texts lie between): freeing more in libxml2 would take a cancel past 100 ms */

/* tf_markup_parse's failures besides -1 (malformed XML, out of memory) */
#define TF_MARKUP_LIMIT (-2)		/* one of the limits above */
#define TF_MARKUP_INTERRUPTED (-3)	/* spm_interrupt_pending() said so: serve it, then retry */

typedef struct TfMarkupDoc TfMarkupDoc;

typedef struct TfAnchor
{
	size_t		start,
				end;			/* byte range of the block text the element
								 * covers; start == end: a point */
	int			parent;			/* enclosing anchor in this block, -1: none */
	bool		point;			/* void element (br, img, ...) or verbatim
								 * content kept whole at a point */
	const char *name;			/* element name, or "#comment", "#pi",
								 * "#cdata", "#entity" */
} TfAnchor;

typedef struct TfMarkupBlock
{
	const char *text;			/* UTF-8, entities decoded, verbatim parts
								 * left out, NUL-terminated */
	size_t		len;
	TfAnchor   *anchors;		/* start tag order: parents before children */
	int			nanchors;
	const char *attr;			/* an attribute's block: its name; else NULL */
	const char *container;		/* the element the run is in ("p", "h1"); NULL at the top */
} TfMarkupBlock;

typedef struct TfPlaced
{
	size_t		start,
				end;
} TfPlaced;

/*
 * A block's translation: text, and for each anchor its range in it.
 * text NULL: the source block unchanged.  placed NULL: every anchor
 * empty at the end of the text.
 */
typedef struct TfRendered
{
	const char *text;
	size_t		len;
	const TfPlaced *placed;
} TfRendered;

/*
 * Is s a whole document rather than a fragment: after a BOM, whitespace
 * and comments it starts with <?xml (XML), <!DOCTYPE, or <html (HTML)?
 * A fragment's XML errors are invalid content (SQLSTATE 2200N), a
 * document's an invalid document (2200M).
 */
bool		tf_markup_is_document(const char *s, size_t len, int format);

/*
 * Parse s (len bytes of valid UTF-8) as TF_MARKUP_HTML or TF_MARKUP_XML.
 * 0, or -1 with a message in err ("line 3: Opening and ending tag
 * mismatch: p line 1 and b"), TF_MARKUP_LIMIT past a limit, or
 * TF_MARKUP_INTERRUPTED.  HTML fails only past a limit, on memory or
 * interrupted; malformed HTML is repaired as libxml2 does.  Linear in len
 * (a tag's attributes are counted before libxml2 sees them); the interrupt
 * hook is called outside libxml2 only.
 */
int			tf_markup_parse(const char *s, size_t len, int format,
							const SpmAlloc *a, TfMarkupDoc **doc,
							char *err, size_t errlen);

/* The blocks to translate, in document order (owned by doc). */
void		tf_markup_blocks(const TfMarkupDoc *doc,
							 const TfMarkupBlock **blocks, int *nblocks);

/*
 * The document with each block replaced by r[i] (nblocks of them; r NULL:
 * the source).  Ranges are repaired, never refused: clamped to the text
 * and to a UTF-8 boundary, a child into its parent, a point to its start;
 * siblings are emitted in the order of their starts (document order on
 * ties: a translation may reorder them) and pushed apart where they
 * overlap.  Every element comes out once, in its original nesting, and a
 * block's markup with its tags stripped is its text.  Rendering the
 * source gives back the parsed tree (the same bytes for input already in
 * this serialization).  *out is NUL-terminated.  0, or -1 with err.
 */
int			tf_markup_render(const TfMarkupDoc *doc, const TfRendered *r,
							 const SpmAlloc *a, char **out, size_t *outlen,
							 char *err, size_t errlen);

/*
 * The same, and where each block went: spans[2i], spans[2i+1] is the byte
 * range of *out holding block i (its escaped text and anchors' markup;
 * for an attribute, the escaped value).  spans: 2 * nblocks of them.
 */
int			tf_markup_render_spans(const TfMarkupDoc *doc, const TfRendered *r,
								   const SpmAlloc *a, char **out,
								   size_t *outlen, size_t *spans,
								   char *err, size_t errlen);

#endif							/* MARKUP_H */
