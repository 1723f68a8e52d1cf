#!/usr/bin/python3
"""Expected attention maps (make fixtures): for a few inputs of the three
random fixture models and the bundled model, the output ids generate()
gives (tools/marian_torch.py, the model's own options), then one
teacher-forced pass in which every attention is torch.nn.MultiheadAttention
(need_weights=True, average_attn_weights=False) built from the layer's
q/k/v/out projections: its per-head weights for the encoder's
self-attention, the decoder's masked self-attention and the
encoder-decoder attention.  test/pgtap/17_attention_map.sql compares SQL
attention_map() with them.  Writes test/fixtures/attention_maps.json.
"""
import json
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import marian_torch as mt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = [
    ("models/multi30k_de_en", ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee."]),
    ("test/fixtures/models/marian_swish", ["a", "Transformer"]),
    ("test/fixtures/models/paper_relu", ["a"]),
    ("test/fixtures/models/prenorm_gelu", ["Transformer"]),
]


def mha_of(att, d, heads):
    """nn.MultiheadAttention with the projections of a marian_torch Attention."""
    m = nn.MultiheadAttention(d, heads, bias=True, batch_first=True)
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.cat([att.q_proj.weight, att.k_proj.weight, att.v_proj.weight]))
        m.in_proj_bias.copy_(torch.cat([att.q_proj.bias, att.k_proj.bias, att.v_proj.bias]))
        m.out_proj.weight.copy_(att.out_proj.weight)
        m.out_proj.bias.copy_(att.out_proj.bias)
    return m.eval()


@torch.inference_mode()
def maps(model, src, dec_in):
    cfg = model.cfg
    d = cfg["d_model"]
    record = []

    def patch(att, heads, name, layer):
        m = mha_of(att, d, heads)

        def forward(x, kv, mask):
            attn_mask = mask[0] if mask is not None and mask.shape[1] == x.shape[1] and mask.shape[1] > 1 else None
            out, w = m(x, kv, kv, attn_mask=attn_mask, need_weights=True, average_attn_weights=False)
            record.append((name, layer, w[0]))
            return out
        att.forward = forward

    for i, layer in enumerate(model.encoder.layers):
        patch(layer.self_attn, cfg["encoder_attention_heads"], "encoder", i)
    for i, layer in enumerate(model.decoder.layers):
        patch(layer.self_attn, cfg["decoder_attention_heads"], "decoder", i)
        patch(layer.encoder_attn, cfg["decoder_attention_heads"], "cross", i)
    model(torch.tensor([src]), torch.tensor([dec_in]))
    return record


def main():
    torch.set_num_threads(1)
    out = []
    for directory, inputs in CASES:
        t = mt.Translator(os.path.join(ROOT, directory))
        name = os.path.basename(directory)
        gen = dict(t.gen)
        for text in inputs:
            src = t.source_ids(text)
            ids = mt.generate(t.model, src, gen)
            max_length = mt._max_length(gen) if gen["max_length"] != 20 else min(21, t.model.cfg["max_position_embeddings"])
            tokens = ids + ([gen["eos_token_id"]] if len(ids) < max_length - 1 else [])
            dec_in = [gen["decoder_start_token_id"]] + tokens[:-1]
            rec = maps(mt.load_marian(os.path.join(ROOT, directory)), src, dec_in)
            out.append({"model": name, "input": text, "tokens": tokens,
                        "maps": [{"stack": s, "layer": l + 1,
                                  "weights": [[[round(x, 7) for x in row] for row in head] for head in w.tolist()]}
                                 for s, l, w in rec]})
            print(name, repr(text), len(tokens), "output tokens", flush=True)
    with open(os.path.join(ROOT, "test", "fixtures", "attention_maps.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
