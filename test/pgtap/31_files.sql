-- Files that cannot block and cannot point elsewhere (issue 38): every file
-- that import_model() and import_tokenizer() read is opened without
-- blocking and checked before it is read.  A FIFO as a shard blocked
-- import_model() in open() for good, ignoring cancel; symlinked shards and
-- a symlinked pytorch_model.bin pointing outside the directory were read.
-- The directories are made by the server's own user (COPY TO PROGRAM), in
-- a scratch directory under /tmp, from the checkpoint fixtures.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`
\set fx :root/test/fixtures/checkpoints

-- (one scratch directory per backend: the mutation shards run this file at once)
SELECT '/tmp/transformer_files_test_' || pg_backend_pid() AS scratch \gset
BEGIN;
CREATE EXTENSION transformer;
SELECT plan(14);

CREATE FUNCTION pg_temp.sh(cmd text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('COPY (SELECT 1) TO PROGRAM %L', 'sh -ec ' || quote_literal(cmd));
END $$;
-- (quote_literal's E'' form would confuse sh: commands here have no quotes or backslashes)
CREATE FUNCTION pg_temp.outcome(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE st text; msg text; det text;
BEGIN
  EXECUTE sql;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
  RETURN st || ' ' || msg || ' ' || coalesce(det, '');
END $$;

SELECT pg_temp.sh(format($c$
  rm -rf %1$s; mkdir -p %1$s/outside
  cp -r %2$s/m2m100_tiny %1$s/fifo_shard; rm %1$s/fifo_shard/model-00002-of-00002.safetensors
  mkfifo %1$s/fifo_shard/model-00002-of-00002.safetensors
  (timeout 30 sh -c "sleep 20; echo x > %1$s/fifo_shard/model-00002-of-00002.safetensors") > /dev/null 2>&1 &
  cp -r %2$s/m2m100_tiny %1$s/link_shard; mv %1$s/link_shard/model-00002-of-00002.safetensors %1$s/outside/
  ln -s ../outside/model-00002-of-00002.safetensors %1$s/link_shard/model-00002-of-00002.safetensors
  cp -r %2$s/nllb_tiny_bin %1$s/link_bin; mv %1$s/link_bin/pytorch_model.bin %1$s/outside/
  ln -s %1$s/outside/pytorch_model.bin %1$s/link_bin/pytorch_model.bin
  cp -r %2$s/nllb_tiny_bin %1$s/device; rm %1$s/device/pytorch_model.bin; ln -s /dev/zero %1$s/device/pytorch_model.bin
  cp -r %2$s/nllb_tiny_bin %1$s/link_config; mv %1$s/link_config/config.json %1$s/outside/
  ln -s ../outside/config.json %1$s/link_config/config.json
  cp -r %2$s/nllb_tiny_bin %1$s/inside_link; mkdir %1$s/inside_link/weights
  mv %1$s/inside_link/pytorch_model.bin %1$s/inside_link/weights/; ln -s weights/pytorch_model.bin %1$s/inside_link/pytorch_model.bin
  mkdir -p %1$s/hub/models--org--m2m/snapshots/abc123 %1$s/hub/models--org--m2m/blobs
  for f in %2$s/m2m100_tiny/*; do b=$(basename $f); cp $f %1$s/hub/models--org--m2m/blobs/$b.blob
    ln -s ../../blobs/$b.blob %1$s/hub/models--org--m2m/snapshots/abc123/$b; done
  mkfifo %1$s/tokenizer.fifo
  (timeout 30 sh -c "sleep 20; echo x > %1$s/tokenizer.fifo") > /dev/null 2>&1 &
  mkdir %1$s/xlmr_tok; ln -s %2$s/m2m100_tiny/sentencepiece.bpe.model %1$s/xlmr_tok/sentencepiece.bpe.model
$c$, :'scratch', :'fx'));

SET LOCAL statement_timeout = '15s';
CREATE TEMP TABLE t0 AS SELECT clock_timestamp() AS t;
SELECT alike(pg_temp.outcome(format('SELECT import_model(%L, %L)', 'f1', :'scratch' || '/fifo_shard')),
            '42809 "%/fifo_shard/model-00002-of-00002.safetensors" is not a regular file It is a FIFO.',
            'a FIFO as a shard: refused as not a regular file');
SELECT cmp_ok(extract(epoch FROM clock_timestamp() - (SELECT t FROM t0))::float8, '<', 5::float8,
              'at once, not after a writer came (20 s)');
SELECT alike(pg_temp.outcome(format('SELECT import_model(%L, %L)', 'f2', :'scratch' || '/link_shard')),
            '42501 file "%/link_shard/model-00002-of-00002.safetensors" lies outside directory "%/link_shard" Its real path is "%/outside/model-00002-of-00002.safetensors".',
            'a symlinked shard pointing outside the directory: refused, naming its real path');
SELECT alike(pg_temp.outcome(format('SELECT import_model(%L, %L)', 'f3', :'scratch' || '/link_bin')),
            '42501 file "%/link_bin/pytorch_model.bin" lies outside directory%',
            'a symlinked pytorch_model.bin pointing outside: refused');
SELECT alike(pg_temp.outcome(format('SELECT import_model(%L, %L)', 'f4', :'scratch' || '/device')),
            '42809 "%/device/pytorch_model.bin" is not a regular file It is a device.',
            'a link to /dev/zero: refused as a device, at once');
SELECT alike(pg_temp.outcome(format('SELECT import_model(%L, %L)', 'f5', :'scratch' || '/link_config')),
            '42501 file "%/link_config/config.json" lies outside directory%',
            'a symlinked config.json pointing outside: refused');
SELECT is(pg_temp.outcome(format('SELECT import_model(%L, %L)', 'f6', :'scratch' || '/inside_link')), 'ok',
          'a symlink to a file inside the directory is read');
SELECT is(pg_temp.outcome(format('SELECT import_model(%L, %L)', 'f7', :'scratch' || '/hub/models--org--m2m/snapshots/abc123')), 'ok',
          'Hugging Face''s cache (a snapshot''s files are links to ../../blobs) is read');
SELECT cmp_ok(import_model('f8', :'fx' || '/m2m100_tiny'), '>', 0::bigint, 'the same model from the fixture itself');
SELECT is(translate('Ein Hund läuft.', 'f7', source_lang => 'de', target_lang => 'en'),
          translate('Ein Hund läuft.', 'f8', source_lang => 'de', target_lang => 'en'),
          'translates as the model read from plain files');
SELECT is((SELECT count(*)::int FROM transformer_models WHERE name IN ('f1', 'f2', 'f3', 'f4', 'f5')), 0,
          'nothing of a refused import is stored');
TRUNCATE t0; INSERT INTO t0 VALUES (clock_timestamp());
SELECT alike(pg_temp.outcome(format('SELECT import_tokenizer(%L, %L)', 't1', :'scratch' || '/tokenizer.fifo')),
            '42809 "%/tokenizer.fifo" is not a regular file It is a FIFO.',
            'import_tokenizer() of a FIFO: refused');
SELECT cmp_ok(extract(epoch FROM clock_timestamp() - (SELECT t FROM t0))::float8, '<', 5::float8, 'at once');
SELECT alike(pg_temp.outcome(format('SELECT import_tokenizer(%L, %L)', 't2', :'scratch' || '/xlmr_tok')),
            '42501 file "%/xlmr_tok/sentencepiece.bpe.model" lies outside directory%',
            'a tokenizer directory''s symlink pointing outside: refused');

-- (the writers waiting to unblock a FIFO find no directory when they wake, or give up after 30 s)
SELECT pg_temp.sh(format('rm -rf %s', :'scratch'));
SELECT * FROM finish();
ROLLBACK;
