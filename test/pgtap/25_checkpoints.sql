-- Checkpoints as published (tools/gen_checkpoint_fixtures.py: small
-- random-weight models in each family's layout, their expected ids and
-- encoder outputs from tools/m2m100_torch.py and tools/marian_torch.py,
-- ports of transformers' modeling_m2m_100 / modeling_marian and of
-- NllbTokenizer / M2M100Tokenizer / MarianTokenizer, on torch.nn):
-- NLLB-200 from model.safetensors, pytorch_model.bin (zip) and the legacy
-- pickle format with legacy_behaviour; M2M100 from sharded safetensors;
-- Marian with separate vocabularies from sharded pytorch_model.bin; a
-- multi-target Marian with >>fra<< tokens.  200 greedy and 200 beam-4
-- decodes per fixture, the encoder's output within 1e-4, the language
-- options, and the errors of layouts we do not read.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`
\set fx :root/test/fixtures/checkpoints

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(62);

CREATE TEMP TABLE fixture (model text, dir text, family text);
INSERT INTO fixture VALUES
  ('nllb', 'nllb_tiny', 'nllb'), ('nllb_bin', 'nllb_tiny_bin', 'nllb'), ('nllb_legacy', 'nllb_tiny_legacy', 'nllb'),
  ('m2m100', 'm2m100_tiny', 'm2m100'), ('marian_sep', 'marian_sepvocab', 'marian'), ('marian_multi', 'marian_multi', 'marian');

SELECT cmp_ok(import_model(model, :'fx' || '/' || dir), '>', 0::bigint, 'import_model ' || dir) FROM fixture ORDER BY model;

CREATE TEMP TABLE cases AS
SELECT f.model, n, c FROM fixture f,
  jsonb_array_elements(pg_read_file(:'fx' || '/' || f.dir || '/expected.json')::jsonb->'cases') WITH ORDINALITY AS e(c, n);
CREATE FUNCTION pg_temp.ints(j jsonb) RETURNS int[] LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(array_agg(x::int ORDER BY i), '{}') FROM jsonb_array_elements_text(j) WITH ORDINALITY t(x, i) $$;
CREATE FUNCTION pg_temp.maxdiff(a real[], j jsonb) RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN cardinality(a) <> jsonb_array_length(j) THEN 'Infinity'::float8
    ELSE (SELECT max(abs(x::float8 - y::float8)) FROM unnest(a, ARRAY(SELECT jsonb_array_elements_text(j)::float8)) u(x, y)) END $$;

SET LOCAL transformer.max_length_factor = 0;
CREATE TEMP TABLE decoded AS
SELECT model, n, pg_temp.ints(c->'greedy') AS greedy_want, pg_temp.ints(c->'beam') AS beam_want,
       generate(c->>'text', model, beam_size => 1, source_lang => c->>'src_lang', target_lang => c->>'tgt_lang') AS greedy,
       generate(c->>'text', model, beam_size => 4, source_lang => c->>'src_lang', target_lang => c->>'tgt_lang') AS beam
FROM cases;

SELECT is((SELECT count(*)::int FROM decoded WHERE model = f.model AND greedy = greedy_want), 200,
          f.model || ': greedy ids identical to the reference, 200 sentences') FROM fixture f ORDER BY model;
SELECT is((SELECT count(*)::int FROM decoded WHERE model = f.model AND beam = beam_want), 200,
          f.model || ': beam-4 ids identical to the reference, 200 sentences') FROM fixture f ORDER BY model;
-- the outputs vary: a test that cannot tell models apart proves nothing
SELECT cmp_ok((SELECT count(DISTINCT greedy)::int FROM decoded WHERE model = f.model), '>=', 40,
              f.model || ': the references are not degenerate') FROM fixture f ORDER BY model;

-- the encoder's output, with the sentence's language token where the family puts one
SELECT cmp_ok((SELECT max(pg_temp.maxdiff(encoder_output(c->>'text', model), c->'encoder_output')) FROM cases
               WHERE model = f.model AND c ? 'encoder_output'), '<=', 1e-4::float8,
              f.model || ': encoder_output() within 1e-4 of the reference') FROM fixture f ORDER BY model;
SELECT diag('largest encoder_output() difference: ' || max(pg_temp.maxdiff(encoder_output(c->>'text', model), c->'encoder_output')))
FROM cases WHERE c ? 'encoder_output';

-- the tokenizers, id for id, against npm @huggingface/transformers on the fixtures' tokenizer.json
-- (2,000 Multi30k sentences each, German and English; tools/gen_npm_token_ids.py)
SELECT is((SELECT count(*)::int FROM jsonb_array_elements(pg_read_file(:'root' || '/test/fixtures/npm_tokens/' || f || '.json')::jsonb) e
           WHERE tokenize(e->>'text', m || '/source') = (pg_temp.ints(e->'ids'))[2:jsonb_array_length(e->'ids') - 1]), 2000,
          m || ': tokenize() gives the ids of the npm tokenizers on 2,000 sentences')
FROM (VALUES ('nllb', 'nllb_tiny'), ('m2m100', 'm2m100_tiny')) v(m, f);

-- the languages
SELECT is((SELECT string_agg(code || '=' || token_id, ' ' ORDER BY token_id) FROM model_languages('nllb')),
          'arb_Arab=1001 deu_Latn=1002 eng_Latn=1003 fra_Latn=1004 ita_Latn=1005 rus_Cyrl=1006 spa_Latn=1007 zho_Hans=1008',
          'model_languages(nllb): the codes of tokenizer_config.json with their ids');
SELECT is((SELECT token FROM model_languages('m2m100') WHERE code = 'de'), '__de__', 'M2M100 codes are de, their tokens __de__');
SELECT is((SELECT string_agg(code, ' ' ORDER BY code) FROM model_languages('marian_multi')), 'fra ita por spa',
          'a multi-target Marian: the >>fra<< tokens of its vocabulary');
SELECT is((SELECT count(*)::int FROM model_languages('marian_sep')), 0, 'a Marian model of one pair has none');
-- NLLB drops the forced language token and fairseq's specials from the text
SELECT is(translate(c->>'text', 'nllb', beam_size => 1, source_lang => 'deu_Latn', target_lang => c->>'tgt_lang'), c->>'greedy_text',
          'translate() decodes as decode(skip_special_tokens=True)') FROM cases WHERE model = 'nllb' AND n = 1;
-- a column of mixed languages passes source_lang per row
CREATE TEMP TABLE mixed AS SELECT n, c->>'text' AS body, CASE WHEN n % 2 = 0 THEN 'deu_Latn' ELSE 'fra_Latn' END AS lang
FROM cases WHERE model = 'nllb' AND n <= 6;
SELECT is((SELECT count(DISTINCT g)::int FROM (SELECT generate(body, 'nllb', beam_size => 1, source_lang => lang, target_lang => 'eng_Latn') AS g,
                                                     generate(body, 'nllb', beam_size => 1, source_lang => 'deu_Latn', target_lang => 'eng_Latn') AS d
                                              FROM mixed WHERE lang = 'fra_Latn') x WHERE g <> d), 3,
          'source_lang per row: the source token changes the translation');
SELECT is(generate('Ein Hund.', 'nllb', beam_size => 1, target_lang => 'eng_Latn'),
          generate('Ein Hund.', 'nllb', beam_size => 1, source_lang => 'deu_Latn', target_lang => 'eng_Latn'),
          'source_lang defaults to tokenizer_config.json''s src_lang');
SELECT is((generate('Ein Hund.', 'nllb', beam_size => 1, source_lang => 'deu_Latn', target_lang => 'fra_Latn'))[1], 1004,
          'target_lang is forced as the first token');
SELECT throws_ok($$SELECT generate('Ein Hund.', 'nllb', source_lang => 'xxx_Latn', target_lang => 'eng_Latn')$$, '22023',
                 'model "nllb" has no language "xxx_Latn"', 'an unknown source language');
SELECT throws_ok($$SELECT translate('Ein Hund.', 'nllb', target_lang => 'de')$$, '22023',
                 'model "nllb" has no language "de"', 'an unknown target language');
SELECT throws_ok($$SELECT translate('Ein Hund.', 'marian_multi')$$, '22023',
                 'model "marian_multi" needs the target language', 'a multi-target Marian without a target language');
SELECT throws_ok($$SELECT translate('Ein Hund.', 'marian_sep', target_lang => 'fra')$$, '22023',
                 'model "marian_sep" has no language tokens', 'language options on a model of one pair');
-- Marian: target_lang prepends >>fra<<, as a text starting with >>fra<< does in MarianTokenizer
SELECT is(generate('A man in an orange hat.', 'marian_multi', beam_size => 1, target_lang => 'fra'),
          generate('>>fra<< A man in an orange hat.', 'marian_multi', beam_size => 1), 'target_lang => fra is >>fra<< in the text');
SELECT is(translate('>>spa<< A man. A dog.', 'marian_multi', beam_size => 1),
          translate('A man. A dog.', 'marian_multi', beam_size => 1, target_lang => 'spa'),
          'translate(): >>spa<< at the start of a document holds for all its sentences');

-- the same model from three layouts is one model
SELECT is((SELECT count(*)::int FROM decoded a JOIN decoded b USING (n) WHERE a.model = 'nllb' AND b.model = 'nllb_bin' AND a.greedy = b.greedy), 200,
          'nllb_tiny from model.safetensors and from pytorch_model.bin decode identically');
SELECT is((SELECT count(*)::int FROM transformer_tensors WHERE model = 'nllb_bin'), (SELECT count(*)::int FROM transformer_tensors WHERE model = 'nllb'),
          'tied weights of pytorch_model.bin are stored once');
SELECT is((SELECT shape FROM transformer_tensors WHERE model = 'marian_sep' AND name = 'lm_head.weight'), '{500,32}'::bigint[],
          'separate vocabularies: the decoder''s own output layer');
-- tensors in parts: rows of at most transformer.tensor_part_size, joined again on load
SET LOCAL transformer.tensor_part_size = '1kB';
SELECT cmp_ok(import_model('nllb_parts', :'fx' || '/nllb_tiny_bin'), '>', 0::bigint, 'import_model in parts of 1 kB');
RESET transformer.tensor_part_size;
SELECT is((SELECT max(part)::int FROM transformer_tensors WHERE model = 'nllb_parts' AND name = 'model.shared.weight'), 126,
          'the embeddings (1010 x 32 fp32, 129,280 bytes) span 127 rows');
SELECT is((SELECT count(*)::int FROM decoded a WHERE a.model = 'nllb_bin' AND n <= 20 AND
             generate((SELECT c->>'text' FROM cases WHERE model = 'nllb_bin' AND cases.n = a.n), 'nllb_parts', beam_size => 4,
                      source_lang => 'deu_Latn', target_lang => (SELECT c->>'tgt_lang' FROM cases WHERE model = 'nllb_bin' AND cases.n = a.n)) = a.beam), 20,
          'a model stored in parts decodes as the model stored whole');
SELECT is(export_model('nllb_parts', '/tmp/transformer_tap_parts_' || pg_backend_pid()), (SELECT count(DISTINCT name)::int FROM transformer_tensors WHERE model = 'nllb_parts'),
          'export_model writes each tensor once');
SELECT is(md5(pg_read_binary_file('/tmp/transformer_tap_parts_' || pg_backend_pid() || '/model.safetensors')),
          (SELECT md5(pg_read_binary_file('/tmp/transformer_tap_parts_' || pg_backend_pid() || '/model.safetensors')) FROM (SELECT export_model('nllb_bin', '/tmp/transformer_tap_parts_' || pg_backend_pid())) x),
          'and its safetensors file is the one of the model stored whole');
-- parts cut inside a row (997 bytes, rows of 32 to 256 bytes): a model is packed part by part as
-- it loads, and the rest of a row is carried into the next part
CREATE FUNCTION pg_temp.resplit(m text, bytes int) RETURNS void LANGUAGE plpgsql AS $$ BEGIN
  CREATE TEMP TABLE whole AS
  SELECT name, shape, dtype, min(data_offset) AS data_offset, string_agg(data, ''::bytea ORDER BY part) AS data
  FROM transformer_tensors WHERE model = m GROUP BY name, shape, dtype;
  DELETE FROM transformer_tensors WHERE model = m;
  INSERT INTO transformer_tensors (model, name, shape, dtype, data_offset, data, part)
  SELECT m, name, shape, dtype, data_offset, substr(data, k * bytes + 1, bytes), k
  FROM whole, generate_series(0, (length(data) - 1) / bytes) k;
  DROP TABLE whole;
END $$;
SELECT pg_temp.resplit('nllb_parts', 997);
SELECT is((SELECT count(*)::int FROM decoded a WHERE a.model = 'nllb_bin' AND n <= 20 AND
             generate((SELECT c->>'text' FROM cases WHERE model = 'nllb_bin' AND cases.n = a.n), 'nllb_parts', beam_size => 4,
                      source_lang => 'deu_Latn', target_lang => (SELECT c->>'tgt_lang' FROM cases WHERE model = 'nllb_bin' AND cases.n = a.n)) = a.beam), 20,
          'and a model in parts cut inside its rows (997 bytes) as well');
-- parts that do not join up: the rows are untrusted
UPDATE transformer_tensors SET part = 200 WHERE model = 'nllb_parts' AND name = 'model.shared.weight' AND part = 5;
SELECT throws_ok($$SELECT generate('Ein Hund.', 'nllb_parts', source_lang => 'deu_Latn', target_lang => 'eng_Latn')$$, 'XX001',
                 NULL, 'a missing part: the model is damaged');

SELECT is(quantize_model('nllb', 'nllb8'), (SELECT import_model('nllb', :'fx' || '/nllb_tiny')), 'quantize_model keeps an NLLB model''s parameters');
SELECT is((SELECT count(*)::int FROM model_languages('nllb8')), 8, 'and its languages');
CREATE TEMP TABLE int8_whole AS
SELECT n, generate((SELECT c->>'text' FROM cases WHERE model = 'nllb_bin' AND cases.n = a.n), 'nllb8', beam_size => 4,
                   source_lang => 'deu_Latn', target_lang => (SELECT c->>'tgt_lang' FROM cases WHERE model = 'nllb_bin' AND cases.n = a.n)) AS beam
FROM decoded a WHERE a.model = 'nllb_bin' AND n <= 10;
SELECT pg_temp.resplit('nllb8', 997);
SELECT is((SELECT count(*)::int FROM int8_whole a WHERE
             generate((SELECT c->>'text' FROM cases WHERE model = 'nllb_bin' AND cases.n = a.n), 'nllb8', beam_size => 4,
                      source_lang => 'deu_Latn', target_lang => (SELECT c->>'tgt_lang' FROM cases WHERE model = 'nllb_bin' AND cases.n = a.n)) = a.beam), 10,
          'an int8 model in parts cut inside its rows decodes as stored whole');

-- layouts we do not read, and pickles we never run: clear errors (tools/gen_bad_checkpoints.py)
\set bad :root/test/fixtures/bad_checkpoints
CREATE TEMP TABLE bad (dir text, state text, message text);
INSERT INTO bad VALUES
  ('hostile_system', '22023', 'pickle names the global "posix.system", which a state dict never needs; refused'),
  ('hostile_eval', '22023', 'pickle names the global "__builtin__.eval", which a state dict never needs; refused'),
  ('hostile_popen', '22023', 'pickle names the global "subprocess.Popen", which a state dict never needs; refused'),
  ('hostile_getattr', '22023', 'pickle names the global "builtins.getattr", which a state dict never needs; refused'),
  ('hostile_legacy', '22023', 'pickle names the global "posix.system", which a state dict never needs; refused'),
  ('noncontig', '22023', 'non-contiguous view'),
  ('deflated', '22023', 'is compressed (method 8); only stored entries are supported'),
  ('tar', '22023', 'the file is a tar archive, the checkpoint format of torch before 0.4'),
  ('dtypes', '0A000', 'has the unsupported dtype'),
  ('tf_only', '0A000', 'has only TensorFlow (tf_model.h5) weights'),
  ('flax_only', '0A000', 'has only Flax (flax_model.msgpack) weights'),
  ('no_weights', '58P01', 'has no model weights'),
  ('no_config', '58P01', 'lacks config.json'),
  ('t5', '0A000', 'model type "t5" is not supported'),
  ('no_vocab', '58P01', 'lacks vocab.json'),
  ('no_languages', '22023', 'names no language tokens'),
  ('index_extra', '22023', '"model.encoder.extra.weight" is listed, but its shard'),
  ('index_escape', '22023', 'is not a file of the directory');
CREATE FUNCTION pg_temp.import_error(dir text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE st text; msg text; det text;
BEGIN
  PERFORM import_model('bad', dir);
  RETURN 'imported';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
  RETURN st || ' ' || msg || ' ' || coalesce(det, '');
END $$;
SELECT is((SELECT string_agg(dir || ': ' || e, E'\n' ORDER BY dir) FROM (SELECT dir, pg_temp.import_error(:'bad' || '/' || dir) AS e, state, message FROM bad) x
           WHERE e NOT LIKE state || ' %' OR strpos(lower(e), lower(message)) = 0), NULL,
          'each refused layout gets its SQLSTATE and a message naming what is wrong (' || (SELECT count(*) FROM bad) || ' directories)');
SELECT is((SELECT count(*)::int FROM transformer_models WHERE name = 'bad'), 0, 'and nothing is stored');
SELECT ok(pg_stat_file('/tmp/tf_torch_pwned', true) IS NULL, 'no pickle ran: os.system never wrote its file');
SELECT * FROM finish();
ROLLBACK;
