-- Documents on real text (../shared/data/multi30k; skipped without it):
-- sentences() gives back every German line of test_2016 and test_2017 byte
-- for byte, and translate() of 100 paragraphs of 3 to 6 test_2017 sentences
-- (joined by ' ', '\n' or '\n\n') equals their sentences' translations
-- joined with the same separators.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set data `cd ../shared/data 2>/dev/null && pwd || echo missing`

BEGIN;
CREATE EXTENSION transformer;
SELECT :'data' <> 'missing' AS have_data \gset
\if :have_data
SELECT plan(5);
CREATE TEMP TABLE lines (split text, n serial, de text);
\copy lines(de) FROM PROGRAM 'zcat ../shared/data/multi30k/test_2016_flickr.de.gz' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02', NULL E'\x03')
UPDATE lines SET split = 'test_2016' WHERE split IS NULL;
\copy lines(de) FROM PROGRAM 'zcat ../shared/data/multi30k/test_2017_flickr.de.gz' WITH (FORMAT csv, QUOTE E'\x01', DELIMITER E'\x02', NULL E'\x03')
UPDATE lines SET split = 'test_2017' WHERE split IS NULL;
SELECT is((SELECT count(*)::int FROM lines WHERE de IS DISTINCT FROM (SELECT string_agg(s, '') FROM sentences(de, 'de') s)), 0,
  'sentences() gives back each of the ' || (SELECT count(*) FROM lines) || ' German lines of test_2016 and test_2017 byte for byte');
SELECT diag((SELECT count(*) FROM lines WHERE (SELECT count(*) FROM sentences(de, 'de')) > 1) || ' lines are more than one sentence');

SELECT import_model('multi30k_de_en') \g /dev/null
-- 100 paragraphs of 3-6 test_2017 sentences that end in a full stop, with a separator each
CREATE TEMP TABLE sents AS
SELECT row_number() OVER (ORDER BY n) AS k, de FROM lines
WHERE split = 'test_2017' AND de ~ '[.!?]$' AND (SELECT count(*) FROM sentences(de, 'de')) = 1;
CREATE TEMP TABLE paras AS
SELECT p, (ARRAY[' ', E'\n', E'\n\n'])[1 + p % 3] AS sep, 3 + p % 4 AS len,
       (SELECT coalesce(sum(3 + q % 4), 0) FROM generate_series(1, p - 1) q) AS first
FROM generate_series(1, 100) p;
CREATE TEMP TABLE para_sents AS
SELECT p, sep, g.i, s.de FROM paras, LATERAL generate_series(1, paras.len) AS g(i), sents s WHERE s.k = paras.first + g.i;
SELECT is((SELECT count(DISTINCT p)::int FROM para_sents), 100, '100 paragraphs of ' || (SELECT count(*) FROM para_sents) || ' sentences');
SET LOCAL transformer.default_model = 'multi30k_de_en';
CREATE TEMP TABLE results AS
SELECT p, translate(string_agg(de, sep ORDER BY i)) AS whole,
       string_agg(translate(de), sep ORDER BY i) AS joined
FROM para_sents GROUP BY p, sep;
-- where CLDR's German abbreviations (the ss=standard suppressions) keep a
-- line's last word from ending its sentence ("ab.", "Test."), the paragraph
-- has fewer sentences than lines, and those two lines translate as one
CREATE TEMP TABLE merged AS
SELECT p FROM para_sents GROUP BY p, sep
HAVING (SELECT count(*) FROM sentences(string_agg(de, sep ORDER BY i), 'de') s WHERE btrim(s, E' \n\r\t') <> '') <> count(*);
SELECT diag((SELECT count(*) FROM merged) || ' of 100 paragraphs have a line ending in an abbreviation: '
            || coalesce((SELECT string_agg(p::text, ', ') FROM merged), 'none'));
SELECT cmp_ok((SELECT count(*)::int FROM merged), '<=', 2, 'at most 2 of 100 paragraphs join two lines at an abbreviation');
SELECT is((SELECT array_agg(p ORDER BY p) FROM results WHERE whole IS DISTINCT FROM joined AND p NOT IN (SELECT p FROM merged)), NULL,
  'translate(paragraph) = the sentences'' translations joined as they were, for the ' || (SELECT 100 - count(*) FROM merged) || ' others');
SELECT is((SELECT array_agg(p ORDER BY p) FROM results r
           WHERE (translate(ARRAY(SELECT string_agg(de, sep ORDER BY i) FROM para_sents x WHERE x.p = r.p GROUP BY sep), 'multi30k_de_en'))[1]
                 IS DISTINCT FROM whole), NULL, 'the batch form translates each paragraph the same');
SELECT * FROM finish();
\else
SELECT plan(1);
SELECT skip('../shared/data/multi30k is not there', 1);
\endif
ROLLBACK;
