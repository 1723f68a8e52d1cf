-- Re-entrancy and the cache: a user's code that runs while we load (a
-- look-alike operator, a row-level security policy on our tables) and calls
-- us again; reloads in subtransactions that abort; caught errors that must
-- not cost a reload; identical tokenizers held once.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`
\set relu :root/test/fixtures/models/paper_relu
\set swish :root/test/fixtures/models/marian_swish

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(16);

SELECT import_model('r1', :'relu') \g /dev/null
SELECT import_model('r2', :'swish') \g /dev/null
SELECT translate('SELECT attention FROM memory', 'r1', 2) AS r1_good \gset
SELECT translate('a', 'r2', 2) AS r2_good \gset
SELECT ok(:'r1_good' <> '' AND :'r2_good' <> '', 'the fixtures translate to something');

-- 1. The review's crash: a role's own = for text, first in the path, calls
-- translate() again while translate() loads.  Our queries no longer use it.
CREATE SCHEMA mine;
CREATE TABLE mine.calls (n int);
CREATE FUNCTION mine.eq(a text, b text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO mine.calls VALUES (1);
  PERFORM public.translate('a', 'r2', 2);
  RETURN pg_catalog.texteq(a, b);
END $$;
CREATE OPERATOR mine.= (LEFTARG = text, RIGHTARG = text, FUNCTION = mine.eq);
UPDATE transformer_models SET created = created WHERE name = 'r1';   -- caches dropped: the next call loads
SET search_path = mine, pg_catalog, public;
CREATE TEMP TABLE got AS SELECT public.translate('SELECT attention FROM memory', 'r1', 2) AS t;
RESET search_path;
SELECT is((SELECT t FROM got), :'r1_good', 'translate() with a re-entering = first in the path: correct');
SELECT is((SELECT count(*)::int FROM mine.calls), 0, 'and the look-alike = never ran');

-- 2. Nested loads for real: a row-level security policy on our tables runs
-- a function that translates, once, while the outer call loads.
CREATE ROLE tf_tap_user NOLOGIN;
GRANT UPDATE ON transformer_models TO tf_tap_user;
GRANT USAGE ON SCHEMA mine TO tf_tap_user;
GRANT INSERT ON mine.calls TO tf_tap_user;
CREATE FUNCTION public.tap_reenter(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('tap.reenter', true) = what THEN
    PERFORM set_config('tap.reenter', 'done', true);
    PERFORM set_config('tap.nested', public.translate('SELECT attention FROM memory', 'r1', 2), true);
  END IF;
  RETURN true;
END $$;
-- the same, then our tables change and the nested call reloads, all in a
-- subtransaction that aborts under the outer call; a wrong nested result
-- is an error that is not caught, and a sequence counts the runs
CREATE SEQUENCE mine.aborted_runs;
GRANT USAGE ON SEQUENCE mine.aborted_runs TO tf_tap_user;
CREATE FUNCTION public.tap_reload_and_abort(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('tap.reenter', true) = what THEN
    PERFORM set_config('tap.reenter', 'done', true);
    BEGIN
      UPDATE public.transformer_models SET created = created WHERE name = 'r1';
      PERFORM public.translate('a', 'r2', 2);
      IF public.translate('SELECT attention FROM memory', 'r1', 2) IS DISTINCT FROM current_setting('tap.want') THEN
        RAISE EXCEPTION 'the nested reload translated wrongly' USING ERRCODE = 'TAP01';
      END IF;
      PERFORM nextval('mine.aborted_runs');
      RAISE EXCEPTION 'abort the subtransaction';
    EXCEPTION WHEN raise_exception THEN NULL;
    END;
  END IF;
  RETURN true;
END $$;
ALTER TABLE transformer_tensors ENABLE ROW LEVEL SECURITY;
ALTER TABLE transformer_tokenizers ENABLE ROW LEVEL SECURITY;
CREATE POLICY tap_tensors ON transformer_tensors FOR SELECT USING (public.tap_reenter('tensors of ' || model));
CREATE POLICY tap_tokenizers ON transformer_tokenizers FOR SELECT USING (public.tap_reenter(name));
CREATE POLICY tap_tokenizers_abort ON transformer_tokenizers AS RESTRICTIVE FOR SELECT USING (public.tap_reload_and_abort('abort in ' || name));
-- as a superuser: every cache dropped, so that the next call loads
CREATE FUNCTION pg_temp.drop_caches() RETURNS void LANGUAGE sql AS $$
  UPDATE transformer_models SET created = created;
  UPDATE transformer_tokenizers SET created = created $$;
SET tap.want = :'r1_good';

SELECT pg_temp.drop_caches() \g /dev/null
SET ROLE tf_tap_user;
SET tap.reenter = 'tensors of r1';
SET tap.nested = '';
SELECT is(translate('SELECT attention FROM memory', 'r1', 2), :'r1_good', 'a nested translate() during the model''s load: the outer call is correct');
SELECT is(current_setting('tap.nested'), :'r1_good', 'and so is the nested one');
SELECT is(current_setting('tap.reenter'), 'done', 'the nested call did run');
RESET ROLE;

SELECT pg_temp.drop_caches() \g /dev/null
SET ROLE tf_tap_user;
SET tap.reenter = 'r1/target';
SET tap.nested = '';
SELECT is(translate('SELECT attention FROM memory', 'r1', 2), :'r1_good', 'a nested translate() during the target tokenizer''s load: the outer call is correct');
SELECT is(current_setting('tap.nested'), :'r1_good', 'and so is the nested one');
RESET ROLE;

SELECT pg_temp.drop_caches() \g /dev/null
SET ROLE tf_tap_user;
SET tap.reenter = 'abort in r1/target';
SELECT is(translate('SELECT attention FROM memory', 'r1', 2), :'r1_good', 'a reload in a nested subtransaction that aborts, under the outer call: correct');
RESET ROLE;
SELECT is(nextval('mine.aborted_runs'), 2::bigint, 'and the nested reload ran, correct, once');
RESET tap.reenter;
DROP POLICY tap_tensors ON transformer_tensors;
DROP POLICY tap_tokenizers ON transformer_tokenizers;
DROP POLICY tap_tokenizers_abort ON transformer_tokenizers;
ALTER TABLE transformer_tensors DISABLE ROW LEVEL SECURITY;
ALTER TABLE transformer_tokenizers DISABLE ROW LEVEL SECURITY;

-- 3. Only a change to our tables reloads: 1,000 caught errors read no row
-- of our tables again and keep memory flat.
SELECT translate('a', 'r2', 2) \g /dev/null
CREATE FUNCTION pg_temp.reads() RETURNS bigint LANGUAGE sql AS $$
  SELECT sum(coalesce(seq_scan, 0) + coalesce(idx_scan, 0))::bigint FROM pg_stat_xact_user_tables
  WHERE relname IN ('transformer_models', 'transformer_tensors', 'transformer_tokenizers') $$;
CREATE FUNCTION pg_temp.memory() RETURNS bigint LANGUAGE sql AS $$
  SELECT sum(total_bytes)::bigint FROM pg_backend_memory_contexts $$;
SELECT pg_temp.reads() AS reads0, pg_temp.memory() AS mem0 \gset
DO $$
BEGIN
  FOR i IN 1..1000 LOOP
    PERFORM translate('a', 'r2', 2);
    BEGIN
      PERFORM translate('a', 'r2', 2);
      PERFORM 1 / 0;
    EXCEPTION WHEN division_by_zero THEN NULL;
    END;
  END LOOP;
END $$;
SELECT is(pg_temp.reads() - :reads0, 0::bigint, '1,000 caught errors after translate(): no reload');
SELECT cmp_ok(pg_temp.memory() - :mem0, '<', 2000000::bigint, '1,000 caught errors: memory flat (grew ' || (pg_temp.memory() - :mem0) || ' bytes)');

-- 4. A change rolled back is undone in the cache too
SAVEPOINT before_replace;
SELECT import_model('r2', :'relu') \g /dev/null
SELECT is(translate('SELECT attention FROM memory', 'r2', 2), :'r1_good', 'a replaced model translates as the new one');
ROLLBACK TO before_replace;
SELECT is(translate('a', 'r2', 2), :'r2_good', 'after ROLLBACK TO SAVEPOINT, as the old one again');

-- 5. A model whose source and target tokenizers are the same file holds one copy
SELECT import_model('multi30k_de_en') \g /dev/null
SELECT count(*) AS builds_before FROM pg_backend_memory_contexts WHERE name = 'transformer tokenizer' \gset
SELECT translate('Ein Mann.', 'multi30k_de_en') \g /dev/null
-- (imported in this transaction, so built in the backend, not shared: one
-- more build, a "transformer tokenizer" context, for both names)
SELECT is((SELECT count(*)::int FROM pg_backend_memory_contexts WHERE name = 'transformer tokenizer'), :builds_before + 1,
  'identical source and target tokenizers are held once ('
  || (SELECT string_agg(ident || ': ' || total_bytes, ', ' ORDER BY ident) FROM pg_backend_memory_contexts
      WHERE name = 'transformer cache entry' AND ident LIKE 'multi30k_de_en/%') || ' bytes, and one build of '
  || (SELECT sum(total_bytes) FROM pg_backend_memory_contexts WHERE name = 'transformer tokenizer') || ')');

-- 6. Parallel workers load with the same search_path-proof queries
CREATE TEMP TABLE par_docs AS SELECT 'SELECT attention FROM memory'::text AS body FROM generate_series(1, 4);
CREATE TABLE public.par_docs AS SELECT * FROM par_docs;
SELECT pg_temp.drop_caches() \g /dev/null
SET LOCAL force_parallel_mode = on;
SET LOCAL parallel_setup_cost = 0;
SET LOCAL parallel_tuple_cost = 0;
SET LOCAL min_parallel_table_scan_size = 0;
SET LOCAL search_path = mine, pg_catalog, public;
SELECT is(ARRAY(SELECT public.translate(body, 'r1', 2) FROM public.par_docs), ARRAY[:'r1_good', :'r1_good', :'r1_good', :'r1_good'],
  'in parallel workers, under a hostile path: correct');
RESET search_path;

SELECT * FROM finish();
ROLLBACK;
