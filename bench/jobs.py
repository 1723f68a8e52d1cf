#!/usr/bin/python3
"""Background jobs against a serial UPDATE (issues 25 and 37).

On N rows of Multi30k train German (30,000 by default), with the bundled
model and its int8 copy, in one run on one server:
  - UPDATE docs SET en = translate(de, model): one statement, one backend;
  - translate_column(..., workers => 1), then workers => 2 (keep_in_sync off);
rows/s, and the time until the first 1,000 rows are visible to others (an
UPDATE shows nothing before it commits).  Every job's output is compared
with the UPDATE's.  Then (issue 37):
  - a small table (600 rows): 2 workers against a serial UPDATE, start-up included;
  - the sync triggers' cost: INSERT of 20,000 rows, and an UPDATE of their
    source, with and without a (paused) keep_in_sync job; medians of 3;
  - embed_column() with 1 and 2 workers against UPDATE ... SET v = embed(de).
Without ../shared/data it uses German sentences made from a small grammar.

    pg_virtualenv bench/jobs.py [rows] [batch_size ...]     (JOBS_BENCH_ROUNDS: rounds, 3; JOBS_BENCH_MODELS: fp32 or int8;
                                                             JOBS_BENCH_PARTS: jobs,small,sync,embed)

Needs python3-psycopg2 and a server (PGHOST etc.); max_worker_processes
of at least 3.  Settings: the model's (beam 4), transformer.threads 1.
"""
import gzip
import io
import os
import platform
import statistics
import sys
import time

import psycopg2

ROWS = int(sys.argv[1]) if len(sys.argv) > 1 else 30000
BATCHES = [int(b) for b in sys.argv[2:]] or [None]
REPS = int(os.environ.get("JOBS_BENCH_ROUNDS", "3"))
SYNC_REPS = 9
# JOBS_BENCH_PARTS: jobs,small,sync,embed (the default: all)
PARTS = os.environ.get("JOBS_BENCH_PARTS", "jobs,small,sync,embed").split(",")
# JOBS_BENCH_MODELS: fp32, int8 or both (the default)
MODELS = {"fp32": ["multi30k_de_en"], "int8": ["multi30k_de_en_int8"]}.get(os.environ.get("JOBS_BENCH_MODELS", ""),
                                                                            ["multi30k_de_en", "multi30k_de_en_int8"])
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


def german(n):
    """n German sentences: Multi30k train if ../shared/data has it, else a small grammar's."""
    path = os.path.join(DATA, "multi30k", "train.de.gz")
    if os.path.exists(path):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return [l.rstrip("\n") for _, l in zip(range(n), f)]
    subj = ["Ein Mann", "Eine Frau", "Ein Kind", "Ein Hund", "Zwei Männer", "Eine Gruppe von Menschen", "Ein Junge",
            "Ein Mädchen", "Eine ältere Frau", "Ein Arbeiter"]
    verb = ["steht", "sitzt", "läuft", "spielt", "wartet", "arbeitet", "lacht", "liest ein Buch", "fährt Fahrrad", "schläft"]
    place = ["auf der Straße", "im Park", "am Strand", "vor einem Gebäude", "in einer Küche", "auf einer Bank",
             "im Schnee", "neben einem Auto", "in der Stadt", "auf dem Feld"]
    return ["%s %s %s." % (subj[i % 10], verb[(i // 10) % 10], place[(i // 100) % 10]) + ("" if i < 1000 else " (%d)" % i)
            for i in range(n)]


def run_job(c, model, workers, batch, table="docs"):
    one(c, "UPDATE %s SET en = NULL" % table)
    one(c, "VACUUM %s" % table)
    t0 = time.time()
    job = one(c, "SELECT translate_column(%s, 'de', 'en', %s, workers => %s, keep_in_sync => false, batch_size => %s)",
              table, model, workers, batch)
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
        time.sleep(0.01)
    total = time.time() - t0
    if state != "done":
        raise SystemExit("job %s ended %s: %s" % (job, state, one(c, "SELECT last_error FROM transformer_jobs WHERE id = %s", job)))
    differ = one(c, "SELECT count(*) FROM %s WHERE en IS DISTINCT FROM en_update" % table)
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
    lines = german(max(ROWS, 20000))
    buf = io.StringIO("".join("%d\t%s\n" % (i + 1, l.replace("\\", "\\\\").replace("\t", " ")) for i, l in enumerate(lines)))
    with c.cursor() as cur:
        cur.copy_from(buf, "docs", columns=("id", "de"))
    one(c, "DELETE FROM docs WHERE id > %s", ROWS)
    print("%d rows of Multi30k train German; %s, %d cores; PostgreSQL %s; beam 4 (the model's), "
          "transformer.threads 1, max_worker_processes %s"
          % (ROWS, cpu(), os.cpu_count(), one(c, "SHOW server_version"), one(c, "SHOW max_worker_processes")))
    print("%-22s %-24s %9s %9s %14s %8s   (medians of %d rounds, [min, max] of the ratio)"
          % ("model", "method", "seconds", "rows/s", "first 1000 (s)", "x UPDATE", REPS))
    for model in (MODELS if "jobs" in PARTS else []):
        one(c, "SELECT translate('warm up', %s)", model)
        for batch in BATCHES:
            # rounds of (serial UPDATE, 1 worker, 2 workers), alternating: a shared machine's speed drifts
            times = {"serial": [], 1: [], 2: []}
            firsts = {1: [], 2: []}
            for _ in range(REPS):
                one(c, "UPDATE docs SET en_update = NULL, en = NULL")
                one(c, "VACUUM docs")
                t0 = time.time()
                one(c, "UPDATE docs SET en_update = translate(de, %s)", model)
                times["serial"].append(time.time() - t0)
                for workers in (1, 2):
                    total, first, differ, failed = run_job(c, model, workers, batch)
                    times[workers].append(total)
                    firsts[workers].append(first)
                    if differ or failed:
                        print("  !! %d rows differ from the UPDATE's, %d failed" % (differ, failed))
            serial = statistics.median(times["serial"])
            print("%-22s %-24s %9.1f %9.1f %14.1f %8s" % (model, "serial UPDATE", serial, ROWS / serial, serial, "1.00"),
                  flush=True)
            for workers in (1, 2):
                total = statistics.median(times[workers])
                ratios = [u / j for u, j in zip(times["serial"], times[workers])]
                label = "job, %d worker%s%s" % (workers, "s" if workers > 1 else "", ", batch %d" % batch if batch else "")
                extra = ""
                if workers == 2:
                    per = [a / b for a, b in zip(times[1], times[2])]
                    extra = "  (%.2fx one worker [%.2f, %.2f])" % (statistics.median(per), min(per), max(per))
                print("%-22s %-24s %9.1f %9.1f %14.1f %8.2f [%.2f, %.2f]%s" % (
                    model, label, total, ROWS / total, statistics.median(firsts[workers]), serial / total,
                    min(ratios), max(ratios), extra), flush=True)
    if "small" in PARTS:
        small(c)
    if "sync" in PARTS:
        sync_cost(c, lines)
    if "embed" in PARTS:
        embeddings(c)
    c.close()
    one(admin, "DROP DATABASE " + DB)


def small(c):
    """600 rows: 2 workers against a serial UPDATE, start-up included."""
    one(c, "CREATE TABLE small (id int PRIMARY KEY, de text NOT NULL, en text, en_update text)")
    one(c, "INSERT INTO small (id, de) SELECT id, de FROM docs WHERE id <= 600")
    serials, jobs = [], []
    for _ in range(REPS):
        one(c, "UPDATE small SET en_update = NULL")
        t0 = time.time()
        one(c, "UPDATE small SET en_update = translate(de, 'multi30k_de_en')")
        serials.append(time.time() - t0)
        total, _, differ, failed = run_job(c, "multi30k_de_en", 2, None, "small")
        jobs.append(total)
        if differ or failed:
            print("  !! %d differ, %d failed" % (differ, failed))
    ratios = [a / b for a, b in zip(serials, jobs)]
    print("small table, 600 rows: serial UPDATE %.1f s; job with 2 workers %.1f s (start-up included): %.2fx [%.2f, %.2f]"
          % (statistics.median(serials), statistics.median(jobs), statistics.median(ratios), min(ratios), max(ratios)),
          flush=True)


def timed(c, sql):
    t0 = time.time()
    one(c, sql)
    return time.time() - t0


def sync_cost(c, lines):
    """The sync triggers' cost: 20,000 rows inserted, then their source updated."""
    n = 20000
    one(c, "CREATE TABLE sync (id int PRIMARY KEY, de text NOT NULL, en text)")
    one(c, "CREATE TABLE src (id int, de text)")
    with c.cursor() as cur:
        cur.copy_from(io.StringIO("".join("%d\t%s\n" % (i + 1, l.replace("\\", "\\\\").replace("\t", " "))
                                          for i, l in enumerate(lines[:n]))), "src", columns=("id", "de"))
    res = {}
    for with_job in (False, True) * SYNC_REPS:
        one(c, "TRUNCATE sync")
        one(c, "VACUUM ANALYZE sync")
        job = None
        if with_job:
            job = one(c, "SELECT translate_column('sync', 'de', 'en', 'multi30k_de_en')")
            one(c, "SELECT pause_job(%s)", job)     # queued, not translated: the statements alone are timed
        ins = timed(c, "INSERT INTO sync (id, de) SELECT id, de FROM src")
        upd = timed(c, "UPDATE sync SET de = de || ' '")
        if with_job:
            queued = one(c, "SELECT rows_pending FROM transformer_jobs WHERE id = %s", job)
            one(c, "SELECT cancel_job(%s)", job)
            if queued != 2 * n:
                print("  !! %d rows queued, expected %d" % (queued, 2 * n))
        res.setdefault(with_job, []).append((ins, upd))
    med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for k, v in res.items()}
    ins = [b[0] / a[0] for a, b in zip(res[False], res[True])]
    upd = [b[1] / a[1] for a, b in zip(res[False], res[True])]
    print("sync triggers, %d rows (medians of %d alternating runs): INSERT %.3f s -> %.3f s (%.2fx [%.2f, %.2f]); "
          "UPDATE of the source %.3f s -> %.3f s (%.2fx [%.2f, %.2f])"
          % (n, SYNC_REPS, med[False][0], med[True][0], med[True][0] / med[False][0], min(ins), max(ins),
             med[False][1], med[True][1], med[True][1] / med[False][1], min(upd), max(upd)), flush=True)


def embeddings(c):
    """embed_column() with 1 and 2 workers against UPDATE ... SET v = embed(de)."""
    model = "multi30k_sentence_de_en"
    n = min(ROWS * 2, 6000)
    one(c, "SELECT import_model(%s)", model)
    one(c, "CREATE TABLE emb (id int PRIMARY KEY, de text NOT NULL, v real[], v_update real[])")
    one(c, "INSERT INTO emb (id, de) SELECT id, de FROM src WHERE id <= %s", n)
    one(c, "SELECT embed('warm up', %s)", model)
    times = {"serial": [], 1: [], 2: []}
    for _ in range(REPS):
        one(c, "UPDATE emb SET v_update = NULL")
        times["serial"].append(timed(c, "UPDATE emb SET v_update = embed(de, '%s')" % model))
        for workers in (1, 2):
            one(c, "UPDATE emb SET v = NULL")
            one(c, "VACUUM emb")
            t0 = time.time()
            job = one(c, "SELECT embed_column('emb', 'de', 'v', %s, workers => %s, keep_in_sync => false)", model, workers)
            while one(c, "SELECT state FROM transformer_jobs WHERE id = %s", job) not in ("done", "failed", "cancelled"):
                time.sleep(0.01)
            times[workers].append(time.time() - t0)
            differ = one(c, "SELECT count(*) FROM emb WHERE v IS NULL OR (SELECT max(abs(a - b)) FROM unnest(v, v_update) u(a, b)) > 1e-6")
            one(c, "SELECT cancel_job(%s)", job)
            if differ:
                print("  !! %d vectors differ" % differ)
    serial = statistics.median(times["serial"])
    print("embeddings, %d rows: serial UPDATE %.1f s (%.0f/s)" % (n, serial, n / serial), flush=True)
    for workers in (1, 2):
        total = statistics.median(times[workers])
        ratios = [a / b for a, b in zip(times["serial"], times[workers])]
        print("embeddings, embed_column() with %d worker%s: %.1f s (%.0f/s), %.2fx the UPDATE [%.2f, %.2f]"
              % (workers, "s" if workers > 1 else "", total, n / total, serial / total, min(ratios), max(ratios)), flush=True)


if __name__ == "__main__":
    main()
