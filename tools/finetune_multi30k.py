#!/usr/bin/python3
"""Fine-tune the bundled model on Multi30k with the core's trainer, the paper's recipe (issue 41).

  make bench-train && /usr/bin/python3 tools/finetune_multi30k.py --out /tmp/finetuned [--epochs 3]
  pg_virtualenv /usr/bin/python3 tools/evaluate.py --model-dir /tmp/finetuned [--split test_2017_flickr]

The training runs in C, outside the server, through bench/bench_train: the
same code fine_tune() is to run in the database (src/core/train_model.c);
until that function exists, this is how its recipe is measured.

- data: Multi30k's training set (29,000 pairs, ../shared/data), the model's
  SentencePiece pieces + </s>, cut at 63; every epoch in a new order
  (seeded), batches of --batch consecutive pairs;
- the recipe of tools/train_multi30k.py, which trained the bundled model and
  was stopped after epoch 11 with its validation BLEU still rising: label
  smoothing 0.1, dropout 0.1 (the config's: after the embeddings and every
  block's F; attention and activation dropout 0), Adam (0.9, 0.98, 1e-9) at
  --rate after a linear warm-up of --warmup steps, constant or, with
  --decay-from, decaying as the paper's schedule (at the step where that
  training stopped, its schedule gives about 5e-4);
- the parameters every half epoch, and the average of the last --average
  of them (checkpoint averaging, as the paper does) written as a Marian
  model directory (fp32 safetensors, the bundled model's tokenizer files).
"""
import argparse
import gzip
import os
import random
import shutil
import subprocess
import sys
import time

import numpy as np
import sentencepiece as spm
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import gen_train_fixtures as gf  # noqa: E402
import marian_torch as mt  # noqa: E402

BUNDLED = os.path.join(ROOT, "models", "multi30k_de_en")
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data", "multi30k")
MAX_IDS = 64


def lines(split, lang):
    with gzip.open(os.path.join(DATA, "%s.%s.gz" % (split, lang)), "rt", encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="the fine-tuned model's directory")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=160, help="pairs a step (the bundled model's ~3,000 target tokens)")
    ap.add_argument("--rate", type=float, default=4e-4)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--decay-from", type=int, default=0,
                    help="decay the rate as the paper's schedule does, as if this many steps were behind "
                         "(1969: where the bundled model's training stopped); 0: constant")
    ap.add_argument("--average", type=int, default=4, help="checkpoints averaged (one every half epoch)")
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work", default="/tmp/finetune_multi30k", help="the run's files and checkpoints")
    ap.add_argument("--pairs", type=int, help="only the first N pairs (a quick try of the pipeline)")
    args = ap.parse_args()

    src_sp = spm.SentencePieceProcessor(model_file=os.path.join(BUNDLED, "source.spm"))
    tgt_sp = spm.SentencePieceProcessor(model_file=os.path.join(BUNDLED, "target.spm"))
    de, en = lines("train", "de")[:args.pairs], lines("train", "en")[:args.pairs]
    pairs = [(src_sp.encode(s)[:MAX_IDS - 1] + [0], tgt_sp.encode(t)[:MAX_IDS - 1] + [0]) for s, t in zip(de, en)]
    rng = random.Random(args.seed)
    per_epoch = len(pairs) // args.batch
    order = []
    for _ in range(args.epochs):
        idx = list(range(len(pairs)))
        rng.shuffle(idx)
        order += [pairs[i] for i in idx[:per_epoch * args.batch]]
    steps = per_epoch * args.epochs
    os.makedirs(args.work, exist_ok=True)
    model = mt.load_marian(BUNDLED)
    gf.write_marian_run(args.work, "run", model, order, steps, args.batch, args.rate, args.warmup, 0.1,
                        drop={"hidden": args.dropout, "attention": 0.0, "activation": 0.0, "seed": args.seed},
                        max_ids=MAX_IDS, decay_from=args.decay_from)
    every = max(1, per_epoch // 2)
    print("%d pairs, %d epochs of %d steps of %d pairs; checkpoints every %d steps, the last %d averaged"
          % (len(pairs), args.epochs, per_epoch, args.batch, every, args.average), flush=True)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", BENCH_TRAIN_DUMP_EVERY=str(every),
               BENCH_TRAIN_DUMP_PREFIX=os.path.join(args.work, "ckpt"))
    t0 = time.time()
    log = open(os.path.join(args.work, "train.log"), "w")
    with subprocess.Popen([os.path.join(ROOT, "bench", "bench_train"), args.work, "run"], stdout=subprocess.PIPE,
                          text=True, env=env) as p:
        window = []
        for line in p.stdout:
            log.write(line)
            w = line.split()
            if w[0] == "step":
                window.append(float(w[3]))
                s = int(w[1])
                if s % 50 == 0 or s == steps:
                    print("step %d/%d: loss %.4f (mean of the last %d), %.1f minutes"
                          % (s, steps, sum(window) / len(window), len(window), (time.time() - t0) / 60),
                          flush=True)
                    window = []
            else:
                print(line.rstrip(), flush=True)
    if p.returncode != 0:
        sys.exit("bench_train failed")
    dumps = sorted((int(f.split(".")[1]), f) for f in os.listdir(args.work) if f.startswith("ckpt."))
    if len(dumps) > 1 and dumps[-1][0] - dumps[-2][0] < every // 2:
        del dumps[-2]              # the last step's parameters stand for the checkpoint just before them
    last = dumps[-args.average:]
    avg = np.mean([np.fromfile(os.path.join(args.work, f), dtype="<f4") for _, f in last], axis=0, dtype=np.float64)
    print("averaged the checkpoints of steps %s" % [s for s, _ in last])
    gf.unflatten_into(model, "marian", avg.astype(np.float32))
    mt.save_marian(model, args.out, torch.float32)
    for f in ("source.spm", "target.spm", "vocab.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(BUNDLED, f), os.path.join(args.out, f))
    # the bundled model's config as it is (save_marian wrote the module's copy of it)
    shutil.copy(os.path.join(BUNDLED, "config.json"), os.path.join(args.out, "config.json"))
    print("wrote %s in %.1f minutes" % (args.out, (time.time() - t0) / 60))


if __name__ == "__main__":
    main()
