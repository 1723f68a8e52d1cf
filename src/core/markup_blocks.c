/*
 * markup_blocks.c
 *		The tree cut into blocks of translatable text: runs of inline
 *		content with their anchors (the inline elements, kept at points or
 *		around words), and HTML's text attributes (title, alt, ...).
 *		No postgres.h.
 */
#include "markup_internal.h"

static const char *const text_attrs[] = {
	"title", "alt", "placeholder", "aria-label", NULL
};

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

void
tf_markup_find_blocks(TfMarkupDoc *d)
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

void
tf_markup_blocks(const TfMarkupDoc *doc, const TfMarkupBlock **blocks, int *nblocks)
{
	*blocks = doc->blocks;
	*nblocks = doc->nblocks;
}
