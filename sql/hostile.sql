-- hostile rows: our tables written by plain SQL, bypassing load_model()'s
-- checks.  Whatever they hold, the next use is a clear ERROR naming the
-- model and the tensor, never a crash; one edge case per line.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS transformer;
RESET client_min_messages;
\set root `pwd`
\set dir :root/test/fixtures/models/marian_swish
SELECT import_model('h', :'dir') > 0 AS imported;
SELECT translate('a', 'h') AS good \gset
-- each case is one transaction: spoil a row, use the model, roll back
CREATE FUNCTION pg_temp.spoil(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE sql;
  RETURN translate('a', 'h');
END $$;

-- shapes
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tensors SET shape = '{-3946369}' WHERE model = 'h' AND name = 'model.encoder.layers.0.fc1.bias'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tensors SET shape = '{4611686018427387904,4}' WHERE model = 'h' AND name = 'model.encoder.layers.0.fc1.bias'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tensors SET shape = '{2147483648,0}' WHERE model = 'h' AND name = 'model.encoder.layers.0.fc1.bias'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tensors SET shape = '{{8,8}}' WHERE model = 'h' AND name = 'model.encoder.layers.0.fc1.bias'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tensors SET shape = '{64,NULL}' WHERE model = 'h' AND name = 'model.encoder.layers.0.fc1.bias'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tensors SET shape = '{1,1,1,1,1,1,1,1,64}' WHERE model = 'h' AND name = 'model.encoder.layers.0.fc1.bias'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tensors SET shape = '{32}', data = substring(data FROM 1 FOR 128) WHERE model = 'h' AND name = 'model.encoder.layers.0.fc1.bias'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tensors SET shape = '[0:0]={64}' WHERE model = 'h' AND name = 'model.encoder.layers.0.fc1.bias'$$) = :'good' AS lower_bound_ignored; ROLLBACK;
-- bytes shorter or longer than the shape needs
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tensors SET data = substring(data FROM 1 FOR 12) WHERE model = 'h' AND name = 'model.encoder.layers.0.fc1.bias'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tensors SET data = '' WHERE model = 'h' AND name = 'model.shared.weight'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tensors SET data = data || '\x00' WHERE model = 'h' AND name = 'model.encoder.layers.0.fc1.bias'$$); ROLLBACK;
-- dtypes: a known one that does not fit the bytes, and unknown ones (past the CHECK)
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tensors SET dtype = 'F16' WHERE model = 'h' AND name = 'model.encoder.layers.0.fc1.bias'$$); ROLLBACK;
BEGIN; ALTER TABLE transformer_tensors DROP CONSTRAINT transformer_tensors_dtype_check; SELECT pg_temp.spoil($$UPDATE transformer_tensors SET dtype = 'I64' WHERE model = 'h' AND name = 'model.encoder.layers.0.fc1.bias'$$); ROLLBACK;
BEGIN; ALTER TABLE transformer_tensors DROP CONSTRAINT transformer_tensors_dtype_check; SELECT pg_temp.spoil($$UPDATE transformer_tensors SET dtype = 'F32 and then some' WHERE model = 'h' AND name = 'model.encoder.layers.0.fc1.bias'$$); ROLLBACK;
-- NULLs past NOT NULL
BEGIN; ALTER TABLE transformer_tensors ALTER shape DROP NOT NULL; SELECT pg_temp.spoil($$UPDATE transformer_tensors SET shape = NULL WHERE model = 'h' AND name = 'model.encoder.layers.0.fc1.bias'$$); ROLLBACK;
BEGIN; ALTER TABLE transformer_models ALTER config DROP NOT NULL; SELECT pg_temp.spoil($$UPDATE transformer_models SET config = NULL WHERE name = 'h'$$); ROLLBACK;
-- shapes that do not fit the configuration; tensors missing, extra, not finite
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tensors SET shape = '{16}', data = substring(data FROM 1 FOR 64) WHERE model = 'h' AND name = 'model.encoder.layers.0.fc1.bias'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$DELETE FROM transformer_tensors WHERE model = 'h' AND name = 'model.encoder.layers.0.fc1.bias'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$INSERT INTO transformer_tensors SELECT model, 'extra', shape, dtype, 0, data FROM transformer_tensors WHERE model = 'h' AND name = 'model.encoder.layers.0.fc1.bias'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tensors SET data = overlay(data PLACING '\x0000c07f' FROM 1) WHERE model = 'h' AND name = 'model.encoder.layers.0.fc1.bias'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$INSERT INTO transformer_tensors SELECT 'h', 'x' || i, '{1}', 'F32', 0, '\x00000000' FROM generate_series(1, 100001) i$$); ROLLBACK;
-- configurations
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_models SET config = config || '{"d_model": -1}' WHERE name = 'h'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_models SET config = config || '{"vocab_size": 100}' WHERE name = 'h'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_models SET config = '[1,2]' WHERE name = 'h'$$); ROLLBACK;
-- tokenizers: bytes and vocabularies checked as files are
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tokenizers SET model = '\x0a0b' WHERE name = 'h/source'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tokenizers SET model = substring(model FROM 1 FOR octet_length(model) / 2) WHERE name = 'h/target'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tokenizers SET vocab = '{"<unk>": 0, "a": -5}' WHERE name = 'h/source'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tokenizers SET vocab = '[1]' WHERE name = 'h/source'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tokenizers SET vocab = vocab || jsonb_build_object((tokens('a', 'h/source'))[1], 5000000) WHERE name = 'h/source'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil($$UPDATE transformer_tokenizers SET vocab = jsonb_build_object('<unk>', 0) WHERE name = 'h/target'$$); ROLLBACK;
-- int8 rows: a scale missing, negative or not finite, int8 where fp32 belongs, a scale without int8
SELECT quantize_model('h', 'h8') > 0 AS quantized;
CREATE FUNCTION pg_temp.spoil8(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE sql;
  RETURN translate('a', 'h8');
END $$;
BEGIN; SELECT pg_temp.spoil8($$DELETE FROM transformer_tensors WHERE model = 'h8' AND name = 'model.encoder.layers.0.fc1.weight_scale'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil8($$UPDATE transformer_tensors SET data = overlay(data PLACING '\x000080bf' FROM 1) WHERE model = 'h8' AND name = 'model.encoder.layers.0.fc1.weight_scale'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil8($$UPDATE transformer_tensors SET data = overlay(data PLACING '\x0000c07f' FROM 1) WHERE model = 'h8' AND name = 'model.encoder.layers.0.fc1.weight_scale'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil8($$UPDATE transformer_tensors SET dtype = 'I8', data = substring(data FROM 1 FOR 64) WHERE model = 'h8' AND name = 'model.encoder.layers.0.fc1.bias'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil8($$UPDATE transformer_tensors SET dtype = 'I8', shape = '{64}', data = substring(data FROM 1 FOR 64) WHERE model = 'h8' AND name = 'model.encoder.layers.0.fc1.weight_scale'$$); ROLLBACK;
BEGIN; SELECT pg_temp.spoil8($$INSERT INTO transformer_tensors SELECT model, 'model.encoder.layers.0.fc1.bias_scale', shape, dtype, 0, data FROM transformer_tensors WHERE model = 'h8' AND name = 'model.encoder.layers.0.fc1.bias'$$); ROLLBACK;
-- -128 is not what quantize_model() writes, but computes without overflow
BEGIN; SELECT length(pg_temp.spoil8($$UPDATE transformer_tensors SET data = decode(repeat('80', octet_length(data)), 'hex') WHERE model = 'h8' AND name LIKE '%.weight' AND dtype = 'I8'$$)) >= 0 AS all_minus_128_computes; ROLLBACK;
SELECT drop_model('h8');
-- a failed load is not cached: the intact model still translates
SELECT translate('a', 'h') = :'good' AS intact;
-- a configuration that makes a buffer absurd: 54000 before allocating
BEGIN; UPDATE transformer_models SET config = config || '{"max_position_embeddings": 65536}' WHERE name = 'h'; SELECT encoder_output(repeat('a ', 20000), 'h'); ROLLBACK;
SELECT drop_model('h');
