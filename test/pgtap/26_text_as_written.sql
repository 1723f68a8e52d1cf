-- Text as people write it (issue 27): markup, verbatim spans, capitals,
-- sentence splitting and long text without punctuation, on the bundled
-- model and on the random-weight fixtures (whatever they translate to,
-- the markup stays well-formed and every span appears exactly once).
-- Inputs: test/fixtures/text/text_cases.json (tools/gen_text_fixtures.py,
-- Multi30k test 2016).
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off
\set root `pwd`

BEGIN;
CREATE EXTENSION transformer;
SELECT plan(76);

SELECT ok(import_model('multi30k_de_en') > 0, 'the bundled model');
SELECT is(segment_tokens, 25, 'the bundled model records its reliable segment length')
FROM transformer_models WHERE name = 'multi30k_de_en';
SELECT ok(import_model(m, :'root' || '/test/fixtures/models/' || m) > 0, 'fixture ' || m)
FROM unnest(ARRAY['marian_swish', 'paper_relu']) m;

CREATE TEMP TABLE cases AS SELECT pg_read_file(:'root' || '/test/fixtures/text/text_cases.json')::jsonb AS j;

-- helpers: the tags of a document in order; its text without tags; how often s occurs in t
CREATE FUNCTION pg_temp.tags(s text) RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(array_agg(m[1] ORDER BY n), '{}') FROM regexp_matches(s, '(<[^>]*>)', 'g') WITH ORDINALITY r(m, n) $$;
CREATE FUNCTION pg_temp.tag_names(s text) RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(array_agg(m[1] ORDER BY n), '{}') FROM regexp_matches(s, '<(/?[A-Za-z0-9]+)', 'g') WITH ORDINALITY r(m, n) $$;
CREATE FUNCTION pg_temp.untagged(s text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT regexp_replace(s, '<[^>]*>', '', 'g') $$;
CREATE FUNCTION pg_temp.occurrences(t text, s text) RETURNS int LANGUAGE sql IMMUTABLE AS $$
  SELECT (length(t) - length(replace(t, s, ''))) / length(s) $$;
-- HTML as XML: void elements closed, so that PostgreSQL's XML parser can check the nesting
CREATE FUNCTION pg_temp.well_formed_html(s text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT xml_is_well_formed_content(regexp_replace(s, '<(br|img|hr|input|meta|link|wbr)\M([^>]*)>', '<\1\2/>', 'g')) $$;
CREATE FUNCTION pg_temp.error_detail(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE d text;
BEGIN
  EXECUTE q;
  RETURN NULL;
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
  RETURN d;
END $$;
CREATE FUNCTION pg_temp.words(s text) RETURNS int LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(array_length(regexp_split_to_array(btrim(s), '\s+'), 1), 0) $$;

-- ---------------------------------------------------------------- capitals
SELECT is(translate('EIN MANN FÄHRT MIT DEM FAHRRAD DURCH DIE STADT.', 'multi30k_de_en'),
          upper(translate('Ein Mann fährt mit dem Fahrrad durch die Stadt.', 'multi30k_de_en')),
          'ALL CAPS: lowered with the vocabulary''s casing, translated, and upper-cased again');
SELECT is(translate('ZWEI KINDER SPIELEN IM PARK. EIN HUND SCHLÄFT.', 'multi30k_de_en'),
          upper(translate('Zwei Kinder spielen im Park. Ein Hund schläft.', 'multi30k_de_en')),
          'ALL CAPS over two sentences');
SELECT is(lower(translate('Zwei Hunde Spielen Im Schnee', 'multi30k_de_en')),
          lower(translate('Zwei Hunde spielen im Schnee', 'multi30k_de_en')),
          'Title Case: the headline translates as the sentence would');
SELECT unalike(translate('Zwei Hunde Spielen Im Schnee', 'multi30k_de_en'), '% [a-z]{4,}%',
               'Title Case: the translation is in Title Case (minor words aside)');
SELECT is(translate('Ein Mann fährt mit dem Fahrrad durch die Stadt.', 'multi30k_de_en'),
          'A man is riding his bike through the city.', 'mixed-case text is untouched');
SELECT is(translate('EIN MANN FÄHRT MIT DEM FAHRRAD DURCH DIE STADT.', 'multi30k_de_en', format => 'html'),
          upper(translate('Ein Mann fährt mit dem Fahrrad durch die Stadt.', 'multi30k_de_en')),
          'ALL CAPS in an HTML text run');

-- ---------------------------------------------------------------- markup
SELECT is(translate('<p>Ein Mann fährt <b>Fahrrad</b>.</p>', 'multi30k_de_en', format => 'html'),
          '<p>A man is riding <b>a bicycle</b>.</p>', 'a bold word goes around the words aligned to it');
SELECT is(count(*) FILTER (WHERE pg_temp.untagged(translate(c->>'html', 'multi30k_de_en', format => 'html'))
                              = translate(c->>'plain', 'multi30k_de_en')), 40::bigint,
          '40 Multi30k sentences with one word in <b>: the text is translate() of the plain sentence')
FROM cases, jsonb_array_elements(j->'html40') c;
SELECT is(count(*) FILTER (WHERE pg_temp.tags(translate(c->>'html', 'multi30k_de_en', format => 'html'))
                              = pg_temp.tags(c->>'html')), 40::bigint, '... and the same tags in the same order')
FROM cases, jsonb_array_elements(j->'html40') c;

CREATE TEMP TABLE page AS SELECT
$h$<h1 title="Ein Hund im Park">Zwei Hunde spielen</h1>
<p>Ein <i>kleiner</i> Hund <b>rennt</b> über die <a href="https://example.org/wiese" class="x">Wiese</a>.<br>Zwei Kinder spielen.</p>
<p>Führe <code>ls -l</code> aus. <span translate="no">Hundehütte GmbH</span> ist ein Name.</p>
<img src="hund.png" alt="Ein brauner Hund">
<pre>Ein Mann   fährt
  Fahrrad.</pre>
<script>var x = "<b>Hund</b>";</script><style>p > b { color: red }</style>
<!-- ein Kommentar --><ul><li>Ein Hund &amp; eine Katze</li><li>Zwei Kinder</li></ul>
<table><tr><td>Ein Mann</td><td>Eine Frau</td></tr></table>$h$::text AS src;
CREATE TEMP TABLE page_out AS SELECT translate(src, 'multi30k_de_en', format => 'html') AS out FROM page;

SELECT ok(pg_temp.well_formed_html(out), 'an HTML page comes back well-formed') FROM page_out;
SELECT is(array_length(pg_temp.tags(out), 1), array_length(pg_temp.tags(src), 1), 'every tag of the page is kept')
FROM page, page_out;
SELECT is((SELECT array_agg(t ORDER BY t) FROM unnest(pg_temp.tags(out)) t WHERE t !~ '^<(h1|img) '),
          (SELECT array_agg(t ORDER BY t) FROM unnest(pg_temp.tags(src)) t WHERE t !~ '^<(h1|img) '),
          '... with the same names and attributes (those of title and alt aside)')
FROM page, page_out;
SELECT ok(out LIKE '%<code>ls -l</code>%' AND out LIKE '%<span translate="no">Hundehütte GmbH</span>%'
          AND out LIKE E'%<pre>Ein Mann   fährt\n  Fahrrad.</pre>%' AND out LIKE '%<script>var x = "<b>Hund</b>";</script>%'
          AND out LIKE '%<style>p > b { color: red }</style>%' AND out LIKE '%<!-- ein Kommentar -->%',
          'code, translate="no", pre, script, style and comments stay verbatim') FROM page_out;
SELECT ok(out NOT LIKE '%title="Ein Hund im Park"%' AND out NOT LIKE '%alt="Ein brauner Hund"%'
          AND out LIKE '%href="https://example.org/wiese"%' AND out LIKE '%src="hund.png"%',
          'title and alt are translated, other attributes are not') FROM page_out;
SELECT ok(out !~ '(Zwei Kinder spielen|Ein Mann fährt mit|Eine Frau<)' AND out ~ '<li>[^<]*[a-z]+[^<]*</li>',
          'block text (h1, p, li, td) is translated') FROM page_out;
SELECT ok(out ~ '\.<br>\s*Two', 'a <br> after a period stays after the period') FROM page_out;

SELECT lives_ok($$SELECT translate('<p>Ein <b>Hund <i>rennt</p> über </x> die Wiese', 'multi30k_de_en', format => 'html')$$,
                'malformed HTML gets libxml2''s recovery, never an error');
SELECT ok(pg_temp.well_formed_html(translate('<p>Ein <b>Hund <i>rennt</p> über </x> die Wiese', 'multi30k_de_en', format => 'html')),
          '... and the result is well-formed');
SELECT throws_ok($$SELECT translate(E'<doc>\n<p>Ein Hund</b>\n</doc>', 'multi30k_de_en', format => 'xml')$$,
                 '2200N', NULL, 'malformed XML: 2200N');
SELECT throws_ok($$SELECT translate(E'<?xml version="1.0"?>\n<doc><p>Ein Hund</doc>', 'multi30k_de_en', format => 'xml')$$,
                 '2200M', NULL, 'a malformed XML document: 2200M');
SELECT throws_like($$SELECT translate(E'<doc>\n<p>Ein Hund</b>\n</doc>', 'multi30k_de_en', format => 'xml')$$,
                   '%parse%XML%', '... naming the problem');
SELECT ok((SELECT message LIKE '%line 2: Opening and ending tag mismatch%' FROM (SELECT pg_temp.error_detail($$SELECT translate(E'<doc>\n<p>Ein Hund</b>\n</doc>', 'multi30k_de_en', format => 'xml')$$) AS message) x),
          '... and its line');
SELECT ok((SELECT x LIKE '<doc><title lang="de">%</title><para>%<em>%</em>%</para></doc>' AND xml_is_well_formed_document(x)
           FROM translate('<doc><title lang="de">Zwei Hunde</title><para>Ein Mann fährt <em>Fahrrad</em>.</para></doc>',
                          'multi30k_de_en', format => 'xml') x), 'XML: elements, attributes and mixed content kept');
SELECT is(translate(ARRAY['<p>Ein <b>Hund</b>.</p>', NULL, '<p>Eine Katze.</p>'], 'multi30k_de_en', format => 'html'),
          ARRAY[translate('<p>Ein <b>Hund</b>.</p>', 'multi30k_de_en', format => 'html'), NULL,
                translate('<p>Eine Katze.</p>', 'multi30k_de_en', format => 'html')],
          'translate(text[]) takes format too');
SELECT throws_ok($$SELECT translate('x', 'multi30k_de_en', format => 'pdf')$$, '22023',
                 'invalid value for option "format": "pdf"', 'an unknown format: 22023');
SELECT throws_ok($$SELECT translate(repeat('<div>', 5000) || 'Ein Hund' || repeat('</div>', 5000), 'multi30k_de_en', format => 'html')$$,
                 '54000', NULL, '5,000 nested elements: past the bound of 256, 54000');

-- ---------------------------------------------------------------- verbatim spans
CREATE TEMP TABLE spans AS SELECT s, translate(s, 'multi30k_de_en') AS out FROM (VALUES
  ('Ein Mann besucht https://example.org/hunde?id=7 und schreibt an anna.schmidt@example.org.'),
  ('Am 15. März 2024 spielen zwei Hunde im Park.'),
  ('Hallo {name}, du hast %d neue Nachrichten von @anna_b zu #Berlin2024.'),
  ('Ein Kind tippt `ls -l` und $1 in den Computer.')) v(s);
SELECT is(pg_temp.occurrences(out, k), 1, format('"%s" appears exactly once', k))
FROM spans, unnest(ARRAY['https://example.org/hunde?id=7', 'anna.schmidt@example.org', '15.', '2024', '{name}', '%d',
                         '@anna_b', '#Berlin2024', '`ls -l`', '$1']) k
WHERE strpos(s, k) > 0 ORDER BY k;
SELECT is((SELECT array_agg(m[1]) FROM regexp_matches(out, '[0-9]+', 'g') m), ARRAY['15', '2024'],
          'a date with digits: no other number appears') FROM spans WHERE s LIKE 'Am 15.%';
SELECT isnt(translate('Am 15. März 2024 spielen zwei Hunde im Park.', 'multi30k_de_en', keep => '{}'),
            (SELECT out FROM spans WHERE s LIKE 'Am 15.%'), 'keep => ''{}'' keeps no span');
SELECT is(pg_temp.occurrences(translate('Siehe https://example.org und anna@example.org.', 'multi30k_de_en', keep => ARRAY['url']),
                              'https://example.org'), 1, 'keep => ARRAY[''url''] keeps URLs ...');
SELECT throws_ok($$SELECT translate('x', 'multi30k_de_en', keep => ARRAY['urls'])$$, '22023',
                 'invalid value in option "keep": "urls"', 'an unknown kind of span: 22023');
SELECT throws_ok($$SELECT translate('x', 'multi30k_de_en', keep => ARRAY[NULL])$$, '22004', NULL, 'a null kind: 22004');
SELECT is(translate('https://example.org', 'multi30k_de_en'), 'https://example.org', 'a text that is only a span comes back as it is');
SELECT ok(translate('3 Hunde spielen im Park.', 'multi30k_de_en') ~ '^3 [A-Z][a-z]+ ',
          'a span at the start: its space after it, none before');
SELECT ok(translate('Zwei Hunde spielen mit 3 Bällen.', 'multi30k_de_en') ~ '[a-z] 3 [a-z]', 'a span inside: a space either side');
SELECT is(pg_temp.occurrences(translate('<p>Schreib an <a href="mailto:anna@example.org">anna@example.org</a> heute.</p>',
                                        'multi30k_de_en', format => 'html'), '>anna@example.org</a>'), 1,
          'a span inside a link stays inside it');
-- the random-weight fixtures: whatever they say, every span once and the markup whole
SELECT is(pg_temp.occurrences(translate('Besuche https://example.org/a am 15.03.2024 mit {name}.', m), k), 1,
          m || ': "' || k || '" appears exactly once')
FROM unnest(ARRAY['marian_swish', 'paper_relu']) m, unnest(ARRAY['https://example.org/a', '15.03.2024', '{name}']) k;
SELECT ok(pg_temp.well_formed_html(o) AND pg_temp.tag_names(o) = pg_temp.tag_names(src),
          m || ': the HTML page keeps every tag, well-formed')
FROM page, unnest(ARRAY['marian_swish', 'paper_relu']) m, translate(src, m, format => 'html') o;

-- ---------------------------------------------------------------- sentences
SELECT is(array_agg(s), ARRAY['Am 3. Oktober spielen Kinder im Schnee. ', 'Ca. 20 Leute stehen auf der Straße. ', 'Nr. 5 gewinnt.'],
          'no sentence ends at "3." before a month name, or at "Ca." and "Nr."')
FROM sentences('Am 3. Oktober spielen Kinder im Schnee. Ca. 20 Leute stehen auf der Straße. Nr. 5 gewinnt.', 'de') s;
SELECT is(count(*), 1::bigint, 'nor at "15." before a lower-case word') FROM sentences('Er wurde am 15. geboren und lebt in Berlin.', 'de');
SELECT is(count(*), 2::bigint, 'a sentence still ends at a number before a capitalized word') FROM sentences('Ich habe 20. Dann gehe ich.', 'de');
SELECT is(translate('Ein Hund rennt. Eine Katze schläft.', 'multi30k_de_en', split => false),
          detokenize(generate('Ein Hund rennt. Eine Katze schläft.', 'multi30k_de_en'), (SELECT target_tokenizer FROM transformer_models WHERE name = 'multi30k_de_en')),
          'split => false translates the input as one segment');
SELECT ok(translate(E'Ein Hund rennt.\n\nEine Katze schläft.', 'multi30k_de_en') ~ E'^[^\n]+\\.\n\n[^\n]+\\.$',
          'sentences are joined with the whitespace of the input');

-- ---------------------------------------------------------------- long text
SELECT cmp_ok(pg_temp.words(translate(j->'paragraph'->>'unpunctuated', 'multi30k_de_en'))::float8
              / pg_temp.words(translate(j->'paragraph'->>'punctuated', 'multi30k_de_en')), '>=', 0.7::float8,
              '20 sentences without final periods keep 70% of the words of the punctuated paragraph''s translation')
FROM cases;
SELECT cmp_ok(length(translate(j->>'words600', 'multi30k_de_en')), '>', 1000, '600 words without punctuation: over 1,000 characters')
FROM cases;
SELECT ok(length(o) > 5000 AND o !~ '[[:alpha:]][.!?][[:alpha:]]', '10 kB run on: long, and no chunks glued together')
FROM cases, translate(j->>'runon10k', 'multi30k_de_en') o;
SELECT cmp_ok(pg_temp.words(translate(j->'paragraph'->>'unpunctuated', 'multi30k_de_en', split => false)), '>', 100,
              'split => false still cuts a segment longer than the model translates reliably') FROM cases;

-- a cut at a clause boundary (the comma, in the second half of what fits) rather than at the last word that fits
SELECT set_model_segment_length('multi30k_de_en', 10);
SELECT ok(starts_with(translate('Zwei Hunde spielen im Schnee, ein Mann fährt mit dem Fahrrad durch die Stadt', 'multi30k_de_en'),
                      translate('Zwei Hunde spielen im Schnee,', 'multi30k_de_en') || ' '),
          'a segment too long is cut at its comma, not at the last word that fits');
SELECT set_model_segment_length('multi30k_de_en', 25);

-- measuring the reliable length: on the fixture's sentences, stored with the model
SELECT ok(measure_segment_length('multi30k_de_en', ARRAY(SELECT c->>'plain' FROM cases, jsonb_array_elements(j->'html40') c))
          BETWEEN 15 AND 40, 'measure_segment_length: between one and three sentences');
SELECT ok((SELECT segment_tokens BETWEEN 15 AND 40 FROM transformer_models WHERE name = 'multi30k_de_en'), '... and stored with the model');
SELECT lives_ok($$SELECT set_model_segment_length('multi30k_de_en', 25)$$, 'set_model_segment_length');
SELECT is(segment_tokens, 25, '... sets it') FROM transformer_models WHERE name = 'multi30k_de_en';
SELECT throws_ok($$SELECT set_model_segment_length('multi30k_de_en', 2)$$, '22023', NULL, 'a length under 4 tokens: 22023');
SELECT throws_ok($$SELECT set_model_segment_length('no_such_model', 20)$$, '42704', NULL, 'an unknown model: 42704');
SELECT throws_ok($$SELECT measure_segment_length('multi30k_de_en', ARRAY['Ein Hund.'])$$, '22023', NULL,
                 'measure_segment_length needs 8 sentences');

-- a whole sentence ended by its period stays whole up to twice the segment length
-- (test_2016 line 6: 31 tokens, more than the bundled model's 25; cut, it lost its sense):
-- the same as with no segment length at all
SELECT translate('Ein hell gekleideter Mann fotografiert eine Gruppe von Männern in dunklen Anzügen und mit Hüten, die um eine Frau in einem trägerlosen Kleid herum stehen.', 'multi30k_de_en', 4) AS long_default \gset
SELECT set_model_segment_length('multi30k_de_en', NULL) \g /dev/null
SELECT is(:'long_default',
          translate('Ein hell gekleideter Mann fotografiert eine Gruppe von Männern in dunklen Anzügen und mit Hüten, die um eine Frau in einem trägerlosen Kleid herum stehen.', 'multi30k_de_en', 4),
          'a punctuated sentence of 31 tokens (segment length 25) is translated whole');

SELECT * FROM finish();
ROLLBACK;
