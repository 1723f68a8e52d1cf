-- pictures: heatmap_svg() and positional_encoding(), one edge case per line
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS transformer;
RESET client_min_messages;
-- the paper's sinusoids, against the formula computed here
SELECT max(abs(p[pos + 1][j + 1] - CASE WHEN j % 2 = 0 THEN sin(pos / 10000 ^ (j::float8 / 8)) ELSE cos(pos / 10000 ^ ((j - 1)::float8 / 8)) END)) < 1e-6 AS formula
FROM (SELECT positional_encoding(50, 8) AS p) x, generate_series(0, 49) pos, generate_series(0, 7) j;
SELECT array_dims(positional_encoding(3, 4));
SELECT positional_encoding(2, 4);
SELECT positional_encoding(0, 4);
SELECT positional_encoding(3, 5);
SELECT positional_encoding(70000, 2);
-- heatmaps
SELECT heatmap_svg('{{0.1,0.9},{0.6,0.4}}', '{a,b}', '{x,y}', 'A <small> & "quoted" map');
SELECT heatmap_svg(NULL);
SELECT heatmap_svg('{{1,2}}', '{a,b}');
SELECT heatmap_svg('{{1,2}}', NULL, '{a}');
SELECT heatmap_svg('{{1,NaN}}');
SELECT heatmap_svg('{1,2}');
SELECT heatmap_svg(array_fill(1::real, ARRAY[1001, 1]));
SELECT length(heatmap_svg(attention_weights('{{1,0},{0,1},{1,1}}', '{{1,0},{0,1}}'), '{q1,q2,q3}', '{k1,k2}')) > 0 AS from_attention_weights;
SELECT heatmap_svg('{{1}}', ARRAY[E'<script>alert(1)</script>\u0001'], ARRAY['שלום & مرحبا']) ~ '&lt;script&gt;alert\(1\)&lt;/script&gt;' AS escaped;
SELECT xml_is_well_formed_document(heatmap_svg('{{0.5,0.25},{0,1}}', ARRAY['<', '&amp;'], ARRAY['שלום', E'\t"'], E'\'title\'')) AS well_formed;
-- U+FFFE and U+FFFF are valid text but not XML characters: U+FFFD instead
SELECT xml_is_well_formed_document(heatmap_svg('{{1}}', ARRAY[E'a\uFFFEb'], ARRAY[E'\uFFFF'])) AS noncharacters_replaced;
-- attention_svg: one layer of attention_map() as a heatmap
SELECT import_model('multi30k_de_en') > 0 AS imported;
SELECT xml_is_well_formed_document(attention_svg('Ein Mann fährt Fahrrad.', 'multi30k_de_en')) AS cross_well_formed;
SELECT xml_is_well_formed_document(attention_svg('Ein Mann fährt Fahrrad.', 'multi30k_de_en', 'decoder', 1, 2)) AS decoder_head;
SELECT attention_svg('Ein Mann fährt Fahrrad.', 'multi30k_de_en', 'encoder') ~ 'encoder attention, layer 3 of 3, mean of the heads' AS titled;
SELECT attention_svg(NULL, 'multi30k_de_en') IS NULL AS null_input;
SELECT attention_svg('x', 'multi30k_de_en', 'sideways');
SELECT attention_svg('x', 'multi30k_de_en', 'cross', 0);
SELECT attention_svg('x', 'multi30k_de_en', 'cross', 1, 5);
\set VERBOSITY terse
SELECT attention_svg('x', 'no_such_model');
\set VERBOSITY default
SELECT drop_model('multi30k_de_en');
