-- Privileges, as docs/security.md's "Privileges" section designs them: what a
-- role needs to translate, to load models from bytes sent by the client
-- (psql variables and \lo_import, as docs/security.md shows), to import server
-- files, to export, and to change settings.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`
\set swish :root/test/fixtures/models/marian_swish
\set relu :root/test/fixtures/models/paper_relu
-- the client's copies of a model's files (docs/security.md's recipe)
\set config `cat test/fixtures/models/marian_swish/config.json`
\set vocab `cat test/fixtures/models/marian_swish/vocab.json`
\set spm `base64 -w0 test/fixtures/models/marian_swish/source.spm`

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(29);
SELECT import_model('shared', :'relu') \g /dev/null
SELECT translate('SELECT attention FROM memory', 'shared', 2) AS good \gset

CREATE ROLE tf_reader;
CREATE ROLE tf_insert_only;
GRANT INSERT ON transformer_models, transformer_tensors, transformer_tokenizers TO tf_insert_only;
CREATE ROLE tf_loader;
GRANT SELECT, INSERT, UPDATE, DELETE ON transformer_models, transformer_tensors, transformer_tokenizers TO tf_loader;
CREATE ROLE tf_files IN ROLE tf_loader, pg_read_server_files;
CREATE ROLE tf_exporter IN ROLE pg_write_server_files;

-- translate only: a role with no grant at all
SET ROLE tf_reader;
SELECT is(translate('SELECT attention FROM memory', 'shared', 2), :'good', 'reader: translate() needs no grant');
SELECT ok(cardinality(tokenize('SELECT', 'shared/source')) > 0, 'reader: tokenize() needs no grant');
SELECT ok(array_length(encoder_output('SELECT', 'shared'), 1) > 0, 'reader: encoder_output() needs no grant');
SELECT throws_ok($$SELECT load_tokenizer('r', decode('00', 'hex'))$$, '22023', NULL, 'reader: a bad tokenizer is refused before any privilege check');
SELECT throws_ok(format('SELECT load_tokenizer(%L, decode(%L, %L), %L)', 'r', :'spm', 'base64', :'vocab'), '42501',
  'permission denied for table transformer_tokenizers', 'reader: load_tokenizer() needs INSERT on transformer_tokenizers');
SELECT throws_ok($$SELECT drop_model('shared')$$, '42501', 'permission denied for table transformer_models', 'reader: drop_model() needs DELETE');
SELECT throws_ok($$SELECT quantize_model('shared', 'shared8')$$, '42501', NULL, 'reader: quantize_model() needs the table privileges');
SELECT throws_ok($$SELECT import_model('multi30k_de_en')$$, '42501', NULL, 'reader: a bundled import needs the table privileges');
SELECT throws_ok(format('SELECT import_model(%L, %L)', 'r', :'swish'), '42501', 'permission denied to read server files', 'reader: import_model(dir) needs pg_read_server_files');
SELECT throws_ok($$SELECT export_model('shared', '/tmp/transformer_tap_priv')$$, '42501', 'permission denied to write server files', 'reader: export_model() needs pg_write_server_files');
SELECT throws_ok($$SET transformer.max_threads = 64$$, '42501', 'permission denied to set parameter "transformer.max_threads"', 'reader: only superusers raise the cap on threads per call');
RESET ROLE;

-- INSERT alone, as the README once advised, is not enough
SET ROLE tf_insert_only;
SELECT throws_ok(format('SELECT load_tokenizer(%L, decode(%L, %L), %L)', 'r', :'spm', 'base64', :'vocab'), '42501',
  'permission denied for table transformer_tokenizers', 'INSERT only: load_tokenizer() also needs SELECT and UPDATE (a name may be replaced)');
RESET ROLE;

-- load from bytes: SELECT, INSERT, UPDATE and DELETE on the three tables
SET ROLE tf_loader;
SELECT is(load_tokenizer('client_tok', decode(:'spm', 'base64'), :'vocab'), 200, 'loader: load_tokenizer() from psql variables');
SELECT is(load_tokenizer('client_tok', decode(:'spm', 'base64'), :'vocab'), 200, 'loader: and replacing it');
\lo_import test/fixtures/models/marian_swish/model.safetensors
SELECT cmp_ok(load_model('client', convert_to(:'config', 'UTF8'), lo_get(:LASTOID), decode(:'spm', 'base64'), decode(:'spm', 'base64'),
  convert_to(:'vocab', 'UTF8')), '>', 0::bigint, 'loader: load_model() from psql variables and \lo_import');
SELECT cmp_ok(load_model('client', convert_to(:'config', 'UTF8'), lo_get(:LASTOID), decode(:'spm', 'base64'), decode(:'spm', 'base64'),
  convert_to(:'vocab', 'UTF8')), '>', 0::bigint, 'loader: and replacing it');
\lo_unlink :LASTOID
SELECT is(translate('a', 'client', 2), translate('a', 'client', 2), 'loader: the loaded model translates');
SELECT cmp_ok(import_model('multi30k_de_en'), '>', 0::bigint, 'loader: import_model(name) of a bundled model');
SELECT throws_ok(format('SELECT import_model(%L, %L)', 'r', :'swish'), '42501', 'permission denied to read server files', 'loader: import_model(dir) still needs pg_read_server_files');
SELECT is(quantize_model('client', 'client8'), 49385::bigint, 'loader: quantize_model()');
SELECT is(drop_model('client'), true, 'loader: drop_model()');
SELECT is(drop_tokenizer('client_tok'), true, 'loader: drop_tokenizer()');
RESET ROLE;

-- server files: pg_read_server_files to import, pg_write_server_files to export
SET ROLE tf_files;
SELECT cmp_ok(import_model('files', :'swish'), '>', 0::bigint, 'pg_read_server_files + table privileges: import_model(dir)');
SELECT throws_ok($$SELECT export_model('files', '/tmp/transformer_tap_priv')$$, '42501', 'permission denied to write server files', 'reading is not writing');
RESET ROLE;
SET ROLE tf_exporter;
SELECT cmp_ok(export_model('files', '/tmp/transformer_tap_priv_' || pg_backend_pid()), '>', 0, 'pg_write_server_files: export_model()');
RESET ROLE;
SELECT is(md5(pg_read_binary_file('/tmp/transformer_tap_priv_' || pg_backend_pid() || '/model.safetensors')),
          md5(pg_read_binary_file(:'swish' || '/model.safetensors')), 'the export is the imported file');

-- cache invalidation is the extension's alone (issue 23): no role may attach
-- transformer_invalidate_cache() to a table of its own ...
SET ROLE tf_loader;
CREATE TEMP TABLE own (x int);
SELECT throws_ok($$CREATE TRIGGER flush AFTER INSERT ON own FOR EACH STATEMENT EXECUTE FUNCTION transformer_invalidate_cache()$$,
  '42501', 'permission denied for function transformer_invalidate_cache', 'a role cannot attach transformer_invalidate_cache() to its own table');
RESET ROLE;
-- ... and a superuser's trigger on another table invalidates nothing: a
-- reload leaves the old cache entry to the transaction's end, so the
-- number of entries of the model counts the reloads
CREATE FUNCTION pg_temp.entries(m text) RETURNS int LANGUAGE sql AS $$
  SELECT count(*)::int FROM pg_backend_memory_contexts WHERE name = 'transformer cache entry' AND ident = m $$;
CREATE TRIGGER flush AFTER INSERT ON own FOR EACH STATEMENT EXECUTE FUNCTION transformer_invalidate_cache();
SELECT translate('SELECT attention FROM memory', 'shared', 2) \g /dev/null
SELECT pg_temp.entries('shared') AS entries_before \gset
INSERT INTO own VALUES (1);
SELECT translate('SELECT attention FROM memory', 'shared', 2) \g /dev/null
SELECT is(pg_temp.entries('shared'), :entries_before, 'a trigger on another table: the model is not reloaded');
UPDATE transformer_models SET name = name WHERE false;
SELECT translate('SELECT attention FROM memory', 'shared', 2) \g /dev/null
SELECT is(pg_temp.entries('shared'), :entries_before + 1, 'the extension''s own trigger still reloads it');

SELECT * FROM finish();
ROLLBACK;
