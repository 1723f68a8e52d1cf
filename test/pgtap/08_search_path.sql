-- search_path safety (the CVE-2018-1058 class): an attacker's schema with
-- look-alike operators, functions and tables first in a superuser's path.
-- Every SQL function of the extension runs with it; nothing of the
-- attacker's may run, and the attacker must not become superuser.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`
\set relu :root/test/fixtures/models/paper_relu
\set swish :root/test/fixtures/models/marian_swish
\set sw_config :swish/config.json
\set sw_st :swish/model.safetensors
\set sw_src :swish/source.spm
\set sw_tgt :swish/target.spm
\set sw_vocab :swish/vocab.json
\set spm :root/test/fixtures/models/paper_relu/source.spm
\set vocab :root/test/fixtures/models/paper_relu/vocab.json
\set exportdir /tmp/transformer_tap_search_path

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(10);

-- the attacker: a role owning a schema of look-alikes, each of which logs
-- that it ran and tries to make the attacker superuser
CREATE ROLE tf_evil NOLOGIN;
CREATE SCHEMA evil AUTHORIZATION tf_evil;
CREATE TABLE evil.ran (what text);
GRANT INSERT, SELECT ON evil.ran TO PUBLIC;
SET ROLE tf_evil;
CREATE FUNCTION evil.pwn(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO evil.ran VALUES (what);
  BEGIN
    ALTER ROLE tf_evil SUPERUSER;      -- succeeds if a superuser runs this
  EXCEPTION WHEN insufficient_privilege THEN NULL;
  END;
  RETURN true;
END $$;
CREATE FUNCTION evil.texteq(a text, b text) RETURNS boolean LANGUAGE sql AS
  $$ SELECT evil.pwn('text = text') AND pg_catalog.texteq(a, b) $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.texteq);
CREATE FUNCTION evil.texteqname(a name, b text) RETURNS boolean LANGUAGE sql AS
  $$ SELECT evil.pwn('name = text') AND pg_catalog.texteq(a::text, b) $$;
CREATE OPERATOR evil.= (LEFTARG = name, RIGHTARG = text, FUNCTION = evil.texteqname);
CREATE FUNCTION evil.textcat(a text, b text) RETURNS text LANGUAGE sql AS
  $$ SELECT CASE WHEN evil.pwn('||') THEN pg_catalog.textcat(a, b) END $$;
CREATE OPERATOR evil.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.textcat);
CREATE FUNCTION evil.int8lt(a bigint, b bigint) RETURNS boolean LANGUAGE sql AS
  $$ SELECT evil.pwn('bigint < bigint') AND pg_catalog.int8lt(a, b) $$;
CREATE OPERATOR evil.< (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.int8lt);
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE sql AS
  $$ SELECT CASE WHEN evil.pwn('now()') THEN pg_catalog.now() END $$;
CREATE FUNCTION evil.octet_length(text) RETURNS integer LANGUAGE sql AS
  $$ SELECT CASE WHEN evil.pwn('octet_length()') THEN 1 END $$;
CREATE FUNCTION evil.sha256(bytea) RETURNS bytea LANGUAGE sql AS
  $$ SELECT CASE WHEN evil.pwn('sha256()') THEN $1 END $$;
-- look-alike tables, as views that log whoever reads them
CREATE VIEW evil.transformer_models AS SELECT * FROM public.transformer_models WHERE evil.pwn('transformer_models');
CREATE VIEW evil.transformer_tensors AS SELECT * FROM public.transformer_tensors WHERE evil.pwn('transformer_tensors');
CREATE VIEW evil.transformer_tokenizers AS SELECT * FROM public.transformer_tokenizers WHERE evil.pwn('transformer_tokenizers');
RESET ROLE;

-- every function, with the attacker's schema first (our functions named
-- by schema, and no operator in these statements, so that only our own
-- internal queries could reach the look-alikes)
CREATE TEMP TABLE got (what text, result text);
SET search_path = evil, pg_catalog, public, pg_temp;
INSERT INTO got VALUES ('import_tokenizer', public.import_tokenizer('sp_tok', :'spm', :'vocab'));
INSERT INTO got VALUES ('load_tokenizer', public.load_tokenizer('sp_tok2', pg_read_binary_file(:'spm')));
INSERT INTO got VALUES ('tokenize', public.tokenize('SELECT attention', 'sp_tok'));
INSERT INTO got VALUES ('tokens', public.tokens('SELECT attention', 'sp_tok'));
INSERT INTO got VALUES ('detokenize', public.detokenize('{40,50,60}', 'sp_tok2'));
INSERT INTO got VALUES ('drop_tokenizer', public.drop_tokenizer('sp_tok2'));
INSERT INTO got VALUES ('import_model', public.import_model('sp', :'relu'));
INSERT INTO got VALUES ('input_embeddings', pg_catalog.array_length(public.input_embeddings('a', 'sp'), 1));
INSERT INTO got VALUES ('load_model', public.load_model('sp2', pg_read_binary_file(:'sw_config'), pg_read_binary_file(:'sw_st'),
  pg_read_binary_file(:'sw_src'), pg_read_binary_file(:'sw_tgt'), pg_read_binary_file(:'sw_vocab')));
INSERT INTO got VALUES ('encoder_output', pg_catalog.array_length(public.encoder_output('a', 'sp'), 1));
INSERT INTO got SELECT 'sentences', public.sentences('Ein Satz. Noch einer.', 'de');
SELECT public.set_model_languages('sp', 'de', 'en') \g /dev/null
INSERT INTO got VALUES ('import_model(bundled)', public.import_model('multi30k_de_en'));
INSERT INTO got VALUES ('translate', public.translate('SELECT attention FROM memory', 'sp', 2));
INSERT INTO got VALUES ('translate[]', public.translate(ARRAY['SELECT attention FROM memory', 'a'], 'sp2', 2));
INSERT INTO got VALUES ('generate', public.generate('a', 'sp'));
SET transformer.default_model = 'multi30k_de_en';
INSERT INTO got VALUES ('translate(default)', public.translate('Ein Mann fährt Fahrrad.'));
INSERT INTO got VALUES ('export_model', public.export_model('sp', :'exportdir'));
INSERT INTO got VALUES ('quantize_model', public.quantize_model('sp', 'sp8'));
INSERT INTO got VALUES ('translate(int8)', public.translate('SELECT attention FROM memory', 'sp8', 2));
INSERT INTO got VALUES ('drop_model', public.drop_model('sp2'));
INSERT INTO got VALUES ('self_attention', public.self_attention('{{1,2}}', '{{1,2}}', '{{3}}'));
INSERT INTO got VALUES ('attention_weights', public.attention_weights('{{1,2}}', '{{1,2}}'));
INSERT INTO got VALUES ('multihead_attention', public.multihead_attention('{{1,2}}', '{{1,2}}', '{{3,4}}', 2));
INSERT INTO got SELECT 'softmax_weighted_sum', public.softmax_weighted_sum(s, v) FROM (VALUES (1::float8, '{1,2}'::real[])) t(s, v);
INSERT INTO got SELECT 'attend', public.attend(q, k, v) FROM (VALUES ('{1}'::real[], '{1}'::real[], '{1,2}'::real[])) t(q, k, v);
RESET search_path;
RESET transformer.default_model;

SELECT is((SELECT string_agg(DISTINCT what, ', ') FROM evil.ran), NULL, 'none of the attacker''s look-alikes ran');
SELECT ok(NOT (SELECT rolsuper FROM pg_roles WHERE rolname = 'tf_evil'), 'the attacker did not become superuser');
SELECT is((SELECT count(*)::int FROM got WHERE result IS NOT NULL), 26, 'every function gave a result under the hostile path');
SELECT is((SELECT result FROM got WHERE what = 'translate'), translate('SELECT attention FROM memory', 'sp', 2), 'translate() under the hostile path = under a clean one');
SELECT is((SELECT result FROM got WHERE what = 'translate(int8)'), translate('SELECT attention FROM memory', 'sp8', 2), 'quantize_model() under the hostile path = under a clean one');
SELECT is((SELECT result FROM got WHERE what = 'tokenize'), tokenize('SELECT attention', 'sp_tok')::text, 'tokenize() under the hostile path = under a clean one');
SELECT is((SELECT result FROM got WHERE what = 'translate(default)'), translate('Ein Mann fährt Fahrrad.', 'multi30k_de_en'), 'the bundled model under the hostile path = under a clean one');
SELECT is((SELECT count(*)::int FROM transformer_models WHERE name = 'sp2'), 0, 'drop_model under the hostile path dropped the model');
SELECT is((SELECT count(*)::int FROM transformer_tokenizers WHERE name IN ('sp2/source', 'sp2/target', 'sp_tok2')), 0, 'and its tokenizers; drop_tokenizer too');
SELECT is(md5(pg_read_binary_file(:'exportdir' || '/model.safetensors')), md5(pg_read_binary_file(:'relu' || '/model.safetensors')), 'export_model under the hostile path wrote the model');

SELECT * FROM finish();
ROLLBACK;
