/*
 * tokenize_13a.c
 *		mteval-v13a tokenization, as sacreBLEU's default "13a" tokenizer does
 *		it, for BLEU (metrics.c).  No postgres.h.
 */
#include "metrics.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------ 13a tokenizing */

/*
 * Bytes of the whitespace character at s[i] (0: none), as Python's
 * str.split() sees whitespace: ASCII's, \x1c-\x1f, and Unicode's spaces.
 */
size_t
tf_ws_len(const char *s, size_t i, size_t n)
{
	unsigned char c = (unsigned char) s[i];
	uint32_t	cp;
	size_t		k;

	if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f))
		return 1;
	if (c < 0xC2)
		return 0;
	k = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
	if (i + k > n)
		return 0;
	cp = c & (k == 2 ? 0x1F : k == 3 ? 0x0F : 0x07);
	for (size_t j = 1; j < k; j++)
		cp = (cp << 6) | ((unsigned char) s[i + j] & 0x3F);
	if (cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
		cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000)
		return k;
	return 0;
}


typedef struct Buf
{
	char	   *s;
	size_t		n;
	size_t		cap;
	const SpmAlloc *a;
} Buf;

static void
buf_put(Buf *b, const char *s, size_t n)
{
	if (b->n + n + 1 > b->cap)
	{
		size_t		cap = 2 * (b->n + n) + 16;
		char	   *t = b->a->alloc(b->a->ctx, cap);

		if (b->n)
			memcpy(t, b->s, b->n);
		b->s = t;
		b->cap = cap;
	}
	memcpy(b->s + b->n, s, n);
	b->n += n;
	b->s[b->n] = '\0';
}

/* mteval's punctuation class: [\{-\~\[-\` -\&\(-\+\:-\@\/] */
static int
is_punct13a(unsigned char c)
{
	return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
		(c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

static int
is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/*
 * One pass of re.sub(pattern, repl) for the three two-character patterns,
 * scanning left to right without overlap, as Python's re does.  kind 1:
 * ([^0-9])([.,]) -> "\1 \2 "; 2: ([.,])([^0-9]) -> " \1 \2"; 3: ([0-9])(-) -> "\1 \2 ".
 * Multibyte characters match [^0-9] by their last byte, which gives the
 * same result: spaces are only ever put next to the ASCII character.
 */
static void
pass2(const char *in, size_t n, int kind, Buf *out, size_t *work)
{
	size_t		i = 0;

	out->n = 0;
	while (i < n)
	{
		unsigned char c0 = (unsigned char) in[i];
		unsigned char c1 = i + 1 < n ? (unsigned char) in[i + 1] : 0;
		int			m = 0;

		SPM_CHECK_INTERRUPTS_WORK(*work, 1);

		if (i + 1 < n)
		{
			if (kind == 1)
				m = !is_digit(c0) && (c1 == '.' || c1 == ',');
			else if (kind == 2)
				m = (c0 == '.' || c0 == ',') && !is_digit(c1);
			else
				m = is_digit(c0) && c1 == '-';
		}
		/* a multibyte character is one character to Python: match on its last byte only */
		if (m && kind == 2 && c1 >= 0x80)
		{
			/* ([.,])([^0-9]): the second group is the whole character */
			size_t		k = i + 2;

			while (k < n && ((unsigned char) in[k] & 0xC0) == 0x80)
				k++;
			buf_put(out, " ", 1);
			buf_put(out, in + i, 1);
			buf_put(out, " ", 1);
			buf_put(out, in + i + 1, k - i - 1);
			i = k;
			continue;
		}
		if (!m)
		{
			buf_put(out, in + i, 1);
			i++;
			continue;
		}
		if (kind == 2)
		{
			buf_put(out, " ", 1);
			buf_put(out, in + i, 1);
			buf_put(out, " ", 1);
			buf_put(out, in + i + 1, 1);
		}
		else
		{
			buf_put(out, in + i, 1);
			buf_put(out, " ", 1);
			buf_put(out, in + i + 1, 1);
			buf_put(out, " ", 1);
		}
		i += 2;
	}
}

char *
tf_tokenize_13a(const char *s, size_t len, const SpmAlloc *a, size_t *out_len)
{
	Buf			b1 = {NULL, 0, 0, a};
	Buf			b2 = {NULL, 0, 0, a};
	size_t		i = 0;
	size_t		work = 0;		/* bytes looked at, for the interrupt hook */

	if (len == 0)
	{
		*out_len = 0;
		return a->alloc(a->ctx, 1);
	}
	/* <skipped>, "-\n" removed, "\n" a space, HTML entities, padded with spaces */
	buf_put(&b1, " ", 1);
	while (i < len)
	{
		SPM_CHECK_INTERRUPTS_WORK(work, 1);
		if (len - i >= 9 && memcmp(s + i, "<skipped>", 9) == 0)
			i += 9;
		else if (len - i >= 2 && s[i] == '-' && s[i + 1] == '\n')
			i += 2;
		else if (s[i] == '\n')
			buf_put(&b1, " ", 1), i++;
		else
			buf_put(&b1, s + i, 1), i++;
	}
	if (memchr(b1.s, '&', b1.n))
	{
		static const char *const from[] = {"&quot;", "&amp;", "&lt;", "&gt;"};
		static const char *const to[] = {"\"", "&", "<", ">"};

		for (int e = 0; e < 4; e++)
		{
			size_t		fl = strlen(from[e]);

			b2.n = 0;
			for (size_t k = 0; k < b1.n;)
			{
				SPM_CHECK_INTERRUPTS_WORK(work, 1);
				if (b1.n - k >= fl && memcmp(b1.s + k, from[e], fl) == 0)
					buf_put(&b2, to[e], 1), k += fl;
				else
					buf_put(&b2, b1.s + k, 1), k++;
			}
			b1.n = 0;
			buf_put(&b1, b2.s, b2.n);
		}
	}
	buf_put(&b1, " ", 1);
	/* punctuation: " \1 " around each */
	b2.n = 0;
	for (size_t k = 0; k < b1.n; k++)
	{
		SPM_CHECK_INTERRUPTS_WORK(work, 1);
		if (is_punct13a((unsigned char) b1.s[k]))
		{
			buf_put(&b2, " ", 1);
			buf_put(&b2, b1.s + k, 1);
			buf_put(&b2, " ", 1);
		}
		else
			buf_put(&b2, b1.s + k, 1);
	}
	pass2(b2.s, b2.n, 1, &b1, &work);
	pass2(b1.s, b1.n, 2, &b2, &work);
	pass2(b2.s, b2.n, 3, &b1, &work);
	/* " ".join(line.split()) */
	b2.n = 0;
	for (size_t k = 0; k < b1.n;)
	{
		size_t		e,
					w;

		while (k < b1.n && (w = tf_ws_len(b1.s, k, b1.n)) > 0)
		{
			SPM_CHECK_INTERRUPTS_WORK(work, w);
			k += w;
		}
		e = k;
		while (e < b1.n && tf_ws_len(b1.s, e, b1.n) == 0)
		{
			SPM_CHECK_INTERRUPTS_WORK(work, 1);
			e++;
		}
		if (e > k)
		{
			if (b2.n)
				buf_put(&b2, " ", 1);
			buf_put(&b2, b1.s + k, e - k);
		}
		k = e;
	}
	if (b2.s == NULL)
		buf_put(&b2, "", 0);
	*out_len = b2.n;
	return b2.s;
}

