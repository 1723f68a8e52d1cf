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
