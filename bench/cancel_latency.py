#!/usr/bin/python3
"""How soon translate() stops when cancelled (issue 17).

transformer-base (random weights: every sentence runs to max_length)
translates a document of the 5 longest Multi30k test sentences with beam 8;
it runs for seconds.  50 times, after a random 0.2-1.0 s, another
connection calls pg_cancel_backend(); the time from that call until the
query has returned its error is the latency.  Then 50 times with
statement_timeout set to a random 200-1000 ms: the latency is the query's
time past the timeout.  p50 and p99 of each; target p99 <= 100 ms.

Usage: pg_virtualenv bench/cancel_latency.py [-n N]
"""
import argparse
import random
import subprocess
import time

import benchlib as bl


class Psql:
    """A psql session that goes on after errors; each command's end is marked."""

    def __init__(self):
        self.p = subprocess.Popen(["psql", "-X", "-q", "-A", "-t"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)

    def send(self, sql):
        self.p.stdin.write(sql + "\n\\echo __end__\n")
        self.p.stdin.flush()

    def wait(self):
        out = []
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("psql exited: " + "".join(out))
            if line.rstrip("\n") == "__end__":
                return "".join(out)
            out.append(line)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=50)
    args = ap.parse_args()
    directory, _ = bl.make_base_model("F32")
    bl.psql("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS transformer;"
            "SELECT drop_model('base_random'); SELECT import_model('base_random', %s);" % bl.quote(directory))
    doc = " ".join(sorted(bl.sentences("en", 1000), key=len)[-5:])
    query = "SELECT length(translate(%s, 'base_random', 8));" % bl.quote(doc)
    s = Psql()
    s.send("SELECT pg_backend_pid();")
    pid = s.wait().strip()
    s.send("SELECT length(translate('a', 'base_random', 1));")     # loaded
    s.wait()
    t0 = time.perf_counter()
    s.send("SET statement_timeout = 0; " + query)
    full = s.wait()
    uncancelled = time.perf_counter() - t0
    random.seed(17)
    canceller = Psql()
    cancel = []
    for _ in range(args.n):
        s.send(query)
        time.sleep(random.uniform(0.2, 1.0))
        c0 = time.perf_counter()
        canceller.send("SELECT pg_cancel_backend(%s);" % pid)
        out = s.wait()
        canceller.wait()
        cancel.append(time.perf_counter() - c0)
        assert "canceling statement due to user request" in out, out
    timeout = []
    for _ in range(args.n):
        ms = random.randint(200, 1000)
        s.send("SET statement_timeout = %d;" % ms)
        s.wait()
        t0 = time.perf_counter()
        s.send(query)
        out = s.wait()
        timeout.append(time.perf_counter() - t0 - ms / 1000.0)
        assert "canceling statement due to statement timeout" in out, out
    s.send("RESET statement_timeout;")
    s.wait()
    print("translate() of a %d-character document, transformer-base, beam 8: %.1f s uncancelled (%s characters out)"
          % (len(doc), uncancelled, full.strip()))
    print("  pg_cancel_backend, %d tries: p50 %.1f ms, p99 %.1f ms, max %.1f ms (target p99 <= 100 ms)"
          % (len(cancel), pct(cancel, 50) * 1e3, pct(cancel, 99) * 1e3, max(cancel) * 1e3))
    print("  statement_timeout, %d tries: past the timeout p50 %.1f ms, p99 %.1f ms, max %.1f ms"
          % (len(timeout), pct(timeout, 50) * 1e3, pct(timeout, 99) * 1e3, max(timeout) * 1e3))


if __name__ == "__main__":
    main()
