/*
 * model_import.c
 *		import_model(): a model directory as Hugging Face publishes it, on
 *		the database server (or one bundled with the extension), read by
 *		its family: config.json, the weights (checkpoint_files.c), the
 *		tokenizers (Marian's here; NLLB's and M2M100's in language_tokens.c;
 *		the encoders' in encoder_files.c), generation_config.json and
 *		tokenizer_config.json if present; then stored (model_rows.c).
 */
#include "postgres.h"

#include <sys/stat.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "model_import.h"
#include "server_files.h"

/* A Marian directory's tokenizers: source.spm, target.spm, vocab.json, and target_vocab.json if separate. */
static void
ReadMarianTokenizers(const char *dir, Jsonb *tc, ModelImport *mi)
{
	mi->src_spm = NeededFile(dir, "source.spm", "the SentencePiece model of the source language", &mi->src_len);
	mi->tgt_spm = NeededFile(dir, "target.spm", "the SentencePiece model of the target language", &mi->tgt_len);
	mi->vocab = NeededFile(dir, "vocab.json", "MarianTokenizer's vocabulary", &mi->vocab_len);
	if (JsonTrue(tc, "separate_vocabs"))
		mi->tgt_vocab = NeededFile(dir, "target_vocab.json",
								   "the target vocabulary of a tokenizer with separate_vocabs", &mi->tgt_vocab_len);
	mi->source_lang = tc ? JsonStringKey(tc, "source_lang") : NULL;
	mi->target_lang = tc ? JsonStringKey(tc, "target_lang") : NULL;
	/* the reliable segment length measure_segment_length() found, as the bundled model records it */
	{
		JsonbValue *v = JsonKey(tc, "segment_tokens");

		if (v != NULL && v->type == jbvNumeric)
		{
			int32		t = DatumGetInt32(DirectFunctionCall1(numeric_int4, NumericGetDatum(v->val.numeric)));

			if (t < 4 || t > 100000)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("segment_tokens in tokenizer_config.json must be between 4 and 100000, not %d", t)));
			mi->segment_tokens = t;
		}
	}
}

/*
 * Import a model directory as Hugging Face publishes it: config.json,
 * the weights (checkpoint_files.c), the tokenizer of its family,
 * generation_config.json and tokenizer_config.json if present.
 */
static int64
ImportDirectory(const char *name, const char *dir)
{
	ModelImport mi;
	CheckpointFiles files;
	Jsonb	   *config;
	Jsonb	   *tc = NULL;
	Size		len;
	char	   *s;
	ModelFamily family;

	memset(&mi, 0, sizeof(mi));
	{
		struct stat st;

		if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FILE),
					 errmsg("model directory \"%s\" does not exist", dir),
					 errhint("import_model() reads a directory on the database server, as the server's operating system user sees it.")));
	}
	mi.config = NeededFile(dir, "config.json", "the model's configuration", &mi.config_len);
	config = ParseJsonText("config.json", mi.config, mi.config_len);
	family = ConfigFamily(config);
	s = OptionalFile(dir, "tokenizer_config.json", &len);
	if (s != NULL)
		tc = ParseJsonText("tokenizer_config.json", s, len);

	mi.ntensors = LocateCheckpoint(dir, family, &files, &mi.tensors,
								   (char **) &mi.header, &mi.hlen);
	mi.files = &files;
	if (family == FAMILY_BERT || family == FAMILY_XLMR)
		ReadEncoderFiles(dir, family, config, tc, &mi);
	else if (family == FAMILY_M2M100)
		ReadM2M100Tokenizer(dir, tc, &mi);
	else
		ReadMarianTokenizers(dir, tc, &mi);
	/* optional, as in Hugging Face's from_pretrained() */
	mi.gen = OptionalFile(dir, "generation_config.json", &mi.gen_len);
	return StoreModel(name, &mi);
}

PG_FUNCTION_INFO_V1(import_model);
Datum
import_model(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));

	CheckModelName(name);
	CheckServerFileAccess("load_model()");
	PG_RETURN_INT64(ImportDirectory(name, text_to_cstring(PG_GETARG_TEXT_PP(1))));
}

/*
 * import_model(name): a model bundled with the extension, installed by
 * make install under <sharedir>/extension/transformer_models/<name>.  The
 * path is fixed, so no server file privilege is needed.
 */
PG_FUNCTION_INFO_V1(import_bundled_model);
Datum
import_bundled_model(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char		share[MAXPGPATH];
	char	   *dir;
	struct stat st;

	CheckModelName(name);
	for (const char *c = name; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("no bundled model \"%s\"", name),
					 errdetail("Bundled models have names of lower-case letters, digits and underscores.")));
	get_share_path(my_exec_path, share);
	dir = psprintf("%s/extension/transformer_models/%s", share, name);
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("no bundled model \"%s\"", name),
				 errdetail("There is no directory \"%s\".", dir),
				 errhint("The extension bundles multi30k_de_en and multi30k_de_en_v2 (translation) and multi30k_sentence_de_en (sentence embeddings); import other models with import_model(name, dir).")));

	PG_RETURN_INT64(ImportDirectory(name, dir));
}
