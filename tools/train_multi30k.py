#!/usr/bin/python3
"""Train the bundled German->English model on Multi30k (CPU, ~90 minutes).

  /usr/bin/python3 tools/train_multi30k.py [--out models/multi30k_de_en] [--minutes 85]

Data: ../shared/data/multi30k: train for training, val for model selection
(val BLEU, greedy); the test sets are never read here.

Vocabulary: one joint SentencePiece unigram model (spm_train, 8000 pieces,
nmt_nfkc) over the German and English training text.  Its ids are the model
ids: </s> = 0, <unk> = 1, pieces 2..7999, and <pad> = 8000 is appended (as
Marian's vocab.json has it), which is also the decoder start token.

Model: a Transformer in the Marian layout (tools/marian_torch.py): d_model
256, 3 encoder + 3 decoder layers, 4 heads, FFN 1024, swish, post-norm,
sinusoidal positions, embeddings scaled by sqrt(d_model) and shared between
encoder, decoder and output.  Training as in the paper: label smoothing 0.1,
Adam (0.9, 0.98, 1e-9) with the warmup-then-inverse-sqrt schedule, dropout
0.1, batches of about 3000 target tokens.  Matrix products run in bfloat16
(torch.autocast; about 3x faster on CPUs with AMX/AVX-512 BF16), master
weights and the optimizer stay fp32.  Seeded; one thread per core.

Output, in the directory --out, as Hugging Face publishes OPUS-MT models:
config.json, model.safetensors (fp16), source.spm, target.spm (the same
joint model), vocab.json; and train_log.tsv.
"""
import argparse
import gzip
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import sentencepiece as spm
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import marian_torch as mt  # noqa: E402
from bleu import corpus_bleu  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data", "multi30k")
SEED = 1234


def read(split, lang):
    with gzip.open(os.path.join(DATA, "%s.%s.gz" % (split, lang)), "rt", encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def train_spm(out_dir, vocab_size):
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "train.txt")
        with open(text, "w", encoding="utf-8") as f:
            for lang in ("de", "en"):
                f.write("\n".join(read("train", lang)) + "\n")
        prefix = os.path.join(tmp, "joint")
        subprocess.run(["spm_train", "--input=" + text, "--model_prefix=" + prefix,
                        "--vocab_size=%d" % vocab_size, "--model_type=unigram",
                        "--character_coverage=1.0", "--eos_id=0", "--unk_id=1",
                        "--bos_id=-1", "--pad_id=-1", "--seed_sentencepiece_size=1000000",
                        "--num_threads=1", "--random_seed=%d" % SEED],
                       check=True, capture_output=True)
        for name in ("source.spm", "target.spm"):
            shutil.copy(prefix + ".model", os.path.join(out_dir, name))
    sp = spm.SentencePieceProcessor(model_file=os.path.join(out_dir, "source.spm"))
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    vocab["<pad>"] = sp.get_piece_size()
    with open(os.path.join(out_dir, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False, indent=0)
    return sp, vocab


def batches(pairs, max_tokens, shuffle, rng):
    """Length-sorted batches of about max_tokens target tokens."""
    order = sorted(range(len(pairs)), key=lambda i: (len(pairs[i][1]), len(pairs[i][0])))
    out, cur, longest = [], [], 0
    for i in order:
        longest_new = max(longest, len(pairs[i][1]), len(pairs[i][0]))
        if cur and longest_new * (len(cur) + 1) > max_tokens:
            out.append(cur)
            cur, longest_new = [], max(len(pairs[i][1]), len(pairs[i][0]))
        cur.append(i)
        longest = longest_new
    if cur:
        out.append(cur)
    if shuffle:
        rng.shuffle(out)
    return out


def pad_to(seqs, pad):
    n = max(len(s) for s in seqs)
    return torch.tensor([s + [pad] * (n - len(s)) for s in seqs])


def evaluate_bleu(model, sp, src_lines, ref_lines, eos, bf16):
    hyps = []
    model.eval()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        for s in src_lines:
            ids = mt.generate(model, sp.encode(s) + [eos], mt.generation_config(cfg=model.cfg), num_beams=1)
            hyps.append(sp.decode(ids))
    model.train()
    return corpus_bleu(hyps, [ref_lines])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "multi30k_de_en"))
    ap.add_argument("--minutes", type=float, default=85.0, help="training time budget")
    ap.add_argument("--max-epochs", type=int, default=40)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--tokens", type=int, default=3000, help="target tokens per batch")
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--lr-factor", type=float, default=0.35)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--bf16", type=int, default=1, help="bfloat16 autocast for the products")
    args = ap.parse_args()

    random.seed(SEED)
    torch.manual_seed(SEED)
    torch.set_num_threads(args.threads)
    rng = random.Random(SEED)
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "train_log.tsv"), "w")

    def say(*fields):
        line = "\t".join(str(f) for f in fields)
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    t_start = time.time()
    sp, vocab = train_spm(args.out, args.vocab)
    eos, unk, pad = 0, 1, len(vocab) - 1
    cfg = mt.marian_config(len(vocab), 256, 3, 4, 1024, pad=pad, eos=eos, unk=unk, max_pos=256)
    say("# vocabulary", len(vocab), "pieces; spm trained in %.0f s" % (time.time() - t_start))

    train = [(sp.encode(d) + [eos], sp.encode(e) + [eos])
             for d, e in zip(read("train", "de"), read("train", "en"))]
    val_de, val_en = read("val", "de"), read("val", "en")
    val = [(sp.encode(d) + [eos], sp.encode(e) + [eos]) for d, e in zip(val_de, val_en)]

    model = mt.Marian(cfg)
    for p in model.parameters():
        if p.dim() > 1:
            torch.nn.init.xavier_uniform_(p)
    with torch.no_grad():
        model.shared.weight.normal_(0, cfg["d_model"] ** -0.5)
        model.shared.weight[pad].zero_()
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    d = cfg["d_model"]
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: args.lr_factor * d ** -0.5 * min((s + 1) ** -0.5, (s + 1) * args.warmup ** -1.5))
    say("# parameters", sum(p.numel() for p in model.parameters()))
    say("epoch", "step", "train_loss", "val_loss", "val_bleu", "minutes")

    best, step = -1.0, 0
    for epoch in range(1, args.max_epochs + 1):
        total, count = 0.0, 0
        for b in batches(train, args.tokens, True, rng):
            src = pad_to([train[i][0] for i in b], pad)
            tgt = pad_to([train[i][1] for i in b], pad)
            tgt_in = torch.cat([torch.full((len(b), 1), pad), tgt[:, :-1]], dim=1)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(args.bf16)):
                logits = model(src, tgt_in)
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tgt.reshape(-1),
                                   ignore_index=pad, label_smoothing=0.1)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            ntok = int(tgt.ne(pad).sum())
            total += float(loss) * ntok
            count += ntok
            if step % 50 == 0:
                say("# step %d, loss %.3f, %.1f minutes" % (step, total / count, (time.time() - t_start) / 60))
        model.eval()
        with torch.no_grad():
            vl, vc = 0.0, 0
            for b in batches(val, 8000, False, rng):
                src = pad_to([val[i][0] for i in b], pad)
                tgt = pad_to([val[i][1] for i in b], pad)
                tgt_in = torch.cat([torch.full((len(b), 1), pad), tgt[:, :-1]], dim=1)
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(args.bf16)):
                    logits = model(src, tgt_in).float()
                vl += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1),
                                            ignore_index=pad, reduction="sum"))
                vc += int(tgt.ne(pad).sum())
        bleu = evaluate_bleu(model, sp, val_de, val_en, eos, bool(args.bf16))
        minutes = (time.time() - t_start) / 60
        say(epoch, step, "%.4f" % (total / count), "%.4f" % (vl / vc), "%.2f" % bleu, "%.1f" % minutes)
        if bleu > best:
            best = bleu
            mt.save_marian(model, args.out, dtype=torch.float16)
            say("# saved epoch %d (val BLEU %.2f)" % (epoch, bleu))
        model.train()
        per_epoch = minutes / epoch
        if minutes + per_epoch > args.minutes:
            break
    say("# done: best val BLEU %.2f, %.1f minutes" % (best, (time.time() - t_start) / 60))


if __name__ == "__main__":
    main()
