-- Threads for one call (transformer.threads, src/core/threads.c): the
-- products are shared by column blocks that every thread count cuts the
-- same way, so translations are identical with 1, 2 and 3 threads, fp32
-- and int8, per sentence, batched and as one long document; a cancel
-- still arrives (the calling thread checks interrupts between products);
-- and max_threads caps what a role may set.  Also the decoding workspace
-- (transformer.decode_workspace): kept or not, the same translations.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(11);
SELECT import_model('multi30k_de_en') \g /dev/null
SELECT quantize_model('multi30k_de_en', 'multi30k_de_en_i8') \g /dev/null
SET LOCAL transformer.max_threads = 8;

CREATE TEMP TABLE src (i int, de text);
INSERT INTO src VALUES
  (1, 'Ein Mann fährt Fahrrad.'),
  (2, 'Zwei Hunde spielen im Schnee.'),
  (3, 'Eine Frau in einem roten Kleid singt auf einer Bühne.'),
  (4, 'Kinder spielen am Strand mit einem Ball.'),
  (5, 'Ein älterer Mann sitzt auf einer Bank und liest eine Zeitung.'),
  (6, 'Eine Gruppe von Menschen steht vor einem Gebäude.');

CREATE FUNCTION pg_temp.run(threads int) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
  out text[];
BEGIN
  PERFORM set_config('transformer.threads', threads::text, true);
  SELECT array_agg(translate(de, 'multi30k_de_en', 4) ORDER BY i)
      || array_agg(translate(de, 'multi30k_de_en_i8', 4) ORDER BY i)
      || translate((SELECT array_agg(de ORDER BY i) FROM src), 'multi30k_de_en', 4)
      || translate((SELECT array_agg(de ORDER BY i) FROM src), 'multi30k_de_en_i8', 1)
      || translate((SELECT string_agg(de, ' ' ORDER BY i) FROM src), 'multi30k_de_en', 4)
    INTO out FROM src;
  RETURN out;
END $$;

SELECT pg_temp.run(1) AS one \gset
SELECT is(cardinality(:'one'::text[]), 25, '25 translations: 6 per sentence fp32 and int8, 6 batched fp32 and int8, a document');
SELECT is(pg_temp.run(2), :'one'::text[], '2 threads: the same translations as 1');
SELECT is(pg_temp.run(3), :'one'::text[], '3 threads: the same translations as 1');
SELECT is(pg_temp.run(1), :'one'::text[], 'back to 1 thread: the same again');
SET LOCAL transformer.decode_workspace = 0;
SELECT is(pg_temp.run(2), :'one'::text[], 'no workspace kept between calls (decode_workspace = 0): the same translations');
SET LOCAL transformer.decode_workspace = '1MB';
SELECT is(pg_temp.run(1), :'one'::text[], 'a workspace too small for a batch (1MB): the same translations');
RESET transformer.decode_workspace;

-- every translation is a real sentence (not empty: the threads wrote their columns)
SELECT is((SELECT count(*)::int FROM unnest(:'one'::text[]) t WHERE t ~ '^[A-Z][a-z ]' AND length(t) > 10), 25, 'every translation starts like an English sentence');

-- a cancel reaches a call that runs on threads: 64 sentences at beam 8, held to 255 steps
SET LOCAL transformer.threads = 2;
CREATE FUNCTION pg_temp.seconds_until_cancel(sql text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
  t0 timestamptz := clock_timestamp();
BEGIN
  EXECUTE sql;
  RETURN 'Infinity';
EXCEPTION WHEN query_canceled THEN
  RETURN extract(epoch FROM clock_timestamp() - t0);
END $$;
SET LOCAL statement_timeout = '200ms';
SELECT pg_temp.seconds_until_cancel($$SELECT translate(array_fill('Ein Mann fährt Fahrrad.'::text, ARRAY[64]),
  'multi30k_de_en', beam_size => 8, max_length => 256, min_length => 256)$$) AS cancelled \gset
SET LOCAL statement_timeout = 0;
SELECT cmp_ok(:cancelled::float8, '<', 2.0::float8, 'two threads: a 200 ms timeout cancels a long beam search after '
  || round(:cancelled::numeric, 2) || ' s');
SELECT is(translate('Ein Mann fährt Fahrrad.', 'multi30k_de_en'), (:'one'::text[])[1], 'after the cancel, the threads translate as before');

-- an ordinary role sets threads, not max_threads, and max_threads caps it
CREATE ROLE tf_threads_user;
SET LOCAL ROLE tf_threads_user;
SELECT lives_ok($$SET LOCAL transformer.threads = 3$$, 'an ordinary role sets transformer.threads');
SELECT throws_ok($$SET LOCAL transformer.max_threads = 64$$, '42501',
  'permission denied to set parameter "transformer.max_threads"', 'only a superuser sets transformer.max_threads');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
