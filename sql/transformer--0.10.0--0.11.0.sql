/* transformer--0.10.0--0.11.0.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION transformer UPDATE TO '0.11.0'" to load this file. \quit

-- 0.11.0 changes no table or function: transformer.compute_type = auto (the
-- new default) computes embed() in int8, and int8 products run on AMX
-- where the CPU has it, which transformer_version() names.
COMMENT ON FUNCTION transformer_version() IS
'the library''s version, the kernels chosen at run time for this CPU (fp32: avx512, avx2 or portable; int8: amx, avx512vnni, avx2 or portable), OpenBLAS''s configuration and core, and the ICU and libxml2 versions';
