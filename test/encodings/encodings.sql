-- The extension in a database of another encoding (issue 23): run by
-- test/encodings/run.sh in a LATIN1 and a SQL_ASCII database, with the
-- UTF8 database's answers in psql variables (want_*).  The model's strings
-- stay UTF-8 inside (the vocabulary as vocab_json bytes where jsonb cannot
-- hold U+2581), and text is converted at the SQL boundary.
\set ON_ERROR_STOP 1
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

BEGIN;
SET client_min_messages = warning;
CREATE EXTENSION transformer;
SELECT plan(15);
SELECT current_setting('server_encoding') AS enc \gset

SELECT cmp_ok(import_model('multi30k_de_en'), '>', 0::bigint, :'enc' || ': import_model() of the bundled model');
SELECT ok((SELECT vocab IS NULL AND vocab_json IS NOT NULL FROM transformer_tokenizers WHERE name = 'multi30k_de_en/source'),
  :'enc' || ': the vocabulary is stored as UTF-8 bytes (vocab_json), not jsonb');
SELECT is(translate(:'src', 'multi30k_de_en'), :'want_translation', :'enc' || ': translate() as in a UTF8 database');
SELECT is(translate(ARRAY[:'src', :'src2'], 'multi30k_de_en'), ARRAY[:'want_translation', :'want_translation2'], :'enc' || ': translate(text[]) too');
SELECT is(tokenize(:'src', 'multi30k_de_en/source')::text, :'want_ids', :'enc' || ': tokenize() as in a UTF8 database');
SELECT is(detokenize(tokenize(:'src', 'multi30k_de_en/source'), 'multi30k_de_en/source'), :'src', :'enc' || ': detokenize() gives the text back');
SELECT is(tokens(:'src', 'multi30k_de_en/source')::text, :'want_tokens',
  :'enc' || ': tokens(), with U+2581 as a space where the encoding lacks it');
SELECT is((SELECT string_agg(source_word || '>' || target_word, ' ' ORDER BY target_pos) FROM align(:'src', 'multi30k_de_en')),
  :'want_align', :'enc' || ': align() as in a UTF8 database');
SELECT is((SELECT count(*)::int FROM sentences(:'src' || ' ' || :'src2')), 2, :'enc' || ': sentences()');
SELECT is(translate('<p title="Ein Mädchen">' || :'src' || ' <b>Zwei</b> Hunde, 3 Bälle.</p>', 'multi30k_de_en', format => 'html'),
  :'want_html', :'enc' || ': translate(format => ''html'') with spans, as in a UTF8 database');
SELECT matches(attention_svg(:'src', 'multi30k_de_en'), '<svg ', :'enc' || ': attention_svg() draws');
SELECT matches(heatmap_svg('{{1,2}}', ARRAY['Mädchen'], ARRAY['a', 'b']),
  CASE WHEN :'enc' = 'LATIN1' THEN 'M&#xE4;dchen' ELSE 'Mädchen' END, :'enc' || ': heatmap_svg() keeps every character (a reference where needed)');
SELECT cmp_ok(abs(bleu(translate(:'src', 'multi30k_de_en'), :'want_translation') - 100), '<', 1e-9::float8, :'enc' || ': bleu()');
-- what the encoding cannot say, or what is not UTF-8
SELECT CASE WHEN :'enc' = 'LATIN1'
  THEN throws_ok($$SELECT detokenize(ARRAY[7993], 'multi30k_de_en/target')$$, '22P05', NULL,
    'LATIN1: output the encoding cannot represent (U+201E) is 22P05')
  ELSE throws_ok($$SELECT translate(convert_from('\x4b61747a65e4'::bytea, 'SQL_ASCII'), 'multi30k_de_en')$$, '22021',
    'invalid byte sequence for encoding "UTF8": 0xe4', 'SQL_ASCII: bytes that are not UTF-8 are 22021, naming the byte')
  END;
SELECT CASE WHEN :'enc' = 'LATIN1'
  THEN is(translate(convert_from('\x4b61747a65e4'::bytea, 'LATIN1'), 'multi30k_de_en'), :'want_katze', 'LATIN1: Latin-1 input ("Katzeä") is converted')
  ELSE is(set_config('transformer.invalid_utf8', 'replace', true) ||
          encode(convert_to(translate(convert_from('\x4b61747a65e4'::bytea, 'SQL_ASCII'), 'multi30k_de_en'), 'SQL_ASCII'), 'hex'),
    'replace' || :'want_katze_replaced', 'SQL_ASCII: with transformer.invalid_utf8 = replace, U+FFFD for the byte (kept verbatim)')
  END;

SELECT * FROM finish();
ROLLBACK;
