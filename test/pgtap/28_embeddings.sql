-- Sentence embeddings (issue 29): encoder-only models in the BERT and
-- XLM-RoBERTa layouts, against a rule-by-rule PyTorch port of Hugging
-- Face's modeling_bert / modeling_xlm_roberta and sentence-transformers'
-- pooling (tools/bert_torch.py; fixtures by tools/gen_encoder_fixtures.py);
-- the tokenizers are 29_encoder_tokenizers.sql's; embed(), its batch form,
-- transformer.encode(), parallel queries, int8, the bundled sentence
-- encoder's retrieval, pgvector where it is installed.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`
\set data `cd ../shared/data 2>/dev/null && pwd || echo missing`

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(56);
-- parity with the references as stored, in fp32 (auto, the default, computes embed()
-- in int8: 40_compute_int8.sql; the bundled encoder's retrieval below runs at auto)
SET transformer.compute_type = 'stored';

CREATE FUNCTION pg_temp.maxdiff(a real[], b jsonb) RETURNS float8 LANGUAGE sql AS $$
  SELECT max(abs(x - (y #>> '{}')::float8))
  FROM unnest(a) WITH ORDINALITY AS u(x, i)
  JOIN jsonb_array_elements(CASE WHEN jsonb_typeof(b -> 0) = 'array'
                                 THEN (SELECT jsonb_agg(z) FROM jsonb_array_elements(b) r, jsonb_array_elements(r) z)
                                 ELSE b END) WITH ORDINALITY AS v(y, j) ON i = j $$;

-- ------------------------------------------------------------ the models

SELECT lives_ok(format('SELECT import_model(%L, %L)', f, :'root' || '/test/fixtures/encoders/' || f),
  'import_model() reads ' || f)
FROM unnest(ARRAY['bert_tiny', 'bert_tiny_max', 'xlmr_tiny']) f;
SELECT is((SELECT embedding->>'pooling' FROM transformer_models WHERE name = 'bert_tiny'), 'cls',
  'bert_tiny: CLS pooling, from 1_Pooling/config.json');
SELECT is((SELECT (embedding->>'normalize')::boolean FROM transformer_models WHERE name = 'bert_tiny_max'), true,
  'bert_tiny_max: a Normalize module in modules.json');
SELECT is((SELECT count(*)::int FROM transformer_tensors WHERE model = 'bert_tiny_max' AND (name LIKE 'bert.%' OR name LIKE 'cls.%')), 0,
  'a head model''s prefix and its pre-training head are left out (pytorch_model.bin of BertForMaskedLM)');

CREATE TEMP TABLE expected AS
SELECT f AS m, c.ord::int AS i, c.v AS c
FROM unnest(ARRAY['bert_tiny', 'bert_tiny_max', 'xlmr_tiny']) f,
     jsonb_array_elements(pg_read_file(:'root' || '/test/fixtures/encoders/' || f || '/expected.json')::jsonb -> 'cases')
       WITH ORDINALITY AS c(v, ord);

-- the ids: our tokenizers, specials and truncation at max_seq_length included
SELECT is((SELECT count(*)::int FROM expected
           WHERE m = mm AND ARRAY(SELECT jsonb_array_elements_text(c -> 'input_ids')::int) IS DISTINCT FROM
             (SELECT array_agg(x) FROM (SELECT (embedding->>'cls_id')::int FROM transformer_models WHERE name = mm
                                        UNION ALL SELECT * FROM unnest((tokenize(c->>'text', mm || '/source'))[1:(SELECT (embedding->>'max_seq_length')::int - 2 FROM transformer_models WHERE name = mm)])
                                        UNION ALL SELECT (embedding->>'sep_id')::int FROM transformer_models WHERE name = mm) s(x))),
  0, mm || ': the input ids of every case are the reference tokenizer''s')
FROM unnest(ARRAY['bert_tiny', 'bert_tiny_max', 'xlmr_tiny']) mm;

-- parity with the PyTorch port: every token's output and the pooled vector
SELECT cmp_ok((SELECT max(pg_temp.maxdiff(transformer.encode(c->>'text', m), c->'last_hidden_state')) FROM expected WHERE m = mm),
  '<=', 1e-4::float8, mm || ': transformer.encode() within 1e-4 of modeling_bert''s last_hidden_state')
FROM unnest(ARRAY['bert_tiny', 'bert_tiny_max', 'xlmr_tiny']) mm;
SELECT cmp_ok((SELECT max(pg_temp.maxdiff(embed(c->>'text', m), c->'sentence_embedding')) FROM expected WHERE m = mm),
  '<=', 1e-4::float8, mm || ': embed() within 1e-4 of sentence-transformers'' pooling')
FROM unnest(ARRAY['bert_tiny', 'bert_tiny_max', 'xlmr_tiny']) mm;
-- the texts of different lengths at once: as a padded batch with attention_mask
SELECT cmp_ok((SELECT max(pg_temp.maxdiff(e, x.c->'sentence_embedding'))
               FROM embed((SELECT array_agg(c->>'text' ORDER BY i) FROM expected WHERE m = mm), mm) WITH ORDINALITY AS b(e, k)
               JOIN expected x ON x.m = mm AND x.i = k),
  '<=', 1e-4::float8, mm || ': embed(text[]) of all cases at once within 1e-4 too')
FROM unnest(ARRAY['bert_tiny', 'bert_tiny_max', 'xlmr_tiny']) mm;
SELECT diag('largest embed() difference: ' || max(pg_temp.maxdiff(embed(c->>'text', m), c->'sentence_embedding'))) FROM expected;
SELECT diag('largest transformer.encode() difference: ' || max(pg_temp.maxdiff(transformer.encode(c->>'text', m), c->'last_hidden_state'))) FROM expected;

SELECT is((SELECT count(*)::int FROM embed(ARRAY['a', NULL, 'b'], 'bert_tiny') e WHERE e IS NULL), 1,
  'embed(text[]): a NULL element gives a NULL row, in its place');
SELECT is((SELECT array_agg(k ORDER BY k)::int[] FROM embed(ARRAY['a', NULL, 'b'], 'bert_tiny') WITH ORDINALITY AS t(e, k)), '{1,2,3}',
  'embed(text[]): one row per element, in order');
SELECT is(array_length(embed('Ein Hund.', 'bert_tiny'), 1), 32, 'embed() is one vector of hidden_size');
SELECT ok(abs(sqrt((SELECT sum(x * x) FROM unnest(embed('Zwei Hunde spielen.', 'bert_tiny_max')) x)) - 1) < 1e-5,
  'a model with Normalize gives unit vectors');

-- ------------------------------------------------------------ the SQL surface

SELECT is(encode('hello'::bytea, 'base64'), 'aGVsbG8=', 'an unqualified encode() is still PostgreSQL''s');
SELECT is((SELECT e.extname FROM pg_namespace n JOIN pg_depend d ON d.objid = n.oid AND d.classid = 'pg_namespace'::regclass
           JOIN pg_extension e ON e.oid = d.refobjid WHERE n.nspname = 'transformer' AND d.deptype = 'e'),
  'transformer', 'the schema transformer belongs to the extension');
SELECT is(transformer.encode('Ein Hund.', 'bert_tiny'), encoder_output('Ein Hund.', 'bert_tiny'),
  'transformer.encode() is encoder_output()');
SELECT is(array_dims(transformer.encode('Ein Hund.', 'bert_tiny')), '[1:5][1:32]',
  'transformer.encode(): [CLS] ein hund . [SEP], tokens x hidden_size');
SELECT throws_ok($$SELECT translate('Ein Hund.', 'bert_tiny')$$, '42809', 'model "bert_tiny" is an encoder-only model',
  'translate() with an encoder-only model: 42809');
SELECT throws_ok($$SELECT generate('Ein Hund.', 'bert_tiny')$$, '42809', NULL, 'generate() with an encoder-only model: 42809');
SELECT throws_ok($$SELECT embed('x', 'no_such_model')$$, '42704', NULL, 'embed() with an unknown model: 42704');
SELECT throws_ok($$SELECT * FROM embed(ARRAY[['a'], ['b']], 'bert_tiny')$$, '2202E', NULL, 'embed() of a 2-D array: 2202E');
SELECT ok(embed(NULL::text, 'bert_tiny') IS NULL AND NOT EXISTS (SELECT FROM embed(NULL::text[], 'bert_tiny')),
  'NULL in, NULL out');

-- stored rows are untrusted: damaged settings are refused, not trusted
SAVEPOINT damage;
UPDATE transformer_models SET embedding = jsonb_set(embedding, '{cls_id}', '99999') WHERE name = 'bert_tiny';
SELECT throws_ok($$SELECT embed('x', 'bert_tiny')$$, 'XX001', 'model "bert_tiny" is damaged', 'an embedding setting out of range: XX001');
ROLLBACK TO SAVEPOINT damage;
UPDATE transformer_models SET embedding = NULL WHERE name = 'bert_tiny';
SELECT throws_ok($$SELECT embed('x', 'bert_tiny')$$, 'XX001', 'model "bert_tiny" is damaged', 'an encoder without its embedding settings: XX001');
ROLLBACK TO SAVEPOINT damage;
UPDATE transformer_models SET config = jsonb_set(config, '{hidden_act}', '"gelu_new"') WHERE name = 'bert_tiny';
SELECT throws_ok($$SELECT embed('x', 'bert_tiny')$$, '0A000', 'activation function "gelu_new" is not supported', 'hidden_act gelu_new: 0A000');
ROLLBACK TO SAVEPOINT damage;
UPDATE transformer_models SET config = jsonb_set(config, '{position_embedding_type}', '"relative_key"') WHERE name = 'bert_tiny';
SELECT throws_ok($$SELECT embed('x', 'bert_tiny')$$, '0A000', 'position embedding type "relative_key" is not supported', 'relative positions: 0A000');
ROLLBACK TO SAVEPOINT damage;
UPDATE transformer_tokenizers SET model = overlay(model placing '\x0a0a'::bytea from 26 for 2) WHERE name = 'bert_tiny/source';
SELECT throws_ok($$SELECT embed('x', 'bert_tiny')$$, '22023', NULL, 'a damaged WordPiece options line: 22023');
ROLLBACK TO SAVEPOINT damage;
SELECT is((embed('Ein Hund.', 'bert_tiny'))[1:2], (SELECT (embed('Ein Hund.', 'bert_tiny'))[1:2]), 'and after the rollback the model is whole again');

-- a text longer than max_seq_length is cut there, as sentence-transformers does
SELECT is(array_length(transformer.encode(repeat('hund ', 200), 'bert_tiny'), 1), 32,
  'a long text is cut at max_seq_length (32 tokens, [SEP] kept)');

-- a translation model: the mean of its encoder's output
SELECT import_model('multi30k_de_en') \g /dev/null
SELECT cmp_ok((SELECT max(abs(e - m)) FROM unnest(embed('Ein Mann fährt Fahrrad.', 'multi30k_de_en')) WITH ORDINALITY a(e, j)
               JOIN (SELECT j, avg(x) AS m FROM (SELECT (transformer.encode('Ein Mann fährt Fahrrad.', 'multi30k_de_en'))[i][j] AS x, j
                                                 FROM generate_series(1, 8) i, generate_series(1, 256) j) s
                     WHERE x IS NOT NULL GROUP BY j) b USING (j)),
  '<', 1e-5::float8, 'embed() on a translation model is the mean of encoder_output()');
SELECT is(array_dims(input_embeddings('Ein Mann.', 'multi30k_de_en')), '[1:4][1:256]',
  'input_embeddings(): the paper''s input layer, tokens x d_model (embed() up to 0.7.0)');

-- export_model() writes an encoder as sentence-transformers lays it out; import_model() reads it back
SELECT is(export_model(f, '/tmp/transformer_tap_encoder_' || f || '_' || pg_backend_pid()),
          (SELECT count(*)::int FROM transformer_tensors WHERE model = f), f || ': export_model() writes every tensor')
FROM unnest(ARRAY['bert_tiny_max', 'xlmr_tiny']) f;
SELECT lives_ok(format('SELECT import_model(%L, %L)', f || '_back', '/tmp/transformer_tap_encoder_' || f || '_' || pg_backend_pid()),
  f || ': import_model() reads the exported directory')
FROM unnest(ARRAY['bert_tiny_max', 'xlmr_tiny']) f;
SELECT is((SELECT count(*)::int FROM expected WHERE m = f AND embed(c->>'text', f) IS DISTINCT FROM embed(c->>'text', f || '_back')), 0,
  f || ': the exported and imported model embeds every case as the original')
FROM unnest(ARRAY['bert_tiny_max', 'xlmr_tiny']) f;

-- int8: quantize_model() on an encoder
SELECT lives_ok($$SELECT quantize_model('bert_tiny_max', 'bert_tiny_max_i8')$$, 'quantize_model() on an encoder');
SELECT cmp_ok((SELECT min(s)::float8 FROM (SELECT (SELECT sum(a * b) FROM unnest(embed(c->>'text', 'bert_tiny_max'), embed(c->>'text', 'bert_tiny_max_i8')) u(a, b)) s
                                   FROM expected WHERE m = 'bert_tiny_max') q),
  '>', 0.99::float8, 'int8 embeddings keep a cosine over 0.99 to fp32 on every case');

-- parallel workers: the same vectors as the leader's
CREATE FUNCTION pg_temp.explain_lines(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  FOR r IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP RETURN NEXT r; END LOOP;
END $$;
CREATE TEMP TABLE docs AS SELECT i, c->>'text' AS body FROM expected WHERE m = 'xlmr_tiny';
CREATE TABLE pdocs AS SELECT g, body FROM docs, generate_series(1, 40) g;
ALTER TABLE pdocs SET (parallel_workers = 2);
SET LOCAL parallel_setup_cost = 0;
SET LOCAL parallel_tuple_cost = 0;
SET LOCAL min_parallel_table_scan_size = 0;
SET LOCAL max_parallel_workers_per_gather = 2;
SELECT ok((SELECT string_agg(p, E'\n') FROM (SELECT * FROM pg_temp.explain_lines($$SELECT sum(v) FROM pdocs, unnest(embed(body, 'xlmr_tiny')) v$$)) e(p)) ~ 'Parallel Seq Scan',
  'embed() over a column runs in parallel workers');
SELECT is((SELECT sum(v) FROM pdocs, unnest(embed(body, 'xlmr_tiny')) v)::numeric(20, 3),
  (SELECT sum(v) * 40 FROM docs, unnest(embed(body, 'xlmr_tiny')) v)::numeric(20, 3),
  'the workers'' vectors are the leader''s');
RESET parallel_setup_cost;
RESET parallel_tuple_cost;

-- ------------------------------------------------------------ the bundled sentence encoder
RESET transformer.compute_type;

-- Multi30k's test sets, from ../shared/data
\ir include/multi30k.psql

-- German -> English retrieval on the first 200 pairs of test_2016_flickr:
-- is each German sentence's translation the nearest English one by cosine?
-- (tools/evaluate_embeddings.py gives the figures on all 1,000)
SELECT lives_ok($$SELECT import_model('multi30k_sentence_de_en')$$, 'import_model(''multi30k_sentence_de_en'') knows the bundled encoder');
CREATE TEMP TABLE pairs AS
SELECT a.line AS i, a.t AS de, b.t AS en FROM m30k a JOIN m30k b ON b.file = 'test_2016_flickr.en.gz' AND b.line = a.line
WHERE a.file = 'test_2016_flickr.de.gz' AND a.line <= 200;
CREATE TEMP TABLE vde AS SELECT q.ids[k] AS i, e AS v FROM (SELECT array_agg(de ORDER BY i) a, array_agg(i ORDER BY i) ids FROM pairs) q
  CROSS JOIN LATERAL embed(q.a, 'multi30k_sentence_de_en') WITH ORDINALITY AS t(e, k);
CREATE TEMP TABLE ven AS SELECT q.ids[k] AS i, e AS v FROM (SELECT array_agg(en ORDER BY i) a, array_agg(i ORDER BY i) ids FROM pairs) q
  CROSS JOIN LATERAL embed(q.a, 'multi30k_sentence_de_en') WITH ORDINALITY AS t(e, k);
CREATE TEMP TABLE sims AS
SELECT d.i AS di, e.i AS ei, (SELECT sum(x * y) FROM unnest(d.v, e.v) u(x, y)) AS s FROM vde d, ven e;
SELECT CASE WHEN :'data' <> 'missing' THEN
  cmp_ok((SELECT avg((best = di)::int)::float8 FROM
                 (SELECT DISTINCT ON (di) di, ei AS best FROM sims ORDER BY di, s DESC) t),
  '>=', 0.9::float8, 'the bundled encoder finds the translation first for 90% or more of 200 test_2016 sentences')
  ELSE skip('../shared/data is missing', 1) END;
SELECT diag('bundled encoder, German -> English top-1 on 200 test_2016 pairs: ' ||
  (SELECT round(100 * avg((best = di)::int), 1) FROM (SELECT DISTINCT ON (di) di, ei AS best FROM sims ORDER BY di, s DESC) t) || '%');

-- ------------------------------------------------------------ pgvector

SELECT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'vector') AS have_vector \gset
\if :have_vector
SELECT lives_ok('CREATE EXTENSION IF NOT EXISTS vector', 'pgvector installs beside transformer');
SELECT is((SELECT vector_dims(embed('Ein Hund.', 'multi30k_sentence_de_en')::vector)), 256, 'embed()''s real[] casts to vector');
SELECT lives_ok($q$CREATE TABLE vdocs AS SELECT i, en, embed(en, 'multi30k_sentence_de_en')::vector(256) AS v FROM pairs;
                  CREATE INDEX ON vdocs USING hnsw (v vector_cosine_ops)$q$, 'an HNSW index over embed()''s vectors');
SELECT is((SELECT i FROM vdocs ORDER BY v <=> embed((SELECT de FROM pairs WHERE i = 1), 'multi30k_sentence_de_en')::vector LIMIT 1), 1,
  'a semantic search finds the translation of the first German sentence');
\else
SELECT skip('pgvector is not installed here (it is not a Debian package; see docs/embeddings.md)', 4);
\endif

SELECT * FROM finish();
ROLLBACK;
