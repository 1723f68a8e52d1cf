-- align(): word alignment from the cross-attention (the last layer of the
-- bundled 3-layer model, the penultimate of 6-layer ones; mean
-- of the heads), scored by alignment error rate on 12 hand-aligned pairs of
-- German sentences and the bundled model's translations
-- (test/fixtures/alignments.json, [source word, target word] links, 1-based,
-- words split at spaces), against the diagonal baseline.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(8);
SELECT import_model('multi30k_de_en') \g /dev/null
CREATE TEMP TABLE gold AS
SELECT n, c->>'de' AS de, c->>'en' AS en, (l->>0)::int AS s, (l->>1)::int AS t
FROM jsonb_array_elements(pg_read_file(:'root' || '/test/fixtures/alignments.json')::jsonb) WITH ORDINALITY AS e(c, n),
     jsonb_array_elements(c->'sure') l;
CREATE TEMP TABLE pairs AS SELECT DISTINCT n, de, en FROM gold;
SELECT is((SELECT count(*)::int FROM pairs WHERE translate(de, 'multi30k_de_en') <> en), 0, 'the translations are those the gold links were drawn on');

CREATE TEMP TABLE links AS SELECT p.n, a.source_pos AS s, a.target_pos AS t, a.source_word, a.target_word FROM pairs p, align(p.de, 'multi30k_de_en') a;
SELECT is((SELECT count(*)::int FROM links l JOIN pairs p USING (n)
           WHERE l.target_word <> split_part(p.en, ' ', l.t) OR l.source_word <> split_part(p.de, ' ', l.s)), 0,
  'the words are the sentences'' own, split at spaces');
-- the diagonal: target word t of nt to source word round((t - 0.5) ns / nt + 0.5)
CREATE TEMP TABLE diagonal AS
SELECT p.n, least(greatest(round((t - 0.5) * ns / nt + 0.5)::int, 1), ns) AS s, t
FROM pairs p, LATERAL (SELECT array_length(string_to_array(p.de, ' '), 1) AS ns, array_length(string_to_array(p.en, ' '), 1) AS nt) x,
     generate_series(1, nt) t;
-- AER with sure links only: 1 - 2 |A & S| / (|A| + |S|)
CREATE FUNCTION pg_temp.aer(a regclass) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE hits float8; na float8; ns float8;
BEGIN
  EXECUTE format('SELECT count(*) FROM %s x JOIN gold g USING (n, s, t)', a) INTO hits;
  EXECUTE format('SELECT count(*) FROM %s', a) INTO na;
  SELECT count(*) INTO ns FROM gold;
  RETURN 1 - 2 * hits / (na + ns);
END $$;
SELECT diag('alignment error rate: align() ' || round(pg_temp.aer('links')::numeric, 3) || ', diagonal ' || round(pg_temp.aer('diagonal')::numeric, 3));
SELECT cmp_ok(pg_temp.aer('links'), '<', pg_temp.aer('diagonal'), 'align() has a lower alignment error rate than the diagonal');
SELECT cmp_ok(pg_temp.aer('links'), '<', 0.15::float8, 'and below 0.15');
-- a text of several sentences is explained as translate() translates it:
-- sentence by sentence, the positions running on (issue 23)
\set doc 'Ein Hund rennt durch den Schnee. Zwei Frauen sitzen auf einer Bank und reden. Ein Mann fährt Fahrrad.'
SELECT is((SELECT string_agg(target_word, ' ' ORDER BY target_pos) FROM align(:'doc', 'multi30k_de_en')),
  (SELECT string_agg(w, ' ') FROM regexp_split_to_table(translate(:'doc', 'multi30k_de_en'), '\s+') w WHERE w <> ''),
  'align() of three sentences: the target words are translate()''s output, word for word');
SELECT is((SELECT count(*)::int FROM attention_map(:'doc', 'multi30k_de_en') WHERE stack = 'cross' AND layer = 1 AND head = 1 AND key_token = '</s>'),
  (SELECT count(DISTINCT query_pos)::int FROM attention_map(:'doc', 'multi30k_de_en') WHERE stack = 'cross'),
  'attention_map(): each output token attends to the EOS of its own sentence only');
SELECT is((SELECT count(*)::int FROM (SELECT query_pos, sum(weight) AS s FROM attention_map(:'doc', 'multi30k_de_en')
           WHERE stack = 'cross' AND layer = 1 AND head = 1 GROUP BY query_pos) r WHERE abs(s - 1) > 1e-4), 0,
  'attention_map(): each row of weights sums to 1 within its sentence');
SELECT is((SELECT string_agg(t, '' ORDER BY p) FROM (SELECT DISTINCT query_pos AS p, query_token AS t FROM attention_map(:'doc', 'multi30k_de_en')
           WHERE stack = 'cross' AND query_token <> '</s>') q),
  U&'\2581' || replace(translate(:'doc', 'multi30k_de_en'), ' ', U&'\2581'),
  'attention_map(): its output pieces spell translate()''s output');

SELECT * FROM finish();
ROLLBACK;
