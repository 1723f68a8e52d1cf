-- Translating 2,000 Multi30k sentences (test_2016_flickr and test_2017_flickr)
-- on a distributed table, two workers against one (issue 16).
--   CITUS_PSQL=1 test/citus/run.sh bench/citus_scale.sql
-- The write-back form that runs whole on the workers
-- (INSERT ... SELECT translate() ... ON CONFLICT DO UPDATE) is timed:
--  1. two workers, one connection (so one core) per worker;
--  2. one worker (the other drained), one connection;
--  3. one worker, Citus's default of several connections per worker.
\set root `pwd`
SET client_min_messages = warning;
CREATE EXTENSION transformer;
SET citus.enable_local_reference_table_foreign_keys = off;
SET citus.enable_unsafe_triggers = on;
SELECT create_reference_table('transformer_tokenizers') \g /dev/null
SELECT create_reference_table('transformer_models') \g /dev/null
SELECT create_reference_table('transformer_tensors') \g /dev/null
SELECT import_model('multi30k_de_en') \g /dev/null
CREATE TABLE src (n serial, de text);
\copy src (de) FROM PROGRAM 'zcat ../shared/data/multi30k/test_2016_flickr.de.gz ../shared/data/multi30k/test_2017_flickr.de.gz' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02')
CREATE TABLE docs (id int PRIMARY KEY, de text, en text);
SELECT create_distributed_table('docs', 'id') \g /dev/null
INSERT INTO docs (id, de) SELECT n, de FROM src;
SELECT count(*) AS sentences FROM docs;
-- every worker backend loads the model once (not timed)
SELECT count(translate(de, 'multi30k_de_en')) FROM docs WHERE id <= 64 \g /dev/null

\echo 1. two workers, one connection each
SET citus.max_adaptive_executor_pool_size = 1;
\timing on
INSERT INTO docs (id, de, en) SELECT id, de, translate(de, 'multi30k_de_en') FROM docs ON CONFLICT (id) DO UPDATE SET en = EXCLUDED.en;
\timing off
CREATE TABLE two AS SELECT id, en FROM docs;

SELECT citus_drain_node('localhost', :w2, shard_transfer_mode => 'block_writes') \g /dev/null
SELECT nodeport, count(*) AS shards FROM pg_dist_shard_placement p JOIN pg_dist_shard s USING (shardid)
WHERE logicalrelid = 'docs'::regclass GROUP BY nodeport ORDER BY nodeport;
SELECT count(translate(de, 'multi30k_de_en')) FROM docs WHERE id <= 64 \g /dev/null
\echo 2. one worker, one connection
\timing on
INSERT INTO docs (id, de, en) SELECT id, de, translate(de, 'multi30k_de_en') FROM docs ON CONFLICT (id) DO UPDATE SET en = EXCLUDED.en;
\timing off
\echo 3. one worker, the default pool of connections
RESET citus.max_adaptive_executor_pool_size;
SELECT count(translate(de, 'multi30k_de_en')) FROM docs WHERE id <= 256 \g /dev/null
\timing on
INSERT INTO docs (id, de, en) SELECT id, de, translate(de, 'multi30k_de_en') FROM docs ON CONFLICT (id) DO UPDATE SET en = EXCLUDED.en;
\timing off
SELECT count(*) FILTER (WHERE d.en IS DISTINCT FROM t.en) AS differing_between_runs FROM docs d JOIN two t USING (id);
