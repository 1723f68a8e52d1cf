/*
 * language_tokens.c
 *		The language tokens of a multilingual model, which its languages
 *		column holds (model_languages.c reads it): Marian's >>fra<< pieces
 *		of the vocabulary, and the tokenizers of NLLB-200 and M2M100, read
 *		from their directory with their tokens as transformers finds them
 *		(added_tokens_decoder, tokenizer.json, additional_special_tokens),
 *		NLLB's with fairseq's ids of a SentencePiece model (NllbVocab, which
 *		XLM-R's encoders share).
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "model_import.h"
#include "tokenizer.h"

typedef struct LangList
{
	int			n;
	char	  **code;
	char	  **token;
	int		   *id;
} LangList;

static void
lang_add(LangList *l, const char *code, const char *token, int id)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->code[i], code) == 0)
			return;
	if (l->n % 64 == 0)
	{
		l->code = l->n ? repalloc(l->code, sizeof(char *) * (l->n + 64)) : palloc(sizeof(char *) * 64);
		l->token = l->n ? repalloc(l->token, sizeof(char *) * (l->n + 64)) : palloc(sizeof(char *) * 64);
		l->id = l->n ? repalloc(l->id, sizeof(int) * (l->n + 64)) : palloc(sizeof(int) * 64);
	}
	l->code[l->n] = pstrdup(code);
	l->token[l->n] = pstrdup(token);
	l->id[l->n] = id;
	l->n++;
}

/* {"source": ..., "target": ..., "codes": [{"code", "token", "id"}, ...]} */
static Jsonb *
LanguagesJsonb(const LangList *l, const char *source, const char *target)
{
	StringInfoData s;

	if (l->n == 0)
		return NULL;
	initStringInfo(&s);
	appendStringInfo(&s, "{\"source\": \"%s\", \"target\": \"%s\", \"codes\": [", source, target);
	for (int i = 0; i < l->n; i++)
	{
		appendStringInfoString(&s, i ? ", {\"code\": " : "{\"code\": ");
		escape_json(&s, l->code[i]);
		appendStringInfoString(&s, ", \"token\": ");
		escape_json(&s, l->token[i]);
		appendStringInfo(&s, ", \"id\": %d}", l->id[i]);
	}
	appendStringInfoString(&s, "]}");
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(s.data)));
}

/* MarianTokenizer's language codes: >>fra<< pieces of the vocabulary */
Jsonb *
MarianLanguages(const Tokenizer *t)
{
	LangList	l;

	memset(&l, 0, sizeof(l));
	for (int id = 0; id < t->nmodel; id++)
	{
		const char *p = t->model_piece[id];
		uint32		len = t->model_piece_len[id];

		if (p != NULL && len > 4 && len <= 36 && strncmp(p, ">>", 2) == 0 &&
			strncmp(p + len - 2, "<<", 2) == 0)
		{
			char	   *token = pnstrdup(p, len);
			char	   *code = pnstrdup(p + 2, len - 4);

			lang_add(&l, code, token, id);
		}
	}
	return LanguagesJsonb(&l, "none", "prefix");
}

static bool
is_nllb_code(const char *s)
{
	/* NLLB's codes: ISO 639-3 language, ISO 15924 script, as deu_Latn */
	size_t		len = strlen(s);

	if (len != 8 || s[3] != '_')
		return false;
	for (int i = 0; i < 3; i++)
		if (s[i] < 'a' || s[i] > 'z')
			return false;
	return s[4] >= 'A' && s[4] <= 'Z' && s[5] >= 'a' && s[5] <= 'z' &&
		s[6] >= 'a' && s[6] <= 'z' && s[7] >= 'a' && s[7] <= 'z';
}

/* M2M100's language tokens: __de__; the code is de */
static char *
m2m100_code(const char *s)
{
	size_t		len = strlen(s);

	if (len < 5 || len > 36 || strncmp(s, "__", 2) != 0 || strcmp(s + len - 2, "__") != 0)
		return NULL;
	return pnstrdup(s + 2, len - 4);
}

/*
 * The language tokens of an NLLB or M2M100 tokenizer, with their ids, as
 * transformers finds them: tokenizer_config.json's added_tokens_decoder
 * (id -> token), else tokenizer.json's added_tokens, else the
 * additional_special_tokens in order, numbered from first_id
 * (NllbTokenizer: after the SentencePiece pieces and the fairseq offset;
 * M2M100Tokenizer: after vocab.json).
 */
static void
find_language_tokens(const char *dir, Jsonb *tc, bool nllb, int first_id, LangList *l)
{
	JsonbValue *v = JsonKey(tc, "added_tokens_decoder");
	Size		len;
	char	   *s;

	if (v != NULL && v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data))
	{
		JsonbIterator *it = JsonbIteratorInit(v->val.binary.data);
		JsonbValue	k;
		JsonbIteratorToken tok;

		while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
		{
			char	   *idstr;
			char	   *content;
			char	   *code;
			char	   *end;
			long		id;

			if (tok != WJB_KEY)
				continue;
			idstr = pnstrdup(k.val.string.val, k.val.string.len);
			tok = JsonbIteratorNext(&it, &k, true);
			content = JsonTokenContent(&k);
			id = strtol(idstr, &end, 10);
			if (content == NULL || *end != '\0' || id < 0 || id > INT_MAX)
				continue;
			code = nllb ? (is_nllb_code(content) ? content : NULL) : m2m100_code(content);
			if (code)
				lang_add(l, code, content, (int) id);
		}
		if (l->n > 0)
			return;
	}
	s = OptionalFile(dir, "tokenizer.json", &len);
	if (s != NULL)
	{
		Jsonb	   *tj = ParseJsonText("tokenizer.json", s, len);
		JsonbValue *added = JsonKey(tj, "added_tokens");

		if (added != NULL && added->type == jbvBinary && JsonContainerIsArray(added->val.binary.data))
		{
			int			n = JsonContainerSize(added->val.binary.data);

			for (int i = 0; i < n; i++)
			{
				JsonbValue *e = getIthJsonbValueFromContainer(added->val.binary.data, i);
				char	   *content;
				char	   *code;
				int			id;

				if (e == NULL || e->type != jbvBinary || !JsonContainerIsObject(e->val.binary.data))
					continue;
				content = JsonTokenContent(e);
				id = JsonInt(getKeyJsonValueFromContainer(e->val.binary.data, "id", 2, NULL), -1);
				if (content == NULL || id < 0)
					continue;
				code = nllb ? (is_nllb_code(content) ? content : NULL) : m2m100_code(content);
				if (code)
					lang_add(l, code, content, id);
			}
		}
		pfree(s);
		if (l->n > 0)
			return;
	}
	/* additional_special_tokens, from tokenizer_config.json, else special_tokens_map.json */
	v = JsonKey(tc, "additional_special_tokens");
	if (v == NULL)
	{
		s = OptionalFile(dir, "special_tokens_map.json", &len);
		if (s != NULL)
			v = JsonKey(ParseJsonText("special_tokens_map.json", s, len), "additional_special_tokens");
	}
	if (v != NULL && v->type == jbvBinary && JsonContainerIsArray(v->val.binary.data))
	{
		int			n = JsonContainerSize(v->val.binary.data);
		int			next = first_id;

		for (int i = 0; i < n; i++)
		{
			char	   *content = JsonTokenContent(getIthJsonbValueFromContainer(v->val.binary.data, i));
			char	   *code;

			if (content == NULL)
				continue;
			code = nllb ? (is_nllb_code(content) ? content : NULL) : m2m100_code(content);
			if (code)
				lang_add(l, code, content, next++);
		}
	}
}

/*
 * NllbTokenizer's ids of the SentencePiece pieces, as vocab.json text:
 * fairseq's <s> 0, <pad> 1, </s> 2, <unk> 3, then each piece at its
 * SentencePiece id + 1 (the fairseq offset).
 */
char *
NllbVocab(const char *spm, Size spm_len, int *npieces, Size *len)
{
	SpmAlloc	a = PgAllocator(CurrentMemoryContext);
	char		err[256];
	SpmModel   *m = spm_load(spm, spm_len, &a, err, sizeof(err));
	StringInfoData s;

	if (m == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid SentencePiece model \"sentencepiece.bpe.model\""),
				 errdetail_internal("%s", err)));
	initStringInfo(&s);
	appendStringInfoString(&s, "{\"<s>\": 0, \"<pad>\": 1, \"</s>\": 2, \"<unk>\": 3");
	for (int i = 3; i < m->npieces; i++)
	{
		const SpmPiece *p = &m->pieces[i];

		if ((p->len == 3 && memcmp(p->str, "<s>", 3) == 0) ||
			(p->len == 4 && memcmp(p->str, "</s>", 4) == 0) ||
			(p->len == 5 && (memcmp(p->str, "<unk>", 5) == 0 || memcmp(p->str, "<pad>", 5) == 0)))
			continue;
		appendStringInfoString(&s, ", ");
		escape_json(&s, pnstrdup(p->str, p->len));
		appendStringInfo(&s, ": %d", i + 1);
	}
	appendStringInfoChar(&s, '}');
	*npieces = m->npieces;
	*len = s.len;
	return s.data;
}

/* A string key of tokenizer_config.json of at most 32 bytes, or dflt. */
static char *
LangKey(Jsonb *tc, const char *key, const char *dflt)
{
	char	   *s = tc ? JsonStringKey(tc, key) : NULL;

	return s ? s : (char *) dflt;
}

/*
 * An M2M100-family directory's tokenizer: NLLB-200's (sentencepiece.bpe.model
 * with the fairseq ids) or M2M100's (vocab.json and sentencepiece.bpe.model),
 * and where the source language token goes: NllbTokenizer puts it before
 * the text ([deu_Latn] ... </s>), or after it with legacy_behaviour
 * (... </s> deu_Latn); M2M100Tokenizer before ([__de__] ... </s>).  The
 * target language is forced as the first generated token.
 */
void
ReadM2M100Tokenizer(const char *dir, Jsonb *tc, ModelImport *mi)
{
	char	   *cls = tc ? JsonStringKey(tc, "tokenizer_class") : NULL;
	bool		nllb = cls ? strncmp(cls, "Nllb", 4) == 0 : !HasFile(dir, "vocab.json");
	LangList	l;
	Size		len;
	char	   *spm = NeededFile(dir, "sentencepiece.bpe.model", "the SentencePiece model of the tokenizer", &len);
	const char *source;

	memset(&l, 0, sizeof(l));
	mi->src_spm = mi->tgt_spm = spm;
	mi->src_len = mi->tgt_len = len;
	if (nllb)
	{
		int			npieces;

		mi->vocab = NllbVocab(spm, len, &npieces, &mi->vocab_len);
		find_language_tokens(dir, tc, true, npieces + 1, &l);
		source = JsonTrue(tc, "legacy_behaviour") ? "suffix" : "prefix";
		mi->source_lang = LangKey(tc, "src_lang", "eng_Latn");
	}
	else
	{
		TokVocab	v;
		Tokenizer	t;

		mi->vocab = NeededFile(dir, "vocab.json", "M2M100Tokenizer's vocabulary", &mi->vocab_len);
		v = VocabFromFile("vocab.json", mi->vocab, mi->vocab_len);
		memset(&t, 0, sizeof(t));
		t.cxt = AllocSetContextCreate(CurrentMemoryContext, "tokenizer check", ALLOCSET_DEFAULT_SIZES);
		BuildTokenizer(&t, spm, len, &v);
		find_language_tokens(dir, tc, false, t.nmodel, &l);
		MemoryContextDelete(t.cxt);
		source = "prefix";
		mi->source_lang = LangKey(tc, "src_lang", "en");
	}
	mi->target_lang = LangKey(tc, "tgt_lang", NULL);
	if (l.n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model directory \"%s\" names no language tokens", dir),
				 errdetail("%s models need them: tokenizer_config.json's added_tokens_decoder or additional_special_tokens, or tokenizer.json's added_tokens.",
						   nllb ? "NLLB" : "M2M100")));
	mi->languages = LanguagesJsonb(&l, source, "forced_bos");
}
