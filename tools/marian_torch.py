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

Decoding: Hugging Face's generate() rules, ported from the transformers
source function by function (see the decoding section), with the defaults
of GenerationConfig and MarianConfig; generation_config() reads a model
directory's generation config as from_pretrained() does.
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
        self.scale = math.sqrt(cfg["d_model"]) if cfg.get("scale_embedding", MARIAN_DEFAULTS["scale_embedding"]) else 1.0
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

    def encode(self, src, attention_mask=None):
        """src (b, n) ids; attention_mask (b, n), 0 at padding: the
        tokenizer's, which is 1 for a <pad> written in the text.  Without
        it, pad ids are masked out of attention, as generate() infers the
        mask from input_ids alone."""
        if attention_mask is None:
            pad = src.eq(self.cfg["pad_token_id"]).unsqueeze(1)  # (b, 1, n)
        else:
            pad = attention_mask.eq(0).unsqueeze(1)
        x = self.encoder.embed(src)
        for layer in self.encoder.layers:
            x = layer(x, pad)
        if self.encoder.layer_norm is not None:
            x = self.encoder.layer_norm(x)
        return x, pad

    def decode(self, tgt_in, memory, memory_pad, last_only=False):
        """Logits (b, n, vocab) for decoder inputs tgt_in (b, n), causal;
        with last_only, (b, 1, vocab) for the last position only."""
        n = tgt_in.shape[1]
        # the start token is the pad id, so pads are not masked here: padding
        # only ever follows the real tokens, which the causal mask hides
        causal = torch.ones(n, n, dtype=torch.bool, device=tgt_in.device).triu(1).unsqueeze(0)
        x = self.decoder.embed(tgt_in)
        for layer in self.decoder.layers:
            x = layer(x, causal, memory, memory_pad)
        if self.decoder.layer_norm is not None:
            x = self.decoder.layer_norm(x)
        if last_only:
            x = x[:, -1:, :]
        return F.linear(x, self.output_weight()) + self.final_logits_bias

    def forward(self, src, tgt_in):
        memory, pad = self.encode(src)
        return self.decode(tgt_in, memory, pad)


# -------------------------------------------------------------- decoding
#
# Hugging Face's generate() for an encoder-decoder model, greedy and beam
# search, ported rule by rule from transformers 4.57 (the latest 4.x; the
# rules cited are those of src/transformers/generation/utils.py,
# logits_process.py and configuration_utils.py there).  Nothing here is
# shared with the C code: it is the reference the C code is checked against.
# One sentence at a time: in a batch, Hugging Face finishes each sentence on
# its own (GenerationMixin._beam_search's per-sentence is_sent_finished,
# _sample's unfinished_sequences), and a finished one only gets padding.
# Scores are kept in float64 (Hugging Face: float32) over float32 logits.

# GenerationConfig.__init__'s defaults, for the keys decoding uses
GENERATION_DEFAULTS = {
    "max_length": 20, "max_new_tokens": None, "min_length": 0, "early_stopping": False,
    "num_beams": 1, "length_penalty": 1.0, "no_repeat_ngram_size": 0, "repetition_penalty": 1.0,
    "bad_words_ids": None, "forced_eos_token_id": None, "renormalize_logits": False,
    "decoder_start_token_id": None, "eos_token_id": None, "pad_token_id": None,
    "forced_bos_token_id": None,
}
# MarianConfig.__init__'s defaults (configuration_marian.py)
MARIAN_DEFAULTS = {
    "vocab_size": 58101, "decoder_start_token_id": 58100, "pad_token_id": 58100,
    "eos_token_id": 0, "forced_eos_token_id": 0, "scale_embedding": False,
    "max_position_embeddings": 1024, "activation_function": "gelu",
    "normalize_before": False, "add_final_layer_norm": False,
}


def generation_config(directory=None, cfg=None, defaults=None):
    """The generation config from_pretrained() gives a MarianMTModel:
    generation_config.json if the directory has one (GenerationConfig's
    defaults for what it lacks), else GenerationConfig.from_model_config()
    of config.json (MarianConfig's defaults, then GenerationConfig's).
    defaults: the model class's config defaults (MARIAN_DEFAULTS unless
    given; tools/m2m100_torch.py passes M2M100Config's)."""
    defaults = MARIAN_DEFAULTS if defaults is None else defaults
    path = os.path.join(directory, "generation_config.json") if directory else None
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            given = json.load(f)
        gen = dict(GENERATION_DEFAULTS)
        gen.update({k: v for k, v in given.items() if k in GENERATION_DEFAULTS})
        # token ids it lacks are the model's (generate()'s _prepare_special_tokens)
        for k in ("decoder_start_token_id", "eos_token_id", "pad_token_id"):
            if gen[k] is None:
                gen[k] = {**defaults, **cfg}[k]
        return gen
    model_cfg = {**defaults, **cfg}
    gen = dict(GENERATION_DEFAULTS)
    gen.update({k: v for k, v in model_cfg.items() if k in GENERATION_DEFAULTS})
    return gen


def _max_length(gen):
    """_prepare_generated_length: max_new_tokens, when set, wins; the
    decoder's input starts as the one start token, which max_length counts."""
    if gen["max_new_tokens"] is not None:
        return gen["max_new_tokens"] + 1
    return gen["max_length"]


def process_logits(gen, max_length, input_ids, scores):
    """The logits processors of _get_logits_processor, in its order, on one
    row: input_ids is the row's decoder input so far (start token first),
    so cur_len = len(input_ids); scores (vocab) float."""
    cur_len = len(input_ids)
    eos = gen["eos_token_id"]
    scores = scores.clone()
    # RepetitionPenaltyLogitsProcessor: gather the scores of the tokens in
    # input_ids, < 0 times the penalty, > 0 divided by it, scatter back
    if gen["repetition_penalty"] is not None and gen["repetition_penalty"] != 1.0:
        pen = gen["repetition_penalty"]
        idx = torch.tensor(input_ids)
        score = scores.gather(0, idx)
        score = torch.where(score < 0, score * pen, score / pen)
        scores = scores.scatter(0, idx, score)
    # NoRepeatNGramLogitsProcessor (_get_ngrams, _get_generated_ngrams):
    # n-grams of input_ids; the last n-1 tokens may not be followed again
    n = gen["no_repeat_ngram_size"]
    if n is not None and n > 0 and cur_len + 1 >= n:
        ngrams = {}
        for i in range(cur_len - n + 1):
            ngrams.setdefault(tuple(input_ids[i:i + n - 1]), []).append(input_ids[i + n - 1])
        for tok in ngrams.get(tuple(input_ids[cur_len + 1 - n:cur_len]), []):
            scores[tok] = float("-inf")
    # NoBadWordsLogitsProcessor (a SequenceBiasLogitsProcessor of -inf): a
    # one-token bad word always, a longer one when input_ids ends with the
    # rest of it
    for seq in gen["bad_words_ids"] or []:
        if seq == [eos]:
            continue            # NoBadWordsLogitsProcessor drops [eos]
        if len(seq) == 1 or (len(seq) - 1 <= cur_len and input_ids[cur_len - len(seq) + 1:] == seq[:-1]):
            scores[seq[-1]] = float("-inf")
    # MinLengthLogitsProcessor: no EOS while input_ids is shorter than min_length
    if gen["min_length"] is not None and gen["min_length"] > 0 and cur_len < gen["min_length"]:
        scores[eos] = float("-inf")
    # ForcedBOSTokenLogitsProcessor: at cur_len 1 (the start token only),
    # the forced token with score 0 and every other -inf
    if gen.get("forced_bos_token_id") is not None and cur_len == 1:
        scores = torch.full_like(scores, float("-inf"))
        scores[gen["forced_bos_token_id"]] = 0
    # ForcedEOSTokenLogitsProcessor: at max_length - 1, EOS with score 0
    if gen["forced_eos_token_id"] is not None and cur_len == max_length - 1:
        scores = torch.full_like(scores, float("-inf"))
        scores[gen["forced_eos_token_id"]] = 0
    # LogitNormalization: always the last processor, when present
    if gen["renormalize_logits"]:
        scores = torch.log_softmax(scores, dim=-1)
    return scores


def _logits(model, prefix, memory, pad):
    """The decoder's next-token logits for each prefix, float32 as HF takes them."""
    return model.decode(prefix, memory, pad, last_only=True)[:, -1, :].float()


@torch.inference_mode()
def greedy(model, src_ids, gen):
    """GenerationMixin._sample without sampling: the argmax of the processed
    logits (the raw logits, not their log-softmax), until EOS
    (EosTokenCriteria) or max_length (MaxLengthCriteria).  Returns the
    generated ids, EOS excluded."""
    src = torch.tensor([src_ids])
    memory, pad = model.encode(src)
    max_length = _max_length(gen)
    seq = [gen["decoder_start_token_id"]]
    while len(seq) < max_length:
        scores = process_logits(gen, max_length, seq,
                                _logits(model, torch.tensor([seq]), memory, pad)[0].double())
        tok = int(scores.argmax())       # the first of equal maxima
        seq.append(tok)
        if tok == gen["eos_token_id"]:
            return seq[1:-1]
    return seq[1:]


@torch.inference_mode()
def beam_search(model, src_ids, gen):
    """GenerationMixin._beam_search for one sentence.  Returns the best
    hypothesis, EOS excluded.

    Each step: the running beams' log-softmax, processed (process_logits),
    plus the beam's score; the 2K best (beam, token) candidates
    (_get_top_k_continuations; ties: lower beam, then lower token).  Of the
    first K, those ending in EOS, or all of them when the sequence reaches
    max_length, are finished candidates with score / length ** penalty, the
    length counting the generated tokens, the new one included
    (_update_finished_beams: cur_len + 1 - decoder_prompt_len); the K best
    finished hypotheses are kept, and with early_stopping=True none is added
    once K are there.  The best K candidates not ending in EOS run on
    (_get_running_beams_for_next_iteration).  The sentence is done when
    K hypotheses are finished and early_stopping is True, or when the best
    running beam, at the best length it could reach, cannot beat the worst
    finished one (_check_early_stop_heuristic: that length is
    max_length - 1 for "never" with a positive length penalty, else the
    current one), or at max_length.  The best finished hypothesis wins."""
    K = gen["num_beams"]
    lp = gen["length_penalty"]
    es = gen["early_stopping"]
    eos = gen["eos_token_id"]
    src = torch.tensor([src_ids])
    memory, pad = model.encode(src)
    max_length = _max_length(gen)
    running = [([gen["decoder_start_token_id"]], 0.0)]
    finished = []   # (score, tokens, order of arrival)
    while True:
        cur_len = len(running[0][0])
        prefix = torch.tensor([b[0] for b in running])
        logits = _logits(model, prefix, memory.expand(len(running), -1, -1),
                         pad.expand(len(running), -1, -1)).double()
        cands = []
        for bi, (toks, score) in enumerate(running):
            scores = process_logits(gen, max_length, toks, torch.log_softmax(logits[bi], dim=-1))
            top = torch.topk(scores, min(2 * K, scores.shape[0]))
            for v, tok in zip(top.values.tolist(), top.indices.tolist()):
                if v != float("-inf"):
                    cands.append((score + v, bi, tok))
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        cands = cands[: 2 * K]
        hits_max = cur_len + 1 >= max_length
        length = cur_len + 1 - 1            # generated tokens, the new one included
        for rank, (sc, bi, tok) in enumerate(cands[:K]):
            if tok == eos or hits_max:
                if es is True and len(finished) >= K:
                    continue
                toks = running[bi][0][1:] + ([] if tok == eos else [tok])
                finished.append((sc / (length ** lp), toks, len(finished)))
                finished.sort(key=lambda f: (-f[0], f[2]))
                del finished[K:]
        if hits_max:
            break
        new = [(running[bi][0] + [tok], sc) for sc, bi, tok in cands if tok != eos][:K]
        if not new:
            break
        running = new
        if len(finished) >= K:
            if es is True:
                break
            worst = min(f[0] for f in finished)
            best_len = (max_length - 1) if (es == "never" and lp > 0) else cur_len
            if worst >= running[0][1] / (best_len ** lp):
                break
    if not finished:
        return []
    return max(finished, key=lambda f: (f[0], -f[2]))[1]


def generate(model, src_ids, gen, **overrides):
    """generate(): the generation config with the given options set (as
    generate(**kwargs) updates its copy), then greedy or beam search.
    _prepare_generated_length: a max_length left at GenerationConfig's
    default of 20 grows by the decoder's input (1), within the positions."""
    gen = dict(gen)
    gen.update({k: v for k, v in overrides.items() if v is not None})
    if overrides.get("max_length") is None and gen["max_length"] == GENERATION_DEFAULTS["max_length"]:
        gen["max_length"] = min(gen["max_length"] + 1, model.cfg["max_position_embeddings"])
    if gen["num_beams"] == 1:
        return greedy(model, src_ids, gen)
    return beam_search(model, src_ids, gen)


class Translator:
    """A model directory with its tokenizers, text in and text out, as SQL
    translate() does it: source pieces through vocab.json (<unk> outside
    it) plus EOS; generated ids decoded as pieces by the target model."""

    def __init__(self, directory):
        import sentencepiece as spm
        self.model = load_marian(directory)
        self.gen = generation_config(directory, self.model.cfg)
        self.src = spm.SentencePieceProcessor(model_file=os.path.join(directory, "source.spm"))
        self.tgt = spm.SentencePieceProcessor(model_file=os.path.join(directory, "target.spm"))
        with open(os.path.join(directory, "vocab.json"), encoding="utf-8") as f:
            self.vocab = json.load(f)
        self.inv = {i: p for p, i in self.vocab.items()}

    def source_ids(self, text):
        unk = self.vocab["<unk>"]
        return [self.vocab.get(p, unk) for p in self.src.encode(text, out_type=str)] + \
            [self.model.cfg["eos_token_id"]]

    def translate(self, text, beam_size=None, **options):
        ids = generate(self.model, self.source_ids(text), self.gen, num_beams=beam_size, **options)
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
    # a buffer of zeros in MarianMTModel, when the checkpoint lacks it
    missing = [m for m in missing if m != "final_logits_bias"]
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
