-- self_attention, attention_weights and multihead_attention: behaviour
CREATE EXTENSION transformer;
-- 4 significant digits: stable across BLAS kernels
SET extra_float_digits = -2;

-- one query, one key: the value comes back unchanged
SELECT self_attention('{{1,2}}', '{{3,4}}', '{{5,6,7}}');
-- orthogonal one-hot keys: weights are softmax of [1/√2, 0]
SELECT attention_weights('{{1,0}}', '{{1,0},{0,1}}');
SELECT self_attention('{{1,0}}', '{{1,0},{0,1}}', '{{1,2},{3,4}}');
-- identical keys: uniform weights, the mean of the values
SELECT self_attention('{{5,5}}', '{{1,1},{1,1},{1,1},{1,1}}', '{{0},{4},{8},{12}}');
-- n queries x m keys: result is n x d_v, weights n x m
SELECT array_dims(self_attention(array_fill(0.5::real, ARRAY[3,4]), array_fill(1::real, ARRAY[5,4]), array_fill(2::real, ARRAY[5,7])));
SELECT array_dims(attention_weights(array_fill(0.5::real, ARRAY[3,4]), array_fill(1::real, ARRAY[5,4])));
-- causal: query i sees keys 0..i (top-left aligned when n <> m)
SELECT attention_weights('{{0},{0},{0}}', '{{0},{0},{0}}', causal => true);
SELECT attention_weights('{{0},{0}}', '{{0},{0},{0}}', true);
SELECT attention_weights('{{0},{0},{0}}', '{{0},{0}}', true);
SELECT self_attention('{{0},{0},{0}}', '{{0},{0},{0}}', '{{3},{6},{9}}', true);
-- large inputs are computed in blocks of query rows; the causal mask follows
-- them (equal keys, value j at key j: row i is the mean of 0..i, i.e. i/2,
-- to float precision)
SELECT bool_and(abs(o[1] - (i - 1) / 2.0) < 1e-5 * i) AS blocked_causal_ok, count(*) AS rows FROM unnest(
  self_attention(array_fill(0::real, ARRAY[1500,1]), array_fill(0::real, ARRAY[1500,1]),
                 (SELECT array_agg(ARRAY[j::real] ORDER BY j) FROM generate_series(0, 1499) j), true))
  WITH ORDINALITY AS u(x, i), LATERAL (SELECT ARRAY[x]) AS t(o);
-- causal => false is the default
SELECT self_attention('{{0},{0}}', '{{0},{0}}', '{{2},{4}}') = self_attention('{{0},{0}}', '{{0},{0}}', '{{2},{4}}', false) AS same;
-- rows of the weights sum to 1, also for sharp softmaxes
SELECT bool_and(abs(s - 1) < 1e-6) AS rows_sum_to_1 FROM (
  SELECT sum(w) AS s FROM unnest(attention_weights('{{100,-3},{0.5,40},{-80,2}}', '{{1,2},{-1,0.5},{3,-2},{0,0}}')) WITH ORDINALITY AS u(w, i)
  GROUP BY (i - 1) / 4) t;
-- huge scores do not overflow: softmax is max-subtracted
SELECT attention_weights('{{1e18}}', '{{1e18},{-1e18}}');
-- integer and numeric arrays are cast to real[]
SELECT self_attention(ARRAY[[1,0]], ARRAY[[1,0],[0,1]], ARRAY[[1,2],[3,4]]) = self_attention('{{1,0}}', '{{1,0},{0,1}}', '{{1,2},{3,4}}') AS cast_ok;
-- lower bounds other than 1 are accepted; the result starts at 1
SELECT self_attention('[0:0][5:6]={{1,0}}', '{{1,0},{0,1}}', '{{1,2},{3,4}}');
-- multihead: one head equals self_attention
SELECT multihead_attention('{{1,0,2}}', '{{1,0,1},{0,1,0}}', '{{1,2,3},{4,5,6}}', 1) = self_attention('{{1,0,2}}', '{{1,0,1},{0,1,0}}', '{{1,2,3},{4,5,6}}') AS one_head;
-- two heads attend over their own column blocks
SELECT multihead_attention('{{1,0,0,1}}', '{{1,0,0,1},{0,1,1,0}}', '{{1,2,3,4},{5,6,7,8}}', 2);
SELECT self_attention('{{1,0}}', '{{1,0},{0,1}}', '{{1,2},{5,6}}') AS head1, self_attention('{{0,1}}', '{{0,1},{1,0}}', '{{3,4},{7,8}}') AS head2;
-- as many heads as columns
SELECT multihead_attention('{{1,2}}', '{{1,2},{3,4}}', '{{1,1},{2,2}}', 2, true);
-- NULL arguments give NULL (the functions are strict)
SELECT self_attention(NULL, '{{1}}', '{{1}}') IS NULL AS q_null;
SELECT self_attention('{{1}}', '{{1}}', '{{1}}', NULL) IS NULL AS causal_null;
SELECT attention_weights('{{1}}', NULL) IS NULL AS k_null;
SELECT multihead_attention('{{1}}', '{{1}}', '{{1}}', NULL) IS NULL AS heads_null;
-- volatility and parallel safety as declared
SELECT proname, provolatile, proisstrict, proparallel FROM pg_proc
WHERE proname IN ('self_attention', 'attention_weights', 'multihead_attention') ORDER BY 1;
-- a cancel or statement_timeout stops a long computation
SET statement_timeout = '200ms';
SELECT self_attention(array_fill(1::real, ARRAY[100000,1]), array_fill(1::real, ARRAY[100000,1]), array_fill(1::real, ARRAY[100000,1]));
RESET statement_timeout;
