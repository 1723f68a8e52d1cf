-- Shared weights files (issue 15): built once, mapped by every later load,
-- rebuilt whenever the rows change or the file is damaged, removed with
-- the model; off by a setting; an unwritable directory is a WARNING.
-- Never published from rows not yet committed (issue 23): the models are
-- imported and committed first, and the tests run in a transaction after.
-- (Two backends at once, a full disk, a standby and pg_basebackup:
-- test/weight_cache/run.sh; a crash that hands an xid out again:
-- test/crash/xid_reuse.sh.)
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`

SET client_min_messages = warning;
DROP EXTENSION IF EXISTS transformer CASCADE;
CREATE EXTENSION transformer;
SELECT import_model('m', :'root' || '/test/fixtures/models/paper_relu') \g /dev/null
SELECT import_model('off', :'root' || '/test/fixtures/models/prenorm_gelu') \g /dev/null

BEGIN;
SELECT plan(32);

-- reload this backend's models: a relcache invalidation of our tables
CREATE FUNCTION pg_temp.reload() RETURNS void LANGUAGE sql AS $$ ALTER TABLE transformer_tensors SET (fillfactor = 100) $$;
CREATE FUNCTION pg_temp.files(m text) RETURNS TABLE (file text, bytes bigint, state text) LANGUAGE sql AS $$
  SELECT file, bytes, state FROM transformer_weight_files() WHERE kind = 'weights' AND name = m
    AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY file $$;
CREATE FUNCTION pg_temp.path(m text) RETURNS text LANGUAGE sql AS $$
  SELECT current_setting('transformer.weight_cache_dir') || '/' || file FROM transformer_weight_files() WHERE kind = 'weights' AND name = m AND state = 'current'
    AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) $$;
-- the model's memory in this backend (a mapped model holds only its layer tables)
CREATE FUNCTION pg_temp.held(m text) RETURNS bigint LANGUAGE sql AS $$
  SELECT coalesce(sum(total_bytes), 0) FROM pg_backend_memory_contexts WHERE name IN ('transformer cache entry', 'transformer weights')
    AND (ident = m OR ident IS NULL AND name = 'transformer weights') $$;
-- write bytes over a server file (superuser: lo_export)
CREATE FUNCTION pg_temp.overwrite(path text, data bytea) RETURNS void LANGUAGE plpgsql AS $$
DECLARE o oid := lo_from_bytea(0, data);
BEGIN PERFORM lo_export(o, path); PERFORM lo_unlink(o); END $$;

SELECT translate('SELECT attention FROM memory', 'm', 3) AS good \gset
SELECT is((SELECT count(*)::int FROM pg_temp.files('m') WHERE state = 'current'), 1, 'the first load writes the shared file');
SELECT md5(pg_read_binary_file(pg_temp.path('m'))) AS md5_first, (pg_stat_file(pg_temp.path('m'))).modification AS mtime_first \gset
SELECT cmp_ok(pg_temp.held('m'), '<', 65536::bigint, 'and then uses it: the backend holds no weights of its own');

SELECT pg_temp.reload();
SELECT is(translate('SELECT attention FROM memory', 'm', 3), :'good', 'a reload maps the file and translates the same');
SELECT is((pg_stat_file(pg_temp.path('m'))).modification, :'mtime_first'::timestamptz, 'without rewriting it');

-- damaged files are refused and rebuilt from the tables
SELECT pg_temp.overwrite(pg_temp.path('m'), substring(pg_read_binary_file(pg_temp.path('m')) FROM 1 FOR 5000)) AS p \gset
SELECT pg_temp.reload();
SELECT is(translate('SELECT attention FROM memory', 'm', 3), :'good', 'truncated: rebuilt, the same translation');
SELECT is(md5(pg_read_binary_file(pg_temp.path('m'))), :'md5_first', 'the rebuilt file is byte for byte the first');
SELECT pg_temp.overwrite(pg_temp.path('m'), (SELECT set_byte(b, length(b) - 1000, get_byte(b, length(b) - 1000) # 16) FROM pg_read_binary_file(pg_temp.path('m')) b));
SELECT pg_temp.reload();
SELECT is(translate('SELECT attention FROM memory', 'm', 3), :'good', 'a flipped bit in the weights: caught by the checksum, rebuilt');
SELECT is(md5(pg_read_binary_file(pg_temp.path('m'))), :'md5_first', 'rebuilt');
SELECT pg_temp.overwrite(pg_temp.path('m'), (SELECT overlay(b PLACING convert_to('9.9.9 another', 'UTF8') FROM 25) FROM pg_read_binary_file(pg_temp.path('m')) b));
SELECT pg_temp.reload();
SELECT is(translate('SELECT attention FROM memory', 'm', 3), :'good', 'a file of another build: rebuilt');
SELECT is(md5(pg_read_binary_file(pg_temp.path('m'))), :'md5_first', 'rebuilt');
SELECT pg_temp.overwrite(pg_temp.path('m'), '\x00');
SELECT pg_temp.reload();
SELECT is(translate('SELECT attention FROM memory', 'm', 3), :'good', 'a file of one byte: rebuilt');

-- tokenizers: shared the same way, in place at a fixed address
CREATE FUNCTION pg_temp.tok_path(t text) RETURNS text LANGUAGE sql AS $$
  SELECT current_setting('transformer.weight_cache_dir') || '/' || file FROM transformer_weight_files() WHERE kind = 'tokenizer' AND name = t AND state = 'current'
    AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) $$;
SELECT tokenize('SELECT attention FROM memory', 'm/source')::text AS tok_good \gset
SELECT isnt(pg_temp.tok_path('m/source'), NULL, 'the source tokenizer has a shared file');
SELECT cmp_ok((SELECT coalesce(sum(total_bytes), 0) FROM pg_backend_memory_contexts WHERE ident = 'm/source' OR name = 'transformer tokenizer'),
  '<', 65536::numeric, 'and the backend uses it, holding nothing of its own');
SELECT md5(pg_read_binary_file(pg_temp.tok_path('m/source'))) AS tok_md5 \gset
SELECT pg_temp.overwrite(pg_temp.tok_path('m/source'), (SELECT set_byte(b, length(b) - 5000, get_byte(b, length(b) - 5000) # 1) FROM pg_read_binary_file(pg_temp.tok_path('m/source')) b));
SELECT pg_temp.reload();
ALTER TABLE transformer_tokenizers SET (fillfactor = 100);
SELECT is(tokenize('SELECT attention FROM memory', 'm/source')::text, :'tok_good', 'a flipped bit in a tokenizer file: caught, the same tokens');
-- (the old mapping holds the tokenizer's address until the transaction ends, so this
-- backend keeps its own copy; the file is removed for the next backend to rebuild:
-- test/weight_cache/run.sh)
SELECT is(pg_temp.tok_path('m/source'), NULL, 'the damaged file is removed');
SELECT is(translate('SELECT attention FROM memory', 'm', 3), :'good', 'and the model still translates the same');

-- a new version of the rows, not yet committed: never published (a crash
-- could hand its xid and ctids out again), the backend's own copy
SAVEPOINT reimport;
SELECT import_model('m', :'root' || '/test/fixtures/models/marian_swish') \g /dev/null
SELECT is((SELECT count(*)::int FROM pg_temp.files('m')), 0, 're-import removes the old file');
SELECT isnt(translate('SELECT attention FROM memory', 'm', 3), :'good', 'the new model translates');
SELECT is((SELECT count(*)::int FROM pg_temp.files('m')), 0, 'from the backend''s own copy: rows not yet committed are never published');
SELECT cmp_ok(pg_temp.held('m'), '>', 100000::bigint, 'it holds the weights itself');
SELECT is((SELECT count(*)::int FROM transformer_weight_files() WHERE name LIKE 'm/%' AND state = 'current'), 0,
  'nor its new tokenizers');
-- rolled back: the first version again, its file rebuilt
ROLLBACK TO reimport;
SELECT is(translate('SELECT attention FROM memory', 'm', 3), :'good', 'an import rolled back: the first model again');
SELECT is((SELECT string_agg(state, ',' ORDER BY state) FROM pg_temp.files('m')), 'current', 'its file rebuilt');
SELECT is(md5(pg_read_binary_file(pg_temp.path('m'))), :'md5_first', 'the same file as at first');

-- an UPDATE of one row is a new version too, and private until committed
SAVEPOINT edit;
UPDATE transformer_tensors SET data = data WHERE model = 'm' AND name = 'model.encoder.layers.0.fc1.bias';
SELECT is(translate('SELECT attention FROM memory', 'm', 3), :'good', 'an updated row: the same weights');
SELECT is((SELECT count(*)::int FROM pg_temp.files('m') WHERE state = 'current'), 0, 'no file of the uncommitted version');
ROLLBACK TO edit;

-- a file's name holds the cluster (its system identifier) and the database
SELECT ok((SELECT bool_and(file LIKE (SELECT system_identifier::text FROM pg_control_system()) || '\_' ||
  (SELECT oid FROM pg_database WHERE datname = current_database())::text || '\_%') FROM pg_temp.files('m')),
  'a file is named by the cluster and the database');
SELECT is((SELECT count(*)::int FROM transformer_models WHERE file_id IS NULL), 0, 'every models row has a file_id');

-- off: the backend's own copy, no file
SET LOCAL transformer.shared_weights = off;
SELECT translate('a', 'off') AS off_good \gset
SELECT is((SELECT count(*)::int FROM pg_temp.files('off')), 0, 'transformer.shared_weights = off writes no file');
SELECT cmp_ok(pg_temp.held('off'), '>', 100000::bigint, 'and keeps the weights in the backend');
RESET transformer.shared_weights;

-- an unwritable directory: a WARNING, and the backend's own copy
SET LOCAL client_min_messages = error;
SET LOCAL transformer.weight_cache_dir = '/proc/transformer_cannot_be_here';
SELECT pg_temp.reload();
SELECT is(translate('a', 'off'), :'off_good', 'an unwritable directory: the same translation, from the backend''s own copy');
RESET transformer.weight_cache_dir;

-- dropped: the files go
SELECT drop_model('m') \g /dev/null
SELECT is((SELECT count(*)::int FROM pg_temp.files('m')), 0, 'drop_model removes the model''s files');

SELECT * FROM finish();
ROLLBACK;
DROP EXTENSION transformer CASCADE;
