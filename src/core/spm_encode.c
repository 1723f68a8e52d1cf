/*
 * spm_encode.c
 *		Text to pieces: unigram (Viterbi over piece scores) and BPE (merges by
 *		score), then unknowns merged or decomposed into byte pieces.  Follows
 *		the reference library 0.1.97 down to float/double arithmetic and
 *		tie-breaking, so that the ids are identical.  No postgres.h.
 */
#include "spm.h"

#include <string.h>

/* A segment of the normalized text and its id, before post-processing. */
typedef struct Seg
{
	const char *str;
	uint32_t	len;
	int			id;
} Seg;

/* ------------------------------------------------------------- unigram */

#define UNK_PENALTY 10.0f

/*
 * EncodeOptimized: for each character boundary st, every piece that is a
 * prefix of s[st:] extends the best path ending at st.  Piece scores are
 * added and compared in double against the stored float, the unknown path
 * in float, as the reference does; ties keep the first candidate.
 */
static int
encode_unigram(const SpmModel *m, const char *s, size_t n, const SpmAlloc *a, Seg **out)
{
	float	   *score = a->alloc(a->ctx, sizeof(float) * (n + 1));
	int		   *start = a->alloc(a->ctx, sizeof(int) * (n + 1));
	int		   *ids = a->alloc(a->ctx, sizeof(int) * (n + 1));
	const float unk_score = m->min_score - UNK_PENALTY;
	size_t		st = 0;
	int			count = 0;
	Seg		   *segs;
	size_t		work = 0;		/* bytes and lookups, for the interrupt hook */

	for (size_t i = 0; i <= n; i++)
	{
		SPM_CHECK_INTERRUPTS_WORK(work, 1);
		start[i] = -1;
	}

	while (st < n)
	{
		const float base = score[st];
		size_t		mblen = (size_t) spm_one_char_len(s + st);
		bool		has_single = false;
		uint32_t	h = SPM_HASH_INIT;

		SPM_CHECK_INTERRUPTS_WORK(work, mblen);
		if (mblen > n - st)
			mblen = n - st;

		for (uint32_t l = 1; st + l <= n && l <= SPM_MAX_PIECE_BYTES; l++)
		{
			int32_t		id = spm_map_step(&m->normal, s + st, l, &h);
			const SpmPiece *p;
			double		sc,
						cand;
			size_t		t = st + l;

			SPM_CHECK_INTERRUPTS_WORK(work, 1);
			if (id == -2)
				break;
			if (id < 0)
				continue;
			p = &m->pieces[id];
			if (p->type == SPM_UNUSED)
				continue;
			if (p->type == SPM_USER_DEFINED)
				sc = (double) ((float) l * m->max_score) - 0.1;
			else
				sc = (double) p->score;
			cand = sc + (double) base;
			if (start[t] == -1 || cand > (double) score[t])
			{
				score[t] = (float) cand;
				start[t] = (int) st;
				ids[t] = id;
			}
			if (!has_single && l == mblen)
				has_single = true;
		}

		if (!has_single)
		{
			float		cand = unk_score + base;
			size_t		t = st + mblen;

			if (start[t] == -1 || cand > score[t])
			{
				score[t] = cand;
				start[t] = (int) st;
				ids[t] = m->unk_id;
			}
		}
		st += mblen;
	}

	for (size_t e = n; e > 0; e = (size_t) start[e])
	{
		SPM_CHECK_INTERRUPTS_WORK(work, 1);
		count++;
	}
	segs = a->alloc(a->ctx, sizeof(Seg) * (size_t) (count > 0 ? count : 1));
	for (size_t e = n, i = (size_t) count; e > 0; e = (size_t) start[e])
	{
		SPM_CHECK_INTERRUPTS_WORK(work, 1);
		i--;
		segs[i].str = s + start[e];
		segs[i].len = (uint32_t) (e - (size_t) start[e]);
		segs[i].id = ids[e];
	}
	*out = segs;
	return count;
}

/* ----------------------------------------------------------------- BPE */

typedef struct Symbol
{
	const char *str;
	uint32_t	len;			/* 0 once merged into its left neighbour */
	int			prev;
	int			next;
	bool		freeze;			/* a user-defined piece: never merged */
} Symbol;

typedef struct Pair
{
	float		score;
	int			left;
	int			right;
	uint32_t	size;
} Pair;

/* Higher score first; for equal scores the leftmost pair. */
static inline bool
pair_before(const Pair *x, const Pair *y)
{
	return x->score > y->score || (x->score == y->score && x->left < y->left);
}

typedef struct Heap
{
	Pair	   *items;
	int			n;
} Heap;

static void
heap_push(Heap *h, Pair p)
{
	int			i = h->n++;

	while (i > 0)
	{
		int			parent = (i - 1) / 2;

		if (!pair_before(&p, &h->items[parent]))
			break;
		h->items[i] = h->items[parent];
		i = parent;
	}
	h->items[i] = p;
}

static Pair
heap_pop(Heap *h)
{
	Pair		top = h->items[0];
	Pair		last = h->items[--h->n];
	int			i = 0;

	for (;;)
	{
		int			c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && pair_before(&h->items[c + 1], &h->items[c]))
			c++;
		if (!pair_before(&h->items[c], &last))
			break;
		h->items[i] = h->items[c];
		i = c;
	}
	if (h->n > 0)
		h->items[i] = last;
	return top;
}

/*
 * The split of an UNUSED piece made by a merge, to resegment it on output.
 * Keyed by the piece's text; a later merge of the same text overwrites.
 */
typedef struct RevMerge
{
	const char *str;			/* NULL: empty slot */
	uint32_t	len;
	uint32_t	left_len;		/* the right part is the rest */
} RevMerge;

typedef struct BpeState
{
	const SpmModel *m;
	Symbol	   *sym;
	Heap		heap;
	RevMerge   *rev;			/* grown as it fills: most texts merge few UNUSED pieces */
	uint32_t	rev_mask;
	uint32_t	rev_count;
	const SpmAlloc *a;
} BpeState;

static uint32_t
hash_bytes(const char *s, uint32_t len)
{
	uint32_t	h = SPM_HASH_INIT;

	for (uint32_t i = 0; i < len; i++)
		h = (h ^ (unsigned char) s[i]) * 16777619u;
	return h;
}

static RevMerge *
rev_slot(const BpeState *b, const char *s, uint32_t len)
{
	uint32_t	i = hash_bytes(s, len) & b->rev_mask;

	while (b->rev[i].str != NULL &&
		   !(b->rev[i].len == len && memcmp(b->rev[i].str, s, len) == 0))
		i = (i + 1) & b->rev_mask;
	return &b->rev[i];
}

/* Twice the slots, the entries moved over (their slots are found again) */
static void
rev_grow(BpeState *b)
{
	RevMerge   *old = b->rev;
	uint32_t	old_cap = b->rev_mask + 1;

	b->rev = b->a->alloc(b->a->ctx, sizeof(RevMerge) * (size_t) old_cap * 2);
	b->rev_mask = old_cap * 2 - 1;
	for (uint32_t i = 0; i < old_cap; i++)
		if (old[i].str != NULL)
			*rev_slot(b, old[i].str, old[i].len) = old[i];
}

static void
maybe_add(BpeState *b, int left, int right)
{
	Symbol	   *l,
			   *r;
	uint32_t	len;
	int32_t		id;
	Pair		p;

	if (left == -1 || right == -1)
		return;
	l = &b->sym[left];
	r = &b->sym[right];
	if (l->freeze || r->freeze)
		return;
	/* neighbours are contiguous in the text, so the merge is one slice */
	len = l->len + r->len;
	if (len > SPM_MAX_PIECE_BYTES)
		return;
	id = spm_map_get(&b->m->normal, l->str, len);
	if (id < 0)
		return;
	p.score = b->m->pieces[id].score;
	p.left = left;
	p.right = right;
	p.size = len;
	heap_push(&b->heap, p);
	if (b->m->pieces[id].type == SPM_UNUSED)
	{
		RevMerge   *e = rev_slot(b, l->str, len);

		if (e->str == NULL)
		{
			/* at most half full */
			if (2 * (b->rev_count + 1) > b->rev_mask + 1)
			{
				rev_grow(b);
				e = rev_slot(b, l->str, len);
			}
			b->rev_count++;
		}
		e->str = l->str;
		e->len = len;
		e->left_len = l->len;
	}
}

/* Emit a symbol, splitting UNUSED pieces back into what they merged from. */
static void
resegment(const BpeState *b, const char *s, uint32_t len, Seg *out, int *count)
{
	int			id = spm_piece_to_id(b->m, s, len);

	if (b->m->pieces[id].type == SPM_UNUSED)
	{
		RevMerge   *e = rev_slot(b, s, len);

		if (e->str != NULL)
		{
			resegment(b, s, e->left_len, out, count);
			resegment(b, s + e->left_len, len - e->left_len, out, count);
			return;
		}
	}
	out[*count].str = s;
	out[*count].len = len;
	out[*count].id = id;
	(*count)++;
}

static int
encode_bpe(const SpmModel *m, const char *s, size_t n, const SpmAlloc *a, Seg **out)
{
	BpeState	b;
	int			nsym = 0;
	int			count = 0;
	size_t		pos = 0;
	uint32_t	rev_cap = 64;
	Seg		   *segs;
	size_t		work = 0;		/* bytes and heap operations, for the interrupt hook */

	b.m = m;
	b.sym = a->alloc(a->ctx, sizeof(Symbol) * (n + 1));

	/* initial symbols: user-defined pieces (longest) or single characters */
	while (pos < n)
	{
		size_t		l = 0;
		bool		found = false;

		SPM_CHECK_INTERRUPTS_WORK(work, 1);
		if (m->has_user_defined)
		{
			uint32_t	h = SPM_HASH_INIT;

			for (uint32_t k = 1; pos + k <= n && k <= SPM_MAX_PIECE_BYTES; k++)
			{
				int32_t		id = spm_map_step(&m->user_defined, s + pos, k, &h);

				SPM_CHECK_INTERRUPTS_WORK(work, 1);
				if (id == -2)
					break;
				if (id >= 0)
				{
					l = k;
					found = true;
				}
			}
		}
		if (!found)
		{
			l = (size_t) spm_one_char_len(s + pos);
			if (l > n - pos)
				l = n - pos;
		}
		b.sym[nsym].str = s + pos;
		b.sym[nsym].len = (uint32_t) l;
		b.sym[nsym].prev = nsym - 1;
		b.sym[nsym].next = pos + l < n ? nsym + 1 : -1;
		b.sym[nsym].freeze = found;
		nsym++;
		pos += l;
	}

	/* each merge pushes at most two pairs */
	b.heap.items = a->alloc(a->ctx, sizeof(Pair) * (size_t) (3 * nsym + 1));
	b.heap.n = 0;
	b.rev = a->alloc(a->ctx, sizeof(RevMerge) * rev_cap);
	b.rev_mask = rev_cap - 1;
	b.rev_count = 0;
	b.a = a;

	for (int i = 1; i < nsym; i++)
	{
		/* (a pair is hashed, and pushed on the heap) */
		SPM_CHECK_INTERRUPTS_WORK(work, b.sym[i - 1].len + b.sym[i].len + 16);
		maybe_add(&b, i - 1, i);
	}

	while (b.heap.n > 0)
	{
		Pair		top = heap_pop(&b.heap);
		Symbol	   *l = &b.sym[top.left];
		Symbol	   *r = &b.sym[top.right];

		SPM_CHECK_INTERRUPTS_WORK(work, 32);

		/* stale: one side was merged away since */
		if (l->len == 0 || r->len == 0 || l->len + r->len != top.size)
			continue;
		l->len += r->len;
		l->next = r->next;
		if (r->next >= 0)
			b.sym[r->next].prev = top.left;
		r->len = 0;
		SPM_CHECK_INTERRUPTS_WORK(work, 2 * l->len + 32);
		maybe_add(&b, l->prev, top.left);
		maybe_add(&b, top.left, l->next);
	}

	segs = a->alloc(a->ctx, sizeof(Seg) * (n + 1));
	for (int i = nsym > 0 ? 0 : -1; i != -1; i = b.sym[i].next)
	{
		SPM_CHECK_INTERRUPTS_WORK(work, 2 * b.sym[i].len);
		resegment(&b, b.sym[i].str, b.sym[i].len, segs, &count);
	}
	*out = segs;
	return count;
}

/* -------------------------------------------------------------- encode */

bool
spm_encode(const SpmModel *m, const char *text, size_t len,
		   const SpmAlloc *a, SpmEncoding *enc)
{
	Seg		   *segs = NULL;
	int			nseg = 0;
	int			ntok = 0;
	bool		prev_unk = false;
	size_t		work = 0;		/* segments and bytes, for the interrupt hook */

	memset(enc, 0, sizeof(*enc));
	if (!spm_normalize(m, &m->normalizer, true, text, len, a,
					   &enc->normalized, &enc->normalized_len))
		return false;
	if (enc->normalized_len == 0)
		return true;

	if (m->model_type == SPM_BPE)
		nseg = encode_bpe(m, enc->normalized, enc->normalized_len, a, &segs);
	else
		nseg = encode_unigram(m, enc->normalized, enc->normalized_len, a, &segs);

	/* byte fallback turns an unknown of k bytes into k tokens */
	for (int i = 0; i < nseg; i++)
	{
		SPM_CHECK_INTERRUPTS_WORK(work, 1);
		ntok += (m->byte_fallback && segs[i].id == m->unk_id) ? (int) segs[i].len : 1;
	}
	enc->tokens = a->alloc(a->ctx, sizeof(SpmToken) * (size_t) (ntok > 0 ? ntok : 1));

	for (int i = 0; i < nseg; i++)
	{
		bool		is_unk = m->pieces[segs[i].id].type == SPM_UNKNOWN;

		SPM_CHECK_INTERRUPTS_WORK(work, 1 + segs[i].len);
		if (is_unk && m->byte_fallback)
		{
			for (uint32_t k = 0; k < segs[i].len; k++)
			{
				const SpmPiece *bp = &m->pieces[m->byte_id[(unsigned char) segs[i].str[k]]];
				SpmToken   *t = &enc->tokens[enc->ntokens++];

				t->id = m->byte_id[(unsigned char) segs[i].str[k]];
				t->str = bp->str;
				t->len = bp->len;
			}
		}
		else if (is_unk && prev_unk)
		{
			/* a run of unknowns is one token; the segments are contiguous */
			enc->tokens[enc->ntokens - 1].len += segs[i].len;
		}
		else
		{
			SpmToken   *t = &enc->tokens[enc->ntokens++];

			t->id = segs[i].id;
			t->str = segs[i].str;
			t->len = segs[i].len;
		}
		prev_unk = is_unk;
	}
	return true;
}
