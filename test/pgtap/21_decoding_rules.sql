-- Decoding rules that ordinary translations rarely exercise, each checked
-- on a variant of the bundled model built here from its own rows, so that
-- the rule decides the output (Hugging Face's rules, tools/marian_torch.py):
--  * bad_words_ids [[pad]] (NoBadWordsLogitsProcessor): pad is never a
--    candidate, even when its logit is the largest;
--  * ties go to the lower token id (argmax and top-k take the first);
--  * an untied checkpoint without lm_head.weight ties the output layer to
--    the decoder's embeddings (MarianMTModel.tie_weights);
--  * translate(text[]) keeps each result at its input's position, NULLs
--    and blanks included.
-- These are the survivors of a mutation audit (test/mutation/mutants.txt).
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(8);
SELECT import_model('multi30k_de_en') \g /dev/null

CREATE TEMP TABLE src (i int, de text);
INSERT INTO src VALUES
  (1, 'Ein Mann fährt Fahrrad.'),
  (2, 'Zwei Hunde spielen im Schnee.'),
  (3, 'Eine Frau in einem roten Kleid singt auf einer Bühne.'),
  (4, 'Kinder spielen am Strand mit einem Ball.'),
  (5, 'Ein älterer Mann sitzt auf einer Bank und liest eine Zeitung.'),
  (6, 'Eine Gruppe von Menschen steht vor einem Gebäude.');

-- a copy of the bundled model's row and tensors under another name
CREATE FUNCTION pg_temp.clone(new text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  CREATE TEMP TABLE mrow ON COMMIT DROP AS SELECT * FROM transformer_models WHERE name = 'multi30k_de_en';
  UPDATE mrow SET name = new;
  INSERT INTO transformer_models SELECT * FROM mrow;
  DROP TABLE mrow;
  INSERT INTO transformer_tensors (model, name, shape, dtype, data_offset, data)
  SELECT new, name, shape, dtype, data_offset, data FROM transformer_tensors WHERE model = 'multi30k_de_en';
END $$;

-- fp16 rows: d_model 256, so a row of model.shared.weight is 512 bytes
SELECT (config->>'d_model')::int * 2 AS rowbytes, (config->>'pad_token_id')::int AS pad,
       (config->>'eos_token_id')::int AS eos
FROM transformer_models WHERE name = 'multi30k_de_en' \gset
SELECT is((SELECT dtype FROM transformer_tensors WHERE model = 'multi30k_de_en' AND name = 'model.shared.weight'),
  'F16', 'the bundled embeddings are fp16 (the byte arithmetic below)');

CREATE TEMP TABLE orig AS
SELECT i, generate(de, 'multi30k_de_en', 1) AS greedy, generate(de, 'multi30k_de_en', 4) AS beam4,
       tokenize(de, 'multi30k_de_en/source') AS src_ids
FROM src;

-- 1. pad's bias raised to fp16's largest value: it would win every step
SELECT pg_temp.clone('pad_favoured');
UPDATE transformer_tensors SET data = overlay(data PLACING '\xff7b'::bytea FROM :pad * 2 + 1 FOR 2)
WHERE model = 'pad_favoured' AND name = 'final_logits_bias';
SELECT is((SELECT array_agg(i) FROM src JOIN orig USING (i) WHERE generate(de, 'pad_favoured', 1) IS DISTINCT FROM greedy),
  NULL, 'pad is never a candidate: greedy output unchanged with the largest logit on pad');

-- 2. a rarely used token B (lower id) made an exact copy of a common token A
SELECT id AS tok_a FROM (SELECT unnest(greedy) AS id FROM orig) t WHERE id > 10
GROUP BY id ORDER BY count(*) DESC, id LIMIT 1 \gset
SELECT min(b) AS tok_b FROM generate_series(4, :tok_a - 1) b
WHERE b NOT IN (SELECT unnest(greedy || beam4 || src_ids) FROM orig) AND b NOT IN (:pad, :eos) \gset
SELECT pg_temp.clone('twin_tokens');
UPDATE transformer_tensors
SET data = overlay(data PLACING substring(data FROM :tok_a * :rowbytes + 1 FOR :rowbytes) FROM :tok_b * :rowbytes + 1 FOR :rowbytes)
WHERE model = 'twin_tokens' AND name = 'model.shared.weight';
UPDATE transformer_tensors
SET data = overlay(data PLACING substring(data FROM :tok_a * 2 + 1 FOR 2) FROM :tok_b * 2 + 1 FOR 2)
WHERE model = 'twin_tokens' AND name = 'final_logits_bias';
SELECT is((SELECT array_agg(i) FROM src JOIN orig USING (i)
           WHERE generate(de, 'twin_tokens', 1) IS DISTINCT FROM array_replace(greedy, :tok_a, :tok_b)),
  NULL, format('greedy: token %s ties token %s and wins, as the lower id', :tok_b, :tok_a));
SELECT is((SELECT array_agg(i) FROM src JOIN orig USING (i)
           WHERE generate(de, 'twin_tokens', 4) IS DISTINCT FROM array_replace(beam4, :tok_a, :tok_b)),
  NULL, format('beam 4: token %s ties token %s and its candidates come first', :tok_b, :tok_a));
SELECT cmp_ok((SELECT count(*) FROM orig WHERE :tok_a = ANY (greedy)), '>=', 2::bigint,
  'the common token occurs in the outputs');

-- 3. untied embeddings: the decoder's are the encoder's rotated by one row
SELECT pg_temp.clone('untied');
UPDATE transformer_tensors SET name = 'model.encoder.embed_tokens.weight'
WHERE model = 'untied' AND name = 'model.shared.weight';
INSERT INTO transformer_tensors (model, name, shape, dtype, data_offset, data)
SELECT model, 'model.decoder.embed_tokens.weight', shape, dtype, data_offset,
       substring(data FROM :rowbytes + 1) || substring(data FOR :rowbytes)
FROM transformer_tensors WHERE model = 'untied' AND name = 'model.encoder.embed_tokens.weight';
-- the same with lm_head.weight stored: what tying must give
CREATE TEMP TABLE mrow AS SELECT * FROM transformer_models WHERE name = 'untied';
UPDATE mrow SET name = 'untied_head';
INSERT INTO transformer_models SELECT * FROM mrow;
INSERT INTO transformer_tensors (model, name, shape, dtype, data_offset, data)
SELECT 'untied_head', name, shape, dtype, data_offset, data FROM transformer_tensors WHERE model = 'untied'
UNION ALL
SELECT 'untied_head', 'lm_head.weight', shape, dtype, data_offset, data
FROM transformer_tensors WHERE model = 'untied' AND name = 'model.decoder.embed_tokens.weight';
SELECT is((SELECT array_agg(i) FROM src
           WHERE generate(de, 'untied', 1) IS DISTINCT FROM generate(de, 'untied_head', 1)
              OR generate(de, 'untied', 4) IS DISTINCT FROM generate(de, 'untied_head', 4)),
  NULL, 'without lm_head.weight the output layer is the decoder''s embeddings, not the encoder''s');
SELECT isnt((SELECT string_agg(generate(de, 'untied', 1)::text, ' ' ORDER BY i) FROM src),
  (SELECT string_agg(greedy::text, ' ' ORDER BY i) FROM orig), 'the decoder''s own embeddings change the output');

-- 4. batch results stay at their inputs' positions
SELECT is(translate(ARRAY['Ein Hund läuft.', NULL, 'Eine Frau singt.', 'Zwei Männer arbeiten.', NULL, '', 'Ein Kind lacht.'],
                    'multi30k_de_en'),
  ARRAY[translate('Ein Hund läuft.', 'multi30k_de_en'), NULL, translate('Eine Frau singt.', 'multi30k_de_en'),
        translate('Zwei Männer arbeiten.', 'multi30k_de_en'), NULL, '', translate('Ein Kind lacht.', 'multi30k_de_en')],
  'translate(text[]): NULLs and blanks in the middle keep every result in place');

SELECT * FROM finish();
ROLLBACK;
