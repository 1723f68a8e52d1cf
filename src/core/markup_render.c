/*
 * markup_render.c
 *		The tree rendered back around the translated blocks: markup kept
 *		byte for byte where it can be, text escaped for its format, anchors
 *		placed where the translation put them.  No postgres.h.
 */
#include "markup_internal.h"

#include <stdio.h>
#include <strings.h>

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
