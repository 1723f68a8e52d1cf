#!/usr/bin/python3
"""Models of real size: loading, the cache, memory, and encode()'s arithmetic
efficiency.

Models: transformer-base with random weights and OPUS-MT en-mg's
configuration and tokenizers (d_model 512, 6+6 layers, 8 heads, FFN 2048,
vocabulary 58,101; fp32 safetensors, 289 MB), and the bundled
multi30k_de_en (fp16).  For each:
- import_model() time and the size of transformer_tensors;
- cold load: the first encode() in a fresh backend, minus a warm one; MB/s
  of stored weights;
- warm per-call overhead: input_embeddings('a', model) in a loop (tokenizing one
  character and a 2 x d_model embedding included: an upper bound on the
  cost of finding the cached model), medians of REPS loops of 10,000 calls;
- backend memory of the loaded model (its memory context) over the bytes
  of its stored weights.
And for transformer-base: encode() of a 64-token input (63 pieces + EOS),
GFLOP/s (2 x multiply-adds of the projections, attention and FFN) as a
fraction of cblas_sgemm's rate measured in the same run (bench/bench_gemm,
one thread, the encoder's shapes and larger ones; the best is the peak).

Needs a running server (PGHOST etc.) with the extension installed, and
`make bench`.  Usage: bench/real_size.py [REPS]
"""
import os
import statistics
import subprocess
import sys
import time

import benchlib as bl

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
GEMM = os.path.join(bl.ROOT, "bench", "bench_gemm")


def sgemm_gflops(m, n, k, reps=30):
    out = subprocess.run([GEMM, "sgemm", str(m), str(n), str(k), str(reps)],
                         capture_output=True, text=True, check=True).stdout
    return float(out.split()[0])


def text_of_tokens(n):
    """An English text of exactly n - 1 pieces (n tokens with EOS) for the en-mg tokenizer."""
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(bl.BASE_SPM, "source.spm"))
    words = " ".join(bl.sentences("en", 50)).split()
    text = ""
    for w in words:
        cand = (text + " " + w).strip()
        if len(sp.encode(cand)) > n - 1:
            break
        text = cand
    while len(sp.encode(text)) < n - 1:
        text += " a"
    assert len(sp.encode(text)) == n - 1, len(sp.encode(text))
    return text


def encoder_flops(n, d, ffn, layers):
    macs = layers * (4 * n * d * d + 2 * n * n * d + 2 * n * d * ffn)
    return 2.0 * macs


def measure(name, import_sql):
    t0 = time.perf_counter()
    bl.psql("SELECT drop_model(%s); %s" % (bl.quote(name), import_sql))
    t_import = time.perf_counter() - t0
    stored = int(bl.psql("SELECT sum(octet_length(data)) FROM transformer_tensors WHERE model = %s" % bl.quote(name)))
    table = int(bl.psql("SELECT sum(pg_column_size(t.*)) FROM transformer_tensors t WHERE model = %s" % bl.quote(name)))
    colds, warms, mems = [], [], []
    for _ in range(REPS):
        out = bl.psql("""\\timing on
SELECT encoder_output('a', %(m)s) IS NOT NULL;
SELECT encoder_output('a', %(m)s) IS NOT NULL;
\\timing off
SELECT sum(total_bytes) FROM pg_backend_memory_contexts WHERE name = 'transformer cache entry' AND ident = %(m)s;
""" % {"m": bl.quote(name)})
        lines = out.split("\n")
        times = [float(l.split()[1]) / 1000 for l in lines if l.startswith("Time:")]
        colds.append(times[0] - times[1])
        mems.append(int(lines[-1]))
    loop = bl.TIMER + """SELECT input_embeddings('a', %(m)s) IS NOT NULL;
SELECT pg_temp.bench_median($$SELECT count(input_embeddings('a', %(m)s)) FROM generate_series(1, 10000)$$, %(r)d);""" % {
        "m": bl.quote(name), "r": REPS}
    per_call = float(bl.psql(loop).split("\n")[-1]) / 10000
    cold = statistics.median(colds)
    print("%s: %.1f MB of stored weights" % (name, stored / 1e6))
    print("  import_model():          %.2f s; rows in transformer_tensors %.1f MB" % (t_import, table / 1e6))
    print("  cold load:               %.3f s [%.3f, %.3f], %.0f MB/s" % (cold, min(colds), max(colds), stored / 1e6 / cold))
    print("  warm input_embeddings('a') call:    %.2f us (all of it: an upper bound on finding the cached model)" % (per_call * 1e6))
    print("  backend memory:          %.1f MB, %.3fx the stored weights" % (mems[0] / 1e6, mems[0] / stored))
    sys.stdout.flush()


def main():
    bl.psql("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS transformer;")
    directory, params = bl.make_base_model("F32")
    measure("base_random", "SELECT import_model('base_random', %s);" % bl.quote(directory))
    measure("multi30k_de_en", "SELECT import_model('multi30k_de_en');")

    # encode() of 64 tokens on transformer-base vs sgemm's rate
    text = text_of_tokens(64)
    flops = encoder_flops(64, 512, 2048, 6)
    t = float(bl.psql(bl.TIMER + "SELECT encoder_output(%s, 'base_random') IS NOT NULL;\n"
                      "SELECT pg_temp.bench_median(%s, %d);" % (
                          bl.quote(text), bl.quote("SELECT encoder_output(%s, 'base_random')" % bl.quote(text)),
                          max(REPS, 20))).split("\n")[-1])
    shapes = [(64, 512, 512), (64, 2048, 512), (64, 512, 2048), (512, 2048, 512), (1024, 2048, 2048)]
    rates = {s: sgemm_gflops(*s) for s in shapes}
    peak = max(rates.values())
    print("encode() of 64 tokens on transformer-base: %.2f ms, %.1f GFLOP/s (%.2f GFLOP)"
          % (t * 1e3, flops / t / 1e9, flops / 1e9))
    for s, r in rates.items():
        print("  cblas_sgemm (m, n, k) = %-17s %.1f GFLOP/s" % (s, r))
    print("  encode() = %.0f%% of the sgemm peak (%.1f GFLOP/s)" % (100 * flops / t / 1e9 / peak, peak))
    bl.psql("SELECT drop_model('base_random');")


if __name__ == "__main__":
    main()
