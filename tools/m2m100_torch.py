"""M2M100 and NLLB-200 in PyTorch: Hugging Face's M2M100ForConditionalGeneration.

The reference the C code is checked against for the fairseq-style
checkpoints (facebook/m2m100_*, facebook/nllb-200-*): a port of
transformers 4.57's src/transformers/models/m2m_100/modeling_m2m_100.py,
class by class, with Hugging Face's module and parameter names, so
state_dict() has exactly the names (and the tied aliases) of
M2M100ForConditionalGeneration's: model.shared.weight,
model.encoder.embed_tokens.weight (the same tensor), model.encoder.layers.0.
self_attn.k_proj.weight, ..., model.encoder.layer_norm.weight,
model.decoder..., lm_head.weight (the same tensor as model.shared.weight).

Decoding is tools/marian_torch.py's port of generate() (greedy and beam
search, the logits processors in _get_logits_processor's order, with
ForcedBOSTokenLogitsProcessor for forced_bos_token_id); this module gives the
model the encode()/decode() interface that code calls, and the generation
config from M2M100Config's defaults.

What differs from Marian (and surprises):
- positions are fairseq's: sin | cos halves with
  emb = log(10000) / (half_dim - 1) (Marian: 10000 ** (2i / dim)), the table
  has max_position_embeddings + 2 rows, row padding_idx (1) is zero, and a
  token's position is padding_idx + 1 + its index among the non-pad tokens
  (create_position_ids_from_input_ids), so the first token takes row 2;
- generate() runs the decoder with its cache, one token per step, so a
  decoder token's position is padding_idx + 1 + its index, or padding_idx
  (the zero row) if the token is the pad id; a forward over the whole
  sequence instead counts only non-pad tokens (cumsum).  The two agree
  unless pad is generated; decode() follows generate();
- pre-LayerNorm layers and a final LayerNorm on each stack;
- the decoder starts with decoder_start_token_id = eos (2), and the target
  language comes from forced_bos_token_id at the first step;
- no final_logits_bias; lm_head is tied to model.shared.

Run with Debian's interpreter (/usr/bin/python3).
"""
import json
import math
import os
import re
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import marian_torch as mt  # noqa: E402

# M2M100Config.__init__'s defaults (configuration_m2m_100.py), plus
# PretrainedConfig's for the keys generation reads
M2M100_DEFAULTS = {
    "vocab_size": 128112, "max_position_embeddings": 1024,
    "encoder_layers": 12, "encoder_ffn_dim": 4096, "encoder_attention_heads": 16,
    "decoder_layers": 12, "decoder_ffn_dim": 4096, "decoder_attention_heads": 16,
    "encoder_layerdrop": 0.05, "decoder_layerdrop": 0.05, "use_cache": True,
    "is_encoder_decoder": True, "activation_function": "relu", "d_model": 1024,
    "dropout": 0.1, "attention_dropout": 0.1, "activation_dropout": 0.0, "init_std": 0.02,
    "decoder_start_token_id": 2, "scale_embedding": True, "pad_token_id": 1,
    "bos_token_id": 0, "eos_token_id": 2, "tie_word_embeddings": True,
    "forced_eos_token_id": None, "forced_bos_token_id": None,
}


# ------------------------------------------------------------------ model

class M2M100ScaledWordEmbedding(nn.Embedding):
    """modeling_m2m_100.M2M100ScaledWordEmbedding (BartScaledWordEmbedding):
    nn.Embedding whose forward multiplies by embed_scale (sqrt(d_model) when
    config.scale_embedding)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx, embed_scale=1.0):
        super().__init__(num_embeddings, embedding_dim, padding_idx)
        self.embed_scale = embed_scale

    def forward(self, input_ids):
        return super().forward(input_ids) * self.embed_scale


class M2M100SinusoidalPositionalEmbedding(nn.Module):
    """modeling_m2m_100.M2M100SinusoidalPositionalEmbedding: fairseq's
    sinusoids, num_positions + offset (2) rows, a non-persistent buffer
    "weights" (so not in the state dict; checkpoints written before
    transformers 4.31 may still hold model.*.embed_positions.weights)."""

    def __init__(self, num_positions, embedding_dim, padding_idx=None):
        super().__init__()
        self.offset = 2
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.make_weights(num_positions + self.offset, embedding_dim, padding_idx)

    def make_weights(self, num_embeddings, embedding_dim, padding_idx=None):
        emb_weights = self.get_embedding(num_embeddings, embedding_dim, padding_idx)
        if hasattr(self, "weights"):
            emb_weights = emb_weights.to(dtype=self.weights.dtype, device=self.weights.device)
        self.register_buffer("weights", emb_weights, persistent=False)

    @staticmethod
    def get_embedding(num_embeddings, embedding_dim, padding_idx=None):
        """get_embedding: half_dim = dim // 2, emb = log(10000) / (half_dim - 1),
        row p = [sin(p * exp(-emb * i)) | cos(...)] for i < half_dim (float32),
        a zero column appended when dim is odd, row padding_idx zeroed."""
        half_dim = embedding_dim // 2
        emb = math.log(10000) / (half_dim - 1)
        emb = torch.exp(torch.arange(half_dim, dtype=torch.int64).float() * -emb)
        emb = torch.arange(num_embeddings, dtype=torch.int64).float().unsqueeze(1) * emb.unsqueeze(0)
        emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1).view(num_embeddings, -1)
        if embedding_dim % 2 == 1:
            emb = torch.cat([emb, torch.zeros(num_embeddings, 1)], dim=1)
        if padding_idx is not None:
            emb[padding_idx, :] = 0
        return emb.to(torch.get_default_dtype())

    @staticmethod
    def create_position_ids_from_input_ids(input_ids, padding_idx, past_key_values_length=0):
        """create_position_ids_from_input_ids (fairseq's utils.make_positions):
        (cumsum(non-pad) + past_key_values_length) * non-pad + padding_idx."""
        mask = input_ids.ne(padding_idx).int()
        incremental_indices = (torch.cumsum(mask, dim=1).type_as(mask) + past_key_values_length) * mask
        return incremental_indices.long() + padding_idx

    @torch.no_grad()
    def forward(self, input_ids, past_key_values_length=0, position_ids=None):
        """The rows of input_ids' positions; position_ids, when given, are used
        as they are (decode() passes those of generate()'s cached steps)."""
        bsz, seq_len = input_ids.size()
        if position_ids is None:
            position_ids = self.create_position_ids_from_input_ids(
                input_ids, self.padding_idx, past_key_values_length)
        max_pos = int(position_ids.max()) + 1 if position_ids.numel() else 0
        max_pos = max(max_pos, self.padding_idx + 1 + seq_len + past_key_values_length)
        if max_pos > self.weights.size(0):   # expand embeddings if needed
            self.make_weights(max_pos + self.offset, self.embedding_dim, self.padding_idx)
        return self.weights.index_select(0, position_ids.view(-1)).view(bsz, seq_len, -1).detach()


class M2M100Attention(nn.Module):
    """modeling_m2m_100.M2M100Attention (BartAttention) with
    eager_attention_forward: softmax((q k^T) * head_dim ** -0.5 + mask) v.
    Projections declared k, v, q, out as Hugging Face does (state dict order)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.scaling = self.head_dim ** -0.5
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, hidden_states, key_value_states=None, attention_mask=None):
        """attention_mask: bool (b or 1, 1 or tgt, src), True = hidden."""
        bsz, tgt_len = hidden_states.shape[:-1]
        kv = hidden_states if key_value_states is None else key_value_states
        q = self.q_proj(hidden_states).view(bsz, tgt_len, -1, self.head_dim).transpose(1, 2)
        k = self.k_proj(kv).view(bsz, kv.shape[1], -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(kv).view(bsz, kv.shape[1], -1, self.head_dim).transpose(1, 2)
        w = torch.matmul(q, k.transpose(2, 3)) * self.scaling
        if attention_mask is not None:
            w = w.masked_fill(attention_mask.unsqueeze(1), float("-inf"))
        w = F.dropout(torch.softmax(w, dim=-1), self.dropout, self.training)
        out = torch.matmul(w, v).transpose(1, 2).reshape(bsz, tgt_len, -1)
        return self.out_proj(out)


class M2M100EncoderLayer(nn.Module):
    """modeling_m2m_100.M2M100EncoderLayer (MBartEncoderLayer): pre-LayerNorm
    self-attention and feed-forward blocks, each residual."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.self_attn = M2M100Attention(d, cfg["encoder_attention_heads"], cfg["attention_dropout"])
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.dropout = cfg["dropout"]
        self.activation_fn = mt.activation(cfg["activation_function"])
        self.activation_dropout = cfg["activation_dropout"]
        self.fc1 = nn.Linear(d, cfg["encoder_ffn_dim"])
        self.fc2 = nn.Linear(cfg["encoder_ffn_dim"], d)
        self.final_layer_norm = nn.LayerNorm(d)

    def forward(self, hidden_states, attention_mask):
        residual = hidden_states
        hidden_states = self.self_attn(self.self_attn_layer_norm(hidden_states), attention_mask=attention_mask)
        hidden_states = residual + F.dropout(hidden_states, self.dropout, self.training)
        residual = hidden_states
        hidden_states = self.activation_fn(self.fc1(self.final_layer_norm(hidden_states)))
        hidden_states = F.dropout(hidden_states, self.activation_dropout, self.training)
        hidden_states = F.dropout(self.fc2(hidden_states), self.dropout, self.training)
        return residual + hidden_states


class M2M100DecoderLayer(nn.Module):
    """modeling_m2m_100.M2M100DecoderLayer (MBartDecoderLayer): pre-LayerNorm
    causal self-attention, cross-attention and feed-forward blocks."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.self_attn = M2M100Attention(d, cfg["decoder_attention_heads"], cfg["attention_dropout"])
        self.dropout = cfg["dropout"]
        self.activation_fn = mt.activation(cfg["activation_function"])
        self.activation_dropout = cfg["activation_dropout"]
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.encoder_attn = M2M100Attention(d, cfg["decoder_attention_heads"], cfg["attention_dropout"])
        self.encoder_attn_layer_norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, cfg["decoder_ffn_dim"])
        self.fc2 = nn.Linear(cfg["decoder_ffn_dim"], d)
        self.final_layer_norm = nn.LayerNorm(d)

    def forward(self, hidden_states, attention_mask, encoder_hidden_states, encoder_attention_mask):
        residual = hidden_states
        hidden_states = self.self_attn(self.self_attn_layer_norm(hidden_states), attention_mask=attention_mask)
        hidden_states = residual + F.dropout(hidden_states, self.dropout, self.training)
        residual = hidden_states
        hidden_states = self.encoder_attn(self.encoder_attn_layer_norm(hidden_states),
                                          key_value_states=encoder_hidden_states,
                                          attention_mask=encoder_attention_mask)
        hidden_states = residual + F.dropout(hidden_states, self.dropout, self.training)
        residual = hidden_states
        hidden_states = self.activation_fn(self.fc1(self.final_layer_norm(hidden_states)))
        hidden_states = F.dropout(hidden_states, self.activation_dropout, self.training)
        hidden_states = F.dropout(self.fc2(hidden_states), self.dropout, self.training)
        return residual + hidden_states


class M2M100Encoder(nn.Module):
    """modeling_m2m_100.M2M100Encoder: scaled token embeddings (sharing
    model.shared's weight) + positions, the layers, a final layer_norm."""

    def __init__(self, cfg, embed_tokens=None):
        super().__init__()
        d = cfg["d_model"]
        self.dropout = cfg["dropout"]
        self.padding_idx = cfg["pad_token_id"]
        embed_scale = math.sqrt(d) if cfg["scale_embedding"] else 1.0
        self.embed_tokens = M2M100ScaledWordEmbedding(cfg["vocab_size"], d, self.padding_idx, embed_scale)
        if embed_tokens is not None:
            self.embed_tokens.weight = embed_tokens.weight
        self.embed_positions = M2M100SinusoidalPositionalEmbedding(
            cfg["max_position_embeddings"], d, self.padding_idx)
        self.layers = nn.ModuleList(M2M100EncoderLayer(cfg) for _ in range(cfg["encoder_layers"]))
        self.layer_norm = nn.LayerNorm(d)

    def embed(self, input_ids):
        """inputs_embeds + embed_pos, as forward() adds them."""
        return self.embed_tokens(input_ids) + self.embed_positions(input_ids)

    def forward(self, input_ids, attention_mask=None):
        """attention_mask (b, n): 1 for tokens, 0 for padding (the tokenizer's)."""
        hidden_states = F.dropout(self.embed(input_ids), self.dropout, self.training)
        mask = None
        if attention_mask is not None:
            mask = attention_mask.eq(0).unsqueeze(1)    # (b, 1, n), True = hidden
        for layer in self.layers:
            hidden_states = layer(hidden_states, mask)
        return self.layer_norm(hidden_states)


class M2M100Decoder(nn.Module):
    """modeling_m2m_100.M2M100Decoder."""

    def __init__(self, cfg, embed_tokens=None):
        super().__init__()
        d = cfg["d_model"]
        self.dropout = cfg["dropout"]
        self.padding_idx = cfg["pad_token_id"]
        embed_scale = math.sqrt(d) if cfg["scale_embedding"] else 1.0
        self.embed_tokens = M2M100ScaledWordEmbedding(cfg["vocab_size"], d, self.padding_idx, embed_scale)
        if embed_tokens is not None:
            self.embed_tokens.weight = embed_tokens.weight
        self.embed_positions = M2M100SinusoidalPositionalEmbedding(
            cfg["max_position_embeddings"], d, self.padding_idx)
        self.layers = nn.ModuleList(M2M100DecoderLayer(cfg) for _ in range(cfg["decoder_layers"]))
        self.layer_norm = nn.LayerNorm(d)

    def forward(self, input_ids, encoder_hidden_states, encoder_attention_mask=None, cached_positions=True):
        """Hidden states for decoder inputs (b, n), causal.  cached_positions:
        each token's position as generate() gives it, one step at a time with
        the cache (generation_positions); False: as one forward over the
        whole sequence (create_position_ids_from_input_ids)."""
        n = input_ids.shape[1]
        position_ids = generation_positions(input_ids, self.padding_idx) if cached_positions else None
        hidden_states = self.embed_tokens(input_ids) + self.embed_positions(input_ids, position_ids=position_ids)
        hidden_states = F.dropout(hidden_states, self.dropout, self.training)
        causal = torch.ones(n, n, dtype=torch.bool, device=input_ids.device).triu(1).unsqueeze(0)
        for layer in self.layers:
            hidden_states = layer(hidden_states, causal, encoder_hidden_states, encoder_attention_mask)
        return self.layer_norm(hidden_states)


def generation_positions(input_ids, padding_idx):
    """The position ids generate() gives decoder inputs: step j runs the
    decoder on token j alone with past_key_values_length j, so
    create_position_ids_from_input_ids gives (1 + j) * (token != pad) +
    padding_idx: padding_idx + 1 + j, or padding_idx for a pad token."""
    j = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0) + 1 + padding_idx
    return torch.where(input_ids.ne(padding_idx), j, torch.full_like(j, padding_idx))


class M2M100Model(nn.Module):
    """modeling_m2m_100.M2M100Model: shared is the one embedding table the
    encoder's and decoder's embed_tokens share."""

    def __init__(self, cfg):
        super().__init__()
        embed_scale = math.sqrt(cfg["d_model"]) if cfg["scale_embedding"] else 1.0
        self.shared = M2M100ScaledWordEmbedding(cfg["vocab_size"], cfg["d_model"], cfg["pad_token_id"], embed_scale)
        self.encoder = M2M100Encoder(cfg, self.shared)
        self.decoder = M2M100Decoder(cfg, self.shared)


class M2M100ForConditionalGeneration(nn.Module):
    """modeling_m2m_100.M2M100ForConditionalGeneration: logits =
    lm_head(decoder output), lm_head tied to model.shared (tie_word_embeddings),
    no bias.  cfg: config.json's dict (M2M100Config's defaults fill the rest).

    encode() and decode() are the interface marian_torch's greedy() and
    beam_search() call."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = {**M2M100_DEFAULTS, **cfg}
        self.model = M2M100Model(self.cfg)
        self.lm_head = nn.Linear(self.cfg["d_model"], self.cfg["vocab_size"], bias=False)
        if self.cfg["tie_word_embeddings"]:
            self.lm_head.weight = self.model.shared.weight

    def encode(self, src, attention_mask=None):
        """(encoder output (b, n, d), key mask (b, 1, n), True = padding)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(src)
        return self.model.encoder(src, attention_mask), attention_mask.eq(0).unsqueeze(1)

    def decode(self, tgt_in, memory, memory_pad, last_only=False, cached_positions=True):
        """Logits (b, n, vocab) for decoder inputs tgt_in (b, n), causal; with
        last_only, (b, 1, vocab) for the last position only."""
        x = self.model.decoder(tgt_in, memory, memory_pad, cached_positions)
        if last_only:
            x = x[:, -1:, :]
        return self.lm_head(x)

    def forward(self, input_ids, decoder_input_ids, attention_mask=None):
        """M2M100ForConditionalGeneration.forward without the cache: the
        decoder's positions from create_position_ids_from_input_ids."""
        memory, pad = self.encode(input_ids, attention_mask)
        return self.decode(decoder_input_ids, memory, pad, cached_positions=False)


# ------------------------------------------------------------- generation

def generation_config(directory=None, cfg=None):
    """What from_pretrained() gives an M2M100ForConditionalGeneration:
    marian_torch.generation_config with M2M100Config's defaults."""
    return mt.generation_config(directory, cfg, defaults=M2M100_DEFAULTS)


def generate(model, src_ids, gen, **overrides):
    """marian_torch.generate(): greedy or beam search as generate() does
    them, the forced_bos_token_id (the target language) among the options.
    Returns the ids after decoder_start_token_id, the forced token first, EOS
    excluded (generate() would return [decoder_start] + these + [eos])."""
    return mt.generate(model, src_ids, gen, **overrides)


# ------------------------------------------------------------ checkpoints

def hf_state_dict(model):
    """model.state_dict() as M2M100ForConditionalGeneration.state_dict() has
    it: every alias of the tied embedding (model.shared.weight,
    model.encoder.embed_tokens.weight, model.decoder.embed_tokens.weight,
    lm_head.weight) on one storage; torch.save() of it is what
    save_pretrained(safe_serialization=False) writes."""
    return model.state_dict()


TIED_WEIGHTS_KEYS = ["encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight",
                     "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"]


def safetensors_state_dict(state):
    """save_pretrained(safe_serialization=True)'s removal of aliases
    (modeling_utils.PreTrainedModel.save_pretrained): names sharing a storage
    are taken in sorted order, and those matching a _tied_weights_keys
    pattern (M2M100ForConditionalGeneration's and, prefixed, M2M100Model's)
    are dropped while another name of the group remains: only
    model.shared.weight is left of the embeddings."""
    groups = {}
    for name, t in state.items():
        groups.setdefault(t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage")
                          else t.storage().data_ptr(), []).append(name)
    drop = set()
    for names in groups.values():
        if len(names) < 2:
            continue
        found = 0
        for name in sorted(names):
            if any(re.search(p, name) for p in TIED_WEIGHTS_KEYS):
                found += 1
                if found < len(names):
                    drop.add(name)
    return {k: v for k, v in state.items() if k not in drop}


def split_into_shards(state, max_shard_size, pattern):
    """huggingface_hub.split_torch_state_dict_into_shards: tensors in order,
    a new shard whenever the next would take the current one past
    max_shard_size (bytes); storages counted once.  pattern: e.g.
    "model{suffix}.safetensors".  Returns ({file: [names]}, index) with the
    index save_pretrained writes ({"metadata": {...}, "weight_map": ...})."""
    shards, current, size, seen, total = [], [], 0, set(), 0
    for name, t in state.items():
        key = (t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr())
        nbytes = 0 if key in seen else t.numel() * t.element_size()
        seen.add(key)
        if current and size + nbytes > max_shard_size:
            shards.append(current)
            current, size = [], 0
        current.append(name)
        size += nbytes
        total += nbytes
    if current:
        shards.append(current)
    n = len(shards)
    files = {pattern.format(suffix="-%05d-of-%05d" % (i + 1, n) if n > 1 else ""): names
             for i, names in enumerate(shards)}
    index = {"metadata": {"total_size": total},
             "weight_map": {name: f for f, names in files.items() for name in names}}
    return files, index


def load_state_dict(directory):
    """The tensors of a checkpoint directory as from_pretrained() finds
    them: model.safetensors, model.safetensors.index.json (shards),
    pytorch_model.bin, or pytorch_model.bin.index.json, in that order."""
    def load_file(path):
        if path.endswith(".safetensors"):
            return mt.load_safetensors(path)
        return torch.load(path, map_location="cpu")
    for single, index in (("model.safetensors", "model.safetensors.index.json"),
                          ("pytorch_model.bin", "pytorch_model.bin.index.json")):
        if os.path.exists(os.path.join(directory, single)):
            return load_file(os.path.join(directory, single))
        if os.path.exists(os.path.join(directory, index)):
            with open(os.path.join(directory, index)) as f:
                weight_map = json.load(f)["weight_map"]
            out = {}
            for shard in sorted(set(weight_map.values())):
                out.update(load_file(os.path.join(directory, shard)))
            return out
    raise FileNotFoundError("no checkpoint in %s" % directory)


def load_m2m100(directory):
    """A checkpoint directory as an M2M100ForConditionalGeneration (eval
    mode).  The tied embedding comes from model.shared.weight, or failing it
    from one of its aliases; old checkpoints' embed_positions.weights (a
    persistent buffer before transformers 4.31) are ignored, the table is
    recomputed."""
    with open(os.path.join(directory, "config.json")) as f:
        cfg = json.load(f)
    model = M2M100ForConditionalGeneration(cfg)
    tensors = {k: v.float() for k, v in load_state_dict(directory).items()
               if not k.endswith("embed_positions.weights")}
    aliases = ["model.shared.weight", "model.encoder.embed_tokens.weight",
               "model.decoder.embed_tokens.weight"] + (["lm_head.weight"] if model.cfg["tie_word_embeddings"] else [])
    present = [a for a in aliases if a in tensors]
    if not present:
        raise ValueError("checkpoint has no token embeddings")
    for a in present[1:]:
        if not torch.equal(tensors[a], tensors[present[0]]):
            raise ValueError("tied tensors %s and %s differ" % (present[0], a))
    shared = tensors[present[0]]
    for a in aliases:
        tensors[a] = shared
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    if missing or unexpected:
        raise ValueError("checkpoint mismatch: missing %s, unexpected %s" % (missing, unexpected))
    return model.eval()
