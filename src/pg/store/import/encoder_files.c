/*
 * encoder_files.c
 *		An encoder-only directory (BERT, XLM-R; embed()): BertTokenizer's
 *		vocab.txt with its normalizer's settings, or XLMRobertaTokenizer's
 *		SentencePiece model with fairseq's ids, and sentence-transformers'
 *		modules.json, pooling and longest input as the embedding settings.
 *		And import_tokenizer()'s directory, which holds one of the two
 *		tokenizers on its own.
 */
#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"

#include "model_import.h"
#include "tokenizer.h"
#include "wordpiece.h"

/*
 * XLMRobertaTokenizer's ids: fairseq's <s> 0, <pad> 1, </s> 2, <unk> 3,
 * each SentencePiece piece at its id + 1, and <mask> after them all.
 */
static char *
XlmrVocab(const char *spm, Size spm_len, Size *len)
{
	int			npieces;
	Size		l;
	char	   *v = NllbVocab(spm, spm_len, &npieces, &l);

	v[l - 1] = '\0';			/* the closing brace */
	v = psprintf("%s, \"<mask>\": %d}", v, npieces + 1);
	*len = strlen(v);
	return v;
}

/* A token named by tokenizer_config.json (a string or an AddedToken), or dflt. */
static char *
ConfigToken(Jsonb *tc, const char *key, const char *dflt)
{
	JsonbValue *v = JsonKey(tc, key);
	char	   *s = v ? JsonTokenContent(v) : NULL;

	return s ? s : (char *) dflt;
}

/* tokenizer_config.json's boolean, else tokenizer.json's normalizer's, else dflt; -1 for null */
static int
BertSetting(Jsonb *tc, const char *tc_key, Jsonb *norm, const char *norm_key, int dflt)
{
	JsonbValue *v = JsonKey(tc, tc_key);

	if (v == NULL)
		v = JsonKey(norm, norm_key);
	if (v == NULL)
		return dflt;
	if (v->type == jbvNull)
		return -1;
	if (v->type != jbvBool)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tokenizer setting \"%s\" must be true, false or null", tc_key)));
	return v->val.boolean;
}

static void
CheckAsciiToken(const char *what, const char *s)
{
	if (strlen(s) == 0 || strlen(s) > 60)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tokenizer's %s must have 1 to 60 bytes", what)));
	for (const char *c = s; *c; c++)
		if ((unsigned char) *c < 0x20 || (unsigned char) *c >= 0x7f || *c == '"' || *c == '\\')
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("tokenizer's %s \"%s\" is not supported", what, s),
					 errdetail("WordPiece special tokens and prefixes of printable ASCII are supported.")));
}

/*
 * BertTokenizer's files: vocab.txt, with the normalizer's settings from
 * tokenizer_config.json (do_lower_case, strip_accents,
 * tokenize_chinese_chars; BertTokenizerFast lets them override
 * tokenizer.json's), else from tokenizer.json's BertNormalizer, else
 * BertTokenizer's defaults.  Stored as WORDPIECE_MAGIC, the options, vocab.txt.
 */
static void
ReadBertTokenizer(const char *dir, Jsonb *tc, ModelImport *mi, int *cls_id, int *sep_id)
{
	Size		vlen;
	char	   *vocab = NeededFile(dir, "vocab.txt", "BertTokenizer's vocabulary (WordPiece)", &vlen);
	Size		tjlen;
	char	   *tj = OptionalFile(dir, "tokenizer.json", &tjlen);
	Jsonb	   *norm = NULL;
	Jsonb	   *wpm = NULL;
	JsonbValue *tj_added = NULL;
	int			lower,
				strip,
				chinese;
	char	   *unk = ConfigToken(tc, "unk_token", "[UNK]");
	char	   *cls = ConfigToken(tc, "cls_token", "[CLS]");
	char	   *sep = ConfigToken(tc, "sep_token", "[SEP]");
	char	   *prefix = "##";
	int			max_chars = 100;
	StringInfoData b;
	Tokenizer	t;

	if (tj != NULL)
	{
		Jsonb	   *j = ParseJsonText("tokenizer.json", tj, tjlen);
		JsonbValue *n = JsonKey(j, "normalizer");
		JsonbValue *m = JsonKey(j, "model");

		if (n != NULL && n->type == jbvBinary && JsonContainerIsObject(n->val.binary.data))
			norm = JsonbValueToJsonb(n);
		if (m != NULL && m->type == jbvBinary && JsonContainerIsObject(m->val.binary.data))
			wpm = JsonbValueToJsonb(m);
		tj_added = JsonKey(j, "added_tokens");
		if (wpm != NULL)
		{
			char	   *p = JsonStringKey(wpm, "continuing_subword_prefix");

			if (p != NULL)
				prefix = p;
			max_chars = JsonInt(JsonKey(wpm, "max_input_chars_per_word"), 100);
		}
	}
	lower = BertSetting(tc, "do_lower_case", norm, "lowercase", 1);
	strip = BertSetting(tc, "strip_accents", norm, "strip_accents", -1);
	chinese = BertSetting(tc, "tokenize_chinese_chars", norm, "handle_chinese_chars", 1);
	CheckAsciiToken("unk_token", unk);
	CheckAsciiToken("continuing_subword_prefix", prefix);
	if (strlen(prefix) > 15)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tokenizer's continuing_subword_prefix must have 1 to 15 bytes")));
	if (max_chars < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tokenizer's max_input_chars_per_word must be positive")));

	initStringInfo(&b);
	appendStringInfoString(&b, WORDPIECE_MAGIC);
	appendStringInfo(&b, "{\"clean_text\": true, \"handle_chinese_chars\": %s, \"lowercase\": %s, "
					 "\"strip_accents\": %s, \"unk_token\": \"%s\", \"continuing_subword_prefix\": \"%s\", "
					 "\"max_input_chars_per_word\": %d, \"added_tokens\": [",
					 chinese != 0 ? "true" : "false", lower != 0 ? "true" : "false",
					 strip < 0 ? "null" : strip ? "true" : "false", unk, prefix, max_chars);
	/* the tokens split off first: tokenizer.json's added_tokens, else the special tokens */
	{
		int			nadded = 0;
		JsonbValue *added = tj_added;

		if (added != NULL && added->type == jbvBinary && JsonContainerIsArray(added->val.binary.data))
		{
			int			n = JsonContainerSize(added->val.binary.data);

			for (int i = 0; i < n; i++)
			{
				JsonbValue *e = getIthJsonbValueFromContainer(added->val.binary.data, i);
				char	   *content = e ? JsonTokenContent(e) : NULL;

				if (content == NULL)
					continue;
				CheckAsciiToken("added token", content);
				appendStringInfo(&b, "%s\"%s\"", nadded++ ? ", " : "", content);
			}
		}
		else
		{
			const char *specials[] = {ConfigToken(tc, "pad_token", "[PAD]"), unk, cls, sep,
			ConfigToken(tc, "mask_token", "[MASK]")};

			for (int i = 0; i < lengthof(specials); i++)
			{
				CheckAsciiToken("special token", specials[i]);
				appendStringInfo(&b, "%s\"%s\"", nadded++ ? ", " : "", specials[i]);
			}
		}
	}
	appendStringInfoString(&b, "]}\n");
	appendBinaryStringInfo(&b, vocab, vlen);
	mi->src_spm = mi->tgt_spm = b.data;
	mi->src_len = mi->tgt_len = b.len;
	mi->vocab = "{}";
	mi->vocab_len = 2;

	memset(&t, 0, sizeof(t));
	t.cxt = AllocSetContextCreate(CurrentMemoryContext, "tokenizer check", ALLOCSET_DEFAULT_SIZES);
	BuildTokenizer(&t, b.data, b.len, NULL);
	*cls_id = tf_wordpiece_id(t.wp, cls, strlen(cls));
	*sep_id = tf_wordpiece_id(t.wp, sep, strlen(sep));
	if (*cls_id < 0 || *sep_id < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("vocab.txt lacks the token \"%s\"", *cls_id < 0 ? cls : sep),
				 errdetail("BertTokenizer puts it around every input.")));
	MemoryContextDelete(t.cxt);
}

/* A file named by modules.json: a path inside the directory. */
static char *
ModulePath(const char *dir, const char *path, const char *file)
{
	if (path[0] == '/' || strstr(path, "..") != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("modules.json names the path \"%s\", outside the model directory", path)));
	return path[0] ? psprintf("%s/%s", path, file) : pstrdup(file);
}

/*
 * sentence-transformers' pipeline: modules.json lists the modules (the
 * Transformer, then Pooling, optionally Normalize); 1_Pooling/config.json
 * says how; sentence_bert_config.json the longest input.  A directory
 * without modules.json is a plain Hugging Face model, which
 * sentence-transformers reads with mean pooling.
 */
static Jsonb *
ReadEmbeddingSettings(const char *dir, Jsonb *tc, const TfConfig *c, int cls_id, int sep_id)
{
	Size		len;
	char	   *s = OptionalFile(dir, "modules.json", &len);
	const char *pooling = "mean";
	bool		normalize = false;
	int			max_len = c->max_pos;

	if (s != NULL)
	{
		Jsonb	   *mods = ParseJsonText("modules.json", s, len);
		JsonbIterator *it;
		JsonbValue	v;
		JsonbIteratorToken tok;
		bool		have_pooling = false;

		if (!JB_ROOT_IS_ARRAY(mods) || JB_ROOT_IS_SCALAR(mods))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("modules.json must be a JSON array")));
		it = JsonbIteratorInit(&mods->root);
		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			Jsonb	   *m;
			char	   *type;
			JsonbValue *pv;
			char	   *path;

			if (tok != WJB_ELEM)
				continue;
			if (v.type != jbvBinary || !JsonContainerIsObject(v.val.binary.data))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("modules.json must list objects")));
			m = JsonbValueToJsonb(&v);
			pv = JsonKey(m, "type");
			type = pv && pv->type == jbvString ? pnstrdup(pv->val.string.val, pv->val.string.len) : "";
			pv = JsonKey(m, "path");
			path = pv && pv->type == jbvString ? pnstrdup(pv->val.string.val, pv->val.string.len) : "";
			if (strcmp(type, "sentence_transformers.models.Transformer") == 0)
				continue;
			if (strcmp(type, "sentence_transformers.models.Normalize") == 0)
			{
				normalize = true;
				continue;
			}
			if (strcmp(type, "sentence_transformers.models.Pooling") == 0 && !have_pooling)
			{
				Size		plen;
				char	   *pf = ModulePath(dir, path, "config.json");
				char	   *ps = NeededFile(dir, pf, "the configuration of the Pooling module modules.json lists", &plen);
				Jsonb	   *pc = ParseJsonText(pf, ps, plen);
				static const char *const modes[][2] = {
					{"pooling_mode_cls_token", "cls"}, {"pooling_mode_mean_tokens", "mean"},
					{"pooling_mode_max_tokens", "max"}, {"pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"},
					{"pooling_mode_weightedmean_tokens", NULL}, {"pooling_mode_lasttoken", NULL}
				};
				int			nmodes = 0;

				for (int i = 0; i < lengthof(modes); i++)
					if (JsonTrue(pc, modes[i][0]))
					{
						if (modes[i][1] == NULL)
							ereport(ERROR,
									(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
									 errmsg("pooling mode \"%s\" is not supported", modes[i][0]),
									 errhint("Supported are cls_token, mean_tokens, max_tokens and mean_sqrt_len_tokens.")));
						pooling = modes[i][1];
						nmodes++;
					}
				if (nmodes != 1)
					ereport(ERROR,
							(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							 errmsg("%s sets %d pooling modes", pf, nmodes),
							 errdetail("embed() supports exactly one (sentence-transformers concatenates several).")));
				have_pooling = true;
				continue;
			}
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("sentence-transformers module \"%s\" is not supported", type),
					 errdetail("embed() runs Transformer, Pooling and Normalize modules.")));
		}
	}
	s = OptionalFile(dir, "sentence_bert_config.json", &len);
	if (s != NULL)
	{
		Jsonb	   *sb = ParseJsonText("sentence_bert_config.json", s, len);

		max_len = JsonInt(JsonKey(sb, "max_seq_length"), max_len);
	}
	else
		max_len = JsonInt(JsonKey(tc, "model_max_length"), max_len) > 0 ?
			Min(JsonInt(JsonKey(tc, "model_max_length"), max_len), max_len) : max_len;
	max_len = Max(2, Min(max_len, c->max_pos));
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(
		psprintf("{\"pooling\": \"%s\", \"normalize\": %s, \"max_seq_length\": %d, \"cls_id\": %d, \"sep_id\": %d}",
				 pooling, normalize ? "true" : "false", max_len, cls_id, sep_id))));
}

/*
 * import_tokenizer(name, dir): a Hugging Face tokenizer directory on its
 * own, BertTokenizer's (vocab.txt) or XLMRobertaTokenizer's
 * (sentencepiece.bpe.model, fairseq's ids).  *vocab is NULL for WordPiece.
 */
void
ReadTokenizerDirectory(const char *dir, char **model, Size *len, char **vocab, Size *vlen)
{
	Size		tclen;
	char	   *tcs = OptionalFile(dir, "tokenizer_config.json", &tclen);
	Jsonb	   *tc = tcs ? ParseJsonText("tokenizer_config.json", tcs, tclen) : NULL;
	ModelImport mi;

	memset(&mi, 0, sizeof(mi));
	if (HasFile(dir, "vocab.txt"))
	{
		int			cls_id,
					sep_id;

		ReadBertTokenizer(dir, tc, &mi, &cls_id, &sep_id);
		*vocab = NULL;
		*vlen = 0;
	}
	else if (HasFile(dir, "sentencepiece.bpe.model"))
	{
		mi.src_spm = NeededFile(dir, "sentencepiece.bpe.model", "XLMRobertaTokenizer's SentencePiece model", &mi.src_len);
		*vocab = XlmrVocab(mi.src_spm, mi.src_len, vlen);
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FILE),
				 errmsg("directory \"%s\" has no tokenizer", dir),
				 errdetail("import_tokenizer() reads BertTokenizer's vocab.txt or XLMRobertaTokenizer's sentencepiece.bpe.model from a directory.")));
	*model = (char *) mi.src_spm;
	*len = mi.src_len;
}

/* An encoder-only directory's tokenizer and sentence-transformers settings. */
void
ReadEncoderFiles(const char *dir, ModelFamily family, Jsonb *config, Jsonb *tc, ModelImport *mi)
{
	TfConfig	c;
	int			cls_id,
				sep_id;

	ParseModelConfig(config, &c);
	if (family == FAMILY_XLMR)
	{
		Size		len;
		char	   *spm = NeededFile(dir, "sentencepiece.bpe.model", "XLMRobertaTokenizer's SentencePiece model", &len);

		mi->src_spm = mi->tgt_spm = spm;
		mi->src_len = mi->tgt_len = len;
		mi->vocab = XlmrVocab(spm, len, &mi->vocab_len);
		cls_id = 0;				/* <s> */
		sep_id = 2;				/* </s> */
	}
	else
		ReadBertTokenizer(dir, tc, mi, &cls_id, &sep_id);
	mi->embedding = ReadEmbeddingSettings(dir, tc, &c, cls_id, sep_id);
}
