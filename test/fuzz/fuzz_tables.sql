-- Mutation fuzzing of our own tables' rows, in the server: the rows are
-- untrusted input (anyone with INSERT on them wrote them).  Each iteration
-- spoils one to three rows of real models and tokenizers by plain SQL
-- (shapes, dtypes, byte lengths and contents, configurations, tokenizer
-- bytes and vocabularies, missing and extra rows, NULLs), then loads and
-- uses them: translate() in its forms, encoder_output(), embed(), tokenize(),
-- detokenize().  Every iteration is a subtransaction that is rolled back.
-- A crash ends the backend and this script; a clean run prints the counts
-- of outcomes by SQLSTATE (XX000, an internal error, would be a bug too).
-- The table constraints (CHECK, NOT NULL) are dropped first, in this
-- database only, so that the fuzzer writes what a table owner could.
--   psql -v seconds=600 -f test/fuzz/fuzz_tables.sql   (make fuzz-tables)
\set ON_ERROR_STOP 1
\if :{?seconds}
\else
\set seconds 60
\endif
\set root `pwd`
SET fuzz.seconds = :seconds;
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS transformer CASCADE;
CREATE EXTENSION transformer;
ALTER TABLE transformer_tensors DROP CONSTRAINT transformer_tensors_dtype_check,
  ALTER shape DROP NOT NULL, ALTER dtype DROP NOT NULL, ALTER data DROP NOT NULL;
ALTER TABLE transformer_models ALTER config DROP NOT NULL;
ALTER TABLE transformer_tokenizers ALTER vocab DROP NOT NULL;
SELECT import_model(m, :'root' || '/test/fixtures/models/' || m) FROM unnest(ARRAY['marian_swish', 'paper_relu', 'prenorm_gelu']) m;

-- spoil bytes: bit flips, random bytes, truncation, insertion, NaN, empty
CREATE FUNCTION pg_temp.mutate_bytes(b bytea) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
  n int := coalesce(octet_length(b), 0);
  pos int := floor(random() * greatest(n, 1));
  op int := floor(random() * 7);
BEGIN
  IF n = 0 THEN RETURN '\x00'::bytea; END IF;
  IF op = 0 THEN
    FOR i IN 1..1 + floor(random() * 4) LOOP
      pos := floor(random() * least(n, 4096));
      b := set_byte(b, pos, get_byte(b, pos) # (1 << floor(random() * 8)::int));
    END LOOP;
  ELSIF op = 1 THEN b := set_byte(b, pos, floor(random() * 256)::int);
  ELSIF op = 2 THEN b := substring(b FROM 1 FOR pos);
  ELSIF op = 3 THEN b := substring(b FROM 1 FOR pos) || decode(md5(random()::text), 'hex') || substring(b FROM pos + 1);
  ELSIF op = 4 AND n >= 4 THEN b := overlay(b PLACING '\x0000c07f'::bytea FROM 1 + 4 * floor(random() * (n / 4))::int);
  ELSIF op = 5 THEN b := ''::bytea;
  ELSE b := b || b;
  END IF;
  RETURN b;
END $$;

CREATE FUNCTION pg_temp.edge_int() RETURNS bigint LANGUAGE sql AS $$
  SELECT (ARRAY[-9223372036854775808, -3946369, -1, 0, 1, 2, 3, 4, 8, 16, 32, 33, 64, 128, 200, 201, 256,
                65536, 2147483647, 2147483648, 4294967296, 4611686018427387904, 9223372036854775807])
         [1 + floor(random() * 23)::int] $$;

CREATE FUNCTION pg_temp.spoil() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  op int := floor(random() * 12);
  m text := (ARRAY['marian_swish', 'paper_relu', 'prenorm_gelu'])[1 + floor(random() * 3)::int];
  t text;
  k text;
BEGIN
  SELECT name INTO t FROM transformer_tensors WHERE model = m ORDER BY random() LIMIT 1;
  IF op = 0 THEN        -- a shape of random rank and edge values
    UPDATE transformer_tensors SET shape = ARRAY(SELECT pg_temp.edge_int() FROM generate_series(1, floor(random() * 10)::int))
    WHERE model = m AND name = t;
  ELSIF op = 1 THEN     -- one dimension changed
    UPDATE transformer_tensors SET shape[1 + floor(random() * coalesce(cardinality(shape), 1))::int] = pg_temp.edge_int()
    WHERE model = m AND name = t;
  ELSIF op = 2 THEN     -- dtypes, known and not
    UPDATE transformer_tensors SET dtype = (ARRAY['F32', 'F16', 'BF16', 'I64', '', 'F3', 'F32 ', NULL])[1 + floor(random() * 8)::int]
    WHERE model = m AND name = t;
  ELSIF op = 3 THEN     -- the data
    UPDATE transformer_tensors SET data = pg_temp.mutate_bytes(data) WHERE model = m AND name = t;
  ELSIF op = 4 THEN     -- shape and data consistent with each other, not with the configuration
    UPDATE transformer_tensors SET shape = ARRAY[n], data = substring(decode(repeat('00003f', 1 + n::int), 'hex') FROM 1 FOR 4 * n::int)
    FROM (SELECT floor(random() * 300)::bigint AS n) r WHERE model = m AND name = t;
  ELSIF op = 5 THEN     -- rows missing, extra, NULL
    CASE floor(random() * 4)::int
      WHEN 0 THEN DELETE FROM transformer_tensors WHERE model = m AND name = t;
      WHEN 1 THEN INSERT INTO transformer_tensors SELECT model, name || '.x', shape, dtype, data_offset, data FROM transformer_tensors WHERE model = m AND name = t;
      WHEN 2 THEN UPDATE transformer_tensors SET shape = NULL WHERE model = m AND name = t;
      ELSE UPDATE transformer_tensors SET data = NULL WHERE model = m AND name = t;
    END CASE;
  ELSIF op = 6 THEN     -- a configuration key set to an edge value or a wrong type
    SELECT key INTO k FROM transformer_models, jsonb_object_keys(config) key WHERE name = m ORDER BY random() LIMIT 1;
    UPDATE transformer_models SET config = jsonb_set(config, ARRAY[k],
      (ARRAY[to_jsonb(pg_temp.edge_int()), '"swish"'::jsonb, 'true'::jsonb, 'null'::jsonb, '[1]'::jsonb, '1.5'::jsonb, '1e400'::jsonb])[1 + floor(random() * 7)::int])
    WHERE name = m;
  ELSIF op = 7 THEN     -- tokenizer bytes
    UPDATE transformer_tokenizers SET model = pg_temp.mutate_bytes(model) WHERE name = m || (ARRAY['/source', '/target'])[1 + floor(random() * 2)::int];
  ELSIF op = 8 THEN     -- a vocabulary entry set to an edge value or a wrong type
    SELECT key INTO k FROM transformer_tokenizers, jsonb_object_keys(vocab) key WHERE name = m || '/source' ORDER BY random() LIMIT 1;
    UPDATE transformer_tokenizers SET vocab = jsonb_set(vocab, ARRAY[k],
      (ARRAY[to_jsonb(pg_temp.edge_int()), '"x"'::jsonb, 'null'::jsonb, '{}'::jsonb, '0'::jsonb])[1 + floor(random() * 5)::int])
    WHERE name = m || (ARRAY['/source', '/target'])[1 + floor(random() * 2)::int];
  ELSIF op = 9 THEN     -- vocabularies replaced
    UPDATE transformer_tokenizers SET vocab = (ARRAY['[1,2]'::jsonb, '{}'::jsonb, '{"<unk>": 0}'::jsonb, '"x"'::jsonb, NULL])[1 + floor(random() * 5)::int]
    WHERE name = m || (ARRAY['/source', '/target'])[1 + floor(random() * 2)::int];
  ELSIF op = 10 THEN    -- another model's tokenizer, or one without a vocabulary
    UPDATE transformer_tokenizers SET vocab = NULL WHERE name = m || '/target';
  ELSE                  -- the whole configuration replaced
    UPDATE transformer_models SET config = (ARRAY['[]'::jsonb, '{}'::jsonb, 'null'::jsonb, NULL])[1 + floor(random() * 4)::int] WHERE name = m;
  END IF;
  RETURN m;
END $$;

CREATE TEMP TABLE outcome (sqlstate text, n bigint, example text);
DO $$
DECLARE
  deadline timestamptz := clock_timestamp() + make_interval(secs => current_setting('fuzz.seconds')::int);
  m text;
  execs bigint := 0;
  state text;
  counts jsonb := '{}';
  samples jsonb := '{}';
  inputs text[] := ARRAY['SELECT attention FROM memory', 'a', 'Transformer', '  tokens   and	positions  ', 'ü€😀'];
  input text;
BEGIN
  WHILE clock_timestamp() < deadline LOOP
    execs := execs + 1;
    input := inputs[1 + floor(random() * 5)::int];
    BEGIN
      FOR k IN 1..1 + floor(random() * 3) LOOP
        m := pg_temp.spoil();
      END LOOP;
      CASE floor(random() * 6)::int
        WHEN 0 THEN PERFORM translate(input, m, 1 + floor(random() * 4)::int, 1 + floor(random() * 20)::int);
        WHEN 1 THEN PERFORM translate(ARRAY[input, 'a', NULL], m, 2);
        WHEN 2 THEN PERFORM encoder_output(input, m);
        WHEN 3 THEN PERFORM embed(input, m);
        WHEN 4 THEN PERFORM tokenize(input, m || '/source'), tokens(input, m || '/source');
        ELSE PERFORM detokenize(ARRAY[0, 1, 2, 3, 50, 100, 199, 200, 5000], m || '/target');
      END CASE;
      RAISE EXCEPTION USING ERRCODE = 'FZ001', MESSAGE = 'roll back';
    EXCEPTION WHEN OTHERS THEN
      state := CASE WHEN SQLSTATE = 'FZ001' THEN 'ran (rolled back)' ELSE SQLSTATE END;
      counts := jsonb_set(counts, ARRAY[state], to_jsonb(coalesce((counts->>state)::bigint, 0) + 1));
      IF NOT samples ? state THEN samples := jsonb_set(samples, ARRAY[state], to_jsonb(SQLERRM)); END IF;
      IF SQLSTATE = 'XX000' THEN RAISE WARNING 'internal error: %', SQLERRM; END IF;
    END;
  END LOOP;
  INSERT INTO outcome SELECT 'iterations', execs, NULL;
  INSERT INTO outcome SELECT key, value::bigint, samples->>key FROM jsonb_each_text(counts);
END $$;
SELECT sqlstate, n, left(example, 100) AS example FROM outcome ORDER BY n DESC;
