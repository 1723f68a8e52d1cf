/* transformer--0.6.0--0.7.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION transformer UPDATE TO '0.7.0'" to load this file. \quit

ALTER TABLE transformer_models ADD COLUMN segment_tokens integer CHECK (segment_tokens > 0);
COMMENT ON COLUMN transformer_models.segment_tokens IS
'the most tokens of a segment the model translates reliably (measure_segment_length()); longer sentences are cut at clause boundaries first; NULL: its positions';

-- three more options: the old signatures go, so that named calls stay unambiguous
DROP FUNCTION translate(text, text, integer, integer, boolean, double precision, integer, double precision, integer, integer, text, text);
DROP FUNCTION translate(text[], text, integer, integer, boolean, double precision, integer, double precision, integer, integer, text, text);

-- Text as people write it (since 0.7.0): markup, verbatim spans and
-- splitting are options of translate(); a model's reliable segment length.

CREATE FUNCTION translate(input text, model text, beam_size integer DEFAULT NULL, max_length integer DEFAULT NULL,
                          early_stopping boolean DEFAULT NULL, length_penalty double precision DEFAULT NULL,
                          no_repeat_ngram_size integer DEFAULT NULL, repetition_penalty double precision DEFAULT NULL,
                          min_length integer DEFAULT NULL, max_new_tokens integer DEFAULT NULL,
                          source_lang text DEFAULT NULL, target_lang text DEFAULT NULL,
                          format text DEFAULT 'text', keep text[] DEFAULT NULL, split boolean DEFAULT true)
RETURNS text
AS 'MODULE_PATHNAME', 'translate_text'
LANGUAGE C STABLE PARALLEL SAFE
COST 100000;

COMMENT ON FUNCTION translate(text, text, integer, integer, boolean, double precision, integer, double precision, integer, integer, text, text, text, text[], boolean) IS
'translates input with a model as Hugging Face''s generate() does: greedy when beam_size is 1, beam search otherwise; every NULL option takes the model''s generation config (generation_config.json, else config.json); source_lang and target_lang pick the languages of a multilingual model (see model_languages()); format text, html or xml (markup kept, text translated); keep: the kinds of spans kept verbatim (url, email, number, placeholder, format, mention, hashtag, code; NULL: all); split false: one segment, not sentences; NULL input gives NULL';

CREATE FUNCTION translate(inputs text[], model text, beam_size integer DEFAULT NULL, max_length integer DEFAULT NULL,
                          early_stopping boolean DEFAULT NULL, length_penalty double precision DEFAULT NULL,
                          no_repeat_ngram_size integer DEFAULT NULL, repetition_penalty double precision DEFAULT NULL,
                          min_length integer DEFAULT NULL, max_new_tokens integer DEFAULT NULL,
                          source_lang text DEFAULT NULL, target_lang text DEFAULT NULL,
                          format text DEFAULT 'text', keep text[] DEFAULT NULL, split boolean DEFAULT true)
RETURNS text[]
AS 'MODULE_PATHNAME', 'translate_batch'
LANGUAGE C STABLE PARALLEL SAFE
COST 100000;

COMMENT ON FUNCTION translate(text[], text, integer, integer, boolean, double precision, integer, double precision, integer, integer, text, text, text, text[], boolean) IS
'translates each element of inputs, as the one-row form would; NULL elements stay NULL';

CREATE FUNCTION set_model_segment_length(model text, tokens integer)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  IF model IS NULL THEN
    RAISE EXCEPTION 'model must not be null' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF tokens IS NOT NULL AND (tokens < 4 OR tokens > 100000) THEN
    RAISE EXCEPTION 'segment length % is out of range', tokens USING ERRCODE = 'invalid_parameter_value',
      HINT = 'Give 4 tokens or more, or NULL for the model''s positions.';
  END IF;
  UPDATE @extschema@.transformer_models m SET segment_tokens = tokens WHERE m.name = model;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'model "%" does not exist', model USING ERRCODE = 'undefined_object';
  END IF;
END
$$;

COMMENT ON FUNCTION set_model_segment_length(text, integer) IS
'sets the most tokens a segment may have before translate() cuts it (at clause boundaries first); NULL: the model''s positions';

CREATE FUNCTION measure_segment_length(model text, sentences text[], threshold double precision DEFAULT 0.9)
RETURNS integer
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
-- Runs of k consecutive sentences with their final punctuation taken out
-- are translated as one segment and their words counted against the words
-- of the sentences translated one by one.  The segment length is where the
-- share of words kept crosses threshold, between the mean token counts of
-- the longest runs that keep enough (and so do all shorter ones) and the
-- next; it is stored with the model and returned.
DECLARE
  tok text;
  alone double precision[];
  k integer;
  kept double precision;
  tokens double precision;
  last_kept double precision := 1;
  last_tokens double precision;
  best integer;
  n integer := coalesce(array_length(sentences, 1), 0);
BEGIN
  IF n < 8 THEN
    RAISE EXCEPTION 'measure_segment_length needs 8 sentences or more' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT m.source_tokenizer INTO tok FROM @extschema@.transformer_models m WHERE m.name = model;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'model "%" does not exist', model USING ERRCODE = 'undefined_object';
  END IF;
  UPDATE @extschema@.transformer_models m SET segment_tokens = NULL WHERE m.name = model;
  SELECT array_agg(coalesce(array_length(regexp_split_to_array(btrim(@extschema@.translate(s, model, split => false)), '\s+'), 1), 0)
                   ORDER BY i)
    INTO alone FROM unnest(sentences) WITH ORDINALITY u(s, i);
  FOREACH k IN ARRAY ARRAY[1, 2, 3, 4, 6, 8, 12, 16] LOOP
    EXIT WHEN k > n;
    WITH runs AS (
      SELECT (i - 1) / k AS r,
             string_agg(regexp_replace(btrim(s), '[.!?]+$', ''), ' ' ORDER BY i) AS src,
             sum(alone[i]) AS words
      FROM unnest(sentences) WITH ORDINALITY u(s, i)
      WHERE i <= n - n % k
      GROUP BY 1),
    t AS (SELECT runs.words,
                 coalesce(array_length(regexp_split_to_array(btrim(@extschema@.translate(src, model, split => false)), '\s+'), 1), 0) AS got,
                 array_length(@extschema@.tokenize(src, tok), 1) AS ntok
          FROM runs)
    SELECT sum(least(t.got, t.words)) / nullif(sum(t.words), 0), avg(t.ntok) INTO kept, tokens FROM t;
    RAISE DEBUG 'runs of % sentences: % tokens, % of the words kept', k, round(tokens), round(kept * 100);
    IF kept IS NULL OR kept < threshold THEN
      -- where the words kept cross the threshold, between the last runs that kept enough and these
      IF kept IS NOT NULL AND last_tokens IS NOT NULL AND tokens > last_tokens THEN
        best := round(last_tokens + (tokens - last_tokens) * (last_kept - threshold) / (last_kept - kept));
      END IF;
      EXIT;
    END IF;
    best := round(tokens);
    last_kept := kept;
    last_tokens := tokens;
  END LOOP;
  UPDATE @extschema@.transformer_models m SET segment_tokens = best WHERE m.name = model;
  RETURN best;
END
$$;

COMMENT ON FUNCTION measure_segment_length(text, text[], double precision) IS
'measures the longest segment a model translates reliably on sample sentences of its own domain (runs of sentences without their final periods, words kept against the sentences one by one), stores it with the model (see set_model_segment_length()) and returns it';
