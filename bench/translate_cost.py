#!/usr/bin/python3
"""What translate() costs by input size (issue 23: "a 1 MB row took over
60 s with no way to know in advance").

Documents of Multi30k test_2016 German sentences (../shared/data), joined
by spaces, of about 1, 10 and 100 kB, translated by the bundled model in
one translate() call each, beam 4 (its default) and greedy; the time and
the peak memory of the backend (VmHWM over VmRSS before the call, a fresh
connection each).  Seconds per kB is what docs/security.md ("Limits: time and memory by input size") quotes.

Usage: pg_virtualenv bench/translate_cost.py [--sizes 1,10,100]   (root or postgres: reads /proc)
"""
import argparse
import gzip
import os
import subprocess
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DB = "transformer_cost"


def psql(sql):
    return subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", DB, "-c", sql],
                          check=True, capture_output=True, text=True).stdout.strip()


def status_kb(pid, key):
    for line in open("/proc/%d/status" % pid):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(key)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,10,100")
    args = ap.parse_args()
    lines = gzip.open(os.path.join(ROOT, "..", "shared", "data", "multi30k", "test_2016_flickr.de.gz"),
                      "rt", encoding="utf-8").read().split("\n")
    lines = [l.strip() for l in lines if l.strip()]
    subprocess.run(["dropdb", "--if-exists", DB], check=True, capture_output=True)
    subprocess.run(["createdb", DB], check=True, capture_output=True)
    psql("SET client_min_messages = warning; CREATE EXTENSION transformer; SELECT import_model('multi30k_de_en')")
    print("| input | sentences | beam | seconds | ms per kB | peak MB |")
    print("|---|---|---|---|---|---|")
    for kb in [int(x) for x in args.sizes.split(",")]:
        doc, n = "", 0
        while len(doc.encode()) < kb * 1024:
            doc += lines[n % len(lines)] + " "
            n += 1
        doc = doc.strip()
        for beam in (4, 1):
            p = subprocess.Popen(["psql", "-X", "-q", "-A", "-t", "-d", DB], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
            sql = ("SELECT pg_backend_pid();\nSELECT translate('warm up', 'multi30k_de_en');\n"
                   "\\echo __ready__\n")
            p.stdin.write(sql)
            p.stdin.flush()
            pid = int(p.stdout.readline())
            while p.stdout.readline().strip() != "__ready__":
                pass
            rss = status_kb(pid, "VmRSS")
            with open("/proc/%d/clear_refs" % pid, "w") as f:
                f.write("5")
            t0 = time.monotonic()
            p.stdin.write("SELECT length(translate($doc$%s$doc$, 'multi30k_de_en', beam_size => %d));\n\\echo __done__\n"
                          % (doc, beam))
            p.stdin.flush()
            while p.stdout.readline().strip() != "__done__":
                pass
            dt = time.monotonic() - t0
            hwm = status_kb(pid, "VmHWM")
            p.stdin.close()
            p.wait()
            print("| %d kB | %d | %d | %.2f | %.0f | %.1f |" % (kb, n, beam, dt, dt * 1000 / (len(doc.encode()) / 1024.0),
                                                          (hwm - rss) / 1024.0))
    subprocess.run(["dropdb", "--if-exists", DB], check=True, capture_output=True)


if __name__ == "__main__":
    main()
