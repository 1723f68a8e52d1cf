/*
 * spm_decode.c
 *		Pieces back to text, as the reference library's DecodePieces.
 *		No postgres.h.
 */
#include "spm.h"

#include <string.h>

#define SPACE_SYMBOL "\xE2\x96\x81"	/* U+2581 */

typedef struct Out
{
	char	   *data;
	size_t		len;
	size_t		cap;
	const SpmAlloc *a;
	bool		overflow;
} Out;

static void
out_append(Out *o, const char *s, size_t n)
{
	if (o->overflow)
		return;
	if (o->len + n > o->cap)
	{
		size_t		cap = o->cap * 2 + n;
		char	   *data;

		if (o->len + n > SPM_MAX_NORMALIZED_BYTES)
		{
			o->overflow = true;
			return;
		}
		if (cap > SPM_MAX_NORMALIZED_BYTES)
			cap = SPM_MAX_NORMALIZED_BYTES;
		data = o->a->alloc(o->a->ctx, cap + 1);
		memcpy(data, o->data, o->len);
		o->data = data;
		o->cap = cap;
	}
	memcpy(o->data + o->len, s, n);
	o->len += n;
}

/* Consecutive byte pieces are one UTF-8 string; bad bytes become U+FFFD. */
static void
flush_bytes(Out *o, const unsigned char *bytes, size_t n, size_t *work)
{
	size_t		i = 0;

	while (i < n)
	{
		int			mblen;
		uint32_t	c = spm_decode_utf8((const char *) bytes + i, n - i, &mblen);

		if (c == 0xFFFD && mblen != 3)
			out_append(o, "\xEF\xBF\xBD", 3);
		else
			out_append(o, (const char *) bytes + i, (size_t) mblen);
		i += (size_t) mblen;
		SPM_CHECK_INTERRUPTS_WORK(*work, mblen);
	}
}

/* Append a piece with U+2581 turned into spaces. */
static void
append_unescaped(Out *o, const char *s, size_t n)
{
	size_t		i = 0;

	while (i < n)
	{
		const char *sp = NULL;

		for (size_t j = i; j + 3 <= n; j++)
			if (memcmp(s + j, SPACE_SYMBOL, 3) == 0)
			{
				sp = s + j;
				break;
			}
		if (sp == NULL)
		{
			out_append(o, s + i, n - i);
			return;
		}
		out_append(o, s + i, (size_t) (sp - (s + i)));
		out_append(o, " ", 1);
		i = (size_t) (sp - s) + 3;
	}
}

char *
spm_decode_pieces(const SpmModel *m, int n, const char *const *strs,
				  const uint32_t *lens, const SpmAlloc *a, size_t *out_len)
{
	const SpmNormalizer *ns = &m->normalizer;
	Out			o;
	unsigned char *bytes = a->alloc(a->ctx, (size_t) (n > 0 ? n : 1));
	size_t		nbytes = 0;
	bool		is_bos_ws = true;
	bool		bos_ws_seen = false;
	size_t		work = 0;		/* bytes looked at, for the interrupt hook */

	o.cap = 64;
	o.data = a->alloc(a->ctx, o.cap + 1);
	o.len = 0;
	o.a = a;
	o.overflow = false;

	for (int i = 0; i < n; i++)
	{
		const char *s = strs[i];
		size_t		len = lens[i];
		int			id;
		const SpmPiece *p;

		/* the piece is hashed, and looked through for U+2581 */
		SPM_CHECK_INTERRUPTS_WORK(work, 2 * len + 16);
		id = spm_piece_to_id(m, s, len);
		p = &m->pieces[id];

		if (p->type == SPM_BYTE)
		{
			/* the id's piece is "<0xNN>": NN is the byte */
			for (int b = 0; b < 256; b++)
				if (m->byte_id[b] == id)
				{
					bytes[nbytes++] = (unsigned char) b;
					break;
				}
			continue;
		}
		flush_bytes(&o, bytes, nbytes, &work);
		nbytes = 0;

		if (bos_ws_seen || o.len > 0)
			is_bos_ws = false;
		bos_ws_seen = false;

		if (p->type == SPM_CONTROL)
			continue;
		if (p->type == SPM_UNKNOWN)
		{
			/* the unknown piece itself shows as unk_surface; other text as is */
			if (len == p->len && memcmp(s, p->str, len) == 0)
				out_append(&o, m->unk_surface, m->unk_surface_len);
			else
				out_append(&o, s, len);
			continue;
		}
		if (is_bos_ws && (ns->add_dummy_prefix || ns->remove_extra_whitespaces) &&
			len >= 3 && memcmp(s, SPACE_SYMBOL, 3) == 0)
		{
			s += 3;
			len -= 3;
			/* with remove_extra_whitespaces, more leading ▁ go too */
			bos_ws_seen = !ns->remove_extra_whitespaces;
		}
		append_unescaped(&o, s, len);
	}
	flush_bytes(&o, bytes, nbytes, &work);

	if (o.overflow)
		return NULL;
	o.data[o.len] = '\0';

	if (m->has_denormalizer)
	{
		char	   *den;
		size_t		den_len;

		if (!spm_normalize(m, &m->denormalizer, false, o.data, o.len, a, &den, &den_len))
			return NULL;
		*out_len = den_len;
		return den;
	}
	*out_len = o.len;
	return o.data;
}
