#!/usr/bin/python3
"""Training speed: the trainer in C (src/core/train_model.c) against PyTorch fp32 (issue 41).

The bundled model (models/multi30k_de_en: Marian layout, d 256, 3 + 3
layers, 8,001 pieces, swish, post-norm, tied embeddings), the first
STEPS x BATCH pairs of Multi30k's training set (German -> English), cut at
63 pieces + </s>, in batches of BATCH consecutive pairs; dropout 0 on both
sides (the C trainer has none yet); label smoothing 0.1; Adam (0.9, 0.98,
1e-9) at a constant rate.  One thread each side, OpenBLAS on both with the
same core (OPENBLAS_CORETYPE, as bench/benchlib.py sets it for PyTorch).

- ours: bench/bench_train (make bench-train) on the run this script
  writes in test/unit/train_fixture.h's format (the weights flattened in
  train_model.h's order): forward, backward and Adam, timed per step;
- PyTorch 1.13: tools/marian_torch.py's Marian (the rule-by-rule port of
  MarianMTModel), the batch padded and masked as Hugging Face does,
  CrossEntropyLoss(label_smoothing=0.1, ignore_index=pad), forward,
  backward, Adam's step, timed per step.

The sides alternate (ours, PyTorch, ours, PyTorch, ...: --reps rounds).
Reported: tokens a second (source + target) per side, the median of the
rounds, and their ratio; the first steps' losses of both (the same within
1e-4: the same computation); the memory of each side (ours: the state's
bytes for the largest batch and the process's peak RSS; PyTorch: its
process's peak RSS less what it held before the first step, round 1).

Usage: bench/train.py [--steps 20] [--batch 32] [--reps 3] [--keep DIR]
"""
import argparse
import gzip
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import benchlib as bl

bl.reexec_with_coretype()
import sentencepiece as spm  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

sys.path.insert(0, os.path.join(bl.ROOT, "tools"))
import gen_train_fixtures as gf  # noqa: E402
import marian_torch as mt  # noqa: E402

RATE = 1e-4
EPS = 0.1
MAX_IDS = 64


def pairs_of(n):
    src_sp = spm.SentencePieceProcessor(model_file=os.path.join(bl.BUNDLED, "source.spm"))
    tgt_sp = spm.SentencePieceProcessor(model_file=os.path.join(bl.BUNDLED, "target.spm"))
    de = bl.sentences("de", n, split="train")
    en = bl.sentences("en", n, split="train")
    eos = 0
    return [(src_sp.encode(s)[:MAX_IDS - 1] + [eos], tgt_sp.encode(t)[:MAX_IDS - 1] + [eos])
            for s, t in zip(de, en)]


def write_run(directory, model, pairs, steps, batch):
    gf.write_marian_run(directory, "bundled", model, pairs, steps, batch, RATE, 0, EPS, max_ids=MAX_IDS)


def run_ours(exe, directory):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")     # one thread, and no idle pool holding buffers
    out = subprocess.run([exe, directory, "bundled"], capture_output=True, text=True, check=True, env=env).stdout
    losses, ms = [], []
    summary = {}
    for line in out.splitlines():
        w = line.split()
        if w[0] == "step":
            losses.append(float(w[3]))
            ms.append(float(w[5]))
        elif w[0] == "summary":
            summary = {w[i]: float(w[i + 1]) for i in range(1, len(w) - 1, 2)}
    return losses, ms, summary


def run_torch(model, pairs, steps, batch):
    cfg = model.cfg
    pad, start, vocab = cfg["pad_token_id"], cfg["decoder_start_token_id"], cfg["vocab_size"]
    opt = torch.optim.Adam(model.parameters(), lr=RATE, betas=(0.9, 0.98), eps=1e-9)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=EPS, ignore_index=pad)
    losses, ms = [], []
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for step in range(steps):
        b = pairs[step * batch: (step + 1) * batch]
        n = max(len(s) for s, _ in b)
        t = max(len(y) for _, y in b)
        src = torch.tensor([s + [pad] * (n - len(s)) for s, _ in b])
        mask = torch.tensor([[1] * len(s) + [0] * (n - len(s)) for s, _ in b])
        labels = torch.tensor([y + [pad] * (t - len(y)) for _, y in b])
        dec_in = torch.cat([torch.full((len(b), 1), start), labels[:, :-1]], dim=1)
        t0 = time.perf_counter()
        memory, mpad = model.encode(src, mask)
        logits = model.decode(dec_in, memory, mpad)
        loss = loss_fn(logits.reshape(-1, vocab), labels.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        ms.append((time.perf_counter() - t0) * 1e3)
        losses.append(float(loss))
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return losses, ms, rss1 - rss0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--keep", help="write the run here and keep it")
    args = ap.parse_args()
    torch.set_num_threads(1)
    exe = os.path.join(bl.ROOT, "bench", "bench_train")
    if not os.path.exists(exe):
        sys.exit("bench/bench_train is missing: make bench-train")
    pairs = pairs_of(args.steps * args.batch)
    tokens = sum(len(s) + len(t) for s, t in pairs)
    directory = args.keep or tempfile.mkdtemp(prefix="transformer_train_")
    os.makedirs(directory, exist_ok=True)

    def fresh():
        m = mt.load_marian(bl.BUNDLED)
        gf.no_dropout(m)
        return m.train()

    write_run(directory, fresh(), pairs, args.steps, args.batch)
    info = open("/proc/cpuinfo").read()
    field = lambda k: info.split(k)[1].split("\n")[0].strip(" \t:")  # noqa: E731
    print("machine: %s (family %s model %s); OPENBLAS_CORETYPE=%s; torch %s; 1 thread each side"
          % (field("model name"), field("cpu family"), field("model\t"), os.environ.get("OPENBLAS_CORETYPE"),
             torch.__version__))
    print("%d steps of %d pairs, %d tokens (source + target), %.1f a pair" % (args.steps, args.batch, tokens,
                                                                              tokens / len(pairs)))
    ours_tps, torch_tps, ratios = [], [], []
    for r in range(args.reps):
        lo, mo, summary = run_ours(exe, directory)
        lt, mt_, rss = run_torch(fresh(), pairs, args.steps, args.batch)
        a = tokens / (sum(mo) / 1e3)
        b = tokens / (sum(mt_) / 1e3)
        ours_tps.append(a)
        torch_tps.append(b)
        ratios.append(a / b)
        print("round %d: ours %.0f tokens/s, PyTorch %.0f tokens/s, ratio %.2fx; first losses ours %s, PyTorch %s"
              % (r + 1, a, b, a / b, ["%.5f" % x for x in lo[:3]], ["%.5f" % x for x in lt[:3]]))
        worst = max(abs(x - y) / abs(y) for x, y in zip(lo, lt))
        print("  losses of all %d steps: max rel diff %.2g" % (len(lo), worst))
        print("  memory: ours state %.1f MB for the largest batch, peak RSS %.1f MB (params %d)%s"
              % (summary["state_bytes"] / 1e6, summary["peak_rss_kb"] / 1e3, summary["params"],
                 "; PyTorch's peak RSS grew by %.1f MB in its first steps" % (rss / 1e3) if r == 0 else ""))
    print("\n| side | tokens/s (median of %d rounds) |\n|---|---|" % args.reps)
    print("| ours (C, fp32) | %.0f [%.0f, %.0f] |" % (statistics.median(ours_tps), min(ours_tps), max(ours_tps)))
    print("| PyTorch fp32 | %.0f [%.0f, %.0f] |" % (statistics.median(torch_tps), min(torch_tps), max(torch_tps)))
    print("| **ours / PyTorch** | **%.2fx** [%.2f, %.2f] |" % (statistics.median(ratios), min(ratios), max(ratios)))
    if not args.keep:
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
