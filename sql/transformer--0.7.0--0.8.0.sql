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
