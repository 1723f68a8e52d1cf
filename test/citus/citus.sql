-- Citus (issue 16): our tables as reference tables, a model imported once on
-- the coordinator and usable on every worker, translate() and the
-- aggregates pushed down to the workers (checked in EXPLAIN), results equal
-- to the same queries on one node.  Run by test/citus/run.sh on a
-- coordinator with two workers.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`
SET client_min_messages = warning;
CREATE EXTENSION pgtap;
SELECT plan(27);

-- what a user runs, on the coordinator
CREATE EXTENSION transformer;
SET citus.enable_local_reference_table_foreign_keys = off;   -- the three are linked by foreign keys, and all become reference tables
SET citus.enable_unsafe_triggers = on;                        -- our tables' cache-invalidation triggers go to the shards too
SELECT create_reference_table('transformer_tokenizers') \g /dev/null
SELECT create_reference_table('transformer_models') \g /dev/null
SELECT create_reference_table('transformer_tensors') \g /dev/null
SELECT is((SELECT array_agg(result ORDER BY nodeport) FROM run_command_on_workers($$SELECT count(*) FROM pg_extension WHERE extname = 'transformer'$$)),
  '{1,1}', 'CREATE EXTENSION on the coordinator reaches both workers');
SELECT is((SELECT count(*)::int FROM pg_dist_partition WHERE logicalrelid::text LIKE 'transformer_%' AND partmethod = 'n'), 3, 'our three tables are reference tables');

SELECT cmp_ok(import_model('multi30k_de_en'), '>', 0::bigint, 'import_model on the coordinator');
SELECT is((SELECT array_agg(result ORDER BY nodeport) FROM run_command_on_workers($$SELECT count(*) FROM transformer_tensors WHERE model = 'multi30k_de_en'$$)),
  (SELECT array_agg(n) FROM (SELECT count(*)::text n FROM transformer_tensors WHERE model = 'multi30k_de_en' UNION ALL SELECT count(*)::text FROM transformer_tensors WHERE model = 'multi30k_de_en') x),
  'every worker has every tensor');
BEGIN;
SELECT import_model('rolled_back', :'root' || '/test/fixtures/models/paper_relu') \g /dev/null
ROLLBACK;
SELECT is((SELECT array_agg(result ORDER BY nodeport) FROM run_command_on_workers($$SELECT count(*) FROM transformer_models WHERE name = 'rolled_back'$$)),
  '{0,0}', 'an import rolled back leaves no trace on any node');
SELECT is((SELECT count(*)::int FROM transformer_models WHERE name = 'rolled_back'), 0, 'nor on the coordinator');

-- a distributed docs table, and the same rows in a table of one node
CREATE TABLE docs (id int PRIMARY KEY, de text, en text, ref text);
SELECT create_distributed_table('docs', 'id') \g /dev/null
INSERT INTO docs (id, de, ref) VALUES
  (1, 'Ein Mann fährt Fahrrad auf der Straße.', 'A man rides a bicycle on the street.'),
  (2, 'Zwei Hunde spielen im Schnee.', 'Two dogs play in the snow.'),
  (3, 'Eine Frau in einem roten Kleid singt.', 'A woman in a red dress is singing.'),
  (4, 'Kinder spielen Fußball auf einer Wiese.', 'Children play soccer on a field.'),
  (5, 'Ein Junge springt in einen See.', 'A boy jumps into a lake.'),
  (6, 'Eine Gruppe von Menschen steht vor einem Gebäude.', 'A group of people stands in front of a building.'),
  (7, 'Ein Hund rennt durch das Gras.', 'A dog runs through the grass.'),
  (8, 'Zwei Männer arbeiten an einem Boot.', 'Two men work on a boat.'),
  (9, 'Ein kleines Mädchen isst ein Eis.', 'A little girl eats an ice cream.'),
  (10, 'Ein Mann mit Hut spielt Gitarre.', 'A man with a hat plays guitar.'),
  (11, 'Leute sitzen in einem Café.', 'People sit in a cafe.'),
  (12, 'Ein Radfahrer fährt einen Berg hinauf.', 'A cyclist rides up a mountain.');
CREATE TABLE docs_local AS SELECT * FROM docs;
SELECT is((SELECT count(*)::int FROM pg_dist_partition WHERE logicalrelid = 'docs'::regclass AND partmethod = 'h'), 1, 'docs is hash-distributed');
SET citus.enable_ddl_propagation = off;   -- helpers of this session only
CREATE FUNCTION pg_temp.plan(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text; t text := '';
BEGIN
  FOR r IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || q LOOP t := t || r || E'\n'; END LOOP;
  RETURN t;
END $$;
RESET citus.enable_ddl_propagation;

-- translate() on the workers
SELECT matches(pg_temp.plan($$SELECT id, translate(de, 'multi30k_de_en') FROM docs$$),
  'Task Count: 32.*Query: SELECT id, public\.translate\(de, .*FROM public\.docs_[0-9]+ docs',
  'EXPLAIN: SELECT translate() runs in the shards'' queries on the workers');
SELECT is((SELECT array_agg(t ORDER BY id) FROM (SELECT id, translate(de, 'multi30k_de_en') t FROM docs) x),
  (SELECT array_agg(translate(de, 'multi30k_de_en') ORDER BY id) FROM docs_local),
  'SELECT id, translate(de) FROM docs: identical to one node');
-- the batch form inside each shard
SELECT is((SELECT array_agg(t ORDER BY id) FROM (SELECT id, unnest(translate(array_agg(de), 'multi30k_de_en')) t FROM docs GROUP BY id) x),
  (SELECT array_agg(translate(de, 'multi30k_de_en') ORDER BY id) FROM docs_local),
  'the batch form, grouped by the distribution column: identical');

-- writing translations back, on the workers
SELECT throws_ok($$UPDATE docs SET en = translate(de, 'multi30k_de_en')$$, '0A000',
  'STABLE functions used in UPDATE queries cannot be called with column references',
  'Citus refuses UPDATE ... SET en = translate(de) (a STABLE function of a column)');
SELECT matches(pg_temp.plan($$INSERT INTO docs (id, de, en) SELECT id, de, translate(de, 'multi30k_de_en') FROM docs ON CONFLICT (id) DO UPDATE SET en = EXCLUDED.en$$),
  'Task Count: 32.*Query: INSERT INTO public\.docs_[0-9]+ .*SELECT .*public\.translate\(docs\.de, .*FROM public\.docs_[0-9]+ docs',
  'EXPLAIN: its pushed-down form, INSERT ... SELECT translate() ... ON CONFLICT DO UPDATE, runs whole in each shard');
INSERT INTO docs (id, de, en) SELECT id, de, translate(de, 'multi30k_de_en') FROM docs ON CONFLICT (id) DO UPDATE SET en = EXCLUDED.en;
UPDATE docs_local SET en = translate(de, 'multi30k_de_en');
SELECT is((SELECT array_agg(en ORDER BY id) FROM docs), (SELECT array_agg(en ORDER BY id) FROM docs_local),
  'the translations written on the workers: identical to one node''s UPDATE');

-- a background job on the distributed table, from the coordinator (issue 25)
UPDATE docs SET en = NULL;
SELECT throws_ok($$SELECT translate_column('docs', 'de', 'en', 'multi30k_de_en')$$, '0A000',
  'keep_in_sync is not supported on a Citus distributed table', 'keep_in_sync is refused on a distributed table');
SELECT translate_column('docs', 'de', 'en', 'multi30k_de_en', keep_in_sync => false, workers => 2) AS job \gset
SELECT ok(wait_for_job(:job, '5 min'), 'a job on the distributed table finishes');
SELECT is((SELECT array_agg(en ORDER BY id) FROM docs), (SELECT array_agg(en ORDER BY id) FROM docs_local),
  'its workers wrote every shard''s rows: identical to one node''s UPDATE');
-- an embedding job on the distributed table (issue 37)
SELECT import_model('multi30k_sentence_de_en') \g /dev/null
ALTER TABLE docs ADD COLUMN v real[];
SELECT embed_column('docs', 'de', 'v', 'multi30k_sentence_de_en', keep_in_sync => false) AS ejob \gset
SELECT ok(wait_for_job(:ejob, '5 min'), 'an embedding job on the distributed table finishes (it says it runs on the coordinator)');
SELECT is((SELECT count(*)::int FROM docs WHERE v IS NULL
           OR (SELECT max(abs(a - b)) FROM unnest(v, embed(de, 'multi30k_sentence_de_en')) u(a, b)) > 1e-6), 0,
  'each shard''s rows hold embed() of their text');

-- BLEU and chrF as partial aggregates
SELECT matches(pg_temp.plan($$SELECT bleu(en, ref), chrf(en, ref) FROM docs$$),
  'coord_combine_agg.*worker_partial_agg\(''public\.bleu\(text,text\)''.*worker_partial_agg\(''public\.chrf\(text,text\)''',
  'EXPLAIN: bleu() and chrf() as partial aggregates on the workers, combined on the coordinator');
SELECT ok((SELECT abs(d.b - l.b) <= 1e-6 * greatest(abs(l.b), 1) AND abs(d.c - l.c) <= 1e-6 * greatest(abs(l.c), 1)
           FROM (SELECT bleu(en, ref) b, chrf(en, ref) c FROM docs) d, (SELECT bleu(en, ref) b, chrf(en, ref) c FROM docs_local) l),
  'bleu() and chrf() over the shards: within 1e-6 of one node');

-- attention aggregates: ungrouped, grouped by the distribution column, grouped by another
CREATE TABLE kv (id int, g int, k real[], v real[], s float8);
SELECT create_distributed_table('kv', 'id') \g /dev/null
INSERT INTO kv SELECT i, i % 7, ARRAY[sin(i), cos(i), sin(2 * i)]::real[], ARRAY[cos(3 * i), sin(5 * i)]::real[], 3 * sin(7 * i)
FROM generate_series(1, 3000) i;
CREATE TABLE kv_local AS SELECT * FROM kv;
SET citus.enable_ddl_propagation = off;
CREATE FUNCTION pg_temp.close(a real[], b real[]) RETURNS boolean LANGUAGE sql AS $$
  SELECT cardinality(a) = cardinality(b) AND bool_and(abs(x - y) <= 1e-6 * greatest(abs(y), 1e-3)) FROM unnest(a, b) u(x, y) $$;
RESET citus.enable_ddl_propagation;
SELECT matches(pg_temp.plan($$SELECT attend('{1,0.5,-1}'::real[], k, v), softmax_weighted_sum(s, v) FROM kv$$),
  'coord_combine_agg.*worker_partial_agg\(''public\.attend\(real\[\],real\[\],real\[\]\)''.*worker_partial_agg\(''public\.softmax_weighted_sum',
  'EXPLAIN: attend() and softmax_weighted_sum() as partial aggregates per shard, merged on the coordinator');
SELECT ok((SELECT pg_temp.close(d.a, l.a) AND pg_temp.close(d.s, l.s)
           FROM (SELECT attend('{1,0.5,-1}'::real[], k, v) a, softmax_weighted_sum(s, v) s FROM kv) d,
                (SELECT attend('{1,0.5,-1}'::real[], k, v) a, softmax_weighted_sum(s, v) s FROM kv_local) l),
  'ungrouped: within 1e-6 relative of one node');
SELECT ok((SELECT bool_and(pg_temp.close(d.a, l.a)) FROM
           (SELECT g, attend('{1,0.5,-1}'::real[], k, v) a FROM kv GROUP BY g) d JOIN
           (SELECT g, attend('{1,0.5,-1}'::real[], k, v) a FROM kv_local GROUP BY g) l USING (g))
           AND (SELECT count(DISTINCT g) FROM kv) = 7,
  'grouped by another column (partials merged per group): within 1e-6 relative');
SELECT matches(pg_temp.plan($$SELECT id, attend('{1,0.5,-1}'::real[], k, v) FROM kv GROUP BY id$$),
  'Query: SELECT id, public\.attend\(.*GROUP BY id',
  'EXPLAIN: grouped by the distribution column, the whole aggregate runs in the shards');
CREATE TEMP TABLE by_id AS SELECT id, attend('{1,0.5,-1}'::real[], k, v) a FROM kv GROUP BY id;
SELECT ok((SELECT bool_and(pg_temp.close(d.a, l.a)) AND count(*) = 3000 FROM by_id d JOIN
           (SELECT id, attend('{1,0.5,-1}'::real[], k, v) a FROM kv_local GROUP BY id) l USING (id)),
  'and equals one node');

-- a model replaced on the coordinator: the workers' caches follow
SELECT import_model('m', :'root' || '/test/fixtures/models/paper_relu') \g /dev/null
SELECT is((SELECT array_agg(t ORDER BY id) FROM (SELECT id, translate(de, 'm', 3) t FROM docs) x),
  (SELECT array_agg(translate(de, 'm', 3) ORDER BY id) FROM docs_local), 'a second model on the workers');
SELECT import_model('m', :'root' || '/test/fixtures/models/marian_swish') \g /dev/null
SELECT is((SELECT array_agg(t ORDER BY id) FROM (SELECT id, translate(de, 'm', 3) t FROM docs) x),
  (SELECT array_agg(translate(de, 'm', 3) ORDER BY id) FROM docs_local),
  're-imported on the coordinator: the workers (their pooled backends had the old one cached) translate with the new weights');

SELECT * FROM finish();
