-- OpenBLAS is opened by the first product that needs it (src/core/blas.h),
-- not with the library: a connection that translates a sentence never pays
-- for its 14,000 relocations and its threads (issue 40: a new connection's
-- first call).  The backend's own memory map says what it has loaded.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(6);
CREATE FUNCTION pg_temp.mapped(lib text) RETURNS boolean LANGUAGE sql AS $$
  SELECT strpos(pg_read_file('/proc/self/maps'), lib) > 0 $$;

SELECT ok(pg_temp.mapped('transformer.so'), 'CREATE EXTENSION loaded the library');
SELECT ok(NOT pg_temp.mapped('libopenblas'), 'but not OpenBLAS');
SELECT import_model('multi30k_de_en') \g /dev/null
SELECT is(translate('Ein Hund rennt durch den Schnee.', 'multi30k_de_en'), 'A dog runs through the snow.',
  'a sentence translated');
SELECT ok(NOT pg_temp.mapped('libopenblas'), 'without OpenBLAS: a sentence''s products are of 16 rows or fewer');
-- a text of 33 pieces: the encoder's self-attention is a product of 33 rows
SELECT is(cardinality(encoder_output(repeat('Ein Hund rennt durch den Schnee, ', 4) || 'eine Katze schläft.', 'multi30k_de_en')),
  33 * 256, 'encoder_output() of a text of 33 pieces');
SELECT ok(pg_temp.mapped('libopenblas'), 'its attention over 33 rows loaded OpenBLAS');

SELECT * FROM finish();
ROLLBACK;
