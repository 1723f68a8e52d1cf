#!/usr/bin/python3
"""Regenerate the model parity fixtures (make fixtures).

Builds three small random-weight Transformers with tools/marian_torch.py
(torch.nn modules) in the configurations the field's checkpoints vary:

  marian_swish   post-norm, swish, Marian's half-split sinusoidal positions,
                 scaled embeddings, tied output + final_logits_bias, whose
                 pad logit is high enough to win were it not banned
                 (bad_words_ids); fp32
  paper_relu     the paper: post-norm, ReLU, interleaved sinusoidal
                 positions; untied lm_head; no final_logits_bias; stored fp16
  prenorm_gelu   pre-norm, GELU, learned positions, final LayerNorms,
                 unscaled embeddings, separate encoder/decoder embeddings and
                 no lm_head (tied to the decoder's); stored bf16; a
                 generation_config.json that overrides config.json
                 (early_stopping "never", renormalize_logits, a two-token
                 bad word, length_penalty 1.2, max_length 40)

Each is written as a Marian directory (config.json, model.safetensors,
source.spm, target.spm, vocab.json; the tokenizer is test/fixtures/spm's
tiny unigram model) under test/fixtures/models/<name>/, with expected.json:
for a few inputs, the source ids, PyTorch's embeddings and encoder output,
and the ids generate() gives (tools/marian_torch.py: Hugging Face's rules)
with each of DECODE's option sets.  EOS has a raised bias, so that most
outputs end well before max_length and beam search differs from greedy.

Run with Debian's interpreter: /usr/bin/python3 tools/gen_model_fixtures.py
"""
import json
import os
import shutil
import sys

import sentencepiece as spm
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import marian_torch as mt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "test", "fixtures", "models")
SPM = os.path.join(ROOT, "test", "fixtures", "spm", "tiny_unigram_identity.model")

INPUTS = [
    "SELECT attention FROM memory",
    "the model's weights live in tables",
    "Transformer",
    "softmax of the scaled dot product, then the values",
    "  tokens   and\tpositions  ",
    "a",
]

# generate() options of each expected output (None: the model's)
DECODE = [
    {"num_beams": 1},
    {},
    {"num_beams": 3},
    {"num_beams": 3, "length_penalty": 0.6},
    {"num_beams": 3, "length_penalty": 2.0},
    {"num_beams": 5, "max_length": 7},
    {"num_beams": 3, "early_stopping": True},
    {"num_beams": 3, "early_stopping": False},
    {"num_beams": 3, "no_repeat_ngram_size": 2},
    {"num_beams": 1, "no_repeat_ngram_size": 2},
    {"num_beams": 3, "repetition_penalty": 1.5},
    {"num_beams": 1, "repetition_penalty": 1.5},
    {"num_beams": 3, "min_length": 12},
    {"num_beams": 4, "max_new_tokens": 6},
    {"num_beams": 1, "max_new_tokens": 6},
]

CONFIGS = {
    "marian_swish": dict(activation_function="swish", normalize_before=False,
                         add_final_layer_norm=False, position_embedding="sinusoidal_half",
                         scale_embedding=True, dtype=torch.float32, tie=True, eos_bias=5.0),
    "paper_relu": dict(activation_function="relu", normalize_before=False,
                       add_final_layer_norm=False, position_embedding="sinusoidal_interleaved",
                       scale_embedding=True, dtype=torch.float16, tie=False, no_bias=True),
    "prenorm_gelu": dict(activation_function="gelu", normalize_before=True,
                         add_final_layer_norm=True, position_embedding="learned",
                         scale_embedding=False, dtype=torch.bfloat16, tie=True, untie_embed=True, eos_bias=7.0,
                         generation={"num_beams": 3, "early_stopping": "never", "renormalize_logits": True,
                                     "length_penalty": 1.2, "max_length": 40, "forced_eos_token_id": 0,
                                     "bad_words_ids": "pad and a two-token word"}),
}


def vocab_for(sp):
    """Marian's layout: </s> = 0, <unk> = 1, the other pieces, <pad> last."""
    vocab = {"</s>": 0, "<unk>": 1}
    for i in range(sp.get_piece_size()):
        p = sp.id_to_piece(i)
        if p not in vocab:
            vocab[p] = len(vocab)
    vocab["<pad>"] = len(vocab)
    return vocab


def build(name, opts, sp, vocab, seed):
    torch.manual_seed(seed)
    pad = vocab["<pad>"]
    cfg = mt.marian_config(len(vocab), 32, 2, 4, 64, pad=pad, eos=0, unk=1, max_pos=64,
                           activation_function=opts["activation_function"],
                           normalize_before=opts["normalize_before"],
                           add_final_layer_norm=opts["add_final_layer_norm"],
                           position_embedding=opts["position_embedding"],
                           scale_embedding=opts["scale_embedding"], num_beams=3, dropout=0.0)
    model = mt.Marian(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
        model.shared.weight.normal_(0, 0.5)
        model.final_logits_bias.normal_(0, 0.5)
        model.final_logits_bias[0, 0] += opts.get("eos_bias", 0.0)   # EOS comes now and then
        if name == "marian_swish":
            model.final_logits_bias[0, pad] += 12.0  # pad would win, but is a bad word
        for n_, p in model.named_parameters():
            if "layer_norm" in n_ and n_.endswith("weight"):
                p.add_(1.0)
    model.eval()

    d = os.path.join(OUT, name)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    state = mt.marian_state(model, opts["dtype"])
    if not opts["tie"]:
        # an untied output layer: an lm_head of its own
        state["lm_head.weight"] = (torch.randn(len(vocab), 32) * 0.5).to(opts["dtype"])
    if opts.get("untie_embed"):
        # separate encoder and decoder embeddings, the output tied to the decoder's
        state["model.encoder.embed_tokens.weight"] = (torch.randn(len(vocab), 32) * 0.5).to(opts["dtype"])
        state["model.decoder.embed_tokens.weight"] = (torch.randn(len(vocab), 32) * 0.5).to(opts["dtype"])
        del state["model.shared.weight"]
    if opts.get("no_bias"):
        del state["final_logits_bias"]
    mt.save_safetensors(os.path.join(d, "model.safetensors"), state)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    if opts.get("generation"):
        gen = dict(opts["generation"], decoder_start_token_id=pad, eos_token_id=0, pad_token_id=pad,
                   bad_words_ids=[[pad], [vocab["t"], vocab["h"]]])
        with open(os.path.join(d, "generation_config.json"), "w") as f:
            json.dump(gen, f, indent=2, sort_keys=True)
    shutil.copy(SPM, os.path.join(d, "source.spm"))
    shutil.copy(SPM, os.path.join(d, "target.spm"))
    with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    return d


def reference(d, sp, vocab):
    """What the stored weights (after their dtype) compute, through torch."""
    model = load(d)
    gen = mt.generation_config(d, model.cfg)
    unk = vocab["<unk>"]
    cases = []
    for text in INPUTS:
        pieces = sp.encode(text, out_type=str)
        src = [vocab.get(p, unk) for p in pieces] + [model.cfg["eos_token_id"]]
        with torch.inference_mode():
            ids = torch.tensor([src])
            emb = model.encoder.embed(ids)[0]
            enc = model.encode(ids)[0][0]
        cases.append({
            "input": text, "src": src,
            "embed": [round(x, 7) for x in emb.flatten().tolist()],
            "encode": [round(x, 7) for x in enc.flatten().tolist()],
            "decode": [{"options": o, "ids": mt.generate(model, src, gen, **o)} for o in DECODE],
        })
    with open(os.path.join(d, "expected.json"), "w") as f:
        json.dump(cases, f)
    return cases


def load(d):
    return mt.load_marian(d)


def main():
    torch.set_num_threads(1)
    sp = spm.SentencePieceProcessor(model_file=SPM)
    vocab = vocab_for(sp)
    for seed, (name, opts) in enumerate(CONFIGS.items()):
        d = build(name, opts, sp, vocab, 100 + seed)
        cases = reference(d, sp, vocab)
        print("wrote %s: %d cases; greedy lengths %s; beam lengths %s; beam != greedy in %d" % (
            d, len(cases), [len(c["decode"][0]["ids"]) for c in cases],
            [len(c["decode"][2]["ids"]) for c in cases],
            sum(c["decode"][0]["ids"] != c["decode"][2]["ids"] for c in cases)))


if __name__ == "__main__":
    main()
