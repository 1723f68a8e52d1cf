/* transformer--0.2.0--0.3.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION transformer UPDATE TO '0.3.0'" to load this file. \quit

-- int8 weights (quantize_model): a dtype of their own
ALTER TABLE transformer_tensors DROP CONSTRAINT transformer_tensors_dtype_check;
ALTER TABLE transformer_tensors ADD CONSTRAINT transformer_tensors_dtype_check
	CHECK (dtype IN ('F32', 'F16', 'BF16', 'I8'));

CREATE FUNCTION quantize_model(name text, new_name text, dtype text DEFAULT 'int8')
RETURNS bigint
AS 'MODULE_PATHNAME', 'quantize_model'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION quantize_model(text, text, text) IS
'stores a copy of a model with its weight matrices (linear layers, embeddings, output layer) in int8, per output row with an fp32 scale; biases, norms and positions in fp32; returns the number of parameters';

CREATE FUNCTION transformer_weight_files()
RETURNS TABLE (file text, kind text, database oid, name text, bytes bigint, state text)
AS 'MODULE_PATHNAME', 'transformer_weight_files'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION transformer_weight_files() IS
'the shared files of weights and tokenizers (transformer.weight_cache_dir): each file''s kind (weights or tokenizer), database, model or tokenizer name, size and state (current, stale, orphan, other database, dropped database, being written, unknown)';

REVOKE ALL ON FUNCTION transformer_weight_files() FROM PUBLIC;
