/*
 * special_tokens.c
 *		Special tokens in the text (see special_tokens.h).
 */
#include "special_tokens.h"

#include <stdlib.h>
#include <string.h>

#include "spm.h"				/* spm_decode_utf8, the interrupt hook */

static int
by_first_byte(const void *a, const void *b)
{
	const TfSpecialToken *x = a,
			   *y = b;
	int			bx = x->len > 0 ? (uint8_t) x->str[0] : -1,
				by = y->len > 0 ? (uint8_t) y->str[0] : -1;

	return bx != by ? bx - by : (x->id > y->id) - (x->id < y->id);
}

void
tf_special_set_init(TfSpecialSet *set, int n, TfSpecialToken *tok)
{
	int			k = 0;

	if (n > 1)
		qsort(tok, n, sizeof(TfSpecialToken), by_first_byte);
	set->n = n;
	set->tok = tok;
	while (k < n && tok[k].len == 0)
		k++;					/* empty tokens match nothing */
	for (int b = 0; b < 256; b++)
	{
		set->start[b] = k;
		while (k < n && (uint8_t) tok[k].str[0] == b)
			k++;
	}
	set->start[256] = n;
}

int
tf_special_next(const TfSpecialSet *set, const char *s, size_t len, size_t from, size_t *at)
{
	size_t		work = 0;

	for (size_t i = from; i < len; i++)
	{
		uint8_t		b = (uint8_t) s[i];
		int			best = -1;

		SPM_CHECK_INTERRUPTS_WORK(work, 1 + set->start[b + 1] - set->start[b]);
		/* the longest token that starts here (a shorter one is a prefix of it) */
		for (int k = set->start[b]; k < set->start[b + 1]; k++)
		{
			const TfSpecialToken *t = &set->tok[k];

			if (t->len <= len - i && (best < 0 || t->len > set->tok[best].len) &&
				(t->len == 1 || t->str[1] == s[i + 1]) && memcmp(s + i, t->str, t->len) == 0)
				best = k;
		}
		if (best >= 0)
		{
			*at = i;
			return best;
		}
	}
	return -1;
}

/* Python's str.isspace(): Unicode White_Space less U+180E, plus U+001C-U+001F */
static bool
is_space(uint32_t c)
{
	return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
		c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
		c == 0x202F || c == 0x205F || c == 0x3000;
}

size_t
tf_trailing_space(const char *s, size_t len)
{
	size_t		end = len;

	while (end > 0)
	{
		size_t		start = end - 1;
		int			mblen;

		/* back to the character's first byte */
		while (start > 0 && end - start < 4 && ((uint8_t) s[start] & 0xC0) == 0x80)
			start--;
		if (!is_space(spm_decode_utf8(s + start, end - start, &mblen)) || (size_t) mblen != end - start)
			break;
		end = start;
	}
	return len - end;
}

size_t
tf_leading_space(const char *s, size_t len)
{
	size_t		i = 0;

	while (i < len)
	{
		int			mblen;
		uint32_t	c = spm_decode_utf8(s + i, len - i, &mblen);

		if (!is_space(c) || mblen <= 0)
			break;
		i += mblen;
	}
	return i;
}
