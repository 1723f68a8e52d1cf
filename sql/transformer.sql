/* transformer.sql: every object of the extension, once.  make copies it to
 * transformer--<default_version>.sql (the install script); older versions
 * keep only what the upgrade chain from 0.1.0 needs.  A change here is also
 * an upgrade script's (14_upgrade.sql checks that a fresh install and an
 * upgraded one have the same objects, columns and constraints). */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION transformer" to load this file. \quit

-- Attention on matrices (2-D real[]): softmax(Q·Kᵀ/√d_k)·V

CREATE FUNCTION self_attention(q real[], k real[], v real[], causal boolean DEFAULT false)
RETURNS real[]
AS 'MODULE_PATHNAME', 'self_attention'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION self_attention(real[], real[], real[], boolean) IS
'scaled dot-product attention softmax(q·kᵀ/√d_k)·v of q (n×d_k) over k (m×d_k) and v (m×d_v), giving n×d_v; causal hides key j from query i when j > i';

CREATE FUNCTION attention_weights(q real[], k real[], causal boolean DEFAULT false)
RETURNS real[]
AS 'MODULE_PATHNAME', 'attention_weights'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION attention_weights(real[], real[], boolean) IS
'the n×m attention weight matrix softmax(q·kᵀ/√d_k) of q (n×d_k) over k (m×d_k); each row sums to 1';

CREATE FUNCTION multihead_attention(q real[], k real[], v real[], heads integer, causal boolean DEFAULT false)
RETURNS real[]
AS 'MODULE_PATHNAME', 'multihead_attention'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION multihead_attention(real[], real[], real[], integer, boolean) IS
'multi-head attention without learned projections: the columns of q, k and v are split into heads blocks, each head attends on its own, and the results are concatenated (n×d_v)';

-- Aggregates: Σ softmax(score)_i · value_i over the rows of a group

CREATE FUNCTION softmax_weighted_sum_accum(state double precision[], score double precision, value real[])
RETURNS double precision[]
AS 'MODULE_PATHNAME', 'softmax_weighted_sum_accum'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION softmax_weighted_sum_accum(double precision[], double precision, real[]) IS
'transition function of softmax_weighted_sum';

CREATE FUNCTION attend_accum(state double precision[], query real[], key real[], value real[])
RETURNS double precision[]
AS 'MODULE_PATHNAME', 'attend_accum'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION attend_accum(double precision[], real[], real[], real[]) IS
'transition function of attend';

CREATE FUNCTION softmax_weighted_sum_combine(double precision[], double precision[])
RETURNS double precision[]
AS 'MODULE_PATHNAME', 'softmax_weighted_sum_combine'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION softmax_weighted_sum_combine(double precision[], double precision[]) IS
'combine function of softmax_weighted_sum and attend: merges two partial states';

CREATE FUNCTION softmax_weighted_sum_final(double precision[])
RETURNS real[]
AS 'MODULE_PATHNAME', 'softmax_weighted_sum_final'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION softmax_weighted_sum_final(double precision[]) IS
'final function of softmax_weighted_sum and attend: the weighted mean, or NULL without rows';

CREATE AGGREGATE softmax_weighted_sum(score double precision, value real[]) (
	SFUNC = softmax_weighted_sum_accum,
	STYPE = double precision[],
	FINALFUNC = softmax_weighted_sum_final,
	COMBINEFUNC = softmax_weighted_sum_combine,
	INITCOND = '{}',
	PARALLEL = SAFE
);

COMMENT ON AGGREGATE softmax_weighted_sum(double precision, real[]) IS
'Σ softmax(score)_i · value_i over the group, in one streaming pass; rows with a NULL score or value are skipped';

CREATE AGGREGATE attend(query real[], key real[], value real[]) (
	SFUNC = attend_accum,
	STYPE = double precision[],
	FINALFUNC = softmax_weighted_sum_final,
	COMBINEFUNC = softmax_weighted_sum_combine,
	INITCOND = '{}',
	PARALLEL = SAFE
);

COMMENT ON AGGREGATE attend(real[], real[], real[]) IS
'attention of one query over the rows of a group: Σ softmax(query·key_i/√d)_i · value_i; rows with a NULL query, key or value are skipped';

-- Tokenizers: SentencePiece models (and Marian vocabularies) in a table

CREATE TABLE transformer_tokenizers (
	name text PRIMARY KEY CHECK (name <> '' AND octet_length(name) < 64),
	model bytea NOT NULL,
	vocab jsonb,
	created timestamptz NOT NULL DEFAULT now(),
	-- since 0.4.0, at the end as ALTER TABLE adds them
	file_id uuid NOT NULL DEFAULT pg_catalog.gen_random_uuid(),
	vocab_json bytea
);
-- models are read whole on every load: no compression to undo
ALTER TABLE transformer_tokenizers ALTER COLUMN model SET STORAGE EXTERNAL;
ALTER TABLE transformer_tokenizers ALTER COLUMN vocab_json SET STORAGE EXTERNAL;
COMMENT ON TABLE transformer_tokenizers IS
'SentencePiece tokenizers: the .model/.spm file as is, and an optional vocabulary (piece -> model id, as Marian''s vocab.json)';
COMMENT ON COLUMN transformer_tokenizers.model IS 'the serialized SentencePiece ModelProto';
COMMENT ON COLUMN transformer_tokenizers.vocab IS 'piece -> model id; NULL: ids are SentencePiece''s own';
COMMENT ON COLUMN transformer_tokenizers.file_id IS
'a random identifier of this version of the row, in the names of the shared files built from it';
COMMENT ON COLUMN transformer_tokenizers.vocab_json IS
'piece -> model id as the UTF-8 bytes of a JSON object, where the database encoding is not UTF8 (vocab is then NULL)';
SELECT pg_catalog.pg_extension_config_dump('transformer_tokenizers', '');
GRANT SELECT ON transformer_tokenizers TO PUBLIC;

CREATE FUNCTION transformer_invalidate_cache()
RETURNS trigger
AS 'MODULE_PATHNAME', 'transformer_invalidate_cache'
LANGUAGE C;

COMMENT ON FUNCTION transformer_invalidate_cache() IS
'trigger: makes every backend reload tokenizers (and models) after a change';

-- only the extension's own triggers invalidate the caches
REVOKE ALL ON FUNCTION transformer_invalidate_cache() FROM PUBLIC;

CREATE TRIGGER transformer_tokenizers_changed
AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON transformer_tokenizers
FOR EACH STATEMENT EXECUTE FUNCTION transformer_invalidate_cache();

CREATE FUNCTION import_tokenizer(name text, spm_path text, vocab_path text DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'import_tokenizer'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION import_tokenizer(text, text, text) IS
'stores a tokenizer from server files: a SentencePiece model (.model/.spm) and optionally a Marian vocab.json, or a Hugging Face tokenizer directory (BertTokenizer''s vocab.txt; XLMRobertaTokenizer''s sentencepiece.bpe.model); superuser or pg_read_server_files only; returns the number of pieces';

CREATE FUNCTION load_tokenizer(name text, spm bytea, vocab jsonb DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'load_tokenizer'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION load_tokenizer(text, bytea, jsonb) IS
'stores a tokenizer from bytes sent by the client (no server file access needed); returns the number of pieces';

CREATE FUNCTION drop_tokenizer(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'drop_tokenizer'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION drop_tokenizer(text) IS
'removes a tokenizer; false if there was none';

CREATE FUNCTION tokenize(input text, tokenizer text)
RETURNS integer[]
AS 'MODULE_PATHNAME', 'tokenize'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION tokenize(text, text) IS
'the token ids of input (no end-of-sentence id added): the vocabulary''s ids if the tokenizer has one, else SentencePiece''s';

CREATE FUNCTION tokens(input text, tokenizer text)
RETURNS text[]
AS 'MODULE_PATHNAME', 'tokens'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION tokens(text, text) IS
'the pieces input is split into, as SentencePiece reports them';

CREATE FUNCTION detokenize(ids integer[], tokenizer text)
RETURNS text
AS 'MODULE_PATHNAME', 'detokenize'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION detokenize(integer[], text) IS
'the text of a sequence of token ids, as SentencePiece decodes it';

-- Models: configuration and tensors in tables, in the Hugging Face Marian layout

CREATE TABLE transformer_models (
	name text PRIMARY KEY CHECK (name <> '' AND octet_length(name) <= 56),
	config jsonb NOT NULL,
	config_json bytea NOT NULL,
	vocab_json bytea NOT NULL,
	safetensors_header bytea NOT NULL,
	source_tokenizer text NOT NULL REFERENCES transformer_tokenizers (name),
	target_tokenizer text NOT NULL REFERENCES transformer_tokenizers (name),
	created timestamptz NOT NULL DEFAULT now(),
	-- since 0.2.0, at the end as ALTER TABLE adds them
	generation_config jsonb,
	generation_config_json bytea,
	source_lang text CHECK (octet_length(source_lang) <= 32),
	target_lang text CHECK (octet_length(target_lang) <= 32),
	-- since 0.4.0
	file_id uuid NOT NULL DEFAULT pg_catalog.gen_random_uuid(),
	-- since 0.6.0
	languages jsonb,
	-- since 0.7.0
	segment_tokens integer CHECK (segment_tokens > 0),
	-- since 0.8.0
	embedding jsonb
);
COMMENT ON TABLE transformer_models IS
'Transformer models: config.json (parsed, and as it was), the safetensors header as it was, generation_config.json if the model has one, and the source and target tokenizers';
COMMENT ON COLUMN transformer_models.languages IS
'the language tokens of a multilingual model (Marian''s >>fra<<, NLLB''s deu_Latn, M2M100''s __de__) and where they go; model_languages() lists them';
COMMENT ON COLUMN transformer_models.segment_tokens IS
'the most tokens of a segment the model translates reliably (measure_segment_length()); longer sentences are cut at clause boundaries first; NULL: its positions';
COMMENT ON COLUMN transformer_models.embedding IS
'an encoder-only model''s embed() settings, from sentence-transformers'' files: pooling (cls, mean, max, mean_sqrt_len), normalize, max_seq_length (tokens, special ones included), and the ids of the first and last special tokens; NULL: a translation model';
COMMENT ON COLUMN transformer_models.file_id IS
'a random identifier of this version of the row, in the names of the shared files built from it';
SELECT pg_catalog.pg_extension_config_dump('transformer_models', '');
GRANT SELECT ON transformer_models TO PUBLIC;

CREATE TABLE transformer_tensors (
	model text NOT NULL REFERENCES transformer_models (name) ON DELETE CASCADE,
	name text NOT NULL,
	shape bigint[] NOT NULL,
	dtype text NOT NULL CHECK (dtype IN ('F32', 'F16', 'BF16', 'I8')),
	data_offset bigint NOT NULL,
	data bytea NOT NULL,
	-- since 0.6.0: a tensor over transformer.tensor_part_size spans rows 0, 1, ...
	part integer NOT NULL DEFAULT 0 CHECK (part >= 0),
	PRIMARY KEY (model, name, part)
);
-- weights are read whole on every load: no compression to undo
ALTER TABLE transformer_tensors ALTER COLUMN data SET STORAGE EXTERNAL;
COMMENT ON TABLE transformer_tensors IS
'the tensors of each model: safetensors name, shape and dtype, and the little-endian bytes as in the file, in parts of at most transformer.tensor_part_size bytes';
SELECT pg_catalog.pg_extension_config_dump('transformer_tensors', '');
GRANT SELECT ON transformer_tensors TO PUBLIC;

CREATE TRIGGER transformer_models_changed
AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON transformer_models
FOR EACH STATEMENT EXECUTE FUNCTION transformer_invalidate_cache();
CREATE TRIGGER transformer_tensors_changed
AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON transformer_tensors
FOR EACH STATEMENT EXECUTE FUNCTION transformer_invalidate_cache();

CREATE FUNCTION import_model(name text, dir text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'import_model'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION import_model(text, text) IS
'stores a Hugging Face Marian / OPUS-MT model directory as published (config.json, model.safetensors, source.spm, target.spm, vocab.json, and generation_config.json if present); superuser or pg_read_server_files only; returns the number of parameters';

CREATE FUNCTION load_model(name text, config bytea, safetensors bytea, source_spm bytea, target_spm bytea, vocab bytea,
                           generation_config bytea DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'load_model'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION load_model(text, bytea, bytea, bytea, bytea, bytea, bytea) IS
'stores a model from the bytes of its files sent by the client (no server file access needed), generation_config.json optional; returns the number of parameters';

CREATE FUNCTION export_model(name text, dir text)
RETURNS integer
AS 'MODULE_PATHNAME', 'export_model'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION export_model(text, text) IS
'writes a model''s files into a server directory, byte for byte as imported; superuser or pg_write_server_files only; returns the number of tensors';

CREATE FUNCTION quantize_model(name text, new_name text, dtype text DEFAULT 'int8')
RETURNS bigint
AS 'MODULE_PATHNAME', 'quantize_model'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION quantize_model(text, text, text) IS
'stores a copy of a model with its weight matrices (linear layers, embeddings, output layer) in int8, per output row with an fp32 scale; biases, norms and positions in fp32; returns the number of parameters';

CREATE FUNCTION drop_model(name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'drop_model'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION drop_model(text) IS
'removes a model, its tensors and its tokenizers; false if there was none';

-- the paper's input layer; called embed() up to 0.7.0
CREATE FUNCTION input_embeddings(input text, model text)
RETURNS real[]
AS 'MODULE_PATHNAME', 'input_embeddings'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION input_embeddings(text, text) IS
'tokens x d_model: the paper''s input layer for input (the tokens the encoder reads): token embeddings, scaled as configured, plus positions (and an encoder-only model''s token type and LayerNorm)';

-- not encode(text, text): it would take encode('hello', 'base64') from PostgreSQL's encode(bytea, text)
CREATE FUNCTION encoder_output(input text, model text)
RETURNS real[]
AS 'MODULE_PATHNAME', 'encoder_output'
LANGUAGE C STABLE STRICT PARALLEL SAFE
COST 10000;

COMMENT ON FUNCTION encoder_output(text, text) IS
'tokens x d_model: the encoder''s output for input (a translation model''s: end-of-sentence included; an encoder-only model''s: [CLS] ... [SEP] or <s> ... </s>); also transformer.encode()';

-- Sentence embeddings (since 0.8.0)

CREATE FUNCTION embed(input text, model text)
RETURNS real[]
AS 'MODULE_PATHNAME', 'sentence_embedding'
LANGUAGE C STABLE STRICT PARALLEL SAFE
COST 10000;

COMMENT ON FUNCTION embed(text, text) IS
'one vector (d_model) for input, as sentence-transformers'' encode() gives it: the encoder''s output pooled as the model says (CLS, mean, max), normalized if it has a Normalize module; a translation model''s: the mean of its encoder''s output';

CREATE FUNCTION embed(inputs text[], model text)
RETURNS SETOF real[]
AS 'MODULE_PATHNAME', 'sentence_embeddings'
LANGUAGE C STABLE STRICT PARALLEL SAFE
COST 10000 ROWS 100;

COMMENT ON FUNCTION embed(text[], text) IS
'embed() of each element, in order (NULL for NULL; use WITH ORDINALITY for the position), the texts run through the encoder in batches';

-- The design card's encode(), in a schema of its own: an unqualified encode()
-- stays PostgreSQL's encode(bytea, text)
CREATE SCHEMA transformer;
COMMENT ON SCHEMA transformer IS
'functions of extension transformer whose names PostgreSQL''s built-ins already take (encode)';
GRANT USAGE ON SCHEMA transformer TO PUBLIC;

CREATE FUNCTION transformer.encode(input text, model text)
RETURNS real[]
AS 'MODULE_PATHNAME', 'encoder_output'
LANGUAGE C STABLE STRICT PARALLEL SAFE
COST 10000;

COMMENT ON FUNCTION transformer.encode(text, text) IS
'tokens x d_model: the encoder''s output for input, as encoder_output()';

CREATE FUNCTION translate(input text)
RETURNS text
AS 'MODULE_PATHNAME', 'translate_default'
LANGUAGE C STABLE STRICT PARALLEL SAFE
COST 100000;

COMMENT ON FUNCTION translate(text) IS
'translates input with the model named by transformer.default_model';

CREATE FUNCTION translate(input text, model text, beam_size integer DEFAULT NULL, max_length integer DEFAULT NULL,
                          early_stopping boolean DEFAULT NULL, length_penalty double precision DEFAULT NULL,
                          no_repeat_ngram_size integer DEFAULT NULL, repetition_penalty double precision DEFAULT NULL,
                          min_length integer DEFAULT NULL, max_new_tokens integer DEFAULT NULL,
                          source_lang text DEFAULT NULL, target_lang text DEFAULT NULL,
                          format text DEFAULT 'text', keep text[] DEFAULT NULL, split boolean DEFAULT true)
RETURNS text
AS 'MODULE_PATHNAME', 'translate_text'
LANGUAGE C STABLE PARALLEL SAFE
COST 100000;

COMMENT ON FUNCTION translate(text, text, integer, integer, boolean, double precision, integer, double precision, integer, integer, text, text, text, text[], boolean) IS
'translates input with a model as Hugging Face''s generate() does: greedy when beam_size is 1, beam search otherwise; every NULL option takes the model''s generation config (generation_config.json, else config.json); source_lang and target_lang pick the languages of a multilingual model (see model_languages()); format text, html or xml (markup kept, text translated); keep: the kinds of spans kept verbatim (url, email, number, placeholder, format, mention, hashtag, code, symbol, list; NULL: all); split false: one segment, not sentences; NULL input gives NULL';

CREATE FUNCTION translate(inputs text[], model text, beam_size integer DEFAULT NULL, max_length integer DEFAULT NULL,
                          early_stopping boolean DEFAULT NULL, length_penalty double precision DEFAULT NULL,
                          no_repeat_ngram_size integer DEFAULT NULL, repetition_penalty double precision DEFAULT NULL,
                          min_length integer DEFAULT NULL, max_new_tokens integer DEFAULT NULL,
                          source_lang text DEFAULT NULL, target_lang text DEFAULT NULL,
                          format text DEFAULT 'text', keep text[] DEFAULT NULL, split boolean DEFAULT true)
RETURNS text[]
AS 'MODULE_PATHNAME', 'translate_batch'
LANGUAGE C STABLE PARALLEL SAFE
COST 100000;

COMMENT ON FUNCTION translate(text[], text, integer, integer, boolean, double precision, integer, double precision, integer, integer, text, text, text, text[], boolean) IS
'translates each element of inputs, as the one-row form would; NULL elements stay NULL';

-- translate(body, 'nllb', 'deu_Latn', 'fra_Latn'): languages in third and
-- fourth place, where beam_size and max_length would otherwise take them
-- (and fail as integers); unknown-typed literals prefer this text form.
-- Its parameters are not named source_lang and target_lang, so that a call
-- naming those has one candidate only.
CREATE FUNCTION translate(input text, model text, from_lang text, to_lang text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
COST 100000
RETURN @extschema@.translate(input, model, source_lang => from_lang, target_lang => to_lang);

COMMENT ON FUNCTION translate(text, text, text, text) IS
'translates input from from_lang to to_lang with a multilingual model, as translate(input, model, source_lang => from_lang, target_lang => to_lang)';

CREATE FUNCTION translate(inputs text[], model text, from_lang text, to_lang text)
RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE
COST 100000
RETURN @extschema@.translate(inputs, model, source_lang => from_lang, target_lang => to_lang);

COMMENT ON FUNCTION translate(text[], text, text, text) IS
'translates each element of inputs from from_lang to to_lang, as translate(inputs, model, source_lang => from_lang, target_lang => to_lang)';

-- What this server runs (since 0.8.0)

CREATE FUNCTION transformer_version()
RETURNS text
AS 'MODULE_PATHNAME', 'transformer_version'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION transformer_version() IS
'the library''s version, the kernels chosen at run time for this CPU (fp32: avx512, avx2 or portable; int8: amx, avx512vnni, avx2 or portable), OpenBLAS''s configuration and core, and the ICU and libxml2 versions';

CREATE FUNCTION transformer_model_stats(OUT model text, OUT calls bigint, OUT sentences bigint, OUT tokens_in bigint,
                                        OUT tokens_out bigint, OUT total_time double precision,
                                        OUT mean_time double precision, OUT cache_hits bigint, OUT cache_misses bigint,
                                        OUT stats_since timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'transformer_model_stats'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE
ROWS 10;

COMMENT ON FUNCTION transformer_model_stats() IS
'per-model statistics of this database, kept in shared memory (needs shared_preload_libraries = ''transformer''): calls of translate() and jobs'' batches, sentences, source and generated tokens, total and mean time in milliseconds, backends'' model cache hits and misses, since when; read them through the view transformer_stat_models';

CREATE VIEW transformer_stat_models AS SELECT * FROM transformer_model_stats();
GRANT SELECT ON transformer_stat_models TO PUBLIC;

COMMENT ON VIEW transformer_stat_models IS
'per-model statistics of this database, as pg_stat_statements keeps per-statement ones (needs shared_preload_libraries = ''transformer''); transformer_stat_reset() clears them';

CREATE FUNCTION transformer_stat_reset(model text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'transformer_stat_reset'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION transformer_stat_reset(text) IS
'clears the statistics of one model of this database, or of all its models (NULL)';

REVOKE ALL ON FUNCTION transformer_stat_reset(text) FROM PUBLIC;

CREATE FUNCTION set_model_segment_length(model text, tokens integer)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF model IS NULL THEN
    RAISE EXCEPTION 'model must not be null' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF tokens IS NOT NULL AND (tokens < 4 OR tokens > 100000) THEN
    RAISE EXCEPTION 'segment length % is out of range', tokens USING ERRCODE = 'invalid_parameter_value',
      HINT = 'Give 4 tokens or more, or NULL for the model''s positions.';
  END IF;
  UPDATE @extschema@.transformer_models m SET segment_tokens = tokens WHERE m.name = model;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'model "%" does not exist', model USING ERRCODE = 'undefined_object';
  END IF;
END
$$;

COMMENT ON FUNCTION set_model_segment_length(text, integer) IS
'sets the most tokens a segment may have before translate() cuts it (at clause boundaries first); NULL: the model''s positions';

CREATE FUNCTION measure_segment_length(model text, sentences text[], threshold double precision DEFAULT 0.9)
RETURNS integer
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
-- Runs of k consecutive sentences with their final punctuation taken out
-- are translated as one segment and their words counted against the words
-- of the sentences translated one by one.  The segment length is where the
-- share of words kept crosses threshold, between the mean token counts of
-- the longest runs that keep enough (and so do all shorter ones) and the
-- next; it is stored with the model and returned.
DECLARE
  tok text;
  alone double precision[];
  k integer;
  kept double precision;
  tokens double precision;
  last_kept double precision := 1;
  last_tokens double precision;
  best integer;
  n integer := coalesce(array_length(sentences, 1), 0);
BEGIN
  IF n < 8 THEN
    RAISE EXCEPTION 'measure_segment_length needs 8 sentences or more' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT m.source_tokenizer INTO tok FROM @extschema@.transformer_models m WHERE m.name = model;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'model "%" does not exist', model USING ERRCODE = 'undefined_object';
  END IF;
  UPDATE @extschema@.transformer_models m SET segment_tokens = NULL WHERE m.name = model;
  SELECT array_agg(coalesce(array_length(regexp_split_to_array(btrim(@extschema@.translate(s, model, split => false)), '\s+'), 1), 0)
                   ORDER BY i)
    INTO alone FROM unnest(sentences) WITH ORDINALITY u(s, i);
  FOREACH k IN ARRAY ARRAY[1, 2, 3, 4, 6, 8, 12, 16] LOOP
    EXIT WHEN k > n;
    WITH runs AS (
      SELECT (i - 1) / k AS r,
             string_agg(regexp_replace(btrim(s), '[.!?]+$', ''), ' ' ORDER BY i) AS src,
             sum(alone[i]) AS words
      FROM unnest(sentences) WITH ORDINALITY u(s, i)
      WHERE i <= n - n % k
      GROUP BY 1),
    t AS (SELECT runs.words,
                 coalesce(array_length(regexp_split_to_array(btrim(@extschema@.translate(src, model, split => false)), '\s+'), 1), 0) AS got,
                 array_length(@extschema@.tokenize(src, tok), 1) AS ntok
          FROM runs)
    SELECT sum(least(t.got, t.words)) / nullif(sum(t.words), 0), avg(t.ntok) INTO kept, tokens FROM t;
    RAISE DEBUG 'runs of % sentences: % tokens, % of the words kept', k, round(tokens), round(kept * 100);
    IF kept IS NULL OR kept < threshold THEN
      -- where the words kept cross the threshold, between the last runs that kept enough and these
      IF kept IS NOT NULL AND last_tokens IS NOT NULL AND tokens > last_tokens THEN
        best := round(last_tokens + (tokens - last_tokens) * (last_kept - threshold) / (last_kept - kept));
      END IF;
      EXIT;
    END IF;
    best := round(tokens);
    last_kept := kept;
    last_tokens := tokens;
  END LOOP;
  UPDATE @extschema@.transformer_models m SET segment_tokens = best WHERE m.name = model;
  RETURN best;
END
$$;

COMMENT ON FUNCTION measure_segment_length(text, text[], double precision) IS
'measures the longest segment a model translates reliably on sample sentences of its own domain (runs of sentences without their final periods, words kept against the sentences one by one), stores it with the model (see set_model_segment_length()) and returns it';

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

CREATE FUNCTION import_model(name text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'import_bundled_model'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION import_model(text) IS
'stores a model bundled with the extension (multi30k_de_en: German to English), from the extension''s installation directory; returns the number of parameters';

CREATE FUNCTION model_languages(model text, OUT code text, OUT token text, OUT token_id integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'model_languages'
LANGUAGE C STABLE STRICT PARALLEL SAFE
ROWS 200;

COMMENT ON FUNCTION model_languages(text) IS
'the languages a multilingual model names with tokens: the code to pass as source_lang or target_lang, its token and the token''s id; none for a model of one language pair';

-- Documents: sentences, and the languages of a model

CREATE FUNCTION sentences(input text, locale text DEFAULT NULL)
RETURNS SETOF text
AS 'MODULE_PATHNAME', 'sentences'
LANGUAGE C STABLE PARALLEL SAFE
ROWS 10;

COMMENT ON FUNCTION sentences(text, text) IS
'the sentences of input, by ICU''s sentence rules for locale (NULL: the root rules) with its standard abbreviation suppressions; each keeps the whitespace after it, so concatenated they are input';

CREATE FUNCTION set_model_languages(model text, source_lang text, target_lang text)
RETURNS void
AS 'MODULE_PATHNAME', 'set_model_languages'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION set_model_languages(text, text, text) IS
'sets the source and target languages of a model (language tags such as de, en; NULL: unknown); the source language picks the sentence rules translate() uses';

-- Evaluation: corpus BLEU and chrF as sacreBLEU computes them by default

CREATE FUNCTION bleu_accum(state double precision[], hypothesis text, reference text)
RETURNS double precision[]
AS 'MODULE_PATHNAME', 'bleu_accum'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION bleu_accum(double precision[], text, text) IS
'transition function of bleu: adds a sentence pair''s statistics (lengths, n-gram matches and totals after 13a tokenization)';

CREATE FUNCTION chrf_accum(state double precision[], hypothesis text, reference text)
RETURNS double precision[]
AS 'MODULE_PATHNAME', 'chrf_accum'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION chrf_accum(double precision[], text, text) IS
'transition function of chrf: adds a sentence pair''s character n-gram statistics';

CREATE FUNCTION metric_combine(double precision[], double precision[])
RETURNS double precision[]
AS 'MODULE_PATHNAME', 'metric_combine'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION metric_combine(double precision[], double precision[]) IS
'combine function of bleu and chrf: the sum of two partial states';

CREATE FUNCTION bleu_final(double precision[])
RETURNS double precision
AS 'MODULE_PATHNAME', 'bleu_final'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION bleu_final(double precision[]) IS
'final function of bleu: corpus BLEU from the summed statistics';

CREATE FUNCTION chrf_final(double precision[])
RETURNS double precision
AS 'MODULE_PATHNAME', 'chrf_final'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION chrf_final(double precision[]) IS
'final function of chrf: chrF2 from the summed statistics';

CREATE AGGREGATE bleu(hypothesis text, reference text) (
	SFUNC = bleu_accum,
	STYPE = double precision[],
	FINALFUNC = bleu_final,
	COMBINEFUNC = metric_combine,
	INITCOND = '{0,0,0,0,0,0,0,0,0,0}',
	PARALLEL = SAFE
);

COMMENT ON AGGREGATE bleu(text, text) IS
'corpus BLEU (0 to 100) of the rows'' hypotheses against their references, as sacreBLEU by default: 13a tokenization, 4-grams, brevity penalty, exp smoothing; rows with a NULL are skipped';

CREATE AGGREGATE chrf(hypothesis text, reference text) (
	SFUNC = chrf_accum,
	STYPE = double precision[],
	FINALFUNC = chrf_final,
	COMBINEFUNC = metric_combine,
	INITCOND = '{0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0}',
	PARALLEL = SAFE
);

COMMENT ON AGGREGATE chrf(text, text) IS
'corpus chrF2 (0 to 100) of the rows'' hypotheses against their references, as sacreBLEU''s chrF: character 6-grams without whitespace, beta 2, no word n-grams; rows with a NULL are skipped';

-- Pictures

CREATE FUNCTION heatmap_svg(weights real[], row_labels text[] DEFAULT NULL, col_labels text[] DEFAULT NULL, title text DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'heatmap_svg'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION heatmap_svg(real[], text[], text[], text) IS
'a standalone SVG document of a matrix (rows x columns, e.g. attention_weights()): labelled rows and columns, a colour scale with a legend, each cell''s value in a tooltip; labels are escaped; NULL weights give NULL';

CREATE FUNCTION positional_encoding(positions integer, d_model integer)
RETURNS real[]
AS 'MODULE_PATHNAME', 'positional_encoding'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION positional_encoding(integer, integer) IS
'positions x d_model: the paper''s sinusoidal positional encodings, PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...), for positions 0 .. positions - 1';

-- What the model attends to

CREATE FUNCTION attention_map(input text, model text, beam_size integer DEFAULT NULL)
RETURNS TABLE (stack text, layer integer, head integer, query_pos integer, query_token text,
               key_pos integer, key_token text, weight real)
AS 'MODULE_PATHNAME', 'attention_map'
LANGUAGE C STABLE PARALLEL SAFE
COST 100000 ROWS 10000;

COMMENT ON FUNCTION attention_map(text, text, integer) IS
'every attention weight of the translation generate() gives input (one sentence): stack encoder (self-attention over the source pieces), decoder (masked self-attention) or cross (encoder-decoder); for decoder and cross, query row t is the step that produced output token t (EOS included); positions, layers and heads 1-based';

CREATE FUNCTION align(input text, model text)
RETURNS TABLE (source_pos integer, source_word text, target_pos integer, target_word text, weight real)
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  -- the encoder-decoder attention averaged over the heads, of the
  -- penultimate layer in decoders of 6 layers or more (Garg et al. 2019,
  -- on transformer-base), of the last one in shallower decoders (measured
  -- on the 3-layer bundled model: AER 0.066 against 0.224 for layer 2)
  WITH m AS (
    SELECT a.layer, a.query_pos, a.query_token, a.key_pos, a.key_token, a.weight
    FROM @extschema@.attention_map(input, model) a WHERE a.stack = 'cross'),
  p AS (SELECT m.query_pos, m.query_token, m.key_pos, m.key_token, avg(m.weight) AS w
        FROM m WHERE m.layer = (SELECT CASE WHEN max(m2.layer) >= 6 THEN max(m2.layer) - 1 ELSE max(m2.layer) END FROM m m2)
        GROUP BY 1, 2, 3, 4),
  -- SentencePiece's space marker as the pieces show it: U+2581, or a space
  -- in a database whose encoding lacks it (written so that it parses there)
  mk AS (SELECT CASE WHEN current_setting('server_encoding') IN ('UTF8', 'SQL_ASCII')
                     THEN convert_from('\xe29681'::bytea, 'UTF8') ELSE ' ' END AS marker),
  -- words: a piece that starts with the marker starts a word; EOS is left out
  sp AS (SELECT s.key_pos, s.key_token,
                sum(CASE WHEN s.key_pos = 1 OR starts_with(s.key_token, mk.marker) THEN 1 ELSE 0 END) OVER (ORDER BY s.key_pos) AS word
         FROM (SELECT DISTINCT p.key_pos, p.key_token FROM p WHERE p.key_token <> '</s>') s, mk),
  tp AS (SELECT t.query_pos, t.query_token,
                sum(CASE WHEN t.query_pos = 1 OR starts_with(t.query_token, mk.marker) THEN 1 ELSE 0 END) OVER (ORDER BY t.query_pos) AS word
         FROM (SELECT DISTINCT p.query_pos, p.query_token FROM p WHERE p.query_token <> '</s>') t, mk),
  sw AS (SELECT sp.word, replace(string_agg(sp.key_token, '' ORDER BY sp.key_pos), min(mk.marker), '') AS text FROM sp, mk GROUP BY sp.word),
  tw AS (SELECT tp.word, replace(string_agg(tp.query_token, '' ORDER BY tp.query_pos), min(mk.marker), '') AS text,
                count(*) AS pieces FROM tp, mk GROUP BY tp.word),
  -- a target word's weight on a source word: the mean over its pieces of the sum over the source word's pieces
  ww AS (SELECT tp.word AS t, sp.word AS s, sum(p.w) / max(tw.pieces) AS w
         FROM p JOIN tp USING (query_pos) JOIN sp USING (key_pos) JOIN tw ON tw.word = tp.word
         GROUP BY tp.word, sp.word),
  best AS (SELECT DISTINCT ON (ww.t) ww.t, ww.s, ww.w FROM ww ORDER BY ww.t, ww.w DESC, ww.s)
  SELECT best.s::integer, sw.text, best.t::integer, tw.text, best.w::real
  FROM best JOIN sw ON sw.word = best.s JOIN tw ON tw.word = best.t
  ORDER BY best.t
$$;

COMMENT ON FUNCTION align(text, text) IS
'word alignment of input and its translation from the encoder-decoder attention averaged over the heads (the penultimate layer of decoders of 6 layers or more, else the last): for each target word, the source word it attends to most (pieces merged into words at U+2581), with that weight';

CREATE FUNCTION attention_svg(input text, model text, stack text DEFAULT 'cross', layer integer DEFAULT NULL, head integer DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  nlayers integer;
  nheads integer;
  weights real[];
  rows text[];
  cols text[];
BEGIN
  IF input IS NULL OR model IS NULL THEN
    RETURN NULL;
  END IF;
  IF stack IS NULL OR stack NOT IN ('encoder', 'decoder', 'cross') THEN
    RAISE EXCEPTION 'stack must be encoder, decoder or cross' USING ERRCODE = 'invalid_parameter_value',
      DETAIL = format('It is %s.', coalesce(quote_literal(stack), 'NULL'));
  END IF;
  -- the layer's weights (one head, or their mean), 0 where a key is masked
  WITH m AS MATERIALIZED (
         SELECT a.layer, a.head, a.query_pos, a.query_token, a.key_pos, a.key_token, a.weight
         FROM @extschema@.attention_map(input, model) a WHERE a.stack = attention_svg.stack),
       dims AS (SELECT max(m.layer) AS nl, max(m.head) AS nh FROM m),
       w AS (SELECT m.query_pos, m.key_pos, avg(m.weight) AS w FROM m, dims
             WHERE m.layer = coalesce(attention_svg.layer, dims.nl) AND (attention_svg.head IS NULL OR m.head = attention_svg.head)
             GROUP BY 1, 2),
       q AS (SELECT DISTINCT m.query_pos, m.query_token FROM m),
       k AS (SELECT DISTINCT m.key_pos, m.key_token FROM m),
       r AS (SELECT q.query_pos, array_agg(coalesce(w.w, 0)::real ORDER BY k.key_pos) AS r
             FROM q CROSS JOIN k LEFT JOIN w ON w.query_pos = q.query_pos AND w.key_pos = k.key_pos
             GROUP BY q.query_pos)
  SELECT dims.nl, dims.nh,
         (SELECT array_agg(r.r ORDER BY r.query_pos) FROM r),
         (SELECT array_agg(q.query_token ORDER BY q.query_pos) FROM q),
         (SELECT array_agg(k.key_token ORDER BY k.key_pos) FROM k)
    INTO nlayers, nheads, weights, rows, cols FROM dims;
  IF nlayers IS NULL THEN
    RETURN NULL;
  END IF;
  IF layer IS NOT NULL AND (layer < 1 OR layer > nlayers) THEN
    RAISE EXCEPTION 'layer must be between 1 and %', nlayers USING ERRCODE = 'invalid_parameter_value',
      DETAIL = format('It is %s.', layer);
  END IF;
  IF head IS NOT NULL AND (head < 1 OR head > nheads) THEN
    RAISE EXCEPTION 'head must be between 1 and %', nheads USING ERRCODE = 'invalid_parameter_value',
      DETAIL = format('It is %s.', head);
  END IF;
  RETURN @extschema@.heatmap_svg(weights, rows, cols,
    format('%s attention, layer %s of %s, %s', stack, coalesce(layer, nlayers), nlayers,
           CASE WHEN head IS NULL THEN 'mean of the heads' ELSE 'head ' || head END));
END
$$;

COMMENT ON FUNCTION attention_svg(text, text, text, integer, integer) IS
'a picture (SVG) of one layer of attention_map(): stack cross (default), encoder or decoder; the last layer and the mean of the heads unless given';

CREATE FUNCTION transformer_weight_files()
RETURNS TABLE (file text, kind text, database oid, name text, bytes bigint, state text)
AS 'MODULE_PATHNAME', 'transformer_weight_files'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION transformer_weight_files() IS
'the shared files of weights and tokenizers (transformer.weight_cache_dir): each file''s kind (weights or tokenizer), database, model or tokenizer name, size and state (current, stale, orphan, other database, dropped database, being written, unknown)';

REVOKE ALL ON FUNCTION transformer_weight_files() FROM PUBLIC;

-- DROP EXTENSION drops the tables and every model in them: that needs
-- CASCADE, as for any object others depend on
CREATE FUNCTION transformer_guard_drop()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'transformer_guard_drop'
LANGUAGE C;

COMMENT ON FUNCTION transformer_guard_drop() IS
'event trigger: DROP EXTENSION transformer without CASCADE is refused while its tables hold models or tokenizers';

REVOKE ALL ON FUNCTION transformer_guard_drop() FROM PUBLIC;

CREATE EVENT TRIGGER transformer_guard_drop ON ddl_command_start
WHEN TAG IN ('DROP EXTENSION')
EXECUTE FUNCTION transformer_guard_drop();

-- Background translation jobs (since 0.5.0): translate_column() declares a
-- job; background workers run it as the role that declared it.  Only the
-- extension's C functions write these tables, as the extension's owner.

CREATE TABLE transformer_job (
	id bigserial PRIMARY KEY,
	tbl regclass,
	source name,
	target name,
	key_columns name[],
	model text NOT NULL,
	owner regrole NOT NULL,
	state text NOT NULL DEFAULT 'queued'
		CHECK (state IN ('queued', 'running', 'syncing', 'paused', 'done', 'failed', 'cancelled')),
	workers integer NOT NULL CHECK (workers BETWEEN 1 AND 64),
	keep_in_sync boolean NOT NULL,
	beam integer CHECK (beam BETWEEN 1 AND 64),
	batch_size integer NOT NULL CHECK (batch_size BETWEEN 1 AND 1024),
	created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	started_at timestamptz,
	finished_at timestamptz,
	last_error text,
	waiting text,
	-- since 0.9.0
	kind text NOT NULL DEFAULT 'translate',
	format text,
	keep text[],
	source_lang text,
	target_lang text,
	source_lang_column name,
	-- since 0.10.0: fine_tune()
	new_model text,
	settings jsonb,
	CONSTRAINT transformer_job_kind_check CHECK (kind IN ('translate', 'embed', 'fine_tune')),
	CONSTRAINT transformer_job_table_check CHECK (CASE WHEN kind = 'fine_tune'
		THEN tbl IS NULL AND new_model IS NOT NULL AND settings IS NOT NULL
		ELSE tbl IS NOT NULL AND source IS NOT NULL AND target IS NOT NULL AND key_columns IS NOT NULL END)
);
COMMENT ON TABLE transformer_job IS
'background jobs as translate_column(), embed_column() and fine_tune() declared them; read them through the view transformer_jobs';
SELECT pg_catalog.pg_extension_config_dump('transformer_job', '');
SELECT pg_catalog.pg_extension_config_dump('transformer_job_id_seq', '');

CREATE TABLE transformer_job_queue (
	id bigserial PRIMARY KEY,
	job bigint NOT NULL REFERENCES transformer_job (id) ON DELETE CASCADE,
	keys jsonb NOT NULL,
	queued_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	-- since 0.9.0
	n integer NOT NULL DEFAULT 1 CHECK (n > 0),
	targets jsonb
);
CREATE INDEX transformer_job_queue_job ON transformer_job_queue (job, id);
COMMENT ON TABLE transformer_job_queue IS
'the keys of the rows each job has still to do, in chunks: keys is a JSON array of n keys, each a JSON array of the key columns'' text written under fixed settings (DateStyle ISO, IntervalStyle postgres, TimeZone UTC, extra_float_digits 1, bytea_output hex); targets, the hash of each row''s target when it was queued (null: NULL), so that a target written by hand since is left alone';
SELECT pg_catalog.pg_extension_config_dump('transformer_job_queue', '');
SELECT pg_catalog.pg_extension_config_dump('transformer_job_queue_id_seq', '');

CREATE TABLE transformer_job_progress (
	job bigint NOT NULL REFERENCES transformer_job (id) ON DELETE CASCADE,
	worker integer NOT NULL,
	rows_done bigint NOT NULL DEFAULT 0,
	rows_failed bigint NOT NULL DEFAULT 0,
	first_at timestamptz,
	last_at timestamptz,
	PRIMARY KEY (job, worker)
);
COMMENT ON TABLE transformer_job_progress IS
'rows each worker of a job has written, and when it wrote its first and last batch';
SELECT pg_catalog.pg_extension_config_dump('transformer_job_progress', '');

CREATE TABLE transformer_job_errors (
	job bigint NOT NULL REFERENCES transformer_job (id) ON DELETE CASCADE,
	key jsonb NOT NULL,
	sqlstate text NOT NULL,
	message text NOT NULL,
	at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	owner regrole NOT NULL
);
CREATE INDEX transformer_job_errors_job ON transformer_job_errors (job);
COMMENT ON TABLE transformer_job_errors IS
'rows a job could not translate or write: their key, PostgreSQL''s SQLSTATE and message; retry_job_errors() queues them again';
SELECT pg_catalog.pg_extension_config_dump('transformer_job_errors', '');
-- each role sees the errors of its own jobs (pg_monitor and superusers all)
ALTER TABLE transformer_job_errors ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_jobs ON transformer_job_errors FOR SELECT
	USING (pg_catalog.pg_has_role(owner, 'USAGE') OR pg_catalog.pg_has_role('pg_monitor', 'USAGE'));
GRANT SELECT ON transformer_job_errors TO PUBLIC;

-- the batches of the last minutes, for the rate over the last minute (since 0.9.0;
-- the supervisor forgets batches older than 2 minutes)
CREATE TABLE transformer_job_batches (
	job bigint NOT NULL REFERENCES transformer_job (id) ON DELETE CASCADE,
	worker integer NOT NULL,
	started_at timestamptz NOT NULL,
	finished_at timestamptz NOT NULL,
	rows integer NOT NULL
);
CREATE INDEX transformer_job_batches_job ON transformer_job_batches (job, finished_at);
COMMENT ON TABLE transformer_job_batches IS
'the batches each job''s workers finished in the last two minutes: when and how many rows';

-- fine_tune() (since 0.10.0): the pairs its query returned, as token ids,
-- every step's loss, and the last saved state of a run, to resume from
CREATE TABLE transformer_job_pairs (
	job bigint NOT NULL REFERENCES transformer_job (id) ON DELETE CASCADE,
	n integer NOT NULL CHECK (n >= 0),
	source_ids integer[] NOT NULL,
	target_ids integer[] NOT NULL,
	PRIMARY KEY (job, n)
);
COMMENT ON TABLE transformer_job_pairs IS
'the sentence pairs of each fine_tune() job, in the order of its query, as the model''s tokenizers give them: the source''s ids and the labels (end-of-sentence and language tokens included)';
SELECT pg_catalog.pg_extension_config_dump('transformer_job_pairs', '');

CREATE TABLE transformer_job_steps (
	job bigint NOT NULL REFERENCES transformer_job (id) ON DELETE CASCADE,
	step integer NOT NULL CHECK (step > 0),
	loss double precision NOT NULL,
	tokens integer NOT NULL,
	learning_rate double precision NOT NULL,
	seconds double precision NOT NULL,
	at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	owner regrole NOT NULL,
	PRIMARY KEY (job, step)
);
COMMENT ON TABLE transformer_job_steps IS
'every step of each fine_tune() job: its loss (the batch''s mean over its target tokens, label smoothing included), its source and target tokens, the learning rate it used and its time';
SELECT pg_catalog.pg_extension_config_dump('transformer_job_steps', '');
-- each role sees the steps of its own jobs (pg_monitor and superusers all)
ALTER TABLE transformer_job_steps ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_jobs ON transformer_job_steps FOR SELECT
	USING (pg_catalog.pg_has_role(owner, 'USAGE') OR pg_catalog.pg_has_role('pg_monitor', 'USAGE'));
GRANT SELECT ON transformer_job_steps TO PUBLIC;

CREATE TABLE transformer_job_checkpoints (
	job bigint NOT NULL REFERENCES transformer_job (id) ON DELETE CASCADE,
	part integer NOT NULL CHECK (part >= 0),
	data bytea NOT NULL,
	PRIMARY KEY (job, part)
);
-- float arrays: no compression to try
ALTER TABLE transformer_job_checkpoints ALTER COLUMN data SET STORAGE EXTERNAL;
COMMENT ON TABLE transformer_job_checkpoints IS
'the last saved state of each fine_tune() job (its step, the weights, Adam''s moments, the checkpoints being averaged), in parts, so that it resumes after a pause or a restart where it was';
SELECT pg_catalog.pg_extension_config_dump('transformer_job_checkpoints', '');

CREATE VIEW transformer_jobs WITH (security_barrier) AS
SELECT j.id, j.kind, j.tbl AS "table", j.source, j.target, j.model, j.owner, j.state,
	CASE WHEN j.kind = 'fine_tune' AND j.state IN ('queued', 'running') THEN 'training'
		WHEN j.state IN ('queued', 'running') THEN 'backfilling'
		WHEN j.state = 'syncing' AND q.pending > 0 THEN 'syncing'
		WHEN j.state = 'syncing' THEN 'idle'
		ELSE j.state END AS activity,
	j.workers,
	p.done + p.failed + q.pending AS rows_total,
	p.done AS rows_done,
	p.failed AS rows_failed,
	q.pending AS rows_pending,
	r.rate AS rows_per_second,
	j.started_at,
	CASE WHEN j.kind = 'fine_tune' AND j.state IN ('queued', 'running') AND t.step_seconds > 0
		THEN pg_catalog.clock_timestamp() + pg_catalog.make_interval(secs => (t.steps_total - t.step) * t.step_seconds)
		WHEN j.state IN ('queued', 'running', 'syncing') AND q.pending > 0 AND r.rate > 0
		THEN pg_catalog.clock_timestamp() + pg_catalog.make_interval(secs => q.pending / r.rate) END AS eta,
	j.last_error,
	j.waiting,
	j.keep_in_sync, j.beam, j.batch_size, j.format, j.keep, j.source_lang, j.target_lang, j.source_lang_column,
	j.created_at, j.finished_at,
	j.new_model,
	t.step,
	t.steps_total,
	t.loss,
	t.tokens_per_second,
	j.settings
FROM transformer_job j
CROSS JOIN LATERAL (SELECT coalesce(sum(rows_done), 0)::bigint AS done,
	coalesce(sum(rows_failed), 0)::bigint AS failed
	FROM transformer_job_progress WHERE job = j.id) p
CROSS JOIN LATERAL (SELECT coalesce(sum(n), 0)::bigint AS pending FROM transformer_job_queue WHERE job = j.id) q
CROSS JOIN LATERAL (SELECT sum(rows) AS rows, min(started_at) AS since FROM transformer_job_batches
	WHERE job = j.id AND finished_at > pg_catalog.clock_timestamp() - interval '1 minute') b
CROSS JOIN LATERAL (SELECT CASE WHEN b.rows > 0
	THEN round((b.rows / greatest(extract(epoch FROM pg_catalog.clock_timestamp() - greatest(b.since, pg_catalog.clock_timestamp() - interval '1 minute')), 0.001))::numeric, 1)::double precision
	END AS rate) r
-- fine_tune(): its last step, the mean loss of its last 10 steps, tokens a second over its last minute
LEFT JOIN LATERAL (SELECT max(s.step) AS step, (j.settings->>'steps')::integer AS steps_total,
	(SELECT avg(l.loss) FROM (SELECT loss FROM transformer_job_steps WHERE job = j.id ORDER BY step DESC LIMIT 10) l) AS loss,
	round((sum(s.tokens) FILTER (WHERE s.at > pg_catalog.clock_timestamp() - interval '1 minute') /
		nullif(sum(s.seconds) FILTER (WHERE s.at > pg_catalog.clock_timestamp() - interval '1 minute'), 0))::numeric, 1)::double precision AS tokens_per_second,
	avg(s.seconds) FILTER (WHERE s.at > pg_catalog.clock_timestamp() - interval '1 minute') AS step_seconds
	FROM transformer_job_steps s WHERE s.job = j.id AND j.kind = 'fine_tune') t ON true
WHERE pg_catalog.pg_has_role(j.owner, 'USAGE') OR pg_catalog.pg_has_role('pg_monitor', 'USAGE');
COMMENT ON VIEW transformer_jobs IS
'background jobs: kind (translate, embed or fine_tune), state, activity (backfilling, syncing, idle or training), rows done, failed and pending, rows per second over the last minute, expected end, and why no worker runs (waiting); a fine_tune() job''s step of steps_total, mean loss over its last 10 steps and tokens per second; a role sees its own jobs, pg_monitor all';
GRANT SELECT ON transformer_jobs TO PUBLIC;

CREATE FUNCTION translate_column(tbl regclass, source text, target text, model text DEFAULT NULL,
                                 workers integer DEFAULT 1, keep_in_sync boolean DEFAULT true,
                                 beam integer DEFAULT NULL, batch_size integer DEFAULT NULL,
                                 format text DEFAULT 'text', keep text[] DEFAULT NULL,
                                 source_lang text DEFAULT NULL, target_lang text DEFAULT NULL,
                                 source_lang_column text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'translate_column'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION translate_column(regclass, text, text, text, integer, boolean, integer, integer, text, text[], text, text, text) IS
'declares a background job that writes translate(source) into target, with translate()''s format, keep and languages, for every row whose target is NULL; keep_in_sync also does rows inserted later or whose source changes (a target set by hand stays); source_lang_column names a column with each row''s source language; workers: at most this many background workers at a time, started by the database''s job supervisor while rows are queued; returns the job''s id';

CREATE FUNCTION embed_column(tbl regclass, source text, target text, model text DEFAULT NULL,
                             workers integer DEFAULT 1, keep_in_sync boolean DEFAULT true,
                             batch_size integer DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'embed_column'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION embed_column(regclass, text, text, text, integer, boolean, integer) IS
'declares a background job that writes embed(source, model) into target (real[], or pgvector''s vector) for every row whose target is NULL, with the guarantees of translate_column(); returns the job''s id';

CREATE FUNCTION wait_for_job(job bigint, timeout interval DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'wait_for_job'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION wait_for_job(bigint, interval) IS
'waits until the job has no row left to do (true; a WARNING says how many rows failed), or until timeout (false)';

CREATE FUNCTION pause_job(job bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'pause_job'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION pause_job(bigint) IS
'stops the job''s workers after their current batch; changed rows are still queued';

CREATE FUNCTION resume_job(job bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'resume_job'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION resume_job(bigint) IS
'starts the workers of a paused or failed job again';

CREATE FUNCTION cancel_job(job bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'cancel_job'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION cancel_job(bigint) IS
'stops the job for good: drops its sync trigger and its queue; rows written stay';

CREATE FUNCTION retry_job_errors(job bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'retry_job_errors'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION retry_job_errors(bigint) IS
'queues the rows in transformer_job_errors of the job again, and starts its workers; returns how many';

CREATE FUNCTION fine_tune(model text, new_model text, pairs text, epochs integer DEFAULT 1,
                          max_steps integer DEFAULT NULL, batch_size integer DEFAULT 32,
                          learning_rate float8 DEFAULT NULL, warmup_steps integer DEFAULT NULL,
                          label_smoothing float8 DEFAULT 0.1, dropout float8 DEFAULT NULL,
                          shuffle boolean DEFAULT true, seed integer DEFAULT 0,
                          average_last integer DEFAULT 1, source_lang text DEFAULT NULL,
                          target_lang text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'fine_tune'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION fine_tune(text, text, text, integer, integer, integer, float8, integer, float8, float8, boolean, integer, integer, text, text) IS
'declares a background job that trains a copy of model on the (source, target) pairs that the query pairs returns (run now, as the caller) and stores it as new_model: cross-entropy with label smoothing, Adam (0.9, 0.98, 1e-9), the paper''s learning rate when learning_rate is NULL (else constant after warmup_steps), the config''s dropout when dropout is NULL, the average of the last average_last checkpoints; source_lang and target_lang pick a multilingual model''s languages (NLLB, M2M100); returns the job''s id';

CREATE FUNCTION transformer_job_sync()
RETURNS trigger
AS 'MODULE_PATHNAME', 'transformer_job_sync'
LANGUAGE C;

COMMENT ON FUNCTION transformer_job_sync() IS
'statement triggers of keep_in_sync jobs: queue the keys of the rows inserted with a NULL target, or whose source changed while their target did not';

REVOKE ALL ON FUNCTION transformer_job_sync() FROM PUBLIC;
