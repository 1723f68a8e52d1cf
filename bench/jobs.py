#!/usr/bin/python3
"""Background translation jobs against a serial UPDATE (issue 25).

On N rows of Multi30k train German (30,000 by default), with the bundled
model and its int8 copy, in one run on one server:
  - UPDATE docs SET en = translate(de, model): one statement, one backend;
  - translate_column(..., workers => 1), then workers => 2 (keep_in_sync off);
rows/s, and the time until the first 1,000 rows are visible to others (an
UPDATE shows nothing before it commits).  Every job's output is compared
with the UPDATE's.

    pg_virtualenv bench/jobs.py [rows] [batch_size ...]

Needs python3-psycopg2 and a server (PGHOST etc.); max_worker_processes
of at least 3.  Settings: the model's (beam 4), transformer.threads 1.
"""
import gzip
import io
import os
import platform
import sys
import time

import psycopg2

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 30000
BATCHES = [int(b) for b in sys.argv[2:]] or [None]
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")
DB = "transformer_bench_jobs"


def connect(db):
    c = psycopg2.connect(dbname=db)
    c.autocommit = True
    return c


def one(c, sql, *args):
    with c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchone()[0] if cur.description else None


def cpu():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def run_job(c, model, workers, batch):
    one(c, "UPDATE docs SET en = NULL")
    one(c, "VACUUM docs")
    t0 = time.time()
    job = one(c, "SELECT translate_column('docs', 'de', 'en', %s, workers => %s, keep_in_sync => false, batch_size => %s)",
              model, workers, batch)
    first = None
    while True:
        done, state = None, None
        with c.cursor() as cur:
            cur.execute("SELECT rows_done, state FROM transformer_jobs WHERE id = %s", (job,))
            done, state = cur.fetchone()
        if first is None and done >= min(1000, ROWS):
            first = time.time() - t0
        if state in ("done", "failed", "cancelled"):
            break
        time.sleep(0.2)
    total = time.time() - t0
    if state != "done":
        raise SystemExit("job %s ended %s: %s" % (job, state, one(c, "SELECT last_error FROM transformer_jobs WHERE id = %s", job)))
    differ = one(c, "SELECT count(*) FROM docs WHERE en IS DISTINCT FROM en_update")
    failed = one(c, "SELECT rows_failed FROM transformer_jobs WHERE id = %s", job)
    one(c, "SELECT cancel_job(%s)", job)
    return total, first, differ, failed


def main():
    admin = connect("postgres")
    one(admin, "DROP DATABASE IF EXISTS " + DB)
    one(admin, "CREATE DATABASE " + DB)
    c = connect(DB)
    one(c, "SET client_min_messages = warning")
    one(c, "CREATE EXTENSION transformer")
    one(c, "SELECT import_model('multi30k_de_en')")
    one(c, "SELECT quantize_model('multi30k_de_en', 'multi30k_de_en_int8')")
    one(c, "CREATE TABLE docs (id int PRIMARY KEY, de text NOT NULL, en text, en_update text)")
    with gzip.open(os.path.join(DATA, "multi30k", "train.de.gz"), "rt", encoding="utf-8") as f:
        lines = [l.rstrip("\n") for l in f][:ROWS]
    buf = io.StringIO("".join("%d\t%s\n" % (i + 1, l.replace("\\", "\\\\").replace("\t", " ")) for i, l in enumerate(lines)))
    with c.cursor() as cur:
        cur.copy_from(buf, "docs", columns=("id", "de"))
    print("%d rows of Multi30k train German; %s, %d cores; PostgreSQL %s; beam 4 (the model's), "
          "transformer.threads 1, max_worker_processes %s"
          % (ROWS, cpu(), os.cpu_count(), one(c, "SHOW server_version"), one(c, "SHOW max_worker_processes")))
    print("%-22s %-24s %9s %9s %14s %8s" % ("model", "method", "seconds", "rows/s", "first 1000 (s)", "x UPDATE"))
    for model in ("multi30k_de_en", "multi30k_de_en_int8"):
        one(c, "UPDATE docs SET en_update = NULL, en = NULL")
        one(c, "VACUUM docs")
        one(c, "SELECT translate('warm up', %s)", model)
        t0 = time.time()
        one(c, "UPDATE docs SET en_update = translate(de, %s)", model)
        serial = time.time() - t0
        print("%-22s %-24s %9.1f %9.1f %14.1f %8s" % (model, "serial UPDATE", serial, ROWS / serial, serial, "1.00"),
              flush=True)
        one_worker = None
        for batch in BATCHES:
            for workers in (1, 2):
                total, first, differ, failed = run_job(c, model, workers, batch)
                if workers == 1:
                    one_worker = total
                label = "job, %d worker%s%s" % (workers, "s" if workers > 1 else "",
                                                 ", batch %d" % batch if batch else "")
                print("%-22s %-24s %9.1f %9.1f %14.1f %8.2f%s" % (
                    model, label, total, ROWS / total, first, serial / total,
                    "" if workers == 1 else "  (%.2fx one worker)" % (one_worker / total)), flush=True)
                if differ or failed:
                    print("  !! %d rows differ from the UPDATE's, %d failed" % (differ, failed))
    c.close()
    one(admin, "DROP DATABASE " + DB)


if __name__ == "__main__":
    main()
