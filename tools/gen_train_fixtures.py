#!/usr/bin/python3
"""Regenerate test/fixtures/train: 10 training steps in PyTorch, for the C trainer's parity test.

For each fixture model (the Marian test model test/fixtures/models/marian_swish,
post-norm and swish; the NLLB checkpoint test/fixtures/checkpoints/nllb_tiny,
pre-norm with final norms and relu; and test/fixtures/models/prenorm_gelu,
Marian with learned positions, pre-norm, final norms and GELU), with dropout 0:
- 20 random pairs of token ids (sources of 2 to 9 ids, targets of 2 to 8
  ending with eos), in batches of 2 consecutive pairs, padded with the pad
  id and masked as Hugging Face does (the encoder's attention_mask, labels
  of padding ignored);
- 10 steps of torch.optim.Adam(betas=(0.9, 0.98), eps=1e-9) at a rate
  of rate · min(1, step / warmup) (fine_tune()'s with learning_rate given;
  Marian 1e-3 without warm-up, NLLB 1e-3 warmed up over 3 steps: steps of
  about 1e-3 change the weights by 1e-2 in 10 steps, which a wrong step
  would miss by more than 1e-4; the paper's rate, d_model^-0.5 for a tiny
  model, makes steps so large that rounding differences grow by 10x a step
  and no two implementations agree after 10), on
  nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=pad) over the
  batch's labels, teacher-forced from decoder_start_token_id;
- and the same two with dropout (NAME_dropout): F.dropout replaced by
  SameMasks, which keeps what tf_dropout_keep keeps;
- k_proj's biases get the gradient 0, their exact gradient (the softmax
  takes away a shift of all of a query's scores): autograd's rounding
  noise there, scaled up by Adam, would move them at random.

Written, per model NAME:
  NAME.txt          the configuration, the pairs, and the loss of each step
  NAME.init.f32     the parameters before, float32 little-endian (from
                    the checkpoint: exact in float32, as every step's
                    input is), in the
                    order of src/core/train_model.h (each tensor padded to
                    a multiple of 4 floats, as tf_train_bind lays them out)
  NAME.final.f32    the parameters after the 10 steps, rounded to float32
  NAME.pos.f32      the positions the encoder's and decoder's tokens 0..63
                    add (rows of d; learned ones before training: they are
                    parameters too), then Marian's final_logits_bias (vocab)

Run with Debian's interpreter: /usr/bin/python3 tools/gen_train_fixtures.py
"""
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import marian_torch as mt  # noqa: E402
import m2m100_torch as mm  # noqa: E402

OUT = os.path.join(ROOT, "test", "fixtures", "train")
STEPS, BATCH, PAIRS, EPS = 10, 2, 20, 0.1
MAX_LEN = 64


def no_dropout(model):
    set_dropout(model, 0.0, 0.0, 0.0)


def set_dropout(model, hidden, attention, activation):
    """Every dropout probability of the modules: the attention weights', the
    activation's, and the rest (after the embeddings, and each block's F)."""
    for m in model.modules():
        if isinstance(m, (mt.Attention, mm.M2M100Attention)):
            m.dropout = attention
            continue
        for attr, p in (("act_dropout", activation), ("activation_dropout", activation), ("dropout", hidden)):
            if isinstance(getattr(m, attr, None), float):
                setattr(m, attr, p)


MASK64 = (1 << 64) - 1


def splitmix64(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class SameMasks:
    """F.dropout with train_model.h's masks (tf_dropout_keep): a value is
    kept when splitmix64(seed · φ + (step << 20 | site) · c + idx)'s top 24
    bits, as a fraction, are >= p; site counts F.dropout's calls in the
    step's forward pass (p = 0 too), idx is the value's place in its pair:
    b << 32 | j << 16 | k for (batch, position, column), (b · heads + h) << 32
    | i << 16 | j for attention weights (batch, head, query, key)."""

    def __init__(self, seed):
        self.seed, self.step, self.site = seed, 0, 0

    def __call__(self, x, p=0.5, training=True, inplace=False):
        site = self.site
        self.site += 1
        if not training or p == 0.0:
            return x
        with np.errstate(over="ignore"):
            if x.dim() == 3:
                b, j, k = np.meshgrid(*[np.arange(n, dtype=np.uint64) for n in x.shape], indexing="ij")
                idx = (b << np.uint64(32)) | (j << np.uint64(16)) | k
            else:
                b, h, i, j = np.meshgrid(*[np.arange(n, dtype=np.uint64) for n in x.shape], indexing="ij")
                idx = ((b * np.uint64(x.shape[1]) + h) << np.uint64(32)) | (i << np.uint64(16)) | j
            stream = np.uint64(((self.step << 20) | site) & MASK64)
            z = splitmix64(np.uint64(self.seed) * np.uint64(0x9E3779B97F4A7C15)
                           + stream * np.uint64(0xD1B54A32D192ED03) + idx)
        keep = (z >> np.uint64(40)).astype(np.float64) >= p * 16777216.0
        return x * torch.from_numpy(keep).to(x.dtype) * (1.0 / (1.0 - p))


def attn(a):
    return [a.q_proj.weight, a.q_proj.bias, a.k_proj.weight, a.k_proj.bias,
            a.v_proj.weight, a.v_proj.bias, a.out_proj.weight, a.out_proj.bias]


def ffn(layer):
    return [layer.fc1.weight, layer.fc1.bias, layer.fc2.weight, layer.fc2.bias,
            layer.final_layer_norm.weight, layer.final_layer_norm.bias]


def ordered(kind, model):
    """The trained tensors in train_model.h's order (shared and tied embeddings)."""
    if kind == "marian":
        core, enc, dec = model, model.encoder, model.decoder
        # shared, or each stack its own (a checkpoint with two embed_tokens); lm_head unless tied
        out = [core.shared.weight] if core.shared is not None else [enc.embed_tokens.weight,
                                                                    dec.embed_tokens.weight]
        if core.lm_head is not None:
            out.append(core.lm_head.weight)
        if enc.pos_kind == "learned":
            out += [enc.embed_positions.weight, dec.embed_positions.weight]
        final = [enc.layer_norm.weight, enc.layer_norm.bias, dec.layer_norm.weight,
                 dec.layer_norm.bias] if enc.layer_norm is not None else []
    else:
        core = model.model
        enc, dec = core.encoder, core.decoder
        out = [core.shared.weight]
        final = [enc.layer_norm.weight, enc.layer_norm.bias, dec.layer_norm.weight, dec.layer_norm.bias]
    for layer in enc.layers:
        out += attn(layer.self_attn) + [layer.self_attn_layer_norm.weight, layer.self_attn_layer_norm.bias]
        out += ffn(layer)
    for layer in dec.layers:
        out += attn(layer.self_attn) + [layer.self_attn_layer_norm.weight, layer.self_attn_layer_norm.bias]
        out += attn(layer.encoder_attn) + [layer.encoder_attn_layer_norm.weight,
                                           layer.encoder_attn_layer_norm.bias]
        out += ffn(layer)
    return out + final


def flat(tensors):
    parts = []
    for t in tensors:
        v = t.detach().reshape(-1).double()
        pad = (-v.numel()) % 4
        parts.append(torch.cat([v, torch.zeros(pad, dtype=torch.float64)]) if pad else v)
    return torch.cat(parts)


def write_f32(path, t):
    with open(path, "wb") as f:
        f.write(struct.pack("<%df" % t.numel(), *t.tolist()))


def layout(kind, model):
    """(shared, tied): one embedding table for both stacks; the output layer is the target embedding."""
    if kind != "marian":
        return 1, 1
    return int(model.shared is not None), int(model.lm_head is None)


def run_lines(kind, cfg, nparams, pairs, steps, batch, rate, warmup, eps, drop=None, adam_eps=1e-9, decay_from=0,
              shared_tied=(1, 1)):
    """A run's lines in test/unit/train_fixture.h's format: the model's config, the schedule,
    the options that differ from their defaults, and the pairs in batch order."""
    act = {"relu": 0, "gelu": 1, "swish": 2, "silu": 2}[cfg["activation_function"]]
    pre = 1 if kind != "marian" or cfg.get("normalize_before") else 0
    final_norm = 1 if kind != "marian" or cfg.get("add_final_layer_norm") else 0
    lines = ["config vocab %d d %d enc_layers %d dec_layers %d enc_heads %d dec_heads %d enc_ffn %d "
             "dec_ffn %d act %d pre_norm %d final_norm %d scale_embedding %d pad %d eos %d start %d "
             "bias %d params %d learned_pos %d max_pos %d shared %d tied %d" % (cfg["vocab_size"], cfg["d_model"], cfg["encoder_layers"], cfg["decoder_layers"],
                                    cfg["encoder_attention_heads"], cfg["decoder_attention_heads"],
                                    cfg["encoder_ffn_dim"], cfg["decoder_ffn_dim"], act, pre, final_norm,
                                    1 if cfg.get("scale_embedding", True) else 0, cfg["pad_token_id"],
                                    cfg["eos_token_id"], cfg["decoder_start_token_id"],
                                    1 if kind == "marian" else 0, nparams,
                                    1 if cfg.get("position_embedding") == "learned" else 0,
                                    cfg.get("max_position_embeddings", 0), shared_tied[0], shared_tied[1]),
             "train steps %d batch %d rate %.9g warmup %d label_smoothing %.3f" % (steps, batch, rate, warmup, eps)]
    if decay_from:
        lines.append("decay %d" % decay_from)
    if adam_eps != 1e-9:
        lines.append("adam eps %.9g" % adam_eps)
    if drop:
        lines.append("dropout hidden %.6g attention %.6g activation %.6g seed %d"
                     % (drop["hidden"], drop["attention"], drop["activation"], drop["seed"]))
    for s_, t_ in pairs:
        lines.append("pair %d %s %d %s" % (len(s_), " ".join(map(str, s_)), len(t_), " ".join(map(str, t_))))
    return lines


def write_marian_run(directory, name, model, pairs, steps, batch, rate, warmup, eps, drop=None, max_ids=64,
                     decay_from=0):
    """A Marian model's training run in test/unit/train_fixture.h's format (bench/train.py,
    tools/finetune_multi30k.py): NAME.txt (config, schedule, dropout, the pairs in batch order),
    NAME.init.f32 (its parameters flattened) and NAME.pos.f32 (positions, final_logits_bias)."""
    cfg = model.cfg
    params = ordered("marian", model)
    write_f32(os.path.join(directory, name + ".init.f32"), flat(params).float())
    with torch.no_grad():
        pos = torch.cat([model.encoder.positions(max_ids, 0).reshape(-1), model.decoder.positions(max_ids, 0).reshape(-1),
                         model.final_logits_bias.reshape(-1)])
    write_f32(os.path.join(directory, name + ".pos.f32"), pos.float())
    lines = run_lines("marian", cfg, flat(params).numel(), pairs, steps, batch, rate, warmup, eps, drop,
                      decay_from=decay_from, shared_tied=layout("marian", model))
    with open(os.path.join(directory, name + ".txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def train(kind, model, batches, base_rate, warmup, masks=None, adam_eps=1e-9):
    """Steps of torch.optim.Adam(betas=(0.9, 0.98)) on nn.CrossEntropyLoss(label_smoothing=EPS,
    ignore_index=pad), one a batch of (source ids, label ids) pairs, padded and masked as Hugging
    Face does and teacher-forced from decoder_start_token_id, at base_rate after a linear warm-up
    of warmup steps; returns each step's loss and rate.  model is changed in place."""
    cfg = model.cfg
    pad, start, vocab = cfg["pad_token_id"], cfg["decoder_start_token_id"], cfg["vocab_size"]
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=adam_eps)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=EPS, ignore_index=pad)
    losses, rates = [], []
    for step, batch in enumerate(batches, 1):
        n = max(len(s) for s, _ in batch)
        t = max(len(y) for _, y in batch)
        src = torch.tensor([s + [pad] * (n - len(s)) for s, _ in batch])
        mask = torch.tensor([[1] * len(s) + [0] * (n - len(s)) for s, _ in batch])
        labels = torch.tensor([y + [pad] * (t - len(y)) for _, y in batch])
        dec_in = torch.cat([torch.full((len(batch), 1), start), labels[:, :-1]], dim=1)
        saved = F.dropout
        if masks:
            masks.step, masks.site = step, 0
            F.dropout = masks
        if kind == "marian":
            memory, mpad = model.encode(src, mask)
            logits = model.decode(dec_in, memory, mpad)
        else:
            logits = model(src, dec_in, mask)
        F.dropout = saved
        loss = loss_fn(logits.reshape(-1, vocab), labels.reshape(-1))
        lr = base_rate * (min(1.0, step / warmup) if warmup > 0 else 1.0)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad()
        loss.backward()
        # k_proj's bias shifts every score of a query alike, which the
        # softmax takes away: its gradient is exactly 0, and what autograd
        # gives is rounding noise that Adam scales up to full steps.  Both
        # sides take it as 0 (train_model.c), so the bias stays as it was.
        for m in model.modules():
            if hasattr(m, "k_proj") and m.k_proj.bias is not None and m.k_proj.bias.grad is not None:
                m.k_proj.bias.grad.zero_()
        opt.step()
        losses.append(float(loss))
        rates.append(lr)
    return losses, rates


def unflatten_into(model, kind, values):
    """The parameters of model from a flat float32 array in train_model.h's order (the inverse of flat())."""
    off = 0
    with torch.no_grad():
        for p in ordered(kind, model):
            n = p.numel()
            p.copy_(torch.as_tensor(values[off:off + n]).reshape(p.shape).to(p.dtype))
            off += n + (-n) % 4
    assert off == len(values), (off, len(values))


def run(name, kind, directory, base_rate, warmup, drop=None, adam_eps=1e-9):
    torch.manual_seed(41)
    if kind == "marian":
        model = mt.load_marian(directory)
        cfg = model.cfg
    else:
        model = mm.load_m2m100(directory)
        cfg = model.cfg
    no_dropout(model)
    masks = None
    if drop:
        set_dropout(model, drop["hidden"], drop["attention"], drop["activation"])
        masks = SameMasks(drop["seed"])
    model.train()
    # The reference runs in float64: torch's float32 loses up to 1e-3 of the
    # small gradients of the output layer's rows (a softmax probability
    # less the smoothing's eps / vocab, both near 1e-4), which Adam, scaling
    # every gradient to a step of about the rate, turns into weights 1e-4
    # apart after 10 steps.  The C trainer (fp32, its softmax in double)
    # stays within 1e-5 of float64.
    model.double()
    pad, eos, start, vocab, d = (cfg["pad_token_id"], cfg["eos_token_id"], cfg["decoder_start_token_id"],
                                 cfg["vocab_size"], cfg["d_model"])
    specials = {pad, eos, start, cfg.get("unk_token_id", 3), 0, 1, 2, 3}
    ordinary = [i for i in range(vocab) if i not in specials]
    g = torch.Generator().manual_seed(4100)

    def ids(n):
        return [ordinary[int(i)] for i in torch.randint(len(ordinary), (n,), generator=g)]

    pairs = []
    for _ in range(PAIRS):
        src = ids(int(torch.randint(2, 10, (1,), generator=g)))
        tgt = ids(int(torch.randint(1, 8, (1,), generator=g))) + [eos]
        pairs.append((src, tgt))

    params = ordered(kind, model)
    assert len({id(p) for p in params}) == len(params)
    assert {id(p) for p in params} == {id(p) for p in model.parameters()}, "a parameter is left out"
    init = flat(params)
    batches = [pairs[(step - 1) * BATCH: step * BATCH] for step in range(1, STEPS + 1)]
    losses, rates = train(kind, model, batches, base_rate, warmup, masks, adam_eps)
    final = flat(params)

    with torch.no_grad():
        if kind == "marian":
            enc_pos = model.encoder.positions(MAX_LEN, 0)
            dec_pos = model.decoder.positions(MAX_LEN, 0)
            bias = model.final_logits_bias.reshape(-1).float()
        else:
            dummy = torch.full((1, MAX_LEN), 4)
            enc_pos = model.model.encoder.embed_positions(dummy)[0]
            dec_pos = model.model.decoder.embed_positions(dummy)[0]
            bias = torch.zeros(0)
    write_f32(os.path.join(OUT, name + ".init.f32"), init)
    write_f32(os.path.join(OUT, name + ".final.f32"), final)
    write_f32(os.path.join(OUT, name + ".pos.f32"), torch.cat([enc_pos.reshape(-1), dec_pos.reshape(-1),
                                                               bias.float()]))
    lines = (["# Generated by tools/gen_train_fixtures.py (torch %s); do not edit." % torch.__version__] +
             run_lines(kind, cfg, init.numel(), pairs, STEPS, BATCH, base_rate, warmup, EPS, drop, adam_eps,
                       shared_tied=layout(kind, model)))
    for step, (loss, lr) in enumerate(zip(losses, rates), 1):
        lines.append("step %d loss %.9g rate %.9g" % (step, loss, lr))
    with open(os.path.join(OUT, name + ".txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("%s: %d parameters, loss %.4f -> %.4f, max |change| %.3g"
          % (name, init.numel(), losses[0], losses[-1], float((final - init).abs().max())))


def main():
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    run("marian_swish", "marian", os.path.join(ROOT, "test", "fixtures", "models", "marian_swish"), 1e-3, 0)
    run("nllb_tiny", "m2m100", os.path.join(ROOT, "test", "fixtures", "checkpoints", "nllb_tiny"), 1e-3, 3)
    # learned positions (trained: nn.Embedding's gradient), pre-norm, final norms, GELU, no scaling
    run("prenorm_gelu", "marian", os.path.join(ROOT, "test", "fixtures", "models", "prenorm_gelu"), 1e-3, 0)
    # With dropout everywhere: the same masks on both sides (SameMasks, tf_dropout_keep), and Adam's
    # eps 1e-5: with these masks a few gradients (decoder layer 0's self-attention, output rows) are
    # rounding noise around 0, near 1e-9 or 1e-6, where a small eps makes Adam's step jump from 0 to
    # the full rate, so float32 and float64 part by up to a step (1.5e-4 after the first at eps 1e-9,
    # 1.1e-4 after 10 at 1e-6).  What these runs check is the masks and their backward passes; eps
    # 1e-9 is checked by the runs above and by grad_ops.txt's adam cases.
    run("marian_swish_dropout", "marian", os.path.join(ROOT, "test", "fixtures", "models", "marian_swish"),
        1e-3, 0, {"hidden": 0.1, "attention": 0.1, "activation": 0.2, "seed": 7}, adam_eps=1e-5)
    run("nllb_tiny_dropout", "m2m100", os.path.join(ROOT, "test", "fixtures", "checkpoints", "nllb_tiny"),
        1e-3, 3, {"hidden": 0.1, "attention": 0.1, "activation": 0.0, "seed": 11}, adam_eps=1e-5)


if __name__ == "__main__":
    main()
