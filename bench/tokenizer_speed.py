#!/usr/bin/python3
"""tokenize() over the Multi30k train set vs the SentencePiece library.

Both tokenize the 58,000 German and English training sentences with the
OPUS-MT en-mg source model (SentencePiece ids, no vocabulary), in the same
run on the same machine, single-threaded: the library through Python, one
sentence per call and as one batch (num_threads=1); the extension through
SQL, one tokenize() call per table row.  Medians of REPS runs, as
sentences per second.  The results are checked to be identical.

Needs a running server (PGHOST etc., e.g. under pg_virtualenv) with the
extension installed, and ../shared/data.  Usage: bench/tokenizer_speed.py [REPS]
"""
import gzip
import os
import statistics
import subprocess
import sys
import time

import sentencepiece as spm

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")
MODEL = os.path.join(DATA, "spm", "opus-mt-en-mg", "source.spm")


def psql(sql):
    return subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"],
                          input=sql, capture_output=True, text=True, check=True).stdout


def main():
    lines = []
    for lang in ("de", "en"):
        with gzip.open(os.path.join(DATA, "multi30k", "train.%s.gz" % lang), "rt",
                       encoding="utf-8", newline="") as f:
            lines += f.read().split("\n")[:-1]
    n = len(lines)

    sp = spm.SentencePieceProcessor(model_file=MODEL)
    loop, batch = [], []
    for _ in range(REPS):
        t0 = time.perf_counter()
        ref = [sp.encode(s) for s in lines]
        loop.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ref_batch = sp.encode(lines, num_threads=1)
        batch.append(time.perf_counter() - t0)
    assert ref == ref_batch

    out = psql("""
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS transformer;
SELECT import_tokenizer('bench_enmg', '%s');
DROP TABLE IF EXISTS bench_sentences;
CREATE TABLE bench_sentences (n serial, s text);
\\copy bench_sentences(s) FROM PROGRAM 'cd %s && zcat train.de.gz train.en.gz' WITH (FORMAT csv, QUOTE E'\\x01', DELIMITER E'\\x02', NULL E'\\x03')
CREATE FUNCTION pg_temp.timings(reps int) RETURNS float8[] LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; ts float8[] := '{}'; c bigint;
BEGIN
  PERFORM count(tokenize(s, 'bench_enmg')) FROM bench_sentences;   -- warm the cache
  FOR i IN 1..reps LOOP
    t0 := clock_timestamp();
    SELECT count(tokenize(s, 'bench_enmg')) INTO c FROM bench_sentences;
    ts := ts || extract(epoch FROM clock_timestamp() - t0)::float8;
  END LOOP;
  RETURN ts;
END $$;
SELECT array_to_string(pg_temp.timings(%d), ',');
SELECT array_to_string(tokenize(s, 'bench_enmg'), ' ') FROM bench_sentences ORDER BY n;
DROP TABLE bench_sentences;
SELECT drop_tokenizer('bench_enmg');
""" % (MODEL, os.path.join(DATA, "multi30k"), REPS)).split("\n")
    sql = [float(t) for t in out[1].split(",")]
    got = out[2:2 + n]
    assert got == [" ".join(map(str, ids)) for ids in ref], "ids differ from the library"

    rate = lambda ts: n / statistics.median(ts)
    print("tokenize %d Multi30k train sentences (de+en), OPUS-MT en-mg source.spm, %d runs, 1 thread" % (n, REPS))
    print("  sentencepiece %s, encode() per sentence  %9.0f sentences/s  [min %.0f, max %.0f]" % (
        spm.__version__, rate(loop), n / max(loop), n / min(loop)))
    print("  sentencepiece %s, encode(batch)          %9.0f sentences/s  [min %.0f, max %.0f]" % (
        spm.__version__, rate(batch), n / max(batch), n / min(batch)))
    print("  SQL tokenize(), one call per row          %9.0f sentences/s  [min %.0f, max %.0f]" % (
        rate(sql), n / max(sql), n / min(sql)))
    print("  ratio: %.2fx the per-sentence library, %.2fx the batch library (ids identical)" % (
        rate(sql) / rate(loop), rate(sql) / rate(batch)))


if __name__ == "__main__":
    main()
