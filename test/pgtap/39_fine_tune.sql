-- fine_tune() (issue 41): a background job that trains a copy of a model on a query's pairs.
-- The cheap checks first, so that a mutant they catch is caught at once: the errors, the
-- privileges, cancel, a loss that is not finite.  Then against PyTorch
-- (tools/gen_fine_tune_fixtures.py: the ports of Hugging Face's tokenizers, 10 steps of
-- torch.optim.Adam on nn.CrossEntropyLoss in float64): the pairs' ids, every step's loss and
-- every weight after 10 steps, for a Marian and an NLLB fixture model; checkpoint averaging; and
-- a run paused, resumed and its worker killed ends with the weights of an uninterrupted run.
-- It commits (workers see only committed rows), and drops what an earlier run left first.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`

SET client_min_messages = warning;
DROP EXTENSION IF EXISTS transformer CASCADE;
DROP TABLE IF EXISTS ftpairs, ftnllb CASCADE;
DROP ROLE IF EXISTS ft_reader, ft_trainer;
CREATE EXTENSION transformer;
SELECT import_model('marian', :'root' || '/test/fixtures/models/marian_swish') \g /dev/null
SELECT import_model('nllb', :'root' || '/test/fixtures/checkpoints/nllb_tiny') \g /dev/null
SELECT plan(63);

\ir include/jobs.psql

-- a float32 of little-endian bytes (normal numbers and zero: what trained weights are); checked
-- on values written by float4send() below
CREATE FUNCTION pg_temp.f32(b bytea, i int) RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN e = 0 THEN 0::float8 ELSE (1 - 2 * s) * (1 + m / 8388608.0::float8) * 2::float8 ^ (e - 127) END
  FROM (SELECT (x >> 31) & 1 AS s, (x >> 23) & 255 AS e, x & 8388607 AS m
        FROM (SELECT get_byte(b, 4 * i)::bigint + (get_byte(b, 4 * i + 1)::bigint << 8) +
                     (get_byte(b, 4 * i + 2)::bigint << 16) + (get_byte(b, 4 * i + 3)::bigint << 24) AS x) a) c $$;
-- the tensors of a safetensors file
CREATE FUNCTION pg_temp.file_tensors(path text) RETURNS TABLE (name text, data bytea) LANGUAGE sql AS $$
  WITH f AS (SELECT pg_read_binary_file(path) AS b),
  h AS (SELECT b, (SELECT sum(get_byte(b, i)::bigint << (8 * i)) FROM generate_series(0, 7) i) AS hlen FROM f),
  j AS (SELECT b, hlen, convert_from(substring(b FROM 9 FOR hlen::int), 'UTF8')::jsonb AS hdr FROM h)
  SELECT k, substring(b FROM (9 + hlen + (v->'data_offsets'->>0)::bigint)::int
                        FOR ((v->'data_offsets'->>1)::bigint - (v->'data_offsets'->>0)::bigint)::int)
  FROM j, jsonb_each(hdr) AS e(k, v) WHERE k <> '__metadata__' $$;
CREATE FUNCTION pg_temp.model_tensors(m text) RETURNS TABLE (name text, dtype text, data bytea) LANGUAGE sql AS $$
  SELECT name, min(dtype), string_agg(data, ''::bytea ORDER BY part) FROM transformer_tensors WHERE model = m GROUP BY name $$;
-- the largest difference of a model's weights from a file's, over every value of every tensor;
-- NULL unless both have the same tensors, all F32, of the same sizes
CREATE FUNCTION pg_temp.max_diff(m text, path text) RETURNS float8 LANGUAGE sql AS $$
  SELECT CASE WHEN (SELECT count(*) FROM pg_temp.model_tensors(m)) =
                   (SELECT count(*) FROM pg_temp.model_tensors(m) o JOIN pg_temp.file_tensors(path) r USING (name)
                    WHERE o.dtype = 'F32' AND octet_length(o.data) = octet_length(r.data))
    THEN (SELECT max(abs(pg_temp.f32(o.data, i) - pg_temp.f32(r.data, i)))
          FROM pg_temp.model_tensors(m) o JOIN pg_temp.file_tensors(path) r USING (name),
               generate_series(0, octet_length(o.data) / 4 - 1) i) END $$;
-- a model's weights as one digest
CREATE FUNCTION pg_temp.digest(m text) RETURNS text LANGUAGE sql AS $$
  SELECT md5(string_agg(name || ':' || md5(data), ',' ORDER BY name)) FROM pg_temp.model_tensors(m) $$;
-- the fixture's lines: the pairs (text, ids) and each step's loss
CREATE FUNCTION pg_temp.fixture(name text) RETURNS SETOF text LANGUAGE sql AS $$
  SELECT l FROM regexp_split_to_table(pg_read_file(current_setting('ft.root') || '/test/fixtures/fine_tune/' || name || '.txt'), E'\n') l $$;
SELECT set_config('ft.root', :'root', false) \g /dev/null
SELECT is((SELECT array_agg(pg_temp.f32(substring(float4send(v) FROM 4 FOR 1) || substring(float4send(v) FROM 3 FOR 1) ||
                                        substring(float4send(v) FROM 2 FOR 1) || substring(float4send(v) FROM 1 FOR 1), 0)::float4)
           FROM unnest('{0, 1, -1, 0.1, -3.5e-7, 1.2e20, -0.0073}'::float4[]) v),
  '{0, 1, -1, 0.1, -3.5e-7, 1.2e20, -0.0073}'::float4[], 'the test''s float32 decoding is right');
-- how many of a job's pairs have the fixture's ids, in the query's order (read before the job commits)
CREATE FUNCTION pg_temp.same_ids(job bigint, tbl text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE c int;
BEGIN
  EXECUTE format('SELECT count(*)::int FROM transformer_job_pairs p JOIN (SELECT row_number() OVER (ORDER BY n) - 1 AS k, * FROM %I) f
                  ON f.k = p.n AND array_to_string(p.source_ids, '','') = f.src_ids AND array_to_string(p.target_ids, '','') = f.tgt_ids
                  WHERE p.job = $1', tbl) INTO c USING job;
  RETURN c;
END $$;
-- how many of a job's steps have the fixture's loss within 1e-4 relative
CREATE FUNCTION pg_temp.same_losses(job bigint, name text) RETURNS int LANGUAGE sql AS $$
  SELECT count(*)::int FROM transformer_job_steps s JOIN
    (SELECT split_part(l, ' ', 2)::int AS step, split_part(l, ' ', 4)::float8 AS loss FROM pg_temp.fixture(name) l WHERE l LIKE 'step %') r
  USING (step) WHERE s.job = same_losses.job AND abs(s.loss - r.loss) <= 1e-4 * abs(r.loss) $$;
-- wait_for_job(), false where it would raise (a failed job): a failed check, never a stopped file
CREATE FUNCTION pg_temp.done(job bigint, timeout interval DEFAULT '2 min') RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  RETURN wait_for_job(job, timeout);
EXCEPTION WHEN object_not_in_prerequisite_state THEN
  RETURN false;
END $$;
-- wait until the job's step is at least want (or 20 s)
CREATE FUNCTION pg_temp.wait_step(job bigint, want int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE s int;
BEGIN
  FOR i IN 1..2000 LOOP
    SELECT coalesce(step, 0) INTO s FROM transformer_jobs WHERE id = job;
    IF s >= want THEN RETURN s; END IF;
    PERFORM pg_sleep(0.01);
  END LOOP;
  RETURN s;
END $$;

CREATE TABLE ftpairs AS
SELECT ord AS n, split_part(substr(l, 6), E'\t', 1) AS de, split_part(l, E'\t', 2) AS en,
       split_part(l, E'\t', 3) AS src_ids, split_part(l, E'\t', 4) AS tgt_ids
FROM pg_temp.fixture('marian') WITH ORDINALITY AS x(l, ord) WHERE l LIKE 'pair %';
CREATE TABLE ftnllb AS
SELECT ord AS n, split_part(substr(l, 6), E'\t', 1) AS de, split_part(l, E'\t', 2) AS en,
       split_part(l, E'\t', 3) AS src_ids, split_part(l, E'\t', 4) AS tgt_ids
FROM pg_temp.fixture('nllb') WITH ORDINALITY AS x(l, ord) WHERE l LIKE 'pair %';
SELECT set_model_segment_length('marian', 12) \g /dev/null
SELECT pg_temp.digest('marian') AS marian_before \gset

-- 1. bad arguments, each with its SQLSTATE
SELECT throws_ok($$SELECT fine_tune(NULL, 'x', 'SELECT de, en FROM ftpairs')$$, '22004', NULL, 'a NULL model');
SELECT throws_ok($$SELECT fine_tune('marian', 'x', 'SELECT de, en FROM ftpairs', batch_size => 0)$$, '22023', NULL, 'batch_size 0');
SELECT throws_ok($$SELECT fine_tune('marian', 'x', 'SELECT de, en FROM ftpairs', learning_rate => 0)$$, '22023', NULL, 'a learning rate of 0');
SELECT throws_ok($$SELECT fine_tune('marian', 'x', 'SELECT de, en FROM ftpairs', learning_rate => 'NaN')$$, '22023', NULL, 'a learning rate of NaN');
SELECT throws_ok($$SELECT fine_tune('marian', 'x', 'SELECT de, en FROM ftpairs', label_smoothing => 1)$$, '22023', NULL, 'label smoothing 1');
SELECT throws_ok($$SELECT fine_tune('marian', 'x', 'SELECT de, en FROM ftpairs', average_last => 2)$$, '22023', NULL,
  'averaging 2 checkpoints of a run of one epoch');
SELECT throws_ok($$SELECT fine_tune('marian', 'marian', 'SELECT de, en FROM ftpairs')$$, '22023', NULL, 'the source model''s own name');
SELECT throws_ok($$SELECT fine_tune('marian', 'nllb', 'SELECT de, en FROM ftpairs')$$, '42710', NULL, 'the name of a model that exists');
SELECT throws_ok($$SELECT fine_tune('nope', 'x', 'SELECT de, en FROM ftpairs')$$, '42704', NULL, 'a model that does not exist');
SELECT throws_ok($$SELECT fine_tune('marian', 'x', 'SELECT de, en, n FROM ftpairs')$$, '42804', NULL, 'a query of three columns');
SELECT throws_ok($$SELECT fine_tune('marian', 'x', 'SELECT n, en FROM ftpairs')$$, '42804', NULL, 'a query whose source is not text');
SELECT throws_ok($$SELECT fine_tune('marian', 'x', 'SELECT de, en FROM ftpairs WHERE false')$$, '22023', NULL, 'a query with no pairs');
SELECT import_model('learned', :'root' || '/test/fixtures/models/prenorm_gelu') \g /dev/null
SELECT import_model('bert', :'root' || '/test/fixtures/encoders/bert_tiny') \g /dev/null
SELECT fine_tune('learned', 'learned_ft', 'SELECT de, en FROM ftpairs', max_steps => 3) AS jl \gset
SELECT throws_ok($$SELECT fine_tune('bert', 'x', 'SELECT de, en FROM ftpairs')$$, '42809', NULL, 'an encoder-only model is refused');
-- untied output layer (paper_relu's lm_head), separate vocabularies (marian_sepvocab's two embed_tokens)
SELECT import_model('untied', :'root' || '/test/fixtures/models/paper_relu') \g /dev/null
SELECT import_model('sepvocab', :'root' || '/test/fixtures/checkpoints/marian_sepvocab') \g /dev/null
SELECT fine_tune('untied', 'untied_ft', 'SELECT de, en FROM ftpairs', max_steps => 3) AS ju \gset
SELECT fine_tune('sepvocab', 'sepvocab_ft', 'SELECT de, en FROM ftpairs', max_steps => 3) AS js \gset
SELECT ok(pg_temp.done(:ju, '1 min'), 'a model with an untied output layer trains');
SELECT is((SELECT count(DISTINCT name)::int FROM transformer_tensors WHERE model = 'untied_ft' AND name = 'lm_head.weight'), 1, '... and keeps it untied');
SELECT ok(pg_temp.done(:js, '1 min'), 'a model with separate vocabularies trains');
SELECT ok(pg_temp.done(:jl, '1 min') AND
          (SELECT md5(string_agg(data, '' ORDER BY part)) FROM transformer_tensors
           WHERE model = 'learned_ft' AND name = 'model.encoder.embed_positions.weight') IS DISTINCT FROM
          (SELECT md5(string_agg(data, '' ORDER BY part)) FROM transformer_tensors
           WHERE model = 'learned' AND name = 'model.encoder.embed_positions.weight'),
          'a model with learned positions trains them too');
SELECT is((SELECT count(DISTINCT name)::int FROM transformer_tensors WHERE model = 'sepvocab_ft' AND name LIKE '%embed_tokens.weight'), 2,
  '... with its two embedding tables');

-- 2. privileges: the query runs as the caller; storing a model takes INSERT on the model tables
CREATE ROLE ft_reader LOGIN;
CREATE ROLE ft_trainer LOGIN;
GRANT SELECT, INSERT, UPDATE, DELETE ON transformer_models, transformer_tensors, transformer_tokenizers TO ft_trainer;
GRANT SELECT ON ftpairs TO ft_reader;
SET ROLE ft_reader;
SELECT throws_ok($$SELECT fine_tune('marian', 'x', 'SELECT de, en FROM ftpairs')$$, '42501', 'permission denied to create models',
  'a role that may not create models cannot fine-tune');
SET ROLE ft_trainer;
SELECT throws_ok($$SELECT fine_tune('marian', 'x', 'SELECT de, en FROM ftpairs')$$, '42501', NULL,
  'the pairs query runs with the caller''s rights (no SELECT on the table)');
RESET ROLE;
GRANT SELECT ON ftpairs TO ft_trainer;
SET ROLE ft_trainer;
SELECT fine_tune('marian', 'marian_theirs', 'SELECT de, en FROM ftpairs', max_steps => 3) AS jt \gset
RESET ROLE;
SELECT ok(pg_temp.done(:jt, '1 min'), 'a role that may create models and read the pairs fine-tunes');
SELECT throws_ok(format('SELECT retry_job_errors(%s)', :jt), '42809', NULL, 'a fine_tune() job has no rows to retry');

-- 3. cancel, and a loss that is not finite
SELECT fine_tune('marian', 'marian_never', 'SELECT de, en FROM ftpairs', max_steps => 1000000) AS jc \gset
SELECT cmp_ok(pg_temp.wait_step(:jc, 5), '>=', 5, 'a long run is under way');
SELECT cancel_job(:jc);
SELECT is(pg_temp.wait_state(:jc, 'cancelled'), 'cancelled', 'cancelled');
SELECT pg_sleep(0.5);
SELECT is((SELECT count(*)::int FROM transformer_job_pairs WHERE job = :jc) + (SELECT count(*)::int FROM transformer_job_checkpoints WHERE job = :jc)
          + (SELECT count(*)::int FROM transformer_models WHERE name = 'marian_never'), 0,
  'a cancelled run leaves no pairs, no saved state and no model');
-- a feed-forward matrix of +-FLT_MAX: finite weights, whose products overflow
SELECT import_model('marian_bad', :'root' || '/test/fixtures/models/marian_swish') \g /dev/null
UPDATE transformer_tensors SET data = substring(decode(repeat('ffff7f7fffff7fff', octet_length(data) / 8 + 1), 'hex') FOR octet_length(data))
WHERE model = 'marian_bad' AND name = 'model.encoder.layers.0.fc1.weight';
SELECT fine_tune('marian_bad', 'marian_bad_ft', 'SELECT de, en FROM ftpairs', max_steps => 5) AS jnan \gset
SELECT is(pg_temp.wait_state(:jnan, 'failed'), 'failed', 'a loss that is not finite fails the job');
SELECT imatches((SELECT last_error FROM transformer_jobs WHERE id = :jnan), '^the loss of step 1 is (inf|nan);',
  '... naming the step and the loss');
SELECT throws_ok(format('SELECT wait_for_job(%s)', :jnan), '55000', NULL, 'wait_for_job() says the job failed');

-- 4. parity with PyTorch: the pairs' ids (read before the job commits), each step's loss, the weights
BEGIN;
SELECT fine_tune('marian', 'marian_ft', 'SELECT de, en FROM ftpairs ORDER BY n', max_steps => 10, batch_size => 2,
                 learning_rate => 1e-3, dropout => 0, shuffle => false) AS jm \gset
SELECT is(pg_temp.same_ids(:jm, 'ftpairs'), 8, 'Marian: the 8 pairs, in the query''s order, as Hugging Face''s MarianTokenizer makes them (source, and text_target)');
COMMIT;
SELECT ok(pg_temp.done(:jm, '2 min'), 'Marian: the fine_tune() job finishes');
SELECT is(pg_temp.same_losses(:jm, 'marian'), 10,
  'Marian: each of the 10 steps'' loss equals PyTorch''s within 1e-4 (label smoothing 0.1, padding ignored)');
SELECT cmp_ok(pg_temp.max_diff('marian_ft', :'root' || '/test/fixtures/fine_tune/marian.safetensors'), '<=', 1e-4::float8,
  'Marian: after 10 steps every weight equals PyTorch''s within 1e-4 (Adam 0.9, 0.98, 1e-9)');
SELECT is(pg_temp.digest('marian'), :'marian_before', 'the source model is untouched');
SELECT is((SELECT convert_from(substring(safetensors_header FROM 9), 'UTF8')::jsonb->'__metadata__'->>'fine_tuned_from'
           FROM transformer_models WHERE name = 'marian_ft'), 'marian', 'the new model''s metadata names the model it came from');
SELECT isnt(translate('Ein Mann fährt mit dem Fahrrad.', 'marian_ft'), NULL, 'the new model translates');
SELECT is((SELECT segment_tokens FROM transformer_models WHERE name = 'marian_ft'), 12, 'the new model keeps the source''s measured segment length');
SELECT quantize_model('marian', 'marian_int8') \g /dev/null
SELECT is((SELECT segment_tokens FROM transformer_models WHERE name = 'marian_int8'), 12, '... as quantize_model()''s copy does');
SELECT is((SELECT count(*)::int FROM transformer_job_pairs WHERE job = :jm) + (SELECT count(*)::int FROM transformer_job_checkpoints WHERE job = :jm),
  0, 'a finished job keeps neither its pairs nor its saved state');
SELECT results_eq(format('SELECT kind, state, activity, step, steps_total, new_model, loss IS NOT NULL FROM transformer_jobs WHERE id = %s', :jm),
  $$VALUES ('fine_tune', 'done', 'done', 10, 10, 'marian_ft', true)$$, 'transformer_jobs shows the run: kind, state, step of steps, the new model, the loss');

BEGIN;
SELECT fine_tune('nllb', 'nllb_ft', 'SELECT de, en FROM ftnllb ORDER BY n', max_steps => 10, batch_size => 2,
                 learning_rate => 1e-3, warmup_steps => 3, dropout => 0, shuffle => false,
                 source_lang => 'deu_Latn', target_lang => 'eng_Latn') AS jn \gset
SELECT is(pg_temp.same_ids(:jn, 'ftnllb'), 8, 'NLLB: the pairs'' ids as NllbTokenizer makes them (deu_Latn first; labels: eng_Latn first)');
COMMIT;
SELECT ok(pg_temp.done(:jn, '2 min'), 'NLLB: the job finishes');
SELECT is(pg_temp.same_losses(:jn, 'nllb'), 10,
  'NLLB: each step''s loss equals PyTorch''s within 1e-4 (a warm-up of 3 steps)');
SELECT cmp_ok(pg_temp.max_diff('nllb_ft', :'root' || '/test/fixtures/fine_tune/nllb.safetensors'), '<=', 1e-4::float8,
  'NLLB: after 10 steps every weight equals PyTorch''s within 1e-4 (pre-norm, final norms)');
SELECT is((SELECT count(*)::int FROM transformer_job_steps WHERE job = :jn AND learning_rate = CASE WHEN step < 3 THEN 1e-3 * step / 3 ELSE 1e-3 END), 10,
  'NLLB: the rate of each step: 1e-3 after a linear warm-up of 3 steps');

-- checkpoint averaging: 4 steps averaging the last 2 checkpoints (steps 2 and 4) is the mean of
-- the runs that stop at 2 and at 4 (the same steps: a constant rate, the query's order, no dropout)
SELECT fine_tune('marian', 'marian_s2', 'SELECT de, en FROM ftpairs ORDER BY n', max_steps => 2, batch_size => 2,
                 learning_rate => 1e-3, dropout => 0, shuffle => false) AS j2 \gset
SELECT fine_tune('marian', 'marian_s4', 'SELECT de, en FROM ftpairs ORDER BY n', max_steps => 4, batch_size => 2,
                 learning_rate => 1e-3, dropout => 0, shuffle => false) AS j4 \gset
SELECT fine_tune('marian', 'marian_avg', 'SELECT de, en FROM ftpairs ORDER BY n', max_steps => 4, batch_size => 2,
                 learning_rate => 1e-3, dropout => 0, shuffle => false, average_last => 2) AS javg \gset
SELECT ok(pg_temp.done(:j2, '1 min') AND pg_temp.done(:j4, '1 min') AND pg_temp.done(:javg, '1 min'), 'three runs of 2, 4 and 4 steps (the last averaging 2 checkpoints) finish');
SELECT cmp_ok((SELECT max(abs(pg_temp.f32(a.data, i) - (pg_temp.f32(x.data, i) + pg_temp.f32(y.data, i)) / 2))
               FROM pg_temp.model_tensors('marian_avg') a JOIN pg_temp.model_tensors('marian_s2') x USING (name)
               JOIN pg_temp.model_tensors('marian_s4') y USING (name), generate_series(0, octet_length(a.data) / 4 - 1) i),
  '<=', 1e-7::float8, 'average_last => 2 stores the mean of the weights at steps 2 and 4');
SELECT isnt(pg_temp.digest('marian_s2'), pg_temp.digest('marian_s4'), '... which differ');

-- 5. a run paused, resumed and its worker killed ends where an uninterrupted run ends, bit for bit
-- (a new order every epoch, dropout, 3 checkpoints averaged: all of it must resume exactly)
SELECT fine_tune('marian', 'marian_whole', 'SELECT de, en FROM ftpairs', max_steps => 1500, batch_size => 3,
                 learning_rate => 3e-4, warmup_steps => 50, dropout => 0.1, seed => 7, average_last => 3) AS jw \gset
SELECT ok(pg_temp.done(:jw, '2 min'), 'an uninterrupted run of 1500 steps finishes');
SELECT fine_tune('marian', 'marian_resumed', 'SELECT de, en FROM ftpairs', max_steps => 1500, batch_size => 3,
                 learning_rate => 3e-4, warmup_steps => 50, dropout => 0.1, seed => 7, average_last => 3) AS jr \gset
SELECT cmp_ok(pg_temp.wait_step(:jr, 100), '>=', 100, 'the same run, started again');
SELECT pause_job(:jr);
SELECT is(pg_temp.wait_state(:jr, 'paused'), 'paused', 'paused');
SELECT pg_sleep(0.5);
SELECT ok((SELECT count(*) FROM transformer_job_checkpoints WHERE job = :jr) > 0, 'a paused run has saved its state');
SELECT (SELECT step FROM transformer_jobs WHERE id = :jr) AS paused_at \gset
SELECT pg_sleep(0.3);
SELECT is((SELECT step FROM transformer_jobs WHERE id = :jr), :paused_at, 'a paused run takes no step');
SELECT resume_job(:jr);
SELECT cmp_ok(pg_temp.wait_step(:jr, :paused_at + 200), '>=', :paused_at + 200, 'resumed, it goes on');
SELECT ok((SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = format('transformer job %s worker 1', :jr)),
  'its worker is killed');
SELECT ok(pg_temp.done(:jr, '2 min'), 'the supervisor starts it again, and it finishes');
SELECT is(pg_temp.digest('marian_resumed'), pg_temp.digest('marian_whole'),
  'the weights equal the uninterrupted run''s bit for bit (order, dropout masks, Adam, the average)');
SELECT isnt(pg_temp.digest('marian_resumed'), pg_temp.digest('marian'), '... and the run changed them');

SET ROLE ft_trainer;
SELECT results_eq(format('SELECT count(*) FILTER (WHERE job = %s)::int, count(*) FILTER (WHERE job <> %s)::int FROM transformer_job_steps', :jt, :jt),
  $$VALUES (3, 0)$$, 'a role sees its own job''s steps, and none of the other role''s jobs');
RESET ROLE;
SELECT cmp_ok((SELECT count(*)::int FROM transformer_job_steps WHERE job <> :jt), '>', 0, '... which have steps');

-- the bundled model's next version: fine_tune()'s run on Multi30k, installed beside it
SELECT cmp_ok(import_model('multi30k_de_en_v2'), '>', 7000000::bigint, 'multi30k_de_en_v2 is bundled');
SELECT is(translate('Zwei Hunde spielen im Schnee.', 'multi30k_de_en_v2'), 'Two dogs are playing in the snow.', '... and translates');
SELECT is((SELECT segment_tokens FROM transformer_models WHERE name = 'multi30k_de_en_v2'), 25, '... with the segment length of multi30k_de_en');

SELECT * FROM finish();
SELECT drop_model(name) FROM transformer_models \g /dev/null
DROP TABLE ftpairs, ftnllb;
REASSIGN OWNED BY ft_reader, ft_trainer TO CURRENT_USER;
DROP OWNED BY ft_reader, ft_trainer;
DROP ROLE ft_reader, ft_trainer;
DROP EXTENSION transformer CASCADE;
