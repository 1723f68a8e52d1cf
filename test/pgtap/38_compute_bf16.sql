-- transformer.compute_type = 'bf16' (issue 40): fp32, fp16 and bf16 matrices
-- rounded to bf16 and multiplied in bf16 (AVX512_BF16 where the CPU has it),
-- summed in fp32; the default compute type is untouched.  The kernels
-- themselves are checked against their definition in make unittest
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
SELECT plan(14);
SELECT import_model('multi30k_de_en') IS NOT NULL AS imported \gset
SELECT import_model('multi30k_sentence_de_en') IS NOT NULL AS imported \gset
SELECT quantize_model('multi30k_de_en', 'multi30k_de_en_i8') IS NOT NULL AS quantized \gset

CREATE TEMP TABLE src AS
SELECT n, de FROM (SELECT row_number() OVER () AS n, de FROM unnest(ARRAY[
  'Ein Mann fährt mit dem Fahrrad durch die Stadt.', 'Zwei Hunde spielen im Schnee.',
  'Eine Frau mit einem roten Hut liest ein Buch.', 'Kinder spielen am Strand.',
  'Ein Mann in einem blauen Hemd steht auf einer Leiter und streicht eine Wand.',
  'Eine Gruppe von Menschen steht vor einem Gebäude.', 'Ein kleines Mädchen klettert auf einen Baum.',
  'Ein Hund rennt über eine grüne Wiese.', 'Zwei Männer arbeiten an einem Auto.',
  'Eine ältere Frau sitzt auf einer Bank im Park.', 'Ein Junge springt in einen See.',
  'Ein Koch bereitet in einer Küche Essen zu.']) de) x;

CREATE FUNCTION pg_temp.translations(m text) RETURNS text[] LANGUAGE sql AS $$
  SELECT array_agg(translate(de, m, beam_size => 4) ORDER BY n) FROM src $$;
CREATE FUNCTION pg_temp.encoded() RETURNS real[] LANGUAGE sql AS $$
  SELECT array_agg(v ORDER BY n, i) FROM src, unnest(encoder_output(de, 'multi30k_de_en')) WITH ORDINALITY u(v, i) $$;
CREATE FUNCTION pg_temp.embedded() RETURNS real[] LANGUAGE sql AS $$
  SELECT array_agg(v ORDER BY n, i) FROM src, unnest(embed(de, 'multi30k_sentence_de_en')) WITH ORDINALITY u(v, i) $$;
CREATE FUNCTION pg_temp.maxdiff(a real[], b real[]) RETURNS float8 LANGUAGE sql AS $$
  SELECT max(abs(x - y))::float8 FROM unnest(a, b) u(x, y) $$;
-- the mean over texts of the cosine between two sets of unit vectors of d dimensions
CREATE FUNCTION pg_temp.mean_cosine(a real[], b real[], d int) RETURNS float8 LANGUAGE sql AS $$
  SELECT avg(c) FROM (SELECT sum(x * y) AS c FROM unnest(a, b) WITH ORDINALITY u(x, y, i) GROUP BY (i - 1) / d) t $$;

SELECT is(current_setting('transformer.compute_type'), 'auto', 'the compute type is auto unless set');
-- the baseline: as stored (auto would compute embed() in int8: 40_compute_int8.sql)
SET transformer.compute_type = 'stored';
SELECT pg_temp.translations('multi30k_de_en') AS fp_text \gset
SELECT pg_temp.translations('multi30k_de_en_i8') AS i8_text \gset
SELECT pg_temp.encoded() AS fp_enc \gset
SELECT pg_temp.embedded() AS fp_emb \gset

SELECT throws_ok($$SET transformer.compute_type = 'fp8'$$, '22023', NULL, 'an unknown compute type is refused');

SET transformer.compute_type = 'bf16';
SELECT matches(transformer_version(), ', bf16 (avx512bf16|portable) ', 'transformer_version() names the bf16 kernels');
SELECT pg_temp.maxdiff(pg_temp.encoded(), :'fp_enc') AS enc_diff \gset
SELECT cmp_ok(:enc_diff::float8, '>', 0::float8, 'bf16: the encoder''s output is not the default''s (max diff ' || :enc_diff || ')');
SELECT cmp_ok(:enc_diff::float8, '<', 0.25::float8, 'bf16: but near it: within 0.25 everywhere');
SELECT pg_temp.translations('multi30k_de_en') AS b16_text \gset
SELECT cmp_ok((SELECT count(*)::int FROM unnest(:'b16_text'::text[], :'fp_text'::text[]) u(a, b) WHERE a = b), '>=', 10,
              'bf16: at least 10 of the 12 translations are the default''s');
SELECT cmp_ok(pg_temp.mean_cosine(pg_temp.embedded(), :'fp_emb', 256), '>=', 0.999::float8,
              'bf16: embed() has a mean cosine of 0.999 or more to the default''s');
SELECT is(pg_temp.translations('multi30k_de_en_i8'), :'i8_text'::text[], 'bf16: an int8 model stays int8 (the same translations)');
SELECT ok(EXISTS (SELECT FROM transformer_weight_files() WHERE kind = 'weights bf16' AND name = 'multi30k_de_en'),
          'bf16: the bf16 copy is a shared file of its own');
SELECT ok(EXISTS (SELECT FROM transformer_weight_files() WHERE kind = 'weights' AND name = 'multi30k_de_en'),
          'and the default one is still there');

-- the portable kernels sum in the same order: the same translations (superuser: cpu_kernels)
SET transformer.cpu_kernels = 'portable';
SELECT is(pg_temp.translations('multi30k_de_en'), :'b16_text'::text[], 'bf16: the portable kernels translate as AVX512_BF16 does');
RESET transformer.cpu_kernels;

-- back as stored: the stored weights, untouched
SET transformer.compute_type = 'stored';
SELECT is(pg_temp.translations('multi30k_de_en'), :'fp_text'::text[], 'RESET: the default translations again');
SELECT is(pg_temp.maxdiff(pg_temp.encoded(), :'fp_enc'), 0::float8, 'RESET: the default encoder output, exactly');

-- a drop removes both files
SELECT drop_model('multi30k_de_en') \g /dev/null
SELECT is((SELECT count(*)::int FROM transformer_weight_files() WHERE name = 'multi30k_de_en' AND kind LIKE 'weights%'), 0,
          'drop_model removes the default and the bf16 file');

SELECT * FROM finish();
DROP EXTENSION transformer CASCADE;
