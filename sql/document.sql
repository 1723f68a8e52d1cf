-- documents: sentences() and translate() of any text, one edge case per line
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS transformer;
RESET client_min_messages;
\pset null (null)
SELECT import_model('multi30k_de_en') > 0 AS imported;
SELECT source_lang, target_lang FROM transformer_models WHERE name = 'multi30k_de_en';
SET transformer.default_model = 'multi30k_de_en';
-- nothing else changes meaning: PostgreSQL's own functions of the same names
SELECT encode('hello', 'base64');
SELECT encode('\x01ff'::bytea, 'hex');
SELECT decode('aGVsbG8=', 'base64');
SELECT translate('hello', 'el', 'ip');
SELECT translate('12345'::text, '143', 'ax'::text);
-- a string third argument is never ours (docs/reference.md warns): this is
-- PostgreSQL's translate(), which finds no 'm' to replace by 'd' and
-- returns the text as it is, silently
SELECT translate('Ein Hund.', 'm', 'de');
-- options by name
SELECT translate('Ein Hund.', 'multi30k_de_en', beam_size => 1);
-- empty, whitespace only, NULL: as they are
SELECT translate('') = '' AS empty;
SELECT translate('   ') = '   ' AS spaces;
SELECT translate(E' \n\t\r\n') = E' \n\t\r\n' AS whitespace;
SELECT translate(NULL::text) IS NULL AS null_input;
SELECT translate(ARRAY['', NULL, '  ', 'Ein Mann.'], 'multi30k_de_en');
-- whitespace kept: leading and trailing newlines, CRLF, blank lines
SELECT translate(E'\nEin Mann.\n');
SELECT translate(E'Ein Mann.\r\nEine Frau.');
SELECT translate(E'Ein Mann.\n\nEine Frau.');
SELECT translate(E'  Ein Mann.   Eine Frau.  ');
SELECT translate(E'Ein Mann.\tEine Frau.');
-- sentences: abbreviations, quotes after the full stop, ? and !, ellipses, numbers
SELECT s FROM sentences('Das ist z. B. ein Hund. Dr. Müller kommt.', 'de') s;
SELECT s FROM sentences('He said so, e.g. here. Mr. Smith left.', 'en') s;
SELECT s FROM sentences('Er sagte: "Komm." Sie kam.', 'de') s;
SELECT s FROM sentences('Wer? Ich! Wirklich.', 'de') s;
SELECT s FROM sentences('Und dann... kam er. Ende', 'de') s;
SELECT s FROM sentences('Es kostet 3.5 Euro. Das ist billig.', 'de') s;
SELECT s FROM sentences('Kapitel 2. Der Anfang.', 'de') s;
SELECT s FROM sentences(E'Eins.\r\nZwei.\n\nDrei', NULL) s;
SELECT count(*) FROM sentences('', 'de');
SELECT count(*) FROM sentences(NULL, 'de');
SELECT s FROM sentences('kein Punkt', NULL) s;
SELECT * FROM sentences('x', 'not a locale');
SELECT * FROM sentences('x', repeat('a', 200));
-- round trip, byte for byte
SELECT string_agg(s, '') = E' Ein Mann.  Zwei Frauen!\n\nDrei?\r\n' FROM sentences(E' Ein Mann.  Zwei Frauen!\n\nDrei?\r\n', 'de') s;
-- translate() of a paragraph: each sentence on its own, joined as they were
SELECT translate('Ein Mann fährt mit dem Fahrrad. Zwei Kinder spielen im Sand am Strand. Eine Frau liest ein Buch.');
SELECT translate('Ein Mann fährt mit dem Fahrrad. Zwei Kinder spielen im Sand am Strand. Eine Frau liest ein Buch.')
     = translate('Ein Mann fährt mit dem Fahrrad.') || ' ' || translate('Zwei Kinder spielen im Sand am Strand.') || ' ' || translate('Eine Frau liest ein Buch.') AS joined;
-- length is never an ERROR: 40 sentences, a sentence without punctuation longer than the positions, 10,000 characters
SELECT length(translate(repeat('Ein Mann fährt mit dem Fahrrad. ', 40))) > 400 AS forty_sentences;
SELECT length(translate(repeat('Mann ', 300))) > 0 AS long_without_punctuation;
-- 300 one-token words: cut after the 255th (256 positions, EOS included), the space between the pieces kept
-- (with the model's positions as its segment length: the bundled model's is 25 tokens)
SELECT set_model_segment_length('multi30k_de_en', NULL);
SELECT translate(repeat('Mann ', 299) || 'Mann')
     = translate(repeat('Mann ', 254) || 'Mann') || ' ' || translate(repeat('Mann ', 44) || 'Mann') AS cut_at_the_last_space_that_fits;
SELECT set_model_segment_length('multi30k_de_en', 25);
-- with it: 300 words in pieces of 25 tokens at most, each translated
SELECT translate(repeat('Mann ', 299) || 'Mann')
     = translate(repeat('Mann ', 24) || 'Mann') || repeat(' ' || translate(repeat('Mann ', 24) || 'Mann'), 11) AS cut_at_the_segment_length;
SELECT length(translate(repeat('Ein Hund läuft über die Wiese und ', 300))) > 0 AS ten_thousand_characters;
SELECT length(translate(repeat('x', 3000))) > 0 AS one_long_word;
-- the batch form: documents of many rows, together
SELECT translate(ARRAY['Ein Mann. Eine Frau.', E'Zwei Hunde.\n\nEine Katze.'], 'multi30k_de_en')
     = ARRAY[translate('Ein Mann. Eine Frau.'), translate(E'Zwei Hunde.\n\nEine Katze.')] AS batch_as_rows;
-- languages: set, changed, and checked
SELECT set_model_languages('multi30k_de_en', 'de', 'en');
SELECT set_model_languages('no_such_model', 'de', 'en');
SELECT set_model_languages('multi30k_de_en', 'de;x=1', 'en');
SELECT set_model_languages('multi30k_de_en', 'de DE', 'en');
SELECT set_model_languages('multi30k_de_en', NULL, NULL);
SELECT source_lang, target_lang FROM transformer_models WHERE name = 'multi30k_de_en';
-- the languages travel with export_model() and import_model()
SELECT set_model_languages('multi30k_de_en', 'de', 'en');
SELECT export_model('multi30k_de_en', '/tmp/transformer_regress_languages') > 0 AS exported;
SELECT pg_read_file('/tmp/transformer_regress_languages/tokenizer_config.json')::jsonb AS tokenizer_config;
SELECT import_model('reimported', '/tmp/transformer_regress_languages') > 0 AS reimported;
SELECT source_lang, target_lang FROM transformer_models WHERE name = 'reimported';
SELECT drop_model('reimported');
SELECT drop_model('multi30k_de_en');
