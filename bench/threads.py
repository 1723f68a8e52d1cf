#!/usr/bin/python3
"""Threads for one call (transformer.threads): one long document, 1, 2 and
all cores.

A document of N Multi30k test 2016 German sentences (40 by default) joined
by spaces is translated with translate(doc, model, 4) (beam 4: the
sentences are decoded together, as one batch), by the bundled model in fp32
and int8 (quantize_model) and, when given, a transformer-base-shaped model
directory (bench/ctranslate2.py makes one with random weights), with
transformer.threads = 1, 2, ... up to the CPUs.  Each time is the median of
--reps runs; every output must equal the one-thread output, byte for byte.

    pg_virtualenv -t bench/threads.py [-n N] [--reps R] [--base DIR]

Needs python3-psycopg2 and a server (PGHOST etc.).
"""
import argparse
import gzip
import os
import platform
import statistics
import time

import psycopg2

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")


def cpu():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=40)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--base", default=None, help="a transformer-base model directory (import_model(name, dir))")
    args = ap.parse_args()
    sents = [l.strip() for l in gzip.open(os.path.join(DATA, "multi30k", "test_2016_flickr.de.gz"), "rt")][: args.n]
    doc = " ".join(sents)
    ncpu = os.cpu_count() or 1
    conn = psycopg2.connect(dbname=os.environ.get("PGDATABASE", "postgres"))
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("CREATE EXTENSION IF NOT EXISTS transformer")
    cur.execute("SET client_min_messages = warning")
    cur.execute("SELECT transformer_version()")
    print("machine: %s, %d CPUs; %s" % (cpu(), ncpu, cur.fetchone()[0]))
    cur.execute("SELECT import_model('multi30k_de_en') WHERE NOT EXISTS "
                "(SELECT FROM transformer_models WHERE name = 'multi30k_de_en')")
    cur.execute("SELECT quantize_model('multi30k_de_en', 'multi30k_de_en_i8') WHERE NOT EXISTS "
                "(SELECT FROM transformer_models WHERE name = 'multi30k_de_en_i8')")
    models = [("bundled", "multi30k_de_en"), ("bundled", "multi30k_de_en_i8")]
    if args.base:
        cur.execute("SELECT import_model('bench_base', %s) WHERE NOT EXISTS "
                    "(SELECT FROM transformer_models WHERE name = 'bench_base')", (args.base,))
        cur.execute("SELECT quantize_model('bench_base', 'bench_base_i8') WHERE NOT EXISTS "
                    "(SELECT FROM transformer_models WHERE name = 'bench_base_i8')")
        models += [("base", "bench_base"), ("base", "bench_base_i8")]
    cur.execute("SET transformer.max_threads = %d" % max(ncpu, 2))
    counts = sorted({1, 2, ncpu})
    print("document: %d sentences, %d characters; translate(doc, model, 4); median of %d runs"
          % (len(sents), len(doc), args.reps))
    print("\n| model | precision | " + " | ".join("%d thread%s s" % (t, "" if t == 1 else "s") for t in counts)
          + " | " + " | ".join("speed-up %d" % t for t in counts[1:]) + " | same output |")
    print("|---|---|" + "---|" * (2 * len(counts)))
    for label, model in models:
        secs, outs = {}, {}
        cur.execute("SELECT translate('Ein Hund.', %s)", (model,))      # load
        for t in counts:
            cur.execute("SET transformer.threads = %d" % t)
            ts = []
            for _ in range(args.reps):
                t0 = time.perf_counter()
                cur.execute("SELECT translate(%s, %s, 4)", (doc, model))
                ts.append(time.perf_counter() - t0)
                outs.setdefault(t, cur.fetchone()[0])
            secs[t] = statistics.median(ts)
        same = all(outs[t] == outs[1] for t in counts)
        print("| %s | %s | %s | %s | %s |" % (
            label, "int8" if model.endswith("_i8") else "fp32", " | ".join("%.2f" % secs[t] for t in counts),
            " | ".join("%.2fx" % (secs[1] / secs[t]) for t in counts[1:]), "yes" if same else "**NO**"))
    cur.execute("RESET transformer.threads")


if __name__ == "__main__":
    main()
