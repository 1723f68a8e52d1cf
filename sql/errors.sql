-- bad input: one edge case per line, each a clear ERROR
-- (first: a setting made before the library loads is kept when it loads)
SET transformer.compute_type = 'bf16';
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS transformer;
RESET client_min_messages;
SHOW transformer.compute_type;
RESET transformer.compute_type;
\set SHOW_CONTEXT never

-- not 2-D
SELECT self_attention('{1,2}', '{{1,2}}', '{{1}}');
SELECT self_attention('{{1,2}}', '{{{1,2}}}', '{{1}}');
SELECT attention_weights('{{1,2}}', '{1,2}');
SELECT multihead_attention('{{1,2}}', '{{1,2}}', '{3}', 1);
-- empty
SELECT self_attention('{}', '{{1,2}}', '{{1}}');
SELECT self_attention('{{1,2}}', '{{1,2}}', '{}');
-- mismatched dimensions
SELECT self_attention('{{1,2}}', '{{1,2,3}}', '{{1}}');
SELECT self_attention('{{1,2}}', '{{1,2},{3,4}}', '{{1}}');
SELECT attention_weights('{{1,2,3}}', '{{1,2}}');
SELECT multihead_attention('{{1,2}}', '{{1,2},{3,4}}', '{{1}}', 1);
-- NULL elements
SELECT self_attention('{{1,NULL}}', '{{1,2}}', '{{1}}');
SELECT self_attention('{{1,2}}', '{{1,2}}', '{{NULL}}');
-- NaN and infinity
SELECT self_attention('{{1,NaN}}', '{{1,2}}', '{{1}}');
SELECT self_attention('{{1,2}}', '{{Infinity,2}}', '{{1}}');
SELECT attention_weights('{{1,2}}', '{{1,-Infinity}}');
SELECT self_attention('{{1,2}}', '{{1,2}}', '{{NaN}}');
-- heads
SELECT multihead_attention('{{1,2,3}}', '{{1,2,3}}', '{{1,2,3}}', 2);
SELECT multihead_attention('{{1,2}}', '{{1,2}}', '{{1,2,3}}', 2);
SELECT multihead_attention('{{1,2}}', '{{1,2}}', '{{1,2}}', 0);
SELECT multihead_attention('{{1,2}}', '{{1,2}}', '{{1,2}}', -4);
SELECT multihead_attention('{{1,2}}', '{{1,2}}', '{{1,2}}', 3);
-- absurd sizes are refused before allocating
SELECT attention_weights(array_fill(1::real, ARRAY[100000,1]), array_fill(1::real, ARRAY[100000,1]));
SELECT attention_weights(array_fill(1::real, ARRAY[70000,1]), array_fill(1::real, ARRAY[70000,1]));
-- aggregates
SELECT softmax_weighted_sum(s, v) FROM (VALUES (1::float8, '{1,2}'::real[]), (2, '{1,2,3}')) t(s, v);
SELECT softmax_weighted_sum('NaN', '{1}');
SELECT softmax_weighted_sum('Infinity', '{1}');
SELECT softmax_weighted_sum('-Infinity', '{1}');
SELECT softmax_weighted_sum(1, '{}');
SELECT softmax_weighted_sum(1, '{{1,2}}');
SELECT softmax_weighted_sum(1, '{1,NULL}');
SELECT softmax_weighted_sum(1, '{1,NaN}');
SELECT attend('{1,2}', '{1,2,3}', '{1}');
SELECT attend('{1,2}', '{1,2}', '{NaN}');
SELECT attend('{}', '{}', '{1}');
SELECT attend('{{1,2}}', '{1,2}', '{1}');
SELECT attend(q, k, v) FROM (VALUES ('{1}'::real[], '{1}'::real[], '{1,2}'::real[]), ('{1}', '{1}', '{1}')) t(q, k, v);
-- support functions refuse a malformed state
SELECT softmax_weighted_sum_final('{1,2}');
SELECT softmax_weighted_sum_final('{{1,2,3,4}}');
SELECT softmax_weighted_sum_accum('{1,NULL,3,4}', 1, '{1}');
SELECT softmax_weighted_sum_combine('{1,0,1,5}', '{1,0,1,5,6}');
-- settings
SET transformer.threads = 0;
SET transformer.threads = 65;
SET transformer.max_threads = 0;
SET transformer.decode_workspace = -1;
SET transformer.no_such_setting = 1;
