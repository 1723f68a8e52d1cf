-- The SQL surface: signatures, volatility, parallel safety, comments, and
-- the SQLSTATE of every kind of bad input.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(63);

SELECT has_function('self_attention', ARRAY['real[]', 'real[]', 'real[]', 'boolean']);
SELECT has_function('attention_weights', ARRAY['real[]', 'real[]', 'boolean']);
SELECT has_function('multihead_attention', ARRAY['real[]', 'real[]', 'real[]', 'integer', 'boolean']);
SELECT has_function('softmax_weighted_sum', ARRAY['double precision', 'real[]']);
SELECT has_function('attend', ARRAY['real[]', 'real[]', 'real[]']);
SELECT is_aggregate('softmax_weighted_sum', ARRAY['double precision', 'real[]']);
SELECT is_aggregate('attend', ARRAY['real[]', 'real[]', 'real[]']);
SELECT function_returns('self_attention', ARRAY['real[]', 'real[]', 'real[]', 'boolean'], 'real[]');
SELECT function_returns('attend', ARRAY['real[]', 'real[]', 'real[]'], 'real[]');

-- every function of the extension: commented, with the right volatility,
-- parallel safety and strictness
CREATE TEMP VIEW ext_functions AS
SELECT p.oid::regprocedure::text AS sig, p.proname, p.prokind, p.provolatile, p.proparallel, p.proisstrict,
       obj_description(p.oid, 'pg_proc') AS comment
FROM pg_proc p
JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'transformer';
SELECT is((SELECT array_agg(sig ORDER BY sig) FROM ext_functions WHERE comment IS NULL), NULL,
  'every function has a COMMENT');
SELECT is((SELECT array_agg(sig ORDER BY sig) FROM ext_functions
           WHERE proname NOT IN ('import_tokenizer', 'load_tokenizer', 'drop_tokenizer', 'transformer_invalidate_cache',
                                 'tokenize', 'tokens', 'detokenize', 'import_model', 'load_model', 'export_model',
                                 'drop_model', 'quantize_model', 'embed', 'input_embeddings', 'encode', 'encoder_output', 'translate', 'generate', 'sentences',
                                 'set_model_languages', 'attention_map', 'align', 'attention_svg', 'transformer_weight_files',
                                 'transformer_guard_drop', 'translate_column', 'embed_column', 'wait_for_job', 'pause_job', 'resume_job',
                                 'cancel_job', 'retry_job_errors', 'transformer_job_sync', 'model_languages',
                                 'set_model_segment_length', 'measure_segment_length', 'transformer_version',
                                 'transformer_model_stats', 'transformer_stat_reset', 'fine_tune')
             AND (provolatile <> 'i' OR proparallel <> 's')), NULL,
  'attention functions and aggregates are IMMUTABLE and PARALLEL SAFE');
SELECT is((SELECT array_agg(sig ORDER BY sig) FROM ext_functions
           WHERE proname IN ('tokenize', 'tokens', 'detokenize', 'embed', 'input_embeddings', 'encode', 'encoder_output', 'translate', 'generate', 'sentences',
                             'attention_map', 'align', 'attention_svg', 'model_languages', 'transformer_version')
             AND (provolatile <> 's' OR proparallel <> 's')), NULL,
  'functions reading tokenizers and models are STABLE and PARALLEL SAFE');
SELECT is((SELECT array_agg(sig ORDER BY sig) FROM ext_functions
           WHERE proname IN ('import_tokenizer', 'load_tokenizer', 'drop_tokenizer', 'import_model', 'load_model',
                             'export_model', 'drop_model', 'quantize_model', 'set_model_languages',
                             'set_model_segment_length', 'measure_segment_length', 'translate_column', 'wait_for_job', 'pause_job', 'resume_job', 'cancel_job', 'retry_job_errors',
                             'fine_tune')
             AND (provolatile <> 'v' OR proparallel <> 'u')), NULL,
  'functions writing tokenizers, models, files or jobs are VOLATILE and PARALLEL UNSAFE');
SELECT is((SELECT array_agg(sig ORDER BY sig) FROM ext_functions
           WHERE prokind = 'f' AND NOT proisstrict
             AND sig NOT IN ('import_tokenizer(text,text,text)', 'load_tokenizer(text,bytea,jsonb)', 'transformer_invalidate_cache()', 'transformer_guard_drop()',
                             'load_model(text,bytea,bytea,bytea,bytea,bytea,bytea)', 'sentences(text,text)',
                             'set_model_languages(text,text,text)', 'heatmap_svg(real[],text[],text[],text)',
                             'attention_map(text,text,integer)', 'attention_svg(text,text,text,integer,integer)',
                             'translate(text,text,integer,integer,boolean,double precision,integer,double precision,integer,integer,text,text,text,text[],boolean)',
                             'translate(text[],text,integer,integer,boolean,double precision,integer,double precision,integer,integer,text,text,text,text[],boolean)',
                             'translate(text,text,text,text)', 'translate(text[],text,text,text)',
                             'set_model_segment_length(text,integer)', 'transformer_stat_reset(text)',
                             'generate(text,text,integer,integer,boolean,double precision,integer,double precision,integer,integer,text,text)',
                             'translate_column(regclass,text,text,text,integer,boolean,integer,integer,text,text[],text,text,text)',
                             'embed_column(regclass,text,text,text,integer,boolean,integer)', 'wait_for_job(bigint,interval)',
                             'fine_tune(text,text,text,integer,integer,integer,double precision,integer,double precision,double precision,boolean,integer,integer,text,text)',
                             'transformer_job_sync()')), NULL,
  'plain functions are STRICT, but where NULL means a default (vocabulary, generation_config, decoding options, locale, languages, labels, job options, no timeout, segment length) and the triggers');
SELECT isnt((SELECT aggcombinefn::text FROM pg_aggregate WHERE aggfnoid = 'attend'::regproc), '-', 'attend has a combine function');
SELECT matches(transformer_version(),
  '^transformer [0-9]+\.[0-9]+\.[0-9]+; kernels: fp32 (avx512|avx2|portable), int8 (amx|avx512vnni|avx2|portable), softmax (avx512|avx2|portable), norms (avx512|avx2|portable), activations (avx512|avx2|portable), vector (avx512|avx2|portable), bf16 (avx512bf16|portable) \(transformer.cpu_kernels (auto|avx512|avx2|portable)\); threads per call: [0-9]+; BLAS: OpenBLAS [0-9.]+ .*\(core [A-Za-z0-9]+\); ICU [0-9.]+; libxml2 [0-9.]+$',
  'transformer_version() names the version, the kernels chosen for this CPU and the libraries');
SELECT is(split_part(split_part(transformer_version(), ';', 1), ' ', 2), (SELECT extversion FROM pg_extension WHERE extname = 'transformer'),
  'the library is the installed extension''s version');
-- without shared_preload_libraries the statistics are off, and say so (test/jobs/run.py checks them preloaded)
SELECT throws_ok('SELECT * FROM transformer_stat_models', '55000',
  'transformer statistics must be loaded via "shared_preload_libraries"', 'transformer_stat_models without the preload: 55000');
SELECT throws_ok('SELECT transformer_stat_reset()', '55000', NULL, 'transformer_stat_reset() without the preload: 55000');
SELECT ok(NOT has_function_privilege('public', 'transformer_stat_reset(text)', 'EXECUTE'), 'PUBLIC may not reset the statistics');

-- NULL in, NULL out
SELECT is(self_attention(NULL, '{{1}}', '{{1}}'), NULL, 'self_attention(NULL, ...) is NULL');
SELECT is(attention_weights('{{1}}', '{{1}}', NULL), NULL, 'attention_weights(..., causal NULL) is NULL');
SELECT is(multihead_attention('{{1}}', '{{1}}', '{{1}}', NULL), NULL, 'multihead_attention(..., heads NULL) is NULL');
SELECT is((SELECT softmax_weighted_sum(s, v) FROM (VALUES (NULL::float8, '{1}'::real[])) t(s, v)), NULL, 'softmax_weighted_sum over NULL rows is NULL');
SELECT is((SELECT attend(q, k, v) FROM (VALUES ('{1}'::real[], '{1}'::real[], '{2}'::real[])) t(q, k, v) WHERE false), NULL, 'attend over no rows is NULL');

-- bad input: SQLSTATE and message
SELECT throws_ok(sql, code, msg, description) FROM (VALUES
  ($$SELECT self_attention('{1,2}', '{{1,2}}', '{{1}}')$$, '22000', 'q must be a 2-D array', '1-D q'),
  ($$SELECT self_attention('{{1,2}}', '{{{1,2}}}', '{{1}}')$$, '22000', 'k must be a 2-D array', '3-D k'),
  ($$SELECT attention_weights('{}', '{{1}}')$$, '22000', 'q must not be empty', 'empty q'),
  ($$SELECT self_attention('{{1}}', '{{1}}', '{}')$$, '22000', 'v must not be empty', 'empty v'),
  ($$SELECT self_attention('{{1,2}}', '{{1,2,3}}', '{{1}}')$$, '22000', 'q and k must have the same number of columns', 'd_k mismatch'),
  ($$SELECT self_attention('{{1,2}}', '{{1,2},{3,4}}', '{{1}}')$$, '22000', 'k and v must have the same number of rows', 'm mismatch'),
  ($$SELECT multihead_attention('{{1,2}}', '{{1,2,3}}', '{{1}}', 1)$$, '22000', 'q and k must have the same number of columns', 'mha d_k mismatch'),
  ($$SELECT self_attention('{{1,NULL}}', '{{1,2}}', '{{1}}')$$, '22004', 'q must not contain nulls', 'NULL element'),
  ($$SELECT attention_weights('{{1}}', '{{NULL}}')$$, '22004', 'k must not contain nulls', 'NULL element in k'),
  ($$SELECT self_attention('{{NaN}}', '{{1}}', '{{1}}')$$, '22000', 'q must not contain NaN or infinity', 'NaN'),
  ($$SELECT self_attention('{{1}}', '{{1}}', '{{-Infinity}}')$$, '22000', 'v must not contain NaN or infinity', '-Infinity'),
  ($$SELECT multihead_attention('{{1,2,3}}', '{{1,2,3}}', '{{1,2,3}}', 2)$$, '22023', 'heads must divide the number of columns of q, k and v', 'heads not dividing d'),
  ($$SELECT multihead_attention('{{1,2}}', '{{1,2}}', '{{1,2,3}}', 2)$$, '22023', 'heads must divide the number of columns of q, k and v', 'heads not dividing d_v'),
  ($$SELECT multihead_attention('{{1,2}}', '{{1,2}}', '{{1,2}}', 0)$$, '22023', 'heads must be at least 1', 'zero heads'),
  ($$SELECT multihead_attention('{{1,2}}', '{{1,2}}', '{{1,2}}', -1)$$, '22023', 'heads must be at least 1', 'negative heads'),
  ($$SELECT attention_weights(array_fill(1::real, ARRAY[100000,1]), array_fill(1::real, ARRAY[100000,1]))$$, '54000', 'attention weight matrix would be too large', '100000x100000 weights refused'),
  ($$SELECT softmax_weighted_sum(s, v) FROM (VALUES (1::float8, '{1,2}'::real[]), (2, '{1}')) t(s, v)$$, '22000', 'value dimensions differ', 'ragged values'),
  ($$SELECT softmax_weighted_sum('NaN', '{1}')$$, '22000', 'score must be finite', 'NaN score'),
  ($$SELECT softmax_weighted_sum('Infinity', '{1}')$$, '22000', 'score must be finite', 'infinite score'),
  ($$SELECT softmax_weighted_sum(1, '{}')$$, '22000', 'value must not be empty', 'empty value'),
  ($$SELECT softmax_weighted_sum(1, '{{1}}')$$, '22000', 'value must be a 1-D array', '2-D value'),
  ($$SELECT softmax_weighted_sum(1, '{1,NULL}')$$, '22004', 'value must not contain nulls', 'NULL in value'),
  ($$SELECT softmax_weighted_sum(1, '{Infinity}')$$, '22000', 'value must not contain NaN or infinity', 'infinite value'),
  ($$SELECT attend('{1,2}', '{1,2,3}', '{1}')$$, '22000', 'query and key dimensions differ', 'query/key mismatch'),
  ($$SELECT attend('{1}', '{NaN}', '{1}')$$, '22000', 'key must not contain NaN or infinity', 'NaN key'),
  ($$SELECT attend('{1}', '{1}', '{NULL}')$$, '22004', 'value must not contain nulls', 'NULL in attend value'),
  ($$SELECT softmax_weighted_sum_final('{1,2}')$$, '22000', 'invalid softmax_weighted_sum state', 'short state'),
  ($$SELECT softmax_weighted_sum_combine('{1,0,1,5}', '{1,0,1,5,6}')$$, '22000', 'value dimensions differ', 'combining unequal states'),
  ($$SET transformer.threads = 0$$, '22023', '0 is outside the valid range for parameter "transformer.threads" (1 .. 64)', 'threads below 1'),
  ($$SET transformer.blas_threads = 2$$, '42602', 'invalid configuration parameter name "transformer.blas_threads"', 'blas_threads is gone (transformer.threads)'),
  ($$SET transformer.typo = 1$$, '42602', 'invalid configuration parameter name "transformer.typo"', 'reserved GUC prefix')
) AS t(sql, code, msg, description);

-- a long computation honours statement_timeout (57014, which throws_ok
-- cannot catch: PL/pgSQL's OTHERS excludes query_canceled)
CREATE FUNCTION pg_temp.cancelled(sql text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE sql;
  RETURN false;
EXCEPTION WHEN query_canceled THEN
  RETURN true;
END $$;
SET LOCAL statement_timeout = '300ms';
SELECT ok(pg_temp.cancelled($$SELECT self_attention(array_fill(1::real, ARRAY[100000,1]), array_fill(1::real, ARRAY[100000,1]), array_fill(1::real, ARRAY[100000,1]))$$),
  'self_attention over 100000x100000 is cancelled by statement_timeout');
SET LOCAL statement_timeout = 0;

-- threads for one call: settable by anyone, capped by max_threads (superuser), results unchanged
SET LOCAL transformer.max_threads = 4;
SET LOCAL transformer.threads = 2;
SELECT is(self_attention('{{1,0}}', '{{1,0},{0,1}}', '{{1,2},{3,4}}'),
          (SELECT self_attention('{{1,0}}', '{{1,0},{0,1}}', '{{1,2},{3,4}}')), 'threads = 2 works');
SELECT is(current_setting('transformer.threads'), '2', 'transformer.threads is settable');
SELECT matches(transformer_version(), '; threads per call: 2;', 'transformer_version() names the threads in effect');
SET LOCAL transformer.max_threads = 1;
SELECT matches(transformer_version(), '; threads per call: 1;', 'transformer.max_threads caps transformer.threads');
SELECT is((SELECT context FROM pg_settings WHERE name = 'transformer.threads'), 'user', 'transformer.threads: any role');
SELECT is((SELECT context FROM pg_settings WHERE name = 'transformer.max_threads'), 'superuser', 'transformer.max_threads: superusers');

SELECT * FROM finish();
ROLLBACK;
