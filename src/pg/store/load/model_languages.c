/*
 * model_languages.c
 *		The language tokens of multilingual models, as transformers'
 *		tokenizers and generate() use them:
 *		- Marian multi-target models (opus-mt-en-ROMANCE, tc-big): the target
 *		  language's token, >>fra<<, starts the source;
 *		- NLLB-200 (NllbTokenizer): the source language's token, deu_Latn,
 *		  starts the source (or follows its </s> with legacy_behaviour), and
 *		  the target language's is forced as the first generated token
 *		  (forced_bos_token_id);
 *		- M2M100 (M2M100Tokenizer): as NLLB, with tokens __de__ for code de.
 *		A model's languages column holds them (see language_tokens.c); this file
 *		checks it, loads it and resolves a call's source_lang and
 *		target_lang (sql_document.c lists them: model_languages()).
 */
#include "postgres.h"

#include <limits.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "ext_tables.h"
#include "model_store.h"
#include "translate.h"

#define MAX_LANG_CODE 32

static void
bad_languages(const char *model, const char *detail) pg_attribute_noreturn();

static void
bad_languages(const char *model, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("model \"%s\" has damaged language tokens", model),
			 errdetail("%s", detail),
			 errhint("Import the model again.")));
}

static char *
string_key(JsonbContainer *c, const char *key, const char *model)
{
	JsonbValue *v = getKeyJsonValueFromContainer(c, key, strlen(key), NULL);

	if (v == NULL || v->type != jbvString || v->val.string.len == 0 ||
		v->val.string.len > MAX_LANG_CODE + 4)
		bad_languages(model, psprintf("\"%s\" is not a string of 1 to %d bytes.", key, MAX_LANG_CODE + 4));
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/*
 * Parse languages into cm (its lists allocated in cxt), or only check it
 * when cm is NULL: every id inside the vocabularies it indexes.
 */
static void
parse_languages(Jsonb *languages, const TfConfig *cfg, const char *model, CachedModel *cm,
				MemoryContext cxt)
{
	JsonbValue *codes;
	char	   *source;
	char	   *target;
	int			n;
	int			limit;

	if (!JB_ROOT_IS_OBJECT(languages) || JB_ROOT_IS_SCALAR(languages))
		bad_languages(model, "It is not a JSON object.");
	source = string_key(&languages->root, "source", model);
	target = string_key(&languages->root, "target", model);
	if (strcmp(source, "none") != 0 && strcmp(source, "prefix") != 0 && strcmp(source, "suffix") != 0)
		bad_languages(model, "\"source\" is none, prefix or suffix.");
	if (strcmp(target, "prefix") != 0 && strcmp(target, "forced_bos") != 0)
		bad_languages(model, "\"target\" is prefix or forced_bos.");
	codes = getKeyJsonValueFromContainer(&languages->root, "codes", 5, NULL);
	if (codes == NULL || codes->type != jbvBinary || !JsonContainerIsArray(codes->val.binary.data))
		bad_languages(model, "\"codes\" is not an array.");
	n = JsonContainerSize(codes->val.binary.data);
	if (n > 100000)
		bad_languages(model, "It has too many codes.");
	/* a token the source starts with indexes the encoder's embeddings; a forced one, the output */
	limit = strcmp(target, "forced_bos") == 0 ? Min(cfg->vocab, cfg->src_vocab) : cfg->src_vocab;
	if (cm != NULL)
	{
		cm->nlangs = n;
		cm->lang_source = source[0] == 'p' ? LANG_PREFIX : source[0] == 's' ? LANG_SUFFIX : LANG_NONE;
		cm->lang_forced_bos = target[0] == 'f';
		cm->lang_code = MemoryContextAllocZero(cxt, sizeof(char *) * (n + 1));
		cm->lang_token = MemoryContextAllocZero(cxt, sizeof(char *) * (n + 1));
		cm->lang_id = MemoryContextAllocZero(cxt, sizeof(int) * (n + 1));
	}
	for (int i = 0; i < n; i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(codes->val.binary.data, i);
		JsonbValue *id;
		char	   *code;
		char	   *token;
		char	   *str;
		char	   *end;
		long		val;

		if (e == NULL || e->type != jbvBinary || !JsonContainerIsObject(e->val.binary.data))
			bad_languages(model, "A code is not an object.");
		code = string_key(e->val.binary.data, "code", model);
		token = string_key(e->val.binary.data, "token", model);
		id = getKeyJsonValueFromContainer(e->val.binary.data, "id", 2, NULL);
		if (id == NULL || id->type != jbvNumeric)
			bad_languages(model, psprintf("The id of \"%s\" is not a number.", code));
		str = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(id->val.numeric)));
		val = strtol(str, &end, 10);
		if (*end != '\0' || val < 0 || val >= limit)
			bad_languages(model, psprintf("The id %s of \"%s\" is outside the vocabulary of %d.", str, code, limit));
		if (cm != NULL)
		{
			cm->lang_code[i] = MemoryContextStrdup(cxt, code);
			cm->lang_token[i] = MemoryContextStrdup(cxt, token);
			cm->lang_id[i] = (int) val;
		}
	}
}

void
CheckLanguages(Jsonb *languages, const TfConfig *cfg, const char *model)
{
	parse_languages(languages, cfg, model, NULL, NULL);
}

void
LoadLanguages(CachedModel *cm, Jsonb *languages, const char *model)
{
	cm->nlangs = 0;
	cm->lang_source = LANG_NONE;
	cm->lang_forced_bos = false;
	if (languages != NULL)
		parse_languages(languages, &cm->model.cfg, model, cm, cm->cxt);
}

static int
find_code(const CachedModel *cm, const char *code)
{
	for (int i = 0; i < cm->nlangs; i++)
		if (strcmp(cm->lang_code[i], code) == 0 || strcmp(cm->lang_token[i], code) == 0)
			return i;
	return -1;
}

static void
unknown_language(const CachedModel *cm, const char *model, const char *option, const char *code)
	pg_attribute_noreturn();

static void
unknown_language(const CachedModel *cm, const char *model, const char *option, const char *code)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int i = 0; i < cm->nlangs && i < 12; i++)
		appendStringInfo(&s, i ? ", %s" : "%s", cm->lang_code[i]);
	if (cm->nlangs > 12)
		appendStringInfo(&s, ", ... (%d in all)", cm->nlangs);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("model \"%s\" has no language \"%s\"", model, code),
			 errdetail("%s must be one of its language codes: %s.", option, s.data),
			 errhint("SELECT * FROM model_languages('%s') lists them.", model)));
}

/* A text option's value as a C string, or NULL when it is not given. */
static char *
text_option(const CallOptions *o, int which)
{
	return o->given[which] ? TextDatumGetCString(o->value[which]) : NULL;
}

/*
 * The language tokens of a call: *prefix starts the source, *suffix follows
 * its </s>, *forced_bos is the first generated token; -1 where none.  The
 * call's source_lang and target_lang, else the model's defaults.
 */
void
ResolveLanguages(const CachedModel *cm, const char *model, const CallOptions *o,
				 const char *text_target, int *prefix, int *suffix, int *forced_bos)
{
	char	   *src = o ? text_option(o, OPT_SOURCE_LANG) : NULL;
	char	   *tgt = o ? text_option(o, OPT_TARGET_LANG) : NULL;
	int			i;

	/* MarianTokenizer's way: the text starts with the code, >>fra<< */
	if (text_target != NULL)
	{
		if (tgt != NULL && find_code(cm, tgt) != find_code(cm, text_target))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("input starts with the language token %s, but target_lang is \"%s\"", text_target, tgt),
					 errhint("Name the target language once: in the text, or with target_lang.")));
		tgt = pstrdup(text_target);
	}

	*prefix = *suffix = *forced_bos = -1;
	if (cm->nlangs == 0)
	{
		if (src != NULL || tgt != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("model \"%s\" has no language tokens", model),
					 errdetail("It translates from %s into %s; source_lang and target_lang choose among the languages of multilingual models.",
							   cm->source_lang[0] ? cm->source_lang : "one language",
							   cm->target_lang[0] ? cm->target_lang : "one other"),
					 errhint("Leave out source_lang and target_lang.")));
		return;
	}
	/* the source's token, for NLLB and M2M100 */
	if (cm->lang_source != LANG_NONE)
	{
		if (src == NULL && cm->source_lang[0] != '\0')
			src = pstrdup(cm->source_lang);
		if (src == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("model \"%s\" needs the source language", model),
					 errhint("Name it, e.g. translate(body, '%s', source_lang => '%s', target_lang => '...').",
							 model, cm->lang_code[0])));
		i = find_code(cm, src);
		if (i < 0)
			unknown_language(cm, model, "source_lang", src);
		if (cm->lang_source == LANG_PREFIX)
			*prefix = cm->lang_id[i];
		else
			*suffix = cm->lang_id[i];
	}
	else if (src != NULL && cm->source_lang[0] != '\0' && strcmp(src, cm->source_lang) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model \"%s\" translates from %s, not %s", model, cm->source_lang, src)));

	/* the target's */
	if (tgt == NULL && cm->target_lang[0] != '\0' && find_code(cm, cm->target_lang) >= 0)
		tgt = pstrdup(cm->target_lang);
	if (tgt == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model \"%s\" needs the target language", model),
				 errdetail("It translates into %d languages.", cm->nlangs),
				 errhint("Name one with named notation, e.g. translate(body, '%s', target_lang => '%s').",
						 model, cm->lang_code[0])));
	i = find_code(cm, tgt);
	if (i < 0)
		unknown_language(cm, model, "target_lang", tgt);
	if (cm->lang_forced_bos)
		*forced_bos = cm->lang_id[i];
	else
		*prefix = cm->lang_id[i];
}

/*
 * The length of a Marian language token that starts s (len bytes), as
 * MarianTokenizer's >>.+?<< finds it, if it is one of the model's; else 0.
 */
int
TextLanguagePrefix(const CachedModel *cm, const char *s, int len)
{
	if (cm->nlangs == 0 || cm->lang_forced_bos || len < 5 || s[0] != '>' || s[1] != '>')
		return 0;
	for (int i = 3; i + 1 < len && i < 40; i++)
		if (s[i] == '<' && s[i + 1] == '<')
		{
			char	   *token = pnstrdup(s, i + 2);

			return find_code(cm, token) >= 0 ? i + 2 : 0;
		}
	return 0;
}

/* An id generate() gives that decoding drops (skip_special_tokens): a language token. */
bool
IsLanguageToken(const CachedModel *cm, int id)
{
	for (int i = 0; i < cm->nlangs; i++)
		if (cm->lang_id[i] == id)
			return true;
	return false;
}
