-- models: bad input, one edge case per line, each a clear ERROR
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS transformer;
RESET client_min_messages;
\set SHOW_CONTEXT never
\set root `pwd`
\set dir :root/test/fixtures/models/marian_swish
SELECT import_model('m', :'dir');
-- the five files, to be spoilt one at a time
CREATE TEMP TABLE f AS SELECT
  pg_read_binary_file(:'dir' || '/config.json') AS config,
  pg_read_binary_file(:'dir' || '/model.safetensors') AS st,
  pg_read_binary_file(:'dir' || '/source.spm') AS spm,
  pg_read_binary_file(:'dir' || '/vocab.json') AS vocab;
CREATE FUNCTION pg_temp.cfg(patch jsonb) RETURNS bytea LANGUAGE sql AS
$$ SELECT convert_to(((SELECT convert_from(config, 'UTF8') FROM f)::jsonb || patch)::text, 'UTF8') $$;
CREATE FUNCTION pg_temp.load_gen(gen text) RETURNS bigint LANGUAGE sql AS
$$ SELECT load_model('bad', f.config, f.st, f.spm, f.spm, f.vocab, convert_to(gen, 'UTF8')) FROM f $$;
CREATE FUNCTION pg_temp.load(bytea, bytea) RETURNS bigint LANGUAGE sql AS
$$ SELECT load_model('bad', $1, $2, f.spm, f.spm, f.vocab) FROM f $$;
-- a safetensors file from a (short) JSON header and data
CREATE FUNCTION pg_temp.st(header text, data bytea) RETURNS bytea LANGUAGE sql AS
$$ SELECT decode(lpad(to_hex(octet_length(convert_to(header, 'UTF8'))), 2, '0') || '00000000000000', 'hex')
          || convert_to(header, 'UTF8') || data $$;

-- unknown models, NULLs
SELECT translate('a', 'no_such_model');
SELECT encoder_output('a', 'no_such_model');
SELECT translate('a', NULL);
SELECT translate('a', 'm', NULL, NULL) IS NOT NULL AS defaults_apply;
SELECT translate('a');
SELECT embed(NULL, 'm') IS NULL AS strict;
-- inputs
SELECT translate('', 'm');
SELECT encoder_output(repeat('a ', 40), 'm');
SELECT translate('a', 'm', 0);
SELECT translate('a', 'm', 65);
SELECT translate('a', 'm', 1, 0);
SELECT translate('a', 'm', 1, 66);
SELECT translate('a', 'm', length_penalty => 'NaN');
SELECT translate('a', 'm', repetition_penalty => 0);
SELECT translate('a', 'm', repetition_penalty => '-Infinity');
SELECT translate('a', 'm', no_repeat_ngram_size => -1);
SELECT translate('a', 'm', min_length => -1);
SELECT translate('a', 'm', max_new_tokens => 0);
SELECT translate('a', 'm', max_new_tokens => 65);
SELECT translate('a', 'm', beam_size => 0);
-- generation configurations
SELECT pg_temp.load_gen('{"early_stopping": "sometimes"}');
SELECT pg_temp.load_gen('{"bad_words_ids": [[99999]]}');
SELECT pg_temp.load_gen('{"bad_words_ids": [[]]}');
SELECT pg_temp.load_gen('{"bad_words_ids": 5}');
SELECT pg_temp.load_gen('{"repetition_penalty": 0}');
SELECT pg_temp.load_gen('{"num_beams": 65}');
SELECT pg_temp.load_gen('{"max_length": 0}');
SELECT pg_temp.load_gen('[1]');
SELECT pg_temp.load_gen('{"eos_token_id": 99999}');
SELECT translate(ARRAY[['a']], 'm');
-- files and privileges
SELECT import_model('x', '/nonexistent');
SELECT import_model('', :'dir');
SELECT import_model(repeat('n', 57), :'dir');
-- configurations
SELECT pg_temp.load('not json', (SELECT st FROM f));
SELECT pg_temp.load(convert_to('[1]', 'UTF8'), (SELECT st FROM f));
SELECT pg_temp.load(pg_temp.cfg('{"d_model": null}'), (SELECT st FROM f));
SELECT pg_temp.load(pg_temp.cfg('{"d_model": "32"}'), (SELECT st FROM f));
SELECT pg_temp.load(pg_temp.cfg('{"d_model": 0}'), (SELECT st FROM f));
SELECT pg_temp.load(pg_temp.cfg('{"d_model": 1000000}'), (SELECT st FROM f));
SELECT pg_temp.load(pg_temp.cfg('{"encoder_attention_heads": 5}'), (SELECT st FROM f));
SELECT pg_temp.load(pg_temp.cfg('{"activation_function": "tanh"}'), (SELECT st FROM f));
SELECT pg_temp.load(pg_temp.cfg('{"position_embedding": "rotary"}'), (SELECT st FROM f));
SELECT pg_temp.load(pg_temp.cfg('{"normalize_before": "yes"}'), (SELECT st FROM f));
SELECT pg_temp.load(pg_temp.cfg('{"pad_token_id": 99999}'), (SELECT st FROM f));
SELECT pg_temp.load(pg_temp.cfg('{"vocab_size": 100}'), (SELECT st FROM f));
-- shapes and tensors that do not match the configuration
SELECT pg_temp.load(pg_temp.cfg('{"d_model": 64, "encoder_attention_heads": 4}'), (SELECT st FROM f));
SELECT pg_temp.load(pg_temp.cfg('{"encoder_layers": 3}'), (SELECT st FROM f));
SELECT pg_temp.load(pg_temp.cfg('{"encoder_layers": 1}'), (SELECT st FROM f));
SELECT pg_temp.load(pg_temp.cfg('{"encoder_ffn_dim": 65}'), (SELECT st FROM f));
SELECT pg_temp.load(pg_temp.cfg('{"add_final_layer_norm": true}'), (SELECT st FROM f));
SELECT pg_temp.load(pg_temp.cfg('{"position_embedding": "learned"}'), (SELECT st FROM f));
-- corrupt and truncated safetensors
SELECT pg_temp.load((SELECT config FROM f), '');
SELECT pg_temp.load((SELECT config FROM f), '\x0100000000000000');
SELECT pg_temp.load((SELECT config FROM f), '\xffffffffffffffff7b7d');
SELECT pg_temp.load((SELECT config FROM f), '\x02000000000000007b7d');
SELECT pg_temp.load((SELECT config FROM f), '\x04000000000000005b315d20');
SELECT pg_temp.load((SELECT config FROM f), '\x08000000000000007b2278223a317d');
SELECT pg_temp.load((SELECT config FROM f), substring((SELECT st FROM f) FROM 1 FOR 100));
SELECT pg_temp.load((SELECT config FROM f), substring((SELECT st FROM f) FROM 1 FOR octet_length((SELECT st FROM f)) - 1));
SELECT pg_temp.load((SELECT config FROM f), overlay((SELECT st FROM f) PLACING '\xffff' FROM 9));
SELECT pg_temp.load((SELECT config FROM f), pg_temp.st('{"t":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}', '\x00000000'));
SELECT pg_temp.load((SELECT config FROM f), pg_temp.st('{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}', '\x00000000'));
SELECT pg_temp.load((SELECT config FROM f), pg_temp.st('{"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', '\x00000000'));
SELECT pg_temp.load((SELECT config FROM f), pg_temp.st('{"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}', '\x00000000'));
SELECT pg_temp.load((SELECT config FROM f), pg_temp.st('{"t":{"dtype":"F32","shape":[1]}}', '\x00000000'));
SELECT pg_temp.load((SELECT config FROM f), pg_temp.st('{"t":[1,2]}', '\x00000000'));
SELECT pg_temp.load((SELECT config FROM f), pg_temp.st('{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}', '\x00000000'));
SELECT pg_temp.load((SELECT config FROM f), pg_temp.st('{"t":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}', '\x00000000'));
SELECT pg_temp.load((SELECT config FROM f), pg_temp.st('{"__metadata__":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}', ''));
SELECT pg_temp.load((SELECT config FROM f), pg_temp.st('{"t\u0000":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', '\x00000000'));
SELECT pg_temp.load((SELECT config FROM f), pg_temp.st('{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', '\x00000000'));
-- a NaN in the weights
SELECT pg_temp.load((SELECT config FROM f), overlay((SELECT st FROM f) PLACING '\x0000c07f' FROM octet_length((SELECT st FROM f)) - 3));
-- a vocabulary beyond the model's
SELECT load_model('bad', (SELECT config FROM f), (SELECT st FROM f), (SELECT spm FROM f), (SELECT spm FROM f), convert_to('{"<unk>": 0, "a": 5000}', 'UTF8'));
-- nothing of the failed loads was stored
SELECT name FROM transformer_models ORDER BY name;
SELECT drop_model('m'), drop_model('m');
SELECT count(*) FROM transformer_tensors;
-- export_model: absolute paths only, never inside the data directory;
-- files of an earlier export are replaced
SELECT import_model('m', :'dir') > 0 AS imported;
SELECT export_model('m', '/tmp/transformer_regress_export') = export_model('m', '/tmp/transformer_regress_export') AS exported_twice;
\set VERBOSITY terse
SELECT export_model('m', 'relative/dir');
SELECT export_model('m', '');
SELECT export_model('m', current_setting('data_directory'));
SELECT export_model('m', current_setting('data_directory') || '/base/x');
SELECT export_model('m', current_setting('data_directory') || '/../' || (SELECT regexp_replace(current_setting('data_directory'), '^.*/', '')) || '/pg_wal');
SELECT export_model('m', '/nonexistent_root_dir/a/b');
SELECT export_model('no_such_model', '/tmp');
\set VERBOSITY default
SELECT drop_model('m');
