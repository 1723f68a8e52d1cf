-- Special tokens written in the text (issue 38): each family's tokenizer
-- splits them off as Hugging Face's does, and XLM-R's and M2M100's
-- positions are counted from the ids (a <pad> takes position padding_idx
-- and is not counted).  The references (tools/gen_special_token_fixtures.py,
-- test/fixtures/special_tokens.json): the slow tokenizers as
-- tools/nllb_tokenizer.py and tools/bert_torch.py port them (checked there
-- against npm @huggingface/tokenizers where a tokenizer.json exists), and
-- the encoders of tools/m2m100_torch.py, tools/marian_torch.py and
-- tools/bert_torch.py on their ids.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`
\set fx :root/test/fixtures

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(25);

CREATE FUNCTION pg_temp.ints(j jsonb) RETURNS int[] LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(array_agg(x::int ORDER BY i), '{}') FROM jsonb_array_elements_text(j) WITH ORDINALITY t(x, i) $$;
CREATE FUNCTION pg_temp.maxdiff(a real[], j jsonb) RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN cardinality(a) <> jsonb_array_length(j) THEN 'Infinity'::float8
    ELSE (SELECT max(abs(x::float8 - y::float8)) FROM unnest(a, ARRAY(SELECT jsonb_array_elements_text(j)::float8)) u(x, y)) END $$;

CREATE TEMP TABLE fixture (model text, dir text);
INSERT INTO fixture VALUES ('nllb', 'checkpoints/nllb_tiny'), ('m2m100', 'checkpoints/m2m100_tiny'),
  ('marian_multi', 'checkpoints/marian_multi'), ('marian_sepvocab', 'checkpoints/marian_sepvocab'),
  ('xlmr_tiny', 'encoders/xlmr_tiny');
SELECT cmp_ok(import_model(model, :'fx' || '/' || dir), '>', 0::bigint, 'import_model ' || dir) FROM fixture ORDER BY model;
SELECT lives_ok(format('SELECT import_tokenizer(%L, %L)', f, :'fx' || '/tokenizers/' || f), 'import_tokenizer ' || f)
FROM unnest(ARRAY['bert_cased', 'bert_uncased']) f;

CREATE TEMP TABLE ref AS SELECT pg_read_file(:'fx' || '/special_tokens.json')::jsonb AS j;
CREATE TEMP TABLE cases AS
SELECT f.model, n, c FROM fixture f, ref,
  jsonb_array_elements(j -> 'models' -> substring(f.dir from '[^/]*$') -> 'cases') WITH ORDINALITY AS e(c, n);

-- the ids: the encoder's output has a row per reference id, and within
-- 1e-4 it is the reference encoder's on those ids (a wrong id, a special
-- token cut into pieces or a position counted wrongly all show)
SELECT is((SELECT count(*)::int FROM cases
           WHERE model = f.model AND cardinality(encoder_output(c->>'text', model)) <>
                 jsonb_array_length(c->'ids') * (SELECT (config->>'d_model')::int FROM transformer_models WHERE name = f.model)),
          0, f.model || ': as many tokens as the reference tokenizer gives, on every text with special tokens')
FROM fixture f WHERE f.model <> 'xlmr_tiny' ORDER BY f.model;
SELECT cmp_ok((SELECT max(pg_temp.maxdiff(encoder_output(c->>'text', model), c->'encoder_output')) FROM cases WHERE model = f.model),
              '<=', 1e-4::float8, f.model || ': encoder_output() within 1e-4 of the reference on texts with special tokens')
FROM fixture f WHERE f.model <> 'xlmr_tiny' ORDER BY f.model;

-- XLM-R: last_hidden_state and the sentence embedding (positions from the ids)
-- (as stored: fp32 against the reference; auto would compute embed() in int8)
SET transformer.compute_type = 'stored';
SELECT cmp_ok((SELECT max(pg_temp.maxdiff(encoder_output(c->>'text', 'xlmr_tiny'), c->'last_hidden_state')) FROM cases WHERE model = 'xlmr_tiny'),
              '<=', 1e-4::float8, 'xlmr_tiny: encoder_output() within 1e-4 of modeling_xlm_roberta''s on texts with <pad>, <mask> ...');
SELECT cmp_ok((SELECT max(pg_temp.maxdiff(embed(c->>'text', 'xlmr_tiny'), c->'sentence_embedding')) FROM cases WHERE model = 'xlmr_tiny'),
              '<=', 1e-4::float8, 'xlmr_tiny: embed() within 1e-4 of sentence-transformers''');
SELECT is((SELECT count(*)::int FROM cases WHERE model = 'xlmr_tiny' AND
             tokenize(c->>'text', 'xlmr_tiny/source') <> (pg_temp.ints(c->'ids'))[2:jsonb_array_length(c->'ids') - 1]),
          0, 'xlmr_tiny: tokenize() gives XLMRobertaTokenizer''s ids');
-- a pad in the text moves no position: the last row (</s>) of "Ein Hund <pad> rennt." is that of "Ein Hund rennt."
CREATE FUNCTION pg_temp.last_row(a real[]) RETURNS real[] LANGUAGE sql IMMUTABLE AS $$
  SELECT a[array_length(a, 1):array_length(a, 1)] $$;
SELECT ok((SELECT max(abs(x - y)) FROM unnest(pg_temp.last_row(input_embeddings('Ein Hund <pad> rennt.', 'xlmr_tiny'))) WITH ORDINALITY u(x, i)
           JOIN unnest(pg_temp.last_row(input_embeddings('Ein Hund rennt.', 'xlmr_tiny'))) WITH ORDINALITY v(y, k) ON i = k) < 1e-6,
          'xlmr_tiny: the tokens after a <pad> keep the positions they have without it');

-- the tokenizers alone: NLLB's and M2M100's own special tokens (their
-- language tokens and NLLB's <mask>, numbered after them, are the model's)
SELECT is((SELECT count(*)::int FROM cases
           WHERE model = mm AND c->>'text' !~ '(deu|eng|fra|ita)_Latn|__[a-z]+__' AND (mm <> 'nllb' OR c->>'text' !~ '<mask>') AND
             tokenize(c->>'text', mm || '/source') <> (pg_temp.ints(c->'ids'))[2:jsonb_array_length(c->'ids') - 1]),
          0, mm || ': tokenize() gives the reference''s pieces and special tokens')
FROM unnest(ARRAY['nllb', 'm2m100']) mm;
-- BERT: [CLS] [SEP] [PAD] [MASK] [UNK] as written (matched before lowercasing)
SELECT is((SELECT count(*)::int FROM ref, jsonb_array_elements(j -> 'tokenizers' -> f -> 'cases') c
           WHERE tokenize(c->>'text', f) <> (pg_temp.ints(c->'ids'))[2:jsonb_array_length(c->'ids') - 1]),
          0, f || ': tokenize() gives the ids of npm @huggingface/tokenizers (and BertTokenizer''s port)')
FROM unnest(ARRAY['bert_cased', 'bert_uncased']) f;

-- NLLB's language tokens typed in the text are those tokens
SELECT is((SELECT cardinality(encoder_output('deu_Latn', 'nllb')) / (SELECT (config->>'d_model')::int FROM transformer_models WHERE name = 'nllb')),
          3, 'nllb: "deu_Latn" in the text is one token (with the source language and </s>: 3 rows)');
-- many special tokens: linear (a megabyte of <pad> is 200,000 tokens)
SELECT is(cardinality(tokenize(repeat('<pad>', 200000), 'xlmr_tiny/source')), 200000, '200,000 <pad> in a text are 200,000 tokens');
SELECT * FROM finish();
ROLLBACK;
