/*
 * wordpiece.c
 *		BERT's tokenizer as Hugging Face's tokenizers library (Rust; what
 *		transformers' fast tokenizers and sentence-transformers run) does it,
 *		ported rule by rule from tokenizers/src/normalizers/bert.rs,
 *		pre_tokenizers/bert.rs and models/wordpiece/mod.rs:
 *
 *		BertNormalizer: clean_text (drop U+0000, U+FFFD and controls Cc Cf Co
 *		Cs but \t \n \r; whitespace becomes ' '), handle_chinese_chars (' '
 *		around CJK ideographs, by bert.rs's ranges), strip_accents (NFD, Mn
 *		removed) when it is true, or null and lowercase is, then lowercase
 *		(char::to_lowercase: each character on its own, so no final sigma).
 *		BertPreTokenizer: split at whitespace (removed) and at punctuation
 *		(each character alone): ASCII punctuation and \p{P}.
 *		WordPiece: a word of more than max_input_chars_per_word characters is
 *		unk_token; else greedy longest match from the left, pieces after the
 *		first with continuing_subword_prefix; a word with no match somewhere
 *		is unk_token whole.  Added (special) tokens are split off the raw
 *		text first (AddedVocabulary).
 *
 *		The npm package @huggingface/tokenizers reimplements this in
 *		JavaScript and departs from it in three places, which the tests
 *		count (test/pgtap/28_embeddings.sql): it tests CJK per UTF-16 unit
 *		(never beyond the BMP), lowercases the whole text (final sigma), and
 *		takes whitespace as JavaScript's \s.  The Unicode data is ICU's.
 */
#include "wordpiece.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/utf8.h>

/* ------------------------------------------------------------ loading */

typedef struct VocabKey
{
	const char *s;
	uint32_t	len;
	int32_t		id;
} VocabKey;

/* by bytes, then the last line first */
static int
vocab_key_cmp(const void *x, const void *y)
{
	const VocabKey *a = x;
	const VocabKey *b = y;
	uint32_t	l = a->len < b->len ? a->len : b->len;
	int			c = memcmp(a->s, b->s, l);

	if (c != 0)
		return c;
	if (a->len != b->len)
		return a->len < b->len ? -1 : 1;
	return a->id > b->id ? -1 : a->id < b->id;
}

TfWordPiece *
tf_wordpiece_load(const char *vocab, size_t len, const TfWordPieceOptions *opt,
				  const SpmAlloc *a, char *err, size_t errlen)
{
	TfWordPiece *wp = a->alloc(a->ctx, sizeof(TfWordPiece));
	size_t		lines = 0;
	const char **keys;
	uint32_t   *lens;
	int32_t    *vals;
	int			nkeys = 0;
	int			dup;
	size_t		pos;

	wp->opt = *opt;
	/* readlines(): a last line without "\n" still counts */
	for (size_t i = 0; i < len; i++)
		if (vocab[i] == '\n')
			lines++;
	if (len > 0 && vocab[len - 1] != '\n')
		lines++;
	if (lines == 0 || lines > TF_WORDPIECE_MAX_TOKENS)
	{
		snprintf(err, errlen, "vocab.txt has %zu lines; it must have 1 to %d", lines, TF_WORDPIECE_MAX_TOKENS);
		return NULL;
	}
	wp->ntokens = (int) lines;
	wp->token = a->alloc(a->ctx, sizeof(char *) * lines);
	wp->token_len = a->alloc(a->ctx, sizeof(uint32_t) * lines);
	pos = 0;
	for (size_t i = 0; i < lines; i++)
	{
		const char *nl = memchr(vocab + pos, '\n', len - pos);
		size_t		l = nl ? (size_t) (nl - (vocab + pos)) : len - pos;
		char	   *s;

		SPM_CHECK_INTERRUPTS(i);
		if (l > SPM_MAX_PIECE_BYTES)
		{
			snprintf(err, errlen, "line %zu of vocab.txt is longer than %d bytes", i + 1, SPM_MAX_PIECE_BYTES);
			return NULL;
		}
		for (size_t k = 0; k < l;)
		{
			UChar32		c;
			int32_t		kk = (int32_t) k;

			U8_NEXT(vocab + pos, kk, (int32_t) l, c);
			if (c < 0)
			{
				snprintf(err, errlen, "line %zu of vocab.txt is not valid UTF-8", i + 1);
				return NULL;
			}
			k = (size_t) kk;
		}
		s = a->alloc(a->ctx, l + 1);
		memcpy(s, vocab + pos, l);
		wp->token[i] = s;
		wp->token_len[i] = (uint32_t) l;
		pos += l + 1;
	}

	/* load_vocab's dict: a repeated token keeps its last line */
	{
		VocabKey   *k = a->alloc(a->ctx, sizeof(VocabKey) * lines);

		for (size_t i = 0; i < lines; i++)
		{
			k[i].s = wp->token[i];
			k[i].len = wp->token_len[i];
			k[i].id = (int32_t) i;
		}
		qsort(k, lines, sizeof(VocabKey), vocab_key_cmp);
		keys = a->alloc(a->ctx, sizeof(char *) * lines);
		lens = a->alloc(a->ctx, sizeof(uint32_t) * lines);
		vals = a->alloc(a->ctx, sizeof(int32_t) * lines);
		for (size_t i = 0; i < lines; i++)
		{
			if (i > 0 && k[i].len == k[i - 1].len && memcmp(k[i].s, k[i - 1].s, k[i].len) == 0)
				continue;		/* an earlier line of the same token */
			keys[nkeys] = k[i].s;
			lens[nkeys] = k[i].len;
			vals[nkeys] = k[i].id;
			nkeys++;
		}
	}
	if (!spm_map_build(&wp->map, nkeys, keys, lens, vals, a, &dup))
	{
		snprintf(err, errlen, "could not build the vocabulary");
		return NULL;
	}
	wp->unk_id = tf_wordpiece_id(wp, opt->unk_token, strlen(opt->unk_token));
	if (wp->unk_id < 0)
	{
		snprintf(err, errlen, "the unknown token \"%s\" is not in vocab.txt", opt->unk_token);
		return NULL;
	}
	return wp;
}

const char *
tf_wordpiece_set_specials(TfWordPiece *wp, int n, const char *const *tokens, const SpmAlloc *a)
{
	wp->special = a->alloc(a->ctx, sizeof(char *) * (n + 1));
	wp->special_len = a->alloc(a->ctx, sizeof(uint32_t) * (n + 1));
	wp->special_id = a->alloc(a->ctx, sizeof(int) * (n + 1));
	wp->nspecial = 0;
	for (int i = 0; i < n; i++)
	{
		size_t		l = strlen(tokens[i]);
		int			id = tf_wordpiece_id(wp, tokens[i], l);

		if (l == 0 || id < 0)
			return tokens[i];
		wp->special[wp->nspecial] = wp->token[id];
		wp->special_len[wp->nspecial] = (uint32_t) l;
		wp->special_id[wp->nspecial] = id;
		wp->nspecial++;
	}
	return NULL;
}

int
tf_wordpiece_id(const TfWordPiece *wp, const char *s, size_t len)
{
	int32_t		id = spm_map_get(&wp->map, s, len);

	return id >= 0 ? id : -1;
}

/* ----------------------------------------------------------- encoding */

/* char::is_whitespace: the White_Space property */
static bool
bert_space(UChar32 c)
{
	return c == ' ' || (c >= 9 && c <= 13) || (c >= 0x80 && u_hasBinaryProperty(c, UCHAR_WHITE_SPACE));
}

/* bert.rs is_control: \t \n \r are not; Cc Cf Co Cs are (unassigned code points are kept) */
static bool
bert_control(UChar32 c)
{
	int8_t		t;

	if (c == '\t' || c == '\n' || c == '\r')
		return false;
	t = u_charType(c);
	return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_PRIVATE_USE_CHAR || t == U_SURROGATE;
}

/* bert.rs is_chinese_char: its ranges (0x2B920, where BERT's Python has 0x2B820) */
static bool
chinese_char(UChar32 c)
{
	return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
		(c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
		(c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
		(c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* bert.rs is_bert_punc: char::is_ascii_punctuation or \p{P} */
static bool
bert_punct(UChar32 c)
{
	int8_t		t;

	if ((c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
		(c >= 0x7B && c <= 0x7E))
		return true;
	t = u_charType(c);
	return t == U_CONNECTOR_PUNCTUATION || t == U_DASH_PUNCTUATION || t == U_START_PUNCTUATION ||
		t == U_END_PUNCTUATION || t == U_INITIAL_PUNCTUATION || t == U_FINAL_PUNCTUATION ||
		t == U_OTHER_PUNCTUATION;
}

/* UTF-16 text, growing */
typedef struct U16
{
	UChar	   *s;
	int32_t		len;
	int32_t		cap;
} U16;

static void
u16_put(U16 *u, UChar32 c)
{
	U16_APPEND_UNSAFE(u->s, u->len, c);
}

/*
 * The normalized text as UTF-16 in *out (from a); false if it would be
 * too long or ICU fails.
 */
static bool
normalize(const TfWordPiece *wp, const char *text, size_t len, const SpmAlloc *a, U16 *out)
{
	const TfWordPieceOptions *o = &wp->opt;
	U16			u;
	int32_t		i = 0;
	size_t		work = 0;
	UErrorCode	st = U_ZERO_ERROR;
	bool		strip = o->lowercase ? o->strip_accents != 0 : o->strip_accents == 1;

	if (len > SPM_MAX_NORMALIZED_BYTES / 3)
		return false;
	/* at most 3 UTF-16 units per input byte (a CJK character with its spaces) */
	u.cap = (int32_t) (len * 3 + 4);
	u.s = a->alloc(a->ctx, sizeof(UChar) * u.cap);
	u.len = 0;
	while ((size_t) i < len)
	{
		UChar32		c;
		int32_t		before = i;

		U8_NEXT(text, i, (int32_t) len, c);
		if (c < 0)
			c = 0xFFFD;
		SPM_CHECK_INTERRUPTS_WORK(work, i - before);
		if (o->clean_text)
		{
			if (c == 0 || c == 0xFFFD || bert_control(c))
				continue;
			if (bert_space(c))
				c = ' ';
		}
		if (o->handle_chinese_chars && chinese_char(c))
		{
			u16_put(&u, ' ');
			u16_put(&u, c);
			u16_put(&u, ' ');
		}
		else
			u16_put(&u, c);
	}

	if (strip)
	{
		const UNormalizer2 *nfd = unorm2_getNFDInstance(&st);
		int32_t		need;
		UChar	   *d;
		int32_t		k = 0;

		if (U_FAILURE(st))
			return false;
		need = unorm2_normalize(nfd, u.s, u.len, NULL, 0, &st);
		if (st != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(st))
			return false;
		if ((size_t) need > SPM_MAX_NORMALIZED_BYTES)
			return false;
		st = U_ZERO_ERROR;
		d = a->alloc(a->ctx, sizeof(UChar) * (need + 1));
		unorm2_normalize(nfd, u.s, u.len, d, need + 1, &st);
		if (U_FAILURE(st))
			return false;
		/* \p{Mn} removed */
		for (int32_t j = 0; j < need;)
		{
			UChar32		c;

			U16_NEXT(d, j, need, c);
			if (u_charType(c) != U_NON_SPACING_MARK)
				U16_APPEND_UNSAFE(d, k, c);
		}
		u.s = d;
		u.len = k;
		u.cap = need + 1;
	}
	if (o->lowercase)
	{
		/*
		 * char::to_lowercase, character by character: the full mapping
		 * (U+0130 -> i + U+0307) without context (Σ is always σ).  A
		 * character lowers to at most 3 units.
		 */
		UChar	   *low = a->alloc(a->ctx, sizeof(UChar) * ((size_t) u.len * 3 + 1));
		int32_t		k = 0;

		for (int32_t j = 0; j < u.len;)
		{
			UChar32		c;
			UChar		one[2];
			int32_t		n1 = 0;

			U16_NEXT(u.s, j, u.len, c);
			if (c < 0x80)
			{
				low[k++] = (UChar) (c >= 'A' && c <= 'Z' ? c + 32 : c);
				continue;
			}
			U16_APPEND_UNSAFE(one, n1, c);
			st = U_ZERO_ERROR;
			k += u_strToLower(low + k, 3, one, n1, "", &st);
			if (U_FAILURE(st))
				return false;
			SPM_CHECK_INTERRUPTS(j);
		}
		if ((size_t) k > SPM_MAX_NORMALIZED_BYTES)
			return false;
		u.s = low;
		u.len = k;
		u.cap = (int32_t) ((size_t) u.len * 3 + 1);
	}
	*out = u;
	return true;
}

typedef struct Out
{
	SpmEncoding *enc;
	int			cap;
	const SpmAlloc *a;
} Out;

static void
out_push(Out *o, const TfWordPiece *wp, int id)
{
	if (o->enc->ntokens == o->cap)
	{
		int			cap = o->cap ? o->cap * 2 : 64;
		SpmToken   *t = o->a->alloc(o->a->ctx, sizeof(SpmToken) * cap);

		if (o->enc->ntokens > 0)
			memcpy(t, o->enc->tokens, sizeof(SpmToken) * o->enc->ntokens);
		o->enc->tokens = t;
		o->cap = cap;
	}
	o->enc->tokens[o->enc->ntokens].id = id;
	o->enc->tokens[o->enc->ntokens].str = wp->token[id];
	o->enc->tokens[o->enc->ntokens].len = wp->token_len[id];
	o->enc->ntokens++;
}

/*
 * WordPiece.encode of one word, UTF-8 w[0..len) of nchars characters;
 * buf has room for the prefix and the word.
 */
static void
encode_word(const TfWordPiece *wp, const char *w, size_t len, int nchars, char *buf, Out *o)
{
	size_t		plen = strlen(wp->opt.prefix);
	int			first = o->enc->ntokens;
	size_t		start = 0;

	if (nchars > wp->opt.max_input_chars_per_word)
	{
		out_push(o, wp, wp->unk_id);
		return;
	}
	memcpy(buf, wp->opt.prefix, plen);
	while (start < len)
	{
		size_t		end = len;
		int			id = -1;

		while (start < end)
		{
			const char *s = w + start;
			size_t		l = end - start;

			if (start > 0)
			{
				memcpy(buf + plen, w + start, end - start);
				s = buf;
				l += plen;
			}
			id = tf_wordpiece_id(wp, s, l);
			if (id >= 0)
				break;
			/* one character back */
			do
				end--;
			while (end > start && U8_IS_TRAIL((uint8_t) w[end]));
		}
		if (id < 0)
		{
			o->enc->ntokens = first;
			out_push(o, wp, wp->unk_id);
			return;
		}
		out_push(o, wp, id);
		start = end;
	}
}

/* The text between special tokens: normalized, pre-tokenized, WordPiece'd onto o. */
static bool
encode_segment(const TfWordPiece *wp, const char *text, size_t len, const SpmAlloc *a, Out *o)
{
	U16			u;
	char	   *utf8;
	int32_t		n8 = 0;
	UErrorCode	st = U_ZERO_ERROR;
	char	   *buf;
	size_t		work = 0;
	int32_t		i;

	if (len == 0)
		return true;
	if (!normalize(wp, text, len, a, &u))
		return false;
	/* the normalized text as UTF-8: what the tokens are matched in */
	u_strToUTF8(NULL, 0, &n8, u.s, u.len, &st);
	if (st != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(st))
		return false;
	if ((size_t) n8 > SPM_MAX_NORMALIZED_BYTES)
		return false;
	st = U_ZERO_ERROR;
	utf8 = a->alloc(a->ctx, (size_t) n8 + 1);
	u_strToUTF8(utf8, n8 + 1, NULL, u.s, u.len, &st);
	if (U_FAILURE(st))
		return false;
	buf = a->alloc(a->ctx, (size_t) n8 + sizeof(wp->opt.prefix) + 1);

	/* pre-tokenize (trim: leading and trailing spaces never make a word) and encode each word */
	i = 0;
	while (i < n8)
	{
		UChar32		c;
		int32_t		s = i;

		U8_NEXT(utf8, i, n8, c);
		SPM_CHECK_INTERRUPTS_WORK(work, i - s);
		if (bert_space(c))
			continue;
		if (bert_punct(c))
		{
			encode_word(wp, utf8 + s, (size_t) (i - s), 1, buf, o);
			continue;
		}
		{
			int			nchars = 1;
			int32_t		e = i;

			while (e < n8)
			{
				int32_t		next = e;
				UChar32		d;

				U8_NEXT(utf8, next, n8, d);
				if (bert_space(d) || bert_punct(d))
					break;
				e = next;
				nchars++;
			}
			encode_word(wp, utf8 + s, (size_t) (e - s), nchars, buf, o);
			i = e;
		}
	}
	return true;
}

/* The longest special token at text[i..len), its index, or -1. */
static int
special_at(const TfWordPiece *wp, const char *text, size_t i, size_t len)
{
	int			best = -1;

	for (int k = 0; k < wp->nspecial; k++)
		if (wp->special_len[k] <= len - i && memcmp(text + i, wp->special[k], wp->special_len[k]) == 0 &&
			(best < 0 || wp->special_len[k] > wp->special_len[best]))
			best = k;
	return best;
}

bool
tf_wordpiece_encode(const TfWordPiece *wp, const char *text, size_t len,
					const SpmAlloc *a, SpmEncoding *enc)
{
	Out			o;
	size_t		from = 0;
	size_t		work = 0;
	bool		first_byte[256] = {false};

	memset(enc, 0, sizeof(*enc));
	enc->normalized = (char *) "";
	o.enc = enc;
	o.cap = 0;
	o.a = a;
	for (int k = 0; k < wp->nspecial; k++)
		first_byte[(uint8_t) wp->special[k][0]] = true;
	for (size_t i = 0; i < len; i++)
	{
		int			k;

		SPM_CHECK_INTERRUPTS_WORK(work, 1);
		if (!first_byte[(uint8_t) text[i]] || (k = special_at(wp, text, i, len)) < 0)
			continue;
		if (!encode_segment(wp, text + from, i - from, a, &o))
			return false;
		out_push(&o, wp, wp->special_id[k]);
		i += wp->special_len[k] - 1;
		from = i + 1;
	}
	return encode_segment(wp, text + from, len - from, a, &o);
}

/* ----------------------------------------------------------- decoding */

char *
tf_wordpiece_decode(const TfWordPiece *wp, int n, const int32_t *ids, const bool *skip,
					const SpmAlloc *a, size_t *out_len)
{
	static const char *const cleanup[][2] = {
		{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
		{" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}
	};
	size_t		plen = strlen(wp->opt.prefix);
	size_t		cap = 1;
	char	   *s;
	size_t		len = 0;
	bool		any = false;

	for (int i = 0; i < n; i++)
		if (ids[i] >= 0 && ids[i] < wp->ntokens)
			cap += wp->token_len[ids[i]] + 1;
	if (cap > SPM_MAX_NORMALIZED_BYTES)
		return NULL;
	s = a->alloc(a->ctx, cap);
	for (int i = 0; i < n; i++)
	{
		const char *t;
		size_t		l;

		SPM_CHECK_INTERRUPTS(i);
		if (ids[i] < 0 || ids[i] >= wp->ntokens || (skip && skip[i]))
			continue;
		t = wp->token[ids[i]];
		l = wp->token_len[ids[i]];
		if (any && l >= plen && memcmp(t, wp->opt.prefix, plen) == 0)
		{
			t += plen;
			l -= plen;
		}
		else if (any)
			s[len++] = ' ';
		memcpy(s + len, t, l);
		len += l;
		any = true;
	}
	s[len] = '\0';
	/* clean_up_tokenization: each replacement shortens, so in place */
	for (size_t r = 0; r < sizeof(cleanup) / sizeof(cleanup[0]); r++)
	{
		size_t		fl = strlen(cleanup[r][0]);
		size_t		tl = strlen(cleanup[r][1]);
		size_t		w = 0;

		for (size_t k = 0; k < len;)
		{
			if (k + fl <= len && memcmp(s + k, cleanup[r][0], fl) == 0)
			{
				memmove(s + w, cleanup[r][1], tl);
				w += tl;
				k += fl;
			}
			else
				s[w++] = s[k++];
		}
		len = w;
		s[len] = '\0';
	}
	*out_len = len;
	return s;
}
