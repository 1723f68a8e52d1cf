#!/usr/bin/python3
"""attend() and softmax_weighted_sum() over 1M rows vs the same result in plain SQL.

One query vector (d = 64) against a table of 1,000,000 rows of 64-dimensional
keys and values.  Each form runs serially (max_parallel_workers_per_gather = 0)
and with 2 parallel workers, REPS times; the medians and ratios are printed.
The plain-SQL forms are what one writes without the extension: a dot product
over unnest(), the max score in an InitPlan (one pass of its own), exp() weights, and a GROUP BY over
the value positions.  All forms are checked to agree (max abs diff < 1e-5).

Needs a running server (PGHOST etc., e.g. under pg_virtualenv) with the
extension installed.  Usage: bench/aggregates.py [ROWS] [REPS]
"""
import statistics
import subprocess
import sys

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 1000000
REPS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
D = 64


def psql(sql):
    return subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"],
                          input=sql, capture_output=True, text=True, check=True).stdout


SETUP = """
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS transformer;
DROP TABLE IF EXISTS bench_memory;
CREATE TABLE bench_memory (id int, s float8, k real[], v real[]);
INSERT INTO bench_memory
SELECT i, random() * 20 - 10,
       (SELECT array_agg((random() - 0.5)::real) FROM generate_series(1, %(d)d + 0 * i)),
       (SELECT array_agg((random() - 0.5)::real) FROM generate_series(1, %(d)d + 0 * i))
FROM generate_series(1, %(rows)d) i;
VACUUM ANALYZE bench_memory;
SELECT array_agg((random() * 2 - 1)::real) FROM generate_series(1, %(d)d);
"""

# :Q is replaced by the query vector's literal
QUERIES = {
    "attend": "SELECT attend(:Q, k, v) FROM bench_memory",
    # the scores in LATERAL aggregates, so each is computed once per row
    "attend_sql": """
SELECT array_agg(x ORDER BY j) FROM (
  SELECT j, (sum(w.e * val) / sum(w.e))::real AS x
  FROM bench_memory b
  CROSS JOIN LATERAL (
    SELECT exp(sum(qi * ki) / sqrt(%(d)d) - (
             SELECT max(sc.score) FROM bench_memory b2
             CROSS JOIN LATERAL (SELECT sum(qi * ki) / sqrt(%(d)d) AS score FROM unnest(:Q, b2.k) u(qi, ki)) sc)) AS e
    FROM unnest(:Q, b.k) u(qi, ki)) w
  CROSS JOIN LATERAL unnest(b.v) WITH ORDINALITY u(val, j)
  GROUP BY j) t""" % dict(d=D),
    "softmax_weighted_sum": "SELECT softmax_weighted_sum(s, v) FROM bench_memory",
    "softmax_weighted_sum_sql": """
SELECT array_agg(x ORDER BY j) FROM (
  SELECT j, (sum(e * val) / sum(e))::real AS x
  FROM (SELECT exp(s - (SELECT max(s) FROM bench_memory)) AS e, v FROM bench_memory) w,
       unnest(w.v) WITH ORDINALITY u(val, j)
  GROUP BY j) t""",
}

TIMER = """
SET client_min_messages = warning;
CREATE OR REPLACE FUNCTION pg_temp.timings(query text, reps int) RETURNS float8[] LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; ts float8[] := '{}'; r real[];
BEGIN
  FOR i IN 1..reps LOOP
    t0 := clock_timestamp();
    EXECUTE query INTO r;
    ts := ts || extract(epoch FROM clock_timestamp() - t0)::float8;
  END LOOP;
  RETURN ts;
END $$;
"""

SETTINGS = {
    "serial": "SET max_parallel_workers_per_gather = 0;",
    "2 workers": "SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0; "
                 "SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;",
}


def run(name, setting, qvec):
    query = QUERIES[name].replace(":Q", "'%s'::real[]" % qvec)
    q = query.replace("'", "''")
    sql = TIMER + SETTINGS[setting] + """
SELECT (SELECT string_agg(t::text, ',') FROM unnest(pg_temp.timings('%s', %d)) t);
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) %s;
%s;
""" % (q, REPS, query, query)
    lines = psql(sql).strip().splitlines()
    times = [float(t) for t in lines[0].split(",")]
    launched = [l.strip() for l in lines if "Workers Launched" in l]
    result = [float(x) for x in lines[-1].strip("{}").split(",")]
    return statistics.median(times), min(times), max(times), launched, result


def maxdiff(a, b):
    return max(abs(x - y) for x, y in zip(a, b))


if __name__ == "__main__":
    qvec = psql(SETUP % dict(d=D, rows=ROWS)).strip().splitlines()[-1]
    print("aggregates over %d rows, d = %d, %d runs each (median [min, max] seconds)" % (ROWS, D, REPS))
    res = {}
    for name in QUERIES:
        for setting in SETTINGS:
            med, lo, hi, launched, result = run(name, setting, qvec)
            res[name, setting] = med, result
            print("  %-26s %-9s %8.3f [%.3f, %.3f]  %s" % (name, setting, med, lo, hi,
                                                        ", ".join(launched) or "no workers"))
    for base in ("attend", "softmax_weighted_sum"):
        for setting in SETTINGS:
            d = maxdiff(res[base, setting][1], res[base + "_sql", setting][1])
            assert d < 1e-5, "%s and plain SQL disagree by %g" % (base, d)
            print("  %-22s %-9s %6.1fx faster than plain SQL (results agree to %.1e)" % (
                base, setting, res[base + "_sql", setting][0] / res[base, setting][0], d))
        print("  %-22s 2 workers %6.2fx faster than serial (plain SQL: %.2fx)" % (
            base, res[base, "serial"][0] / res[base, "2 workers"][0],
            res[base + "_sql", "serial"][0] / res[base + "_sql", "2 workers"][0]))
    psql("DROP TABLE bench_memory;")
