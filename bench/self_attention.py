#!/usr/bin/python3
"""self_attention at n = m = 512, d = 64: SQL and the C core vs PyTorch.

All three run on the same machine in the same run, single-threaded
(torch.set_num_threads(1); transformer.threads = 1), and each reports
the median of REPS calls.  The SQL figure includes PostgreSQL's array
handling (3 × 128 KB in, 128 KB out); the core figure is the kernel alone.

Needs a running server (PGHOST etc., e.g. under pg_virtualenv) with the
extension installed, and make bench.  Usage: bench/self_attention.py [REPS]
"""
import os
import statistics
import subprocess
import sys
import time

import torch

N = M = 512
D = 64
REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 50
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def torch_median():
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.rand(n, D, generator=g) - 0.5 for n in (N, M, M))
    times = []
    with torch.inference_mode():
        for _ in range(REPS + 3):
            t0 = time.perf_counter()
            torch.softmax(q @ k.T / D ** 0.5, dim=-1) @ v
            times.append(time.perf_counter() - t0)
    return statistics.median(times[3:])


SQL = """
\\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS transformer;
SET transformer.threads = 1;
CREATE TEMP TABLE inputs AS SELECT
  (SELECT array_agg(r ORDER BY i) FROM (SELECT i, array_agg((random() - 0.5)::real) r FROM generate_series(1, %(n)d) i, generate_series(1, %(d)d) j GROUP BY i) t) AS q,
  (SELECT array_agg(r ORDER BY i) FROM (SELECT i, array_agg((random() - 0.5)::real) r FROM generate_series(1, %(m)d) i, generate_series(1, %(d)d) j GROUP BY i) t) AS k,
  (SELECT array_agg(r ORDER BY i) FROM (SELECT i, array_agg((random() - 0.5)::real) r FROM generate_series(1, %(m)d) i, generate_series(1, %(d)d) j GROUP BY i) t) AS v;
CREATE FUNCTION pg_temp.timings(reps int) RETURNS float8[] LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; ts float8[] := '{}'; r real[];
BEGIN
  FOR i IN 1..reps + 3 LOOP
    t0 := clock_timestamp();
    SELECT self_attention(q, k, v) INTO r FROM inputs;
    ts := ts || extract(epoch FROM clock_timestamp() - t0)::float8;
  END LOOP;
  RETURN ts[4:];
END $$;
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY t) FROM unnest(pg_temp.timings(%(reps)d)) t;
"""


def sql_median():
    out = subprocess.run(["psql", "-X", "-q", "-A", "-t"],
                         input=SQL % dict(n=N, m=M, d=D, reps=REPS),
                         capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1])


def core_median():
    out = subprocess.run([os.path.join(ROOT, "bench", "bench_attention"),
                          str(N), str(M), str(D), str(REPS)],
                         capture_output=True, text=True, check=True).stdout
    return float(out.strip())


if __name__ == "__main__":
    t_torch = torch_median()
    t_sql = sql_median()
    t_core = core_median()
    print("self_attention n=m=%d d=%d, median of %d calls, 1 thread" % (N, D, REPS))
    print("  PyTorch softmax(QK^T/sqrt(d))V  %8.3f ms" % (t_torch * 1e3))
    print("  core tf_attention (C)           %8.3f ms   %.2fx PyTorch's speed" % (t_core * 1e3, t_torch / t_core))
    print("  SQL self_attention()            %8.3f ms   %.2fx PyTorch's speed" % (t_sql * 1e3, t_torch / t_sql))
