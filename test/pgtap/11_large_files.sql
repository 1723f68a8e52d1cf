-- Files over 1 GB: a safetensors file is read a tensor part at a time, never
-- in one allocation; a tensor over 1 GB is no longer too large to store
-- (0.6.0 stores it in parts), and one that does not fit the configuration
-- is refused before any byte of it is read.
-- The files are sparse (test/pgtap/sparse_safetensors.pl).
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`
\set relu :root/test/fixtures/models/paper_relu
\set big /tmp/transformer_tap_big_model
\set huge /tmp/transformer_tap_huge_tensor
\! perl test/pgtap/sparse_safetensors.pl gap test/fixtures/models/paper_relu /tmp/transformer_tap_big_model 1200000000
\! perl test/pgtap/sparse_safetensors.pl huge /tmp/transformer_tap_huge_tensor 1200000000
\! cp test/fixtures/models/paper_relu/config.json test/fixtures/models/paper_relu/*.spm test/fixtures/models/paper_relu/vocab.json /tmp/transformer_tap_huge_tensor/

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(4);

SELECT cmp_ok((pg_stat_file(:'big' || '/model.safetensors')).size, '>', 1200000000::bigint, 'the model file is over 1 GB');
SELECT is(import_model('big', :'big'), 55616::bigint, 'import_model reads a file over 1 GB');
SELECT import_model('small', :'relu') \g /dev/null
SELECT is(translate('SELECT attention FROM memory', 'big', 2), translate('SELECT attention FROM memory', 'small', 2), 'and translates as the same model from a small file');
SELECT throws_ok(format('SELECT import_model(%L, %L)', 'huge', :'huge'), '22023',
  'tensor "model.shared.weight" has the shape (292968, 1024), but the configuration requires (201, 32)',
  'a tensor over 1 GB that does not fit the configuration is refused before it is read');

SELECT * FROM finish();
ROLLBACK;
\! rm -rf /tmp/transformer_tap_big_model /tmp/transformer_tap_huge_tensor
