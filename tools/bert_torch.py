"""Encoder-only sentence-embedding models (BERT / XLM-RoBERTa, in the
sentence-transformers layout), in PyTorch: the reference the C code is
checked against.

Ported rule by rule, in eager mode, from Hugging Face transformers
(models/bert/modeling_bert.py, models/xlm_roberta/modeling_xlm_roberta.py,
activations.py, modeling_utils.py's get_extended_attention_mask,
models/bert/tokenization_bert.py and
models/xlm_roberta/tokenization_xlm_roberta.py, the "slow" tokenizers) and
from sentence-transformers (models/Transformer.py's tokenize,
models/Pooling.py, models/Normalize.py).  Nothing is shared with the C code.

- Module and parameter names are those of BertModel / XLMRobertaModel
  (embeddings.word_embeddings.weight, encoder.layer.0.attention.self.query.weight,
  ...), so the state dict of EncoderModel is what save_pretrained() writes.
- A model directory is read as sentence-transformers reads one:
  config.json, model.safetensors or pytorch_model.bin, modules.json,
  1_Pooling/config.json, sentence_bert_config.json, and the tokenizer
  files (vocab.txt or sentencepiece.bpe.model, tokenizer_config.json).
- safetensors goes through tools/marian_torch.py's reader and writer.

    model = load_encoder("models/multi30k_sentence_de_en")
    ids = [model.tokenizer.encode(t, model.max_seq_length) for t in texts]
    hidden, sentences = embed(model, ids)
or  hidden, sentences = encode_texts(model, texts)
"""
import json
import math
import os
import sys
import unicodedata

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from marian_torch import load_safetensors, save_safetensors  # noqa: E402

ROBERTA_TYPES = ("xlm-roberta", "roberta", "camembert")
PREFIXES = ("bert.", "roberta.", "model.")
IGNORED = ("pooler.", "cls.", "lm_head.")

# BertConfig.__init__'s defaults (configuration_bert.py), for keys a
# config.json may leave out
BERT_DEFAULTS = {
    "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
    "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
    "pad_token_id": 0, "position_embedding_type": "absolute",
}
# XLMRobertaConfig differs in these
XLMR_DEFAULTS = dict(BERT_DEFAULTS, pad_token_id=1, bos_token_id=0, eos_token_id=2)


def config_value(cfg, key):
    defaults = XLMR_DEFAULTS if cfg.get("model_type") in ROBERTA_TYPES else BERT_DEFAULTS
    return cfg.get(key, defaults[key])


# ------------------------------------------------------------ activations

def gelu_new(x):
    """activations.NewGELUActivation: the tanh approximation (GPT-2, BERT's
    original TF code)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


# activations.ACT2FN, the entries an encoder config uses
ACT2FN = {
    "gelu": F.gelu,  # GELUActivation: erf form
    "gelu_new": gelu_new,
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
}


# ------------------------------------------------------------------ model

def create_position_ids_from_input_ids(input_ids, padding_idx, past_key_values_length=0):
    """modeling_xlm_roberta.create_position_ids_from_input_ids: positions
    count the non-pad tokens from padding_idx + 1; pads get padding_idx."""
    mask = input_ids.ne(padding_idx).int()
    incremental = (torch.cumsum(mask, dim=1).type_as(mask) + past_key_values_length) * mask
    return incremental.long() + padding_idx


class BertEmbeddings(nn.Module):
    """modeling_bert.BertEmbeddings, and (roberta=True)
    modeling_xlm_roberta.XLMRobertaEmbeddings: word + token_type + absolute
    position embeddings, LayerNorm, dropout.  BERT numbers positions
    0..n-1; XLM-R counts non-pad tokens from pad_token_id + 1 and its
    position table has padding_idx = pad_token_id."""

    def __init__(self, cfg):
        super().__init__()
        h, pad = cfg["hidden_size"], config_value(cfg, "pad_token_id")
        self.roberta = cfg.get("model_type") in ROBERTA_TYPES
        self.padding_idx = pad
        if config_value(cfg, "position_embedding_type") != "absolute":
            raise ValueError("position_embedding_type %r is not supported"
                             % cfg["position_embedding_type"])
        self.word_embeddings = nn.Embedding(cfg["vocab_size"], h, padding_idx=pad)
        self.position_embeddings = nn.Embedding(config_value(cfg, "max_position_embeddings"), h,
                                                padding_idx=pad if self.roberta else None)
        self.token_type_embeddings = nn.Embedding(config_value(cfg, "type_vocab_size"), h)
        self.LayerNorm = nn.LayerNorm(h, eps=config_value(cfg, "layer_norm_eps"))
        self.dropout = nn.Dropout(config_value(cfg, "hidden_dropout_prob"))

    def forward(self, input_ids, token_type_ids=None, position_ids=None):
        if position_ids is None:
            if self.roberta:
                position_ids = create_position_ids_from_input_ids(input_ids, self.padding_idx)
            else:
                position_ids = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        embeddings = embeddings + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(embeddings))


class BertSelfAttention(nn.Module):
    """modeling_bert.BertSelfAttention (eager, absolute positions, no cache):
    softmax(q k^T / sqrt(head_size) + extended_mask) v."""

    def __init__(self, cfg):
        super().__init__()
        h, n = cfg["hidden_size"], cfg["num_attention_heads"]
        if h % n:
            raise ValueError("hidden_size %d is not a multiple of num_attention_heads %d" % (h, n))
        self.num_attention_heads, self.attention_head_size = n, h // n
        self.query = nn.Linear(h, h)
        self.key = nn.Linear(h, h)
        self.value = nn.Linear(h, h)
        self.dropout = nn.Dropout(config_value(cfg, "attention_probs_dropout_prob"))

    def transpose_for_scores(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.num_attention_heads, self.attention_head_size).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask=None):
        q = self.transpose_for_scores(self.query(hidden_states))
        k = self.transpose_for_scores(self.key(hidden_states))
        v = self.transpose_for_scores(self.value(hidden_states))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.attention_head_size)
        if attention_mask is not None:
            scores = scores + attention_mask
        probs = self.dropout(F.softmax(scores, dim=-1))
        context = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return context.view(context.shape[0], context.shape[1], -1)


class BertSelfOutput(nn.Module):
    """modeling_bert.BertSelfOutput: LayerNorm(dropout(dense(x)) + input)."""

    def __init__(self, cfg):
        super().__init__()
        h = cfg["hidden_size"]
        self.dense = nn.Linear(h, h)
        self.LayerNorm = nn.LayerNorm(h, eps=config_value(cfg, "layer_norm_eps"))
        self.dropout = nn.Dropout(config_value(cfg, "hidden_dropout_prob"))

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class BertAttention(nn.Module):
    """modeling_bert.BertAttention: self-attention, then BertSelfOutput."""

    def __init__(self, cfg):
        super().__init__()
        self.self = BertSelfAttention(cfg)
        self.output = BertSelfOutput(cfg)

    def forward(self, hidden_states, attention_mask=None):
        return self.output(self.self(hidden_states, attention_mask), hidden_states)


class BertIntermediate(nn.Module):
    """modeling_bert.BertIntermediate: act(dense(x)), act = ACT2FN[hidden_act]."""

    def __init__(self, cfg):
        super().__init__()
        act = config_value(cfg, "hidden_act")
        if act not in ACT2FN:
            raise ValueError("hidden_act %r is not supported" % act)
        self.dense = nn.Linear(cfg["hidden_size"], cfg["intermediate_size"])
        self.intermediate_act_fn = ACT2FN[act]

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class BertOutput(nn.Module):
    """modeling_bert.BertOutput: LayerNorm(dropout(dense(x)) + input)."""

    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg["intermediate_size"], cfg["hidden_size"])
        self.LayerNorm = nn.LayerNorm(cfg["hidden_size"], eps=config_value(cfg, "layer_norm_eps"))
        self.dropout = nn.Dropout(config_value(cfg, "hidden_dropout_prob"))

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class BertLayer(nn.Module):
    """modeling_bert.BertLayer (encoder only): attention, then the
    feed-forward block (feed_forward_chunk; chunking does not change the
    result)."""

    def __init__(self, cfg):
        super().__init__()
        self.attention = BertAttention(cfg)
        self.intermediate = BertIntermediate(cfg)
        self.output = BertOutput(cfg)

    def forward(self, hidden_states, attention_mask=None):
        attention_output = self.attention(hidden_states, attention_mask)
        return self.output(self.intermediate(attention_output), attention_output)


class BertEncoder(nn.Module):
    """modeling_bert.BertEncoder: the stack of BertLayer."""

    def __init__(self, cfg):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(cfg) for _ in range(cfg["num_hidden_layers"]))

    def forward(self, hidden_states, attention_mask=None):
        for layer in self.layer:
            hidden_states = layer(hidden_states, attention_mask)
        return hidden_states


class BertPooler(nn.Module):
    """modeling_bert.BertPooler: tanh(dense(first token)).  Not used for
    sentence embeddings (sentence-transformers pools last_hidden_state)."""

    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg["hidden_size"], cfg["hidden_size"])

    def forward(self, hidden_states):
        return torch.tanh(self.dense(hidden_states[:, 0]))


def get_extended_attention_mask(attention_mask, dtype=torch.float32):
    """modeling_utils.ModuleUtilsMixin.get_extended_attention_mask for an
    encoder: (b, s) 1/0 -> (b, 1, 1, s), 0 where attended and
    torch.finfo(dtype).min where masked."""
    extended = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - extended) * torch.finfo(dtype).min


class EncoderModel(nn.Module):
    """modeling_bert.BertModel, and modeling_xlm_roberta.XLMRobertaModel
    (model_type "xlm-roberta"/"roberta": the same layers with
    XLMRobertaEmbeddings).  forward returns last_hidden_state (b, s, h)."""

    def __init__(self, cfg, add_pooling_layer=False):
        super().__init__()
        self.cfg = cfg
        self.embeddings = BertEmbeddings(cfg)
        self.encoder = BertEncoder(cfg)
        self.pooler = BertPooler(cfg) if add_pooling_layer else None

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        x = self.embeddings(input_ids, token_type_ids)
        return self.encoder(x, get_extended_attention_mask(attention_mask, x.dtype))


# ------------------------------------------------------- sentence-transformers

POOLING_KEYS = ["pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens",
                "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                "pooling_mode_lasttoken"]
POOLING_MODES = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens",
                 "max": "pooling_mode_max_tokens",
                 "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
                 "weightedmean": "pooling_mode_weightedmean_tokens",
                 "lasttoken": "pooling_mode_lasttoken"}


class Pooling(nn.Module):
    """sentence_transformers.models.Pooling.  Several modes true: their
    vectors concatenated in the order cls, max, mean, mean_sqrt_len_tokens,
    weightedmean, lasttoken (Pooling.forward's order).  Defaults as
    Pooling.__init__: mean true, the others false."""

    def __init__(self, word_embedding_dimension, pooling_mode=None, **modes):
        super().__init__()
        self.word_embedding_dimension = word_embedding_dimension
        flags = {k: False for k in POOLING_KEYS}
        flags["pooling_mode_mean_tokens"] = True
        if pooling_mode is not None:
            if pooling_mode not in POOLING_MODES:
                raise ValueError("pooling mode %r" % pooling_mode)
            flags = {k: POOLING_MODES[pooling_mode] == k for k in POOLING_KEYS}
        for k, v in modes.items():
            if k in flags:
                flags[k] = bool(v)
            elif k != "include_prompt":
                raise ValueError("unknown Pooling key %r" % k)
        self.flags = flags
        if not any(flags.values()):
            raise ValueError("no pooling mode set")

    def get_config_dict(self):
        return dict({"word_embedding_dimension": self.word_embedding_dimension}, **self.flags,
                    include_prompt=True)

    def modes(self):
        return [k for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                            "pooling_mode_mean_tokens", "pooling_mode_mean_sqrt_len_tokens",
                            "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")
                if self.flags[k]]

    def forward(self, token_embeddings, attention_mask):
        out = []
        mask = attention_mask.unsqueeze(-1).expand(token_embeddings.size()).to(token_embeddings.dtype)
        if self.flags["pooling_mode_cls_token"]:
            out.append(token_embeddings[:, 0])
        if self.flags["pooling_mode_max_tokens"]:
            # Pooling sets padded positions to -1e9 in place; a copy here,
            # so last_hidden_state stays as the model gave it
            t = token_embeddings.clone()
            t[mask == 0] = -1e9
            out.append(torch.max(t, 1)[0])
        if self.flags["pooling_mode_mean_tokens"] or self.flags["pooling_mode_mean_sqrt_len_tokens"]:
            sum_embeddings = torch.sum(token_embeddings * mask, 1)
            sum_mask = torch.clamp(mask.sum(1), min=1e-9)
            if self.flags["pooling_mode_mean_tokens"]:
                out.append(sum_embeddings / sum_mask)
            if self.flags["pooling_mode_mean_sqrt_len_tokens"]:
                out.append(sum_embeddings / torch.sqrt(sum_mask))
        if self.flags["pooling_mode_weightedmean_tokens"]:
            weights = torch.arange(1, token_embeddings.shape[1] + 1, dtype=token_embeddings.dtype)
            w = mask * weights.view(1, -1, 1)
            out.append(torch.sum(token_embeddings * w, 1) / torch.clamp(w.sum(1), min=1e-9))
        if self.flags["pooling_mode_lasttoken"]:
            b, s, h = token_embeddings.shape
            values, indices = attention_mask.flip(1).max(1)
            indices = torch.where(values == 0, s - 1, indices)
            gather = (s - indices - 1).view(b, 1, 1).expand(b, 1, h)
            out.append(torch.gather(token_embeddings * mask, 1, gather).squeeze(1))
        return torch.cat(out, 1)


class Normalize(nn.Module):
    """sentence_transformers.models.Normalize: F.normalize(p=2, dim=1)."""

    def forward(self, x):
        return F.normalize(x, p=2, dim=1)


class SentenceEncoder(nn.Module):
    """A SentenceTransformer of [Transformer, Pooling, (Normalize)]."""

    def __init__(self, cfg, pooling, normalize=False, max_seq_length=128, tokenizer=None,
                 do_lower_case=False, add_pooling_layer=False):
        super().__init__()
        self.cfg = cfg
        self.transformer = EncoderModel(cfg, add_pooling_layer)
        self.pooling = pooling
        self.normalize = Normalize() if normalize else None
        self.max_seq_length = max_seq_length
        self.tokenizer = tokenizer
        self.do_lower_case = do_lower_case

    def forward(self, input_ids, attention_mask):
        hidden = self.transformer(input_ids, attention_mask)
        sentence = self.pooling(hidden, attention_mask)
        if self.normalize is not None:
            sentence = self.normalize(sentence)
        return hidden, sentence


def pad_batch(batch_of_id_lists, pad_id):
    """Right padding with pad_id, as the tokenizer's padding=True does; and
    the attention mask."""
    n = max(len(ids) for ids in batch_of_id_lists)
    input_ids = torch.full((len(batch_of_id_lists), n), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(batch_of_id_lists), n), dtype=torch.long)
    for i, ids in enumerate(batch_of_id_lists):
        input_ids[i, :len(ids)] = torch.tensor(ids, dtype=torch.long)
        attention_mask[i, :len(ids)] = 1
    return input_ids, attention_mask


def embed(model, batch_of_id_lists):
    """(last_hidden_state (b, s, h), sentence_embeddings (b, d)) for token
    id lists (specials included), right-padded with the model's pad id."""
    input_ids, attention_mask = pad_batch(batch_of_id_lists, config_value(model.cfg, "pad_token_id"))
    with torch.no_grad():
        return model(input_ids, attention_mask)


def tokenize_texts(model, texts):
    """sentence_transformers.models.Transformer.tokenize for single texts:
    strip, lowercase if sentence_bert_config's do_lower_case, then the
    tokenizer with truncation to max_seq_length (specials included)."""
    out = []
    for t in texts:
        t = str(t).strip()
        if model.do_lower_case:
            t = t.lower()
        out.append(model.tokenizer.encode(t, model.max_seq_length))
    return out


def encode_texts(model, texts):
    return embed(model, tokenize_texts(model, texts))


# --------------------------------------------------------------- tokenizers

def split_on_tokens(text, specials, lstrip=()):
    """PreTrainedTokenizer.tokenize's split on added tokens (its trie):
    leftmost, longest special token first; the pieces between go on to the
    model's tokenizer.  Tokens in lstrip eat the whitespace before them
    (XLM-R's <mask>).  Returns [(is_special, string)]."""
    out, i, start = [], 0, 0
    ordered = sorted(specials, key=len, reverse=True)
    while i < len(text):
        hit = next((s for s in ordered if text.startswith(s, i)), None)
        if hit is None:
            i += 1
            continue
        chunk = text[start:i]
        if hit in lstrip:
            chunk = chunk.rstrip()
        if chunk:
            out.append((False, chunk))
        out.append((True, hit))
        i = start = i + len(hit)
    if start < len(text):
        out.append((False, text[start:]))
    return out


class XLMRobertaTokenizer:
    """tokenization_xlm_roberta.XLMRobertaTokenizer (the slow one):
    SentencePiece pieces, ids by the fairseq rule: <s> 0, <pad> 1, </s> 2,
    <unk> 3, any other piece its SentencePiece id + 1 (SentencePiece id 0,
    the unknown piece of a model laid out as XLM-R's, -> 3), <mask> =
    len(sp) + 1; a sequence is <s> ... </s>."""

    def __init__(self, model_file):
        import sentencepiece as spm
        self.sp = spm.SentencePieceProcessor(model_file=model_file)
        self.fairseq_offset = 1
        self.fairseq_tokens_to_ids = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
        self.fairseq_tokens_to_ids["<mask>"] = len(self.sp) + self.fairseq_offset
        self.fairseq_ids_to_tokens = {v: k for k, v in self.fairseq_tokens_to_ids.items()}
        self.cls_token_id, self.sep_token_id, self.pad_token_id, self.unk_token_id = 0, 2, 1, 3
        self.vocab_size = len(self.sp) + self.fairseq_offset + 1

    def _tokenize(self, text):
        return self.sp.encode(text, out_type=str)

    def tokenize(self, text):
        pieces = []
        for special, chunk in split_on_tokens(text, list(self.fairseq_tokens_to_ids), ("<mask>",)):
            pieces += [chunk] if special else self._tokenize(chunk)
        return pieces

    def _convert_token_to_id(self, token):
        if token in self.fairseq_tokens_to_ids:
            return self.fairseq_tokens_to_ids[token]
        spm_id = self.sp.piece_to_id(token)
        # an unknown piece gets spm id 0 in XLM-R's model: the unk id
        return spm_id + self.fairseq_offset if spm_id else self.unk_token_id

    def convert_tokens_to_ids(self, tokens):
        return [self._convert_token_to_id(t) for t in tokens]

    def convert_ids_to_tokens(self, ids):
        return [self.fairseq_ids_to_tokens[i] if i in self.fairseq_ids_to_tokens
                else self.sp.id_to_piece(i - self.fairseq_offset) for i in ids]

    def encode(self, text, max_length=None):
        """[<s>] + ids + [</s>]; with max_length, the ids cut to
        max_length - 2 (truncation="longest_first" on one sequence)."""
        ids = self.convert_tokens_to_ids(self.tokenize(text))
        if max_length is not None:
            ids = ids[:max(max_length - 2, 0)]
        return [self.cls_token_id] + ids + [self.sep_token_id]


def load_vocab(vocab_file):
    """tokenization_bert.load_vocab: one token a line, the line number its id."""
    vocab = {}
    with open(vocab_file, encoding="utf-8") as f:
        for i, line in enumerate(f):
            vocab[line.rstrip("\n")] = i
    return vocab


def whitespace_tokenize(text):
    """tokenization_bert.whitespace_tokenize."""
    text = text.strip()
    return text.split() if text else []


def _is_whitespace(char):
    """tokenization_utils._is_whitespace."""
    if char in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(char) == "Zs"


def _is_control(char):
    """tokenization_utils._is_control."""
    if char in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(char).startswith("C")


def _is_punctuation(char):
    """tokenization_utils._is_punctuation: ASCII non-alphanumerics, Unicode P*."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_chinese_char(cp):
    """tokenization_bert.BasicTokenizer._is_chinese_char: CJK Unified
    Ideographs blocks."""
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


class BasicTokenizer:
    """tokenization_bert.BasicTokenizer: clean text, space out CJK
    characters, NFC, whitespace split, lowercase (+ strip accents unless
    strip_accents is False) or strip accents alone if strip_accents is
    true, split on punctuation."""

    def __init__(self, do_lower_case=True, never_split=None, tokenize_chinese_chars=True,
                 strip_accents=None, do_split_on_punc=True):
        self.do_lower_case = do_lower_case
        self.never_split = set(never_split or [])
        self.tokenize_chinese_chars = tokenize_chinese_chars
        self.strip_accents = strip_accents
        self.do_split_on_punc = do_split_on_punc

    def tokenize(self, text, never_split=None):
        never_split = self.never_split.union(set(never_split)) if never_split else self.never_split
        text = self._clean_text(text)
        if self.tokenize_chinese_chars:
            text = self._tokenize_chinese_chars(text)
        orig_tokens = whitespace_tokenize(unicodedata.normalize("NFC", text))
        split_tokens = []
        for token in orig_tokens:
            if token not in never_split:
                if self.do_lower_case:
                    token = token.lower()
                    if self.strip_accents is not False:
                        token = self._run_strip_accents(token)
                elif self.strip_accents:
                    token = self._run_strip_accents(token)
            split_tokens.extend(self._run_split_on_punc(token, never_split))
        return whitespace_tokenize(" ".join(split_tokens))

    @staticmethod
    def _run_strip_accents(text):
        text = unicodedata.normalize("NFD", text)
        return "".join(c for c in text if unicodedata.category(c) != "Mn")

    def _run_split_on_punc(self, text, never_split=None):
        if not self.do_split_on_punc or (never_split is not None and text in never_split):
            return [text]
        output, start_new_word = [], True
        for char in text:
            if _is_punctuation(char):
                output.append([char])
                start_new_word = True
            else:
                if start_new_word:
                    output.append([])
                start_new_word = False
                output[-1].append(char)
        return ["".join(x) for x in output]

    @staticmethod
    def _tokenize_chinese_chars(text):
        return "".join(" %s " % c if _is_chinese_char(ord(c)) else c for c in text)

    @staticmethod
    def _clean_text(text):
        output = []
        for char in text:
            cp = ord(char)
            if cp == 0 or cp == 0xFFFD or _is_control(char):
                continue
            output.append(" " if _is_whitespace(char) else char)
        return "".join(output)


class WordpieceTokenizer:
    """tokenization_bert.WordpieceTokenizer: greedy longest match first,
    continuations prefixed "##"; a word longer than max_input_chars_per_word
    characters, or one that cannot be covered, is one unk token."""

    def __init__(self, vocab, unk_token, max_input_chars_per_word=100):
        self.vocab, self.unk_token = vocab, unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize(self, text):
        output_tokens = []
        for token in whitespace_tokenize(text):
            chars = list(token)
            if len(chars) > self.max_input_chars_per_word:
                output_tokens.append(self.unk_token)
                continue
            is_bad, start, sub_tokens = False, 0, []
            while start < len(chars):
                end, cur_substr = len(chars), None
                while start < end:
                    substr = "".join(chars[start:end])
                    if start > 0:
                        substr = "##" + substr
                    if substr in self.vocab:
                        cur_substr = substr
                        break
                    end -= 1
                if cur_substr is None:
                    is_bad = True
                    break
                sub_tokens.append(cur_substr)
                start = end
            if is_bad:
                output_tokens.append(self.unk_token)
            else:
                output_tokens.extend(sub_tokens)
        return output_tokens


class BertTokenizer:
    """tokenization_bert.BertTokenizer (the slow one) with
    PreTrainedTokenizer.tokenize's handling of special tokens: special
    tokens written in the text are kept whole (the text is split on them
    first and, with do_lower_case, lowercased around them); the rest goes
    through BasicTokenizer then WordpieceTokenizer.  A sequence is
    [CLS] ... [SEP]."""

    def __init__(self, vocab_file, do_lower_case=True, do_basic_tokenize=True, never_split=None,
                 unk_token="[UNK]", sep_token="[SEP]", pad_token="[PAD]", cls_token="[CLS]",
                 mask_token="[MASK]", tokenize_chinese_chars=True, strip_accents=None):
        self.vocab = load_vocab(vocab_file)
        self.ids_to_tokens = {i: t for t, i in self.vocab.items()}
        self.do_lower_case = do_lower_case
        self.do_basic_tokenize = do_basic_tokenize
        self.basic_tokenizer = BasicTokenizer(do_lower_case, never_split, tokenize_chinese_chars,
                                              strip_accents)
        self.unk_token, self.sep_token, self.pad_token = unk_token, sep_token, pad_token
        self.cls_token, self.mask_token = cls_token, mask_token
        self.all_special_tokens = [unk_token, sep_token, pad_token, cls_token, mask_token]
        self.wordpiece_tokenizer = WordpieceTokenizer(self.vocab, unk_token)
        self.cls_token_id = self.vocab[cls_token]
        self.sep_token_id = self.vocab[sep_token]
        self.pad_token_id = self.vocab.get(pad_token)
        self.unk_token_id = self.vocab[unk_token]

    def _tokenize(self, text):
        if not self.do_basic_tokenize:
            return self.wordpiece_tokenizer.tokenize(text)
        split_tokens = []
        for token in self.basic_tokenizer.tokenize(text, never_split=self.all_special_tokens):
            if token in self.basic_tokenizer.never_split:
                split_tokens.append(token)
            else:
                split_tokens += self.wordpiece_tokenizer.tokenize(token)
        return split_tokens

    def tokenize(self, text):
        tokens = []
        for special, chunk in split_on_tokens(text, self.all_special_tokens):
            if special:
                tokens.append(chunk)
            else:
                tokens += self._tokenize(chunk.lower() if self.do_lower_case else chunk)
        return tokens

    def convert_tokens_to_ids(self, tokens):
        return [self.vocab.get(t, self.unk_token_id) for t in tokens]

    def convert_ids_to_tokens(self, ids):
        return [self.ids_to_tokens[i] for i in ids]

    def encode(self, text, max_length=None):
        """[CLS] + ids + [SEP]; with max_length, ids cut to max_length - 2."""
        ids = self.convert_tokens_to_ids(self.tokenize(text))
        if max_length is not None:
            ids = ids[:max(max_length - 2, 0)]
        return [self.cls_token_id] + ids + [self.sep_token_id]


def load_tokenizer(directory):
    """The tokenizer of a model directory, as AutoTokenizer (slow) picks it:
    sentencepiece.bpe.model -> XLMRobertaTokenizer, vocab.txt ->
    BertTokenizer with tokenizer_config.json's options (BertTokenizer's
    defaults otherwise); None when there is neither."""
    tc = {}
    path = os.path.join(directory, "tokenizer_config.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            tc = json.load(f)
    spm_file = os.path.join(directory, "sentencepiece.bpe.model")
    vocab_file = os.path.join(directory, "vocab.txt")
    if os.path.exists(spm_file) and tc.get("tokenizer_class", "XLMRobertaTokenizer").startswith("XLMRoberta"):
        return XLMRobertaTokenizer(spm_file)
    if os.path.exists(vocab_file):
        keys = ("do_lower_case", "do_basic_tokenize", "never_split", "unk_token", "sep_token",
                "pad_token", "cls_token", "mask_token", "tokenize_chinese_chars", "strip_accents")
        kw = {}
        for k in keys:
            if k in tc:
                v = tc[k]
                kw[k] = v["content"] if isinstance(v, dict) else v
        return BertTokenizer(vocab_file, **kw)
    return None


# ---------------------------------------------------------------- checkpoints

def _read_json(path, default=None):
    if not os.path.exists(path):
        return default
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_state_dict(directory):
    """model.safetensors, else pytorch_model.bin; names with or without a
    "bert."/"roberta." prefix; pooler.*, cls.*, lm_head.* set apart."""
    st = os.path.join(directory, "model.safetensors")
    if os.path.exists(st):
        tensors = load_safetensors(st)
    else:
        tensors = torch.load(os.path.join(directory, "pytorch_model.bin"), map_location="cpu")
    body, extra = {}, {}
    for k, v in tensors.items():
        for p in PREFIXES:
            if k.startswith(p):
                k = k[len(p):]
                break
        if k.endswith("embeddings.position_ids") or k.endswith("embeddings.token_type_ids"):
            continue  # buffers some older checkpoints carry
        (extra if k.startswith(IGNORED) else body)[k] = v.float() if v.is_floating_point() else v
    return body, extra


def load_encoder(directory, with_pooler=False):
    """A sentence-transformers model directory as a SentenceEncoder, in eval
    mode; model.tokenizer set when the directory has tokenizer files.
    modules.json absent: mean pooling, no Normalize (what
    SentenceTransformer builds around a bare Transformer)."""
    cfg = _read_json(os.path.join(directory, "config.json"))
    modules = _read_json(os.path.join(directory, "modules.json"), [])
    pooling_cfg, normalize = None, False
    for m in modules:
        t = m["type"]
        if t.endswith("models.Pooling"):
            pooling_cfg = _read_json(os.path.join(directory, m["path"], "config.json"))
        elif t.endswith("models.Normalize"):
            normalize = True
        elif not t.endswith("models.Transformer"):
            raise ValueError("module %s is not supported" % t)
    if pooling_cfg is None:
        pooling_cfg = {"word_embedding_dimension": cfg["hidden_size"], "pooling_mode": "mean"}
    pooling_cfg = dict(pooling_cfg)
    pooling = Pooling(pooling_cfg.pop("word_embedding_dimension"), pooling_cfg.pop("pooling_mode", None),
                      **pooling_cfg)
    sb = _read_json(os.path.join(directory, "sentence_bert_config.json"), {})
    body, extra = read_state_dict(directory)
    model = SentenceEncoder(cfg, pooling, normalize, sb.get("max_seq_length") or 512,
                            load_tokenizer(directory), sb.get("do_lower_case", False),
                            add_pooling_layer=with_pooler and "pooler.dense.weight" in extra)
    sd = {"transformer." + k: v for k, v in body.items()}
    if model.transformer.pooler is not None:
        sd.update({"transformer." + k: v for k, v in extra.items() if k.startswith("pooler.")})
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if missing or unexpected:
        raise ValueError("checkpoint mismatch: missing %s, unexpected %s" % (missing, unexpected))
    return model.eval()


def encoder_state(model, prefix="", extra=None):
    """The checkpoint tensors in BertModel/XLMRobertaModel names (no prefix
    unless given), plus extra tensors as they are."""
    sd = {prefix + k: v.detach().float().contiguous() for k, v in model.transformer.state_dict().items()}
    sd.update(extra or {})
    return sd


def save_encoder(model, directory, prefix="", extra_tensors=None, pytorch_bin=False,
                 config_extra=None):
    """config.json, model.safetensors (or pytorch_model.bin), modules.json,
    1_Pooling/config.json, sentence_bert_config.json.  Tokenizer files are
    the caller's."""
    os.makedirs(os.path.join(directory, "1_Pooling"), exist_ok=True)
    sd = encoder_state(model, prefix, extra_tensors)
    if pytorch_bin:
        torch.save(sd, os.path.join(directory, "pytorch_model.bin"))
    else:
        save_safetensors(os.path.join(directory, "model.safetensors"), sd)
    cfg = dict(model.cfg, **(config_extra or {}))
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if model.normalize is not None:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
    with open(os.path.join(directory, "modules.json"), "w") as f:
        json.dump(modules, f, indent=2)
        f.write("\n")
    with open(os.path.join(directory, "1_Pooling", "config.json"), "w") as f:
        json.dump(model.pooling.get_config_dict(), f, indent=2)
        f.write("\n")
    with open(os.path.join(directory, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": model.max_seq_length, "do_lower_case": model.do_lower_case},
                  f, indent=2)
        f.write("\n")


def xlmr_config(vocab_size, hidden, layers, heads, intermediate, max_positions, act="gelu",
                layer_norm_eps=1e-5, dropout=0.1):
    """An XLMRobertaConfig-compatible dict; max_positions counts the two
    rows before the first position (pad_token_id + 1)."""
    return {
        "architectures": ["XLMRobertaModel"], "model_type": "xlm-roberta",
        "vocab_size": vocab_size, "hidden_size": hidden, "num_hidden_layers": layers,
        "num_attention_heads": heads, "intermediate_size": intermediate, "hidden_act": act,
        "hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout,
        "max_position_embeddings": max_positions, "type_vocab_size": 1,
        "layer_norm_eps": layer_norm_eps, "initializer_range": 0.02,
        "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
        "position_embedding_type": "absolute", "use_cache": True, "classifier_dropout": None,
    }


def bert_config(vocab_size, hidden, layers, heads, intermediate, max_positions, act="gelu",
                type_vocab_size=2, layer_norm_eps=1e-12, dropout=0.1, pad_token_id=0):
    """A BertConfig-compatible dict."""
    return {
        "architectures": ["BertModel"], "model_type": "bert",
        "vocab_size": vocab_size, "hidden_size": hidden, "num_hidden_layers": layers,
        "num_attention_heads": heads, "intermediate_size": intermediate, "hidden_act": act,
        "hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout,
        "max_position_embeddings": max_positions, "type_vocab_size": type_vocab_size,
        "layer_norm_eps": layer_norm_eps, "initializer_range": 0.02,
        "pad_token_id": pad_token_id, "position_embedding_type": "absolute",
        "use_cache": True, "classifier_dropout": None,
    }


def init_weights(model, std=0.02, generator=None):
    """BertPreTrainedModel._init_weights: Linear and Embedding normal(0,
    std), biases and the padding row zero, LayerNorm 1 and 0."""
    for m in model.modules():
        if isinstance(m, nn.Linear):
            with torch.no_grad():
                m.weight.normal_(0.0, std, generator=generator)
                m.bias.zero_()
        elif isinstance(m, nn.Embedding):
            with torch.no_grad():
                m.weight.normal_(0.0, std, generator=generator)
                if m.padding_idx is not None:
                    m.weight[m.padding_idx].zero_()
        elif isinstance(m, nn.LayerNorm):
            with torch.no_grad():
                m.weight.fill_(1.0)
                m.bias.zero_()


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="Sentence embeddings of texts with a model directory.")
    ap.add_argument("model")
    ap.add_argument("texts", nargs="+")
    a = ap.parse_args()
    m = load_encoder(a.model)
    ids = tokenize_texts(m, a.texts)
    _, emb = embed(m, ids)
    for t, i, e in zip(a.texts, ids, emb):
        print(json.dumps({"text": t, "input_ids": i, "embedding": [round(x, 6) for x in e.tolist()]}))
