#!/usr/bin/python3
"""int8 translate() on transformer-base vs PyTorch fp32 and PyTorch's own int8 (issue 14).

transformer-base (OPUS-MT en-mg's configuration and tokenizers, random
weights N(0, 0.02), stored fp32) is imported, and quantize_model() stores its
int8 copy.  Over the first N Multi30k test_2016_flickr English sentences,
greedy and beam 4, one thread each side, the sides alternating sentence by
sentence (medians of REPS runs each):
- SQL int8: SELECT translate(s, 'base_int8', beam), timed in the server;
- SQL fp32: the same on the original (our own int8 speed-up);
- PyTorch fp32: bench/torch_decode.py (KV cache, cross K/V once);
- PyTorch int8: the same loop after torch.ao.quantization.quantize_dynamic
  (every nn.Linear and the output layer to qint8).
Ratios per sentence, median [min, max].  Then the batch form: translate(text[])
of 32 sentences, beam 4, int8, vs PyTorch fp32 batched beam 4 at batch 32.
Also: greedy ids of int8 vs fp32 (SQL): identical sentences and the share of
tokens before the first difference; and each loaded model's memory.

Random weights rarely emit EOS: decoding runs to max_length (3 x source).
Usage: pg_virtualenv bench/translate_int8.py [-n N] [--reps R] [--batch B]
"""
import argparse
import os
import sys
import time

import benchlib as bl

bl.reexec_with_coretype()
import torch  # noqa: E402
import torch_decode as td  # noqa: E402


def timed(f, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = f()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2], out


def sql_ids(row):
    return [int(x) for x in row.strip("{}").split(",") if x]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--batch-reps", type=int, default=2)
    ap.add_argument("--only-batch", action="store_true", help="skip the per-sentence part")
    args = ap.parse_args()
    torch.set_num_threads(1)
    directory, params = bl.make_base_model("F32")
    bl.psql("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS transformer;"
            "SELECT drop_model('base_random'); SELECT drop_model('base_int8');"
            "SELECT import_model('base_random', %s); SELECT quantize_model('base_random', 'base_int8');"
            % bl.quote(directory))
    tr = bl.mt.Translator(directory)
    fp = td.IncrementalDecoder(tr.model)
    q8 = td.IncrementalDecoder.quantized(tr.model)
    sents = bl.sentences("en", args.n)
    sess = bl.Session()
    for name in ("base_random", "base_int8"):
        sess.query("SELECT length(translate('a', %s, 1));" % bl.quote(name))
    # each loaded model's memory context (weights as held, packed)
    mem = dict(tuple(r.split("|")) for r in sess.query(
        "SELECT ident, total_bytes FROM pg_backend_memory_contexts WHERE name = 'transformer cache entry' "
        "AND ident IN ('base_random', 'base_int8');").split("\n") if r)
    sess.query(bl.TIMER)
    sides = ("sql8", "sql32", "torch32", "torch8")
    ratios = {b: {"torch32": [], "torch8": [], "sql32": []} for b in (1, 4)}
    totals = {b: dict.fromkeys(sides, 0.0) for b in (1, 4)}
    tokens = {1: 0, 4: 0}
    agree_sent = agree_tok = all_tok = 0
    torch_agree = {1: 0, 4: 0}
    for s in ([] if args.only_batch else sents):
        src = tr.source_ids(s)
        for beam in (1, 4):
            t = {}
            ids = {}
            for name, side in (("base_int8", "sql8"), ("base_random", "sql32")):
                row = sess.query("SELECT pg_temp.bench_median(%s, %d), generate(%s, %s, %d);" % (
                    bl.quote("SELECT translate(%s, %s, %d)" % (bl.quote(s), bl.quote(name), beam)),
                    args.reps, bl.quote(s), bl.quote(name), beam)).split("|")
                t[side], ids[side] = float(row[0]), sql_ids(row[1])
            for dec, side in ((fp, "torch32"), (q8, "torch8")):
                if beam == 1:
                    t[side], ids[side] = timed(lambda: dec.greedy(src), args.reps)
                else:
                    t[side], ids[side] = timed(lambda: dec.beam([src], 4)[0], args.reps)
            for side in sides:
                totals[beam][side] += t[side]
            for side in ("torch32", "torch8", "sql32"):
                ratios[beam][side].append(t[side] / t["sql8"])
            tokens[beam] += len(ids["sql8"]) + 1
            torch_agree[beam] += ids["torch32"] == ids["sql32"]
            if beam == 1:
                a, b = ids["sql8"], ids["sql32"]
                agree_sent += a == b
                same = 0
                while same < min(len(a), len(b)) and a[same] == b[same]:
                    same += 1
                agree_tok += same
                all_tok += max(len(b), 1)
    if args.only_batch:
        sents = []
    print("transformer-base (%d parameters, random weights), %d sentences, medians of %d runs, "
          "1 thread, OPENBLAS_CORETYPE=%s" % (params, len(sents), args.reps, os.environ.get("OPENBLAS_CORETYPE")))
    for beam in (1, 4) if sents else ():
        n = len(sents)
        tt = totals[beam]
        print("  %-7s ms/sentence: SQL int8 %.1f, SQL fp32 %.1f, PyTorch fp32 %.1f, PyTorch int8 %.1f"
              % ("greedy" if beam == 1 else "beam 4", tt["sql8"] / n * 1e3, tt["sql32"] / n * 1e3,
                 tt["torch32"] / n * 1e3, tt["torch8"] / n * 1e3))
        print("          SQL int8 vs PyTorch fp32 %s (target >= 6x); vs PyTorch int8 %s (target >= 2x); "
              "vs SQL fp32 %s" % (bl.fmt_ratio(ratios[beam]["torch32"]), bl.fmt_ratio(ratios[beam]["torch8"]),
                                  bl.fmt_ratio(ratios[beam]["sql32"])))
        print("          PyTorch fp32 ids = SQL fp32 ids: %d/%d" % (torch_agree[beam], n))
    if sents:
        print("  greedy ids, int8 vs fp32 (SQL): %d/%d sentences identical; %.1f%% of the fp32 tokens "
              "before the first difference" % (agree_sent, len(sents), 100.0 * agree_tok / all_tok))

    # the batch form at batch B, beam 4
    batch = bl.sentences("en", args.batch)
    arr = "ARRAY[%s]" % ",".join(bl.quote(s) for s in batch)
    sql_t = float(sess.query("SELECT pg_temp.bench_median(%s, %d);" % (
        bl.quote("SELECT translate(%s, 'base_int8', 4)" % arr), args.batch_reps)))
    srcs = [tr.source_ids(s) for s in batch]
    torch_t, out = timed(lambda: fp.beam(srcs, 4), args.batch_reps)
    sess.close()
    print("  batch form, %d sentences, beam 4: SQL int8 %.2f s, PyTorch fp32 batched %.2f s: %.2fx (target >= 5x)"
          % (len(batch), sql_t, torch_t, torch_t / sql_t))
    b32, b8 = int(mem["base_random"]), int(mem["base_int8"])
    print("  memory of the loaded models: fp32 %.1f MB, int8 %.1f MB: %.3fx (target <= 0.3x)"
          % (b32 / 1e6, b8 / 1e6, b8 / b32))


if __name__ == "__main__":
    main()
