"""A Transformer in the Marian / Hugging Face MarianMTModel layout, in PyTorch.

Shared by the training script (tools/train_multi30k.py), the model fixture
generator (tools/gen_model_fixtures.py) and the evaluation script: the
reference the C implementation is checked against.

- Parameter names are those of MarianMTModel's state dict
  (model.shared.weight, model.encoder.layers.0.self_attn.q_proj.weight, ...),
  so a checkpoint written by save_marian() loads there too.
- Config keys are MarianConfig's (d_model, encoder_layers, activation_function,
  normalize_before, scale_embedding, ...), plus two of ours for what the
  paper and other checkpoints vary: "position_embedding" ("sinusoidal_half"
  as Marian: sin | cos halves; "sinusoidal_interleaved" as the paper;
  "learned") and "add_final_layer_norm".
- safetensors is written and read by hand (the format is an 8-byte header
  length, a JSON header, raw little-endian data); no extra package needed.

Decoding, defined here once and matched by the C code:
- greedy(): argmax each step (pad excluded), until EOS or max_length tokens.
- beam_search(): K beams; each step every live beam's log-softmax (pad
  excluded) extends it; the 2K best (beam, token) candidates in order of
  score (ties: lower beam index, then lower token id); a candidate ending in
  EOS among the first K becomes a finished hypothesis with score
  sum_logprob / length**alpha (length = tokens generated, EOS included);
  the other candidates, in order, fill the K live beams.  The search stops
  when K hypotheses are finished or max_length is reached, where the live
  beams finish as they are.  The best normalized score wins (ties: first
  finished).
"""
import json
import math
import os
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


# ------------------------------------------------------------------ model

def activation(name):
    return {"relu": F.relu, "gelu": F.gelu, "swish": F.silu, "silu": F.silu}[name]


def sinusoidal(n_pos, dim, interleaved):
    """Positions 0..n_pos-1: the paper's interleaved sin/cos, or Marian's halves."""
    pos = torch.arange(n_pos, dtype=torch.float64).unsqueeze(1)
    i = torch.arange(dim // 2, dtype=torch.float64)
    angle = pos / torch.pow(10000.0, 2 * i / dim)
    out = torch.zeros(n_pos, dim, dtype=torch.float64)
    if interleaved:
        out[:, 0::2] = torch.sin(angle)
        out[:, 1::2] = torch.cos(angle)
    else:
        out[:, : dim // 2] = torch.sin(angle)
        out[:, dim // 2: 2 * (dim // 2)] = torch.cos(angle)
    return out.float()


class Attention(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.heads, self.hd, self.dropout = heads, d // heads, dropout
        self.q_proj = nn.Linear(d, d)
        self.k_proj = nn.Linear(d, d)
        self.v_proj = nn.Linear(d, d)
        self.out_proj = nn.Linear(d, d)

    def split(self, x):
        b, n, _ = x.shape
        return x.view(b, n, self.heads, self.hd).transpose(1, 2)

    def forward(self, x, kv, mask):
        """x (b, n, d), kv (b, m, d); mask (b or 1, 1 or n, m) True = hidden."""
        q = self.split(self.q_proj(x) * self.hd ** -0.5)
        k = self.split(self.k_proj(kv))
        v = self.split(self.v_proj(kv))
        scores = q @ k.transpose(-1, -2)
        if mask is not None:
            scores = scores.masked_fill(mask.unsqueeze(1), float("-inf"))
        w = F.dropout(torch.softmax(scores, dim=-1), self.dropout, self.training)
        out = (w @ v).transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)
        return self.out_proj(out)


class Layer(nn.Module):
    def __init__(self, cfg, cross):
        super().__init__()
        d = cfg["d_model"]
        heads = cfg["decoder_attention_heads" if cross else "encoder_attention_heads"]
        ffn = cfg["decoder_ffn_dim" if cross else "encoder_ffn_dim"]
        self.pre = cfg.get("normalize_before", False)
        self.act = activation(cfg["activation_function"])
        self.dropout = cfg.get("dropout", 0.0)
        self.act_dropout = cfg.get("activation_dropout", 0.0)
        self.self_attn = Attention(d, heads, cfg.get("attention_dropout", 0.0))
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.cross = cross
        if cross:
            self.encoder_attn = Attention(d, heads, cfg.get("attention_dropout", 0.0))
            self.encoder_attn_layer_norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, ffn)
        self.fc2 = nn.Linear(ffn, d)
        self.final_layer_norm = nn.LayerNorm(d)

    def block(self, x, norm, f):
        if self.pre:
            return x + F.dropout(f(norm(x)), self.dropout, self.training)
        return norm(x + F.dropout(f(x), self.dropout, self.training))

    def forward(self, x, self_mask, memory=None, memory_mask=None):
        x = self.block(x, self.self_attn_layer_norm, lambda h: self.self_attn(h, h, self_mask))
        if self.cross:
            x = self.block(x, self.encoder_attn_layer_norm,
                           lambda h: self.encoder_attn(h, memory, memory_mask))
        ffn = lambda h: self.fc2(F.dropout(self.act(self.fc1(h)), self.act_dropout, self.training))
        return self.block(x, self.final_layer_norm, ffn)


class Stack(nn.Module):
    def __init__(self, cfg, cross, shared):
        super().__init__()
        n = cfg["decoder_layers" if cross else "encoder_layers"]
        self.embed_tokens = shared
        kind = cfg.get("position_embedding", "sinusoidal_half")
        self.pos_kind = kind
        if kind == "learned":
            self.embed_positions = nn.Embedding(cfg["max_position_embeddings"], cfg["d_model"])
        else:
            self.register_buffer("embed_positions_table", sinusoidal(
                cfg["max_position_embeddings"], cfg["d_model"], kind == "sinusoidal_interleaved"),
                persistent=False)
        self.layers = nn.ModuleList(Layer(cfg, cross) for _ in range(n))
        self.layer_norm = nn.LayerNorm(cfg["d_model"]) if cfg.get("add_final_layer_norm") else None
        self.scale = math.sqrt(cfg["d_model"]) if cfg.get("scale_embedding", True) else 1.0
        self.dropout = cfg.get("dropout", 0.0)

    def positions(self, n, offset):
        if self.pos_kind == "learned":
            return self.embed_positions.weight[offset: offset + n]
        return self.embed_positions_table[offset: offset + n]

    def embed(self, ids, offset=0):
        x = self.embed_tokens(ids) * self.scale + self.positions(ids.shape[1], offset)
        return F.dropout(x, self.dropout, self.training)


class Marian(nn.Module):
    """shared_embeddings: one table for encoder, decoder and (unless
    tie_output is false) the output layer, as Marian; otherwise each stack
    has its own and the output is tied to the decoder's."""

    def __init__(self, cfg, shared_embeddings=True, tie_output=True):
        super().__init__()
        self.cfg = cfg
        v, d, pad = cfg["vocab_size"], cfg["d_model"], cfg["pad_token_id"]
        if shared_embeddings:
            self.shared = nn.Embedding(v, d, padding_idx=pad)
            self.encoder = Stack(cfg, False, self.shared)
            self.decoder = Stack(cfg, True, self.shared)
        else:
            self.shared = None
            self.encoder = Stack(cfg, False, nn.Embedding(v, d, padding_idx=pad))
            self.decoder = Stack(cfg, True, nn.Embedding(v, d, padding_idx=pad))
        self.lm_head = None if tie_output else nn.Linear(d, v, bias=False)
        self.register_buffer("final_logits_bias", torch.zeros(1, v))

    def output_weight(self):
        if self.lm_head is not None:
            return self.lm_head.weight
        return self.decoder.embed_tokens.weight

    def encode(self, src):
        """src (b, n) ids; pad positions are masked out of attention."""
        pad = src.eq(self.cfg["pad_token_id"]).unsqueeze(1)  # (b, 1, n)
        x = self.encoder.embed(src)
        for layer in self.encoder.layers:
            x = layer(x, pad)
        if self.encoder.layer_norm is not None:
            x = self.encoder.layer_norm(x)
        return x, pad

    def decode(self, tgt_in, memory, memory_pad):
        """Logits (b, n, vocab) for decoder inputs tgt_in (b, n), causal."""
        n = tgt_in.shape[1]
        # the start token is the pad id, so pads are not masked here: padding
        # only ever follows the real tokens, which the causal mask hides
        causal = torch.ones(n, n, dtype=torch.bool, device=tgt_in.device).triu(1).unsqueeze(0)
        x = self.decoder.embed(tgt_in)
        for layer in self.decoder.layers:
            x = layer(x, causal, memory, memory_pad)
        if self.decoder.layer_norm is not None:
            x = self.decoder.layer_norm(x)
        return F.linear(x, self.output_weight()) + self.final_logits_bias

    def forward(self, src, tgt_in):
        memory, pad = self.encode(src)
        return self.decode(tgt_in, memory, pad)


# -------------------------------------------------------------- decoding

def _step_logprobs(model, prefix, memory, pad):
    logits = model.decode(prefix, memory, pad)[:, -1, :].double()
    logits[:, model.cfg["pad_token_id"]] = float("-inf")
    return torch.log_softmax(logits, dim=-1)


def default_max_length(cfg, src_len):
    """As translate(): twice the source length plus 10, within the positions."""
    return min(2 * src_len + 10, cfg["max_position_embeddings"])


@torch.inference_mode()
def greedy(model, src_ids, max_length=None):
    """src_ids: list of ids ending in EOS.  Returns the generated ids, EOS excluded."""
    cfg = model.cfg
    src = torch.tensor([src_ids])
    memory, pad = model.encode(src)
    max_length = max_length or default_max_length(cfg, len(src_ids))
    out = [cfg["decoder_start_token_id"]]
    for _ in range(max_length):
        tok = int(_step_logprobs(model, torch.tensor([out]), memory, pad)[0].argmax())
        if tok == cfg["eos_token_id"]:
            break
        out.append(tok)
    return out[1:]


@torch.inference_mode()
def beam_search(model, src_ids, beam_size, length_penalty=1.0, max_length=None):
    """See the module docstring.  Returns the best hypothesis, EOS excluded."""
    cfg = model.cfg
    eos = cfg["eos_token_id"]
    src = torch.tensor([src_ids])
    memory, pad = model.encode(src)
    max_length = max_length or default_max_length(cfg, len(src_ids))
    beams = [([cfg["decoder_start_token_id"]], 0.0)]
    finished = []  # (normalized score, tokens)
    for t in range(1, max_length + 1):
        prefix = torch.tensor([b[0] for b in beams])
        lp = _step_logprobs(model, prefix, memory.expand(len(beams), -1, -1),
                            pad.expand(len(beams), -1, -1))
        cands = []
        for bi, (toks, score) in enumerate(beams):
            top = torch.topk(lp[bi], min(2 * beam_size, lp.shape[1]))
            for v, tok in zip(top.values.tolist(), top.indices.tolist()):
                cands.append((score + v, bi, tok))
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        cands = cands[: 2 * beam_size]
        new = []
        for rank, (s, bi, tok) in enumerate(cands):
            if tok == eos:
                if rank < beam_size:
                    finished.append((s / (t ** length_penalty), beams[bi][0][1:]))
                continue
            if len(new) < beam_size:
                new.append((beams[bi][0] + [tok], s))
        if len(finished) >= beam_size:
            break
        beams = new
        if t == max_length:
            for toks, s in beams:
                finished.append((s / (t ** length_penalty), toks[1:]))
    best = max(range(len(finished)), key=lambda i: (finished[i][0], -i))
    return finished[best][1]


class Translator:
    """A model directory with its tokenizers, text in and text out, as SQL
    translate() does it: source pieces through vocab.json (<unk> outside
    it) plus EOS; generated ids decoded as pieces by the target model."""

    def __init__(self, directory):
        import sentencepiece as spm
        self.model = load_marian(directory)
        self.src = spm.SentencePieceProcessor(model_file=os.path.join(directory, "source.spm"))
        self.tgt = spm.SentencePieceProcessor(model_file=os.path.join(directory, "target.spm"))
        with open(os.path.join(directory, "vocab.json"), encoding="utf-8") as f:
            self.vocab = json.load(f)
        self.inv = {i: p for p, i in self.vocab.items()}

    def source_ids(self, text):
        unk = self.vocab["<unk>"]
        return [self.vocab.get(p, unk) for p in self.src.encode(text, out_type=str)] + \
            [self.model.cfg["eos_token_id"]]

    def translate(self, text, beam_size):
        src = self.source_ids(text)
        ids = greedy(self.model, src) if beam_size == 1 else \
            beam_search(self.model, src, beam_size, self.model.cfg.get("length_penalty", 1.0))
        return self.tgt.decode_pieces([self.inv[i] for i in ids])


# ------------------------------------------------------------ safetensors

def save_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        t = t.contiguous().cpu()
        data = t.view(torch.int16).numpy().tobytes() if t.dtype in (torch.float16, torch.bfloat16) \
            else t.numpy().tobytes()
        header[name] = {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        dt = DTYPES[info["dtype"]]
        raw = bytearray(data[a:b])
        if dt in (torch.float16, torch.bfloat16):
            t = torch.frombuffer(raw, dtype=torch.int16).view(dt) if raw else torch.zeros(0, dtype=dt)
        else:
            t = torch.frombuffer(raw, dtype=dt) if raw else torch.zeros(0, dtype=dt)
        out[name] = t.reshape(info["shape"]).clone()
    return out


def marian_state(model, dtype=torch.float32):
    """The checkpoint tensors in MarianMTModel names; tied weights omitted."""
    sd = {}
    for k, v in model.state_dict().items():
        if model.shared is not None and k.startswith(("encoder.embed_tokens", "decoder.embed_tokens")):
            continue  # tied to model.shared
        name = k if k in ("final_logits_bias", "lm_head.weight") else "model." + k
        sd[name] = v.to(dtype) if v.is_floating_point() else v
    return sd


def save_marian(model, directory, dtype=torch.float32):
    os.makedirs(directory, exist_ok=True)
    save_safetensors(os.path.join(directory, "model.safetensors"), marian_state(model, dtype))
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(model.cfg, f, indent=2, sort_keys=True)


def load_marian(directory):
    """A checkpoint directory as a Marian module; tied weights as the files say."""
    with open(os.path.join(directory, "config.json")) as f:
        cfg = json.load(f)
    tensors = load_safetensors(os.path.join(directory, "model.safetensors"))
    shared = "model.shared.weight" in tensors
    model = Marian(cfg, shared_embeddings=shared, tie_output="lm_head.weight" not in tensors)
    sd = {}
    for k, v in tensors.items():
        if k in ("final_logits_bias", "lm_head.weight"):
            sd[k] = v.float()
        else:
            sd[k[len("model."):]] = v.float()
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if shared:
        missing = [m for m in missing if not m.startswith(("encoder.embed_tokens", "decoder.embed_tokens"))]
    if missing or unexpected:
        raise ValueError("checkpoint mismatch: missing %s, unexpected %s" % (missing, unexpected))
    return model.eval()


def marian_config(vocab_size, d_model, layers, heads, ffn, pad, eos, unk, max_pos=512,
                  activation_function="swish", normalize_before=False, add_final_layer_norm=False,
                  position_embedding="sinusoidal_half", scale_embedding=True, num_beams=4,
                  dropout=0.1):
    """A MarianConfig-compatible dict."""
    return {
        "architectures": ["MarianMTModel"], "model_type": "marian",
        "vocab_size": vocab_size, "d_model": d_model,
        "encoder_layers": layers, "decoder_layers": layers,
        "encoder_attention_heads": heads, "decoder_attention_heads": heads,
        "encoder_ffn_dim": ffn, "decoder_ffn_dim": ffn,
        "activation_function": activation_function, "normalize_before": normalize_before,
        "add_final_layer_norm": add_final_layer_norm, "position_embedding": position_embedding,
        "static_position_embeddings": position_embedding != "learned",
        "scale_embedding": scale_embedding, "max_position_embeddings": max_pos,
        "max_length": max_pos, "num_beams": num_beams, "length_penalty": 1.0,
        "pad_token_id": pad, "eos_token_id": eos, "decoder_start_token_id": pad,
        "forced_eos_token_id": eos, "bad_words_ids": [[pad]], "unk_token_id": unk,
        "dropout": dropout, "attention_dropout": 0.0, "activation_dropout": 0.0,
        "is_encoder_decoder": True, "share_encoder_decoder_embeddings": True,
        "tie_word_embeddings": True,
    }
