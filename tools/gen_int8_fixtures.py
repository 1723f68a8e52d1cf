#!/usr/bin/python3
"""Regenerate the int8 parity fixtures (make fixtures).

For each model fixture of tools/gen_model_fixtures.py (marian_swish fp32,
paper_relu fp16, prenorm_gelu bf16), what its int8 copy (quantize_model())
computes, through torch:
- every weight matrix (linear layers, embeddings, output layer) replaced by
  its int8 values times their scale: torch.quantize_per_channel, axis 0,
  qint8, zero point 0, scale = max |row| / 127, then dequantize();
- every linear product (torch.nn.functional.linear, which nn.Linear and the
  output layer call) given its input quantized per row the same way, to
  quint8 over [min(x, 0), max(x, 0)] (scale = range / 255, zero point =
  round(-min / scale)), then dequantized.
The integer rules are torch's own (quantize_per_channel: round(v · (1 /
scale)) to nearest even, plus the zero point, clamped); only the choice of
scales is ours.  Written to test/fixtures/models/<name>/expected_int8.json
as expected.json is: embeddings, encoder output and generate()'s ids.

Run with Debian's interpreter: /usr/bin/python3 tools/gen_int8_fixtures.py
"""
import json
import os
import sys

import sentencepiece as spm
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import marian_torch as mt  # noqa: E402
import gen_model_fixtures as gm  # noqa: E402

_linear = F.linear


def quantize_weight(w):
    """w (rows, cols) as int8 per row times its fp32 scale."""
    scale = (w.abs().amax(dim=1) / torch.tensor(127.0)).float()
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.quantize_per_channel(w, safe.double(), torch.zeros(w.shape[0], dtype=torch.long), 0, torch.qint8)
    return q.int_repr().float() * scale.unsqueeze(1)


def quantize_input(x):
    """Each row of x (.., k) through quint8 with its own scale and zero point."""
    flat = x.reshape(-1, x.shape[-1]).float()
    lo = torch.minimum(flat.amin(dim=1), torch.tensor(0.0))
    hi = torch.maximum(flat.amax(dim=1), torch.tensor(0.0))
    scale = ((hi - lo) / torch.tensor(255.0)).float()
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    zero = torch.round(-lo / scale).long()
    q = torch.quantize_per_channel(flat, scale.double(), zero, 0, torch.quint8)
    return q.dequantize().reshape(x.shape)


def int8_linear(x, w, b=None):
    # the product of the quantized values in double, rounded once (as the exact int32 sums are)
    y = _linear(quantize_input(x).double(), w.double(), None if b is None else b.double())
    return y.float()


def int8_model(d):
    model = mt.load_marian(d)
    with torch.no_grad():
        seen = set()
        for n, p in model.named_parameters():
            # quantize_model()'s matrices: 2-D, more than one row, not positions
            if p.dim() == 2 and p.shape[0] > 1 and "embed_positions" not in n and id(p) not in seen:
                seen.add(id(p))
                p.copy_(quantize_weight(p))
    return model


def main():
    torch.set_num_threads(1)
    sp = spm.SentencePieceProcessor(model_file=gm.SPM)
    vocab = gm.vocab_for(sp)
    F.linear = int8_linear
    try:
        for name in gm.CONFIGS:
            d = os.path.join(gm.OUT, name)
            model = int8_model(d)
            gen = mt.generation_config(d, model.cfg)
            unk = vocab["<unk>"]
            cases = []
            for text in gm.INPUTS:
                src = [vocab.get(p, unk) for p in sp.encode(text, out_type=str)] + [model.cfg["eos_token_id"]]
                with torch.inference_mode():
                    ids = torch.tensor([src])
                    emb = model.encoder.embed(ids)[0]
                    enc = model.encode(ids)[0][0]
                cases.append({
                    "input": text, "src": src,
                    "embed": [round(x, 7) for x in emb.flatten().tolist()],
                    "encode": [round(x, 7) for x in enc.flatten().tolist()],
                    "decode": [{"options": o, "ids": mt.generate(model, src, gen, **o)} for o in gm.DECODE],
                })
            with open(os.path.join(d, "expected_int8.json"), "w") as f:
                json.dump(cases, f)
            with open(os.path.join(d, "expected.json")) as f:
                fp = json.load(f)
            same = sum(a["ids"] == b["ids"] for c8, c in zip(cases, fp) for a, b in zip(c8["decode"], c["decode"]))
            print("wrote %s/expected_int8.json: %d cases; decoded ids equal to the original's in %d of %d"
                  % (d, len(cases), same, sum(len(c["decode"]) for c in cases)))
    finally:
        F.linear = _linear


if __name__ == "__main__":
    main()
