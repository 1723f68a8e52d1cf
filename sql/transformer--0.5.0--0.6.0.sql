/* transformer--0.5.0--0.6.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION transformer UPDATE TO '0.6.0'" to load this file. \quit

-- Multilingual models (since 0.6.0): their language tokens, and the
-- source_lang and target_lang options of translate() and generate().

ALTER TABLE transformer_models ADD COLUMN languages jsonb;
COMMENT ON COLUMN transformer_models.languages IS
'the language tokens of a multilingual model (Marian''s >>fra<<, NLLB''s deu_Latn, M2M100''s __de__) and where they go; model_languages() lists them';

-- a tensor in rows of at most transformer.tensor_part_size bytes, so that
-- an import holds one part of it in memory (and tensors may pass 1 GB)
ALTER TABLE transformer_tensors ADD COLUMN part integer NOT NULL DEFAULT 0 CHECK (part >= 0);
ALTER TABLE transformer_tensors DROP CONSTRAINT transformer_tensors_pkey, ADD PRIMARY KEY (model, name, part);
COMMENT ON TABLE transformer_tensors IS
'the tensors of each model: safetensors name, shape and dtype, and the little-endian bytes as in the file, in parts of at most transformer.tensor_part_size bytes';

-- two more options: the old signatures go, so that named calls stay unambiguous
DROP FUNCTION translate(text, text, integer, integer, boolean, double precision, integer, double precision, integer, integer);
DROP FUNCTION translate(text[], text, integer, integer, boolean, double precision, integer, double precision, integer, integer);
DROP FUNCTION generate(text, text, integer, integer, boolean, double precision, integer, double precision, integer, integer);

CREATE FUNCTION translate(input text, model text, beam_size integer DEFAULT NULL, max_length integer DEFAULT NULL,
                          early_stopping boolean DEFAULT NULL, length_penalty double precision DEFAULT NULL,
                          no_repeat_ngram_size integer DEFAULT NULL, repetition_penalty double precision DEFAULT NULL,
                          min_length integer DEFAULT NULL, max_new_tokens integer DEFAULT NULL,
                          source_lang text DEFAULT NULL, target_lang text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'translate_text'
LANGUAGE C STABLE PARALLEL SAFE
COST 100000;

COMMENT ON FUNCTION translate(text, text, integer, integer, boolean, double precision, integer, double precision, integer, integer, text, text) IS
'translates input with a model as Hugging Face''s generate() does: greedy when beam_size is 1, beam search otherwise; every NULL option takes the model''s generation config (generation_config.json, else config.json); source_lang and target_lang pick the languages of a multilingual model (see model_languages()); NULL input gives NULL';

CREATE FUNCTION translate(inputs text[], model text, beam_size integer DEFAULT NULL, max_length integer DEFAULT NULL,
                          early_stopping boolean DEFAULT NULL, length_penalty double precision DEFAULT NULL,
                          no_repeat_ngram_size integer DEFAULT NULL, repetition_penalty double precision DEFAULT NULL,
                          min_length integer DEFAULT NULL, max_new_tokens integer DEFAULT NULL,
                          source_lang text DEFAULT NULL, target_lang text DEFAULT NULL)
RETURNS text[]
AS 'MODULE_PATHNAME', 'translate_batch'
LANGUAGE C STABLE PARALLEL SAFE
COST 100000;

COMMENT ON FUNCTION translate(text[], text, integer, integer, boolean, double precision, integer, double precision, integer, integer, text, text) IS
'translates each element of inputs, as the one-row form would; NULL elements stay NULL';

CREATE FUNCTION generate(input text, model text, beam_size integer DEFAULT NULL, max_length integer DEFAULT NULL,
                          early_stopping boolean DEFAULT NULL, length_penalty double precision DEFAULT NULL,
                          no_repeat_ngram_size integer DEFAULT NULL, repetition_penalty double precision DEFAULT NULL,
                          min_length integer DEFAULT NULL, max_new_tokens integer DEFAULT NULL,
                          source_lang text DEFAULT NULL, target_lang text DEFAULT NULL)
RETURNS integer[]
AS 'MODULE_PATHNAME', 'generate'
LANGUAGE C STABLE PARALLEL SAFE
COST 100000;

COMMENT ON FUNCTION generate(text, text, integer, integer, boolean, double precision, integer, double precision, integer, integer, text, text) IS
'the target token ids translate() decodes (end-of-sentence excluded), for inspection';

CREATE FUNCTION model_languages(model text, OUT code text, OUT token text, OUT token_id integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'model_languages'
LANGUAGE C STABLE STRICT PARALLEL SAFE
ROWS 200;

COMMENT ON FUNCTION model_languages(text) IS
'the languages a multilingual model names with tokens: the code to pass as source_lang or target_lang, its token and the token''s id; none for a model of one language pair';
