/* transformer--0.7.0--0.8.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION transformer UPDATE TO '0.8.0'" to load this file. \quit

-- What this server runs (since 0.8.0)

CREATE FUNCTION transformer_version()
RETURNS text
AS 'MODULE_PATHNAME', 'transformer_version'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION transformer_version() IS
'the library''s version, the kernels chosen at run time for this CPU (fp32: avx512, avx2 or portable; int8: avx512vnni, avx2 or portable), OpenBLAS''s configuration and core, and the ICU and libxml2 versions';

-- Per-model statistics in shared memory (since 0.8.0)

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

-- Sentence embeddings (since 0.8.0).  embed() was the paper's input layer up
-- to 0.7.0: it keeps working under the name input_embeddings() (views that
-- called it follow the rename), and embed() now gives one vector per text.

ALTER TABLE transformer_models ADD COLUMN embedding jsonb;
COMMENT ON COLUMN transformer_models.embedding IS
'an encoder-only model''s embed() settings, from sentence-transformers'' files: pooling (cls, mean, max, mean_sqrt_len), normalize, max_seq_length (tokens, special ones included), and the ids of the first and last special tokens; NULL: a translation model';

ALTER FUNCTION embed(text, text) RENAME TO input_embeddings;
CREATE OR REPLACE FUNCTION input_embeddings(input text, model text)
RETURNS real[]
AS 'MODULE_PATHNAME', 'input_embeddings'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION input_embeddings(text, text) IS
'tokens x d_model: the paper''s input layer for input (the tokens the encoder reads): token embeddings, scaled as configured, plus positions (and an encoder-only model''s token type and LayerNorm)';

CREATE OR REPLACE FUNCTION encoder_output(input text, model text)
RETURNS real[]
AS 'MODULE_PATHNAME', 'encoder_output'
LANGUAGE C STABLE STRICT PARALLEL SAFE
COST 10000;

COMMENT ON FUNCTION encoder_output(text, text) IS
'tokens x d_model: the encoder''s output for input (a translation model''s: end-of-sentence included; an encoder-only model''s: [CLS] ... [SEP] or <s> ... </s>); also transformer.encode()';
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


COMMENT ON FUNCTION import_tokenizer(text, text, text) IS
'stores a tokenizer from server files: a SentencePiece model (.model/.spm) and optionally a Marian vocab.json, or a Hugging Face tokenizer directory (BertTokenizer''s vocab.txt; XLMRobertaTokenizer''s sentencepiece.bpe.model); superuser or pg_read_server_files only; returns the number of pieces';
