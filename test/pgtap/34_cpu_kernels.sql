-- transformer.cpu_kernels (issue 40): one level of CPU instructions for
-- every kernel family (fp32 and int8 products, softmax, norms,
-- activations, the vector helpers) and OpenBLAS's core.  Only a superuser
-- sets it; a level this CPU lacks is refused; transformer_version() shows
-- each family's kernels as they stand; translations and embeddings are the
-- same under every level this CPU has (src/core/tensor_ops.c).
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(28);
SELECT import_model('multi30k_de_en') \g /dev/null
SELECT import_model('bert_tiny', :'root' || '/test/fixtures/encoders/bert_tiny') \g /dev/null

-- ------------------------------------------------------------ the setting

SELECT is(current_setting('transformer.cpu_kernels'), 'auto', 'transformer.cpu_kernels is auto by default');
SELECT is((SELECT enumvals FROM pg_settings WHERE name = 'transformer.cpu_kernels'),
  ARRAY['auto', 'avx512', 'avx2', 'portable'], 'its values: auto, avx512, avx2, portable');
SELECT is((SELECT context FROM pg_settings WHERE name = 'transformer.cpu_kernels'), 'superuser',
  'a superuser setting');
SELECT throws_ok($$SET LOCAL transformer.cpu_kernels = 'sse9'$$, '22023',
  'invalid value for parameter "transformer.cpu_kernels": "sse9"', 'an unknown level is refused');

-- the best level this CPU has: auto's fp32 kernels
SELECT substring(transformer_version() FROM 'kernels: fp32 ([a-z0-9]+)') AS best \gset
SELECT set_config('pg_temp_auto.best', :'best', true) \g /dev/null
SELECT matches(transformer_version(),
  '; kernels: fp32 ' || :'best' || ', int8 [a-z0-9]+, softmax ' || :'best' || ', norms ' || :'best' ||
  ', activations ' || :'best' || ', vector ' || :'best' || ', bf16 (avx512bf16|portable) \(transformer.cpu_kernels auto\);',
  'auto: every family runs the best this CPU has (' || :'best' || ')');

CREATE FUNCTION pg_temp.has(level text) RETURNS boolean LANGUAGE sql AS $$
  SELECT array_position(ARRAY['portable', 'avx2', 'avx512'], level)
      <= array_position(ARRAY['portable', 'avx2', 'avx512'], current_setting('pg_temp_auto.best')) $$;

-- a level this CPU lacks: an error naming what is missing
SELECT CASE WHEN pg_temp.has('avx512')
  THEN skip('this CPU has AVX-512: no level to refuse', 1)
  ELSE throws_ok($$SET LOCAL transformer.cpu_kernels = 'avx512'$$, '22023', 'this CPU has no AVX-512',
                 'avx512 is refused on a CPU without it') END;
SELECT CASE WHEN pg_temp.has('avx2')
  THEN skip('this CPU has AVX2: no level to refuse', 1)
  ELSE throws_ok($$SET LOCAL transformer.cpu_kernels = 'avx2'$$, '22023', 'this CPU has no AVX2',
                 'avx2 is refused on a CPU without it') END;
SELECT CASE WHEN pg_temp.has('avx512')
  THEN lives_ok($$SET LOCAL transformer.cpu_kernels = 'avx512'$$, 'this CPU has AVX-512: avx512 is allowed')
  ELSE skip('this CPU has no AVX-512', 1) END;
RESET transformer.cpu_kernels;

-- an ordinary role cannot set it
CREATE ROLE tf_cpu_kernels_user;
SET LOCAL ROLE tf_cpu_kernels_user;
SELECT throws_ok($$SET LOCAL transformer.cpu_kernels = 'portable'$$, '42501',
  'permission denied to set parameter "transformer.cpu_kernels"', 'only a superuser sets transformer.cpu_kernels');
SELECT is(current_setting('transformer.cpu_kernels'), 'auto', 'an ordinary role reads it');
RESET ROLE;

-- ------------------------------------------------------------ every level the CPU has

CREATE TEMP TABLE src (i int, de text);
INSERT INTO src VALUES
  (1, 'Ein Mann fährt Fahrrad.'),
  (2, 'Zwei Hunde spielen im Schnee.'),
  (3, 'Eine Frau in einem roten Kleid singt auf einer Bühne.'),
  (4, 'Kinder spielen am Strand mit einem Ball.'),
  (5, 'Ein älterer Mann sitzt auf einer Bank und liest eine Zeitung.'),
  (6, 'Eine Gruppe von Menschen steht vor einem Gebäude.');

-- greedy and beam 4, one by one and as a batch
CREATE FUNCTION pg_temp.translations() RETURNS text[] LANGUAGE sql AS $$
  SELECT array_agg(translate(de, 'multi30k_de_en', 1) ORDER BY i)
      || array_agg(translate(de, 'multi30k_de_en', 4) ORDER BY i)
      || translate((SELECT array_agg(de ORDER BY i) FROM src), 'multi30k_de_en', 1)
  FROM src $$;
CREATE FUNCTION pg_temp.embeddings() RETURNS real[] LANGUAGE sql AS $$
  SELECT array_agg(x ORDER BY i, k)
  FROM src, unnest(embed(de, 'bert_tiny')) WITH ORDINALITY AS e(x, k) $$;
CREATE FUNCTION pg_temp.maxdiff(a real[], b real[]) RETURNS float8 LANGUAGE sql AS $$
  SELECT max(abs(x::float8 - y)) FROM unnest(a, b) AS u(x, y) $$;

SELECT pg_temp.translations() AS auto_text \gset
SELECT pg_temp.embeddings() AS auto_embed \gset
SELECT is(cardinality(:'auto_text'::text[]), 18, 'auto: 18 translations');

-- under each level: the setting, every family and OpenBLAS's core reported at that level, the same results
CREATE FUNCTION pg_temp.under(level text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
  v text;
  d float8;
BEGIN
  IF NOT pg_temp.has(level) THEN
    RETURN NEXT skip('this CPU has no ' || level, 5);
    RETURN;
  END IF;
  PERFORM set_config('transformer.cpu_kernels', level, true);
  v := transformer_version();
  RETURN NEXT matches(v, '; kernels: fp32 ' || level || ', int8 ' ||
                      CASE level WHEN 'avx512' THEN '(avx512vnni|avx2)' ELSE level END || ', softmax ' || level ||
                      ', norms ' || level || ', activations ' || level || ', vector ' || level ||
                      ', bf16 ' || CASE level WHEN 'avx512' THEN '(avx512bf16|portable)' ELSE 'portable' END ||
                      ' \(transformer.cpu_kernels ' || level || '\);',
                      level || ': transformer_version() names every family at ' || level);
  RETURN NEXT matches(v, '\(core ' || CASE level WHEN 'avx512' THEN '(SkylakeX|Cooperlake|SapphireRapids)'
                                               WHEN 'avx2' THEN '(Haswell|Zen)' ELSE 'Prescott' END || '\);',
                      level || ': OpenBLAS runs a core of that level');
  RETURN NEXT is(pg_temp.translations(), current_setting('pg_temp_auto.text')::text[],
                 level || ': the same translations as auto (greedy, beam 4, batched)');
  d := pg_temp.maxdiff(pg_temp.embeddings(), current_setting('pg_temp_auto.embed')::real[]);
  RETURN NEXT cmp_ok(d, '<=', 1e-4::float8, level || ': embed() within 1e-4 of auto (max diff ' || d || ')');
  RETURN NEXT is(current_setting('transformer.cpu_kernels'), level, level || ': the setting reads ' || level);
END $$;
SELECT set_config('pg_temp_auto.text', :'auto_text', true) \g /dev/null
SELECT set_config('pg_temp_auto.embed', :'auto_embed', true) \g /dev/null

SELECT * FROM pg_temp.under('portable');
SELECT * FROM pg_temp.under('avx2');
SELECT * FROM pg_temp.under('avx512');

-- back to auto: the best again, and the same results
RESET transformer.cpu_kernels;
SELECT matches(transformer_version(), '; kernels: fp32 ' || :'best' || ', int8 [a-z0-9]+, softmax ' || :'best' ||
  ', norms ' || :'best' || ', activations ' || :'best' || ', vector ' || :'best' || ', bf16 (avx512bf16|portable) \(transformer.cpu_kernels auto\);',
  'RESET: every family back to ' || :'best');
SELECT is(pg_temp.translations(), :'auto_text'::text[], 'RESET: the same translations');

SELECT * FROM finish();
ROLLBACK;
