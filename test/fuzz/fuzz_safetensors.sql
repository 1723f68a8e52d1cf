-- Mutation fuzzing of the safetensors and config.json readers, in the server
-- (they use PostgreSQL's JSON parser, so they are fuzzed where they run).
-- Each iteration spoils a real model's files (bit flips, random bytes,
-- JSON tokens written over the header, truncation, insertion) and loads
-- them with load_model() in a subtransaction that is always rolled back.
-- A crash ends the backend and this script; a clean run prints the counts.
--   psql -v seconds=600 -f test/fuzz/fuzz_safetensors.sql   (make fuzz-safetensors)
\set ON_ERROR_STOP 1
\if :{?seconds}
\else
\set seconds 60
\endif
\set dir `pwd`/test/fixtures/models/paper_relu
SET fuzz.seconds = :seconds;
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS transformer;
CREATE TEMP TABLE base AS SELECT
  pg_read_binary_file(:'dir' || '/config.json') AS config,
  pg_read_binary_file(:'dir' || '/model.safetensors') AS st,
  pg_read_binary_file(:'dir' || '/source.spm') AS spm,
  pg_read_binary_file(:'dir' || '/vocab.json') AS vocab;

CREATE FUNCTION pg_temp.mutate(b bytea, focus int) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
  n int := octet_length(b);
  tokens text[] := ARRAY['{', '}', '[', ']', '"', ':', ',', '-', '0', '1', '9', 'e', '.', ' ', 'null',
                         '"F32"', '"F16"', '"BF16"', '"I64"', '"shape"', '"dtype"', '"data_offsets"',
                         '99999999999999999999', '-1', '1e308', '4294967296', '\u0000', '""'];
  pos int;
  op int := floor(random() * 6);
BEGIN
  IF n = 0 THEN RETURN '\x00'::bytea; END IF;
  -- most mutations land in the first `focus` bytes (the header)
  pos := floor(random() * least(n, CASE WHEN random() < 0.9 THEN focus ELSE n END));
  IF op = 0 THEN        -- flip bits in a few bytes
    FOR i IN 1..1 + floor(random() * 4) LOOP
      pos := floor(random() * least(n, focus));
      b := set_byte(b, pos, get_byte(b, pos) # (1 << floor(random() * 8)::int));
    END LOOP;
  ELSIF op = 1 THEN     -- random bytes
    FOR i IN 1..1 + floor(random() * 8) LOOP
      b := set_byte(b, floor(random() * least(n, focus))::int, floor(random() * 256)::int);
    END LOOP;
  ELSIF op = 2 THEN     -- a JSON token written over the header
    b := overlay(b PLACING convert_to(tokens[1 + floor(random() * array_length(tokens, 1))], 'UTF8') FROM pos + 1);
  ELSIF op = 3 THEN     -- truncation
    b := substring(b FROM 1 FOR pos);
  ELSIF op = 4 THEN     -- insertion
    b := substring(b FROM 1 FOR pos) || convert_to(tokens[1 + floor(random() * array_length(tokens, 1))], 'UTF8')
         || substring(b FROM pos + 1);
  ELSE                  -- the length prefix
    b := overlay(b PLACING int8send((random() * 2^40)::bigint) FROM 1);
  END IF;
  RETURN b;
END $$;

CREATE TEMP TABLE outcome (kind text, n bigint);
DO $$
DECLARE
  deadline timestamptz := clock_timestamp() + make_interval(secs => current_setting('fuzz.seconds')::int);
  f base;
  st bytea;
  cfg bytea;
  execs bigint := 0;
  loaded bigint := 0;
  refused bigint := 0;
BEGIN
  SELECT * INTO f FROM base;
  WHILE clock_timestamp() < deadline LOOP
    st := f.st;
    cfg := f.config;
    FOR k IN 1..1 + floor(random() * 3) LOOP
      IF random() < 0.8 THEN st := pg_temp.mutate(st, 8 + 4096);
      ELSE cfg := pg_temp.mutate(cfg, octet_length(cfg)); END IF;
    END LOOP;
    execs := execs + 1;
    BEGIN
      PERFORM load_model('fuzz', cfg, st, f.spm, f.spm, f.vocab);
      loaded := loaded + 1;
      PERFORM translate('SELECT attention', 'fuzz', 2, 8);
      RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'roll back';
    EXCEPTION WHEN OTHERS THEN
      IF SQLERRM <> 'roll back' THEN refused := refused + 1; END IF;
    END;
  END LOOP;
  INSERT INTO outcome VALUES ('executions', execs), ('loaded', loaded), ('refused with an error', refused);
END $$;
SELECT kind, n FROM outcome;
