-- Cancel and statement_timeout reach the tokenizer's long loops: 400 MB of
-- whitespace take seconds to normalize (to nothing); under a 200 ms
-- timeout the call ends in less than half its whole time, both measured
-- in the same run.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(1);
SELECT import_model('multi30k_de_en') \g /dev/null
SELECT tokenize('warm up', 'multi30k_de_en/source') \g /dev/null

CREATE FUNCTION pg_temp.seconds_until_cancel(sql text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
  t0 timestamptz := clock_timestamp();
BEGIN
  EXECUTE sql;
  RETURN 'Infinity';          -- finished: never cancelled
EXCEPTION WHEN query_canceled THEN
  RETURN extract(epoch FROM clock_timestamp() - t0);
END $$;

CREATE FUNCTION pg_temp.seconds(sql text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
  t0 timestamptz := clock_timestamp();
BEGIN
  EXECUTE sql;
  RETURN extract(epoch FROM clock_timestamp() - t0);
END $$;
\set normalize 'SELECT tokenize(repeat(\' \', 400000000), \'multi30k_de_en/source\')'
-- the whole work, then the same under a timeout, in the same run
SELECT pg_temp.seconds(:'normalize') AS normalize_full \gset
SET statement_timeout = '200ms';
SELECT pg_temp.seconds_until_cancel(:'normalize') AS normalize_cancelled \gset
RESET statement_timeout;
SELECT cmp_ok(:normalize_cancelled, '<', :normalize_full / 2, 'normalizing 400 MB of spaces: cancelled by a 200 ms timeout after '
  || round(:normalize_cancelled::numeric, 2) || ' s of ' || round(:normalize_full::numeric, 2) || ' s');

SELECT * FROM finish();
ROLLBACK;
