-- Vocabularies as vocab_json bytes (issue 23): what databases of other
-- encodings store (test/encodings/run.sh runs those), read here in a UTF8
-- database by the same JSON reader, against the jsonb vocabulary's answers.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(8);
SELECT import_model('multi30k_de_en') \g /dev/null
-- the same tokenizer with its vocabulary as the file's bytes
INSERT INTO transformer_tokenizers (name, model, vocab, vocab_json)
SELECT 'bytes', t.model, NULL, m.vocab_json
FROM transformer_tokenizers t, transformer_models m WHERE t.name = 'multi30k_de_en/source' AND m.name = 'multi30k_de_en';
SELECT is(tokenize('Ein kleines Mädchen isst ein Eis „Schön“.', 'bytes'), tokenize('Ein kleines Mädchen isst ein Eis „Schön“.', 'multi30k_de_en/source'),
  'vocab_json: the ids of the jsonb vocabulary');
SELECT is(detokenize('{523,592,7993}', 'bytes'), detokenize('{523,592,7993}', 'multi30k_de_en/source'), 'vocab_json: the pieces of its ids');
-- escapes are read as JSON reads them
UPDATE transformer_tokenizers SET vocab_json = convert_to(replace(convert_from(vocab_json, 'UTF8'), U&'\2581Hund"', '\u2581Hund"'), 'UTF8') WHERE name = 'bytes';
SELECT is(tokenize('Ein Hund.', 'bytes'), tokenize('Ein Hund.', 'multi30k_de_en/source'), 'vocab_json: a \u escape is the character');
-- and checked as a file would be
UPDATE transformer_tokenizers SET vocab_json = convert_to('{"<unk>": 1, "a": {"b": 2}}', 'UTF8') WHERE name = 'bytes';
SELECT throws_ok($$SELECT tokenize('a', 'bytes')$$, '22023', 'vocabulary entry "a" is not a number', 'vocab_json: a nested object is refused');
UPDATE transformer_tokenizers SET vocab_json = convert_to('{"<unk>": 1, "a": "2"}', 'UTF8') WHERE name = 'bytes';
SELECT throws_ok($$SELECT tokenize('a', 'bytes')$$, '22023', 'vocabulary entry "a" is not a number', 'vocab_json: a string id is refused');
UPDATE transformer_tokenizers SET vocab_json = convert_to('[1, 2]', 'UTF8') WHERE name = 'bytes';
SELECT throws_ok($$SELECT tokenize('a', 'bytes')$$, '22023', 'the vocabulary must be a JSON object mapping pieces to ids', 'vocab_json: an array is refused');
UPDATE transformer_tokenizers SET vocab_json = convert_to('{"<unk>": 1, "a": 2.5}', 'UTF8') WHERE name = 'bytes';
SELECT throws_ok($$SELECT tokenize('a', 'bytes')$$, '22023', 'vocabulary entry "a" has the invalid id 2.5', 'vocab_json: a fractional id is refused');
UPDATE transformer_tokenizers SET vocab_json = '\x7b22c3'::bytea WHERE name = 'bytes';
SELECT throws_ok($$SELECT tokenize('a', 'bytes')$$, '22021', 'the vocabulary is not valid UTF-8', 'vocab_json: bytes that are not UTF-8 are refused');

SELECT * FROM finish();
ROLLBACK;
