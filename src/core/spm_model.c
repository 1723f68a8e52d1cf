/*
 * spm_model.c
 *		Reading a SentencePiece model file (a serialized ModelProto) into an
 *		SpmModel, with the checks the reference library makes at load time
 *		and the ones a hostile file needs.  No postgres.h.
 */
#include "spm.h"

void		(*spm_interrupt_hook) (void) = NULL;
bool		(*spm_interrupt_pending) (void) = NULL;
#include "protobuf.h"

#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- maps */

typedef struct SpmMapEntry
{
	const char *key;			/* NULL: empty slot */
	uint32_t	len;
	uint32_t	hash;
	int32_t		value;			/* piece id, or -1 for a proper prefix only */
} SpmMapEntry;

#define FNV_OFFSET 2166136261u
#define FNV_PRIME 16777619u

static inline uint32_t
fnv_step(uint32_t h, unsigned char c)
{
	return (h ^ c) * FNV_PRIME;
}

static uint32_t
fnv(const char *s, size_t len)
{
	uint32_t	h = FNV_OFFSET;

	for (size_t i = 0; i < len; i++)
		h = fnv_step(h, (unsigned char) s[i]);
	return h;
}

static SpmMapEntry *
map_slot(const SpmMap *map, const char *key, uint32_t len, uint32_t hash)
{
	uint32_t	i = hash & map->mask;

	for (;;)
	{
		SpmMapEntry *e = &map->slots[i];

		if (e->key == NULL ||
			(e->hash == hash && e->len == len && memcmp(e->key, key, len) == 0))
			return e;
		i = (i + 1) & map->mask;
	}
}

static void
map_init(SpmMap *map, size_t entries, const SpmAlloc *a)
{
	uint32_t	cap = 16;

	while (cap < entries * 2)
		cap <<= 1;
	map->mask = cap - 1;
	map->slots = a->alloc(a->ctx, sizeof(SpmMapEntry) * cap);
}

/*
 * Insert every prefix of key (as -1) and key itself (as id).  Returns false
 * if key is already there as a piece.  The map was sized for all prefixes.
 */
static bool
map_insert_with_prefixes(SpmMap *map, const char *key, uint32_t len, int id,
						 size_t *count)
{
	uint32_t	h = FNV_OFFSET;

	for (uint32_t l = 1; l <= len; l++)
	{
		SpmMapEntry *e;

		h = fnv_step(h, (unsigned char) key[l - 1]);
		e = map_slot(map, key, l, h);
		if (e->key == NULL)
		{
			e->key = key;
			e->len = l;
			e->hash = h;
			e->value = -1;
			(*count)++;
		}
		if (l == len)
		{
			if (e->value >= 0)
				return false;
			e->value = id;
		}
	}
	return true;
}

bool
spm_map_build(SpmMap *map, int n, const char *const *keys, const uint32_t *lens,
			  const int32_t *values, const SpmAlloc *a, int *dup)
{
	map_init(map, (size_t) n, a);
	for (int i = 0; i < n; i++)
	{
		uint32_t	h = fnv(keys[i], lens[i]);
		SpmMapEntry *e = map_slot(map, keys[i], lens[i], h);

		if (e->key != NULL)
		{
			*dup = i;
			return false;
		}
		e->key = keys[i];
		e->len = lens[i];
		e->hash = h;
		e->value = values[i];
	}
	return true;
}

/* The id stored for key: >= 0 a piece, -1 only a prefix, -2 absent. */
int32_t
spm_map_get(const SpmMap *map, const char *key, size_t len)
{
	SpmMapEntry *e;

	if (map->slots == NULL || len == 0 || len > UINT32_MAX)
		return -2;
	e = map_slot(map, key, (uint32_t) len, fnv(key, len));
	return e->key ? e->value : -2;
}

int32_t
spm_map_step(const SpmMap *map, const char *s, uint32_t l, uint32_t *h)
{
	SpmMapEntry *e;

	*h = fnv_step(*h, (unsigned char) s[l - 1]);
	if (map->slots == NULL)
		return -2;
	e = map_slot(map, s, l, *h);
	return e->key ? e->value : -2;
}

/* ------------------------------------------------------------- loading */

typedef struct Loader
{
	const SpmAlloc *a;
	char	   *err;
	size_t		errlen;
} Loader;

static bool fail(Loader *L, const char *fmt,...) __attribute__((format(printf, 2, 3)));

static bool
fail(Loader *L, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(L->err, L->errlen, fmt, ap);
	va_end(ap);
	return false;
}

static char *
copy_bytes(Loader *L, const uint8_t *data, size_t len)
{
	char	   *s = L->a->alloc(L->a->ctx, len + 1);

	memcpy(s, data, len);
	s[len] = '\0';
	return s;
}

static bool
parse_piece(Loader *L, const uint8_t *data, size_t len, SpmPiece *p)
{
	PbReader	r = pb_reader(data, len);
	PbField		f;
	int			rc;

	p->str = "";
	p->len = 0;
	p->score = 0.0f;
	p->type = SPM_NORMAL;
	while ((rc = pb_next_field(&r, &f)) == PB_FIELD)
	{
		if (f.number == 1 && f.wire_type == PB_BYTES)
		{
			if (f.len > SPM_MAX_PIECE_BYTES)
				return fail(L, "a piece is %zu bytes long, more than the %d allowed",
							f.len, SPM_MAX_PIECE_BYTES);
			p->str = copy_bytes(L, f.data, f.len);
			p->len = (uint32_t) f.len;
		}
		else if (f.number == 2 && f.wire_type == PB_FIXED32)
			p->score = pb_float(&f);
		else if (f.number == 3 && f.wire_type == PB_VARINT)
		{
			if (f.varint < SPM_NORMAL || f.varint > SPM_BYTE)
				return fail(L, "a piece has the unknown type %llu",
							(unsigned long long) f.varint);
			p->type = (uint8_t) f.varint;
		}
	}
	if (rc == PB_ERROR)
		return fail(L, "a piece is malformed");
	if (p->score != p->score)
		return fail(L, "a piece has a NaN score");
	return true;
}

static bool
parse_trainer_spec(Loader *L, const uint8_t *data, size_t len, SpmModel *m)
{
	PbReader	r = pb_reader(data, len);
	PbField		f;
	int			rc;

	while ((rc = pb_next_field(&r, &f)) == PB_FIELD)
	{
		if (f.number == 3 && f.wire_type == PB_VARINT)
			m->model_type = (int) (int32_t) f.varint;
		else if (f.number == 24 && f.wire_type == PB_VARINT)
			m->treat_whitespace_as_suffix = f.varint != 0;
		else if (f.number == 35 && f.wire_type == PB_VARINT)
			m->byte_fallback = f.varint != 0;
		else if (f.number == 44 && f.wire_type == PB_BYTES)
		{
			if (f.len > SPM_MAX_PIECE_BYTES)
				return fail(L, "unk_surface is too long");
			m->unk_surface = copy_bytes(L, f.data, f.len);
			m->unk_surface_len = (uint32_t) f.len;
		}
	}
	if (rc == PB_ERROR)
		return fail(L, "the trainer spec is malformed");
	return true;
}

/* precompiled_charsmap: u32 trie size, the double array, then strings. */
static bool
parse_charsmap(Loader *L, const uint8_t *data, size_t len, SpmNormalizer *n)
{
	uint32_t	trie_size;
	uint32_t   *units;
	char	   *strings;

	if (len == 0)
	{
		n->units = NULL;
		n->nunits = 0;
		return true;
	}
	if (len <= 4)
		return fail(L, "the precompiled character map is broken");
	trie_size = (uint32_t) data[0] | (uint32_t) data[1] << 8 |
		(uint32_t) data[2] << 16 | (uint32_t) data[3] << 24;
	if ((size_t) trie_size >= len - 4 || trie_size < 4)
		return fail(L, "the precompiled character map's trie (%u bytes) does not fit in it (%zu bytes)",
					trie_size, len);

	/* copy into aligned memory: the blob sits at any offset of the file */
	units = L->a->alloc(L->a->ctx, trie_size);
	for (uint32_t i = 0; i < trie_size / 4; i++)
	{
		const uint8_t *u = data + 4 + (size_t) i * 4;

		units[i] = (uint32_t) u[0] | (uint32_t) u[1] << 8 |
			(uint32_t) u[2] << 16 | (uint32_t) u[3] << 24;
	}
	/* a NUL after the last string keeps every lookup inside the copy */
	strings = copy_bytes(L, data + 4 + trie_size, len - 4 - trie_size);

	n->units = units;
	n->nunits = trie_size / 4;
	n->strings = strings;
	n->strings_len = (uint32_t) (len - 4 - trie_size);
	return true;
}

static bool
parse_normalizer_spec(Loader *L, const uint8_t *data, size_t len, SpmNormalizer *n)
{
	PbReader	r = pb_reader(data, len);
	PbField		f;
	int			rc;

	while ((rc = pb_next_field(&r, &f)) == PB_FIELD)
	{
		if (f.number == 2 && f.wire_type == PB_BYTES)
		{
			if (!parse_charsmap(L, f.data, f.len, n))
				return false;
		}
		else if (f.number == 3 && f.wire_type == PB_VARINT)
			n->add_dummy_prefix = f.varint != 0;
		else if (f.number == 4 && f.wire_type == PB_VARINT)
			n->remove_extra_whitespaces = f.varint != 0;
		else if (f.number == 5 && f.wire_type == PB_VARINT)
			n->escape_whitespaces = f.varint != 0;
	}
	if (rc == PB_ERROR)
		return fail(L, "the normalizer spec is malformed");
	return true;
}

static void
normalizer_defaults(SpmNormalizer *n)
{
	memset(n, 0, sizeof(*n));
	n->add_dummy_prefix = true;
	n->remove_extra_whitespaces = true;
	n->escape_whitespaces = true;
}

/* "<0xNN>" with upper-case hex: the byte, or -1. */
static int
piece_to_byte(const char *s, uint32_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	const char *hi,
			   *lo;

	if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
		return -1;
	hi = memchr(hex, s[3], 16);
	lo = memchr(hex, s[4], 16);
	if (hi == NULL || lo == NULL)
		return -1;
	return (int) ((hi - hex) * 16 + (lo - hex));
}

static int
piece_cmp(const void *pa, const void *pb)
{
	const SpmPiece *a = *(const SpmPiece *const *) pa;
	const SpmPiece *b = *(const SpmPiece *const *) pb;
	int			c = memcmp(a->str, b->str, a->len < b->len ? a->len : b->len);

	return c != 0 ? c : (a->len > b->len) - (a->len < b->len);
}

/*
 * The number of distinct non-empty prefixes of the pieces that pass keep,
 * exactly: sorted, each piece adds its length less what it shares with
 * the one before.  It sizes the prefix map (the sum of the lengths would
 * be three to four times too large for real vocabularies, and the map is
 * most of a tokenizer's memory).
 */
static size_t
distinct_prefixes(Loader *L, const SpmModel *m, bool (*keep) (const SpmPiece *))
{
	const SpmPiece **sorted = L->a->alloc(L->a->ctx, sizeof(SpmPiece *) * (size_t) (m->npieces + 1));
	size_t		n = 0,
				total = 0;

	for (int i = 0; i < m->npieces; i++)
		if (keep(&m->pieces[i]))
			sorted[n++] = &m->pieces[i];
	qsort(sorted, n, sizeof(SpmPiece *), piece_cmp);
	for (size_t i = 0; i < n; i++)
	{
		uint32_t	common = 0;

		if (i > 0)
			while (common < sorted[i]->len && common < sorted[i - 1]->len &&
				   sorted[i]->str[common] == sorted[i - 1]->str[common])
				common++;
		total += sorted[i]->len - common;
	}
	return total;
}

static bool
in_normal_map(const SpmPiece *p)
{
	return !(p->type == SPM_UNKNOWN || p->type == SPM_CONTROL || p->type == SPM_BYTE);
}

static bool
in_user_map(const SpmPiece *p)
{
	return p->type == SPM_USER_DEFINED;
}

static bool
build_maps(Loader *L, SpmModel *m)
{
	size_t		user_bound = 0,
				count = 0,
				ucount = 0;
	int			nreserved = 0,
				nunk = 0,
				nnormal = 0;

	for (int i = 0; i < m->npieces; i++)
	{
		SpmPiece   *p = &m->pieces[i];

		if (p->len == 0)
			return fail(L, "piece %d is empty", i);
		if (p->type == SPM_UNKNOWN || p->type == SPM_CONTROL || p->type == SPM_BYTE)
			nreserved++;
		if (p->type == SPM_USER_DEFINED)
			user_bound += p->len;
	}

	map_init(&m->normal, distinct_prefixes(L, m, in_normal_map), L->a);
	map_init(&m->reserved, (size_t) nreserved, L->a);
	if (user_bound > 0)
	{
		map_init(&m->user_defined, distinct_prefixes(L, m, in_user_map), L->a);
		m->has_user_defined = true;
	}

	m->unk_id = -1;
	for (int b = 0; b < 256; b++)
		m->byte_id[b] = -1;
	m->min_score = FLT_MAX;
	m->max_score = FLT_MIN;		/* sic: the reference starts from FLT_MIN */

	for (int i = 0; i < m->npieces; i++)
	{
		SpmPiece   *p = &m->pieces[i];

		if (p->type == SPM_UNKNOWN || p->type == SPM_CONTROL || p->type == SPM_BYTE)
		{
			SpmMapEntry *e = map_slot(&m->reserved, p->str, p->len, fnv(p->str, p->len));

			if (e->key != NULL)
				return fail(L, "the piece \"%.*s\" is defined twice", (int) p->len, p->str);
			e->key = p->str;
			e->len = p->len;
			e->hash = fnv(p->str, p->len);
			e->value = i;
		}
		else
		{
			if (!map_insert_with_prefixes(&m->normal, p->str, p->len, i, &count))
				return fail(L, "the piece \"%.*s\" is defined twice", (int) p->len, p->str);
			nnormal++;
		}

		if (p->type == SPM_USER_DEFINED &&
			!map_insert_with_prefixes(&m->user_defined, p->str, p->len, i, &ucount))
			return fail(L, "the piece \"%.*s\" is defined twice", (int) p->len, p->str);

		if (p->type == SPM_UNKNOWN)
		{
			m->unk_id = i;
			nunk++;
		}
		else if (p->type == SPM_BYTE)
		{
			int			b = piece_to_byte(p->str, p->len);

			if (!m->byte_fallback)
				return fail(L, "the model has byte pieces but no byte_fallback");
			if (b < 0)
				return fail(L, "the byte piece \"%.*s\" is not of the form <0xNN>",
							(int) p->len, p->str);
			m->byte_id[b] = i;
		}
		else if (p->type == SPM_NORMAL)
		{
			if (p->score < m->min_score)
				m->min_score = p->score;
			if (p->score > m->max_score)
				m->max_score = p->score;
		}
	}

	if (nunk != 1)
		return fail(L, nunk == 0 ? "the model defines no unknown piece" :
					"the model defines more than one unknown piece");
	if (m->byte_fallback)
		for (int b = 0; b < 256; b++)
			if (m->byte_id[b] < 0)
				return fail(L, "byte_fallback is on but the piece <0x%02X> is missing", b);
	if (nnormal == 0)
		return fail(L, "the model has no normal pieces");
	return true;
}

SpmModel *
spm_load(const void *data, size_t len, const SpmAlloc *a, char *err, size_t errlen)
{
	Loader		L = {a, err, errlen};
	SpmModel   *m;
	PbReader	r;
	PbField		f;
	int			rc;
	int			npieces = 0;

	if (len > SPM_MAX_MODEL_BYTES)
	{
		fail(&L, "the model file is %zu bytes, more than the %zu allowed", len,
			 SPM_MAX_MODEL_BYTES);
		return NULL;
	}

	/* first pass: count the pieces, check the framing */
	r = pb_reader(data, len);
	while ((rc = pb_next_field(&r, &f)) == PB_FIELD)
		if (f.number == 1 && f.wire_type == PB_BYTES)
			npieces++;
	if (rc == PB_ERROR)
	{
		fail(&L, "the model file is not a valid SentencePiece model (protobuf framing error)");
		return NULL;
	}
	if (npieces == 0)
	{
		fail(&L, "the model file has no pieces");
		return NULL;
	}

	m = a->alloc(a->ctx, sizeof(SpmModel));
	m->pieces = a->alloc(a->ctx, sizeof(SpmPiece) * (size_t) npieces);
	m->model_type = SPM_UNIGRAM;
	/* a copy: a tokenizer's memory may be mapped by another process (weight_cache.c) */
	m->unk_surface = copy_bytes(&L, (const uint8_t *) " \xE2\x81\x87 ", 5);
	m->unk_surface_len = 5;
	normalizer_defaults(&m->normalizer);
	normalizer_defaults(&m->denormalizer);

	/* second pass: the fields; sub-messages seen twice merge, as in proto2 */
	r = pb_reader(data, len);
	while (pb_next_field(&r, &f) == PB_FIELD)
	{
		if (f.wire_type != PB_BYTES)
			continue;
		if (f.number == 1)
		{
			if (!parse_piece(&L, f.data, f.len, &m->pieces[m->npieces]))
				return NULL;
			m->npieces++;
		}
		else if (f.number == 2)
		{
			if (!parse_trainer_spec(&L, f.data, f.len, m))
				return NULL;
		}
		else if (f.number == 3)
		{
			if (!parse_normalizer_spec(&L, f.data, f.len, &m->normalizer))
				return NULL;
		}
		else if (f.number == 5)
		{
			if (!parse_normalizer_spec(&L, f.data, f.len, &m->denormalizer))
				return NULL;
			m->has_denormalizer = true;
		}
	}

	if (m->model_type != SPM_UNIGRAM && m->model_type != SPM_BPE)
	{
		fail(&L, "model type %d is not supported (only unigram and BPE)", m->model_type);
		return NULL;
	}
	if (m->has_denormalizer && m->denormalizer.units == NULL)
		m->has_denormalizer = false;

	if (!build_maps(&L, m))
		return NULL;
	return m;
}

int
spm_piece_to_id(const SpmModel *m, const char *s, size_t len)
{
	int32_t		id = spm_map_get(&m->reserved, s, len);

	if (id >= 0)
		return id;
	id = spm_map_get(&m->normal, s, len);
	return id >= 0 ? id : m->unk_id;
}
