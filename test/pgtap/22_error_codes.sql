-- Every error class the README and docs/ promise, asserted by SQLSTATE as well as by
-- message (the pg_regress files show messages only).  One line per promise;
-- the attention functions' codes are in 01_interface, server files without
-- the privilege (42501) in 10_privileges, a tensor over 1 GB (54000) in
-- 11_large_files.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(19);
SELECT import_model('multi30k_de_en') \g /dev/null
CREATE TEMP TABLE parts AS
SELECT (SELECT model FROM transformer_tokenizers WHERE name = 'multi30k_de_en/source') AS spm,
       (SELECT config_json FROM transformer_models WHERE name = 'multi30k_de_en') AS config,
       (SELECT vocab_json FROM transformer_models WHERE name = 'multi30k_de_en') AS vocab,
       '\x02000000000000007b7d'::bytea AS no_tensors;   -- a safetensors file of '{}'

-- tokenizers
SELECT throws_ok($$SELECT tokenize('x', 'no_such_tokenizer')$$,
  '42704', 'tokenizer "no_such_tokenizer" does not exist', 'tokenizers: an unknown tokenizer is 42704');
SELECT throws_ok($$SELECT load_tokenizer('bad', '\x0a0541'::bytea)$$,
  '22023', 'invalid SentencePiece model', 'tokenizers: a corrupt model file is 22023');
SELECT throws_ok($$SELECT load_tokenizer('bad', spm, '[1]') FROM parts$$,
  '22023', 'the vocabulary must be a JSON object mapping pieces to ids', 'tokenizers: a vocabulary that is not an object is 22023');
SELECT throws_ok($$SELECT load_tokenizer('bad', spm, '{"a": 0}') FROM parts$$,
  '22023', 'the vocabulary has no entry for the unknown piece "<unk>"', 'tokenizers: a vocabulary without <unk> is 22023');
SELECT throws_ok($$SELECT detokenize(ARRAY[99999], 'multi30k_de_en/target')$$,
  '22023', 'id 99999 is not in the vocabulary of tokenizer "multi30k_de_en/target"', 'tokenizers: an id outside the vocabulary is 22023');
SELECT throws_ok($$SELECT tokenize(repeat('a', 2 * 1024 * 1024), 'multi30k_de_en/source')$$,
  '54000', 'input of 2097152 bytes exceeds transformer.max_input_bytes (1048576 bytes)',
  'inputs: text over transformer.max_input_bytes is 54000');
SET transformer.max_input_bytes = '1GB';
SELECT throws_ok($$SELECT tokenize(repeat('a', 17 * 1024 * 1024), 'multi30k_de_en/source')$$,
  '54000', 'input is too long to tokenize', 'tokenizers: a normalized form over 16 MB is 54000');
RESET transformer.max_input_bytes;

-- models
SELECT throws_ok($$SELECT translate('x', 'no_such_model')$$,
  '42704', 'model "no_such_model" does not exist', 'models: an unknown model is 42704');
SELECT throws_ok($$SELECT load_model('bad', config, '\x00'::bytea, spm, spm, vocab) FROM parts$$,
  '22023', 'invalid safetensors file', 'models: a truncated safetensors file is 22023');
SELECT throws_ok($$SELECT load_model('bad', convert_to('{"d_model": 0}', 'UTF8'), no_tensors, spm, spm, vocab) FROM parts$$,
  '22023', 'model configuration "d_model" is 0', 'models: a configuration that does not fit is 22023');
SELECT throws_ok($$SELECT load_model('bad', config, no_tensors, spm, spm, vocab) FROM parts$$,
  '22023', 'model lacks the tensor "model.encoder.embed_tokens.weight"', 'models: tensors that do not fit the configuration are 22023');
SELECT throws_ok($$SELECT generate(' ', 'multi30k_de_en')$$,
  '22023', 'input text is empty', 'models: an empty input to generate() is 22023');
SELECT throws_ok($$SELECT translate('x', 'multi30k_de_en', beam_size => 0)$$,
  '22023', 'beam_size must be between 1 and 64', 'models: a bad beam_size is 22023');
SELECT throws_ok($$SELECT translate('x', 'multi30k_de_en', max_length => 0)$$,
  '22023', 'max_length must be between 1 and 257 for model "multi30k_de_en"', 'models: a bad max_length is 22023');
SELECT throws_ok($$SELECT generate(repeat('Mann ', 300), 'multi30k_de_en')$$,
  '54000', 'input text is too long for model "multi30k_de_en"', 'models: an input longer than the positions is 54000');
SELECT lives_ok($$SELECT translate(repeat('Mann ', 300), 'multi30k_de_en')$$, '... which translate() splits instead');
-- a dump restored without the tensor rows: XX001, naming the tensor and how to mend it
SAVEPOINT restored;
DELETE FROM transformer_tensors WHERE model = 'multi30k_de_en';
SELECT throws_ok($$SELECT translate('Ein Hund.', 'multi30k_de_en')$$,
  'XX001', 'model lacks the tensor "model.encoder.embed_tokens.weight"', 'models: stored rows without their tensors are XX001');
CREATE FUNCTION pg_temp.hint_of(sql text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE h text;
BEGIN EXECUTE sql; RETURN NULL;
EXCEPTION WHEN OTHERS THEN GET STACKED DIAGNOSTICS h = PG_EXCEPTION_HINT; RETURN h; END $f$;
SELECT matches(pg_temp.hint_of($$SELECT translate('Ein Hund.', 'multi30k_de_en')$$), 'pg_restore --data-only --table=transformer_tensors',
  '... with a hint of how to restore them');
ROLLBACK TO restored;
-- a stored row damaged behind the extension's back
UPDATE transformer_tensors SET data = substring(data FOR 10) WHERE model = 'multi30k_de_en' AND name = 'final_logits_bias';
SELECT throws_ok($$SELECT translate('Ein Hund.', 'multi30k_de_en')$$,
  'XX001', 'model "multi30k_de_en" is damaged', 'models: inconsistent stored rows are XX001');

SELECT * FROM finish();
ROLLBACK;
