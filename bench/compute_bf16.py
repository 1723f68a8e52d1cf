#!/usr/bin/python3
"""The compute type bf16 against the default, side by side (issue 40, item 5).

For the bundled model (fp16 weights), transformer-base (OPUS-MT en-mg's shape,
random fp32 weights: benchlib.make_base_model()) and the bundled sentence
encoder, in one backend, one thread (SET transformer.threads = 1): every
measurement twice in a row, once with SET transformer.compute_type =
'default' and once with 'bf16', the order alternating, timed inside the
server (bench_median of reps evaluations):
  - per sentence: translate(s, m, beam_size => k, split => false, keep =>
    '{}'), greedy and beam 4, N Multi30k test_2016 sentences (transformer-base:
    English, its source language; random weights, so its outputs are noise of
    the same length both ways: max_length is fixed by the model);
  - a batch: translate(text[]) of B sentences at beam 4;
  - embed(text[]) of 256 German sentences with the sentence encoder.
Ratios are the default's time over bf16's (> 1: bf16 is faster).  Parity:
how many translations bf16 gives identical to the default's; the mean and
smallest cosine of bf16's embeddings to the default's.

Needs a running server with the extension installed (make install).
Usage: pg_virtualenv -t bench/compute_bf16.py [-n N] [--batch B] [--reps R] [--models bundled,base,encoder]
"""
import argparse
import platform
import time

import benchlib as bl

bl.reexec_with_coretype()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20, help="sentences timed one at a time")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3, help="evaluations per timing (the median)")
    ap.add_argument("--models", default="bundled,base,encoder")
    args = ap.parse_args()
    models = args.models.split(",")

    s = bl.Session()
    raw = s.query
    s.query = lambda sql: raw(sql if sql.rstrip().endswith(";") else sql + ";")
    s.query("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS transformer;")
    s.query("SET transformer.threads = 1; SET max_parallel_workers_per_gather = 0; SET jit = off")
    s.query(bl.TIMER)
    print("machine: %s; %s" % (platform.processor() or platform.machine(),
                               open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": \t")))
    print("server: %s" % s.query("SELECT transformer_version()"))
    if "bundled" in models:
        s.query("SELECT import_model('multi30k_de_en') WHERE NOT EXISTS "
                "(SELECT FROM transformer_models WHERE name = 'multi30k_de_en')")
    if "base" in models:
        have = s.query("SELECT count(*) FROM transformer_models WHERE name = 'base_random'")
        if have == "0":
            d, params = bl.make_base_model()
            s.query("SELECT import_model('base_random', %s)" % bl.quote(d))
            print("transformer-base: %d parameters, random weights (fp32)" % params)
    if "encoder" in models:
        s.query("SELECT import_model('multi30k_sentence_de_en') WHERE NOT EXISTS "
                "(SELECT FROM transformer_models WHERE name = 'multi30k_sentence_de_en')")

    def both(sql, reps):
        """(default seconds, bf16 seconds, default output, bf16 output); the order alternates."""
        out = {}
        order = ("default", "bf16") if both.flip else ("bf16", "default")
        both.flip = not both.flip
        for ct in order:
            s.query("SET transformer.compute_type = '%s'" % ct)
            t = float(s.query("SELECT pg_temp.bench_median(%s, %d)" % (bl.quote(sql), reps)))
            out[ct] = (t, s.query(sql))
        s.query("RESET transformer.compute_type")
        return out["default"][0], out["bf16"][0], out["default"][1], out["bf16"][1]
    both.flip = True

    # warm: each model loaded with both compute types (the first load builds its file)
    for ct in ("default", "bf16"):
        s.query("SET transformer.compute_type = '%s'" % ct)
        t0 = time.time()
        if "bundled" in models:
            s.query("SELECT translate('Ein Hund.', 'multi30k_de_en')")
        if "base" in models:
            s.query("SELECT translate('A dog.', 'base_random', split => false, keep => '{}')")
        if "encoder" in models:
            s.query("SELECT embed('Ein Hund.', 'multi30k_sentence_de_en')")
        print("first use with compute_type %s (loads): %.2f s" % (ct, time.time() - t0))
    s.query("RESET transformer.compute_type")
    print("weight files: %s" % s.query("SELECT string_agg(name || ' ' || kind || ' ' || "
                                       "round(bytes / 1e6, 1) || ' MB', '; ' ORDER BY name, kind) "
                                       "FROM transformer_weight_files() WHERE kind LIKE 'weights%'"))

    rows = []
    for m, lang in (("multi30k_de_en", "de"), ("base_random", "en")):
        if (m == "multi30k_de_en" and "bundled" not in models) or (m == "base_random" and "base" not in models):
            continue
        sents = bl.sentences(lang, max(args.n, args.batch))
        for beam in (1, 4):
            ratios, same = [], 0
            for x in sents[:args.n]:
                td, tb, od, ob = both("SELECT translate(%s, %s, beam_size => %d, split => false, keep => '{}')"
                                      % (bl.quote(x), bl.quote(m), beam), args.reps)
                ratios.append(td / tb)
                same += od == ob
            rows.append((m, "per sentence, %s" % ("greedy" if beam == 1 else "beam 4"), bl.fmt_ratio(ratios),
                         "%d/%d identical" % (same, args.n)))
            print("  %s" % " | ".join(rows[-1]))
        arr = "ARRAY[%s]" % ",".join(bl.quote(x) for x in sents[:args.batch])
        td, tb, od, ob = both("SELECT unnest(translate(%s, %s, beam_size => 4, split => false, keep => '{}'))"
                              % (arr, bl.quote(m)), args.reps)
        same = sum(a == b for a, b in zip(od.split("\n"), ob.split("\n")))
        rows.append((m, "batch of %d, beam 4" % args.batch, "%.2fx (%.2f s / %.2f s)" % (td / tb, td, tb),
                     "%d/%d identical" % (same, args.batch)))
        print("  %s" % " | ".join(rows[-1]))
    if "encoder" in models:
        texts = bl.sentences("de", 256, split="train")
        arr = "ARRAY[%s]" % ",".join(bl.quote(x) for x in texts)
        td, tb, _, _ = both("SELECT count(*) FROM embed(%s, 'multi30k_sentence_de_en')" % arr, args.reps)
        # the cosines: both sets of vectors, each under its setting
        s.query("CREATE TEMP TABLE IF NOT EXISTS emb (ct text, i int, v real[])")
        s.query("TRUNCATE emb")
        for ct in ("default", "bf16"):
            s.query("SET transformer.compute_type = '%s'" % ct)
            s.query("INSERT INTO emb SELECT '%s', i, v FROM embed(%s, 'multi30k_sentence_de_en') "
                    "WITH ORDINALITY x(v, i)" % (ct, arr))
        s.query("RESET transformer.compute_type")
        cos = s.query("SELECT round(avg(c)::numeric, 6) || ' ' || round(min(c)::numeric, 6) FROM "
                      "(SELECT (SELECT sum(x * y) FROM unnest(a.v, b.v) u(x, y)) AS c FROM emb a "
                      "JOIN emb b USING (i) WHERE a.ct = 'default' AND b.ct = 'bf16') t").split()
        rows.append(("multi30k_sentence_de_en", "embed(text[]), 256 texts", "%.2fx (%.3f s / %.3f s)" % (td / tb, td, tb),
                     "cosine to the default: mean %s, min %s" % (cos[0], cos[1])))
        print("  %s" % " | ".join(rows[-1]))
    print("\n| model | form | default / bf16 time | parity |\n|---|---|---|---|")
    for r in rows:
        print("| %s |" % " | ".join(r))
    s.close()


if __name__ == "__main__":
    main()
