/*
 * spm.h
 *		SentencePiece in C: model files, normalization, unigram and BPE
 *		encoding, decoding.  Matches the reference library (0.1.97) id for id.
 *
 * Part of the core: no postgres.h.  Memory comes from a caller-supplied
 * allocator (palloc in the server, malloc in tests); nothing is freed
 * piecemeal, the caller frees the whole context.  Errors are returned as a
 * message, never by aborting: every input, including a hostile model file,
 * is read with bounds checks.
 */
#ifndef SPM_H
#define SPM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Zeroed memory, or does not return (the server's palloc0 raises). */
typedef struct SpmAlloc
{
	void	   *(*alloc) (void *ctx, size_t size);
	void	   *ctx;
} SpmAlloc;

/* ModelProto.SentencePiece.Type */
enum
{
	SPM_NORMAL = 1,
	SPM_UNKNOWN = 2,
	SPM_CONTROL = 3,
	SPM_USER_DEFINED = 4,
	SPM_UNUSED = 5,
	SPM_BYTE = 6
};

/* TrainerSpec.ModelType */
enum
{
	SPM_UNIGRAM = 1,
	SPM_BPE = 2,
	SPM_WORD = 3,
	SPM_CHAR = 4
};

typedef struct SpmPiece
{
	const char *str;
	uint32_t	len;
	float		score;
	uint8_t		type;
} SpmPiece;

/* Open-addressing map from byte strings (and their prefixes) to ids. */
typedef struct SpmMap
{
	uint32_t	mask;			/* capacity - 1 */
	struct SpmMapEntry *slots;
} SpmMap;

/* A NormalizerSpec with its precompiled character map (a darts trie). */
typedef struct SpmNormalizer
{
	bool		add_dummy_prefix;
	bool		remove_extra_whitespaces;
	bool		escape_whitespaces;
	const uint32_t *units;		/* double-array units; NULL: identity */
	uint32_t	nunits;
	const char *strings;		/* NUL-terminated replacement strings */
	uint32_t	strings_len;
} SpmNormalizer;

typedef struct SpmModel
{
	int			model_type;		/* SPM_UNIGRAM or SPM_BPE */
	int			npieces;
	SpmPiece   *pieces;			/* (npieces) */
	int			unk_id;
	int			byte_id[256];	/* id of "<0xNN>", -1 without byte fallback */
	bool		byte_fallback;
	bool		treat_whitespace_as_suffix;
	const char *unk_surface;	/* shown for unknown ids when decoding */
	uint32_t	unk_surface_len;
	float		min_score;		/* over NORMAL pieces */
	float		max_score;
	SpmNormalizer normalizer;
	bool		has_denormalizer;
	SpmNormalizer denormalizer;
	SpmMap		normal;			/* NORMAL, USER_DEFINED, UNUSED pieces + prefixes */
	SpmMap		reserved;		/* UNKNOWN, CONTROL, BYTE pieces */
	SpmMap		user_defined;	/* USER_DEFINED pieces + prefixes, or empty */
	bool		has_user_defined;
} SpmModel;

/* One token of an encoding: an id and the piece it stands for. */
typedef struct SpmToken
{
	int			id;
	const char *str;			/* into the normalized text or the model */
	uint32_t	len;
} SpmToken;

typedef struct SpmEncoding
{
	int			ntokens;
	SpmToken   *tokens;
	char	   *normalized;		/* what the token strings may point into */
	size_t		normalized_len;
} SpmEncoding;

/*
 * Called every so many iterations of the loops that can run long on big
 * inputs (normalizing, segmenting, decoding), if set: the server sets it to
 * CHECK_FOR_INTERRUPTS(), which may not return.  Memory comes from the
 * allocator, so leaving a loop that way leaks nothing.
 */
extern void (*spm_interrupt_hook) (void);

/*
 * Whether the hook would not return now (a cancel or a timeout is
 * pending), if set: for code that must stop a library and tidy up before
 * calling the hook (libxml2's parser, which must not be left by longjmp).
 */
extern bool (*spm_interrupt_pending) (void);
#define SPM_CHECK_INTERRUPTS(i) \
	do { \
		if ((((size_t) (i)) & 0x3FFF) == 0 && spm_interrupt_hook != NULL) \
			spm_interrupt_hook(); \
	} while (0)

/*
 * The same by work done: add work (bytes of input looked at, or the
 * equivalent) to counter, a size_t, and call the hook once it reaches
 * SPM_INTERRUPT_WORK.  Whatever the shape of the input, a loop then calls
 * the hook at least every 64 KB of input it processes.
 */
#define SPM_INTERRUPT_WORK ((size_t) 64 * 1024)
#define SPM_CHECK_INTERRUPTS_WORK(counter, work) \
	do { \
		(counter) += (size_t) (work); \
		if ((counter) >= SPM_INTERRUPT_WORK) \
		{ \
			(counter) = 0; \
			if (spm_interrupt_hook != NULL) \
				spm_interrupt_hook(); \
		} \
	} while (0)

/* Longest model file and piece we accept: far beyond real ones. */
#define SPM_MAX_MODEL_BYTES ((size_t) 256 * 1024 * 1024)
#define SPM_MAX_PIECE_BYTES 4096
/* Longest normalized text (and decoded text) we produce. */
#define SPM_MAX_NORMALIZED_BYTES ((size_t) 16 * 1024 * 1024)

/*
 * Parse a serialized ModelProto.  Strings are copied, so `data` may be
 * freed afterwards.  NULL with a message in err (errlen bytes) on failure.
 */
SpmModel   *spm_load(const void *data, size_t len, const SpmAlloc *a,
					 char *err, size_t errlen);

/* Piece string -> id as PieceToId: reserved, then normal, else unk_id. */
int			spm_piece_to_id(const SpmModel *m, const char *s, size_t len);

/*
 * Normalize `in` with a normalizer spec: out receives the result (an
 * allocation from a, NUL-terminated), *out_len its length.  The
 * user-defined matcher and suffix mode apply when with_model_rules
 * (encoding, not denormalizing).  False if the result would be longer than
 * SPM_MAX_NORMALIZED_BYTES.
 */
bool		spm_normalize(const SpmModel *m, const SpmNormalizer *n, bool with_model_rules,
						  const char *in, size_t len, const SpmAlloc *a,
						  char **out, size_t *out_len);

/*
 * Encode text: normalize, segment, merge unknowns or fall back to bytes.
 * False if the normalized text would be longer than SPM_MAX_NORMALIZED_BYTES.
 */
bool		spm_encode(const SpmModel *m, const char *text, size_t len,
					   const SpmAlloc *a, SpmEncoding *enc);

/*
 * Decode pieces as DecodePieces: control pieces vanish, U+2581 becomes a
 * space, byte pieces are joined as UTF-8.  The result is allocated from a,
 * NUL-terminated, its length in *out_len; NULL if it would be longer than
 * SPM_MAX_NORMALIZED_BYTES.
 */
char	   *spm_decode_pieces(const SpmModel *m, int n, const char *const *strs,
							  const uint32_t *lens, const SpmAlloc *a, size_t *out_len);

/* Piece maps (spm_model.c): the id for key, -1 if only a prefix, -2 absent. */
int32_t		spm_map_get(const SpmMap *map, const char *key, size_t len);
/* The same for s[0:l], walking l = 1, 2, ... with *h starting at SPM_HASH_INIT. */
int32_t		spm_map_step(const SpmMap *map, const char *s, uint32_t l, uint32_t *h);
#define SPM_HASH_INIT 2166136261u

/*
 * Build a map of n distinct keys (no prefixes) to values; false if a key
 * repeats, with its index in *dup.
 */
bool		spm_map_build(SpmMap *map, int n, const char *const *keys, const uint32_t *lens,
						  const int32_t *values, const SpmAlloc *a, int *dup);

/* UTF-8 as SentencePiece reads it (util::DecodeUTF8). */
uint32_t	spm_decode_utf8(const char *s, size_t n, int *mblen);
int			spm_one_char_len(const char *s);

#endif							/* SPM_H */
