#!/usr/bin/python3
"""Our engine against CTranslate2 on the same weights, side by side (issue 28).

1. Conversion.  Each model directory (Marian layout: config.json,
   model.safetensors, source.spm, target.spm, vocab.json) becomes a
   CTranslate2 model through CTranslate2's own Python spec API: a
   ctranslate2.specs.TransformerSpec.from_config() whose every weight is set
   here from our model.safetensors (read by hand: 8-byte length, JSON header,
   little-endian F32/F16/BF16 data), then ctranslate2.converters.Converter's
   convert() (validate, alias the tied weights, quantize, save): once with
   quantization "float32", once with "int8" (weights per output row,
   symmetric, fp32 scales).  The layout follows CTranslate2's own converter
   for Hugging Face's MarianMTModel (converters/transformers.py, BartLoader and
   MarianMTLoader): q/k/v fused for self-attention, k/v fused for
   cross-attention, post-norm (pre_norm=False), scaled embeddings, Marian's
   sinusoidal positions (sin | cos halves, computed here: our files do not
   store them), the activation of config.json, final_logits_bias when it is
   not zero.  One difference, on purpose: MarianMTLoader drops the <pad> row
   and starts the decoder from a zero embedding, which equals Hugging Face's
   decoding only when that row is zero.  Our models' <pad> rows are not zero
   (the bundled model's max |w| is 0.047, transformer-base's are random), and
   Hugging Face, like our engine, starts from that row.  So the row stays,
   the decoder starts from "<pad>" (decoder_start_token), and "<pad>" is
   suppressed as the generation config's bad_words_ids say.
2. Models: the bundled multi30k_de_en (import_model('multi30k_de_en')), and
   transformer-base (OPUS-MT en-mg's configuration and tokenizers, random
   weights: benchlib.make_base_model(), as translate_int8.py).  int8:
   quantize_model(name, name || '_int8') on our side.
3. Settings, the same on both sides: the model's generation config with
   Hugging Face's rules (tools/marian_torch.generation_config).  max_length
   L = min(the config's, 1 + ceil(3 x source ids)) per sentence (translate()'s
   own default, passed explicitly); the config forces EOS at L - 1, so at
   most L - 2 tokens come before it: CTranslate2 gets max_decoding_length
   = L - 2 (L - 1 without forced EOS), min_decoding_length 0 (HF min_length
   0), length_penalty and no_repeat_ngram_size from the config,
   return_end_token=True (Hugging Face's length penalty counts EOS), and
   suppress_sequences = bad_words_ids.  The source is SentencePiece's pieces
   then "</s>" (our tokenizer's ids are checked equal: SQL tokenize()).
4. Timing, one thread each side: CTranslate2 Translator(intra_threads=1,
   inter_threads=1), timed in Python around SentencePiece encoding,
   translate_batch() and decoding (text in, text out); ours SET
   transformer.threads = 1, SQL translate(s, model, beam_size => k,
   max_length => L, split => false, keep => '{}') timed inside the server
   (clock_timestamp() in plpgsql: no client round trip), the segment length
   of the model set to its positions (set_model_segment_length(m, NULL)) so
   that no sentence is cut.  Per sentence, greedy and beam 4, the sides
   alternating sentence by sentence; then the batch form: groups of 32
   sentences, beam 4, ours translate(text[]) against translate_batch() of the
   32, with one max_length per group (the largest L of its sentences), the
   median of --batch-reps runs per group with the sides alternating (at
   least --cheap-batch-reps where a group takes under 2 s on both sides:
   such a group moves by +-20% between single runs).  fp32 and int8 each.
5. PyTorch fp32, the anchor of the older figures, in the same run (unless
   --no-torch): bench/torch_decode.py's IncrementalDecoder on the modules of
   tools/marian_torch.py (KV cache, cross-attention K/V once,
   inference_mode, one thread, the same max_length rule), timed per
   sentence next to the other two, and batched (beam 4) on the same groups.
   The int8 rows' PyTorch column is fp32 too: the issue's target is ours in
   int8 against PyTorch fp32.
6. Identity: per sentence, SQL generate() (the same options; untimed) against
   CTranslate2's tokens mapped through vocab.json; batch, our texts against
   SQL detokenize() of CTranslate2's ids (the same detokenizer on both).

Ratios are CTranslate2's time over ours (> 1: we are faster).
Needs a running server with the extension installed; skipped (exit 0) when
the Python module ctranslate2 is not importable.
Usage: pg_virtualenv -t bench/ctranslate2.py [-n N] [--batch-n M] [--quick] [--reps R] [--batch-reps R]
       [--models bundled,base] [--parts sentence,batch] [--precisions fp32,int8] [--ct2-isa AVX512]
       [--isa native|avx2] [--json FILE] [--no-torch]
bench/ct2_best.py runs it once per CTranslate2 setting and keeps CTranslate2's fastest per row.
"""
import argparse
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time

# one thread for every library this process loads (OpenBLAS reads it when it loads)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

# CTranslate2 picks AVX2 on AVX-512 CPUs unless told (CT2_FORCE_CPU_ISA): --ct2-isa sets it before it loads
if "--ct2-isa" in sys.argv[:-1]:
    os.environ["CT2_FORCE_CPU_ISA"] = sys.argv[sys.argv.index("--ct2-isa") + 1]
# --isa avx2: every side held to AVX2 before its libraries load: CTranslate2's own kernels, oneDNN (both
# of its variables' spellings), MKL, PyTorch's ATen and OpenBLAS (the core type; benchlib re-executes
# with it); ours through SET transformer.cpu_kernels = 'avx2' (its OpenBLAS core too)
ISA = sys.argv[sys.argv.index("--isa") + 1] if "--isa" in sys.argv[:-1] else "native"
if ISA == "avx2":
    os.environ.update(CT2_FORCE_CPU_ISA="AVX2", ONEDNN_MAX_CPU_ISA="AVX2", DNNL_MAX_CPU_ISA="AVX2",
                      MKL_ENABLE_INSTRUCTIONS="AVX2", ATEN_CPU_CAPABILITY="avx2", OPENBLAS_CORETYPE="Haswell")

# this file is called ctranslate2.py: keep its directory out of the way of the module
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.modules.pop("ctranslate2", None)
try:
    import ctranslate2
except ImportError:
    print("CTranslate2 is not installed: build it from its repository (see bench/README.md); skipped")
    sys.exit(0)
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import benchlib as bl  # noqa: E402

bl.reexec_with_coretype()
import psycopg2  # noqa: E402
import sentencepiece as spm  # noqa: E402
import torch  # noqa: E402
import torch_decode as td  # noqa: E402
import nllb  # noqa: E402  (bench/nllb.py: the NLLB-600M-shaped checkpoint)
from ctranslate2.converters import Converter  # noqa: E402
from ctranslate2.specs import common_spec, transformer_spec  # noqa: E402

OUT = "/tmp/transformer_bench_ct2"
ACTIVATIONS = {"relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU,
               "gelu_new": common_spec.Activation.GELUTanh, "gelu_fast": common_spec.Activation.GELUTanh,
               "swish": common_spec.Activation.SWISH, "silu": common_spec.Activation.SWISH}


def log(*a):
    print(*a, flush=True)


# ------------------------------------------------------------ our files

def read_safetensors(path):
    """{name: float32 ndarray}: tools/marian_torch.py's reader, as NumPy."""
    return {k: v.float().numpy() for k, v in bl.mt.load_safetensors(path).items()}


def sinusoids(n_pos, dim, interleaved):
    """Marian's (Hugging Face's MarianSinusoidalPositionalEmbedding): sin of
    pos / 10000^(2i/dim) in the first half, cos in the second; or the paper's
    interleaving."""
    pos = np.arange(n_pos, dtype=np.float64)[:, None]
    i = np.arange(dim // 2, dtype=np.float64)
    angle = pos / np.power(10000.0, 2 * i / dim)
    out = np.zeros((n_pos, dim))
    if interleaved:
        out[:, 0::2], out[:, 1::2] = np.sin(angle), np.cos(angle)
    else:
        out[:, : dim // 2], out[:, dim // 2: 2 * (dim // 2)] = np.sin(angle), np.cos(angle)
    return out.astype(np.float32)


def vocabulary(directory):
    with open(os.path.join(directory, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    tokens = [None] * len(vocab)
    for piece, i in vocab.items():
        tokens[i] = piece
    assert None not in tokens, "vocab.json's ids are not 0..%d" % (len(vocab) - 1)
    return vocab, tokens


# ------------------------------------------------------------ the conversion

class MarianDirConverter(Converter):
    """Our Marian directory as a CTranslate2 TransformerSpec: our code, their library."""

    def __init__(self, directory):
        self.dir = directory

    def _load(self):
        with open(os.path.join(self.dir, "config.json")) as f:
            cfg = json.load(f)
        gen = bl.mt.generation_config(self.dir, cfg)
        w = read_safetensors(os.path.join(self.dir, "model.safetensors"))
        vocab, tokens = vocabulary(self.dir)
        assert cfg["encoder_attention_heads"] == cfg["decoder_attention_heads"]
        pre = cfg.get("normalize_before", False)
        spec = transformer_spec.TransformerSpec.from_config(
            (cfg["encoder_layers"], cfg["decoder_layers"]), cfg["encoder_attention_heads"],
            pre_norm=pre, no_final_norm=not cfg.get("add_final_layer_norm", False),
            activation=ACTIVATIONS[cfg["activation_function"]],
            layernorm_embedding=cfg.get("normalize_embedding", False))
        d = cfg["d_model"]
        scale = math.sqrt(d) if cfg.get("scale_embedding", bl.mt.MARIAN_DEFAULTS["scale_embedding"]) else 1.0
        kind = cfg.get("position_embedding", "sinusoidal_half")
        shared = w.get("model.shared.weight")

        def positions(stack):
            name = "model.%s.embed_positions.weight" % stack
            if name in w:
                return w[name]
            assert kind != "learned", "learned positions but no %s" % name
            return sinusoids(cfg["max_position_embeddings"], d, kind == "sinusoidal_interleaved")

        def linear(s, prefix, bias=True):
            s.weight = w[prefix + ".weight"]
            if bias and prefix + ".bias" in w:
                s.bias = w[prefix + ".bias"]

        def fused(s, prefixes):
            s.weight = np.concatenate([w[p + ".weight"] for p in prefixes])
            s.bias = np.concatenate([w.get(p + ".bias", np.zeros(w[p + ".weight"].shape[0], np.float32))
                                     for p in prefixes])

        def norm(s, prefix):
            s.gamma, s.beta = w[prefix + ".weight"], w[prefix + ".bias"]

        for stack, ss in (("encoder", spec.encoder), ("decoder", spec.decoder)):
            ss.scale_embeddings = scale
            ss.position_encodings.encodings = positions(stack)
            emb = shared if shared is not None else w["model.%s.embed_tokens.weight" % stack]
            (ss.embeddings[0] if isinstance(ss.embeddings, list) else ss.embeddings).weight = emb
            if cfg.get("add_final_layer_norm", False):
                norm(ss.layer_norm, "model.%s.layer_norm" % stack)
            if cfg.get("normalize_embedding", False):
                norm(ss.layernorm_embedding, "model.%s.layernorm_embedding" % stack)
            for i, ls in enumerate(ss.layer):
                p = "model.%s.layers.%d." % (stack, i)
                fused(ls.self_attention.linear[0], [p + "self_attn.%s_proj" % x for x in "qkv"])
                linear(ls.self_attention.linear[1], p + "self_attn.out_proj")
                norm(ls.self_attention.layer_norm, p + "self_attn_layer_norm")
                if stack == "decoder":
                    fused(ls.attention.linear[0], [p + "encoder_attn.q_proj"])
                    fused(ls.attention.linear[1], [p + "encoder_attn.%s_proj" % x for x in "kv"])
                    linear(ls.attention.linear[2], p + "encoder_attn.out_proj")
                    norm(ls.attention.layer_norm, p + "encoder_attn_layer_norm")
                linear(ls.ffn.linear_0, p + "fc1")
                linear(ls.ffn.linear_1, p + "fc2")
                norm(ls.ffn.layer_norm, p + "final_layer_norm")
        dec_emb = shared if shared is not None else w["model.decoder.embed_tokens.weight"]
        spec.decoder.projection.weight = w.get("lm_head.weight", dec_emb)
        bias = w.get("final_logits_bias")
        if bias is not None and np.any(bias != 0):
            spec.decoder.projection.bias = bias.reshape(-1)
        # Hugging Face (and our engine) start the decoder from the embedding of
        # decoder_start_token_id, <pad> for Marian; its row is kept (see above)
        spec.decoder.start_from_zero_embedding = False
        assert len(tokens) == cfg["vocab_size"], (len(tokens), cfg["vocab_size"])
        spec.register_source_vocabulary(tokens)
        spec.register_target_vocabulary(tokens)
        spec.config.eos_token = tokens[gen["eos_token_id"]]
        spec.config.unk_token = tokens[cfg.get("unk_token_id", vocab.get("<unk>", 1))]
        spec.config.decoder_start_token = tokens[gen["decoder_start_token_id"]]
        spec.config.layer_norm_epsilon = 1e-5       # torch.nn.LayerNorm's, as MarianMTModel
        return spec


class NllbConverter(Converter):
    """bench/nllb.py's NLLB-600M-shaped checkpoint (tools/m2m100_torch.py's
    modules, Hugging Face's names) as a CTranslate2 TransformerSpec, as
    CTranslate2's own converter does it for M2M100ForConditionalGeneration
    (converters/transformers.py: M2M100Loader on BartLoader): pre-norm,
    no embedding norm, the final norms, relu, embeddings scaled by
    sqrt(d_model), the sinusoidal table from its offset (2) on, q/k/v
    fused for self-attention and k/v for cross-attention, decoder start
    </s>.  The vocabulary: each id's token is "t<id>" (the tiny tokenizer
    names only its own pieces; both sides are given and return ids)."""

    def __init__(self, directory):
        self.dir = directory

    def _load(self):
        model = nllb.load_model(self.dir)
        cfg = model.cfg
        spec = transformer_spec.TransformerSpec.from_config(
            (cfg["encoder_layers"], cfg["decoder_layers"]), cfg["encoder_attention_heads"],
            pre_norm=True, activation=ACTIVATIONS[cfg["activation_function"]], layernorm_embedding=False)
        t = lambda x: x.detach().numpy()

        def linear(s, mod):
            s.weight = t(mod.weight)
            if mod.bias is not None:
                s.bias = t(mod.bias)

        def fused(s, mods):
            s.weight = np.concatenate([t(x.weight) for x in mods])
            s.bias = np.concatenate([t(x.bias) for x in mods])

        def norm(s, mod):
            s.gamma, s.beta = t(mod.weight), t(mod.bias)

        for ss, mod in ((spec.encoder, model.model.encoder), (spec.decoder, model.model.decoder)):
            ss.scale_embeddings = math.sqrt(cfg["d_model"]) if cfg["scale_embedding"] else 1.0
            ss.position_encodings.encodings = t(mod.embed_positions.weights[mod.embed_positions.offset:])
            (ss.embeddings[0] if isinstance(ss.embeddings, list) else ss.embeddings).weight = t(mod.embed_tokens.weight)
            norm(ss.layer_norm, mod.layer_norm)
            for ls, layer in zip(ss.layer, mod.layers):
                a = layer.self_attn
                fused(ls.self_attention.linear[0], [a.q_proj, a.k_proj, a.v_proj])
                linear(ls.self_attention.linear[1], a.out_proj)
                norm(ls.self_attention.layer_norm, layer.self_attn_layer_norm)
                if hasattr(layer, "encoder_attn"):
                    x = layer.encoder_attn
                    fused(ls.attention.linear[0], [x.q_proj])
                    fused(ls.attention.linear[1], [x.k_proj, x.v_proj])
                    linear(ls.attention.linear[2], x.out_proj)
                    norm(ls.attention.layer_norm, layer.encoder_attn_layer_norm)
                linear(ls.ffn.linear_0, layer.fc1)
                linear(ls.ffn.linear_1, layer.fc2)
                norm(ls.ffn.layer_norm, layer.final_layer_norm)
        linear(spec.decoder.projection, model.lm_head)
        tokens = ["t%d" % i for i in range(cfg["vocab_size"])]
        spec.register_source_vocabulary(tokens)
        spec.register_target_vocabulary(tokens)
        spec.config.bos_token, spec.config.eos_token, spec.config.unk_token = "t0", "t2", "t3"
        spec.config.decoder_start_token = "t%d" % cfg["decoder_start_token_id"]
        spec.config.layer_norm_epsilon = 1e-5
        return spec


def convert(directory, name, quantization):
    out = os.path.join(OUT, "%s_%s" % (name, quantization))
    t0 = time.time()
    if name == "nllb":
        if not os.path.exists(os.path.join(out, "model.bin")):      # 2.4 GB: converted once
            NllbConverter(directory).convert(out, quantization=quantization, force=True)
    else:
        MarianDirConverter(directory).convert(out, quantization=quantization, force=True)
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    log("  converted %s with quantization %s: %s, %.1f MB, %.1f s" % (directory, quantization, out, size / 1e6,
                                                                     time.time() - t0))
    return out


# ------------------------------------------------------------ the machine

LoadMeter = bl.LoadMeter      # cores used by other processes since creation


def wait_quiet(minutes, backend):
    """Wait until other processes use under 0.15 cores over 5 s (up to minutes)."""
    deadline = time.time() + 60 * minutes
    while True:
        m = LoadMeter(backend)
        time.sleep(5)
        load = m.others()
        if load < 0.15 or time.time() > deadline:
            return load
        log("  waiting for a quiet machine: other processes use %.2f cores" % load)
        time.sleep(25)


def ct2_backends(model_dir):
    """CTranslate2's own report of its CPU backends (CT2_VERBOSE=1 on load), in a child."""
    code = ("import ctranslate2 as c; t = c.Translator(%r, compute_type='int8_float32', intra_threads=1); "
            "t.translate_batch([['</s>']], max_decoding_length=1)" % model_dir)
    env = dict(os.environ, CT2_VERBOSE="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd="/")
    lines = [re.sub(r"^\[[^]]*\] \[ctranslate2\] \[thread \d+\] \[info\] ", "", l).strip()
             for l in (r.stdout + r.stderr).splitlines() if "[info]" in l]
    return lines or [(r.stdout + r.stderr).strip()[:300]]


def ct2_libraries():
    libs = set()
    base = os.path.dirname(ctranslate2.__file__)
    for root, _, files in os.walk(base):
        for f in files:
            if f.endswith(".so") or ".so." in f:
                out = subprocess.run(["ldd", os.path.join(root, f)], capture_output=True, text=True).stdout
                for line in out.splitlines():
                    if re.search(r"ctranslate2|blas|dnnl|mkl|omp|ruy", line):
                        libs.add(line.strip().split(" (")[0])
    return sorted(libs)


def machine(cur):
    info = open("/proc/cpuinfo").read()
    cpu = re.search(r"model name\s*:\s*(.*)", info).group(1)
    fam = re.search(r"cpu family\s*:\s*(\d+)", info).group(1)
    model = re.search(r"\nmodel\s*:\s*(\d+)", info).group(1)
    flags = re.search(r"flags\s*:\s*(.*)", info).group(1).split()
    simd = [f for f in ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "avx_vnni") if f in flags]
    cur.execute("SELECT version(), current_setting('transformer.threads'), "
                "(SELECT extversion FROM pg_extension WHERE extname = 'transformer')")
    pgv, bt, ext = cur.fetchone()
    try:
        cur.execute("SELECT transformer_version()")
        kernels = cur.fetchone()[0]
    except psycopg2.Error:
        cur.connection.rollback() if not cur.connection.autocommit else None
        kernels = "avx512vnni int8 / avx512 fp32 as chosen at run time (src/core/gemm_int8.c)"
    log("machine: %s, %d CPUs (family %s model %s), %s, kernel %s, OPENBLAS_CORETYPE=%s" % (
        cpu, os.cpu_count(), fam, model, " ".join(simd), platform.release(), os.environ.get("OPENBLAS_CORETYPE")))
    log("ours:    extension %s, transformer.threads %s, %s; %s" % (ext, bt, pgv.split(" on ")[0], kernels))


# ------------------------------------------------------------ the two sides

TIMED = """
CREATE OR REPLACE FUNCTION pg_temp.timed_one(q text, g text, reps int, OUT secs float8, OUT txt text, OUT ids int[])
LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; ts float8[] := '{}';
BEGIN
  FOR i IN 1..reps LOOP
    t0 := clock_timestamp();
    EXECUTE q INTO txt;
    ts := ts || extract(epoch FROM clock_timestamp() - t0)::float8;
  END LOOP;
  secs := (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY x) FROM unnest(ts) x);
  EXECUTE g INTO ids;
END $$;
CREATE OR REPLACE FUNCTION pg_temp.timed_batch(q text, reps int, OUT secs float8, OUT texts text[])
LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; ts float8[] := '{}';
BEGIN
  FOR i IN 1..reps LOOP
    t0 := clock_timestamp();
    EXECUTE q INTO texts;
    ts := ts || extract(epoch FROM clock_timestamp() - t0)::float8;
  END LOOP;
  secs := (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY x) FROM unnest(ts) x);
END $$;
"""


def q(s):
    return bl.quote(s)


class Model:
    """One model on both sides: our SQL names (fp32, int8), the CTranslate2
    translators, the tokenizers and the generation settings."""

    def __init__(self, label, directory, sql_name, lang):
        # bf16: the fp32 model with transformer.compute_type = 'bf16' (set around each of our calls)
        self.label, self.dir, self.sql = label, directory, {"fp32": sql_name, "int8": sql_name + "_int8",
                                                            "bf16": sql_name}
        self.lang = lang
        with open(os.path.join(directory, "config.json")) as f:
            self.cfg = json.load(f)
        self.gen = bl.mt.generation_config(directory, self.cfg)
        self.vocab, self.tokens = vocabulary(directory)
        self.src_sp = spm.SentencePieceProcessor(model_file=os.path.join(directory, "source.spm"))
        self.tgt_sp = spm.SentencePieceProcessor(model_file=os.path.join(directory, "target.spm"))
        self.eos = self.tokens[self.gen["eos_token_id"]]
        self.unk = self.vocab.get("<unk>", 1)
        g = self.gen
        self.ct2_opts = {
            "length_penalty": g["length_penalty"],
            "no_repeat_ngram_size": g["no_repeat_ngram_size"] or 0,
            "repetition_penalty": g["repetition_penalty"] or 1.0,
            "min_decoding_length": max(0, (g["min_length"] or 0) - 1),
            "return_end_token": True,
            "return_scores": False,
            "suppress_sequences": [[self.tokens[i] for i in seq] for seq in (g["bad_words_ids"] or [])
                                   if seq != [g["eos_token_id"]]] or None,
        }
        self.forced_eos = g["forced_eos_token_id"] is not None
        self.max_len_cfg = bl.mt._max_length(g)

    def pieces(self, s):
        return self.src_sp.encode(s, out_type=str) + [self.eos]

    def source_ids(self, s):
        return [self.vocab.get(p, self.unk) for p in self.pieces(s)]

    def same_source(self, cur, s):
        cur.execute("SELECT tokenize(%s, %s)", (s, self.sql["fp32"] + "/source"))
        return list(cur.fetchone()[0]) + [self.gen["eos_token_id"]] == self.source_ids(s)

    def texts(self, cur, prec, c_out, c_ids):
        """CTranslate2's ids through our detokenize(): the same detokenizer on both sides"""
        out = []
        for ids in c_ids:
            cur.execute("SELECT detokenize(%s::int[], %s)", (ids, self.sql[prec] + "/target"))
            out.append(cur.fetchone()[0])
        return out

    def max_length(self, s):
        """translate()'s default: the config's, capped at 1 + ceil(3 x source ids)."""
        return min(self.max_len_cfg, self.cfg["max_position_embeddings"] + 1, 1 + math.ceil(3 * len(self.pieces(s))))

    def ct2_max(self, L):
        return L - 1 - (1 if self.forced_eos else 0)

    def settings(self):
        g = self.gen
        return ("generation config: length_penalty %s, early_stopping %s, no_repeat_ngram_size %s, "
                "repetition_penalty %s, min_length %s, bad_words_ids %s, forced_eos_token_id %s, max_length %s; "
                "CTranslate2 gets %s" % (g["length_penalty"], g["early_stopping"], g["no_repeat_ngram_size"],
                                         g["repetition_penalty"], g["min_length"], g["bad_words_ids"],
                                         g["forced_eos_token_id"], self.max_len_cfg,
                                         ", ".join("%s=%s" % kv for kv in self.ct2_opts.items())))

    # ---- CTranslate2: text in, text out (SentencePiece on both ends), timed in Python
    def ct2(self, tr, texts, beam, L, reps=1, patience=1):
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            res = tr.translate_batch([self.pieces(s) for s in texts], beam_size=beam, patience=patience,
                                     max_decoding_length=self.ct2_max(L), **self.ct2_opts)
            hyps = [[t for t in r.hypotheses[0] if t != self.eos] for r in res]
            out = [self.tgt_sp.decode_pieces(h) for h in hyps]
            ts.append(time.perf_counter() - t0)
        ids = [[self.vocab[t] for t in h] for h in hyps]
        return sorted(ts)[len(ts) // 2], out, ids

    # ---- ours, timed in the server
    def translate_sql(self, prec, text_sql, beam, L):
        return ("SELECT translate(%s, %s, beam_size => %d, max_length => %d, split => false, keep => '{}')"
                % (text_sql, q(self.sql[prec]), beam, L))

    @staticmethod
    def compute_type(cur, prec):
        cur.execute("SET transformer.compute_type = %s", ("bf16" if prec == "bf16" else "default",))

    def ours(self, cur, prec, s, beam, L, reps=1):
        self.compute_type(cur, prec)
        gen = "SELECT generate(%s, %s, beam_size => %d, max_length => %d)" % (q(s), q(self.sql[prec]), beam, L)
        cur.execute("SELECT * FROM pg_temp.timed_one(%s, %s, %s)",
                    (self.translate_sql(prec, q(s), beam, L), gen, reps))
        secs, txt, ids = cur.fetchone()
        return secs, txt, list(ids)

    def ours_batch(self, cur, prec, texts, beam, L, reps=1):
        arr = "ARRAY[%s]" % ",".join(q(s) for s in texts)
        self.compute_type(cur, prec)
        cur.execute("SELECT * FROM pg_temp.timed_batch(%s, %s)", (self.translate_sql(prec, arr, beam, L), reps))
        secs, out = cur.fetchone()
        return secs, list(out)


class NllbModel(Model):
    """NLLB-600M's shapes (bench/nllb.py's checkpoint: random weights, the
    tiny tokenizer of test/fixtures/checkpoints/nllb_tiny, EOS never wins):
    German in, English out (forced BOS eng_Latn), every sentence
    max_new_tokens long on both sides.  Ours: generate()/translate() with
    source_lang, target_lang and max_new_tokens; CTranslate2: the source
    ids [deu_Latn] pieces </s> from NllbTokenizer (tools/nllb_tokenizer.py,
    timed), target_prefix [eng_Latn], max_decoding_length max_new_tokens,
    the ids back through NllbTokenizer.decode (timed)."""

    def __init__(self, directory, sql_name, max_new):
        self.label, self.dir, self.lang = "nllb", directory, "de"
        self.sql = {"fp32": sql_name, "int8": sql_name + "_int8", "bf16": sql_name}
        with open(os.path.join(directory, "config.json")) as f:
            self.cfg = json.load(f)
        self.gen = {"eos_token_id": 2}
        self.tok = nllb.nt.from_pretrained(directory)
        self.tok.src_lang = nllb.SRC_LANG
        self.forced = self.tok.lang_id(nllb.TGT_LANG)
        self.max_new = max_new
        self.ct2_opts = {"return_end_token": True, "return_scores": False}

    def source_ids(self, s):
        return self.tok.encode(s)

    def same_source(self, cur, s):
        cur.execute("SELECT tokenize(%s, %s)", (s, self.sql["fp32"] + "/source"))
        return [self.tok.lang_id(nllb.SRC_LANG)] + list(cur.fetchone()[0]) + [2] == self.source_ids(s)

    def max_length(self, s):
        return self.max_new

    def settings(self):
        return ("%s -> %s, max_new_tokens %d on both sides (CTranslate2: target_prefix [%s], "
                "max_decoding_length %d)" % (nllb.SRC_LANG, nllb.TGT_LANG, self.max_new, nllb.TGT_LANG, self.max_new))

    def ct2(self, tr, texts, beam, L, reps=1, patience=1):
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            res = tr.translate_batch([["t%d" % i for i in self.tok.encode(s)] for s in texts],
                                     target_prefix=[["t%d" % self.forced]] * len(texts), beam_size=beam,
                                     patience=patience, max_decoding_length=self.max_new, **self.ct2_opts)
            ids = [[int(t[1:]) for t in r.hypotheses[0] if t != "t2"] for r in res]
            out = [self.tok.decode(h, skip_special_tokens=True) for h in ids]
            ts.append(time.perf_counter() - t0)
        return sorted(ts)[len(ts) // 2], out, ids

    def texts(self, cur, prec, c_out, c_ids):
        return c_out

    def translate_sql(self, prec, text_sql, beam, L):
        return ("SELECT translate(%s, %s, beam_size => %d, source_lang => %s, target_lang => %s, "
                "max_new_tokens => %d, split => false, keep => '{}')"
                % (text_sql, q(self.sql[prec]), beam, q(nllb.SRC_LANG), q(nllb.TGT_LANG), self.max_new))

    def ours(self, cur, prec, s, beam, L, reps=1):
        self.compute_type(cur, prec)
        gen = ("SELECT generate(%s, %s, beam_size => %d, source_lang => %s, target_lang => %s, max_new_tokens => %d)"
               % (q(s), q(self.sql[prec]), beam, q(nllb.SRC_LANG), q(nllb.TGT_LANG), self.max_new))
        cur.execute("SELECT * FROM pg_temp.timed_one(%s, %s, %s)",
                    (self.translate_sql(prec, q(s), beam, L), gen, reps))
        secs, txt, ids = cur.fetchone()
        return secs, txt, list(ids)


def first_diff(a, b):
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    return i


def import_models(cur, which, args):
    models = []
    cur.execute("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS transformer")
    for m in which:
        t0 = time.time()
        if m == "nllb":
            st_dir = args.nllb_dir
            nllb.build(st_dir, st_dir + "_bin")
            name = nllb.MODEL
            cur.execute("SELECT count(*) FROM transformer_models WHERE name IN (%s, %s)", (name, name + "_int8"))
            if cur.fetchone()[0] < 2:
                for n in (name + "_int8", name):
                    cur.execute("SELECT drop_model(%s)", (n,))
                cur.execute("SELECT import_model(%s, %s)", (name, st_dir))
                cur.execute("SELECT quantize_model(%s, %s)", (name, name + "_int8"))
            log("%s: imported %s and quantize_model() to %s_int8 in %.1f s" % (m, name, name, time.time() - t0))
            models.append(NllbModel(st_dir, name, args.nllb_new_tokens))
            continue
        if m == "bundled":
            name, directory, lang = "multi30k_de_en", bl.BUNDLED, "de"
            for n in (name + "_int8", name):
                cur.execute("SELECT drop_model(%s)", (n,))
            cur.execute("SELECT import_model(%s)", (name,))
        else:
            directory, params = bl.make_base_model("F32")
            name, lang = "base_random", "en"
            for n in (name + "_int8", name):
                cur.execute("SELECT drop_model(%s)", (n,))
            cur.execute("SELECT import_model(%s, %s)", (name, directory))
        cur.execute("SELECT quantize_model(%s, %s)", (name, name + "_int8"))
        for n in (name, name + "_int8"):      # no sentence cut before its positions
            cur.execute("SELECT set_model_segment_length(%s, NULL)", (n,))
        log("%s: imported %s and quantize_model() to %s_int8 in %.1f s" % (m, name, name, time.time() - t0))
        models.append(Model(m, directory, name, lang))
    return models


# ------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=100, help="sentences timed one at a time")
    ap.add_argument("--batch-n", type=int, default=320, help="sentences of the batch part (groups of --batch)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--batch-reps", type=int, default=3, help="runs of each batch, the sides alternating (median)")
    ap.add_argument("--quick", action="store_true", help="-n 20 --batch-n 64 --batch-reps 1")
    ap.add_argument("--cheap-batch-reps", type=int, default=5,
                    help="runs of each batch (median) where a group takes under 2 s on both sides")
    ap.add_argument("--reps", type=int, default=1, help="runs of each timing (median)")
    ap.add_argument("--models", default="bundled,base,nllb",
                    help="bundled, base (transformer-base), nllb (NLLB-600M's shapes, bench/nllb.py's checkpoint)")
    ap.add_argument("--nllb-n", type=int, default=10, help="sentences of nllb timed one at a time")
    ap.add_argument("--nllb-batch-n", type=int, default=32, help="sentences of nllb's batch part")
    ap.add_argument("--nllb-new-tokens", type=int, default=32, help="nllb's max_new_tokens (every sentence that long)")
    ap.add_argument("--nllb-dir", default="/tmp/transformer_bench_nllb600m", help="bench/nllb.py's checkpoint (built if absent)")
    ap.add_argument("--parts", default="sentence,batch")
    ap.add_argument("--precisions", default="fp32,int8",
                    help="fp32, int8, and bf16: ours with transformer.compute_type = bf16 against CTranslate2 float32")
    ap.add_argument("--ct2-isa", help="CT2_FORCE_CPU_ISA for CTranslate2 (AVX512, AVX2, ...; default: its choice)")
    ap.add_argument("--isa", choices=("native", "avx2"), default="native",
                    help="avx2: both sides held to AVX2 (ours: transformer.cpu_kernels; CTranslate2, oneDNN, MKL, "
                         "PyTorch: their environment variables)")
    ap.add_argument("--json", help="also write the table's rows to this file (bench/ct2_best.py reads them)")
    ap.add_argument("--wait-quiet", type=float, default=10, help="minutes to wait for other processes to stop")
    ap.add_argument("--no-torch", action="store_true", help="leave out the PyTorch fp32 column")
    args = ap.parse_args()
    if args.quick:
        args.n, args.batch_n, args.batch_reps = min(args.n, 20), min(args.batch_n, 64), 1
    parts, precs = set(args.parts.split(",")), args.precisions.split(",")
    os.makedirs(OUT, exist_ok=True)

    conn = psycopg2.connect("")
    conn.autocommit = True
    cur = conn.cursor()
    models = import_models(cur, args.models.split(","), args)
    cur.execute("SET transformer.threads = 1; SET client_min_messages = warning")
    cur.execute("SET transformer.cpu_kernels = %s", ("avx2" if args.isa == "avx2" else "auto",))
    cur.execute(TIMED)
    cur.execute("SELECT pg_backend_pid()")
    backend = cur.fetchone()[0]
    machine(cur)
    log("CTranslate2: %s (%s), CPU compute types %s; linked: %s" % (
        ctranslate2.__version__, os.path.dirname(ctranslate2.__file__),
        ", ".join(sorted(ctranslate2.get_supported_compute_types("cpu"))), ", ".join(ct2_libraries()) or "?"))

    rows = []
    for m in models:
        log("\n== %s (%s): %s" % (m.label, m.dir, m.settings()))
        ct2_dirs = {"fp32": convert(m.dir, m.label, "float32"), "int8": convert(m.dir, m.label, "int8")}
        ct2_types = {"fp32": "float32", "int8": "int8_float32"}
        # CTranslate2 has no bf16 on CPU (its CPU types: int8, int8_float32, float32): our bf16 meets its float32
        ct2_dirs["bf16"], ct2_types["bf16"] = ct2_dirs["fp32"], "float32"
        if m is models[0]:
            log("  CTranslate2 on load (CT2_VERBOSE=1): " + "; ".join(ct2_backends(ct2_dirs["int8"])))
        trs = {}
        for p in precs:
            trs[p] = ctranslate2.Translator(ct2_dirs[p], device="cpu", compute_type=ct2_types[p],
                                            inter_threads=1, intra_threads=1)
            log("  CTranslate2 %s: %s, compute_type %s, intra_threads 1, inter_threads 1" % (
                p, ct2_dirs[p], trs[p].compute_type))
        n_sent, n_batch = args.n, args.batch_n
        if m.label == "nllb":       # 615M parameters: fewer sentences
            n_sent, n_batch = min(n_sent, args.nllb_n), min(n_batch, args.nllb_batch_n)
        n_all = max(n_sent if "sentence" in parts else 0, n_batch if "batch" in parts else 0)
        sents = bl.sentences(m.lang, n_all)
        # our source ids are SentencePiece's pieces through vocab.json, then EOS
        same_src = 0
        for s in sents:
            same_src += m.same_source(cur, s)
        log("  source ids: SQL tokenize() (+ the languages) + EOS = %s: %d/%d"
            % ("NllbTokenizer's" if m.label == "nllb" else "SentencePiece pieces + %s through vocab.json" % m.eos,
               same_src, len(sents)))
        # warm both sides (load, pack, first allocations)
        for p in precs:
            m.ours(cur, p, sents[0], 4, m.max_length(sents[0]))
            m.ct2(trs[p], sents[:1], 4, m.max_length(sents[0]))
        # a CTranslate2 model quantized at load time (compute_type int8 on the fp32 conversion): same ids?
        if "int8" in precs:
            alt = ctranslate2.Translator(ct2_dirs["fp32"], device="cpu", compute_type="int8_float32",
                                         inter_threads=1, intra_threads=1)
            k = min(2 if m.label == "nllb" else 5, len(sents))
            same = sum(m.ct2(alt, [s], b, m.max_length(s))[2] == m.ct2(trs["int8"], [s], b, m.max_length(s))[2]
                       for s in sents[:k] for b in (1, 4))
            log("  CTranslate2 int8: converted with quantization int8 vs fp32 conversion loaded with compute_type "
                "int8_float32: same ids %d/%d (greedy and beam 4, %d sentences)" % (same, 2 * k, k))
            del alt

        # PyTorch fp32, the anchor of our older figures: bench/torch_decode.py (KV cache, cross K/V once,
        # inference_mode, one thread), the same max_length rule (1 + ceil(3 x source ids), capped)
        dec = None
        if not args.no_torch and m.label != "nllb":     # bench/nllb.py has NLLB against PyTorch
            torch.set_num_threads(1)
            dec = td.IncrementalDecoder(bl.mt.Translator(m.dir).model)
            dec.greedy(m.source_ids(sents[0]))

        log("  waiting until the machine is quiet (up to %g minutes)" % args.wait_quiet)
        log("  other processes: %.2f cores" % wait_quiet(args.wait_quiet, backend))

        if "sentence" in parts:
            meter = LoadMeter(backend)
            t = {(b, p): {"ct2": [], "ours": []} for b in (1, 4) for p in precs}
            same = {k: 0 for k in t}
            same_p2 = {k: 0 for k in t}
            same_txt = {k: 0 for k in t}
            toks = {k: 0 for k in t}
            diffs = {k: [] for k in t}
            int8_same = {(b, side): 0 for b in (1, 4) for side in ("ours", "ct2")}    # int8 ids = fp32 ids
            t_torch = {1: [], 4: []}
            for i, s in enumerate(sents[: n_sent]):
                L = m.max_length(s)
                for b in (1, 4):
                    got = {}
                    if dec is not None:
                        src = m.source_ids(s)
                        ts = []
                        for _ in range(args.reps):
                            t0 = time.perf_counter()
                            dec.greedy(src) if b == 1 else dec.beam([src], 4)
                            ts.append(time.perf_counter() - t0)
                        t_torch[b].append(statistics.median(ts))
                    for p in precs:
                        k = (b, p)
                        o_secs, o_txt, o_ids = m.ours(cur, p, s, b, L, args.reps)
                        c_secs, c_txt, c_ids = m.ct2(trs[p], [s], b, L, args.reps)
                        got[p] = (o_ids, c_ids[0])
                        t[k]["ours"].append(o_secs)
                        t[k]["ct2"].append(c_secs)
                        toks[k] += len(o_ids)
                        if o_ids == c_ids[0]:
                            same[k] += 1
                            same_p2[k] += 1
                        else:
                            diffs[k].append((i, first_diff(o_ids, c_ids[0]), len(o_ids), len(c_ids[0])))
                            # CTranslate2 stops a beam search once beam_size hypotheses are finished;
                            # Hugging Face goes on while a running beam can still win: patience 2?
                            if b > 1:
                                same_p2[k] += m.ct2(trs[p], [s], b, L, patience=2)[2][0] == o_ids
                        same_txt[k] += o_txt == c_txt[0]
                    if "int8" in got and "fp32" in got:
                        int8_same[(b, "ours")] += got["int8"][0] == got["fp32"][0]
                        int8_same[(b, "ct2")] += got["int8"][1] == got["fp32"][1]
                if (i + 1) % 10 == 0:
                    log("  sentence %d/%d: %s" % (i + 1, n_sent, ", ".join(
                        "%s %s %.1f/%.1f ms" % ("greedy" if b == 1 else "beam 4", p, 1e3 * t[(b, p)]["ct2"][-1],
                                                1e3 * t[(b, p)]["ours"][-1]) for b in (1, 4) for p in precs)))
            n = n_sent
            log("  per sentence: other processes used %.2f cores" % meter.others())
            if "int8" in precs and "fp32" in precs:
                log("  int8 ids = fp32 ids of the same side: ours greedy %d/%d, beam 4 %d/%d; CTranslate2 greedy "
                    "%d/%d, beam 4 %d/%d" % (int8_same[(1, "ours")], n, int8_same[(4, "ours")], n,
                                             int8_same[(1, "ct2")], n, int8_same[(4, "ct2")], n))
            for (b, p), tt in t.items():
                r = [c / o for c, o in zip(tt["ct2"], tt["ours"])]
                rt = [x / o for x, o in zip(t_torch[b], tt["ours"])]
                rows.append((m.label, "greedy" if b == 1 else "beam 4", p, "per sentence",
                             1e3 * statistics.mean(tt["ct2"]), 1e3 * statistics.mean(tt["ours"]),
                             statistics.median(r), min(r), max(r), "%d/%d" % (same[(b, p)], n),
                             "%d/%d" % (same_p2[(b, p)], n) if b > 1 else "", toks[(b, p)] / n,
                             1e3 * statistics.mean(t_torch[b]) if rt else None,
                             statistics.median(rt) if rt else None))
                log("  %s %s: ids identical %d/%d (CTranslate2 with patience 2: %d/%d), texts %d/%d, "
                    "%.1f tokens/sentence (ours)%s" % (
                    "greedy" if b == 1 else "beam 4", p, same[(b, p)], n, same_p2[(b, p)], n, same_txt[(b, p)], n,
                    toks[(b, p)] / n,
                    ("; differ (sentence, first different position, our length, theirs): %s" %
                     ", ".join("(%d, %d, %d, %d)" % d for d in diffs[(b, p)][:12])) if diffs[(b, p)] else ""))

        if "batch" in parts:
            meter = LoadMeter(backend)
            B = args.batch
            groups = [sents[i: i + B] for i in range(0, n_batch, B)]
            reps = {}
            for p in precs:        # a first batch on each side, untimed (allocations of batch size)
                L = max(m.max_length(s) for s in groups[0])
                t_o = m.ours_batch(cur, p, groups[0], 4, L)[0]
                t_c = m.ct2(trs[p], groups[0], 4, L)[0]
                # a group this cheap moves by +-20% from run to run on a VM: more alternating runs
                reps[p] = max(args.batch_reps, args.cheap_batch_reps) if max(t_o, t_c) < 2.0 else args.batch_reps
            torch_t = []
            if dec is not None:
                for g in groups:            # PyTorch fp32 batched beam 4, the same groups
                    ts = []
                    for _ in range(args.batch_reps):
                        t0 = time.perf_counter()
                        dec.beam([m.source_ids(s) for s in g], 4)
                        ts.append(time.perf_counter() - t0)
                    torch_t.append(statistics.median(ts))
                log("  PyTorch fp32 batched beam 4: %s s per group" % " ".join("%.2f" % x for x in torch_t))
            for p in precs:
                o_t, c_t, ok, ok2, total, ntok = [], [], 0, 0, 0, 0
                for g in groups:
                    L = max(m.max_length(s) for s in g)
                    os_, cs_ = [], []
                    for _ in range(reps[p]):        # the sides alternate
                        o_secs, o_out = m.ours_batch(cur, p, g, 4, L)
                        c_secs, c_out, c_ids = m.ct2(trs[p], g, 4, L)
                        os_.append(o_secs)
                        cs_.append(c_secs)
                    o_secs, c_secs = statistics.median(os_), statistics.median(cs_)
                    o_t.append(o_secs)
                    c_t.append(c_secs)
                    c_sql = m.texts(cur, p, c_out, c_ids)
                    ok += sum(a == b for a, b in zip(o_out, c_sql))
                    if c_sql != o_out:          # the same with patience 2 (untimed)
                        _, c2_out, c2 = m.ct2(trs[p], g, 4, L, patience=2)
                        ok2 += sum(a == b for a, b in zip(m.texts(cur, p, c2_out, c2), o_out))
                    else:
                        ok2 += len(g)
                    total += len(g)
                    ntok += sum(len(x) for x in c_ids)
                    log("  batch of %d, beam 4, %s, max_length %d: CTranslate2 %s s, ours %s s: %.2fx" % (
                        len(g), p, L, " ".join("%.2f" % x for x in cs_), " ".join("%.2f" % x for x in os_),
                        c_secs / o_secs))
                r = [c / o for c, o in zip(c_t, o_t)]
                rows.append((m.label, "beam 4", p, "batch of %d" % B, 1e3 * sum(c_t) / total, 1e3 * sum(o_t) / total,
                             sum(c_t) / sum(o_t), min(r), max(r), "%d/%d" % (ok, total), "%d/%d" % (ok2, total),
                             ntok / total, 1e3 * sum(torch_t) / total if torch_t else None,
                             sum(torch_t) / sum(o_t) if torch_t else None))
            log("  batch part: other processes used %.2f cores" % meter.others())
        del trs

    log("\n| model | decoding | precision | form | CTranslate2 ms/sentence | ours ms/sentence | "
        "**CTranslate2 / ours** | PyTorch fp32 ms/sentence | PyTorch fp32 / ours | same output | "
        "same with patience 2 | tokens/sentence |")
    log("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for mod, dec_, p, form, c, o, r, lo, hi, same_, same2, tk, pt, rt in rows:
        log("| %s | %s | %s | %s | %.1f | %.1f | **%.2fx** [%.2f, %.2f] | %s | %s | %s | %s | %.1f |" % (
            mod, dec_, p, form, c, o, r, lo, hi, "%.1f" % pt if pt is not None else "-",
            "%.2fx" % rt if rt is not None else "-", same_, same2, tk))
    log("(per sentence: mean times, median [min, max] of the per-sentence ratios, ids compared (SQL generate()); "
        "batch: total times over all groups, their ratio [min, max of the groups' ratios], texts compared "
        "(SQL detokenize() of CTranslate2's ids); per sentence %d run(s) each, batch %d (%d where a group "
        "took under 2 s), medians)" % (args.reps, args.batch_reps, max(args.batch_reps, args.cheap_batch_reps)))
    if args.json:
        keys = ("model", "decoding", "precision", "form", "ct2_ms", "ours_ms", "ratio", "ratio_min", "ratio_max",
                "same", "same_patience2", "tokens", "torch_ms", "torch_ratio")
        with open(args.json, "w") as f:
            json.dump({"isa": args.isa, "ct2_isa": os.environ.get("CT2_FORCE_CPU_ISA", "its choice"),
                       "ct2": ctranslate2.__version__, "ct2_libraries": ct2_libraries(),
                       "rows": [dict(zip(keys, r)) for r in rows]}, f, indent=1)
    conn.close()


if __name__ == "__main__":
    main()
