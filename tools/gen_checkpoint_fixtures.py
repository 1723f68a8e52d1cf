#!/usr/bin/python3
"""Regenerate the checkpoint-layout fixtures in test/fixtures/checkpoints/.

Small random-weight models in the directory layouts Hugging Face's hub
models come in, each with the ids the reference gives (expected.json):

  nllb_tiny/          NLLB-200 (M2M100ForConditionalGeneration, NllbTokenizer):
                      model.safetensors, sentencepiece.bpe.model,
                      tokenizer.json (NllbConverter's), tokenizer_config.json
  nllb_tiny_bin/      the same model as pytorch_model.bin (torch.save, zip),
                      every tied alias in it, as save_pretrained writes .bin
  nllb_tiny_legacy/   the same, legacy_behaviour true (the language code
                      after </s>), pytorch_model.bin in torch's legacy
                      (_use_new_zipfile_serialization=False) format
  m2m100_tiny/        M2M100 (M2M100Tokenizer: vocab.json + spm, __xx__
                      language tokens), safetensors in two shards + index
  marian_sepvocab/    MarianMTModel with separate source / target
                      vocabularies and untied embeddings, pytorch_model.bin
                      in two shards + index
  marian_multi/       a multi-target Marian (>>fra<< ... in vocab.json),
                      encoder and decoder of different shapes, swish,
                      pytorch_model.bin

The tokenizers are SentencePiece models trained here on Multi30k's training
set (BPE for NLLB / M2M100, unigram for Marian); the weights are random
(seeded).  The references: tools/m2m100_torch.py and tools/marian_torch.py
(the models, generate()), tools/nllb_tokenizer.py (the slow tokenizers and
NLLB's tokenizer.json).  For nllb_tiny*, m2m100_tiny the ids are also checked
against Hugging Face's JavaScript tokenizers (tools/npm_tokenizers, run with
node; npm_ids.json), on the fixture sentences and on every Multi30k sentence.

Run with Debian's interpreter: /usr/bin/python3 tools/gen_checkpoint_fixtures.py
(--skip-npm: keep the npm_ids.json files there are, without node).
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

import sentencepiece as spm
import torch

TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS)
import marian_torch as mt  # noqa: E402
import m2m100_torch as m2m  # noqa: E402
import nllb_tokenizer as nt  # noqa: E402

ROOT = os.path.dirname(TOOLS)
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data", "multi30k")
OUT = os.path.join(ROOT, "test", "fixtures", "checkpoints")
NPM = os.path.join(TOOLS, "npm_tokenizers")

SEED = 20240611
N_CASES = 200          # sentences of test_2016_flickr per fixture
N_ENCODER = 5          # of which the encoder output is recorded
MAX_LENGTH = 24        # the generation config's max_length
BEAM = 4

# a subset of NLLB-200's 202 codes, in FAIRSEQ_LANGUAGE_CODES' order (their ids' order)
NLLB_LANGS = sorted(["deu_Latn", "eng_Latn", "fra_Latn", "spa_Latn", "ita_Latn", "zho_Hans", "rus_Cyrl",
                     "arb_Arab"], key=nt.NLLB_LANGUAGE_CODES.index)
NLLB_OTHER_TARGETS = ["fra_Latn", "spa_Latn", "ita_Latn", "zho_Hans", "rus_Cyrl", "arb_Arab"]
M2M_OTHER_TARGETS = ["fr", "es", "it", "zh", "ru", "ar"]
MARIAN_CODES = [">>fra<<", ">>spa<<", ">>ita<<", ">>por<<"]
SPLITS = ["train", "val", "test_2016_flickr", "test_2017_flickr"]

# tokenizer-only comparison extras: whitespace, normalization and added tokens
STRESS = [
    "", " ", "  Zwei   Männer\tim  Park  ", "Ein Hund.\nEin Mann.", "ﬁ ＡＢＣ　１２３！ Ⅻ ㎏",
    "e\u0301 vs \u00e9", "Straße Œuvre façade naïve", "中华人民共和国", "Привет, мир!", "مرحبا",
    "ends with space ", "deu_Latn im Text", "eng_Latn", "<s> und </s> und <pad> und <unk>",
    "ein <mask> Hund", "__de__ Hund __en__", "☃☃☃ Schnee", "a\u200bb", "Tab\tTab", "x" * 300,
]


def read_lines(split, lang):
    with gzip.open(os.path.join(DATA, "%s.%s.gz" % (split, lang)), "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def write_json(path, obj, indent=2, sort_keys=True):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=indent, sort_keys=sort_keys, ensure_ascii=False)
        f.write("\n")


def sig6(x):
    return float("%.6g" % x)


# ------------------------------------------------------------ tokenizers

def train_spm(work):
    """The three SentencePiece models, trained in `work` under fixed file
    names (the trainer records its input and prefix in the model), one
    thread, no sampling of the input: the same bytes every run."""
    de, en = read_lines("train", "de"), read_lines("train", "en")
    cwd = os.getcwd()
    os.chdir(work)
    try:
        for name, lines in (("de.txt", de), ("en.txt", en), ("deen.txt", de + en)):
            with open(name, "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
        common = dict(character_coverage=1.0, num_threads=1, minloglevel=2, shuffle_input_sentence=False,
                      input_sentence_size=0)
        spm.set_random_generator_seed(SEED)
        spm.SentencePieceTrainer.train(input="deen.txt", model_prefix="bpe", model_type="bpe",
                                       vocab_size=1000, **common)
        for lang in ("de", "en"):
            spm.set_random_generator_seed(SEED)
            spm.SentencePieceTrainer.train(input="%s.txt" % lang, model_prefix="uni_" + lang, model_type="unigram",
                                           vocab_size=500, normalization_rule_name="nmt_nfkc", **common)
    finally:
        os.chdir(cwd)
    return {k: os.path.join(work, f) for k, f in (("bpe", "bpe.model"), ("de", "uni_de.model"),
                                                    ("en", "uni_en.model"))}


def by_frequency(model_path, lines):
    """The model's normal pieces, most frequent in `lines` first (ties: spm
    order), as fairseq's dict.txt and marian-vocab order a vocabulary."""
    sp = spm.SentencePieceProcessor(model_file=model_path)
    counts = [0] * len(sp)
    for ids in sp.encode(lines):
        for i in ids:
            counts[i] += 1
    normal = [i for i in range(len(sp)) if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i))]
    normal.sort(key=lambda i: (-counts[i], i))
    return [sp.id_to_piece(i) for i in normal]


def marian_vocab(pieces, codes=()):
    """vocab.json as the OPUS-MT conversion writes it: Marian's vocab.yml
    (</s> 0, <unk> 1, the pieces) and <pad> added last."""
    vocab = {"</s>": 0, "<unk>": 1}
    for p in list(codes) + list(pieces):
        vocab.setdefault(p, len(vocab))
    vocab["<pad>"] = len(vocab)
    return vocab


def nllb_tokenizer_files(d, bpe_model, legacy):
    """sentencepiece.bpe.model, tokenizer_config.json and special_tokens_map.json
    as facebook/nllb-200-distilled-600M has them (language codes at
    len(spm) + 1 + i, <mask> after them), tokenizer.json as NllbTokenizerFast
    saves it.  Returns the tokenizer, loaded back from the files."""
    shutil.copyfile(bpe_model, os.path.join(d, "sentencepiece.bpe.model"))
    n_spm = len(spm.SentencePieceProcessor(model_file=bpe_model))
    special = {"content": None, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
               "special": True}
    added = {i: dict(special, content=c) for i, c in enumerate(["<s>", "<pad>", "</s>", "<unk>"])}
    for i, code in enumerate(NLLB_LANGS):
        added[n_spm + 1 + i] = dict(special, content=code)
    added[n_spm + 1 + len(NLLB_LANGS)] = dict(special, content="<mask>", lstrip=True, normalized=True)
    write_json(os.path.join(d, "tokenizer_config.json"), {
        "added_tokens_decoder": {str(k): v for k, v in added.items()},
        "additional_special_tokens": NLLB_LANGS, "bos_token": "<s>", "clean_up_tokenization_spaces": True,
        "cls_token": "<s>", "eos_token": "</s>", "legacy_behaviour": legacy, "mask_token": "<mask>",
        "model_max_length": 128, "pad_token": "<pad>", "sep_token": "</s>", "sp_model_kwargs": {},
        "src_lang": "deu_Latn", "tgt_lang": "eng_Latn", "tokenizer_class": "NllbTokenizer", "unk_token": "<unk>"})
    write_json(os.path.join(d, "special_tokens_map.json"), {
        "additional_special_tokens": NLLB_LANGS, "bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>",
        "mask_token": {"content": "<mask>", "lstrip": True, "normalized": True, "rstrip": False,
                       "single_word": False},
        "pad_token": "<pad>", "sep_token": "</s>", "unk_token": "<unk>"})
    tok = nt.from_pretrained(d)
    write_json(os.path.join(d, "tokenizer.json"), nt.nllb_tokenizer_json(tok), indent=None, sort_keys=False)
    again = nt.from_pretrained(d)
    assert again.added_tokens_encoder == tok.added_tokens_encoder
    return again


def m2m100_tokenizer_files(d, bpe_model):
    """vocab.json (<s> <pad> </s> <unk>, then the spm pieces by frequency, as
    fairseq's dictionary), sentencepiece.bpe.model, tokenizer_config.json and
    special_tokens_map.json as facebook/m2m100_418M has them, and a
    tokenizer.json for the JavaScript tokenizers."""
    shutil.copyfile(bpe_model, os.path.join(d, "sentencepiece.bpe.model"))
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    lines = read_lines("train", "de") + read_lines("train", "en")
    for p in by_frequency(bpe_model, lines):
        vocab.setdefault(p, len(vocab))
    write_json(os.path.join(d, "vocab.json"), vocab, sort_keys=False)
    codes = ["__%s__" % c for c in nt.M2M100_LANGUAGE_CODES["m2m100"]]
    write_json(os.path.join(d, "tokenizer_config.json"), {
        "bos_token": "<s>", "clean_up_tokenization_spaces": False, "eos_token": "</s>",
        "language_codes": "m2m100", "model_max_length": 128, "num_madeup_words": 8, "pad_token": "<pad>",
        "sep_token": "</s>", "sp_model_kwargs": {}, "src_lang": "de", "tgt_lang": "en",
        "tokenizer_class": "M2M100Tokenizer", "unk_token": "<unk>"})
    write_json(os.path.join(d, "special_tokens_map.json"), {
        "additional_special_tokens": codes, "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
        "sep_token": "</s>", "unk_token": "<unk>"})
    tok = nt.from_pretrained(d)
    write_json(os.path.join(d, "tokenizer.json"), nt.m2m100_tokenizer_json(tok), indent=None, sort_keys=False)
    again = nt.from_pretrained(d)      # now with tokenizer.json's added tokens, as from_pretrained reads them
    assert again.added_tokens_encoder == tok.added_tokens_encoder
    return again


# ---------------------------------------------------------------- weights

def randomize(model, seed, emb_std=0.5, w_std=0.6, pad_rows=()):
    """Seeded random weights that make varied translations: embeddings
    N(0, emb_std) with the pad rows zero (as fairseq and the OPUS-MT
    conversion leave them), linear weights N(0, w_std) (0.6: large enough that the
    layers, not the tied input embedding, decide the next token, small enough
    that fp32 rounding stays far below the tests' 1e-4), biases
    N(0, 0.1), LayerNorm gains 1 + N(0, 0.1) and biases N(0, 0.1); each
    fc2's rows centred (the ReLU / swish outputs' positive mean would
    otherwise add one direction to every state, and one token would win
    every step)."""
    g = torch.Generator().manual_seed(seed)
    seen = set()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if id(p) in seen:
                continue
            seen.add(id(p))
            if name.endswith("embed_tokens.weight") or name.endswith("shared.weight") or name == "lm_head.weight":
                p.copy_(torch.randn(p.shape, generator=g) * emb_std)
                for r in pad_rows:
                    if name != "lm_head.weight":
                        p[r].zero_()
            elif "layer_norm" in name and name.endswith("weight"):
                p.copy_(1 + torch.randn(p.shape, generator=g) * 0.1)
            elif name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * w_std)
                if name.endswith("fc2.weight"):
                    p.sub_(p.mean(dim=1, keepdim=True))
    return model


def calibrate_eos(set_boost, lengths, target=12.0, hi=12.0, steps=12):
    """Bisection on the EOS boost (set_boost(c)) until the mean greedy length
    (lengths(): generated ids per sentence) of a sample is near `target`:
    random weights differ too much from seed to seed for one fixed boost.
    Deterministic, like everything here.  Returns the boost."""
    lo = 0.0
    while True:                     # a boost that is enough
        set_boost(hi)
        ls = lengths()
        if sum(ls) / len(ls) <= target or hi > 1e4:
            break
        lo, hi = hi, hi * 2
    for _ in range(steps):
        mid = (lo + hi) / 2
        set_boost(mid)
        ls = lengths()
        if sum(ls) / len(ls) > target:
            lo = mid
        else:
            hi = mid
    c = round((lo + hi) / 2, 4)
    set_boost(c)
    return c


def ln_boost(ln, weight, eos):
    """set_boost for a final LayerNorm: bias = its random bias + c * the
    EOS embedding's direction."""
    base = ln.bias.detach().clone()
    unit = (weight[eos] / weight[eos].norm()).detach().clone()

    def set_boost(c):
        with torch.no_grad():
            ln.bias.copy_(base + c * unit)
    return set_boost


def bias_boost(model, eos):
    """set_boost for Marian: final_logits_bias[EOS] = its random value + c."""
    base = float(model.final_logits_bias[0, eos])

    def set_boost(c):
        with torch.no_grad():
            model.final_logits_bias[0, eos] = base + c
    return set_boost


def sample_lengths(model, tok, cases, gen):
    """lengths() for calibrate_eos: greedy on the cases (their source ids
    and target languages)."""
    items = []
    for c in cases:
        if "src_lang" in c:
            tok.src_lang = c["src_lang"]
        opts = {"forced_bos_token_id": tok.lang_id(c["tgt_lang"])} if "tgt_lang" in c else {}
        items.append((tok.encode(c["text"]), opts))
    return lambda: [len(mt.generate(model, ids, gen, num_beams=1, **o)) for ids, o in items]


def nllb_config(vocab_size):
    """config.json as facebook/nllb-200-distilled-600M's, with tiny sizes."""
    return {
        "activation_dropout": 0.0, "activation_function": "relu",
        "architectures": ["M2M100ForConditionalGeneration"], "attention_dropout": 0.1, "bos_token_id": 0,
        "d_model": 32, "decoder_attention_heads": 4, "decoder_ffn_dim": 64, "decoder_layerdrop": 0,
        "decoder_layers": 2, "decoder_start_token_id": 2, "dropout": 0.1, "encoder_attention_heads": 4,
        "encoder_ffn_dim": 64, "encoder_layerdrop": 0, "encoder_layers": 2, "eos_token_id": 2,
        "init_std": 0.02, "is_encoder_decoder": True, "max_length": MAX_LENGTH, "max_position_embeddings": 128,
        "model_type": "m2m_100", "num_hidden_layers": 2, "pad_token_id": 1, "scale_embedding": True,
        "tokenizer_class": "NllbTokenizer", "torch_dtype": "float32", "use_cache": True,
        "vocab_size": vocab_size,
    }


def m2m100_config(vocab_size):
    """config.json as facebook/m2m100_418M's (early_stopping, num_beams 5),
    tiny, with encoder and decoder of different depths, heads and widths."""
    return {
        "activation_dropout": 0.0, "activation_function": "relu",
        "architectures": ["M2M100ForConditionalGeneration"], "attention_dropout": 0.1, "bos_token_id": 0,
        "d_model": 32, "decoder_attention_heads": 2, "decoder_ffn_dim": 48, "decoder_layerdrop": 0.05,
        "decoder_layers": 2, "decoder_start_token_id": 2, "dropout": 0.1, "early_stopping": True,
        "encoder_attention_heads": 4, "encoder_ffn_dim": 96, "encoder_layerdrop": 0.05, "encoder_layers": 3,
        "eos_token_id": 2, "gradient_checkpointing": False, "init_std": 0.02, "is_encoder_decoder": True,
        "max_length": MAX_LENGTH, "max_position_embeddings": 128, "model_type": "m2m_100", "num_beams": 5,
        "num_hidden_layers": 3, "pad_token_id": 1, "scale_embedding": True, "use_cache": True,
        "vocab_size": vocab_size,
    }


def marian_cfg(vocab_size, pad, d_model, enc, dec, activation, normalize_before, separate):
    """A MarianConfig as the OPUS-MT conversion writes it (convert_marian_to_pytorch)."""
    cfg = {
        "activation_dropout": 0.0, "activation_function": activation, "add_bias_logits": False,
        "add_final_layer_norm": False, "architectures": ["MarianMTModel"], "attention_dropout": 0.0,
        "bad_words_ids": [[pad]], "bos_token_id": 0, "classif_dropout": 0.0, "classifier_dropout": 0.0,
        "d_model": d_model, "decoder_attention_heads": dec[1], "decoder_ffn_dim": dec[2],
        "decoder_layerdrop": 0.0, "decoder_layers": dec[0], "decoder_start_token_id": pad,
        "decoder_vocab_size": vocab_size, "dropout": 0.1, "encoder_attention_heads": enc[1],
        "encoder_ffn_dim": enc[2], "encoder_layerdrop": 0.0, "encoder_layers": enc[0], "eos_token_id": 0,
        "forced_eos_token_id": 0, "init_std": 0.02, "is_encoder_decoder": True, "max_length": MAX_LENGTH,
        "max_position_embeddings": 128, "model_type": "marian", "normalize_before": normalize_before,
        "normalize_embedding": False, "num_beams": BEAM, "num_hidden_layers": enc[0], "pad_token_id": pad,
        "scale_embedding": True, "share_encoder_decoder_embeddings": not separate,
        "static_position_embeddings": True, "tie_word_embeddings": not separate, "torch_dtype": "float32",
        "use_cache": True, "vocab_size": vocab_size,
    }
    return cfg


def generation_config_file(d, cfg, keys):
    write_json(os.path.join(d, "generation_config.json"),
               dict({k: cfg[k] for k in keys if k in cfg}, _from_model_config=True))


def save_safetensors(path, tensors):
    """A safetensors file as save_pretrained writes it (metadata format pt);
    names sorted as the safetensors writer sorts same-dtype tensors."""
    mt.save_safetensors(path, dict(sorted(tensors.items())))
    with open(path, "rb") as f:                      # add {"__metadata__": {"format": "pt"}} to the header
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    header = dict({"__metadata__": {"format": "pt"}}, **header)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + data)


def torch_save_legacy(obj, path):
    """torch.save(obj, path, _use_new_zipfile_serialization=False), made
    deterministic: torch.serialization._legacy_save names each storage by
    its memory address (str(storage._cdata)), so the bytes change from run to
    run; here the keys are "0", "1", ... in the order the pickler meets the
    storages.  Otherwise the same stream: the magic number, protocol
    version and sys_info pickles, the object pickled with persistent ids
    ('storage', storage type, key, 'cpu', numel, None), the sorted key list,
    then each storage's bytes (Storage._write_file: element count, data)."""
    import pickle
    keys, storages = {}, {}

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, torch.storage.TypedStorage):
                key = keys.setdefault(obj._storage.data_ptr(), str(len(keys)))
                storages.setdefault(key, obj)
                return ("storage", getattr(torch, obj.pickle_storage_type()), key, "cpu", obj.size(), None)
            return None

    sys_info = dict(protocol_version=1001, little_endian=sys.byteorder == "little",
                    type_sizes=dict(short=2, int=4, long=4))
    with open(path, "wb") as f:
        for header in (0x1950a86a20f9469cfc6c, 1001, sys_info):
            pickle.dump(header, f, protocol=2)
        Pickler(f, protocol=2).dump(obj)
        order = sorted(storages)
        pickle.dump(order, f, protocol=2)
        f.flush()
        for key in order:
            st = storages[key]
            st._storage._write_file(f, torch.serialization._should_read_directly(f), True,
                                    torch._utils._element_size(st.dtype))


def shard_size_for_two(state):
    total = sum(t.numel() * t.element_size() for t in {id(t): t for t in state.values()}.values())
    return total * 6 // 10


def marian_hf_state(model):
    """MarianMTModel.state_dict()'s names for a marian_torch.Marian: its own
    buffer final_logits_bias first, then model.*, then lm_head.weight; with
    shared embeddings every alias (model.shared.weight, the stacks'
    embed_tokens, lm_head.weight) is the one tensor, as save_pretrained
    writes them to pytorch_model.bin."""
    out = {"final_logits_bias": model.final_logits_bias}
    for k, v in model.state_dict().items():
        if k in ("final_logits_bias", "lm_head.weight"):
            continue
        out["model." + k] = v
    out["lm_head.weight"] = model.output_weight().detach()
    return out


def load_marian_checkpoint(d):
    """A Marian directory (any of the four weight layouts) as marian_torch.Marian."""
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    tensors = {k: v.float() for k, v in m2m.load_state_dict(d).items()}
    shared = "model.shared.weight" in tensors
    tied = cfg.get("tie_word_embeddings", True)
    model = mt.Marian(cfg, shared_embeddings=shared, tie_output=tied)
    sd = {}
    for k, v in tensors.items():
        if k == "lm_head.weight":
            if not tied:
                sd[k] = v
        elif k == "final_logits_bias":
            sd[k] = v
        else:
            sd[k[len("model."):]] = v
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if missing or unexpected:
        raise ValueError("checkpoint mismatch: missing %s, unexpected %s" % (missing, unexpected))
    return model.eval()


# ------------------------------------------------------------ expectations

def expected(model, tok, cases, gen, beam_opts, decode_tok=None):
    """expected.json's cases: per sentence the source ids, greedy and beam
    ids (EOS excluded), their decodings (skip_special_tokens), and for the
    first N_ENCODER the encoder output."""
    decode_tok = decode_tok or tok
    out = []
    for i, c in enumerate(cases):
        if "src_lang" in c:
            tok.src_lang = c["src_lang"]
        ids = tok.encode(c["text"])
        opts = {}
        if "tgt_lang" in c:
            opts["forced_bos_token_id"] = tok.lang_id(c["tgt_lang"])
        greedy = mt.generate(model, ids, gen, num_beams=1, **opts)
        beam = mt.generate(model, ids, gen, **dict(beam_opts, **opts))
        case = dict(c, src_ids=ids, greedy=greedy, beam=beam,
                    greedy_text=decode_tok.decode(greedy, skip_special_tokens=True),
                    beam_text=decode_tok.decode(beam, skip_special_tokens=True))
        if opts:
            case["forced_bos_token_id"] = opts["forced_bos_token_id"]
        if i < N_ENCODER:
            with torch.inference_mode():
                enc = model.encode(torch.tensor([ids]))[0][0]
            case["encoder_output_shape"] = list(enc.shape)
            case["encoder_output"] = [sig6(x) for x in enc.flatten().tolist()]
        out.append(case)
    return out


def describe_outputs(name, cases):
    greedy = [tuple(c["greedy"]) for c in cases]
    beam = [tuple(c["beam"]) for c in cases]
    full = sum(len(g) >= max(map(len, greedy)) for g in greedy)
    print("%-17s greedy: %d distinct of %d, mean length %.1f, %d at the longest; beam differs from greedy in %d;"
          " distinct tokens %d" % (name, len(set(greedy)), len(greedy), sum(map(len, greedy)) / len(greedy), full,
                                   sum(a != b for a, b in zip(greedy, beam)), len({t for g in greedy for t in g})))


def write_expected(d, name, model_desc, tokenizer_desc, gen, greedy_opts, beam_opts, cases):
    write_cases_json(os.path.join(d, "expected.json"), {
        "fixture": name,
        "model": model_desc,
        "tokenizer": tokenizer_desc,
        "generation_config": {k: gen[k] for k in sorted(gen)},
        "greedy_options": greedy_opts,
        "beam_options": beam_opts,
        "ids": "greedy / beam: the ids generate() gives after decoder_start_token_id, EOS excluded "
               "(the forced target-language token first where there is one)",
        "encoder_output": "first %d cases: the encoder's last hidden state, tokens x d_model, row-major, "
                          "6 significant digits" % N_ENCODER,
        "cases": cases,
    })


def write_cases_json(path, obj):
    """JSON with the top-level keys on lines of their own and each element of
    "cases" on one line (small, and diffs stay readable)."""
    keys = sorted(k for k in obj if k != "cases")
    with open(path, "w", encoding="utf-8") as f:
        f.write("{\n")
        for k in keys:
            f.write("%s: %s,\n" % (json.dumps(k), json.dumps(obj[k], ensure_ascii=False, sort_keys=True)))
        f.write('"cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=False, sort_keys=True) for c in obj["cases"]))
        f.write("\n]}\n")


# ------------------------------------------------------------------ npm

def run_npm(d, encode_items, decode_ids):
    """tools/npm_tokenizers/tokenize.mjs on directory d."""
    if not os.path.isdir(os.path.join(NPM, "node_modules", "@huggingface", "transformers")):
        raise SystemExit("tools/npm_tokenizers/node_modules is missing: run `npm install` there "
                         "(or pass --skip-npm)")
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "in.json"), os.path.join(tmp, "out.json")
        with open(src, "w", encoding="utf-8") as f:
            json.dump({"encode": encode_items, "decode": decode_ids}, f, ensure_ascii=False)
        subprocess.run(["node", os.path.join(NPM, "tokenize.mjs"), d, src, dst], check=True, cwd=NPM)
        with open(dst, encoding="utf-8") as f:
            return json.load(f)


def multi30k_items(src_lang, tgt_lang, lang_of):
    """Every Multi30k sentence (all splits, de and en) as an encode item."""
    items = []
    for split in SPLITS:
        for lang in ("de", "en"):
            for line in read_lines(split, lang):
                items.append({"text": line, "src_lang": lang_of[lang], "tgt_lang": tgt_lang})
    return items


def npm_check(d, name, tok, cases, lang_of, default_src, tgt_lang):
    """The JavaScript tokenizers against the Python port: the fixture's
    sentences (ids, forced_bos_token_id, and the decodings of the greedy
    outputs), every Multi30k sentence, and STRESS (reported, not asserted).
    Writes npm_ids.json; fails on any disagreement outside STRESS."""
    fixture_items = [{"text": c["text"], "src_lang": c["src_lang"], "tgt_lang": c["tgt_lang"]} for c in cases]
    corpus = multi30k_items(default_src, tgt_lang, lang_of)
    stress = [{"text": t, "src_lang": default_src, "tgt_lang": tgt_lang} for t in STRESS]
    res = run_npm(d, fixture_items + corpus + stress, [c["greedy"] for c in cases] + [c["beam"] for c in cases])
    enc = res["encode"]
    n1, n2 = len(fixture_items), len(fixture_items) + len(corpus)

    def py_ids(item):
        tok.src_lang = item["src_lang"]
        return tok.encode(item["text"])
    fixture_ids = [e["ids"] for e in enc[:n1]]
    bad = [i for i, c in enumerate(cases) if fixture_ids[i] != c["src_ids"]
           or enc[i]["forced_bos_token_id"] != c["forced_bos_token_id"]]
    texts = [c["greedy_text"] for c in cases] + [c["beam_text"] for c in cases]
    bad_decode = [i for i, t in enumerate(res["decode"]) if t != texts[i]]
    corpus_bad = []
    plain_checked = plain_bad = 0
    for item, e in zip(corpus, enc[n1:n2]):
        ids = py_ids(item)
        if e["ids"] != ids:
            corpus_bad.append({"text": item["text"], "python": ids, "npm": e["ids"]})
        if item["src_lang"] == default_src:     # tokenizer.json's own template applies
            plain_checked += 1
            plain_bad += e["plain_ids"] != ids
    stress_out = []
    for item, e in zip(stress, enc[n2:]):
        ids = py_ids(item)
        stress_out.append({"text": item["text"], "python": ids, "npm": e["ids"], "agree": ids == e["ids"]})
    summary = {
        "versions": res["versions"], "class": res["class"],
        "fixture_cases": {"sentences": len(cases), "ids_agree": len(cases) - len(bad),
                          "decodings": len(texts), "decodings_agree": len(texts) - len(bad_decode)},
        "multi30k": {"sentences": len(corpus), "agree": len(corpus) - len(corpus_bad),
                     "tokenizers_plain_encode": {"sentences": plain_checked, "agree": plain_checked - plain_bad},
                     "disagreements": corpus_bad[:20]},
        "stress": {"sentences": len(stress_out), "agree": sum(s["agree"] for s in stress_out),
                   "cases": stress_out},
        "ids": fixture_ids,
        "forced_bos_token_id": [e["forced_bos_token_id"] for e in enc[:n1]],
        "decode": res["decode"],
    }
    write_json(os.path.join(d, "npm_ids.json"), summary, indent=None)
    print("%-17s npm: fixture ids %d/%d, decodings %d/%d, Multi30k %d/%d (plain %d/%d), stress %d/%d" % (
        name, len(cases) - len(bad), len(cases), len(texts) - len(bad_decode), len(texts),
        len(corpus) - len(corpus_bad), len(corpus), plain_checked - plain_bad, plain_checked,
        summary["stress"]["agree"], len(stress_out)))
    for s in stress_out:
        if not s["agree"]:
            print("    stress disagreement: %r\n      python %s\n      npm    %s" % (s["text"][:60], s["python"],
                                                                                 s["npm"]))
    if bad or bad_decode or corpus_bad or plain_bad:
        for i in bad[:5]:
            print("   ", cases[i]["text"], cases[i]["src_ids"], fixture_ids[i])
        for i in bad_decode[:5]:
            print("    decode", repr(texts[i]), repr(res["decode"][i]))
        for b in corpus_bad[:5]:
            print("   ", b)
        raise SystemExit("%s: the npm tokenizers disagree with the Python port" % name)


# -------------------------------------------------------------- fixtures

def nllb_cases(lines):
    cases = []
    for i, text in enumerate(lines[:N_CASES]):
        tgt = NLLB_OTHER_TARGETS[(i // 10) % len(NLLB_OTHER_TARGETS)] if i % 10 == 9 else "eng_Latn"
        cases.append({"text": text, "src_lang": "deu_Latn", "tgt_lang": tgt})
    return cases


def build_nllb(models, spms, npm):
    base = os.path.join(OUT, "nllb_tiny")
    d = base
    os.makedirs(d)
    tok = nllb_tokenizer_files(d, spms["bpe"], legacy=False)
    vocab_size = len(spm.SentencePieceProcessor(model_file=spms["bpe"])) + 1 + len(NLLB_LANGS) + 1
    assert vocab_size == len(tok)
    cfg = nllb_config(vocab_size)
    write_json(os.path.join(d, "config.json"), cfg)
    generation_config_file(d, cfg, ["bos_token_id", "decoder_start_token_id", "eos_token_id", "max_length",
                                    "pad_token_id"])
    torch.manual_seed(SEED)
    model = m2m.M2M100ForConditionalGeneration(cfg).eval()
    randomize(model, SEED + 1, pad_rows=[cfg["pad_token_id"]])
    lines = read_lines("test_2016_flickr", "de")
    boost = calibrate_eos(ln_boost(model.model.decoder.layer_norm, model.model.shared.weight, 2),
                          sample_lengths(model, tok, nllb_cases(lines)[:40], m2m.generation_config(d, model.cfg)))
    state = m2m.hf_state_dict(model)
    save_safetensors(os.path.join(d, "model.safetensors"), m2m.safetensors_state_dict(state))

    # the same model, pytorch_model.bin (zip), every alias of the tied embedding
    d_bin = os.path.join(OUT, "nllb_tiny_bin")
    os.makedirs(d_bin)
    for f in ("config.json", "generation_config.json", "sentencepiece.bpe.model", "tokenizer_config.json",
              "special_tokens_map.json"):
        shutil.copyfile(os.path.join(d, f), os.path.join(d_bin, f))
    torch.save(state, os.path.join(d_bin, "pytorch_model.bin"))

    # legacy_behaviour, torch's legacy (pre-1.6) serialization
    d_leg = os.path.join(OUT, "nllb_tiny_legacy")
    os.makedirs(d_leg)
    for f in ("config.json", "generation_config.json"):
        shutil.copyfile(os.path.join(d, f), os.path.join(d_leg, f))
    nllb_tokenizer_files(d_leg, spms["bpe"], legacy=True)
    torch_save_legacy(state, os.path.join(d_leg, "pytorch_model.bin"))

    for name, dd in (("nllb_tiny", d), ("nllb_tiny_bin", d_bin), ("nllb_tiny_legacy", d_leg)):
        loaded = m2m.load_m2m100(dd)
        for k, v in model.state_dict().items():
            assert torch.equal(v, loaded.state_dict()[k]), (name, k)
        t = nt.from_pretrained(dd)
        gen = m2m.generation_config(dd, loaded.cfg)
        beam_opts = {"num_beams": BEAM, "length_penalty": 1.0}
        cases = expected(loaded, t, nllb_cases(lines), gen, beam_opts)
        describe_outputs(name, cases)
        write_expected(dd, name, "tools/m2m100_torch.py M2M100ForConditionalGeneration; decoder layer_norm "
                       "bias + %s x the EOS embedding's direction" % boost,
                       {"class": "NllbTokenizer", "legacy_behaviour": t.legacy_behaviour,
                        "vocab_size": t.vocab_size, "len": len(t),
                        "special_ids": {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3,
                                        "<mask>": t.convert_tokens_to_ids("<mask>")},
                        "language_ids": {c: t.convert_tokens_to_ids(c) for c in NLLB_LANGS}},
                       gen, {"num_beams": 1}, beam_opts, cases)
        models[name] = cases
        if npm and name != "nllb_tiny_bin":
            npm_check(dd, name, t, cases, {"de": "deu_Latn", "en": "eng_Latn"}, "deu_Latn", "eng_Latn")


def build_m2m100(models, spms, npm):
    d = os.path.join(OUT, "m2m100_tiny")
    os.makedirs(d)
    tok = m2m100_tokenizer_files(d, spms["bpe"])
    vocab_size = tok.vocab_size + len(nt.M2M100_LANGUAGE_CODES["m2m100"]) + tok.num_madeup_words
    cfg = m2m100_config(vocab_size)
    write_json(os.path.join(d, "config.json"), cfg)
    generation_config_file(d, cfg, ["bos_token_id", "decoder_start_token_id", "early_stopping", "eos_token_id",
                                    "max_length", "num_beams", "pad_token_id"])
    lines = read_lines("test_2016_flickr", "de")
    cases = []
    for i, text in enumerate(lines[:N_CASES]):
        tgt = M2M_OTHER_TARGETS[(i // 10) % len(M2M_OTHER_TARGETS)] if i % 10 == 9 else "en"
        cases.append({"text": text, "src_lang": "de", "tgt_lang": tgt})
    torch.manual_seed(SEED + 10)
    model = m2m.M2M100ForConditionalGeneration(cfg).eval()
    # SEED + 15: with SEED + 11 one token wins nearly every step
    randomize(model, SEED + 15, pad_rows=[cfg["pad_token_id"]])
    boost = calibrate_eos(ln_boost(model.model.decoder.layer_norm, model.model.shared.weight, 2),
                          sample_lengths(model, tok, cases[:40], m2m.generation_config(d, model.cfg)))
    state = m2m.safetensors_state_dict(m2m.hf_state_dict(model))
    files, index = m2m.split_into_shards(state, shard_size_for_two(state), "model{suffix}.safetensors")
    assert len(files) == 2, list(files)
    for f, names in files.items():
        save_safetensors(os.path.join(d, f), {k: state[k] for k in names})
    index["metadata"]["total_parameters"] = sum(p.numel() for p in model.parameters())
    write_json(os.path.join(d, "model.safetensors.index.json"), index)

    loaded = m2m.load_m2m100(d)
    for k, v in model.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k]), k
    t = nt.from_pretrained(d)
    gen = m2m.generation_config(d, loaded.cfg)
    beam_opts = {"num_beams": BEAM, "length_penalty": 1.0}
    cases = expected(loaded, t, cases, gen, beam_opts)
    describe_outputs("m2m100_tiny", cases)
    write_expected(d, "m2m100_tiny", "tools/m2m100_torch.py M2M100ForConditionalGeneration; decoder layer_norm "
                   "bias + %s x the EOS embedding's direction" % boost,
                   {"class": "M2M100Tokenizer", "language_codes": "m2m100", "vocab_size": t.vocab_size,
                    "num_madeup_words": t.num_madeup_words,
                    "special_ids": {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3},
                    "language_ids": {"__%s__" % c: t.get_lang_id(c)
                                     for c in ["de", "en"] + M2M_OTHER_TARGETS}},
                   gen, {"num_beams": 1}, beam_opts, cases)
    models["m2m100_tiny"] = cases
    if npm:
        npm_check(d, "m2m100_tiny", t, cases, {"de": "de", "en": "en"}, "de", "en")


def build_marian_sepvocab(models, spms):
    d = os.path.join(OUT, "marian_sepvocab")
    os.makedirs(d)
    shutil.copyfile(spms["de"], os.path.join(d, "source.spm"))
    shutil.copyfile(spms["en"], os.path.join(d, "target.spm"))
    src_vocab = marian_vocab(by_frequency(spms["de"], read_lines("train", "de")))
    tgt_vocab = marian_vocab(by_frequency(spms["en"], read_lines("train", "en")))
    # Hugging Face builds the decoder's embedding with vocab_size rows
    # (MarianModel deep-copies one nn.Embedding(vocab_size) for both stacks)
    # and the conversion insists on equal sizes: so are these
    assert len(src_vocab) == len(tgt_vocab)
    write_json(os.path.join(d, "vocab.json"), src_vocab, sort_keys=False)
    write_json(os.path.join(d, "target_vocab.json"), tgt_vocab, sort_keys=False)
    write_json(os.path.join(d, "tokenizer_config.json"),
               {"separate_vocabs": True, "source_lang": "de", "target_lang": "en"})
    write_json(os.path.join(d, "special_tokens_map.json"),
               {"eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"})
    pad = src_vocab["<pad>"]
    cfg = marian_cfg(len(src_vocab), pad, 32, (2, 4, 64), (2, 4, 64), "gelu", True, separate=True)
    write_json(os.path.join(d, "config.json"), cfg)
    generation_config_file(d, cfg, ["bad_words_ids", "bos_token_id", "decoder_start_token_id", "eos_token_id",
                                    "forced_eos_token_id", "max_length", "num_beams", "pad_token_id"])
    torch.manual_seed(SEED + 20)
    model = mt.Marian(cfg, shared_embeddings=False, tie_output=False).eval()
    randomize(model, SEED + 21, w_std=0.25, pad_rows=[pad])   # pre-norm, no final LayerNorm: keep the stream small
    with torch.no_grad():
        g = torch.Generator().manual_seed(SEED + 22)
        model.final_logits_bias.copy_(torch.randn(model.final_logits_bias.shape, generator=g) * 0.5)
        model.final_logits_bias[0, pad] = 0.0
    tok = nt.from_pretrained(d)
    cases = [{"text": t} for t in read_lines("test_2016_flickr", "de")[:N_CASES]]
    boost = calibrate_eos(bias_boost(model, 0), sample_lengths(model, tok, cases[:40],
                                                               mt.generation_config(d, model.cfg)))
    state = marian_hf_state(model)
    files, index = m2m.split_into_shards(state, shard_size_for_two(state), "pytorch_model{suffix}.bin")
    assert len(files) == 2, list(files)
    for f, names in files.items():
        torch.save({k: state[k] for k in names}, os.path.join(d, f))
    index["metadata"]["total_parameters"] = sum(p.numel() for p in model.parameters())
    write_json(os.path.join(d, "pytorch_model.bin.index.json"), index)

    loaded = load_marian_checkpoint(d)
    for k, v in model.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k]), k
    tok = nt.from_pretrained(d)
    gen = mt.generation_config(d, loaded.cfg)
    beam_opts = {"num_beams": BEAM, "length_penalty": 1.0}
    cases = expected(loaded, tok, cases, gen, beam_opts)
    describe_outputs("marian_sepvocab", cases)
    write_expected(d, "marian_sepvocab", "tools/marian_torch.py Marian (separate embeddings, untied lm_head); "
                   "final_logits_bias[EOS] + %s" % boost,
                   {"class": "MarianTokenizer", "separate_vocabs": True, "source_vocab_size": len(src_vocab),
                    "target_vocab_size": len(tgt_vocab),
                    "special_ids": {"</s>": 0, "<unk>": 1, "<pad>": pad}},
                   gen, {"num_beams": 1}, beam_opts, cases)
    models["marian_sepvocab"] = cases


def build_marian_multi(models, spms):
    d = os.path.join(OUT, "marian_multi")
    os.makedirs(d)
    shutil.copyfile(spms["en"], os.path.join(d, "source.spm"))
    shutil.copyfile(spms["de"], os.path.join(d, "target.spm"))
    en, de = read_lines("train", "en"), read_lines("train", "de")
    pieces = by_frequency(spms["en"], en) + by_frequency(spms["de"], de)
    vocab = marian_vocab(pieces, MARIAN_CODES)
    write_json(os.path.join(d, "vocab.json"), vocab, sort_keys=False)
    write_json(os.path.join(d, "tokenizer_config.json"), {"source_lang": "en", "target_lang": "ROMANCE"})
    write_json(os.path.join(d, "special_tokens_map.json"),
               {"eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"})
    pad = vocab["<pad>"]
    # tc-big's shape, shrunk: 8 heads, ffn 4 x d_model in the encoder;
    # a shallower, narrower decoder
    cfg = marian_cfg(len(vocab), pad, 32, (3, 8, 128), (2, 4, 64), "swish", False, separate=False)
    write_json(os.path.join(d, "config.json"), cfg)
    generation_config_file(d, cfg, ["bad_words_ids", "bos_token_id", "decoder_start_token_id", "eos_token_id",
                                    "forced_eos_token_id", "max_length", "num_beams", "pad_token_id"])
    torch.manual_seed(SEED + 30)
    model = mt.Marian(cfg, shared_embeddings=True, tie_output=True).eval()
    randomize(model, SEED + 31, w_std=0.3, pad_rows=[pad])   # 8 heads of 4 dims: at 0.6, fp32 itself strays 2e-4 from fp64
    with torch.no_grad():
        g = torch.Generator().manual_seed(SEED + 32)
        model.final_logits_bias.copy_(torch.randn(model.final_logits_bias.shape, generator=g) * 0.5)
        model.final_logits_bias[0, pad] = 0.0
    tok = nt.from_pretrained(d)
    cases = []
    for i, text in enumerate(read_lines("test_2016_flickr", "en")[:N_CASES]):
        code = MARIAN_CODES[i % len(MARIAN_CODES)]
        cases.append({"text": "%s %s" % (code, text), "target_code": code})
    boost = calibrate_eos(bias_boost(model, 0), sample_lengths(model, tok, cases[:40],
                                                               mt.generation_config(d, model.cfg)))
    torch.save(marian_hf_state(model), os.path.join(d, "pytorch_model.bin"))

    loaded = load_marian_checkpoint(d)
    for k, v in model.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k]), k
    tok = nt.from_pretrained(d)
    gen = mt.generation_config(d, loaded.cfg)
    beam_opts = {"num_beams": BEAM, "length_penalty": 1.0}
    cases = expected(loaded, tok, cases, gen, beam_opts)
    assert all(c["src_ids"][0] == vocab[c["target_code"]] for c in cases)
    describe_outputs("marian_multi", cases)
    write_expected(d, "marian_multi", "tools/marian_torch.py Marian (shared, tied embeddings); "
                   "final_logits_bias[EOS] + %s" % boost,
                   {"class": "MarianTokenizer", "separate_vocabs": False, "vocab_size": len(vocab),
                    "special_ids": {"</s>": 0, "<unk>": 1, "<pad>": pad},
                    "language_ids": {c: vocab[c] for c in MARIAN_CODES}},
                   gen, {"num_beams": 1}, beam_opts, cases)
    models["marian_multi"] = cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--skip-npm", action="store_true",
                    help="do not run the JavaScript tokenizers; keep the npm_ids.json files there are")
    args = ap.parse_args()
    torch.set_num_threads(1)
    keep = {}
    if args.skip_npm and os.path.isdir(OUT):
        for name in os.listdir(OUT):
            p = os.path.join(OUT, name, "npm_ids.json")
            if os.path.exists(p):
                with open(p, "rb") as f:
                    keep[name] = f.read()
    readme = os.path.join(OUT, "README.md")
    readme_text = open(readme, encoding="utf-8").read() if os.path.exists(readme) else None
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    if readme_text is not None:
        with open(readme, "w", encoding="utf-8") as f:
            f.write(readme_text)
    models = {}
    with tempfile.TemporaryDirectory() as work:
        spms = train_spm(work)
        build_nllb(models, spms, not args.skip_npm)
        build_m2m100(models, spms, not args.skip_npm)
        build_marian_sepvocab(models, spms)
        build_marian_multi(models, spms)
    for name, data in keep.items():
        if os.path.isdir(os.path.join(OUT, name)):
            with open(os.path.join(OUT, name, "npm_ids.json"), "wb") as f:
                f.write(data)
    total = 0
    for dirpath, _, names in os.walk(OUT):
        total += sum(os.path.getsize(os.path.join(dirpath, n)) for n in names)
    print("test/fixtures/checkpoints: %.2f MB" % (total / 1e6))


if __name__ == "__main__":
    main()
