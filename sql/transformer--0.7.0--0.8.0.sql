/* transformer--0.7.0--0.8.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION transformer UPDATE TO '0.8.0'" to load this file. \quit

-- What this server runs (since 0.8.0)

CREATE FUNCTION transformer_version()
RETURNS text
AS 'MODULE_PATHNAME', 'transformer_version'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION transformer_version() IS
'the library''s version, the kernels chosen at run time for this CPU (fp32: avx512, avx2 or portable; int8: avx512vnni, avx2 or portable), OpenBLAS''s configuration and core, and the ICU and libxml2 versions';

-- Per-model statistics in shared memory (since 0.8.0)

CREATE FUNCTION transformer_model_stats(OUT model text, OUT calls bigint, OUT sentences bigint, OUT tokens_in bigint,
                                        OUT tokens_out bigint, OUT total_time double precision,
                                        OUT mean_time double precision, OUT cache_hits bigint, OUT cache_misses bigint,
                                        OUT stats_since timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'transformer_model_stats'
LANGUAGE C VOLATILE STRICT PARALLEL SAFE
ROWS 10;

COMMENT ON FUNCTION transformer_model_stats() IS
'per-model statistics of this database, kept in shared memory (needs shared_preload_libraries = ''transformer''): calls of translate() and jobs'' batches, sentences, source and generated tokens, total and mean time in milliseconds, backends'' model cache hits and misses, since when; read them through the view transformer_stat_models';

CREATE VIEW transformer_stat_models AS SELECT * FROM transformer_model_stats();
GRANT SELECT ON transformer_stat_models TO PUBLIC;

COMMENT ON VIEW transformer_stat_models IS
'per-model statistics of this database, as pg_stat_statements keeps per-statement ones (needs shared_preload_libraries = ''transformer''); transformer_stat_reset() clears them';

CREATE FUNCTION transformer_stat_reset(model text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'transformer_stat_reset'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION transformer_stat_reset(text) IS
'clears the statistics of one model of this database, or of all its models (NULL)';

REVOKE ALL ON FUNCTION transformer_stat_reset(text) FROM PUBLIC;
