#!/usr/bin/python3
"""A transformer-base model of real size, with random weights: import time,
table size, cold-load time, warm translate() latency, backend memory.

The configuration, tokenizers and vocabulary are OPUS-MT en-mg's
(../shared/data/spm/opus-mt-en-mg: d_model 512, 6+6 layers, 8 heads, FFN
2048, swish, vocabulary 54,688); the weights are random (N(0, 0.02), as
Marian initializes), written as model.safetensors in fp32 by
tools/marian_torch.py.  Translations of random weights are meaningless; the
timings are not: decoding runs to max_length, set here to 32 tokens.

Needs a running server (PGHOST etc.) with the extension installed.
Usage: bench/real_size.py [REPS]
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import marian_torch as mt  # noqa: E402

SPM = os.path.join(os.path.dirname(ROOT), "shared", "data", "spm", "opus-mt-en-mg")
DIR = "/tmp/transformer_base_random"
REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
SENTENCES = [
    "Two young, White males are outside near many bushes.",
    "A man in an orange hat starring at something.",
    "A little girl climbing into a wooden playhouse.",
    "Five people wearing winter jackets and helmets stand in the snow, with snowmobiles in the background.",
    "People are fixing the roof of a house.",
]


def psql(sql):
    return subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"],
                          input=sql, capture_output=True, text=True, check=True).stdout.strip()


def make_model():
    with open(os.path.join(SPM, "config.json")) as f:
        cfg = json.load(f)
    torch.manual_seed(0)
    model = mt.Marian(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
        for n, p in model.named_parameters():
            if "layer_norm" in n and n.endswith("weight"):
                p.fill_(1.0)
    os.makedirs(DIR, exist_ok=True)
    mt.save_safetensors(os.path.join(DIR, "model.safetensors"), mt.marian_state(model))
    shutil.copy(os.path.join(SPM, "config.json"), DIR)
    for f in ("source.spm", "target.spm", "vocab.json"):
        shutil.copy(os.path.join(SPM, f), DIR)
    return sum(p.numel() for p in model.parameters())


def main():
    params = make_model()
    size = os.path.getsize(os.path.join(DIR, "model.safetensors"))
    psql("CREATE EXTENSION IF NOT EXISTS transformer; SELECT drop_model('base_random');")
    t0 = time.perf_counter()
    psql("SELECT import_model('base_random', '%s');" % DIR)
    t_import = time.perf_counter() - t0
    table = int(psql("SELECT pg_total_relation_size('transformer_tensors')"))

    # a fresh backend: the first call loads the model, the next ones find it
    out = psql("""
\\timing on
SELECT pg_backend_pid();
SELECT encode('a', 'base_random') IS NOT NULL;
SELECT encode('a', 'base_random') IS NOT NULL;
""")
    lines = out.split("\n")
    pid = lines[0]
    times = [float(l.split()[1]) for l in lines if l.startswith("Time:")]
    t_cold, t_warm_encode = times[-2] / 1000, times[-1] / 1000

    script = ["SELECT pg_backend_pid();", "SELECT encode('a', 'base_random') IS NOT NULL;", "\\timing on"]
    for beam in (1, 4):
        for _ in range(REPS):
            for s in SENTENCES:
                script.append("SELECT length(translate('%s', 'base_random', %d, 32));" % (s.replace("'", "''"), beam))
    script.append("\\timing off")
    script.append("SELECT sum(total_bytes) FROM pg_backend_memory_contexts WHERE name = 'transformer cache entry' AND ident = 'base_random';")
    proc = subprocess.Popen(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate("\n".join(script) + "\nSELECT pg_sleep(0);\n")
    lines = out.strip().split("\n")
    times = [float(l.split()[1]) / 1000 for l in lines if l.startswith("Time:")]
    n = REPS * len(SENTENCES)
    greedy, beam4 = times[:n], times[n:2 * n]
    ctx_bytes = int(lines[-1])

    print("transformer-base, random weights (config of OPUS-MT en-mg): %d parameters, %.0f MB safetensors (fp32)"
          % (params, size / 1e6))
    print("  import_model():            %.1f s (%.0f MB/s)" % (t_import, size / 1e6 / t_import))
    print("  transformer_tensors size:  %.0f MB (%.2fx the file)" % (table / 1e6, table / size))
    print("  cold load (first encode):  %.2f s (%.0f MB/s); warm encode('a') %.1f ms"
          % (t_cold, size / 1e6 / t_cold, t_warm_encode * 1e3))
    print("  warm translate(), 32 tokens, median of %d: greedy %.0f ms [%.0f, %.0f], beam 4 %.0f ms [%.0f, %.0f]"
          % (n, statistics.median(greedy) * 1e3, min(greedy) * 1e3, max(greedy) * 1e3,
             statistics.median(beam4) * 1e3, min(beam4) * 1e3, max(beam4) * 1e3))
    print("  backend memory for the model: %.0f MB in its memory context (%.2fx the fp32 weights)"
          % (ctx_bytes / 1e6, ctx_bytes / (params * 4)))
    psql("SELECT drop_model('base_random');")
    shutil.rmtree(DIR)


if __name__ == "__main__":
    main()
