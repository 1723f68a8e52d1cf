/*
 * weight_file.c
 *		The shared weights file's format (see weight_file.h).  No postgres.h.
 *
 * The file is only a cache of the tables: anything unexpected in it (a
 * magic, version, build or fingerprint of another, a size that does not
 * add up, an offset outside the arena, a checksum that differs) makes
 * tf_wfile_open refuse it, and the caller rebuilds it from the tables.
 */
#include "weight_file.h"

#include <stdio.h>
#include <string.h>

#include "tensor_ops.h"

#define WFILE_MAGIC "TFWEIGHT"
#define WFILE_VERSION 6
#define WFILE_ENDIAN 0x01020304u
#define NO_OFFSET UINT64_MAX
#define VECTOR_DTYPE 255u		/* an fp32 vector, not a packed matrix */

typedef struct WHeader
{
	char		magic[8];
	uint32_t	version;
	uint32_t	endian;
	uint64_t	checksum;		/* of every byte from build on */
	char		build[64];
	uint64_t	fingerprint;
	uint64_t	file_len;
	uint64_t	table_off;
	uint64_t	nfields;
	uint64_t	arena_off;
	uint64_t	arena_len;
	int32_t		dims[8];		/* vocab, d_model, layers, ffn, positions */
	int32_t		dims2[8];		/* src_vocab, positions kind; the rest 0 */
} WHeader;

typedef struct WField
{
	uint64_t	offset;			/* into the arena; NO_OFFSET: none */
	uint32_t	dtype;			/* TfDType of a matrix, or VECTOR_DTYPE */
	uint32_t	unused;
} WField;

#define CHECKED_FROM offsetof(WHeader, build)

/* ----------------------------------------------------------- checksum */

static const uint64_t P1 = 0x9E3779B185EBCA87ULL;
static const uint64_t P2 = 0xC2B2AE3D27D4EB4FULL;
static const uint64_t P3 = 0x165667B19E3779F9ULL;
static const uint64_t P4 = 0x85EBCA77C2B2AE63ULL;
static const uint64_t P5 = 0x27D4EB2F165667C5ULL;

static inline uint64_t
rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t
read64(const unsigned char *p)
{
	uint64_t	v;

	memcpy(&v, p, 8);
	return v;
}

static inline uint64_t
round64(uint64_t acc, uint64_t v)
{
	return rotl64(acc + v * P2, 31) * P1;
}

static inline uint64_t
merge64(uint64_t h, uint64_t v)
{
	return (h ^ round64(0, v)) * P1 + P4;
}

uint64_t
tf_checksum64(const void *data, size_t n, uint64_t seed)
{
	const unsigned char *p = data;
	const unsigned char *end = p + n;
	uint64_t	h;

	if (n >= 32)
	{
		uint64_t	v1 = seed + P1 + P2,
					v2 = seed + P2,
					v3 = seed,
					v4 = seed - P1;

		for (; p + 32 <= end; p += 32)
		{
			v1 = round64(v1, read64(p));
			v2 = round64(v2, read64(p + 8));
			v3 = round64(v3, read64(p + 16));
			v4 = round64(v4, read64(p + 24));
		}
		h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
		h = merge64(merge64(merge64(merge64(h, v1), v2), v3), v4);
	}
	else
		h = seed + P5;
	h += (uint64_t) n;
	for (; p + 8 <= end; p += 8)
		h = rotl64(h ^ round64(0, read64(p)), 27) * P1 + P4;
	for (; p < end; p++)
		h = rotl64(h ^ (*p * P5), 11) * P1;
	h ^= h >> 33;
	h *= P2;
	h ^= h >> 29;
	h *= P3;
	h ^= h >> 32;
	return h;
}

/* ------------------------------------------------- every weight pointer */

typedef enum
{
	COUNT,
	WRITE,
	OPEN
} VisitMode;

typedef struct Visit
{
	VisitMode	mode;
	WField	   *fields;			/* WRITE: filled; OPEN: read */
	size_t		n;				/* fields visited */
	size_t		nfields;		/* OPEN: in the file */
	const char *arena;
	size_t		arena_len;
	const char *error;
} Visit;

/* p (bytes long) as an offset into the arena, or back */
static void
field(Visit *v, const void **p, TfDType *dtype, size_t rows, size_t cols, int optional)
{
	WField	   *f;
	size_t		bytes;

	if (v->error)
		return;
	if (v->mode == COUNT)
	{
		v->n++;
		return;
	}
	if (v->mode == OPEN && v->n >= v->nfields)
	{
		v->error = "it has fewer weights than the configuration needs";
		return;
	}
	f = &v->fields[v->n++];
	if (v->mode == WRITE)
	{
		memset(f, 0, sizeof(*f));
		f->dtype = dtype ? (uint32_t) *dtype : VECTOR_DTYPE;
		if (*p == NULL)
		{
			f->offset = NO_OFFSET;
			return;
		}
		if ((const char *) *p < v->arena || (const char *) *p >= v->arena + v->arena_len)
		{
			v->error = "a weight lies outside the arena";
			return;
		}
		f->offset = (uint64_t) ((const char *) *p - v->arena);
		return;
	}

	/* OPEN: checked before it is used */
	if (f->offset == NO_OFFSET)
	{
		if (!optional)
			v->error = "a required weight is missing";
		*p = NULL;
		return;
	}
	if (dtype)
	{
		if (f->dtype > TF_BF16D)
		{
			v->error = "a matrix has an unknown dtype";
			return;
		}
		*dtype = (TfDType) f->dtype;
		bytes = tf_packed_size(rows, cols, *dtype);
	}
	else
	{
		if (f->dtype != VECTOR_DTYPE)
		{
			v->error = "a vector is marked as a matrix";
			return;
		}
		bytes = rows * cols * sizeof(float);
	}
	if (f->offset > v->arena_len || bytes > v->arena_len - f->offset || f->offset % 64 != 0)
	{
		v->error = "a weight lies outside the arena";
		return;
	}
	*p = v->arena + f->offset;
}

static void
matrix(Visit *v, TfMatrix *mat, size_t rows, size_t cols)
{
	field(v, &mat->data, &mat->dtype, rows, cols, 0);
}

static void
optional_matrix(Visit *v, TfMatrix *mat, size_t rows, size_t cols)
{
	field(v, &mat->data, &mat->dtype, rows, cols, 1);
}

static void
vector(Visit *v, const float **p, size_t n, int optional)
{
	field(v, (const void **) p, NULL, n, 1, optional);
}

static void
attn(Visit *v, TfAttnWeights *A, size_t d)
{
	matrix(v, &A->q_w, d, d);
	vector(v, &A->q_b, d, 0);
	matrix(v, &A->k_w, d, d);
	vector(v, &A->k_b, d, 0);
	matrix(v, &A->v_w, d, d);
	vector(v, &A->v_b, d, 0);
	matrix(v, &A->o_w, d, d);
	vector(v, &A->o_b, d, 0);
	vector(v, &A->ln_g, d, 0);
	vector(v, &A->ln_b, d, 0);
}

static void
layer(Visit *v, TfLayerWeights *L, size_t d, size_t ffn, int decoder)
{
	attn(v, &L->self_attn, d);
	if (decoder)
		attn(v, &L->cross_attn, d);
	matrix(v, &L->fc1_w, ffn, d);
	vector(v, &L->fc1_b, ffn, 0);
	matrix(v, &L->fc2_w, d, ffn);
	vector(v, &L->fc2_b, d, 0);
	vector(v, &L->ln_g, d, 0);
	vector(v, &L->ln_b, d, 0);
}

static void
visit(Visit *v, TfModel *m)
{
	const TfConfig *c = &m->cfg;
	size_t		d = c->d_model;

	matrix(v, &m->w.enc_embed, c->src_vocab, d);
	matrix(v, &m->w.dec_embed, c->vocab, d);
	matrix(v, &m->w.lm_head, c->vocab, d);
	vector(v, &m->w.logits_bias, c->vocab, 1);
	optional_matrix(v, &m->w.lm_head_screen, c->vocab, d);
	vector(v, &m->w.lm_head_slack, tf_screen_slack_floats(c->vocab), 1);
	vector(v, &m->w.enc_pos, (size_t) c->max_pos * d, 0);
	vector(v, &m->w.dec_pos, (size_t) c->max_pos * d, 0);
	vector(v, &m->w.pad_pos, d, 1);
	for (int i = 0; i < c->enc_layers; i++)
		layer(v, &m->w.enc[i], d, c->enc_ffn, 0);
	for (int i = 0; i < c->dec_layers; i++)
		layer(v, &m->w.dec[i], d, c->dec_ffn, 1);
	vector(v, &m->w.enc_norm_g, d, !c->final_norm);
	vector(v, &m->w.enc_norm_b, d, !c->final_norm);
	vector(v, &m->w.dec_norm_g, d, !c->final_norm);
	vector(v, &m->w.dec_norm_b, d, !c->final_norm);
	vector(v, &m->w.embed_norm_g, d, !c->embed_norm);
	vector(v, &m->w.embed_norm_b, d, !c->embed_norm);
}

/* the fields visit() meets: see attn() and layer() */
static size_t
count_fields(const TfModel *m)
{
	return 9 + (size_t) m->cfg.enc_layers * 16 + (size_t) m->cfg.dec_layers * 26 + 6;
}

/* dims: 16 values, WHeader's dims then dims2 */
static void
dims_of(const TfConfig *c, int32_t *dims)
{
	memset(dims, 0, sizeof(int32_t) * 16);
	dims[0] = c->vocab;
	dims[1] = c->d_model;
	dims[2] = c->enc_layers;
	dims[3] = c->dec_layers;
	dims[4] = c->enc_ffn;
	dims[5] = c->dec_ffn;
	dims[6] = c->max_pos;
	dims[7] = c->final_norm;
	dims[8] = c->src_vocab;
	dims[9] = (int32_t) c->positions;
	dims[10] = c->embed_norm;
	dims[11] = c->encoder_only;
}

static size_t
align_up(size_t n)
{
	return (n + TF_WFILE_ALIGN - 1) / TF_WFILE_ALIGN * TF_WFILE_ALIGN;
}

size_t
tf_wfile_size(const TfModel *m, size_t arena_len)
{
	return align_up(TF_WFILE_HEADER + count_fields(m) * sizeof(WField)) + arena_len;
}

const char *
tf_wfile_build_tag(void)
{
	static char tag[64];

	if (tag[0] == '\0')
		snprintf(tag, sizeof(tag), "wfile%d panel%d i8g4 %s le%d p%d", WFILE_VERSION, TF_PANEL,
#if defined(__x86_64__)
				 "x86_64",
#elif defined(__aarch64__)
				 "aarch64",
#else
				 "other",
#endif
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
				 1,
#else
				 0,
#endif
				 (int) sizeof(void *));
	return tag;
}

/* Everything of the header but the checksum, for a file of len bytes. */
static void
set_header(WHeader *h, const TfModel *m, const char *build, uint64_t fingerprint,
		   size_t len, size_t nfields, size_t arena_off)
{
	memcpy(h->magic, WFILE_MAGIC, 8);
	h->version = WFILE_VERSION;
	h->endian = WFILE_ENDIAN;
	memset(h->build, 0, sizeof(h->build));
	strcpy(h->build, build);
	h->fingerprint = fingerprint;
	h->file_len = len;
	h->table_off = TF_WFILE_HEADER;
	h->nfields = nfields;
	h->arena_off = arena_off;
	h->arena_len = len - arena_off;
	{
		int32_t		dims[16];

		dims_of(&m->cfg, dims);
		memcpy(h->dims, dims, sizeof(h->dims));
		memcpy(h->dims2, dims + 8, sizeof(h->dims2));
	}
}

const char *
tf_wfile_write(void *out, size_t len, const TfModel *m, const void *arena,
			   size_t arena_len, const char *build, uint64_t fingerprint)
{
	WHeader    *h = out;
	size_t		nfields = count_fields(m);
	size_t		arena_off = align_up(TF_WFILE_HEADER + nfields * sizeof(WField));
	Visit		v = {.mode = WRITE};
	TfModel		copy = *m;

	if (len != arena_off + arena_len || strlen(build) >= sizeof(h->build))
		return "the buffer has the wrong size";
	memset(out, 0, arena_off);
	v.fields = (WField *) ((char *) out + TF_WFILE_HEADER);
	v.arena = arena;
	v.arena_len = arena_len;
	visit(&v, &copy);
	if (v.error)
		return v.error;
	if (v.n != nfields)
		return "the weights are not those of the configuration";
	set_header(h, m, build, fingerprint, len, nfields, arena_off);
	/* (the arena may have been packed in place, into out itself) */
	if ((const char *) arena != (char *) out + arena_off)
		memcpy((char *) out + arena_off, arena, arena_len);
	h->checksum = tf_checksum64((const char *) out + CHECKED_FROM, len - CHECKED_FROM, 0);
	return NULL;
}

int
tf_wfile_fix_header(void *file, size_t len, const TfModel *m, const char *build, uint64_t fingerprint)
{
	WHeader    *h = file;
	size_t		nfields = count_fields(m);
	size_t		arena_off = align_up(TF_WFILE_HEADER + nfields * sizeof(WField));

	if (len < arena_off || strlen(build) >= sizeof(h->build))
		return -1;
	set_header(h, m, build, fingerprint, len, nfields, arena_off);
	return 0;
}

uint64_t
tf_wfile_fingerprint(const void *file, size_t len)
{
	const WHeader *h = file;

	if (len < TF_WFILE_HEADER || memcmp(h->magic, WFILE_MAGIC, 8) != 0)
		return 0;
	return h->fingerprint;
}

const char *
tf_wfile_open(const void *file, size_t len, TfModel *m, TfLayerWeights *enc,
			  TfLayerWeights *dec, const char *build, uint64_t fingerprint, int verify)
{
	const WHeader *h = file;
	int32_t		dims[16];
	size_t		nfields = count_fields(m);
	Visit		v = {.mode = OPEN};

	if (len < TF_WFILE_HEADER || memcmp(h->magic, WFILE_MAGIC, 8) != 0)
		return "it is not a weights file";
	if (h->version != WFILE_VERSION || h->endian != WFILE_ENDIAN ||
		strncmp(h->build, build, sizeof(h->build)) != 0)
		return "it was written by another build";
	if (h->fingerprint != fingerprint)
		return "it is of another version of the model";
	if (h->file_len != len)
		return "it is truncated or too long";
	dims_of(&m->cfg, dims);
	if (memcmp(dims, h->dims, sizeof(h->dims)) != 0 ||
		memcmp(dims + 8, h->dims2, sizeof(h->dims2)) != 0 || h->nfields != nfields)
		return "its dimensions are not the configuration's";
	if (h->table_off != TF_WFILE_HEADER ||
		h->arena_off != align_up(TF_WFILE_HEADER + nfields * sizeof(WField)) ||
		h->arena_off > len || h->arena_len != len - h->arena_off)
		return "its sizes do not add up";
	if (verify && tf_checksum64((const char *) file + CHECKED_FROM, len - CHECKED_FROM, 0) != h->checksum)
		return "its checksum differs";
	v.fields = (WField *) ((char *) file + TF_WFILE_HEADER);
	v.nfields = nfields;
	v.arena = (const char *) file + h->arena_off;
	v.arena_len = h->arena_len;
	memset(&m->w, 0, sizeof(m->w));
	memset(enc, 0, sizeof(TfLayerWeights) * m->cfg.enc_layers);
	memset(dec, 0, sizeof(TfLayerWeights) * m->cfg.dec_layers);
	m->w.enc = enc;
	m->w.dec = dec;
	visit(&v, m);
	return v.error;
}
