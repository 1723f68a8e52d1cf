-- The tokenizers of encoder models (issue 29), id for id, on 12,342 lines
-- of many scripts (test/fixtures/tokenizers/corpus.jsonl,
-- tools/gen_tokenizer_corpus.py; its 6,028 Multi30k lines are read from
-- ../shared/data): BERT's WordPiece (three settings) and XLM-R's
-- SentencePiece with fairseq's ids, against npm @huggingface/tokenizers and
-- @huggingface/transformers, and where their JavaScript port departs from
-- them, Hugging Face's Rust library and the SentencePiece library
-- (tools/gen_wordpiece_token_ids.py).
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`
\set data `cd ../shared/data 2>/dev/null && pwd || echo missing`

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(9);

-- the corpus: 6,314 lines of many scripts (tools/gen_tokenizer_corpus.py),
-- and 6,028 Multi30k sentences it refers to, read from ../shared/data
\ir include/multi30k.psql
CREATE TEMP TABLE corpus AS
SELECT o::int AS i, CASE WHEN jsonb_typeof(l::jsonb) = 'object'
                         THEN (SELECT t FROM m30k WHERE file = l::jsonb ->> 'multi30k' AND line = (l::jsonb ->> 'line')::int)
                         ELSE l::jsonb #>> '{}' END AS t
FROM regexp_split_to_table(rtrim(pg_read_file(:'root' || '/test/fixtures/tokenizers/corpus.jsonl'), E'\n'), E'\n')
       WITH ORDINALITY AS x(l, o)
WHERE strpos(l, '\u0000') = 0;			-- text cannot hold NUL
DELETE FROM corpus WHERE t IS NULL;		-- Multi30k's lines, without ../shared/data
SELECT diag('../shared/data is missing: the corpus''s Multi30k lines are left out, the other lines are checked')
WHERE :'data' = 'missing';
SELECT cmp_ok((SELECT count(*)::int FROM corpus), '>=', CASE WHEN :'data' <> 'missing' THEN 12000 ELSE 6000 END,
  'the tokenizer corpus: over 12,000 sentences (6,000 without ../shared/data)');

SELECT lives_ok(format('SELECT import_tokenizer(%L, %L)', f, :'root' || '/test/fixtures/tokenizers/' || f),
  'import_tokenizer() reads the directory ' || f)
FROM unnest(ARRAY['bert_uncased', 'bert_cased', 'bert_uncased_keep_accents', 'xlmr']) f;

-- the references: npm @huggingface/tokenizers and @huggingface/transformers
-- ("ids"; the two agree on every line), and where they differ from it,
-- Hugging Face's Rust library ("rust", its npm binding tokenizers 0.23.2:
-- what transformers' fast tokenizers and sentence-transformers run) for
-- WordPiece, and the SentencePiece library ("python": XLMRobertaTokenizer)
-- for XLM-R
CREATE TEMP TABLE npm AS
SELECT f, o::int AS i, ARRAY(SELECT jsonb_array_elements_text(e)::int) AS js,
       ARRAY(SELECT jsonb_array_elements_text(COALESCE(j -> (CASE WHEN f = 'xlmr' THEN 'python' ELSE 'rust' END) -> ((o - 1)::text), e))::int) AS ids
FROM unnest(ARRAY['bert_uncased', 'bert_cased', 'bert_uncased_keep_accents', 'xlmr']) f,
     LATERAL (SELECT pg_read_file(:'root' || '/test/fixtures/npm_tokens/' || f || '.json')::jsonb) r(j),
     jsonb_array_elements(j -> 'ids') WITH ORDINALITY AS x(e, o);
CREATE TEMP TABLE ours AS SELECT f, i, tokenize(t, f) AS ids FROM corpus, unnest(ARRAY['bert_uncased', 'bert_cased', 'bert_uncased_keep_accents', 'xlmr']) f;

-- every sentence: the reference's ids are [CLS] ours [SEP] (<s> ours </s>)
SELECT is((SELECT count(*)::int FROM ours o JOIN npm n USING (f, i)
           WHERE n.ids[2:cardinality(n.ids) - 1] IS DISTINCT FROM o.ids AND NOT (cardinality(n.ids) = 2 AND o.ids = '{}')),
  0, ff || ': tokenize() gives the reference ids on every sentence of the corpus')
FROM unnest(ARRAY['bert_uncased', 'bert_cased', 'bert_uncased_keep_accents', 'xlmr']) ff;
SELECT diag(f || ': equal to npm @huggingface/tokenizers on ' || count(*) FILTER (WHERE n.js[2:cardinality(n.js) - 1] = o.ids OR (cardinality(n.js) = 2 AND o.ids = '{}'))
            || ' of ' || count(*) || ' sentences (the rest: where the JavaScript port departs from the Rust library or SentencePiece)')
FROM ours o JOIN npm n USING (f, i) GROUP BY f ORDER BY f;

SELECT * FROM finish();
ROLLBACK;
