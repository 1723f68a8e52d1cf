-- transformer.compute_type = 'int8' and 'auto' (issue 40, item 6): a model's
-- float matrices quantized per row at load, as quantize_model() stores them,
-- so its products run in int8 (AMX or VNNI where the CPU has them); 'auto',
-- the default, computes embed() that way and everything else as stored.
-- The int8 kernels are checked against their definition in make unittest
-- (test_cpu_kernels: bitwise, every level).  It commits (rows of an open
-- transaction are never shared as files), drops what an earlier run left
-- before it begins, and what it made at the end.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

SET client_min_messages = warning;
DROP EXTENSION IF EXISTS transformer CASCADE;
CREATE EXTENSION transformer;
SELECT plan(17);

SELECT is(current_setting('transformer.compute_type'), 'auto', 'the compute type is auto unless set');
SET transformer.compute_type = 'default';
SELECT is(current_setting('transformer.compute_type'), 'stored', '''default'' (0.10.0''s name) is ''stored''');
RESET transformer.compute_type;

SELECT import_model('multi30k_de_en') IS NOT NULL AS imported \gset
SELECT import_model('multi30k_sentence_de_en') IS NOT NULL AS imported \gset
SELECT quantize_model('multi30k_de_en', 'multi30k_de_en_i8') IS NOT NULL AS quantized \gset
SELECT quantize_model('multi30k_sentence_de_en', 'sentence_i8') IS NOT NULL AS quantized \gset

CREATE TEMP TABLE src AS
SELECT n, t FROM (SELECT row_number() OVER () AS n, t FROM unnest(ARRAY[
  'Ein Mann fährt mit dem Fahrrad durch die Stadt.', 'Zwei Hunde spielen im Schnee.',
  'Eine Frau mit einem roten Hut liest ein Buch.', 'Kinder spielen am Strand.',
  'Ein Mann in einem blauen Hemd steht auf einer Leiter und streicht eine Wand.',
  'Eine Gruppe von Menschen steht vor einem Gebäude.', 'Ein kleines Mädchen klettert auf einen Baum.',
  'Ein Hund rennt über eine grüne Wiese.', 'A man rides a bicycle through the city.',
  'Two dogs are playing in the snow.', 'A woman with a red hat is reading a book.',
  'Children play on the beach.', 'An older woman sits on a bench in the park.']) t) x;

CREATE FUNCTION pg_temp.translations(m text) RETURNS text[] LANGUAGE sql AS $$
  SELECT array_agg(translate(t, m, beam_size => 4) ORDER BY n) FROM src WHERE n <= 8 $$;
CREATE FUNCTION pg_temp.encoded() RETURNS real[] LANGUAGE sql AS $$
  SELECT array_agg(v ORDER BY n, i) FROM src, unnest(encoder_output(t, 'multi30k_sentence_de_en')) WITH ORDINALITY u(v, i) $$;
CREATE FUNCTION pg_temp.embedded(m text) RETURNS real[] LANGUAGE sql AS $$
  SELECT array_agg(v ORDER BY n, i) FROM src, unnest(embed(t, m)) WITH ORDINALITY u(v, i) $$;
CREATE FUNCTION pg_temp.embedded_together(m text) RETURNS real[] LANGUAGE sql AS $$
  SELECT array_agg(v ORDER BY k, i) FROM embed(ARRAY(SELECT t FROM src ORDER BY n), m) WITH ORDINALITY e(e, k),
    unnest(e.e) WITH ORDINALITY u(v, i) $$;
-- the mean over texts of the cosine between two sets of unit vectors of d dimensions
CREATE FUNCTION pg_temp.mean_cosine(a real[], b real[], d int) RETURNS float8 LANGUAGE sql AS $$
  SELECT avg(c) FROM (SELECT sum(x * y) AS c FROM unnest(a, b) WITH ORDINALITY u(x, y, i) GROUP BY (i - 1) / d) t $$;

-- as stored: fp32 (the bundled sentence encoder is fp32, the translation model fp16)
SET transformer.compute_type = 'stored';
SELECT pg_temp.embedded('multi30k_sentence_de_en') AS fp_emb \gset
SELECT pg_temp.encoded() AS fp_enc \gset
SELECT pg_temp.translations('multi30k_de_en') AS fp_text \gset
SELECT pg_temp.embedded('sentence_i8') AS q_emb \gset
SELECT pg_temp.translations('multi30k_de_en_i8') AS q_text \gset

-- auto: embed() in int8, the quantize_model() copy's vectors to the bit
RESET transformer.compute_type;
SELECT is(pg_temp.embedded('multi30k_sentence_de_en'), :'q_emb'::real[],
          'auto: embed() gives the vectors of the model''s quantize_model() copy, bitwise');
SELECT is(pg_temp.embedded_together('multi30k_sentence_de_en'), :'q_emb'::real[],
          'auto: embed(text[]) gives them too');
SELECT cmp_ok(pg_temp.mean_cosine(pg_temp.embedded('multi30k_sentence_de_en'), :'fp_emb', 256), '>=', 0.9999::float8,
              'auto: a mean cosine of 0.9999 or more to the stored model''s vectors');
SELECT isnt(pg_temp.embedded('multi30k_sentence_de_en'), :'fp_emb'::real[], 'auto: they are not the stored model''s');
SELECT is(pg_temp.encoded(), :'fp_enc'::real[], 'auto: encoder_output() stays as stored, exactly');
SELECT is(pg_temp.translations('multi30k_de_en'), :'fp_text'::text[], 'auto: translate() stays as stored');
SELECT is(pg_temp.embedded('sentence_i8'), :'q_emb'::real[], 'auto: an int8 model''s embed() is unchanged');
SELECT ok(EXISTS (SELECT FROM transformer_weight_files() WHERE kind = 'weights int8' AND name = 'multi30k_sentence_de_en'),
          'auto: the int8 copy is a shared file of its own');

-- int8 everywhere: translations as the quantize_model() copy's
SET transformer.compute_type = 'int8';
SELECT is(pg_temp.translations('multi30k_de_en'), :'q_text'::text[],
          'int8: translate() gives the quantize_model() copy''s translations');
SELECT isnt(pg_temp.encoded(), :'fp_enc'::real[], 'int8: encoder_output() is in int8 too');
SELECT is(pg_temp.translations('multi30k_de_en_i8'), :'q_text'::text[], 'int8: an int8 model stays as it is');

-- as stored again: exactly the stored model's
SET transformer.compute_type = 'stored';
SELECT is(pg_temp.embedded('multi30k_sentence_de_en'), :'fp_emb'::real[], 'stored: embed() as stored, exactly');
SELECT is(pg_temp.embedded_together('multi30k_sentence_de_en'), :'fp_emb'::real[], 'stored: embed(text[]) too');
RESET transformer.compute_type;

-- a drop removes every file of the model
SELECT drop_model('multi30k_sentence_de_en') \g /dev/null
SELECT is((SELECT count(*)::int FROM transformer_weight_files() WHERE name = 'multi30k_sentence_de_en' AND kind LIKE 'weights%'), 0,
          'drop_model removes the stored and the int8 file');
SELECT throws_ok($$SELECT embed('Ein Hund.', 'multi30k_sentence_de_en')$$, '42704', NULL,
                 'auto: a dropped model is gone from the int8 cache too');

SELECT * FROM finish();
DROP EXTENSION transformer CASCADE;
