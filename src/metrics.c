/*
 * metrics.c
 *		BLEU (Papineni et al. 2002) with sacreBLEU's defaults, and chrF
 *		(Popovic 2015) as sacreBLEU 2 computes chrF2.  No postgres.h.
 */
#include "metrics.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------ 13a tokenizing */

/*
 * Bytes of the whitespace character at s[i] (0: none), as Python's
 * str.split() sees whitespace: ASCII's, \x1c-\x1f, and Unicode's spaces.
 */
static size_t
ws_len(const char *s, size_t i, size_t n)
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
		SPM_CHECK_INTERRUPTS_WORK(*work, 1);
		unsigned char c0 = (unsigned char) in[i];
		unsigned char c1 = i + 1 < n ? (unsigned char) in[i + 1] : 0;
		int			m = 0;

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

		while (k < b1.n && (w = ws_len(b1.s, k, b1.n)) > 0)
		{
			SPM_CHECK_INTERRUPTS_WORK(work, w);
			k += w;
		}
		e = k;
		while (e < b1.n && ws_len(b1.s, e, b1.n) == 0)
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

/* ------------------------------------------------------- n-gram counts */

/* An n-gram: n items of a sequence; items are (offset, length) in a string. */
typedef struct Seq
{
	const char *s;
	const size_t *off;
	const size_t *len;
	int			n;
} Seq;

static uint64_t
ngram_hash(const Seq *q, int i, int n)
{
	uint64_t	h = 1469598103934665603ULL;

	for (int k = i; k < i + n; k++)
	{
		for (size_t j = 0; j < q->len[k]; j++)
			h = (h ^ (unsigned char) q->s[q->off[k] + j]) * 1099511628211ULL;
		h = (h ^ 0xFF) * 1099511628211ULL;
	}
	return h;
}

static int
ngram_eq(const Seq *a, int i, const Seq *b, int j, int n)
{
	for (int k = 0; k < n; k++)
		if (a->len[i + k] != b->len[j + k] ||
			memcmp(a->s + a->off[i + k], b->s + b->off[j + k], a->len[i + k]) != 0)
			return 0;
	return 1;
}

/*
 * Σ over distinct n-grams of min(count in h, count in r): the clipped
 * matches.  A hash table of r's n-grams with counts, consumed by h's.
 */
static double
clipped_matches(const Seq *h, const Seq *r, int n, const SpmAlloc *a)
{
	int			nr = r->n - n + 1;
	int			nh = h->n - n + 1;
	size_t		cap = 16;
	int		   *slot_first;		/* index of an r n-gram, -1: empty */
	int		   *slot_count;
	double		m = 0;

	if (nr <= 0 || nh <= 0)
		return 0;
	while (cap < (size_t) nr * 2)
		cap *= 2;
	slot_first = a->alloc(a->ctx, sizeof(int) * cap);
	slot_count = a->alloc(a->ctx, sizeof(int) * cap);
	for (size_t i = 0; i < cap; i++)
		slot_first[i] = -1;
	for (int i = 0; i < nr; i++)
	{
		size_t		k = ngram_hash(r, i, n) & (cap - 1);

		while (slot_first[k] >= 0 && !ngram_eq(r, slot_first[k], r, i, n))
			k = (k + 1) & (cap - 1);
		if (slot_first[k] < 0)
			slot_first[k] = i;
		slot_count[k]++;
	}
	for (int i = 0; i < nh; i++)
	{
		size_t		k = ngram_hash(h, i, n) & (cap - 1);

		if ((i & 4095) == 0 && spm_interrupt_hook)
			spm_interrupt_hook();
		while (slot_first[k] >= 0 && !ngram_eq(r, slot_first[k], h, i, n))
			k = (k + 1) & (cap - 1);
		if (slot_first[k] >= 0 && slot_count[k] > 0)
		{
			slot_count[k]--;
			m++;
		}
	}
	return m;
}

/* Items of s: tokens split at spaces (words) or UTF-8 characters (chars, whitespace dropped). */
static Seq
items(const char *s, size_t len, int chars, const SpmAlloc *a)
{
	Seq			q = {s, NULL, NULL, 0};
	size_t	   *off = a->alloc(a->ctx, sizeof(size_t) * (len + 1));
	size_t	   *ln = a->alloc(a->ctx, sizeof(size_t) * (len + 1));
	size_t		i = 0;
	size_t		work = 0;		/* bytes looked at, for the interrupt hook */

	while (i < len)
	{
		size_t		w = ws_len(s, i, len);

		SPM_CHECK_INTERRUPTS_WORK(work, 1);

		if (w > 0)
		{
			i += w;
			continue;
		}
		off[q.n] = i;
		if (chars)
		{
			i++;
			while (i < len && ((unsigned char) s[i] & 0xC0) == 0x80)
				i++;
		}
		else
			while (i < len && ws_len(s, i, len) == 0)
			{
				SPM_CHECK_INTERRUPTS_WORK(work, 1);
				i++;
			}
		ln[q.n] = i - off[q.n];
		q.n++;
	}
	q.off = off;
	q.len = ln;
	return q;
}

void
tf_bleu_add(double *stats, const char *hyp, size_t hyp_len, const char *ref, size_t ref_len,
			const SpmAlloc *a)
{
	size_t		hl,
				rl;
	char	   *ht = tf_tokenize_13a(hyp, hyp_len, a, &hl);
	char	   *rt = tf_tokenize_13a(ref, ref_len, a, &rl);
	Seq			h = items(ht, hl, 0, a);
	Seq			r = items(rt, rl, 0, a);

	stats[0] += h.n;
	stats[1] += r.n;
	for (int n = 1; n <= 4; n++)
	{
		stats[1 + n] += clipped_matches(&h, &r, n, a);
		stats[5 + n] += h.n - n + 1 > 0 ? h.n - n + 1 : 0;
	}
}

double
tf_bleu_score(const double *stats)
{
	double		c = stats[0],
				r = stats[1];
	double		log_p = 0;
	double		k = 1;

	if (c == 0)
		return 0;
	for (int n = 1; n <= 4; n++)
	{
		double		m = stats[1 + n],
					t = stats[5 + n];

		if (t == 0)
			return 0;
		if (m == 0)
		{
			k *= 2;
			log_p += log(100.0 / (k * t));
		}
		else
			log_p += log(100.0 * m / t);
	}
	return (c >= r ? 1.0 : exp(1 - r / c)) * exp(log_p / 4);
}

void
tf_chrf_add(double *stats, const char *hyp, size_t hyp_len, const char *ref, size_t ref_len,
			const SpmAlloc *a)
{
	Seq			h = items(hyp, hyp_len, 1, a);
	Seq			r = items(ref, ref_len, 1, a);

	for (int n = 1; n <= TF_CHRF_ORDER; n++)
	{
		stats[3 * (n - 1)] += h.n - n + 1 > 0 ? h.n - n + 1 : 0;
		stats[3 * (n - 1) + 1] += r.n - n + 1 > 0 ? r.n - n + 1 : 0;
		stats[3 * (n - 1) + 2] += clipped_matches(&h, &r, n, a);
	}
}

double
tf_chrf_score(const double *stats)
{
	const double beta2 = 4.0;	/* beta = 2 */
	const double eps = 1e-16;
	double		score = 0;
	int			effective = 0;

	/* sacreBLEU 2: the F-score of each order, averaged over the orders both sides have */
	for (int n = 0; n < TF_CHRF_ORDER; n++)
	{
		double		nh = stats[3 * n],
					nr = stats[3 * n + 1],
					m = stats[3 * n + 2];
		double		p = nh > 0 ? m / nh : eps;
		double		rc = nr > 0 ? m / nr : eps;
		double		d = beta2 * p + rc;

		score += d > 0 ? (1 + beta2) * p * rc / d : eps;
		if (nh > 0 && nr > 0)
			effective++;
	}
	return effective == 0 ? 0 : 100 * score / effective;
}
