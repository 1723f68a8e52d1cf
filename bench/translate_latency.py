#!/usr/bin/python3
"""Latency of one sentence: SQL translate() vs PyTorch incremental decoding.

For each of the first N Multi30k test_2016_flickr sentences, greedy and beam
4, both single-threaded, with the same rules and max_length (Hugging Face's, capped at
3 times the source as translate()'s default runaway guard):
- PyTorch: bench/torch_decode.py (KV cache, cross K/V once, inference_mode,
  fp32, OpenBLAS with this CPU's kernels), median of REPS runs;
- SQL: SELECT translate(sentence, model, beam) timed inside the server
  (tokenizing and detokenizing included), median of REPS runs.
The two sides alternate sentence by sentence, so a drift in the speed of a
shared machine affects both.
The ratio PyTorch / SQL per sentence is summarized as median [min, max].
The generated ids are compared too (SQL generate() vs PyTorch).

Models: the bundled multi30k_de_en (German sentences), and transformer-base
with random weights and OPUS-MT en-mg's configuration (English sentences;
random weights rarely emit EOS, so decoding runs to max_length).

Needs a running server (PGHOST etc.) with the extension installed.
Usage: bench/translate_latency.py [--model bundled|base|both] [-n N] [--reps R] [--dtype F32|F16]
"""
import argparse
import os
import sys
import time

import benchlib as bl

bl.reexec_with_coretype()
import torch  # noqa: E402
import torch_decode as td  # noqa: E402


def time_torch(f, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = f()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2], out


def run(name, directory, lang, n, reps):
    tr = bl.mt.Translator(directory)
    dec = td.IncrementalDecoder(tr.model)
    sents = bl.sentences(lang, n)
    sess = bl.Session()
    sess.query(bl.TIMER + "SELECT length(translate('a', %s, 1));" % bl.quote(name))  # warm the cache
    ratios = {1: [], 4: []}
    totals = {1: [0.0, 0.0], 4: [0.0, 0.0]}
    agree = {1: 0, 4: 0}
    tokens = {1: 0, 4: 0}
    for s in sents:
        src = tr.source_ids(s)
        for beam in (1, 4):
            # the two sides alternate, sentence by sentence
            row = sess.query("SELECT pg_temp.bench_median(%s, %d), generate(%s, %s, %d);" % (
                bl.quote("SELECT translate(%s, %s, %d)" % (bl.quote(s), bl.quote(name), beam)),
                reps, bl.quote(s), bl.quote(name), beam)).split("|")
            sql_t = float(row[0])
            sql_ids = [int(x) for x in row[1].strip("{}").split(",") if x]
            if beam == 1:
                t, ids = time_torch(lambda: dec.greedy(src), reps)
            else:
                t, ids = time_torch(lambda: dec.beam([src], 4)[0], reps)
            ratios[beam].append(t / sql_t)
            totals[beam][0] += t
            totals[beam][1] += sql_t
            agree[beam] += ids == sql_ids
            tokens[beam] += len(ids) + 1
    sess.close()
    print("%s: %d sentences, medians of %d runs each, 1 thread, OPENBLAS_CORETYPE=%s"
          % (name, len(sents), reps, os.environ.get("OPENBLAS_CORETYPE")))
    for beam in (1, 4):
        label = "greedy" if beam == 1 else "beam 4"
        pt, st = totals[beam]
        print("  %-7s PyTorch %.1f ms/sentence, SQL %.1f ms/sentence (%.2f ms/token); "
              "speed-up per sentence %s; same ids %d/%d"
              % (label, pt / len(sents) * 1e3, st / len(sents) * 1e3, st / tokens[beam] * 1e3,
                 bl.fmt_ratio(ratios[beam]), agree[beam], len(sents)))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="both", choices=("bundled", "base", "both"))
    ap.add_argument("-n", type=int, default=None, help="sentences (default 100 bundled, 20 base)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dtype", default="F32", help="the base model's stored dtype")
    args = ap.parse_args()
    torch.set_num_threads(1)
    bl.psql("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS transformer;")
    if args.model in ("bundled", "both"):
        bl.psql("SELECT drop_model('multi30k_de_en'); SELECT import_model('multi30k_de_en');")
        run("multi30k_de_en", bl.BUNDLED, "de", args.n or 100, args.reps)
    if args.model in ("base", "both"):
        directory, _ = bl.make_base_model(args.dtype)
        bl.psql("SELECT drop_model('base_random'); SELECT import_model('base_random', %s);"
                % bl.quote(directory))
        run("base_random", directory, "en", args.n or 20, args.reps)
        bl.psql("SELECT drop_model('base_random');")


if __name__ == "__main__":
    main()
