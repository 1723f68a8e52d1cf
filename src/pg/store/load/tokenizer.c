/*
 * tokenizer.c
 *		Building a tokenizer (model file and Marian vocabulary) with a given
 *		allocator.  The per-backend cache is tokenizer_cache.c, the shared
 *		files tokenizer_share.c: both call this file, which calls neither.
 */
#include "postgres.h"

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "backend_cache.h"
#include "tokenizer.h"

/* Model ids above this are refused: real vocabularies have ~10^5. */
#define MAX_VOCAB_ID 10000000

static void *
pg_alloc(void *ctx, size_t size)
{
	if (size > MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the tokenizer would need a buffer of %zu bytes", size),
				 errdetail("The limit is %zu bytes.", (size_t) MaxAllocSize)));
	/* large buffers are zeroed a megabyte at a time: a cancel need not wait for 400 MB of memset */
	if (size > 1024 * 1024)
	{
		char	   *p = MemoryContextAllocExtended((MemoryContext) ctx, size, 0);

		for (size_t off = 0; off < size; off += 1024 * 1024)
		{
			CHECK_FOR_INTERRUPTS();
			memset(p + off, 0, Min((size_t) 1024 * 1024, size - off));
		}
		return p;
	}
	return MemoryContextAllocZero((MemoryContext) ctx, size);
}

SpmAlloc
PgAllocator(MemoryContext cxt)
{
	SpmAlloc	a = {pg_alloc, cxt};

	return a;
}

/* A vocabulary value (its text) as a model id: a non-negative integer in range. */
static int32
vocab_id_text(const char *s, const char *key, int keylen)
{
	char	   *end;
	long		id;

	errno = 0;
	id = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || id < 0 || id > MAX_VOCAB_ID)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("vocabulary entry \"%.*s\" has the invalid id %s", keylen, key, s),
				 errdetail("Ids must be integers from 0 to %d.", MAX_VOCAB_ID)));
	return (int32) id;
}

static void
not_a_number(const char *key, int keylen)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("vocabulary entry \"%.*s\" is not a number", keylen, key)));
}

static void
not_an_object(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("the vocabulary must be a JSON object mapping pieces to ids")));
}

/* A vocabulary's entries, collected before the map is built; keys in UTF-8 and NUL-terminated, from a. */
typedef struct VocabEntries
{
	const SpmAlloc *a;
	const char **keys;
	uint32	   *lens;
	int32	   *ids;
	int			count;
	int			cap;
	int			depth;			/* of the JSON parser */
	bool		have_key;
} VocabEntries;

static void
entries_add_key(VocabEntries *e, const char *key, Size len)
{
	char	   *k;

	if ((e->count & 1023) == 0)
		CHECK_FOR_INTERRUPTS();
	if (len > 1024 * 1024)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a vocabulary piece is longer than 1 MB")));
	if (e->count >= e->cap)
	{
		int			cap = e->cap < 1024 ? 1024 : e->cap * 2;

		if (cap > MAX_VOCAB_ID + 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the vocabulary has more than %d entries", MAX_VOCAB_ID + 1)));
		e->keys = e->keys ? repalloc(e->keys, sizeof(char *) * cap) : palloc(sizeof(char *) * cap);
		e->lens = e->lens ? repalloc(e->lens, sizeof(uint32) * cap) : palloc(sizeof(uint32) * cap);
		e->ids = e->ids ? repalloc(e->ids, sizeof(int32) * cap) : palloc(sizeof(int32) * cap);
		e->cap = cap;
	}
	k = e->a->alloc(e->a->ctx, len + 1);
	memcpy(k, key, len);
	k[len] = '\0';
	e->keys[e->count] = k;
	e->lens[e->count] = (uint32) len;
	e->have_key = true;
}

static void
entries_add_id(VocabEntries *e, int32 id)
{
	e->ids[e->count++] = id;
	e->have_key = false;
}

/* A jsonb vocabulary; its keys are in the database encoding, converted to UTF-8. */
static void
collect_jsonb(VocabEntries *e, Jsonb *vocab)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken r;
	bool		convert = GetDatabaseEncoding() != PG_UTF8 && GetDatabaseEncoding() != PG_SQL_ASCII;

	if (!JB_ROOT_IS_OBJECT(vocab) || JB_ROOT_IS_SCALAR(vocab))
		not_an_object();
	it = JsonbIteratorInit(&vocab->root);
	while ((r = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (r == WJB_KEY)
		{
			const char *key = v.val.string.val;
			Size		len = v.val.string.len;

			if (convert)
			{
				char	   *u = pg_server_to_any(key, (int) len, PG_UTF8);

				if (u != key)
				{
					key = u;
					len = strlen(u);
				}
			}
			entries_add_key(e, key, len);
		}
		else if (r == WJB_VALUE)
		{
			if (v.type != jbvNumeric)
				not_a_number(e->keys[e->count], (int) e->lens[e->count]);
			entries_add_id(e, vocab_id_text(DatumGetCString(DirectFunctionCall1(numeric_out,
																				 NumericGetDatum(v.val.numeric))),
											e->keys[e->count], (int) e->lens[e->count]));
		}
	}
}

/* the JSON parser's callbacks: one object of keys and numbers */
static void
json_object_start(void *state)
{
	VocabEntries *e = state;

	if (e->depth++ > 0)
		not_a_number(e->keys[e->count], (int) e->lens[e->count]);
}

static void
json_object_end(void *state)
{
	((VocabEntries *) state)->depth--;
}

static void
json_array_start(void *state)
{
	VocabEntries *e = state;

	if (e->depth == 0)
		not_an_object();
	not_a_number(e->keys[e->count], (int) e->lens[e->count]);
}

static void
json_field(void *state, char *fname, bool isnull)
{
	VocabEntries *e = state;

	entries_add_key(e, fname, strlen(fname));
}

static void
json_scalar(void *state, char *token, JsonTokenType type)
{
	VocabEntries *e = state;

	if (e->depth == 0)
		not_an_object();
	if (type != JSON_TOKEN_NUMBER)
		not_a_number(e->keys[e->count], (int) e->lens[e->count]);
	entries_add_id(e, vocab_id_text(token, e->keys[e->count], (int) e->lens[e->count]));
}

/*
 * A vocabulary as the UTF-8 bytes of a JSON file, read by PostgreSQL's JSON
 * lexer in UTF-8 whatever the database encoding (so "\u2581" is U+2581 in
 * a LATIN1 database too).
 */
static void
collect_json(VocabEntries *e, const char *json, Size len)
{
	JsonLexContext *lex;
	JsonSemAction sem;
	JsonParseErrorType rc;
	char	   *copy;

	if (len > MaxAllocSize - 1 || !pg_verify_mbstr(PG_UTF8, json, (int) len, true))
		ereport(ERROR,
				(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
				 errmsg("the vocabulary is not valid UTF-8")));
	copy = pnstrdup(json, len);
	lex = makeJsonLexContextCstringLen(copy, (int) len, PG_UTF8, true);
	memset(&sem, 0, sizeof(sem));
	sem.semstate = e;
	sem.object_start = json_object_start;
	sem.object_end = json_object_end;
	sem.array_start = json_array_start;
	sem.object_field_start = json_field;
	sem.scalar = json_scalar;
	rc = pg_parse_json(lex, &sem);
	if (rc != JSON_SUCCESS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type json"),
				 errdetail("%s", json_errdetail(rc, lex)),
				 errcontext("the vocabulary")));
}

/*
 * The special tokens that Hugging Face's tokenizer of this vocabulary
 * splits off the text (PreTrainedTokenizer.tokenize's Trie, the fast
 * tokenizers' AddedVocabulary), with their ids in the vocabulary:
 * - fairseq's ids (<s> 0, <pad> 1, </s> 2: XLM-R, NLLB, M2M100): <s>,
 *   <pad>, </s>, <unk>, and <mask> (lstrip) where the vocabulary has it.
 *   The language tokens of NLLB and M2M100 are the model's (ModelSpecials);
 * - Marian's: its eos, unk and pad tokens, </s>, <unk>, <pad>.
 * Strings point into model_piece, so that a shared image holds them.
 */
static void
special_tokens_of(Tokenizer *t, const SpmAlloc *a)
{
	static const char *const fairseq[] = {"<s>", "<pad>", "</s>", "<unk>", "<mask>"};
	static const char *const marian[] = {"</s>", "<unk>", "<pad>"};
	bool		is_fairseq = spm_map_get(&t->vocab, "<s>", 3) == 0 && spm_map_get(&t->vocab, "<pad>", 5) == 1 &&
		spm_map_get(&t->vocab, "</s>", 4) == 2;
	const char *const *names = is_fairseq ? fairseq : marian;
	int			nnames = is_fairseq ? lengthof(fairseq) : lengthof(marian);
	TfSpecialToken *tok = a->alloc(a->ctx, sizeof(TfSpecialToken) * nnames);
	int			n = 0;

	for (int i = 0; i < nnames; i++)
	{
		int32		id = spm_map_get(&t->vocab, names[i], strlen(names[i]));

		if (id < 0 || id >= t->nmodel || t->model_piece[id] == NULL)
			continue;
		tok[n].str = t->model_piece[id];
		tok[n].len = t->model_piece_len[id];
		tok[n].id = id;
		tok[n].lstrip = strcmp(names[i], "<mask>") == 0;
		tok[n].rstrip = false;
		n++;
	}
	t->specials = a->alloc(a->ctx, sizeof(TfSpecialSet));
	tf_special_set_init(t->specials, n, tok);
}

static void
build_vocab(Tokenizer *t, const SpmAlloc *a, const TokVocab *vocab)
{
	SpmModel   *m = t->model;
	VocabEntries e;
	const char **keys;
	uint32	   *lens;
	int32	   *ids;
	int			count;
	int			dup;
	const SpmPiece *unk = &m->pieces[m->unk_id];

	MemoryContext scratch = AllocSetContextCreate(CurrentMemoryContext, "vocabulary", ALLOCSET_DEFAULT_SIZES);
	MemoryContext caller = MemoryContextSwitchTo(scratch);

	/* collected in scratch memory (the keys themselves from a), which goes once they are copied */
	memset(&e, 0, sizeof(e));
	e.a = a;
	if (vocab->jsonb != NULL)
		collect_jsonb(&e, vocab->jsonb);
	else
		collect_json(&e, vocab->json, vocab->json_len);
	count = e.count;
	MemoryContextSwitchTo(caller);

	/* the kept arrays, from a */
	keys = a->alloc(a->ctx, sizeof(char *) * (count + 1));
	lens = a->alloc(a->ctx, sizeof(uint32) * (count + 1));
	ids = a->alloc(a->ctx, sizeof(int32) * (count + 1));
	if (count > 0)
	{
		memcpy(keys, e.keys, sizeof(char *) * count);
		memcpy(lens, e.lens, sizeof(uint32) * count);
		memcpy(ids, e.ids, sizeof(int32) * count);
	}
	MemoryContextDelete(scratch);
	t->nmodel = 0;
	for (int i = 0; i < count; i++)
		if (ids[i] >= t->nmodel)
			t->nmodel = ids[i] + 1;

	if (!spm_map_build(&t->vocab, count, keys, lens, ids, a, &dup))
		elog(ERROR, "vocabulary repeats the piece \"%s\"", keys[dup]);

	/* the inverse: model id -> piece */
	t->model_piece = a->alloc(a->ctx, sizeof(char *) * (t->nmodel + 1));
	t->model_piece_len = a->alloc(a->ctx, sizeof(uint32) * (t->nmodel + 1));
	for (int i = 0; i < count; i++)
	{
		if (t->model_piece[ids[i]] != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("vocabulary maps both \"%s\" and \"%s\" to id %d",
							t->model_piece[ids[i]], keys[i], ids[i])));
		t->model_piece[ids[i]] = keys[i];
		t->model_piece_len[ids[i]] = lens[i];
	}

	t->vocab_unk = spm_map_get(&t->vocab, unk->str, unk->len);
	if (t->vocab_unk < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the vocabulary has no entry for the unknown piece \"%s\"", unk->str)));

	/* as Marian's tokenizer: pieces outside the vocabulary are unknown */
	t->spm_to_model = a->alloc(a->ctx, sizeof(int32) * m->npieces);
	for (int i = 0; i < m->npieces; i++)
	{
		int32		id = spm_map_get(&t->vocab, m->pieces[i].str, m->pieces[i].len);

		if ((i & 4095) == 0)
			CHECK_FOR_INTERRUPTS();
		t->spm_to_model[i] = id >= 0 ? id : t->vocab_unk;
	}
	t->has_vocab = true;
	special_tokens_of(t, a);
}

bool
VocabAsJsonb(void)
{
	return GetDatabaseEncoding() == PG_UTF8;
}

TokVocab
VocabFromFile(const char *what, const char *json, Size len)
{
	TokVocab	v;

	memset(&v, 0, sizeof(v));
	if (!pg_verify_mbstr(PG_UTF8, json, (int) len, true))
		ereport(ERROR,
				(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
				 errmsg("%s is not valid UTF-8", what)));
	if (VocabAsJsonb())
	{
		char	   *s = pnstrdup(json, len);

		v.jsonb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(s)));
	}
	else
	{
		v.json = json;
		v.json_len = len;
	}
	return v;
}

void
BuildTokenizer(Tokenizer *t, const char *model, Size model_len, const TokVocab *vocab)
{
	SpmAlloc	a = PgAllocator(t->cxt);

	BuildTokenizerWith(t, &a, model, model_len, vocab);
}

/* a JSON boolean, or dflt if absent or null */
static bool
option_bool(Jsonb *j, const char *key, bool dflt, bool *isnull)
{
	JsonbValue *v = getKeyJsonValueFromContainer(&j->root, key, strlen(key), NULL);

	if (isnull)
		*isnull = v == NULL || v->type == jbvNull;
	if (v == NULL || v->type == jbvNull)
		return dflt;
	if (v->type != jbvBool)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("WordPiece option \"%s\" must be true, false or null", key)));
	return v->val.boolean;
}

static void
option_string(Jsonb *j, const char *key, char *out, size_t cap)
{
	JsonbValue *v = getKeyJsonValueFromContainer(&j->root, key, strlen(key), NULL);

	if (v == NULL || v->type == jbvNull)
		return;
	if (v->type != jbvString || v->val.string.len == 0 || (size_t) v->val.string.len >= cap)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("WordPiece option \"%s\" must be a string of 1 to %zu bytes", key, cap - 1)));
	memcpy(out, v->val.string.val, v->val.string.len);
	out[v->val.string.len] = '\0';
}

/*
 * A WordPiece tokenizer as stored (WORDPIECE_MAGIC, a line of JSON options
 * in tokenizer.json's names, then vocab.txt as published).
 */
static void
build_wordpiece(Tokenizer *t, const SpmAlloc *a, const char *model, Size model_len)
{
	const char *p = model + strlen(WORDPIECE_MAGIC);
	const char *nl = memchr(p, '\n', model_len - (p - model));
	TfWordPieceOptions o;
	Jsonb	   *j;
	char		err[256];
	bool		strip_null;

	if (nl == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid WordPiece tokenizer"),
				 errdetail("Its options line is not terminated.")));
	{
		char	   *line = pnstrdup(p, nl - p);
		JsonLexContext *lex = makeJsonLexContextCstringLen(line, (int) (nl - p), GetDatabaseEncoding(), true);
		JsonParseErrorType rc = pg_parse_json(lex, &nullSemAction);

		if (rc != JSON_SUCCESS)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid WordPiece tokenizer"),
					 errdetail("Its options line is not JSON: %s", json_errdetail(rc, lex))));
		j = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(line)));
	}
	if (!JB_ROOT_IS_OBJECT(j) || JB_ROOT_IS_SCALAR(j))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid WordPiece tokenizer"),
				 errdetail("Its options are not a JSON object.")));
	memset(&o, 0, sizeof(o));
	o.clean_text = option_bool(j, "clean_text", true, NULL);
	o.handle_chinese_chars = option_bool(j, "handle_chinese_chars", true, NULL);
	o.lowercase = option_bool(j, "lowercase", true, NULL);
	o.strip_accents = option_bool(j, "strip_accents", false, &strip_null) ? 1 : 0;
	if (strip_null)
		o.strip_accents = -1;
	strcpy(o.unk_token, "[UNK]");
	strcpy(o.prefix, "##");
	option_string(j, "unk_token", o.unk_token, sizeof(o.unk_token));
	option_string(j, "continuing_subword_prefix", o.prefix, sizeof(o.prefix));
	o.max_input_chars_per_word = 100;
	{
		JsonbValue *v = getKeyJsonValueFromContainer(&j->root, "max_input_chars_per_word", 24, NULL);

		if (v != NULL && v->type == jbvNumeric)
			o.max_input_chars_per_word =
				DatumGetInt32(DirectFunctionCall1(numeric_int4, NumericGetDatum(v->val.numeric)));
		if (o.max_input_chars_per_word < 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("WordPiece option \"max_input_chars_per_word\" must be positive")));
	}
	t->wp = tf_wordpiece_load(nl + 1, model_len - (nl + 1 - model), &o, a, err, sizeof(err));
	if (t->wp == NULL)
	{
		err[0] = (char) pg_toupper((unsigned char) err[0]);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid WordPiece vocabulary"),
				 errdetail("%s.", err)));
	}
	{
		JsonbValue *v = getKeyJsonValueFromContainer(&j->root, "added_tokens", 12, NULL);
		const char **tokens;
		int			n = 0;
		const char *bad;

		if (v != NULL && (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data) ||
						  JsonContainerSize(v->val.binary.data) > TF_WORDPIECE_MAX_SPECIAL))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("WordPiece option \"added_tokens\" must be a list of at most %d strings",
							TF_WORDPIECE_MAX_SPECIAL)));
		n = v ? JsonContainerSize(v->val.binary.data) : 0;
		tokens = palloc(sizeof(char *) * (n + 1));
		for (int i = 0; i < n; i++)
		{
			JsonbValue *e = getIthJsonbValueFromContainer(v->val.binary.data, i);

			if (e == NULL || e->type != jbvString || e->val.string.len == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("WordPiece option \"added_tokens\" must be a list of non-empty strings")));
			tokens[i] = pnstrdup(e->val.string.val, e->val.string.len);
		}
		bad = tf_wordpiece_set_specials(t->wp, n, tokens, a);
		if (bad != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid WordPiece vocabulary"),
					 errdetail("The added token \"%s\" is not in vocab.txt.", bad)));
	}
	t->model = NULL;
	t->has_vocab = false;
	t->nmodel = t->wp->ntokens;
}

bool
IsWordPiece(const char *model, Size model_len)
{
	return model_len >= strlen(WORDPIECE_MAGIC) && memcmp(model, WORDPIECE_MAGIC, strlen(WORDPIECE_MAGIC)) == 0;
}

void
BuildTokenizerWith(Tokenizer *t, const SpmAlloc *a, const char *model, Size model_len, const TokVocab *vocab)
{
	char		err[256];

	t->wp = NULL;
	t->specials = NULL;
	if (IsWordPiece(model, model_len))
	{
		build_wordpiece(t, a, model, model_len);
		return;
	}
	t->model = spm_load(model, model_len, a, err, sizeof(err));
	if (t->model == NULL)
	{
		/* the core's messages are lower-case phrases; a detail is a sentence */
		err[0] = (char) pg_toupper((unsigned char) err[0]);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid SentencePiece model"),
				 errdetail("%s.", err)));
	}
	t->has_vocab = false;
	if (vocab != NULL && (vocab->jsonb != NULL || vocab->json != NULL))
		build_vocab(t, a, vocab);
}

int32
TokenModelId(const Tokenizer *t, const SpmToken *tok)
{
	int32		id;

	if (tok->id <= -2)
		return -2 - tok->id;	/* a special token (sql_tokenizer.c) */
	if (!t->has_vocab || t->wp != NULL)
		return tok->id;
	if (tok->id != t->model->unk_id)
		return t->spm_to_model[tok->id];
	/* an unknown's piece is its text, which the vocabulary may still know */
	id = spm_map_get(&t->vocab, tok->str, tok->len);
	return id >= 0 ? id : t->vocab_unk;
}

/* The piece of a model id, as the tokenizer spells it. */
const char *
PieceOf(Tokenizer *tok, int id, Size *len)
{
	if (tok->has_vocab && id >= 0 && id < tok->nmodel && tok->model_piece[id] != NULL)
	{
		*len = tok->model_piece_len[id];
		return tok->model_piece[id];
	}
	if (tok->wp != NULL && id >= 0 && id < tok->wp->ntokens)
	{
		*len = tok->wp->token_len[id];
		return tok->wp->token[id];
	}
	if (!tok->has_vocab && tok->model != NULL && id >= 0 && id < tok->model->npieces)
	{
		*len = tok->model->pieces[id].len;
		return tok->model->pieces[id].str;
	}
	*len = 0;
	return "";
}
