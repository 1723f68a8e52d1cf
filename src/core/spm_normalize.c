/*
 * spm_normalize.c
 *		SentencePiece normalization: the precompiled character map (a
 *		darts-clone double array), whitespace handling, and UTF-8 as the
 *		reference library reads it.  No postgres.h.
 */
#include "spm.h"

#include <string.h>

/* ---------------------------------------------------------------- UTF-8 */

int
spm_one_char_len(const char *s)
{
	static const int len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};

	return len[(unsigned char) s[0] >> 4];
}

static inline bool
is_trail(unsigned char c)
{
	return c >= 0x80 && c <= 0xBF;
}

static inline bool
is_valid_codepoint(uint32_t c)
{
	return c < 0xD800 || (c >= 0xE000 && c <= 0x10FFFF);
}

/* One code point of s (n >= 1 bytes); malformed input gives U+FFFD, length 1. */
uint32_t
spm_decode_utf8(const char *str, size_t n, int *mblen)
{
	const unsigned char *s = (const unsigned char *) str;
	uint32_t	c;

	if (s[0] < 0x80)
	{
		*mblen = 1;
		return s[0];
	}
	if (n >= 2 && (s[0] & 0xE0) == 0xC0)
	{
		c = ((uint32_t) (s[0] & 0x1F) << 6) | (s[1] & 0x3F);
		if (is_trail(s[1]) && c >= 0x80 && is_valid_codepoint(c))
		{
			*mblen = 2;
			return c;
		}
	}
	else if (n >= 3 && (s[0] & 0xF0) == 0xE0)
	{
		c = ((uint32_t) (s[0] & 0x0F) << 12) | ((uint32_t) (s[1] & 0x3F) << 6) | (s[2] & 0x3F);
		if (is_trail(s[1]) && is_trail(s[2]) && c >= 0x800 && is_valid_codepoint(c))
		{
			*mblen = 3;
			return c;
		}
	}
	else if (n >= 4 && (s[0] & 0xF8) == 0xF0)
	{
		c = ((uint32_t) (s[0] & 0x07) << 18) | ((uint32_t) (s[1] & 0x3F) << 12) |
			((uint32_t) (s[2] & 0x3F) << 6) | (s[3] & 0x3F);
		if (is_trail(s[1]) && is_trail(s[2]) && is_trail(s[3]) &&
			c >= 0x10000 && is_valid_codepoint(c))
		{
			*mblen = 4;
			return c;
		}
	}
	*mblen = 1;
	return 0xFFFD;
}

/* ---------------------------------------------------- darts double array */

static inline uint32_t
unit_label(uint32_t u)
{
	return u & ((1u << 31) | 0xFF);
}

static inline bool
unit_has_leaf(uint32_t u)
{
	return ((u >> 8) & 1) == 1;
}

static inline uint32_t
unit_value(uint32_t u)
{
	return u & ((1u << 31) - 1);
}

static inline uint32_t
unit_offset(uint32_t u)
{
	return (u >> 10) << ((u & (1u << 9)) >> 6);
}

/* Real character maps have keys of a few bytes; a hostile one is cut here. */
#define MAX_CHARSMAP_KEY 1024

/*
 * The longest key of the character map that is a prefix of s: its length,
 * with the offset of its replacement in *value; 0 if none.  Every index is
 * checked, so a corrupt array ends the walk instead of reading astray.
 */
static size_t
charsmap_longest(const SpmNormalizer *n, const char *s, size_t len, uint32_t *value, size_t *work)
{
	size_t		found = 0;
	uint32_t	node;

	if (n->nunits == 0)
		return 0;
	node = unit_offset(n->units[0]);
	if (len > MAX_CHARSMAP_KEY)
		len = MAX_CHARSMAP_KEY;

	for (size_t i = 0; i < len; i++)
	{
		uint32_t	c = (unsigned char) s[i];
		uint32_t	u;

		(*work)++;
		node ^= c;
		if (node >= n->nunits)
			break;
		u = n->units[node];
		if (unit_label(u) != c)
			break;
		node ^= unit_offset(u);
		if (unit_has_leaf(u))
		{
			if (node >= n->nunits)
				break;
			*value = unit_value(n->units[node]);
			found = i + 1;
		}
	}
	return found;
}

/* ---------------------------------------------------------- normalizing */

typedef struct Buf
{
	char	   *data;
	size_t		len;
	size_t		cap;
	const SpmAlloc *a;
	bool		overflow;
} Buf;

static void
buf_append(Buf *b, const char *s, size_t n)
{
	if (b->overflow)
		return;
	if (b->len + n > b->cap)
	{
		size_t		cap = b->cap * 2;
		char	   *data;

		while (cap < b->len + n)
			cap *= 2;
		if (cap > SPM_MAX_NORMALIZED_BYTES)
			cap = SPM_MAX_NORMALIZED_BYTES;
		if (b->len + n > cap)
		{
			b->overflow = true;
			return;
		}
		/* the old buffer goes with the caller's memory context */
		data = b->a->alloc(b->a->ctx, cap + 1);
		memcpy(data, b->data, b->len);
		b->data = data;
		b->cap = cap;
	}
	memcpy(b->data + b->len, s, n);
	b->len += n;
}

static inline bool
buf_ends_with(const Buf *b, const char *s, size_t n)
{
	return b->len >= n && memcmp(b->data + b->len - n, s, n) == 0;
}

#define SPACE_SYMBOL "\xE2\x96\x81"	/* U+2581 */

/*
 * NormalizePrefix: the replacement for the start of s, and how many bytes
 * of s it consumes (at least 1).  The bytes looked at are added to *work.
 */
static size_t
normalize_prefix(const SpmModel *m, const SpmNormalizer *n, bool with_model_rules,
				 const char *s, size_t len, const char **rep, size_t *rep_len, size_t *work)
{
	uint32_t	value = 0;
	size_t		l;
	int			mblen;

	/* user-defined pieces pass through unnormalized, longest first */
	if (with_model_rules && m->has_user_defined)
	{
		uint32_t	h = SPM_HASH_INIT;
		size_t		longest = 0;

		for (uint32_t k = 1; k <= len && k <= SPM_MAX_PIECE_BYTES; k++)
		{
			int32_t		id = spm_map_step(&m->user_defined, s, k, &h);

			(*work)++;
			if (id == -2)
				break;
			if (id >= 0)
				longest = k;
		}
		if (longest > 0)
		{
			*rep = s;
			*rep_len = longest;
			return longest;
		}
	}

	l = charsmap_longest(n, s, len, &value, work);
	if (l > 0 && value < n->strings_len)
	{
		*rep = n->strings + value;
		*rep_len = strnlen(*rep, n->strings_len - value);
		return l;
	}

	if (spm_decode_utf8(s, len, &mblen) == 0xFFFD && mblen != 3)
	{
		/* malformed: U+FFFD for one byte */
		*rep = "\xEF\xBF\xBD";
		*rep_len = 3;
		return 1;
	}
	*rep = s;
	*rep_len = (size_t) mblen;
	return (size_t) mblen;
}

bool
spm_normalize(const SpmModel *m, const SpmNormalizer *n, bool with_model_rules,
			  const char *in, size_t len, const SpmAlloc *a,
			  char **out, size_t *out_len)
{
	bool		suffix = with_model_rules && m->treat_whitespace_as_suffix;
	const char *ws = n->escape_whitespaces ? SPACE_SYMBOL : " ";
	size_t		ws_len = n->escape_whitespaces ? 3 : 1;
	bool		is_prev_space;
	Buf			b;
	size_t		work = 0;		/* bytes looked at, for the interrupt hook */

	b.cap = len * 3 + 16 < SPM_MAX_NORMALIZED_BYTES ? len * 3 + 16 : SPM_MAX_NORMALIZED_BYTES;
	b.data = a->alloc(a->ctx, b.cap + 1);
	b.len = 0;
	b.a = a;
	b.overflow = false;
	*out = b.data;
	*out_len = 0;

	/* heading whitespace */
	if (n->remove_extra_whitespaces)
		while (len > 0)
		{
			const char *rep;
			size_t		rep_len;
			size_t		used = normalize_prefix(m, n, with_model_rules, in, len, &rep, &rep_len, &work);

			SPM_CHECK_INTERRUPTS_WORK(work, 1);
			if (rep_len != 1 || rep[0] != ' ')
				break;
			in += used;
			len -= used;
		}
	if (len == 0)
		return true;

	if (!suffix && n->add_dummy_prefix)
		buf_append(&b, ws, ws_len);

	is_prev_space = n->remove_extra_whitespaces;
	while (len > 0)
	{
		const char *rep;
		size_t		rep_len;
		size_t		used;

		used = normalize_prefix(m, n, with_model_rules, in, len, &rep, &rep_len, &work);
		SPM_CHECK_INTERRUPTS_WORK(work, 1 + rep_len);

		if (is_prev_space)
			while (rep_len > 0 && rep[0] == ' ')
			{
				rep++;
				rep_len--;
			}
		if (rep_len > 0)
		{
			for (size_t i = 0; i < rep_len; i++)
			{
				if (n->escape_whitespaces && rep[i] == ' ')
					buf_append(&b, SPACE_SYMBOL, 3);
				else
					buf_append(&b, rep + i, 1);
			}
			is_prev_space = rep[rep_len - 1] == ' ';
		}
		in += used;
		len -= used;
		if (!n->remove_extra_whitespaces)
			is_prev_space = false;
		if (b.overflow)
			return false;
	}

	if (n->remove_extra_whitespaces)
		while (buf_ends_with(&b, ws, ws_len))
		{
			SPM_CHECK_INTERRUPTS_WORK(work, ws_len);
			b.len -= ws_len;
		}

	if (suffix && n->add_dummy_prefix)
		buf_append(&b, ws, ws_len);

	if (b.overflow)
		return false;
	b.data[b.len] = '\0';
	*out = b.data;
	*out_len = b.len;
	return true;
}
