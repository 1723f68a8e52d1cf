#!/usr/bin/python3
"""Sentence embeddings: SQL embed() against PyTorch and ONNX Runtime on the
same weights, one thread each side (issue 29).

Texts: the first N German and the first N English sentences of Multi30k's
training set (N = 5,000: 10,000 texts), in that order.

1. Ours, in a server of its own (pg_virtualenv), transformer.threads = 1,
   max_parallel_workers_per_gather = 0, jit off; timed inside the server
   (clock_timestamp() in plpgsql: no client round trip, no result sent):
     embed(text[]):  SELECT count(*) FROM bench_batches b, LATERAL embed(b.ts, m)
                     (bench_batches: the texts in groups of --sql-batch (256,
                     and 32 for comparison), in order; one call per group;
                     tokenizing included)
     embed(text):    SELECT count(embed(t, m)) FROM bench_texts (one call per text)
     tokenize():     SELECT count(tokenize(t, m || '/source')) FROM bench_texts,
                     the tokenizer alone, to estimate its share
     (these at the default settings: transformer.compute_type = auto, which
     computes embed() in int8, the model's float matrices quantized at load)
     stored:         embed(text[]) with SET transformer.compute_type = 'stored'
                     (fp32, as the model is stored: the arithmetic of the
                     references)
     int8:           embed(text[]) on quantize_model(m, m || '_i8')
     bf16 (--bf16):  embed(text[]) with SET transformer.compute_type = 'bf16'
2. PyTorch fp32: tools/bert_torch.py's rule-by-rule port of BertModel /
   XLMRobertaModel + Pooling + Normalize (load_encoder()), one thread,
   torch.inference_mode(); sentence-transformers' batching: texts sorted by
   length (its rule: characters, longest first), batches of 32 and of 256,
   right padding + attention_mask.  The padded tensors are made before the
   clock starts: its time is the model's alone.  The tokenizers
   (bert_torch's ports of the slow Hugging Face ones) are timed apart.
   Its OpenBLAS runs the kernels the extension's does (OPENBLAS_CORETYPE
   from transformer_version(), --coretype), and glibc's malloc keeps freed
   memory (--torch-malloc): see the comments below.
3. ONNX Runtime (npm onnxruntime-node, bench/embed_ort.mjs): the same
   SentenceEncoder exported by torch.onnx.export (opset 14, dynamic axes
   batch and sequence; inputs input_ids and attention_mask, int64; output
   the pooled and normalized sentence embedding, as our embed() returns),
   intraOpNumThreads 1, interOpNumThreads 1, sequential, graph optimizations
   "all"; the same batches and token ids as PyTorch, the tensors made before
   the clock starts.
4. Agreement: cosine of our vectors (both forms) with PyTorch's on a sample,
   of ONNX Runtime's with PyTorch's on every text, of the default (int8) and
   of the int8 copy with fp32 (min, median and mean); token
   ids of SQL tokenize() against the Python tokenizer's.

Each repetition runs every side once over all the texts, the sides in a
rotated order; figures are medians [min, max] over --reps repetitions, and
the ratios are taken within each repetition (the machine drifts).  Each
side's CPU seconds are measured too (/proc for the backend, process_time,
process.cpuUsage()), and the CPU time of other processes over each run.
--perf: perf record -g on the backend during one more pass of each of our
forms (the loaded transformer.so is first added to perf's build-id cache,
~/.debug, so that a make install elsewhere does not cost the symbols), and
ONNX Runtime's own profiler over one batch-32 pass.

Models: "bundled", models/multi30k_sentence_de_en if its model.safetensors
exists, else a random-weight model of its shape (XLM-R layout, vocabulary
8,003 from its sentencepiece.bpe.model, d 256, 3 layers, 4 heads, ffn 1024,
silu, mean pooling + Normalize, max_seq_length 128); "minilm", a
random-weight model shaped like all-MiniLM-L6-v2 (BERT layout, hidden 384,
6 layers, 12 heads, intermediate 1536, gelu, 512 positions, mean pooling +
Normalize, max_seq_length 128, the uncased WordPiece vocabulary of
test/fixtures/tokenizers/bert_uncased).  --make-minilm DIR writes that model
and exits.

Usage: pg_virtualenv -t bench/embed.py [-n 5000] [--reps 3] [--models bundled,minilm]
           [--bundled auto|trained|random] [--sql-batch 256,32] [--batches 32,256]
           [--no-int8] [--bf16] [--no-row] [--perf] [--quick] [--torch-malloc keep|default]
           [--coretype server|env|NAME]
       bench/embed.py --make-minilm DIR
Needs node (bench/embed_ort.mjs finds onnxruntime-node in
tools/npm_tokenizers/node_modules), perf for --perf; writes under
/tmp/transformer_bench_embed.
"""
import argparse
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

# one thread for every library this process loads (OpenBLAS reads it when it loads)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

# glibc's malloc gives blocks over 32 MB back to the kernel on free (mmap), so
# PyTorch's large activations (batch 256: 50-100 MB) come back as fresh pages,
# each one a page fault, expensive on this VM: PyTorch at batch 256 ran 2-4x
# slower than at batch 32.  Unless --torch-malloc default, this process (and
# node) keep freed memory for reuse, as a tuned allocator would; set before the
# process starts, hence the re-exec.
if "--make-minilm" not in sys.argv and "MALLOC_MMAP_MAX_" not in os.environ and \
        not ("--torch-malloc" in sys.argv[:-1] and sys.argv[sys.argv.index("--torch-malloc") + 1] == "default"):
    os.environ["MALLOC_MMAP_MAX_"] = "0"
    os.environ["MALLOC_TRIM_THRESHOLD_"] = str(1 << 40)
    os.execv(sys.executable, [sys.executable] + sys.argv)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def server_blas_core():
    """The OpenBLAS core the extension runs with (transformer_version()'s
    "(core X)"); PyTorch gets the same kernels.  Asked before benchlib
    loads torch, so that OpenBLAS reads OPENBLAS_CORETYPE when it loads."""
    r = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c",
                        "SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS transformer",
                        "-c", "SELECT transformer_version()"], capture_output=True, text=True)
    m = re.search(r"\(core (\w+)\)", r.stdout)
    return m.group(1) if m else None


# --coretype server (default): the server's OpenBLAS core; env: keep the environment's; or a name
_ct = sys.argv[sys.argv.index("--coretype") + 1] if "--coretype" in sys.argv[:-1] else "server"
if "--make-minilm" not in sys.argv and _ct != "env":
    _ct = server_blas_core() if _ct == "server" else _ct
    if _ct:
        os.environ["OPENBLAS_CORETYPE"] = _ct
import benchlib as bl  # noqa: E402

bl.reexec_with_coretype()
import numpy as np  # noqa: E402
import torch  # noqa: E402

import bert_torch as bt  # noqa: E402  (tools/ is on the path through benchlib)
from nllb_tokenizer import _fields  # noqa: E402  (the protobuf reader)

OUT = "/tmp/transformer_bench_embed"
BUNDLED = os.path.join(bl.ROOT, "models", "multi30k_sentence_de_en")
BERT_VOCAB = os.path.join(bl.ROOT, "test", "fixtures", "tokenizers", "bert_uncased")
BERT_VOCAB_FALLBACK = os.path.join(bl.ROOT, "test", "fixtures", "encoders", "bert_tiny")
NODE_SCRIPT = os.path.join(HERE, "embed_ort.mjs")


def log(*a):
    print(*a, flush=True)


# ------------------------------------------------------------ the models

def make_bundled_random(directory):
    """A random-weight model of the bundled sentence encoder's shape, with
    its tokenizer files (tools/train_sentence_encoder.py writes the same
    files for the trained one)."""
    import train_sentence_encoder as tse
    spm_file = os.path.join(BUNDLED, "sentencepiece.bpe.model")
    tok = bt.XLMRobertaTokenizer(spm_file)
    cfg = bt.xlmr_config(tok.vocab_size, 256, 3, 4, 1024, 256 + 2, act="silu", layer_norm_eps=1e-5)
    model = bt.SentenceEncoder(cfg, bt.Pooling(256, "mean"), normalize=True, max_seq_length=128)
    bt.init_weights(model, generator=torch.Generator().manual_seed(0))
    if os.path.isdir(directory):
        shutil.rmtree(directory)
    with open(spm_file, "rb") as f:
        tse.write_model_dir(model, directory, f.read(), 128)
    return directory


def make_minilm(directory):
    """all-MiniLM-L6-v2's shape (BERT layout, 384 / 6 layers / 12 heads /
    1536, gelu, 512 positions, type vocabulary 2, LayerNorm eps 1e-12, mean
    pooling + Normalize, max_seq_length 128), random weights (BERT's
    initialization: N(0, 0.02)); the vocabulary and tokenizer files of
    test/fixtures/tokenizers/bert_uncased (uncased WordPiece) where they
    exist, else those of test/fixtures/encoders/bert_tiny."""
    src = BERT_VOCAB if os.path.exists(os.path.join(BERT_VOCAB, "vocab.txt")) else BERT_VOCAB_FALLBACK
    with open(os.path.join(src, "vocab.txt"), encoding="utf-8") as f:
        n_vocab = sum(1 for _ in f)
    cfg = bt.bert_config(n_vocab, 384, 6, 12, 1536, 512, act="gelu")
    model = bt.SentenceEncoder(cfg, bt.Pooling(384, "mean"), normalize=True, max_seq_length=128)
    bt.init_weights(model, generator=torch.Generator().manual_seed(0))
    if os.path.isdir(directory) and os.listdir(directory):
        if not os.path.exists(os.path.join(directory, "config.json")):
            sys.exit("%s is not empty and not a model directory: not overwritten" % directory)
        shutil.rmtree(directory)
    bt.save_encoder(model, directory)
    for f in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        if os.path.exists(os.path.join(src, f)):
            shutil.copy(os.path.join(src, f), directory)
    log("minilm: %s, vocabulary %d (%s), %.1fM parameters" % (
        directory, n_vocab, os.path.relpath(src, bl.ROOT), sum(p.numel() for p in model.parameters()) / 1e6))
    return directory


def flops_per_token(cfg, n):
    """Multiply-adds x 2 of the layers for one token of an n-token text
    (the projections, the feed-forward block, the attention scores and sums)."""
    h, f, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    return 2 * L * (4 * h * h + 2 * h * f + 2 * n * h)


# ------------------------------------------------------------ the machine

def machine(s):
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    field = dict(re.findall(r"^([^:\n]+):\s*(.*)$", lscpu, re.M))
    flags = field.get("Flags", "").split()
    simd = [f for f in ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "avx_vnni") if f in flags]
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    head = subprocess.run(["git", "-C", bl.ROOT, "log", "-1", "--format=%h %cs"], capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", bl.ROOT, "status", "--porcelain", "src", "sql"], capture_output=True,
                           text=True).stdout.split("\n")
    info = {
        "cpu": "%s (family %s, model %s), %s CPUs, %s" % (field.get("Model name"), field.get("CPU family"),
                                                         field.get("Model"), field.get("CPU(s)"), " ".join(simd)),
        "kernel": platform.release(),
        "postgres": query(s, "SELECT version()").split(" on ")[0],
        "transformer_version": query(s, "SELECT transformer_version()"),
        "transformer.so": "%s, sha256 %s...; the tree at %s%s" % (
            so_path(), so_sha()[:12], head, " + %d changed files in src/ and sql/" % len([d for d in dirty if d])
            if any(dirty) else ""),
        "torch": "%s, %d thread, OPENBLAS_CORETYPE=%s" % (torch.__version__, torch.get_num_threads(),
                                                          os.environ.get("OPENBLAS_CORETYPE")),
        "numpy": np.__version__,
        "malloc": "MALLOC_MMAP_MAX_=%s MALLOC_TRIM_THRESHOLD_=%s" % (os.environ.get("MALLOC_MMAP_MAX_"),
                                                                  os.environ.get("MALLOC_TRIM_THRESHOLD_")),
        "node": node,
    }
    for k, v in info.items():
        log("%-20s %s" % (k + ":", v))
    return info


def so_path():
    lib = subprocess.run(["pg_config", "--pkglibdir"], capture_output=True, text=True).stdout.strip()
    return os.path.join(lib, "transformer.so")


def so_sha():
    """The installed library's hash: another session's make install during the
    run would mix two builds (and leave perf without symbols)."""
    import hashlib
    with open(so_path(), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# ------------------------------------------------------------ the ONNX side

def export_onnx(model, path):
    class Sentence(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids, attention_mask)[1]

    ids, mask = bt.pad_batch([[5, 6, 7, 8], [5, 6]], bt.config_value(model.cfg, "pad_token_id"))
    ids[:, 0] = model.tokenizer.cls_token_id
    # the wrapper in eval mode too: export() puts the module back in the mode
    # it found it in, and a wrapper left in training mode would switch the
    # model's dropout on for the PyTorch side
    wrapper = Sentence(model).eval()
    with torch.no_grad():
        torch.onnx.export(wrapper, (ids, mask), path, input_names=["input_ids", "attention_mask"],
                          output_names=["sentence_embedding"], opset_version=14, do_constant_folding=True,
                          dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                        "attention_mask": {0: "batch", 1: "sequence"},
                                        "sentence_embedding": {0: "batch"}})
    assert not model.training


def onnx_ops(path):
    """{op_type: count} of an ONNX file's main graph (ModelProto.graph = 7,
    GraphProto.node = 1, NodeProto.op_type = 4, domain = 7), read as
    protobuf wire format (no onnx package here)."""
    with open(path, "rb") as f:
        b = f.read()
    ops = {}
    for f, _, v, _ in _fields(b):
        if f == 7:
            for g, _, node, _ in _fields(v):
                if g == 1:
                    op = dom = ""
                    for h, _, x, _ in _fields(node):
                        if h == 4:
                            op = x.decode()
                        elif h == 7:
                            dom = x.decode()
                    name = (dom + "." if dom else "") + op
                    ops[name] = ops.get(name, 0) + 1
    return ops


class Ort:
    """bench/embed_ort.mjs, kept running: one command, one answer."""

    def __init__(self):
        self.p = subprocess.Popen(["node", NODE_SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  bufsize=1, env=dict(os.environ, OMP_NUM_THREADS="1"))
        self.pid = self.p.pid

    def __call__(self, **cmd):
        self.p.stdin.write(json.dumps(cmd) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("embed_ort.mjs exited")
        r = json.loads(line)
        if "error" in r:
            raise RuntimeError("embed_ort.mjs: " + r["error"])
        return r

    def close(self):
        try:
            self.p.stdin.write('{"cmd": "quit"}\n')
            self.p.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        self.p.wait()


def ort_profile(onnx_path, ids_file, shapes, prefix):
    """[(operator, % of kernel time)] from ONNX Runtime's profiler over one pass,
    in a session of its own."""
    import glob
    for f in glob.glob(prefix + "*.json"):
        os.unlink(f)
    ort = Ort()
    ort(cmd="open", model=onnx_path, optimized=None, profile=prefix)
    ort(cmd="load", name="p", file=ids_file, shapes=shapes)
    ort(cmd="run", name="p")
    ort(cmd="endprofile")
    ort.close()
    files = glob.glob(prefix + "*.json")
    if not files:
        return []
    with open(files[0]) as f:
        events = json.load(f)
    by_op = {}
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            op = e.get("args", {}).get("op_name", "?")
            by_op[op] = by_op.get(op, 0) + e["dur"]
    total = sum(by_op.values()) or 1
    return [(k, 100.0 * v / total) for k, v in sorted(by_op.items(), key=lambda kv: -kv[1]) if v / total >= 0.005]


# ------------------------------------------------------------ helpers

def query(s, sql):
    """One statement on a benchlib.Session (which sends lines to psql: the
    statement needs its semicolon)."""
    sql = sql.rstrip()
    return s.query(sql if sql.endswith(";") else sql + ";")


def vec(text):
    return np.array(text.strip("{}").split(","), dtype=np.float64)


def cosines(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def cos_summary(c):
    return "min %.8f (1 - cos at most %.1e), median %.8f, mean %.8f, over %d texts" % (
        np.min(c), 1 - np.min(c), np.median(c), np.mean(c), len(c))


def med(xs):
    return statistics.median(xs)


def span(xs):
    return "%.2f [%.2f, %.2f]" % (med(xs), min(xs), max(xs))


def read_texts(n):
    out = []
    for lang in ("de", "en"):
        out += bl.sentences(lang, n, split="train")
    return out


# ------------------------------------------------------------ one model

class Bench:
    def __init__(self, args, s, label, directory, sql_name):
        self.args, self.s, self.label, self.dir, self.m = args, s, label, directory, sql_name
        self.work = os.path.join(OUT, sql_name)
        os.makedirs(self.work, exist_ok=True)

    def q(self, sql):
        return query(self.s, sql)

    def timed(self, sql):
        """Seconds of one evaluation, measured in the server."""
        return float(self.q("SELECT pg_temp.bench_median(%s, 1)" % bl.quote(sql)))

    def backend_ticks(self):
        return bl.cpu_ticks(self.backend)

    def setup_sql(self, texts):
        a = self.args
        m = self.m
        for n in (m + "_i8", m):
            self.q("SELECT drop_model(%s)" % bl.quote(n))
        t0 = time.time()
        params = self.q("SELECT import_model(%s, %s)" % (bl.quote(m), bl.quote(self.dir)))
        log("  import_model(%r, %r): %s parameters, %.1f s" % (m, self.dir, params, time.time() - t0))
        if not a.no_int8:
            t0 = time.time()
            self.q("SELECT quantize_model(%s, %s)" % (bl.quote(m), bl.quote(m + "_i8")))
            log("  quantize_model(%r, %r): %.1f s" % (m, m + "_i8", time.time() - t0))
        self.q("DROP TABLE IF EXISTS bench_texts, bench_batches")
        self.q("CREATE TABLE bench_texts (i int PRIMARY KEY, t text NOT NULL)")
        for k in range(0, len(texts), 1000):
            self.q("INSERT INTO bench_texts VALUES " + ",".join(
                "(%d, %s)" % (i, bl.quote(t)) for i, t in enumerate(texts[k:k + 1000], k)))
        self.q("CREATE TABLE bench_batches (size int, b int, ts text[], PRIMARY KEY (size, b))")
        for k in a.sql_batches:
            self.q("INSERT INTO bench_batches SELECT %d, i / %d, array_agg(t ORDER BY i) "
                   "FROM bench_texts GROUP BY 2 ORDER BY 2" % (k, k))
        self.q("VACUUM ANALYZE bench_texts; VACUUM ANALYZE bench_batches")

    def run(self, texts, rotate):
        a, m = self.args, self.m
        log("\n== %s: %s" % (self.label, self.dir))
        model = bt.load_encoder(self.dir)
        cfg = model.cfg
        pad = bt.config_value(cfg, "pad_token_id")
        nparams = sum(p.numel() for p in model.parameters())
        log("  %s, hidden %d, %d layers, %d heads, intermediate %d, %s, vocabulary %d, %.2fM parameters, "
            "max_seq_length %d, pooling %s, normalize %s" % (
                cfg["model_type"], cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"],
                cfg["intermediate_size"], cfg["hidden_act"], cfg["vocab_size"], nparams / 1e6,
                model.max_seq_length, ",".join(model.pooling.modes()), model.normalize is not None))
        self.setup_sql(texts)
        self.backend = int(self.q("SELECT pg_backend_pid()"))

        # ---- tokens (Python side), timed: bert_torch's tokenizers
        t0 = time.perf_counter()
        ids = bt.tokenize_texts(model, texts)
        tok_py = time.perf_counter() - t0
        ntok = sum(len(x) for x in ids)
        flops = sum(len(x) * flops_per_token(cfg, len(x)) for x in ids)
        log("  %d texts, %d tokens (%.1f a text, specials included, longest %d); %.1f GFLOP in the layers; "
            "bert_torch's tokenizer: %.2f s" % (len(texts), ntok, ntok / len(texts), max(map(len, ids)),
                                                flops / 1e9, tok_py))
        # SQL tokenize() against it (no specials there)
        sample = list(range(0, len(texts), max(1, len(texts) // 500)))
        got = self.q("SELECT i, tokenize(t, %s) FROM bench_texts WHERE i = ANY('{%s}') ORDER BY i"
                     % (bl.quote(m + "/source"), ",".join(map(str, sample)))).splitlines()
        same = sum(list(map(int, line.split("|", 1)[1].strip("{}").split(","))) == ids[i][1:-1]
                   for i, line in zip(sample, got))
        log("  SQL tokenize() = bert_torch's ids without the two specials: %d/%d (a sample)" % (same, len(sample)))

        # ---- PyTorch batches (sentence-transformers: sorted by characters, longest first)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i].strip()))
        batches = {}
        for B in a.batches:
            bs = []
            for k in range(0, len(order), B):
                idx = order[k:k + B]
                x, mask = bt.pad_batch([ids[i] for i in idx], pad)
                bs.append((idx, x, mask))
            padded = sum(x.numel() for _, x, _ in bs)
            batches[B] = bs
            log("  batch %d: %d batches, %d padded tokens (%.2fx the real ones)" % (B, len(bs), padded,
                                                                                    padded / ntok))
        torch.set_num_threads(1)

        def torch_pass(B):
            out = []
            c0 = time.process_time()
            t0 = time.perf_counter()
            with torch.inference_mode():
                for idx, x, mask in batches[B]:
                    out.append(model(x, mask)[1])
            secs = time.perf_counter() - t0
            cpu = time.process_time() - c0
            emb = np.zeros((len(texts), out[0].shape[1]), np.float32)
            for (idx, _, _), e in zip(batches[B], out):
                emb[idx] = e.numpy()
            return secs, cpu, emb

        # ---- ONNX export, and the ONNX Runtime process
        onnx_path = os.path.join(self.work, "model.onnx")
        t0 = time.time()
        export_onnx(model, onnx_path)
        log("  torch.onnx.export: %s, %.1f MB, %.1f s; ops %s" % (onnx_path, os.path.getsize(onnx_path) / 1e6,
                                                                  time.time() - t0, onnx_ops(onnx_path)))
        ort = Ort()
        opt_path = os.path.join(self.work, "model.opt.onnx")
        r = ort(cmd="open", model=onnx_path, optimized=opt_path)
        self.ort_versions = r["versions"]
        log("  onnxruntime-node %s (node %s), session %s" % (r["versions"].get("node"), r["node"],
                                                             json.dumps(r["options"])))
        log("  ONNX Runtime's optimized graph (level all): %s" % onnx_ops(opt_path))
        for B in a.batches:
            path = os.path.join(self.work, "batches_%d.bin" % B)
            with open(path, "wb") as f:
                for _, x, mask in batches[B]:
                    f.write(x.numpy().astype("<i8").tobytes())
                    f.write(mask.numpy().astype("<i8").tobytes())
            ort(cmd="load", name="b%d" % B, file=path, shapes=[list(x.shape) for _, x, _ in batches[B]])

        def ort_pass(B, out=None, limit=None):
            r = ort(cmd="run", name="b%d" % B, out=out, limit=limit)
            return r["secs"], r["cpu"]

        # ---- the sides; a first run of each, untimed
        def sql_array(k, name=m):
            return ("SELECT count(*) FROM bench_batches b, LATERAL embed(b.ts, %s) e WHERE b.size = %d"
                    % (bl.quote(name), k))
        sql_row = "SELECT count(embed(t, %s)) FROM bench_texts" % bl.quote(m)
        sql_tok = "SELECT count(tokenize(t, %s)) FROM bench_texts" % bl.quote(m + "/source")
        K = a.sql_batch
        first = "(SELECT ts FROM bench_batches WHERE size = %d AND b = 0)" % K
        self.q("SELECT count(*) FROM embed(%s, %s)" % (first, bl.quote(m)))
        self.q("SELECT count(embed(t, %s)) FROM bench_texts WHERE i < 10" % bl.quote(m))
        self.ours("SELECT count(*) FROM embed(%s, %s)" % (first, bl.quote(m)), "stored")
        if not a.no_int8:
            self.q("SELECT count(*) FROM embed(%s, %s)" % (first, bl.quote(m + "_i8")))
        if a.bf16:
            self.ours("SELECT count(*) FROM embed(%s, %s)" % (first, bl.quote(m)), "bf16")
        for B in a.batches:
            with torch.inference_mode():
                model(batches[B][0][1], batches[B][0][2])
            ort_pass(B, limit=1)

        sides = [("ours", "embed(text[])", lambda: self.ours(sql_array(K))),
                 ("ours stored fp32", "embed(text[])", lambda: self.ours(sql_array(K), "stored"))]
        for k in a.sql_batches[1:]:
            sides.append(("ours", "embed(text[]) by %d" % k, lambda k=k: self.ours(sql_array(k))))
        if not a.no_row:
            sides.append(("ours", "embed(text)", lambda: self.ours(sql_row)))
        sides.append(("ours", "tokenize()", lambda: self.ours(sql_tok)))
        if not a.no_int8:
            sides.append(("ours int8", "embed(text[])", lambda: self.ours(sql_array(K, m + "_i8"))))
        if a.bf16:
            sides.append(("ours bf16", "embed(text[])", lambda: self.ours(sql_array(K), "bf16")))
        torch_emb = {}
        for B in a.batches:
            def tp(B=B):
                secs, cpu, emb = torch_pass(B)
                torch_emb[B] = emb
                return secs, cpu
            sides.append(("PyTorch", "batch %d" % B, tp))
            sides.append(("ONNX Runtime", "batch %d" % B, lambda B=B: ort_pass(B)))
        times = {(x, y): [] for x, y, _ in sides}
        cpus = {(x, y): [] for x, y, _ in sides}
        meter = bl.LoadMeter(self.backend, ort.pid)
        busy = []
        for rep in range(a.reps):
            k = (rep * rotate) % len(sides)
            order_ = sides[k:] + sides[:k]
            m0 = bl.LoadMeter(self.backend, ort.pid)
            for who, form, f in order_:
                secs, cpu = f()
                times[(who, form)].append(secs)
                cpus[(who, form)].append(cpu)
            busy.append(m0.others())
            log("  run %d/%d (other processes %.2f cores): %s" % (
                rep + 1, a.reps, busy[-1], ", ".join("%s %s %.2f s" % (w, f_, times[(w, f_)][-1])
                                                      for w, f_, _ in order_)))
        self.others = meter.others()
        log("  other processes used %.2f cores over the timed runs (per run: %s)"
            % (self.others, ", ".join("%.2f" % x for x in busy)))

        # ---- agreement
        agree = {}
        ref = torch_emb[a.batches[0]]
        got = self.q("SELECT i, embed(t, %s) FROM bench_texts WHERE i = ANY('{%s}') ORDER BY i"
                     % (bl.quote(m), ",".join(map(str, sample)))).splitlines()
        default_row = np.array([vec(line.split("|", 1)[1]) for line in got])
        # the references' arithmetic: fp32, as stored
        self.q("SET transformer.compute_type = 'stored'")
        got = self.q("SELECT i, embed(t, %s) FROM bench_texts WHERE i = ANY('{%s}') ORDER BY i"
                     % (bl.quote(m), ",".join(map(str, sample)))).splitlines()
        ours_row = np.array([vec(line.split("|", 1)[1]) for line in got])
        agree["ours stored embed(text) vs PyTorch"] = cosines(ours_row, ref[sample])
        nb = int(self.q("SELECT count(*) FROM bench_batches WHERE size = %d" % K))
        pick = sorted({0, nb - 1})
        got = self.q("SELECT b.b, e.o, e.v FROM bench_batches b, LATERAL embed(b.ts, %s) WITH ORDINALITY e(v, o) "
                     "WHERE b.size = %d AND b.b = ANY('{%s}') ORDER BY 1, 2"
                     % (bl.quote(m), K, ",".join(map(str, pick)))).splitlines()
        rows = [line.split("|") for line in got]
        idx = [int(b) * a.sql_batch + int(o) - 1 for b, o, _ in rows]
        ours_arr = np.array([vec(v) for _, _, v in rows])
        agree["ours stored embed(text[]) vs PyTorch"] = cosines(ours_arr, ref[idx])
        self.q("RESET transformer.compute_type")
        agree["ours default (auto: int8) vs ours stored fp32"] = cosines(default_row, ours_row)
        agree["ours default (auto: int8) vs PyTorch fp32"] = cosines(default_row, ref[sample])
        ort_emb = {}
        for B in a.batches:
            path = os.path.join(self.work, "ort_%d.f32" % B)
            ort_pass(B, out=path)
            flat = np.fromfile(path, dtype="<f4").reshape(len(texts), -1)
            emb = np.zeros_like(flat)
            emb[[i for idx_, _, _ in batches[B] for i in idx_]] = flat
            ort_emb[B] = emb
            agree["ONNX Runtime batch %d vs PyTorch batch %d" % (B, B)] = cosines(emb, torch_emb[B])
        agree["ours stored embed(text) vs ONNX Runtime"] = cosines(ours_row, ort_emb[a.batches[0]][sample])
        if len(a.batches) > 1:
            agree["PyTorch batch %d vs batch %d" % (a.batches[0], a.batches[-1])] = cosines(
                torch_emb[a.batches[0]], torch_emb[a.batches[-1]])
        if not a.no_int8:
            got = self.q("SELECT i, embed(t, %s) FROM bench_texts WHERE i = ANY('{%s}') ORDER BY i"
                         % (bl.quote(m + "_i8"), ",".join(map(str, sample)))).splitlines()
            i8 = np.array([vec(line.split("|", 1)[1]) for line in got])
            agree["ours int8 vs ours fp32"] = cosines(i8, ours_row)
            agree["ours int8 vs PyTorch fp32"] = cosines(i8, ref[sample])
        if a.bf16:
            self.q("SET transformer.compute_type = 'bf16'")
            got = self.q("SELECT i, embed(t, %s) FROM bench_texts WHERE i = ANY('{%s}') ORDER BY i"
                         % (bl.quote(m), ",".join(map(str, sample)))).splitlines()
            self.q("RESET transformer.compute_type")
            b16 = np.array([vec(line.split("|", 1)[1]) for line in got])
            agree["ours bf16 vs ours fp32"] = cosines(b16, ours_row)
            agree["ours bf16 vs PyTorch fp32"] = cosines(b16, ref[sample])
        for k, c in agree.items():
            log("  cosine, %s: %s" % (k, cos_summary(c)))
        ort.close()

        # ---- ONNX Runtime's own profile of one batch-32 pass (--perf), by operator
        if a.perf:
            self.ort_profile = ort_profile(onnx_path, os.path.join(self.work, "batches_%d.bin" % a.batches[0]),
                                           [list(x.shape) for _, x, _ in batches[a.batches[0]]],
                                           os.path.join(self.work, "ort_profile"))
            log("  ONNX Runtime's profiler, one batch-%d pass, kernel time by operator: %s" % (
                a.batches[0], ", ".join("%s %.1f%%" % kv for kv in self.ort_profile)))

        # ---- perf on the backend during one more embed(text[]) pass
        self.profile = None
        if a.perf:
            self.profile = [self.perf(sql_array(K), "embed(text[]) by %d" % K)]
            if not a.no_row:
                self.profile.append(self.perf(sql_row, "embed(text), one call a row"))

        self.times, self.cpus, self.agree = times, cpus, agree
        self.n, self.ntok, self.flops, self.tok_py = len(texts), ntok, flops, tok_py
        self.cfg, self.nparams = cfg, nparams
        return self

    def ours(self, sql, compute_type=None):
        if compute_type:
            self.q("SET transformer.compute_type = %s" % bl.quote(compute_type))
        try:
            c0 = self.backend_ticks()
            secs = self.timed(sql)
            return secs, (self.backend_ticks() - c0) / os.sysconf("SC_CLK_TCK")
        finally:
            if compute_type:
                self.q("RESET transformer.compute_type")

    def perf(self, sql, what):
        data = os.path.join(self.work, "perf.data")
        p = subprocess.Popen(["perf", "record", "-g", "-o", data, "-p", str(self.backend)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        secs = self.timed(sql)
        p.send_signal(signal.SIGINT)
        p.wait()
        rep = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,symbol", "--stdio",
                              "-g", "none", "--percent-limit", "1"], capture_output=True, text=True).stdout
        lines = [l for l in rep.splitlines() if l.strip() and not l.startswith("#")]
        log("  perf record -g on the backend, one %s pass (%.2f s): %s" % (what, secs, data))
        for l in lines[:25]:
            log("    " + l.strip())
        return lines[:25]


# ------------------------------------------------------------ report

def table(benches, args):
    log("\n| model | side | form | seconds / %d texts | sentences/s | CPU seconds | CPU / wall | "
        "ours embed(text[]) speed-up (its time / ours) |" % benches[0].n)
    log("|---|---|---|---|---|---|---|---|")
    for b in benches:
        ours = b.times[("ours", "embed(text[])")]
        for (who, form), ts in b.times.items():
            rate = [b.n / t for t in ts]
            cw = med([c / t for c, t in zip(b.cpus[(who, form)], ts)])
            if (who, form) == ("ours", "embed(text[])") or form == "tokenize()":
                ratio = ""
            else:
                r = [t / o for t, o in zip(ts, ours)]
                ratio = "**%.2fx** [%.2f, %.2f]" % (med(r), min(r), max(r))
            name = form
            if who.startswith("ours") and form.startswith("embed(text[])"):
                name = "embed(text[]), %s a call, tokenizing included" % (
                    form.split()[-1] if " by " in form else args.sql_batch)
            elif who == "ours" and form == "embed(text)":
                name = "embed(text), one call a row, tokenizing included"
            elif who == "ours" and form == "tokenize()":
                name = "tokenize() alone (the share of tokenizing)"
            elif not who.startswith("ours"):
                name = form + ", model only (ids precomputed)"
            log("| %s | %s | %s | %s | %.0f | %.2f | %.2f | %s |" % (b.label, who, name, span(ts), med(rate),
                                                                med(b.cpus[(who, form)]), cw, ratio))
        tok = b.times[("ours", "tokenize()")]
        model_only = [o - t for o, t in zip(ours, tok)]
        log("| %s | ours | embed(text[]) minus tokenize() (estimate) | %s | %.0f | | | |"
            % (b.label, span(model_only), med([b.n / t for t in model_only])))
        log("| %s | PyTorch | bert_torch's Python tokenizer, once | %.2f | %.0f | | | |"
            % (b.label, b.tok_py, b.n / b.tok_py))


def summary(benches, args):
    log("\nRatios within each run (the other side's time over ours; > 1: ours is faster):")
    for b in benches:
        ours = b.times[("ours", "embed(text[])")]
        tok = b.times[("ours", "tokenize()")]
        model_only = [o - t for o, t in zip(ours, tok)]
        for other in ("PyTorch", "ONNX Runtime"):
            best = [min(b.times[(other, "batch %d" % B)][r] for B in args.batches) for r in range(len(ours))]
            r = [x / o for x, o in zip(best, ours)]
            r2 = [x / o for x, o in zip(best, model_only)]
            log("  %s: ours / %s (its faster batch size each run): %s with our tokenizing, %s without"
                % (b.label, other, span(r), span(r2)))
            # the same in CPU seconds (each side's process; robust to the time other processes take)
            oc = b.cpus[("ours", "embed(text[])")]
            bc = [min(b.cpus[(other, "batch %d" % B)][r_] for B in args.batches) for r_ in range(len(oc))]
            log("  %s: ours / %s in CPU seconds: %s" % (b.label, other, span([x / o for x, o in zip(bc, oc)])))
        gf = b.flops / 1e9
        log("  %s: %.1f GFLOP a pass in the layers (real tokens only): ours %.1f GFLOP/s, PyTorch %s, "
            "ONNX Runtime %s" % (b.label, gf, gf / med(model_only), ", ".join(
                "%.1f (batch %d)" % (gf / med(b.times[("PyTorch", "batch %d" % B)]), B) for B in args.batches),
                ", ".join("%.1f (batch %d)" % (gf / med(b.times[("ONNX Runtime", "batch %d" % B)]), B)
                          for B in args.batches)))
        for (who, form), ts in b.times.items():
            if who.startswith("ours") and (who, form) != ("ours", "embed(text[])") and form != "tokenize()":
                for other in ("PyTorch", "ONNX Runtime"):
                    best = [min(b.times[(other, "batch %d" % B)][r] for B in args.batches) for r in range(len(ts))]
                    log("  %s: %s %s / %s: %s" % (b.label, who, form, other, span([x / o for x, o in zip(best, ts)])))
        share = med([t / o for t, o in zip(tok, ours)])
        log("  %s: tokenizing is %.0f%% of embed(text[])" % (b.label, 100 * share))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=5000, help="sentences per language (German, English)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--models", default="bundled,minilm")
    ap.add_argument("--bundled", choices=("auto", "trained", "random"), default="auto",
                    help="the bundled model's weights: trained if model.safetensors exists (auto), or random")
    ap.add_argument("--minilm-dir", default=os.path.join(OUT, "minilm_random"))
    ap.add_argument("--make-minilm", metavar="DIR", help="write the MiniLM-shaped model into DIR and exit")
    ap.add_argument("--sql-batch", default="256,32",
                    help="texts per embed(text[]) call; the first is the headline, the others for comparison")
    ap.add_argument("--batches", default="32,256", help="PyTorch and ONNX Runtime batch sizes")
    ap.add_argument("--no-int8", action="store_true")
    ap.add_argument("--bf16", action="store_true",
                    help="also embed(text[]) with SET transformer.compute_type = 'bf16' (AVX512_BF16)")
    ap.add_argument("--no-row", action="store_true", help="leave out the one-call-a-row form")
    ap.add_argument("--perf", action="store_true", help="perf record -g the backend during one more pass")
    ap.add_argument("--quick", action="store_true", help="-n 250 --reps 1")
    ap.add_argument("--torch-malloc", choices=("keep", "default"), default="keep",
                    help="keep: glibc malloc keeps freed memory (MALLOC_MMAP_MAX_=0, a large "
                         "MALLOC_TRIM_THRESHOLD_) for PyTorch and node; default: as installed")
    ap.add_argument("--coretype", default="server",
                    help="OPENBLAS_CORETYPE for PyTorch: server (the extension's OpenBLAS core, default), env (as "
                         "the environment has it), or a core name")
    args = ap.parse_args()
    if args.make_minilm:
        make_minilm(os.path.abspath(args.make_minilm))
        return
    if args.quick:
        args.n, args.reps = min(args.n, 250), 1
    args.batches = [int(x) for x in args.batches.split(",")]
    args.sql_batches = [int(x) for x in args.sql_batch.split(",")]
    args.sql_batch = args.sql_batches[0]
    os.makedirs(OUT, exist_ok=True)
    texts = read_texts(args.n)

    s = bl.Session()
    query(s, "SET client_min_messages = warning")
    query(s, "CREATE EXTENSION IF NOT EXISTS transformer")
    query(s, "SET transformer.threads = 1; SET max_parallel_workers_per_gather = 0; SET jit = off")
    query(s, bl.TIMER)
    log("command: %s" % " ".join(sys.argv))
    sha0 = so_sha()
    info = machine(s)
    log("other processes now: %s" % (", ".join(bl.other_processes()) or "none"))
    if args.perf:
        # a copy of the library this backend loaded, found by its build id: if
        # another session's make install replaces the file, perf report still
        # names the symbols
        subprocess.run(["perf", "buildid-cache", "-a", so_path()], capture_output=True)

    benches = []
    for i, label in enumerate(args.models.split(",")):
        if label == "bundled":
            trained = os.path.exists(os.path.join(BUNDLED, "model.safetensors")) and \
                os.path.exists(os.path.join(BUNDLED, "config.json"))
            if args.bundled == "trained" and not trained:
                sys.exit("models/multi30k_sentence_de_en has no model.safetensors yet")
            if args.bundled != "random" and trained:
                directory = os.path.join(OUT, "bundled_trained")
                if os.path.isdir(directory):
                    shutil.rmtree(directory)
                shutil.copytree(BUNDLED, directory)         # readable by the server's user
                label = "bundled (trained)"
            else:
                directory = make_bundled_random(os.path.join(OUT, "bundled_random"))
                label = "bundled shape, random"
            name = "sent"
        elif label == "minilm":
            directory = args.minilm_dir
            if not os.path.exists(os.path.join(directory, "model.safetensors")):
                make_minilm(directory)
            label, name = "MiniLM-L6 shape, random", "minilm"
        else:
            sys.exit("unknown model %s" % label)
        benches.append(Bench(args, s, label, directory, name).run(texts, rotate=i + 1))
        if so_sha() != sha0:
            log("  WARNING: %s has been replaced since this backend loaded it (make install elsewhere): "
                "the figures are those of the build loaded at the start (sha256 %s...)" % (so_path(), sha0[:12]))

    table(benches, args)
    summary(benches, args)
    log("\n(%d texts: the first %d German and %d English Multi30k training sentences; medians [min, max] of %d "
        "runs, the sides alternating; ours timed in the server; PyTorch and ONNX Runtime: the model on ids "
        "tokenized beforehand, batches padded beforehand)" % (benches[0].n, args.n, args.n, args.reps))
    log("machine: %s" % json.dumps(info))
    s.close()


if __name__ == "__main__":
    main()
