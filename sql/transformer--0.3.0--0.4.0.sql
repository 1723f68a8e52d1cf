/* transformer--0.3.0--0.4.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION transformer UPDATE TO '0.4.0'" to load this file. \quit

-- A random identifier written with each row at import, part of the name of
-- the shared files built from it: xids and ctids repeat after a crash, this
-- never does.  Existing rows get one each.
ALTER TABLE transformer_tokenizers ADD COLUMN file_id uuid NOT NULL DEFAULT pg_catalog.gen_random_uuid();
COMMENT ON COLUMN transformer_tokenizers.file_id IS
'a random identifier of this version of the row, in the names of the shared files built from it';
ALTER TABLE transformer_models ADD COLUMN file_id uuid NOT NULL DEFAULT pg_catalog.gen_random_uuid();
COMMENT ON COLUMN transformer_models.file_id IS
'a random identifier of this version of the row, in the names of the shared files built from it';

-- Only the extension's own triggers invalidate the caches: no role may
-- attach the function to a table of its own and flush every backend's
-- caches at each of its commits.
REVOKE ALL ON FUNCTION transformer_invalidate_cache() FROM PUBLIC;

-- Vocabularies in databases whose encoding cannot hold every piece as jsonb
-- (LATIN1 and SentencePiece's U+2581): the JSON file's UTF-8 bytes.
ALTER TABLE transformer_tokenizers ADD COLUMN vocab_json bytea;
ALTER TABLE transformer_tokenizers ALTER COLUMN vocab_json SET STORAGE EXTERNAL;
COMMENT ON COLUMN transformer_tokenizers.vocab_json IS
'piece -> model id as the UTF-8 bytes of a JSON object, where the database encoding is not UTF8 (vocab is then NULL)';

-- align() in every encoding: the space marker as the pieces show it
CREATE OR REPLACE FUNCTION align(input text, model text)
RETURNS TABLE (source_pos integer, source_word text, target_pos integer, target_word text, weight real)
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
  -- the encoder-decoder attention averaged over the heads, of the
  -- penultimate layer in decoders of 6 layers or more (Garg et al. 2019,
  -- on transformer-base), of the last one in shallower decoders (measured
  -- on the 3-layer bundled model: AER 0.066 against 0.224 for layer 2)
  WITH m AS (
    SELECT a.layer, a.query_pos, a.query_token, a.key_pos, a.key_token, a.weight
    FROM @extschema@.attention_map(input, model) a WHERE a.stack = 'cross'),
  p AS (SELECT m.query_pos, m.query_token, m.key_pos, m.key_token, avg(m.weight) AS w
        FROM m WHERE m.layer = (SELECT CASE WHEN max(m2.layer) >= 6 THEN max(m2.layer) - 1 ELSE max(m2.layer) END FROM m m2)
        GROUP BY 1, 2, 3, 4),
  -- SentencePiece's space marker as the pieces show it: U+2581, or a space
  -- in a database whose encoding lacks it (written so that it parses there)
  mk AS (SELECT CASE WHEN current_setting('server_encoding') IN ('UTF8', 'SQL_ASCII')
                     THEN convert_from('\xe29681'::bytea, 'UTF8') ELSE ' ' END AS marker),
  -- words: a piece that starts with the marker starts a word; EOS is left out
  sp AS (SELECT s.key_pos, s.key_token,
                sum(CASE WHEN s.key_pos = 1 OR starts_with(s.key_token, mk.marker) THEN 1 ELSE 0 END) OVER (ORDER BY s.key_pos) AS word
         FROM (SELECT DISTINCT p.key_pos, p.key_token FROM p WHERE p.key_token <> '</s>') s, mk),
  tp AS (SELECT t.query_pos, t.query_token,
                sum(CASE WHEN t.query_pos = 1 OR starts_with(t.query_token, mk.marker) THEN 1 ELSE 0 END) OVER (ORDER BY t.query_pos) AS word
         FROM (SELECT DISTINCT p.query_pos, p.query_token FROM p WHERE p.query_token <> '</s>') t, mk),
  sw AS (SELECT sp.word, replace(string_agg(sp.key_token, '' ORDER BY sp.key_pos), min(mk.marker), '') AS text FROM sp, mk GROUP BY sp.word),
  tw AS (SELECT tp.word, replace(string_agg(tp.query_token, '' ORDER BY tp.query_pos), min(mk.marker), '') AS text,
                count(*) AS pieces FROM tp, mk GROUP BY tp.word),
  -- a target word's weight on a source word: the mean over its pieces of the sum over the source word's pieces
  ww AS (SELECT tp.word AS t, sp.word AS s, sum(p.w) / max(tw.pieces) AS w
         FROM p JOIN tp USING (query_pos) JOIN sp USING (key_pos) JOIN tw ON tw.word = tp.word
         GROUP BY tp.word, sp.word),
  best AS (SELECT DISTINCT ON (ww.t) ww.t, ww.s, ww.w FROM ww ORDER BY ww.t, ww.w DESC, ww.s)
  SELECT best.s::integer, sw.text, best.t::integer, tw.text, best.w::real
  FROM best JOIN sw ON sw.word = best.s JOIN tw ON tw.word = best.t
  ORDER BY best.t
$$;


-- DROP EXTENSION drops the tables and every model in them: that needs
-- CASCADE, as for any object others depend on
CREATE FUNCTION transformer_guard_drop()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'transformer_guard_drop'
LANGUAGE C;

COMMENT ON FUNCTION transformer_guard_drop() IS
'event trigger: DROP EXTENSION transformer without CASCADE is refused while its tables hold models or tokenizers';

REVOKE ALL ON FUNCTION transformer_guard_drop() FROM PUBLIC;

CREATE EVENT TRIGGER transformer_guard_drop ON ddl_command_start
WHEN TAG IN ('DROP EXTENSION')
EXECUTE FUNCTION transformer_guard_drop();
