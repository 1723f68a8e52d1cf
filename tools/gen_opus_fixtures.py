#!/usr/bin/python3
"""Fixtures for the real OPUS-MT configurations (make fixtures).

For each published config.json in ../shared/data/spm/ (opus-mt-en-mg,
opus-mt-zh-en; the files themselves stay there), a model with every key of
it, only the layer counts shrunk to 1, and weights of the configured shapes
drawn from small codebooks (test/fixtures/opus/*.f16: 257 chunks of 256
random fp16 values each), so that CI needs no large file: chunk c of row r
of the t-th tensor (in name order; vectors are one row) is codebook row
(r + c * (r div 257) + 11 t + 3 c) mod 257, all rows distinct.
test/pgtap/13_opus_configs.sql builds the same safetensors file in SQL.
opus-mt-en-mg also gets a generation_config.json of the published kind.

The tokenizer is test/fixtures/spm's tiny model, its pieces numbered in
Marian's layout within the configured vocabulary.  expected.json holds, for
a few inputs, the ids generate() gives (tools/marian_torch.py: Hugging
Face's rules) with the model's own generation config and with options.

Run with Debian's interpreter: /usr/bin/python3 tools/gen_opus_fixtures.py
"""
import json
import os
import sys

import sentencepiece as spm
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import marian_torch as mt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data", "spm")
OUT = os.path.join(ROOT, "test", "fixtures", "opus")
SPM = os.path.join(ROOT, "test", "fixtures", "spm", "tiny_unigram_identity.model")
MODELS = ["opus-mt-en-mg", "opus-mt-zh-en"]
CHUNK, ROWS = 256, 257
# codebooks: (file, mean, standard deviation)
BOOKS = {"mat": (0.0, 0.04), "emb": (0.0, 0.05), "bias": (0.0, 0.05), "lnw": (1.0, 0.1), "flb": (0.0, 0.5)}
EOS_BOOST = 9.5
INPUTS = ["SELECT attention FROM memory", "the model's weights live in tables"]
# the model's own generation config first; the others bounded, the reference being slow
DECODE = [
    {}, {"num_beams": 1}, {"num_beams": 2, "max_new_tokens": 12}, {"num_beams": 4, "early_stopping": True},
    {"num_beams": 3, "no_repeat_ngram_size": 2, "max_new_tokens": 20},
    {"num_beams": 3, "repetition_penalty": 1.3, "max_new_tokens": 20},
    {"num_beams": 3, "min_length": 12, "max_new_tokens": 20}, {"num_beams": 4, "length_penalty": 0.6, "max_new_tokens": 20},
]
GENERATION = {"bos_token_id": 0, "eos_token_id": 0, "forced_eos_token_id": 0, "max_length": 512,
              "num_beams": 4, "renormalize_logits": True}


def book_kind(name):
    if name == "final_logits_bias":
        return "flb"
    if "layer_norm" in name:
        return "lnw" if name.endswith("weight") else "bias"
    if name.endswith("bias"):
        return "bias"
    if name == "model.shared.weight":
        return "emb"
    return "mat"


def chunk_ids(t, rows, chunks):
    """Codebook rows of the t-th tensor's chunks, row by row (see the docstring)."""
    return [(r + c * (r // ROWS) + 11 * t + 3 * c) % ROWS for r in range(rows) for c in range(chunks)]


def main():
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    g = torch.Generator().manual_seed(20261122)
    books = {k: (torch.randn(ROWS, CHUNK, generator=g) * sd + mean).to(torch.float16) for k, (mean, sd) in BOOKS.items()}
    sp = spm.SentencePieceProcessor(model_file=SPM)
    out = {}
    for name in MODELS:
        with open(os.path.join(DATA, name, "config.json")) as f:
            cfg = json.load(f)
        cfg["encoder_layers"] = cfg["decoder_layers"] = 1
        model = mt.Marian(cfg)
        state = mt.marian_state(model, torch.float16)
        names = sorted(state)
        # EOS (id 0) is chunk 0 of final_logits_bias: raise it in its codebook row
        t_flb = names.index("final_logits_bias")
        books["flb"][(11 * t_flb) % ROWS, 0] = EOS_BOOST
        for t, n in enumerate(names):
            shape = list(state[n].shape)
            rows, cols = (shape[0], shape[1]) if len(shape) == 2 and shape[0] > 1 else (1, state[n].numel())
            chunks = -(-cols // CHUNK)
            ids = torch.tensor(chunk_ids(t, rows, chunks))
            flat = books[book_kind(n)][ids].reshape(rows, chunks * CHUNK)[:, :cols]
            state[n] = flat.reshape(shape).clone()
        sd = {(k if k == "final_logits_bias" else k[len("model."):]): v.float() for k, v in state.items()}
        missing, unexpected = model.load_state_dict(sd, strict=False)
        assert not unexpected and all(m.startswith(("encoder.embed_tokens", "decoder.embed_tokens")) for m in missing), (missing, unexpected)
        model.eval()

        pad = cfg["pad_token_id"]
        vocab = {"</s>": 0, "<unk>": 1}
        for i in range(sp.get_piece_size()):
            p = sp.id_to_piece(i)
            if p not in vocab:
                vocab[p] = len(vocab)
        vocab["<pad>"] = pad
        gen_file = None
        if name == "opus-mt-en-mg":
            gen_file = dict(GENERATION, bad_words_ids=[[pad]], decoder_start_token_id=pad, pad_token_id=pad)
        gen = dict(mt.GENERATION_DEFAULTS, **gen_file) if gen_file else mt.generation_config(cfg=cfg)
        cases = []
        for text in INPUTS:
            src = [vocab.get(p, 1) for p in sp.encode(text, out_type=str)] + [cfg["eos_token_id"]]
            dec = []
            for o in DECODE:
                ids = mt.generate(model, src, gen, **o)
                dec.append({"options": o, "ids": ids})
                print(name, repr(text), o, len(ids), flush=True)
            cases.append({"input": text, "src": src, "decode": dec})
        out[name] = {"tensors": [{"name": n, "shape": list(state[n].shape), "book": book_kind(n)} for n in names],
                     "vocab": vocab, "generation_config": gen_file, "cases": cases}
    for k, b in books.items():
        with open(os.path.join(OUT, k + ".f16"), "wb") as f:
            f.write(b.view(torch.int16).numpy().tobytes())
    with open(os.path.join(OUT, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
