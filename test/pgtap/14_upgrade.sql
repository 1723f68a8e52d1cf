-- Upgrading from version 0.1.0: the library serves the old tables until
-- ALTER EXTENSION UPDATE (loading models, with a clear error for writes),
-- and the objects updated through 0.2.0, 0.3.0, 0.4.0, 0.5.0, 0.6.0, 0.7.0, 0.8.0, 0.9.0 and 0.10.0 to 0.11.0 are those of a
-- fresh install, constraints, privileges and policies included.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`

BEGIN;
SELECT plan(36);
-- a fresh install's objects, as text
CREATE EXTENSION transformer;
CREATE TEMP TABLE fresh AS
SELECT pg_describe_object(classid, objid, objsubid) AS object FROM pg_depend
WHERE refclassid = 'pg_extension'::regclass AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'transformer') AND deptype = 'e'
UNION ALL
SELECT 'column ' || attrelid::regclass || '.' || attnum || ' ' || attname || ' ' || format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid IN ('transformer_models'::regclass, 'transformer_tensors'::regclass, 'transformer_tokenizers'::regclass,
  'transformer_job'::regclass, 'transformer_job_queue'::regclass, 'transformer_job_progress'::regclass, 'transformer_job_errors'::regclass, 'transformer_job_batches'::regclass,
  'transformer_job_pairs'::regclass, 'transformer_job_steps'::regclass, 'transformer_job_checkpoints'::regclass) AND attnum > 0
UNION ALL
SELECT 'constraint ' || conrelid::regclass || '.' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
WHERE conrelid IN ('transformer_models'::regclass, 'transformer_tensors'::regclass, 'transformer_tokenizers'::regclass,
  'transformer_job'::regclass, 'transformer_job_queue'::regclass, 'transformer_job_progress'::regclass, 'transformer_job_errors'::regclass, 'transformer_job_batches'::regclass,
  'transformer_job_pairs'::regclass, 'transformer_job_steps'::regclass, 'transformer_job_checkpoints'::regclass)
UNION ALL
SELECT 'acl ' || relname || ' ' || coalesce(relacl::text, '-') || ' rls ' || relrowsecurity FROM pg_class
WHERE relnamespace = 'public'::regnamespace AND relname LIKE 'transformer_job%'
UNION ALL
SELECT 'policy ' || polrelid::regclass || '.' || polname || ' ' || polcmd::text || ' ' || pg_get_expr(polqual, polrelid) FROM pg_policy
UNION ALL
SELECT 'view ' || pg_get_viewdef('transformer_jobs'::regclass);
-- a model as 0.1.0 stored it: its rows, kept aside, and what it translates to
SELECT import_model('old', :'root' || '/test/fixtures/models/paper_relu') \g /dev/null
SELECT translate('SELECT attention FROM memory', 'old', 3) AS old_want \gset
CREATE TEMP TABLE old_tok AS SELECT name, model, vocab FROM transformer_tokenizers WHERE name LIKE 'old/%';
CREATE TEMP TABLE old_model AS SELECT name, config, config_json, vocab_json, safetensors_header, source_tokenizer, target_tokenizer FROM transformer_models WHERE name = 'old';
CREATE TEMP TABLE old_tensors AS SELECT model, name, shape, dtype, data_offset, data FROM transformer_tensors WHERE model = 'old';
-- DROP EXTENSION would drop the models with the tables: it needs CASCADE
SELECT throws_ok('DROP EXTENSION transformer', '2BP01',
  'cannot drop extension transformer because its tables hold models or tokenizers',
  'DROP EXTENSION of an extension holding models is refused without CASCADE');
SAVEPOINT empty;
SELECT drop_model('old') \g /dev/null
SELECT lives_ok('DROP EXTENSION transformer', '... and allowed once the tables are empty');
ROLLBACK TO empty;
SELECT lives_ok('DROP EXTENSION transformer CASCADE', '... or with CASCADE');

CREATE EXTENSION transformer VERSION '0.1.0';
INSERT INTO transformer_tokenizers (name, model, vocab) SELECT * FROM old_tok;
INSERT INTO transformer_models (name, config, config_json, vocab_json, safetensors_header, source_tokenizer, target_tokenizer) SELECT * FROM old_model;
INSERT INTO transformer_tensors SELECT * FROM old_tensors;
SELECT is(translate('SELECT attention FROM memory', 'old', 3), :'old_want', 'a model in 0.1.0''s tables translates as before, by the new library');
SELECT throws_ok(format('SELECT import_model(%L, %L)', 'm', :'root' || '/test/fixtures/models/marian_swish'), '55000',
  'extension transformer must be updated to version 0.2.0', 'a 0.1.0 database: writes ask for the update');
-- a model stored by 0.1.0 (its rows, as its import_model wrote them)
INSERT INTO transformer_tokenizers (name, model, vocab) VALUES
  ('m/source', pg_read_binary_file(:'root' || '/test/fixtures/models/marian_swish/source.spm'), pg_read_file(:'root' || '/test/fixtures/models/marian_swish/vocab.json')::jsonb),
  ('m/target', pg_read_binary_file(:'root' || '/test/fixtures/models/marian_swish/target.spm'), pg_read_file(:'root' || '/test/fixtures/models/marian_swish/vocab.json')::jsonb);
ALTER EXTENSION transformer UPDATE TO '0.2.0';
SELECT is((SELECT extversion FROM pg_extension WHERE extname = 'transformer'), '0.2.0', 'ALTER EXTENSION transformer UPDATE reaches 0.2.0');
-- 0.2.0 cannot store int8 rows; 0.3.0 can
SELECT throws_ok($$INSERT INTO transformer_tensors SELECT 'x', 'y', '{1}', 'I8', 0, '\x00'$$, '23514', NULL, 'a 0.2.0 table refuses I8 rows');
ALTER EXTENSION transformer UPDATE;
SELECT is((SELECT extversion FROM pg_extension WHERE extname = 'transformer'), '0.11.0', 'ALTER EXTENSION transformer UPDATE then reaches 0.11.0');
SELECT is((SELECT count(*)::int FROM transformer_tokenizers WHERE file_id IS NOT NULL), 4, '0.4.0: every stored tokenizer row got a file_id');
SELECT is((SELECT count(DISTINCT file_id)::int FROM transformer_tokenizers), 4, 'each its own');
SELECT ok(NOT has_function_privilege('public', 'transformer_invalidate_cache()', 'EXECUTE'), '0.4.0: PUBLIC may no longer execute transformer_invalidate_cache()');
SELECT is((SELECT count(*)::int FROM transformer_tokenizers), 4, 'the stored rows are kept');
CREATE TEMP TABLE updated AS
SELECT pg_describe_object(classid, objid, objsubid) AS object FROM pg_depend
WHERE refclassid = 'pg_extension'::regclass AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'transformer') AND deptype = 'e'
UNION ALL
SELECT 'column ' || attrelid::regclass || '.' || attnum || ' ' || attname || ' ' || format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid IN ('transformer_models'::regclass, 'transformer_tensors'::regclass, 'transformer_tokenizers'::regclass,
  'transformer_job'::regclass, 'transformer_job_queue'::regclass, 'transformer_job_progress'::regclass, 'transformer_job_errors'::regclass, 'transformer_job_batches'::regclass,
  'transformer_job_pairs'::regclass, 'transformer_job_steps'::regclass, 'transformer_job_checkpoints'::regclass) AND attnum > 0
UNION ALL
SELECT 'constraint ' || conrelid::regclass || '.' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
WHERE conrelid IN ('transformer_models'::regclass, 'transformer_tensors'::regclass, 'transformer_tokenizers'::regclass,
  'transformer_job'::regclass, 'transformer_job_queue'::regclass, 'transformer_job_progress'::regclass, 'transformer_job_errors'::regclass, 'transformer_job_batches'::regclass,
  'transformer_job_pairs'::regclass, 'transformer_job_steps'::regclass, 'transformer_job_checkpoints'::regclass)
UNION ALL
SELECT 'acl ' || relname || ' ' || coalesce(relacl::text, '-') || ' rls ' || relrowsecurity FROM pg_class
WHERE relnamespace = 'public'::regnamespace AND relname LIKE 'transformer_job%'
UNION ALL
SELECT 'policy ' || polrelid::regclass || '.' || polname || ' ' || polcmd::text || ' ' || pg_get_expr(polqual, polrelid) FROM pg_policy
UNION ALL
SELECT 'view ' || pg_get_viewdef('transformer_jobs'::regclass);
SELECT is((SELECT string_agg(object, ', ' ORDER BY object) FROM (SELECT object FROM fresh EXCEPT SELECT object FROM updated) x), NULL, 'nothing of a fresh install is missing after the update');
SELECT is((SELECT string_agg(object, ', ' ORDER BY object) FROM (SELECT object FROM updated EXCEPT SELECT object FROM fresh) x), NULL, 'and nothing is left over');
SELECT is(translate('SELECT attention FROM memory', 'old', 3), :'old_want', 'after ALTER EXTENSION UPDATE the stored model translates identically');
SELECT is((SELECT count(*)::int FROM transformer_tensors WHERE model = 'old'), (SELECT count(*)::int FROM old_tensors), 'its rows are kept');
SELECT cmp_ok(import_model('m', :'root' || '/test/fixtures/models/marian_swish'), '>', 0::bigint, 'the updated extension imports');
-- every function new since 0.1.0 works on the updated schema
SELECT is(set_model_languages('old', 'en', 'de')::text, '', 'set_model_languages');
SELECT is((SELECT count(*)::int FROM sentences('One. Two.')), 2, 'sentences');
SELECT cmp_ok(abs(bleu('a b c d', 'a b c d') - 100), '<', 1e-9::float8, 'bleu');
SELECT cmp_ok(chrf('abc', 'abc'), '=', 100::float8, 'chrf');
SELECT cmp_ok((SELECT count(*)::int FROM attention_map('SELECT attention', 'old')), '>', 0, 'attention_map');
SELECT cmp_ok((SELECT count(*)::int FROM align('SELECT attention', 'old')), '>', 0, 'align');
SELECT matches(attention_svg('SELECT attention', 'old'), '<svg ', 'attention_svg');
SELECT is(translate(ARRAY['SELECT attention FROM memory'], 'old', 3), ARRAY[:'old_want'], 'translate(text[])');
SELECT isnt(export_model('old', '/tmp/transformer_tap_upgrade_' || pg_backend_pid()), NULL, 'export_model');
SELECT is(quantize_model('m', 'm8'), 49385::bigint, 'and quantizes');
SELECT is((SELECT count(*)::int FROM transformer_jobs), 0, '0.5.0: the jobs view');
SELECT throws_ok($$SELECT translate_column('transformer_models', 'name', 'config_json', 'old')$$, '42804', NULL, '0.5.0: translate_column');
SELECT is((SELECT count(*)::int FROM model_languages('old')), 0, '0.6.0: model_languages');
SELECT is(translate('SELECT attention FROM memory', 'old', beam_size => 3, source_lang => NULL, target_lang => NULL), :'old_want', '0.6.0: translate() with the language options');
SELECT is(translate('SELECT attention FROM memory', 'old', beam_size => 3, format => 'text', keep => '{}', split => false), :'old_want', '0.7.0: translate() with the text options');
SELECT is((SELECT segment_tokens FROM transformer_models WHERE name = 'old'), NULL, '0.7.0: a stored model has no segment length');
SELECT matches(transformer_version(), '^transformer ' || replace((SELECT extversion FROM pg_extension WHERE extname = 'transformer'), '.', '\.') || '; kernels: ', '0.8.0: transformer_version() names the updated version');
SELECT throws_ok($$SELECT embed_column('transformer_models', 'name', 'config_json', 'old')$$, '42804', NULL, '0.9.0: embed_column');
SELECT throws_ok($$SELECT fine_tune('old', 'old2', 'SELECT 1, 2')$$, '42804', NULL, '0.10.0: fine_tune');

SELECT * FROM finish();
ROLLBACK;
