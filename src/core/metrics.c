/*
 * metrics.c
 *		BLEU (Papineni et al. 2002) with sacreBLEU's defaults, and chrF
 *		(Popovic 2015) as sacreBLEU 2 computes chrF2, from n-gram counts of
 *		13a tokens (tokenize_13a.c) or characters.  No postgres.h.
 */
#include "metrics.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------- n-gram counts */

/*
 * The items of a text are the tokens of a 13a-tokenized string (split at
 * whitespace) or the UTF-8 characters of a string (whitespace dropped).
 * They are never stored: a scan from a position finds the next one, so an
 * n-gram is the position of its first item, and two n-grams are compared
 * (and hashed again) by scanning n items from their positions.
 *
 * Memory (issue 23): one hash table of the reference's distinct n-grams of
 * one order at a time, 12 bytes a slot (24 for references of 2 GB or more),
 * at most 3/4 full; it doubles when it fills, and the next order reuses it.
 * With the allocator's garbage of the smaller tables it outgrew, that is at
 * most 4 * 12 * 4/3 = 64 bytes per distinct reference n-gram of the order
 * that has the most (chrF: 6-grams; BLEU: 4-grams), and nothing per
 * hypothesis n-gram: when every n-gram is distinct, 64 bytes per reference
 * character (chrF) or token (BLEU) at worst, 16 to 32 after a doubling.
 */
typedef struct Text
{
	const char *s;
	size_t		len;
	bool		chars;			/* characters, not tokens */
} Text;

/* spm_interrupt_hook is called at least once per this many bytes scanned */
#define CHECK_BYTES ((size_t) 65536)

typedef struct Scan
{
	const Text *t;
	size_t		pos;
	size_t		check;			/* the position of the next interrupt check */
} Scan;

static void
scan_init(Scan *sc, const Text *t, size_t pos)
{
	sc->t = t;
	sc->pos = pos;
	sc->check = pos + CHECK_BYTES;
}

static inline void
scan_check(Scan *sc, size_t i)
{
	if (i >= sc->check)
	{
		if (spm_interrupt_hook)
			spm_interrupt_hook();
		sc->check = i + CHECK_BYTES;
	}
}

/* ws_len, with ASCII inline */
static inline size_t
ws_len_scan(const char *s, size_t i, size_t n)
{
	unsigned char c = (unsigned char) s[i];

	if (c < 0x80)
		return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f);
	return tf_ws_len(s, i, n);
}

/* The next item at or after sc->pos: its offset and length; false at the end. */
static inline bool
next_item(Scan *sc, size_t *start, size_t *ilen)
{
	const char *s = sc->t->s;
	size_t		len = sc->t->len;
	size_t		i = sc->pos;
	size_t		w;

	while (i < len && (w = ws_len_scan(s, i, len)) > 0)
	{
		i += w;
		scan_check(sc, i);
	}
	if (i >= len)
	{
		sc->pos = i;
		return false;
	}
	*start = i++;
	if (sc->t->chars)
		while (i < len && ((unsigned char) s[i] & 0xC0) == 0x80)
		{
			i++;
			scan_check(sc, i);
		}
	else
		while (i < len && ws_len_scan(s, i, len) == 0)
		{
			i++;
			scan_check(sc, i);
		}
	*ilen = i - *start;
	sc->pos = i;
	/* also here: items of one ASCII character never reach the loops' checks */
	scan_check(sc, i);
	return true;
}

static inline uint64_t
fmix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* A hash of an item's bytes. */
static inline uint64_t
item_hash(const char *p, size_t n, uint64_t seed)
{
	uint64_t	h = seed ^ (n * 0x9E3779B97F4A7C15ULL);
	uint64_t	w;
	size_t		i = 0;

	for (; i + 8 <= n; i += 8)
	{
		memcpy(&w, p + i, 8);
		h = fmix64(h ^ w);
		if ((i & (CHECK_BYTES - 1)) == 0 && i > 0 && spm_interrupt_hook)
			spm_interrupt_hook();
	}
	w = 0;
	memcpy(&w, p + i, n - i);
	return fmix64(h ^ w ^ 0x5bd1e9955bd1e995ULL);
}

/* The bits of n-gram hashes kept (a test keeps few, so that unequal n-grams collide) */
uint64_t	tf_metrics_hash_mask = ~(uint64_t) 0;

/* An n-gram's hash from its items' hashes, in order. */
static inline uint64_t
ngram_hash(const uint64_t *ih, int n)
{
	static const uint64_t mul[TF_CHRF_ORDER] = {
		0x9E3779B97F4A7C15ULL, 0xC2B2AE3D27D4EB4FULL, 0x165667B19E3779F9ULL,
		0xD6E8FEB86659FD93ULL, 0xA0761D6478BD642FULL, 0xE7037ED1A0B428DBULL
	};
	uint64_t	g = (uint64_t) n;

	for (int k = 0; k < n; k++)
		g += ih[k] * mul[k];
	return fmix64(g) & tf_metrics_hash_mask;
}

/*
 * Whether the n-gram at a in ta has the items of the one at b in tb, which
 * spans tb->s[b, b_end).  Mostly the same bytes: then the same items if a
 * scan of those bytes cannot look past them (ws_len reads a lead byte's
 * sequence; complete ones end inside) and a's last item ends there too.
 */
static bool
ngram_same_bytes(const Text *ta, size_t a, const Text *tb, size_t b, size_t b_end)
{
	size_t		n = b_end - b;
	size_t		a_end = a + n;

	if (ta->len - a < n || memcmp(ta->s + a, tb->s + b, n) != 0)
		return false;
	for (size_t p = n > 3 ? b_end - 3 : b; p < b_end; p++)
	{
		unsigned char c = (unsigned char) tb->s[p];

		if (c >= 0xC2 && p + (c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4) > b_end)
			return false;
	}
	if (a_end == ta->len)
		return true;
	if (ta->chars)
		return ((unsigned char) ta->s[a_end] & 0xC0) != 0x80;
	return ws_len_scan(ta->s, a_end, ta->len) > 0;
}

/* Whether the n-grams at a in ta and at b in tb (to b_end) have the same items. */
static bool
ngram_eq(const Text *ta, size_t a, const Text *tb, size_t b, size_t b_end, int n)
{
	Scan		sa,
				sb;

	if (ngram_same_bytes(ta, a, tb, b, b_end))
		return true;
	scan_init(&sa, ta, a);
	scan_init(&sb, tb, b);
	for (int k = 0; k < n; k++)
	{
		size_t		as,
					al,
					bs,
					bl;

		if (!next_item(&sa, &as, &al) || !next_item(&sb, &bs, &bl))
			return false;		/* not reached */
		if (al != bl || memcmp(ta->s + as, tb->s + bs, al) != 0)
			return false;
	}
	return true;
}

/* The n-grams of a text, left to right: a window over its last n items. */
typedef struct Window
{
	Scan		sc;
	int			n;
	uint64_t	seed;
	size_t		items;			/* scanned so far */
	size_t		end;			/* where the last one ends */
	size_t		start[TF_CHRF_ORDER];
	uint64_t	ih[TF_CHRF_ORDER];
} Window;

static void
window_init(Window *w, const Text *t, int n, uint64_t seed)
{
	scan_init(&w->sc, t, 0);
	w->n = n;
	w->seed = seed;
	w->items = 0;
}

/* The next n-gram: where it starts and ends, its hash; false at the end. */
static inline bool
window_next(Window *w, size_t *pos, size_t *end, uint64_t *hash)
{
	size_t		st,
				ln;

	do
	{
		if (!next_item(&w->sc, &st, &ln))
			return false;
		if (w->n > 1)
		{
			memmove(w->start, w->start + 1, sizeof(size_t) * (w->n - 1));
			memmove(w->ih, w->ih + 1, sizeof(uint64_t) * (w->n - 1));
		}
		w->start[w->n - 1] = st;
		w->ih[w->n - 1] = item_hash(w->sc.t->s + st, ln, w->seed);
		w->items++;
	} while (w->items < (size_t) w->n);
	*pos = w->start[0];
	*end = st + ln;
	*hash = ngram_hash(w->ih, w->n);
	return true;
}

/*
 * Open addressing, linear probing, a power-of-two number of slots: the
 * reference's distinct n-grams of one order with their counts.  A slot
 * holds the n-gram's position + 1 (0: empty), its count, and the top bits
 * of its hash, which both pick its home slot and tell most unequal n-grams
 * apart without scanning them (so growing needs no hashing either).
 */
typedef struct Slot
{
	uint32_t	pos1;
	uint32_t	count;
	uint32_t	hash;			/* the hash's top 32 bits */
} Slot;

/* For references of 2 GB or more (outside the server) */
typedef struct WideSlot
{
	uint64_t	pos1;
	uint64_t	count;
	uint64_t	hash;
} WideSlot;

typedef struct Table
{
	const SpmAlloc *a;
	bool		wide;
	void	   *slots;
	int			bits;			/* 2^bits slots */
	size_t		used;
} Table;

/* References of at least this many bytes get wide slots (a test lowers it). */
size_t		tf_metrics_wide_bytes = (size_t) 1 << 31;

#define TABLE_MIN_BITS 6

static inline size_t
t_pos1(const Table *t, size_t k)
{
	return t->wide ? (size_t) ((WideSlot *) t->slots)[k].pos1 : ((Slot *) t->slots)[k].pos1;
}

/* The stored hash bits, as the top of a 64-bit hash */
static inline uint64_t
t_hash(const Table *t, size_t k)
{
	return t->wide ? ((WideSlot *) t->slots)[k].hash : (uint64_t) ((Slot *) t->slots)[k].hash << 32;
}

static inline uint64_t
t_stored(const Table *t, uint64_t hash)
{
	return t->wide ? hash : hash & 0xFFFFFFFF00000000ULL;
}

static inline size_t
t_count(const Table *t, size_t k)
{
	return t->wide ? (size_t) ((WideSlot *) t->slots)[k].count : ((Slot *) t->slots)[k].count;
}

static inline void
t_set(Table *t, size_t k, size_t pos1, size_t count, uint64_t hash)
{
	if (t->wide)
	{
		WideSlot   *s = &((WideSlot *) t->slots)[k];

		s->pos1 = pos1;
		s->count = count;
		s->hash = hash;
	}
	else
	{
		Slot	   *s = &((Slot *) t->slots)[k];

		s->pos1 = (uint32_t) pos1;
		s->count = (uint32_t) count;
		s->hash = (uint32_t) (hash >> 32);
	}
}

/* One more (up) or one fewer of the n-gram in slot k */
static inline void
t_count_step(Table *t, size_t k, bool up)
{
	if (t->wide)
		((WideSlot *) t->slots)[k].count += up ? 1 : (uint64_t) -1;
	else
		((Slot *) t->slots)[k].count += up ? 1 : (uint32_t) -1;
}

static inline size_t
t_home(const Table *t, uint64_t hash)
{
	return (size_t) (hash >> (64 - t->bits));
}

/* Zeroed slots, 2^bits of them; the allocator refuses a size that overflows. */
static void *
table_alloc(const Table *t, int bits)
{
	size_t		slot = t->wide ? sizeof(WideSlot) : sizeof(Slot);
	size_t		bytes = SIZE_MAX;	/* the allocator raises or aborts */

	if (bits < (int) (sizeof(size_t) * 8) && ((size_t) 1 << bits) <= SIZE_MAX / slot)
		bytes = ((size_t) 1 << bits) * slot;
	return t->a->alloc(t->a->ctx, bytes);
}

static void
table_init(Table *t, const SpmAlloc *a, bool wide)
{
	t->a = a;
	t->wide = wide;
	t->bits = TABLE_MIN_BITS;
	t->slots = table_alloc(t, t->bits);
	t->used = 0;
}

/* Empty, keeping the slots (the allocator frees nothing piecemeal). */
static void
table_clear(Table *t)
{
	memset(t->slots, 0, ((size_t) 1 << t->bits) * (t->wide ? sizeof(WideSlot) : sizeof(Slot)));
	t->used = 0;
}

/* Twice the slots: each n-gram moves to its home slot by its stored hash bits. */
static void
table_grow(Table *t)
{
	Table		old = *t;
	size_t		oldcap = (size_t) 1 << old.bits;
	size_t		mask;

	/* narrow slots keep 32 bits of hash: enough for 2^32 slots, more than such a reference needs */
	t->bits = old.bits + 1;
	t->slots = table_alloc(t, t->bits);
	mask = ((size_t) 1 << t->bits) - 1;
	for (size_t i = 0; i < oldcap; i++)
	{
		size_t		p = t_pos1(&old, i);
		uint64_t	h;
		size_t		k;

		if (p == 0)
			continue;
		h = t_hash(&old, i);
		k = t_home(t, h);
		while (t_pos1(t, k) != 0)
			k = (k + 1) & mask;
		t_set(t, k, p, t_count(&old, i), h);
		if ((i & 0xFFFF) == 0 && spm_interrupt_hook)
			spm_interrupt_hook();
	}
}

/* The slot of the n-gram at pos in text (r: the reference, whose n-grams are stored), or its empty slot */
static inline size_t
table_find(const Table *t, const Text *r, const Text *text, size_t pos, size_t end, uint64_t hash, int n)
{
	size_t		mask = ((size_t) 1 << t->bits) - 1;
	size_t		k = t_home(t, hash);
	uint64_t	stored = t_stored(t, hash);
	size_t		p;

	while ((p = t_pos1(t, k)) != 0)
	{
		if (t_hash(t, k) == stored && ngram_eq(r, p - 1, text, pos, end, n))
			return k;
		k = (k + 1) & mask;
	}
	return k;
}

/*
 * Σ over distinct n-grams of min(count in h, count in r): the clipped
 * matches.  The table counts r's n-grams; h's consume the counts.  The
 * n-gram counts of both are left in *nh, *nr.
 */
static double
clipped_matches(const Text *h, const Text *r, int n, Table *t, uint64_t seed,
				size_t *items_h, size_t *items_r)
{
	Window		w;
	size_t		pos,
				end;
	uint64_t	hash;
	double		m = 0;

	table_clear(t);
	window_init(&w, r, n, seed);
	while (window_next(&w, &pos, &end, &hash))
	{
		size_t		k = table_find(t, r, r, pos, end, hash, n);

		if (t_pos1(t, k) != 0)
		{
			t_count_step(t, k, true);
			continue;
		}
		t_set(t, k, pos + 1, 1, hash);
		/* at most 3/4 full */
		if (++t->used > ((size_t) 3 << (t->bits - 2)))
			table_grow(t);
	}
	*items_r = w.items;
	window_init(&w, h, n, seed);
	while (window_next(&w, &pos, &end, &hash))
	{
		size_t		k;

		if (t->used == 0)
			continue;
		k = table_find(t, r, h, pos, end, hash, n);
		if (t_pos1(t, k) != 0 && t_count(t, k) > 0)
		{
			t_count_step(t, k, false);
			m++;
		}
	}
	*items_h = w.items;
	return m;
}

/* A seed for the hashes, from an address (ASLR): not predictable from outside. */
static uint64_t
hash_seed(const void *p)
{
	static const char anchor;

	return fmix64((uint64_t) (uintptr_t) &anchor ^ ((uint64_t) (uintptr_t) p << 17));
}

/* The n-gram statistics of one order after another, in one table. */
static void
ngram_stats(const Text *h, const Text *r, int orders, const SpmAlloc *a,
			double *matches, size_t *items_h, size_t *items_r)
{
	Table		t;
	uint64_t	seed = hash_seed(a);

	table_init(&t, a, r->len >= tf_metrics_wide_bytes);
	for (int n = 1; n <= orders; n++)
		matches[n - 1] = clipped_matches(h, r, n, &t, seed, items_h, items_r);
}

void
tf_bleu_add(double *stats, const char *hyp, size_t hyp_len, const char *ref, size_t ref_len,
			const SpmAlloc *a)
{
	size_t		hl,
				rl;
	char	   *ht = tf_tokenize_13a(hyp, hyp_len, a, &hl);
	char	   *rt = tf_tokenize_13a(ref, ref_len, a, &rl);
	Text		h = {ht, hl, false};
	Text		r = {rt, rl, false};
	double		m[4];
	size_t		nh,
				nr;

	ngram_stats(&h, &r, 4, a, m, &nh, &nr);
	stats[0] += nh;
	stats[1] += nr;
	for (int n = 1; n <= 4; n++)
	{
		stats[1 + n] += m[n - 1];
		stats[5 + n] += nh >= (size_t) n ? nh - n + 1 : 0;
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
	Text		h = {hyp, hyp_len, true};
	Text		r = {ref, ref_len, true};
	double		m[TF_CHRF_ORDER];
	size_t		nh,
				nr;

	ngram_stats(&h, &r, TF_CHRF_ORDER, a, m, &nh, &nr);
	for (int n = 1; n <= TF_CHRF_ORDER; n++)
	{
		stats[3 * (n - 1)] += nh >= (size_t) n ? nh - n + 1 : 0;
		stats[3 * (n - 1) + 1] += nr >= (size_t) n ? nr - n + 1 : 0;
		stats[3 * (n - 1) + 2] += m[n - 1];
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
