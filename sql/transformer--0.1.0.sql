/* transformer--0.1.0.sql */

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
	created timestamptz NOT NULL DEFAULT now()
);
-- models are read whole on every load: no compression to undo
ALTER TABLE transformer_tokenizers ALTER COLUMN model SET STORAGE EXTERNAL;
COMMENT ON TABLE transformer_tokenizers IS
'SentencePiece tokenizers: the .model/.spm file as is, and an optional vocabulary (piece -> model id, as Marian''s vocab.json)';
COMMENT ON COLUMN transformer_tokenizers.model IS 'the serialized SentencePiece ModelProto';
COMMENT ON COLUMN transformer_tokenizers.vocab IS 'piece -> model id; NULL: ids are SentencePiece''s own';
SELECT pg_catalog.pg_extension_config_dump('transformer_tokenizers', '');
GRANT SELECT ON transformer_tokenizers TO PUBLIC;

CREATE FUNCTION transformer_invalidate_cache()
RETURNS trigger
AS 'MODULE_PATHNAME', 'transformer_invalidate_cache'
LANGUAGE C;

COMMENT ON FUNCTION transformer_invalidate_cache() IS
'trigger: makes every backend reload tokenizers (and models) after a change';

CREATE TRIGGER transformer_tokenizers_changed
AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON transformer_tokenizers
FOR EACH STATEMENT EXECUTE FUNCTION transformer_invalidate_cache();

CREATE FUNCTION import_tokenizer(name text, spm_path text, vocab_path text DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'import_tokenizer'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION import_tokenizer(text, text, text) IS
'stores a tokenizer from server files: a SentencePiece model (.model/.spm) and optionally a Marian vocab.json; superuser or pg_read_server_files only; returns the number of pieces';

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
