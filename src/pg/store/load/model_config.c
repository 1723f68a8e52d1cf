/*
 * model_config.c
 *		A model's configuration: config.json into a TfConfig, and
 *		generation_config.json (with config.json's defaults) into a
 *		ModelGeneration, both checked.
 */
#include "postgres.h"

#include <limits.h>
#include <math.h>

#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "model_store.h"

/* Limits far beyond real checkpoints, so that sizes are checked early. */
#define MAX_DIM 65536
#define MAX_LAYERS 256
#define MAX_VOCAB 10000000
#define MAX_POSITIONS 65536

/* ------------------------------------------------------------- config */

static JsonbValue *
config_get(Jsonb *config, const char *key)
{
	return getKeyJsonValueFromContainer(&config->root, key, strlen(key), NULL);
}

static int
config_int(Jsonb *config, const char *key, bool required, int dflt, int min, int max)
{
	JsonbValue *v = config_get(config, key);
	char	   *s;
	char	   *end;
	long		n;

	if (v == NULL || v->type == jbvNull)
	{
		if (required)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("model configuration lacks \"%s\"", key)));
		return dflt;
	}
	if (v->type != jbvNumeric)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model configuration \"%s\" must be a number", key)));
	s = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
	n = strtol(s, &end, 10);
	if (*end != '\0' || n < min || n > max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model configuration \"%s\" is %s", key, s),
				 errdetail("It must be an integer from %d to %d.", min, max)));
	return (int) n;
}

static bool
config_bool(Jsonb *config, const char *key, bool dflt)
{
	JsonbValue *v = config_get(config, key);

	if (v == NULL || v->type == jbvNull)
		return dflt;
	if (v->type != jbvBool)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model configuration \"%s\" must be true or false", key)));
	return v->val.boolean;
}

static char *
config_string(Jsonb *config, const char *key, const char *dflt)
{
	JsonbValue *v = config_get(config, key);

	if (v == NULL || v->type == jbvNull)
		return (char *) dflt;
	if (v->type != jbvString)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model configuration \"%s\" must be a string", key)));
	return pnstrdup(v->val.string.val, v->val.string.len);
}

static double
config_double(Jsonb *config, const char *key, double dflt)
{
	JsonbValue *v = config_get(config, key);

	if (v == NULL || v->type == jbvNull)
		return dflt;
	if (v->type != jbvNumeric)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model configuration \"%s\" must be a number", key)));
	return DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(v->val.numeric)));
}

/*
 * The families import_model() reads, by config.json's model_type: Marian
 * (MarianConfig; also what our own checkpoints write, with or without
 * model_type) and M2M100 (M2M100Config, which NLLB-200 uses too).
 */
ModelFamily
ConfigFamily(Jsonb *config)
{
	char	   *type = config_string(config, "model_type", "marian");

	if (strcmp(type, "marian") == 0)
		return FAMILY_MARIAN;
	if (strcmp(type, "m2m_100") == 0)
		return FAMILY_M2M100;
	if (strcmp(type, "bert") == 0)
		return FAMILY_BERT;
	if (strcmp(type, "xlm-roberta") == 0)
		return FAMILY_XLMR;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("model type \"%s\" is not supported", type),
			 errdetail("import_model() reads the translation models of types marian (OPUS-MT) and m2m_100 (M2M100, NLLB-200), and the encoders of types bert and xlm-roberta."),
			 errhint("Convert the checkpoint to one of these layouts, or check config.json's \"model_type\".")));
	pg_unreachable();
}

/*
 * BertConfig / XLMRobertaConfig: BertModel's post-LayerNorm encoder with
 * learned absolute positions, token types and a LayerNorm on the
 * embeddings; no decoder.  XLM-R's positions start at padding_idx + 1
 * (create_position_ids_from_input_ids), so pad_token_id + 1 rows of the
 * table are never used.
 */
static void
ParseEncoderConfig(Jsonb *config, ModelFamily family, TfConfig *c)
{
	char	   *act;
	char	   *pos;
	int			table;

	c->encoder_only = true;
	c->d_model = config_int(config, "hidden_size", true, 0, 2, MAX_DIM);
	c->vocab = config_int(config, "vocab_size", true, 0, 2, MAX_VOCAB);
	c->src_vocab = c->vocab;
	c->enc_layers = config_int(config, "num_hidden_layers", true, 0, 0, MAX_LAYERS);
	c->dec_layers = 0;
	c->enc_heads = config_int(config, "num_attention_heads", true, 0, 1, MAX_DIM);
	c->dec_heads = c->enc_heads;
	c->enc_ffn = config_int(config, "intermediate_size", true, 0, 1, 16 * MAX_DIM);
	c->dec_ffn = c->enc_ffn;
	c->token_types = config_int(config, "type_vocab_size", false, 2, 1, MAX_VOCAB);
	c->pad_id = config_int(config, "pad_token_id", false, family == FAMILY_XLMR ? 1 : 0, 0, c->vocab - 1);
	c->eos_id = config_int(config, "eos_token_id", false, family == FAMILY_XLMR ? 2 : 0, 0, c->vocab - 1);
	c->decoder_start_id = c->pad_id;
	c->unk_id = -1;
	c->pos_offset = family == FAMILY_XLMR ? c->pad_id + 1 : 0;
	table = config_int(config, "max_position_embeddings", true, 0, 1, MAX_POSITIONS);
	if (table <= c->pos_offset)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model configuration \"max_position_embeddings\" is %d", table),
				 errdetail("XLM-R's positions start at pad_token_id + 1 = %d.", c->pos_offset)));
	c->max_pos = table - c->pos_offset;
	c->ln_eps = (float) config_double(config, "layer_norm_eps", 1e-12);
	if (!(c->ln_eps > 0 && c->ln_eps < 1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model configuration \"layer_norm_eps\" must be between 0 and 1")));
	c->embed_norm = true;
	c->pre_norm = false;
	c->final_norm = false;
	c->scale_embedding = false;
	c->positions = TF_POS_LEARNED;
	if (c->d_model % c->enc_heads != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model configuration: attention heads must divide hidden_size"),
				 errdetail("hidden_size is %d, with %d attention heads.", c->d_model, c->enc_heads)));
	pos = config_string(config, "position_embedding_type", "absolute");
	if (strcmp(pos, "absolute") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("position embedding type \"%s\" is not supported", pos),
				 errhint("Encoders with absolute (learned) positions are supported.")));
	/* ACT2FN's names: "gelu" is the exact (erf) GELU */
	act = config_string(config, "hidden_act", "gelu");
	if (strcmp(act, "gelu") == 0)
		c->activation = TF_ACT_GELU;
	else if (strcmp(act, "relu") == 0)
		c->activation = TF_ACT_RELU;
	else if (strcmp(act, "silu") == 0 || strcmp(act, "swish") == 0)
		c->activation = TF_ACT_SWISH;
	else
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("activation function \"%s\" is not supported", act),
				 errhint("Supported are gelu, relu and silu (swish).")));
}

void
ParseModelConfig(Jsonb *config, TfConfig *c)
{
	char	   *act;
	char	   *pos;
	ModelFamily family;

	if (!JB_ROOT_IS_OBJECT(config) || JB_ROOT_IS_SCALAR(config))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model configuration must be a JSON object")));

	family = ConfigFamily(config);
	memset(c, 0, sizeof(*c));
	if (family == FAMILY_BERT || family == FAMILY_XLMR)
	{
		ParseEncoderConfig(config, family, c);
		return;
	}
	c->d_model = config_int(config, "d_model", true, 0, 2, MAX_DIM);
	c->vocab = config_int(config, "vocab_size", true, 0, 2, MAX_VOCAB);
	c->src_vocab = c->vocab;
	/* MarianMTModel: untied embeddings give the decoder its own vocabulary */
	if (family == FAMILY_MARIAN && !config_bool(config, "share_encoder_decoder_embeddings", true))
		c->vocab = config_int(config, "decoder_vocab_size", false, c->src_vocab, 2, MAX_VOCAB);
	c->enc_layers = config_int(config, "encoder_layers", true, 0, 0, MAX_LAYERS);
	c->dec_layers = config_int(config, "decoder_layers", true, 0, 1, MAX_LAYERS);
	c->enc_heads = config_int(config, "encoder_attention_heads", true, 0, 1, MAX_DIM);
	c->dec_heads = config_int(config, "decoder_attention_heads", true, 0, 1, MAX_DIM);
	c->enc_ffn = config_int(config, "encoder_ffn_dim", true, 0, 1, 16 * MAX_DIM);
	c->dec_ffn = config_int(config, "decoder_ffn_dim", true, 0, 1, 16 * MAX_DIM);
	c->max_pos = config_int(config, "max_position_embeddings", true, 0, 1, MAX_POSITIONS);
	c->pad_id = config_int(config, "pad_token_id", true, 0, 0, Min(c->vocab, c->src_vocab) - 1);
	c->eos_id = config_int(config, "eos_token_id", true, 0, 0, c->vocab - 1);
	c->decoder_start_id = config_int(config, "decoder_start_token_id", false, c->pad_id, 0, c->vocab - 1);
	c->ln_eps = 1e-5f;
	if (family == FAMILY_M2M100)
	{
		/*
		 * M2M100Encoder/Decoder: pre-LayerNorm layers, a final layer_norm per
		 * stack, fairseq's sinusoidal positions; the config has no switches.
		 */
		c->pre_norm = true;
		c->final_norm = true;
		c->scale_embedding = config_bool(config, "scale_embedding", true);
		c->positions = TF_POS_SINUSOIDAL_FAIRSEQ;
		if (c->pad_id + 1 + (double) c->max_pos > MAX_POSITIONS)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("model configuration \"max_position_embeddings\" is too large")));
	}
	else
	{
		c->pre_norm = config_bool(config, "normalize_before", false);
		c->final_norm = config_bool(config, "add_final_layer_norm", false);
		c->scale_embedding = config_bool(config, "scale_embedding", false);
	}

	if (c->d_model % c->enc_heads != 0 || c->d_model % c->dec_heads != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model configuration: attention heads must divide d_model"),
				 errdetail("d_model is %d, with %d encoder and %d decoder heads.",
						   c->d_model, c->enc_heads, c->dec_heads)));

	/* MarianConfig's default is gelu, M2M100Config's relu */
	act = config_string(config, "activation_function", family == FAMILY_M2M100 ? "relu" : "gelu");
	if (strcmp(act, "relu") == 0)
		c->activation = TF_ACT_RELU;
	else if (strcmp(act, "gelu") == 0)
		c->activation = TF_ACT_GELU;
	else if (strcmp(act, "swish") == 0 || strcmp(act, "silu") == 0)
		c->activation = TF_ACT_SWISH;
	else
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("activation function \"%s\" is not supported", act),
				 errhint("Supported are relu, gelu and swish (silu).")));

	if (family == FAMILY_M2M100)
		return;
	/* Marian's static positions, unless the configuration says otherwise */
	pos = config_string(config, "position_embedding",
						config_bool(config, "static_position_embeddings", true) ?
						"sinusoidal_half" : "learned");
	if (strcmp(pos, "sinusoidal_half") == 0)
		c->positions = TF_POS_SINUSOIDAL_HALF;
	else if (strcmp(pos, "sinusoidal_interleaved") == 0)
		c->positions = TF_POS_SINUSOIDAL_INTERLEAVED;
	else if (strcmp(pos, "learned") == 0)
		c->positions = TF_POS_LEARNED;
	else
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("position embedding \"%s\" is not supported", pos),
				 errhint("Supported are sinusoidal_half (Marian), sinusoidal_interleaved (the paper) and learned.")));
}

/* -------------------------------------------------------- generation */

static void
bad_generation(const char *key, const char *detail) pg_attribute_noreturn();

static void
bad_generation(const char *key, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("generation configuration \"%s\" is invalid", key),
			 errdetail("%s", detail)));
}

/* bad_words_ids: a list of non-empty lists of token ids */
static void
parse_bad_words(JsonbValue *v, const TfConfig *c, ModelGeneration *g, MemoryContext cxt)
{
	JsonbContainer *list;
	int			n;
	int			total = 0;

	g->nbad = 0;
	g->bad_off = MemoryContextAllocZero(cxt, sizeof(int));
	g->bad_ids = NULL;
	if (v == NULL || v->type == jbvNull)
		return;
	if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
		bad_generation("bad_words_ids", "It must be a list of lists of token ids.");
	list = v->val.binary.data;
	n = JsonContainerSize(list);
	for (int w = 0; w < n; w++)
	{
		JsonbValue *seq = getIthJsonbValueFromContainer(list, w);

		if (seq == NULL || seq->type != jbvBinary || !JsonContainerIsArray(seq->val.binary.data) ||
			JsonContainerSize(seq->val.binary.data) == 0)
			bad_generation("bad_words_ids", "It must be a list of non-empty lists of token ids.");
		total += JsonContainerSize(seq->val.binary.data);
	}
	g->bad_off = MemoryContextAllocZero(cxt, sizeof(int) * (n + 1));
	g->bad_ids = MemoryContextAllocZero(cxt, sizeof(int) * (total + 1));
	total = 0;
	for (int w = 0; w < n; w++)
	{
		JsonbContainer *seq = getIthJsonbValueFromContainer(list, w)->val.binary.data;

		for (int k = 0; k < (int) JsonContainerSize(seq); k++)
		{
			JsonbValue *id = getIthJsonbValueFromContainer(seq, k);
			char	   *str;
			char	   *end;
			long		val;

			if (id == NULL || id->type != jbvNumeric)
				bad_generation("bad_words_ids", "Its token ids must be integers.");
			str = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(id->val.numeric)));
			val = strtol(str, &end, 10);
			if (*end != '\0' || val < 0 || val >= c->vocab)
				bad_generation("bad_words_ids", psprintf("The token id %s is outside the vocabulary of %d.", str, c->vocab));
			g->bad_ids[total++] = (int) val;
		}
		/* NoBadWordsLogitsProcessor drops [eos] */
		if (total - g->bad_off[g->nbad] == 1 && g->bad_ids[total - 1] == c->eos_id)
			total--;
		else
			g->nbad++;
		g->bad_off[g->nbad] = total;
	}
}

void
ParseGenerationConfig(Jsonb *generation, Jsonb *config, TfConfig *c, ModelGeneration *g,
					  MemoryContext cxt)
{
	Jsonb	   *src = generation ? generation : config;
	JsonbValue *v;

	if (generation != NULL && (!JB_ROOT_IS_OBJECT(generation) || JB_ROOT_IS_SCALAR(generation)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("generation configuration must be a JSON object")));
	/* the token ids, where the generation config names them */
	if (generation != NULL)
	{
		c->decoder_start_id = config_int(generation, "decoder_start_token_id", false, c->decoder_start_id, 0, c->vocab - 1);
		c->eos_id = config_int(generation, "eos_token_id", false, c->eos_id, 0, c->vocab - 1);
	}
	g->num_beams = config_int(src, "num_beams", false, 1, 1, TF_MAX_BEAMS);
	g->length_penalty = config_double(src, "length_penalty", 1.0);
	if (!isfinite(g->length_penalty))
		bad_generation("length_penalty", "It must be finite.");
	v = config_get(src, "early_stopping");
	if (v == NULL || v->type == jbvNull)
		g->early_stopping = TF_EARLY_FALSE;
	else if (v->type == jbvBool)
		g->early_stopping = v->val.boolean ? TF_EARLY_TRUE : TF_EARLY_FALSE;
	else if (v->type == jbvString && v->val.string.len == 5 && memcmp(v->val.string.val, "never", 5) == 0)
		g->early_stopping = TF_EARLY_NEVER;
	else
		bad_generation("early_stopping", "It must be true, false or \"never\".");
	/*
	 * GenerationConfig's default is 20, which _prepare_generated_length
	 * grows by the decoder's input (1) within the positions; beyond the
	 * model's positions nothing can be decoded.
	 */
	g->max_length = config_int(src, "max_length", false, 20, 1, INT_MAX);
	if (g->max_length == 20)
		g->max_length = Min(21, c->max_pos);
	g->max_length = Min(g->max_length, c->max_pos + 1);
	g->max_new_tokens = config_int(src, "max_new_tokens", false, -1, 1, INT_MAX);
	g->min_length = config_int(src, "min_length", false, 0, 0, INT_MAX);
	g->no_repeat_ngram_size = config_int(src, "no_repeat_ngram_size", false, 0, 0, INT_MAX);
	g->repetition_penalty = config_double(src, "repetition_penalty", 1.0);
	if (!isfinite(g->repetition_penalty) || g->repetition_penalty <= 0)
		bad_generation("repetition_penalty", "It must be a positive number.");
	/* MarianConfig's default forced_eos_token_id is 0; GenerationConfig's is none */
	v = config_get(src, "forced_eos_token_id");
	g->forced_eos_id = v != NULL && v->type == jbvNull ? -1 :
		config_int(src, "forced_eos_token_id", false, generation ? -1 : 0, 0, c->vocab - 1);
	g->renormalize = config_bool(src, "renormalize_logits", false);
	parse_bad_words(config_get(src, "bad_words_ids"), c, g, cxt);
}
