/*
 * tokenizer_text.c
 *		Text to ids and back with a stored tokenizer: the server's text as
 *		UTF-8 (and back), special tokens written in the text split off as
 *		Hugging Face's tokenizers split them, then SentencePiece or
 *		WordPiece; ids decoded to text.  For the SQL functions and the
 *		pipelines alike (translate.c, sql_embed.c, sql_tokenizer.c).
 */
#include "postgres.h"

#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "input_limit.h"
#include "tokenizer.h"

/* The offset of the first byte of s that does not start a valid UTF-8 character, or -1. */
static int
invalid_utf8_at(const char *s, int n)
{
	int			valid = pg_encoding_verifymbstr(PG_UTF8, s, n);

	return valid < n ? valid : -1;
}

/*
 * Text of a SQL_ASCII database, whose bytes PostgreSQL never checks, as
 * UTF-8: as it is when valid; else an ERROR that says where (the function
 * runs row by row, so the input's beginning names the row), or with
 * transformer.invalid_utf8 = replace each invalid byte as U+FFFD.
 */
static char *
sql_ascii_to_utf8(char *s, int n, Size *len)
{
	int			bad = invalid_utf8_at(s, n);
	StringInfoData out;
	int			i = 0;

	*len = (Size) n;
	if (bad < 0)
		return s;
	if (transformer_invalid_utf8 == INVALID_UTF8_ERROR)
	{
		StringInfoData excerpt;

		initStringInfo(&excerpt);
		for (int k = 0; k < n && k < 48; k++)
		{
			unsigned char c = (unsigned char) s[k];

			if (c >= 0x20 && c < 0x7f && c != '\\')
				appendStringInfoChar(&excerpt, (char) c);
			else
				appendStringInfo(&excerpt, "\\x%02x", c);
		}
		ereport(ERROR,
				(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
				 errmsg("invalid byte sequence for encoding \"UTF8\": 0x%02x", (unsigned char) s[bad]),
				 errdetail("At byte %d of an input of %d bytes, which begins \"%s\"%s.", bad + 1, n, excerpt.data,
						   n > 48 ? "..." : ""),
				 errhint("A SQL_ASCII database stores bytes unchecked, and transformer reads text as UTF-8. "
						 "Fix the row, or SET transformer.invalid_utf8 = replace to read invalid bytes as U+FFFD.")));
	}
	initStringInfo(&out);
	while (i < n)
	{
		bad = invalid_utf8_at(s + i, n - i);
		if (bad < 0)
		{
			appendBinaryStringInfo(&out, s + i, n - i);
			break;
		}
		appendBinaryStringInfo(&out, s + i, bad);
		appendStringInfoString(&out, "\xEF\xBF\xBD");
		i += bad + 1;
		CHECK_FOR_INTERRUPTS();
	}
	*len = out.len;
	return out.data;
}

/* Text in the database encoding as UTF-8, which the tokenizer reads. */
char *
ToUtf8(text *t, Size *len)
{
	char	   *s = VARDATA_ANY(t);
	int			n = VARSIZE_ANY_EXHDR(t);
	char	   *u;

	if (GetDatabaseEncoding() == PG_SQL_ASCII)
		return sql_ascii_to_utf8(s, n, len);
	u = pg_server_to_any(s, n, PG_UTF8);
	*len = (u == s) ? (Size) n : strlen(u);
	return u;
}

/*
 * A SentencePiece piece (UTF-8) as text.  Its space marker U+2581 shows as
 * the space it stands for in a database whose encoding lacks it (LATIN1,
 * say: a piece never holds a real space); any other character the
 * encoding lacks is an ERROR 22P05, as for all output.
 */
text *
PieceToText(const char *s, Size len)
{
	static int	marker_fits = -1;

	if (marker_fits < 0)
	{
		int			enc = GetDatabaseEncoding();

		marker_fits = 1;
		if (enc != PG_UTF8 && enc != PG_SQL_ASCII)
		{
			MemoryContext cxt = CurrentMemoryContext;

			PG_TRY();
			{
				(void) pg_any_to_server("\xE2\x96\x81", 3, PG_UTF8);
			}
			PG_CATCH();
			{
				MemoryContextSwitchTo(cxt);
				FlushErrorState();
				marker_fits = 0;
			}
			PG_END_TRY();
		}
	}
	if (!marker_fits && memchr(s, '\xE2', len) != NULL)
	{
		StringInfoData out;

		initStringInfo(&out);
		for (Size i = 0; i < len; i++)
		{
			if (i + 2 < len && memcmp(s + i, "\xE2\x96\x81", 3) == 0)
			{
				appendStringInfoChar(&out, ' ');
				i += 2;
			}
			else
				appendStringInfoChar(&out, s[i]);
		}
		return FromUtf8(out.data, out.len);
	}
	return FromUtf8(s, len);
}

/* UTF-8 bytes as text in the database encoding. */
text *
FromUtf8(const char *s, Size len)
{
	char	   *conv = pg_any_to_server(s, (int) len, PG_UTF8);

	return cstring_to_text_with_len(conv, conv == s ? (int) len : (int) strlen(conv));
}

/*
 * Encoding with special tokens in the text (PreTrainedTokenizer.tokenize,
 * ported from transformers 4.57's tokenization_utils.py through
 * tools/nllb_tokenizer.py; the fast tokenizers' AddedVocabulary splits the
 * same way): the text is cut around every special token, the earliest and
 * longest first; a token's lstrip (rstrip) eats the whitespace before
 * (after) it; each segment between is encoded on its own.  SentencePiece
 * drops whitespace at a segment's end, as the slow tokenizers do; the fast
 * ones' Metaspace keeps a lone "▁" there where no normalizer strips it
 * (XLM-R's tokenizer.json; NLLB's strips it): 29_encoder_tokenizers.sql
 * follows the slow XLMRobertaTokenizer, and so does this.
 */
typedef struct TokenList
{
	SpmEncoding *enc;
	int			cap;
	const SpmAlloc *a;
} TokenList;

static void
add_token(TokenList *l, int id, const char *str, uint32 len)
{
	if (l->enc->ntokens == l->cap)
	{
		int			cap = Max(16, l->cap * 2);
		SpmToken   *t;

		if ((Size) cap > MaxAllocSize / sizeof(SpmToken))
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("input is too long to tokenize")));
		t = l->a->alloc(l->a->ctx, sizeof(SpmToken) * cap);
		if (l->enc->ntokens > 0)
			memcpy(t, l->enc->tokens, sizeof(SpmToken) * l->enc->ntokens);
		l->enc->tokens = t;
		l->cap = cap;
	}
	l->enc->tokens[l->enc->ntokens].id = id;
	l->enc->tokens[l->enc->ntokens].str = str;
	l->enc->tokens[l->enc->ntokens].len = len;
	l->enc->ntokens++;
}

/* a segment between special tokens, as the tokenizer encodes it */
static bool
encode_segment(Tokenizer *tok, const char *s, Size len, TokenList *l)
{
	SpmEncoding part;

	if (len == 0)
		return true;
	if (!spm_encode(tok->model, s, len, l->a, &part))
		return false;
	for (int i = 0; i < part.ntokens; i++)
		add_token(l, part.tokens[i].id, part.tokens[i].str, part.tokens[i].len);
	return true;
}

/* A special token in an encoding: its model id, which TokenModelId() gives back. */
#define SPECIAL_TOKEN_ID(model_id) (-2 - (model_id))

static bool
encode_with_specials(Tokenizer *tok, const TfSpecialSet *set, const char *s, Size len, const SpmAlloc *a,
					 SpmEncoding *enc)
{
	TokenList	l = {enc, 0, a};
	Size		from = 0;
	size_t		at;
	int			k = tf_special_next(set, s, len, 0, &at);

	/* none in the text: SentencePiece's own encoding, not a copy of it */
	if (k < 0)
		return spm_encode(tok->model, s, len, a, enc);
	memset(enc, 0, sizeof(*enc));
	enc->normalized = "";
	for (; k >= 0; k = tf_special_next(set, s, len, from, &at))
	{
		const TfSpecialToken *t = &set->tok[k];
		Size		seg_len = at - from;

		if (t->lstrip)
			seg_len -= tf_trailing_space(s + from, seg_len);
		if (!encode_segment(tok, s + from, seg_len, &l))
			return false;
		add_token(&l, SPECIAL_TOKEN_ID(t->id), t->str, t->len);
		from = at + t->len;
		if (t->rstrip)
			from += tf_leading_space(s + from, len - from);
	}
	return encode_segment(tok, s + from, len - from, &l);
}

void
EncodeTextWith(Tokenizer *tok, const TfSpecialSet *specials, text *input, SpmEncoding *enc)
{
	SpmAlloc	a = PgAllocator(CurrentMemoryContext);
	Size		len;
	char	   *s = ToUtf8(input, &len);

	if (tok->wp != NULL ? !tf_wordpiece_encode(tok->wp, s, len, &a, enc) :
		specials == NULL || specials->n == 0 ? !spm_encode(tok->model, s, len, &a, enc) :
		!encode_with_specials(tok, specials, s, len, &a, enc))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("input is too long to tokenize"),
				 errdetail("The normalized text would exceed %zu bytes.",
						   SPM_MAX_NORMALIZED_BYTES)));
}

void
EncodeText(Tokenizer *tok, text *input, SpmEncoding *enc)
{
	EncodeTextWith(tok, tok->specials, input, enc);
}

char *
DecodeIds(Tokenizer *tok, const char *name, int n, const int32 *ids, Size *len)
{
	SpmModel   *m = tok->model;
	SpmAlloc	a = PgAllocator(CurrentMemoryContext);
	const char **strs;
	uint32	   *lens;
	char	   *text;

	if (tok->wp != NULL)
	{
		for (int i = 0; i < n; i++)
			if (ids[i] < 0 || ids[i] >= tok->wp->ntokens)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("id %d is not in the vocabulary of tokenizer \"%s\"", ids[i], name),
						 errdetail("Valid ids are 0 to %d.", tok->wp->ntokens - 1)));
		text = tf_wordpiece_decode(tok->wp, n, ids, NULL, &a, len);
		if (text == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("decoded text would be too long"),
					 errdetail("The limit is %zu bytes.", SPM_MAX_NORMALIZED_BYTES)));
		return text;
	}

	/* checked before the arrays below are allocated (8 and 4 bytes an id) */
	if ((Size) n > SPM_MAX_NORMALIZED_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many ids to decode"),
				 errdetail("There are %d; the limit is %zu.", n, SPM_MAX_NORMALIZED_BYTES)));
	strs = palloc(sizeof(char *) * (n + 1));
	lens = palloc(sizeof(uint32) * (n + 1));
	for (int i = 0; i < n; i++)
	{
		int32		id = ids[i];
		bool		valid = tok->has_vocab ?
			(id >= 0 && id < tok->nmodel && tok->model_piece[id] != NULL) :
			(id >= 0 && id < m->npieces);

		if ((i & 65535) == 0)
			CHECK_FOR_INTERRUPTS();
		if (!valid)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("id %d is not in the vocabulary of tokenizer \"%s\"", id, name),
					 errdetail("Valid ids are 0 to %d.",
							   (tok->has_vocab ? tok->nmodel : m->npieces) - 1)));
		if (tok->has_vocab)
		{
			strs[i] = tok->model_piece[id];
			lens[i] = tok->model_piece_len[id];
		}
		else
		{
			strs[i] = m->pieces[id].str;
			lens[i] = m->pieces[id].len;
		}
	}

	text = spm_decode_pieces(m, n, strs, lens, &a, len);
	if (text == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("decoded text would be too long"),
				 errdetail("The limit is %zu bytes.", SPM_MAX_NORMALIZED_BYTES)));
	return text;
}
