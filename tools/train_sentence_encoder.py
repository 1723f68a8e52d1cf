#!/usr/bin/python3
"""Builds the bundled German-English sentence encoder
models/multi30k_sentence_de_en/ (XLM-RoBERTa layout, sentence-transformers
modules: Transformer, mean Pooling, Normalize) from the encoder of the
bundled translation model models/multi30k_de_en/, fine-tuned on Multi30k's
29,000 training pairs with a symmetric in-batch contrastive loss.

    /usr/bin/python3 tools/train_sentence_encoder.py [--out DIR] [--epochs 10]
        [--batch-size 128] [--lr 1e-4] [--temperature 0.05] [--threads 1]
        [--seed 1] [--limit N]            # --limit: a smoke run on N pairs

Vocabulary.  The translation model's SentencePiece model (source.spm ==
target.spm) has "</s>" at id 0 and "<unk>" at id 1, and no "<s>";
XLM-R's tokenizer (XLMRobertaTokenizer and the fast converter alike)
assumes the layout of XLM-R's own model: 0 <unk>, 1 <s>, 2 </s>.  With the
file copied as it is, "." (SentencePiece id 2) would get id 3 (the id of
<unk>) and an unknown character (SentencePiece id 1) id 2 (</s>).  So
sentencepiece.bpe.model is the same model with its pieces re-ordered
(<unk>, <s> added as a control piece, </s>, then the other 7,998 pieces in
their order; scores and normalizer unchanged, so the segmentation is the
same: checked on all of Multi30k), 8,001 pieces, and ids are XLM-R's
fairseq rule over it: <s> 0, <pad> 1, </s> 2, <unk> 3, a piece its
SentencePiece id + 1, <mask> 8,002; vocab_size 8,003.

Weights.  word_embeddings: the Marian row of the same piece (vocab.json)
times sqrt(256) = 16 (Marian's scale_embedding folded in); </s> and <unk>
from Marian's; <s>, <pad>, <mask> zero.  position_embeddings: Marian's
sinusoidal table (sin | cos halves) from row pad_token_id + 1 = 2, rows 0
and 1 zero (max_position_embeddings 258).  token_type_embeddings: one zero
row.  embeddings.LayerNorm: new (Marian has none); bias 0, weight the mean
per-token standard deviation of Marian's encoder input over the training
text, so that the copied layers see inputs of about their usual scale.
Layers: q/k/v_proj -> attention.self.query/key/value, out_proj ->
attention.output.dense, self_attn_layer_norm -> attention.output.LayerNorm,
fc1 -> intermediate.dense, fc2 -> output.dense, final_layer_norm ->
output.LayerNorm; hidden_act silu (Marian's swish); layer_norm_eps 1e-5
(torch's LayerNorm default, which Marian's used).  Both are post-LN.

Training: AdamW, linear warm-up (10% of steps) and decay, in-batch InfoNCE
both ways (loss = (CE(S/t) + CE(S^T/t)) / 2 over cosine similarities S of
mean-pooled, normalized embeddings), dropout 0.1; batches of sentences of
about the same length (see batches()).  The epoch kept is the
one with the best mean validation top-1 (val: 1,014 pairs).  Top-1
retrieval: for each sentence of one side, is its translation the nearest
by cosine among all sentences of the other side.
"""
import argparse
import gzip
import json
import math
import os
import shutil
import struct
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_torch as bt  # noqa: E402
from marian_torch import load_marian  # noqa: E402
from nllb_tokenizer import _fields  # noqa: E402  (the protobuf reader)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = "/work/shared/data/multi30k"
SETS = ["val", "test_2016_flickr", "test_2017_flickr"]


# ------------------------------------------------- SentencePiece re-indexing
#
# The ModelProto is edited as protobuf wire format by hand (no protobuf
# package here): field 1 (repeated SentencePiece: 1 piece, 2 score, 3 type)
# and, in field 2 (TrainerSpec), vocab_size (4), unk_id (40), bos_id (41),
# eos_id (42), pad_id (43); everything else is copied byte for byte.

def _enc_varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        c = v & 0x7F
        v >>= 7
        if v:
            out.append(c | 0x80)
        else:
            out.append(c)
            return bytes(out)


def _len_field(f, payload):
    return _enc_varint((f << 3) | 2) + _enc_varint(len(payload)) + payload


def _piece(text, score, ptype):
    b = _len_field(1, text.encode("utf-8")) + _enc_varint((2 << 3) | 5) + struct.pack("<f", score)
    if ptype != 1:  # NORMAL is the default
        b += _enc_varint(3 << 3) + _enc_varint(ptype)
    return b


def xlmr_layout_spm(src_bytes):
    """The model re-ordered to XLM-R's layout: <unk> 0, <s> 1, </s> 2, then
    the other pieces in their order.  Returns (bytes, old id -> new id)."""
    pieces, other = [], []
    for f, w, v, raw in _fields(src_bytes):
        if f == 1:
            p = {1: b"", 2: 0.0, 3: 1}
            for ff, ww, vv, _ in _fields(v):
                p[ff] = struct.unpack("<f", vv)[0] if ww == 5 else vv
            pieces.append((p[1].decode("utf-8"), p[2], p[3]))
        else:
            other.append((f, w, v, raw))
    types = {name: t for name, _, t in pieces}
    assert types.get("<unk>") == 2 and types.get("</s>") == 3 and "<s>" not in types, types
    specials = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)]
    rest = [p for p in pieces if p[0] not in ("<unk>", "</s>")]
    new = specials + rest
    new_id = {name: i for i, (name, _, _) in enumerate(new)}
    old_to_new = {i: new_id[name] for i, (name, _, _) in enumerate(pieces)}
    out = bytearray()
    for name, score, t in new:
        out += _len_field(1, _piece(name, score, t))
    for f, w, v, raw in other:
        if f == 2:  # TrainerSpec
            spec = bytearray()
            for ff, ww, vv, rr in _fields(v):
                if ff in (4, 40, 41, 42, 43):
                    continue
                spec += rr
            for ff, val in ((4, len(new)), (40, 0), (41, 1), (42, 2), (43, -1)):
                spec += _enc_varint(ff << 3) + _enc_varint(val)
            out += _len_field(2, bytes(spec))
        else:
            out += raw
    return bytes(out), old_to_new


# ------------------------------------------------------------------- data

def read_lines(name, lang):
    with gzip.open(os.path.join(DATA, "%s.%s.gz" % (name, lang)), "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def check_same_segmentation(old_file, new_file, texts):
    import sentencepiece as spm
    a = spm.SentencePieceProcessor(model_file=old_file)
    b = spm.SentencePieceProcessor(model_file=new_file)
    for t in texts:
        pa, pb = a.encode(t, out_type=str), b.encode(t, out_type=str)
        if pa != pb:
            raise SystemExit("segmentation differs on %r: %s / %s" % (t, pa, pb))
    assert b.unk_id() == 0 and b.bos_id() == 1 and b.eos_id() == 2 and b.pad_id() == -1
    assert 0 in b.encode("\u4e2d")  # an unknown character: id 0


# ------------------------------------------------------------------ model

def build_from_marian(marian_dir, old_to_new, sample_ids, max_seq_length):
    """old_to_new: SentencePiece id in source.spm (= Marian id) -> id in
    the re-ordered model; sample_ids: Marian ids of sentences."""
    marian = load_marian(marian_dir)
    mcfg = marian.cfg
    with open(os.path.join(marian_dir, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    d = mcfg["d_model"]
    n_pieces = len(old_to_new) + 1  # + <s>
    scale = math.sqrt(d) if mcfg.get("scale_embedding") else 1.0
    cfg = bt.xlmr_config(n_pieces + 2, d, mcfg["encoder_layers"], mcfg["encoder_attention_heads"],
                         mcfg["encoder_ffn_dim"], mcfg["max_position_embeddings"] + 2,
                         act="silu", layer_norm_eps=marian.encoder.layers[0].final_layer_norm.eps)
    assert mcfg["activation_function"] in ("swish", "silu") and not mcfg.get("normalize_before")
    assert mcfg.get("position_embedding", "sinusoidal_half") == "sinusoidal_half"
    model = bt.SentenceEncoder(cfg, bt.Pooling(d, "mean"), normalize=True,
                               max_seq_length=max_seq_length)
    t = model.transformer
    emb = marian.encoder.embed_tokens.weight.detach()
    with torch.no_grad():
        W = torch.zeros(cfg["vocab_size"], d)
        for piece, mid in vocab.items():
            if piece == "<pad>":
                continue
            new_spm = old_to_new[mid]  # Marian ids are the old SentencePiece ids
            fairseq = {"<unk>": 3, "</s>": 2}.get(piece, new_spm + 1)
            W[fairseq] = emb[mid] * scale
        t.embeddings.word_embeddings.weight.copy_(W)
        P = torch.zeros(cfg["max_position_embeddings"], d)
        P[2:] = marian.encoder.embed_positions_table[:cfg["max_position_embeddings"] - 2]
        t.embeddings.position_embeddings.weight.copy_(P)
        t.embeddings.token_type_embeddings.weight.zero_()
        # scale of Marian's encoder input, per token, over sample sentences
        x = torch.cat([emb[torch.tensor(s)] * scale + marian.encoder.embed_positions_table[:len(s)]
                       for s in sample_ids])
        t.embeddings.LayerNorm.weight.fill_(x.std(dim=-1, unbiased=False).mean().item())
        t.embeddings.LayerNorm.bias.zero_()
        for src, dst in zip(marian.encoder.layers, t.encoder.layer):
            pairs = [(src.self_attn.q_proj, dst.attention.self.query),
                     (src.self_attn.k_proj, dst.attention.self.key),
                     (src.self_attn.v_proj, dst.attention.self.value),
                     (src.self_attn.out_proj, dst.attention.output.dense),
                     (src.self_attn_layer_norm, dst.attention.output.LayerNorm),
                     (src.fc1, dst.intermediate.dense), (src.fc2, dst.output.dense),
                     (src.final_layer_norm, dst.output.LayerNorm)]
            for a, b in pairs:
                b.weight.copy_(a.weight)
                b.bias.copy_(a.bias)
    return model


def batches(n, size, g, length, pool=16):
    """An epoch's batches: a random permutation cut into pools of `pool`
    batches, each pool sorted by length and cut into batches (less
    padding), the batches in random order; the last incomplete batch is
    dropped."""
    perm = torch.randperm(n, generator=g).tolist()
    perm = perm[:n - n % size]
    out = []
    for p in range(0, len(perm), size * pool):
        chunk = sorted(perm[p:p + size * pool], key=length)
        out += [chunk[i:i + size] for i in range(0, len(chunk), size)]
    return [out[i] for i in torch.randperm(len(out), generator=g).tolist()]


# ------------------------------------------------------------- evaluation

def embed_all(model, id_lists, batch=256):
    model.eval()
    out = []
    order = sorted(range(len(id_lists)), key=lambda i: len(id_lists[i]))
    with torch.no_grad():
        for i in range(0, len(order), batch):
            idx = order[i:i + batch]
            ids, mask = bt.pad_batch([id_lists[j] for j in idx], 1)
            out.append((idx, model(ids, mask)[1]))
    res = torch.zeros(len(id_lists), out[0][1].shape[1])
    for idx, e in out:
        res[idx] = e
    return res


def top1(model, de_ids, en_ids):
    """(de->en, en->de) top-1 retrieval accuracy in percent."""
    a, b = embed_all(model, de_ids), embed_all(model, en_ids)
    sim = a @ b.T
    gold = torch.arange(len(de_ids))
    return (100.0 * (sim.argmax(1) == gold).float().mean().item(),
            100.0 * (sim.argmax(0) == gold).float().mean().item())


# ------------------------------------------------------------------- main

def write_model_dir(model, out, spm_bytes, max_seq_length):
    os.makedirs(out, exist_ok=True)
    bt.save_encoder(model, out)
    with open(os.path.join(out, "sentencepiece.bpe.model"), "wb") as f:
        f.write(spm_bytes)
    specials = {"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>", "mask_token": "<mask>",
                "pad_token": "<pad>", "sep_token": "</s>", "unk_token": "<unk>"}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(dict({"tokenizer_class": "XLMRobertaTokenizer", "model_max_length": max_seq_length},
                       **specials), f, indent=2)
        f.write("\n")
    with open(os.path.join(out, "special_tokens_map.json"), "w") as f:
        json.dump(specials, f, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--marian", default=os.path.join(ROOT, "models", "multi30k_de_en"))
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "multi30k_sentence_de_en"))
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=float, default=0.1, help="share of the steps")
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--temperature", type=float, default=0.05)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--max-seq-length", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0, help="train on the first N pairs only (smoke run)")
    ap.add_argument("--eval-limit", type=int, default=0, help="evaluate on the first N pairs only")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    t0 = time.time()

    src_spm = os.path.join(a.marian, "source.spm")
    with open(src_spm, "rb") as f:
        spm_bytes, old_to_new = xlmr_layout_spm(f.read())
    os.makedirs(a.out, exist_ok=True)
    new_spm = os.path.join(a.out, "sentencepiece.bpe.model")
    with open(new_spm, "wb") as f:
        f.write(spm_bytes)
    data = {name: (read_lines(name, "de"), read_lines(name, "en")) for name in ["train"] + SETS}
    check_same_segmentation(src_spm, new_spm, [t for de, en in data.values() for t in de + en])
    tok = bt.XLMRobertaTokenizer(new_spm)
    assert tok.vocab_size == len(old_to_new) + 3

    def ids_of(texts, limit=0):
        texts = texts[:limit] if limit else texts
        return [tok.encode(t.strip(), a.max_seq_length) for t in texts]

    train_de, train_en = ids_of(data["train"][0], a.limit), ids_of(data["train"][1], a.limit)
    evals = {name: (ids_of(de, a.eval_limit), ids_of(en, a.eval_limit)) for name, (de, en) in
             ((n, data[n]) for n in SETS)}
    # Marian's ids of a sample of training sentences, for the input scale
    import sentencepiece as spm
    sp_old = spm.SentencePieceProcessor(model_file=src_spm)
    sample = [sp_old.encode(t) + [0] for t in (data["train"][0][:500] + data["train"][1][:500])]

    model = build_from_marian(a.marian, old_to_new, sample, a.max_seq_length)
    # sanity: the tokenizer's ids index the rows built from the same pieces
    assert tok.convert_tokens_to_ids([".", "<unk>", "</s>"]) == [old_to_new[2] + 1, 3, 2]
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = a.dropout
    model.cfg["hidden_dropout_prob"] = model.cfg["attention_probs_dropout_prob"] = a.dropout
    n_params = sum(p.numel() for p in model.parameters())
    print("vocab %d, parameters %d, setup %.0f s" % (model.cfg["vocab_size"], n_params, time.time() - t0),
          flush=True)

    log_path = os.path.join(a.out, "train_log.tsv")
    cols = ["epoch", "step", "train_loss"] + ["%s_%s" % (s, d) for s in ("val", "test2016", "test2017")
                                              for d in ("de_en", "en_de")] + ["minutes"]
    log = ["# %s" % " ".join(sys.argv[1:] or ["(defaults)"]),
           "# vocabulary\t%d\tparameters\t%d" % (model.cfg["vocab_size"], n_params),
           "\t".join(cols)]

    def evaluate(epoch, step, loss):
        scores = []
        for name in SETS:
            scores += top1(model, *evals[name])
        row = [str(epoch), str(step), "%.4f" % loss if loss == loss else "-"] + \
            ["%.1f" % s for s in scores] + ["%.1f" % ((time.time() - t0) / 60)]
        log.append("\t".join(row))
        print("\t".join(row), flush=True)
        with open(log_path, "w") as f:
            f.write("\n".join(log) + "\n")
        return scores

    scores = evaluate(0, 0, float("nan"))
    best = (sum(scores[:2]) / 2, 0)
    best_state = {k: v.clone() for k, v in model.state_dict().items()}

    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    n = len(train_de)
    steps_per_epoch = n // a.batch_size
    total = steps_per_epoch * a.epochs
    warm = max(1, int(a.warmup * total))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm))))
    g = torch.Generator().manual_seed(a.seed)
    step = 0
    for epoch in range(1, a.epochs + 1):
        model.train()
        run, count = 0.0, 0
        for idx in batches(n, a.batch_size, g, lambda i: max(len(train_de[i]), len(train_en[i]))):
            ids, mask = bt.pad_batch([train_de[i] for i in idx] + [train_en[i] for i in idx], 1)
            _, e = model(ids, mask)
            de, en = e[:len(idx)], e[len(idx):]
            logits = de @ en.T / a.temperature
            gold = torch.arange(len(idx))
            loss = (F.cross_entropy(logits, gold) + F.cross_entropy(logits.T, gold)) / 2
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            run += loss.item()
            count += 1
            if step % 50 == 0:
                print("  step %d loss %.4f (%.1f min)" % (step, run / count, (time.time() - t0) / 60),
                      flush=True)
        scores = evaluate(epoch, step, run / max(count, 1))
        if sum(scores[:2]) / 2 > best[0]:
            best = (sum(scores[:2]) / 2, epoch)
            best_state = {k: v.clone() for k, v in model.state_dict().items()}

    model.load_state_dict(best_state)
    model.eval()
    log.append("# kept epoch %d (best mean val top-1 %.2f); %.1f minutes, %d thread(s)"
               % (best[1], best[0], (time.time() - t0) / 60, a.threads))
    with open(log_path, "w") as f:
        f.write("\n".join(log) + "\n")
    write_model_dir(model, a.out, spm_bytes, a.max_seq_length)
    check = bt.load_encoder(a.out)
    final = []
    for name in SETS:
        final += top1(check, *evals[name])
    print("reloaded: " + " ".join("%.1f" % s for s in final), flush=True)
    write_readme(a, model, n_params, best, final, log, time.time() - t0)


def write_readme(a, model, n_params, best, final, log, seconds):
    size = os.path.getsize(os.path.join(a.out, "model.safetensors"))
    text = """# multi30k_sentence_de_en

A small German-English sentence encoder (sentence embeddings whose cosine
similarity is high for translations of each other), in the layout of a
sentence-transformers model over XLM-RoBERTa: `config.json` (model_type
xlm-roberta, XLMRobertaModel), `model.safetensors` (fp32, {size:.1f} MB,
{n_params:,} parameters), `sentencepiece.bpe.model` with
`tokenizer_config.json` (XLMRobertaTokenizer), `modules.json`
(Transformer -> Pooling -> Normalize), `1_Pooling/config.json` (mean),
`sentence_bert_config.json` (max_seq_length {msl}).

Made by `tools/train_sentence_encoder.py` (seed {seed}, deterministic,
{threads} thread(s), {minutes:.0f} minutes): the 3-layer encoder of the bundled
translation model `models/multi30k_de_en` (d_model 256, 4 heads, ffn 1024,
SiLU, post-LN) copied into XLMRobertaModel's layers, word embeddings taken
from the same pieces (times 16, Marian's embedding scale), the sinusoidal
position table from row 2, a new embedding LayerNorm; then {epochs} epochs on
the 29,000 Multi30k training pairs with a symmetric in-batch contrastive
loss (InfoNCE, temperature {temp}, batch {bs} pairs, AdamW lr {lr}), mean
pooling and L2 normalization.  The epoch kept is the best on the validation
set (epoch {best_epoch}).

The SentencePiece model is the translation model's, with its pieces
re-ordered into XLM-R's layout (<unk> 0, <s> 1, </s> 2, then the rest; the
segmentation is the same); ids by XLM-R's fairseq rule: <s> 0, <pad> 1,
</s> 2, <unk> 3, a piece its SentencePiece id + 1, <mask> {mask};
vocab_size {vocab}.

## Retrieval top-1 (%)

For each sentence of one side, is its translation the most similar (cosine)
among all sentences of the other side (1,000 each; val 1,014):

| set | de -> en | en -> de |
| --- | ---: | ---: |
| val | {f[0]:.1f} | {f[1]:.1f} |
| test_2016_flickr | {f[2]:.1f} | {f[3]:.1f} |
| test_2017_flickr | {f[4]:.1f} | {f[5]:.1f} |

Before fine-tuning (the translation encoder as it is, mean-pooled):
{zero}.

`train_log.tsv` has every epoch.  Reproduce with

    /usr/bin/python3 tools/train_sentence_encoder.py {args}

Use from Python: `tools/bert_torch.py` (`load_encoder`, `encode_texts`).
""".format(size=size / 1e6, n_params=n_params, msl=a.max_seq_length, seed=a.seed, threads=a.threads,
           minutes=seconds / 60, epochs=a.epochs, temp=a.temperature, bs=a.batch_size, lr=a.lr,
           best_epoch=best[1], mask=model.cfg["vocab_size"] - 1, vocab=model.cfg["vocab_size"],
           f=final, zero=_zero_row(log), args=" ".join(sys.argv[1:]))
    with open(os.path.join(a.out, "README.md"), "w") as f:
        f.write(text)


def _zero_row(log):
    for line in log:
        cells = line.split("\t")
        if cells[0] == "0":
            v = cells[3:9]
            return ("val %s / %s, test_2016 %s / %s, test_2017 %s / %s (de->en / en->de)"
                    % tuple(v))
    return "-"


if __name__ == "__main__":
    main()
