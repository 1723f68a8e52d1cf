-- The README's quick start: attention inside PostgreSQL.
\set ON_ERROR_STOP 1
\pset footer off
CREATE EXTENSION IF NOT EXISTS transformer;

\echo 'attention of two queries over three keys/values'
SELECT self_attention(q => '{{1,0},{0,1}}', k => '{{1,0},{0,1},{1,1}}', v => '{{10,0},{0,10},{5,5}}') AS output;
SELECT attention_weights('{{1,0},{0,1}}', '{{1,0},{0,1},{1,1}}') AS weights;

\echo 'attention over the rows of a table: a key/value memory'
CREATE TEMP TABLE memory (topic text, k real[], v real[]);
INSERT INTO memory VALUES
  ('cats',   '{4,0,0}', '{1,0,0}'),
  ('dogs',   '{0,4,0}', '{0,1,0}'),
  ('trains', '{0,0,4}', '{0,0,1}');
SELECT attend('{1,0.8,0}', k, v) AS mostly_cats_and_dogs FROM memory;
SELECT softmax_weighted_sum(score, v) FROM (VALUES (2.0::float8, '{1,1}'::real[]), (0.0, '{0,4}')) t(score, v);

\echo 'German to English with the bundled model (trained on Multi30k)'
SELECT import_model('multi30k_de_en') AS parameters;
SET transformer.default_model = 'multi30k_de_en';
CREATE TEMP TABLE docs (body text);
INSERT INTO docs VALUES
  ('Ein Mann fährt mit dem Fahrrad durch die Stadt.'),
  ('Zwei Kinder spielen im Sand am Strand.'),
  ('Eine Frau mit einem roten Hut liest ein Buch.'),
  ('Ein Hund rennt über eine grüne Wiese.'),
  ('Mehrere Menschen stehen vor einem Gebäude und warten.');
SELECT body, translate(body) FROM docs;

\echo 'a whole table in the background: declare a job once, workers translate the column and keep it in sync'
CREATE TABLE quickstart_docs (id int PRIMARY KEY, body text, en text);
INSERT INTO quickstart_docs (id, body) SELECT row_number() OVER (), body FROM docs;
SELECT translate_column('quickstart_docs', 'body', 'en') AS job \gset
SELECT wait_for_job(:job, '2 min') AS backlog_done;
INSERT INTO quickstart_docs VALUES (6, 'Ein kleines Mädchen isst ein Eis.', NULL);   -- queued by the job's trigger
SELECT wait_for_job(:job, '2 min') AS in_sync;
SELECT id, state, rows_done, rows_failed, rows_pending FROM transformer_jobs WHERE id = :job;
SELECT id, body, en FROM quickstart_docs ORDER BY id;
SELECT cancel_job(:job);
DROP TABLE quickstart_docs;
