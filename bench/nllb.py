#!/usr/bin/python3
"""NLLB-600M's shapes: import memory, and decoding speed against PyTorch.

1. A checkpoint with facebook/nllb-200-distilled-600M's configuration (d_model
   1024, 12 + 12 layers, 16 heads, ffn 4096, vocabulary 256,206, relu,
   scaled embeddings; 615M parameters) and random weights, built with
   tools/m2m100_torch.py (the torch.nn port of transformers' M2M100): every
   weight N(0, 0.02), layer norms 1 and 0.  The shared embedding's rows
   outside the tokenizer's own pieces (ids 0-3 and 1001 up) are drawn with
   std 0.002, so that the argmax and the beams' candidates are always pieces
   the tiny tokenizer can decode (translate() must detokenize them) and EOS
   never wins: every sentence runs to max_new_tokens on both sides.
   Written twice, in a cache directory outside the repository (reused if
   present): DIR/model.safetensors (fp32, streamed tensor by tensor, as
   save_pretrained(safe_serialization=True) names them: the tied embedding
   once, as model.shared.weight) and DIR_bin/pytorch_model.bin
   (torch.save(state_dict): the four names of the tied embedding on one
   storage), each with config.json and generation_config.json as
   facebook/nllb-200-distilled-600M has them, and the tokenizer files of
   test/fixtures/checkpoints/nllb_tiny (ids < 1010: they fit in the large
   vocabulary; deu_Latn is 1002, eng_Latn 1003).
2. Import memory: in a fresh backend, import_model() of each layout; the
   backend's peak RSS (VmHWM of /proc/PID/status) before and after, and its
   RssAnon / RssFile / RssShmem sampled every 20 ms during the import;
   wall time; the NOTICE progress lines.  The two imports' tensors are
   compared (md5 of every tensor's bytes).
3. Speed, one thread each side (torch.set_num_threads(1),
   OPENBLAS_NUM_THREADS=1; SET transformer.threads = 1 in the one
   backend): per sentence, greedy and beam 4, N Multi30k test_2016_flickr
   German sentences, generate(s, 'nllb600m', beam_size => k, source_lang =>
   'deu_Latn', target_lang => 'eng_Latn', max_new_tokens => 32), timed in
   the server, against PyTorch decoding the same source ids (NllbTokenizer's,
   tools/nllb_tokenizer.py: [deu_Latn] pieces </s>, checked against SQL
   tokenize()) with the same settings: bench/torch_decode.py's incremental
   decoder (KV cache, cross K/V once, inference_mode; its greedy and beam
   search) on the port's modules, checked first against the port's own
   generate().  fp32, and int8: quantize_model() against PyTorch's
   quantize_dynamic({nn.Linear}, qint8).  The sides alternate sentence by
   sentence; ids compared on every timed sentence.  Then the batch form:
   translate(text[]) of B sentences at once vs PyTorch batched decoding
   (right padding, attention masks), greedy and beam 4, R runs each with
   the sides alternating, texts compared (PyTorch's ids through
   NllbTokenizer.decode(skip_special_tokens=True)).
Before the imports and before the timings the script waits (up to
--wait-quiet minutes) until no other process uses more than 10% of a core,
and reports the cores other processes used during each part.

Ratios are PyTorch's time over ours, measured in the same run.

Needs a running server with the extension installed (make install); -t:
as root, pg_virtualenv otherwise takes the system's 15/regress cluster.
Usage: pg_virtualenv -t bench/nllb.py [--quick] [-n N] [--batch B] [--batch-reps R] [--max-new-tokens T]
       [--dir DIR] [--parts build,import,load,speed,batch]
"""
import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time

# one thread on the PyTorch side: OpenBLAS (pthreads) reads this when it loads
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import benchlib as bl  # noqa: E402

bl.reexec_with_coretype()
import psycopg2  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import torch_decode as td  # noqa: E402

sys.path.insert(0, os.path.join(bl.ROOT, "tools"))
import m2m100_torch as m2m  # noqa: E402
import nllb_tokenizer as nt  # noqa: E402

FIXTURE = os.path.join(bl.ROOT, "test", "fixtures", "checkpoints", "nllb_tiny")
TOKENIZER_FILES = ("sentencepiece.bpe.model", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json")
SRC_LANG, TGT_LANG = "deu_Latn", "eng_Latn"
MODEL, MODEL_I8 = "nllb600m", "nllb600m_i8"

# facebook/nllb-200-distilled-600M's config.json and generation_config.json
CONFIG = {
    "_name_or_path": "facebook/nllb-200-distilled-600M (shapes only: random weights)",
    "activation_dropout": 0.0, "activation_function": "relu",
    "architectures": ["M2M100ForConditionalGeneration"], "attention_dropout": 0.1,
    "bos_token_id": 0, "d_model": 1024, "decoder_attention_heads": 16, "decoder_ffn_dim": 4096,
    "decoder_layerdrop": 0, "decoder_layers": 12, "decoder_start_token_id": 2, "dropout": 0.1,
    "encoder_attention_heads": 16, "encoder_ffn_dim": 4096, "encoder_layerdrop": 0, "encoder_layers": 12,
    "eos_token_id": 2, "init_std": 0.02, "is_encoder_decoder": True, "max_length": 200,
    "max_position_embeddings": 1024, "model_type": "m2m_100", "num_hidden_layers": 12,
    "pad_token_id": 1, "scale_embedding": True, "tokenizer_class": "NllbTokenizer",
    "torch_dtype": "float32", "transformers_version": "4.21.0.dev0", "use_cache": True,
    "vocab_size": 256206,
}
GENERATION = {"_from_model_config": True, "bos_token_id": 0, "decoder_start_token_id": 2, "eos_token_id": 2,
              "max_length": 200, "pad_token_id": 1, "transformers_version": "4.27.0.dev0"}
FIRST_PIECE, LAST_PIECE = 4, 1000       # the tiny tokenizer's SentencePiece pieces (fairseq ids)


def log(*a):
    print(*a, flush=True)


# ------------------------------------------------------------ the machine

cpu_ticks = bl.cpu_ticks
busy_ticks = bl.busy_ticks
other_processes = bl.other_processes
LoadMeter = bl.LoadMeter


def major_faults(pid):
    with open("/proc/%s/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[9])


def wait_quiet(max_minutes, exclude=()):
    """Wait (polling every 30 s) until no other process uses the CPU; returns
    what was still busy if the wait ran out."""
    deadline = time.time() + 60 * max_minutes
    while True:
        busy = other_processes(exclude=exclude)
        if not busy:
            return []
        if time.time() >= deadline:
            log("  still busy after %g minutes, timing under load: %s" % (max_minutes, ", ".join(busy)))
            return busy
        log("  waiting for a quiet machine: %s" % ", ".join(busy))
        time.sleep(27)


def machine(cur, backend_pid):
    cpu = "?"
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.split("\n"):
        if line.startswith("Model name:"):
            cpu = line.split(":", 1)[1].strip()
    flags = open("/proc/cpuinfo").read().split("flags", 1)[1].split("\n", 1)[0].split()
    fam = re.search(r"cpu family\s*:\s*(\d+)", open("/proc/cpuinfo").read()).group(1)
    model = re.search(r"model\s*:\s*(\d+)", open("/proc/cpuinfo").read()).group(1)
    simd = [f for f in ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "avx_vnni") if f in flags]
    cur.execute("SELECT version(), current_setting('shared_buffers'), current_setting('transformer.threads'),"
                " current_setting('transformer.shared_weights')")
    pgv, sb, bt, sw = cur.fetchone()
    blas = sorted({l.split()[-1] for l in open("/proc/%d/maps" % backend_pid) if "blas" in l})
    cfg = torch.__config__.show()
    dnnl = re.search(r"MKL-DNN v[\d.]+", cfg)
    cap = re.search(r"CPU capability usage: (\S+)", cfg)
    binfo = re.search(r"BLAS_INFO=(\w+)", cfg)
    log("machine: %s, %d CPUs (family %s model %s), %s, kernel %s" % (
        cpu, os.cpu_count(), fam, model, " ".join(simd), platform.release()))
    log("server:  %s; shared_buffers %s; transformer.threads %s; shared_weights %s; backend's BLAS %s;"
        " the extension's kernels by CPU features: %s for fp32, %s for int8" % (
            pgv.split(" on ")[0], sb, bt, sw, ", ".join(blas) or "?",
            "AVX-512" if "avx512f" in flags else ("AVX2" if "avx2" in flags else "portable"),
            "AVX-512 VNNI" if "avx512_vnni" in flags else ("AVX2" if "avx2" in flags else "portable")))
    log("PyTorch: %s, %s, BLAS_INFO=%s (%s), OPENBLAS_CORETYPE=%s, OPENBLAS_NUM_THREADS=%s, threads %d,"
        " CPU capability %s, quantized engine %s (supported: %s; fbgemm %s)" % (
            torch.__version__, dnnl.group(0).replace("MKL-DNN", "oneDNN") if dnnl else "no oneDNN",
            binfo.group(1) if binfo else "?", os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3"),
            os.environ.get("OPENBLAS_CORETYPE"), os.environ.get("OPENBLAS_NUM_THREADS"), torch.get_num_threads(),
            cap.group(1) if cap else "?", torch.backends.quantized.engine,
            ", ".join(torch.backends.quantized.supported_engines),
            "available" if "fbgemm" in torch.backends.quantized.supported_engines else "not built"))


# ------------------------------------------------------------ the checkpoint

def write_safetensors(path, tensors):
    """tools/marian_torch.py's save_safetensors, streamed: each tensor's
    bytes written from its own memory, no copy of the model."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, t in tensors.items():
        n = t.numel() * t.element_size()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + n]}
        offset += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for name, t in tensors.items():
            assert t.dtype == torch.float32 and t.is_contiguous()
            f.write(memoryview(t.detach().numpy()).cast("B"))


def write_common(d):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2, sort_keys=True)
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump(GENERATION, f, indent=2, sort_keys=True)
    for name in TOKENIZER_FILES:
        shutil.copy(os.path.join(FIXTURE, name), d)


def build(st_dir, bin_dir):
    st, binf = os.path.join(st_dir, "model.safetensors"), os.path.join(bin_dir, "pytorch_model.bin")
    if os.path.exists(st) and os.path.exists(binf):
        log("checkpoint: reusing %s and %s" % (st, binf))
        return
    t0 = time.time()
    torch.manual_seed(0)
    model = m2m.M2M100ForConditionalGeneration(CONFIG)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            else:
                p.normal_(0, 0.02)
        e = model.model.shared.weight
        e[:FIRST_PIECE] *= 0.1
        e[LAST_PIECE + 1:] *= 0.1
    state = model.state_dict()
    for d in (st_dir, bin_dir):
        write_common(d)
    write_safetensors(st + ".part", m2m.safetensors_state_dict(state))
    os.rename(st + ".part", st)
    torch.save(m2m.hf_state_dict(model), binf + ".part")
    os.rename(binf + ".part", binf)
    log("checkpoint: built in %.0f s: %s (%d bytes), %s (%d bytes)" % (
        time.time() - t0, st, os.path.getsize(st), binf, os.path.getsize(binf)))


def load_model(st_dir):
    """The safetensors file into the port's module, each tensor read into its
    parameter's memory (no second copy of 2.5 GB)."""
    inits = {f: getattr(nn.init, f) for f in ("kaiming_uniform_", "uniform_", "normal_")}
    try:            # no random initialization: every parameter is read below
        for f in inits:
            setattr(nn.init, f, lambda t, *a, **k: t)
        model = m2m.M2M100ForConditionalGeneration(CONFIG)
    finally:
        for f, fn in inits.items():
            setattr(nn.init, f, fn)
    params = dict(model.named_parameters())       # the tied embedding once, as model.shared.weight
    path = os.path.join(st_dir, "model.safetensors")
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        base = 8 + n
        for name, info in header.items():
            if name == "__metadata__":
                continue
            p = params[name]
            assert info["dtype"] == "F32" and list(p.shape) == info["shape"], name
            f.seek(base + info["data_offsets"][0])
            buf = memoryview(p.detach().numpy()).cast("B")
            assert f.readinto(buf) == len(buf)
            del params[name]
    assert not params, "not in the file: %s" % sorted(params)
    assert model.lm_head.weight is model.model.shared.weight
    return model.eval()


# ------------------------------------------------------------ the PyTorch side

class NllbDecoder(td.IncrementalDecoder):
    """bench/torch_decode.py's incremental decoding (its greedy() and beam())
    on tools/m2m100_torch.py's modules: pre-LayerNorm layers, fairseq's
    positions (pad + 1 + step), the target language forced at the first
    step (ForcedBOSTokenLogitsProcessor), lm_head tied to the embeddings;
    max_new_tokens fixed.  batch_greedy(): padded sources with their
    attention mask, finished rows leave the batch."""

    def __init__(self, model, gen, forced_bos, max_new):
        self.m = model.eval()
        self.cfg = model.cfg
        self.h = self.cfg["decoder_attention_heads"]
        self.pad = self.cfg["pad_token_id"]
        self.gen = dict(gen, forced_bos_token_id=forced_bos, max_new_tokens=max_new)
        self.start = self.gen["decoder_start_token_id"]
        self.eos = self.gen["eos_token_id"]
        self.forced_bos = forced_bos
        self.max_new = max_new
        self.bad = []
        assert self.gen["forced_eos_token_id"] is None and not self.gen["renormalize_logits"]

    @classmethod
    def quantized(cls, model, gen, forced_bos, max_new):
        """torch.ao.quantization.quantize_dynamic on a copy: every nn.Linear
        (lm_head included, tied to the embeddings) to qint8, weights per
        tensor, inputs quantized per call; the embedding stays fp32."""
        q = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
        return cls(q, gen, forced_bos, max_new)

    def encode(self, batch):
        n = max(len(s) for s in batch)
        src = torch.full((len(batch), n), self.pad, dtype=torch.long)
        mask = torch.zeros((len(batch), n), dtype=torch.long)
        for i, s in enumerate(batch):
            src[i, : len(s)] = torch.tensor(s)
            mask[i, : len(s)] = 1
        memory, pad = self.m.encode(src, mask)
        cross = []
        for layer in self.m.model.decoder.layers:
            a = layer.encoder_attn
            cross.append((td._heads(a.k_proj(memory), self.h), td._heads(a.v_proj(memory), self.h)))
        return {"cross": cross, "pad": pad.unsqueeze(1), "self": [None] * len(cross)}

    def _attn(self, a, x, k, v, mask):
        q = td._heads(a.q_proj(x), self.h)
        s = (q @ k.transpose(-1, -2)) * a.scaling
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        o = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(x.shape[0], 1, -1)
        return a.out_proj(o)

    def step(self, state, tokens, pos):
        dec = self.m.model.decoder
        ids = tokens.unsqueeze(1)
        where = torch.where(ids.ne(self.pad), torch.full_like(ids, self.pad + 1 + pos), torch.full_like(ids, self.pad))
        x = dec.embed_tokens(ids) + dec.embed_positions.weights.index_select(0, where.view(-1)).unsqueeze(1)
        for i, layer in enumerate(dec.layers):
            h = layer.self_attn_layer_norm(x)
            a = layer.self_attn
            k, v = td._heads(a.k_proj(h), self.h), td._heads(a.v_proj(h), self.h)
            if state["self"][i] is not None:
                k = torch.cat([state["self"][i][0], k], dim=2)
                v = torch.cat([state["self"][i][1], v], dim=2)
            state["self"][i] = (k, v)
            x = x + self._attn(a, h, k, v, None)
            ck, cv = state["cross"][i]
            x = x + self._attn(layer.encoder_attn, layer.encoder_attn_layer_norm(x), ck, cv, state["pad"])
            x = x + layer.fc2(layer.activation_fn(layer.fc1(layer.final_layer_norm(x))))
        return self.m.lm_head(dec.layer_norm(x)[:, 0])

    def process(self, scores, cur_len, max_length, beam):
        if beam:
            scores = torch.log_softmax(scores, dim=-1)
        if cur_len == 1 and self.forced_bos is not None:
            scores = torch.full_like(scores, float("-inf"))
            scores[:, self.forced_bos] = 0
        return scores

    def max_length(self, src):
        return self.max_new + 1

    @torch.inference_mode()
    def batch_greedy(self, batch):
        state = self.encode(batch)
        active = list(range(len(batch)))
        out = [[] for _ in batch]
        last = torch.full((len(batch),), self.start, dtype=torch.long)
        for t in range(self.max_new):
            nxt = self.process(self.step(state, last, t), t + 1, None, False).argmax(-1).tolist()
            keep = [a for a in range(len(active)) if nxt[a] != self.eos]
            for a in keep:
                out[active[a]].append(nxt[a])
            if not keep:
                break
            if len(keep) < len(active):
                self.reorder(state, torch.tensor(keep))
            active = [active[a] for a in keep]
            last = torch.tensor([nxt[a] for a in keep])
        return out


# ------------------------------------------------------------ SQL

TIMED = """
CREATE OR REPLACE FUNCTION pg_temp.timed_ids(q text, OUT secs float8, OUT ids int[]) LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz;
BEGIN t0 := clock_timestamp(); EXECUTE q INTO ids; secs := extract(epoch FROM clock_timestamp() - t0); END $$;
CREATE OR REPLACE FUNCTION pg_temp.timed_texts(q text, OUT secs float8, OUT texts text[]) LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz;
BEGIN t0 := clock_timestamp(); EXECUTE q INTO texts; secs := extract(epoch FROM clock_timestamp() - t0); END $$;
"""


def connect():
    conn = psycopg2.connect("")
    conn.autocommit = True
    return conn


def one(cur, sql, args=None):
    cur.execute(sql, args)
    return cur.fetchone()


def status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if v.strip().endswith("kB"):
                out[k] = int(v.split()[0]) * 1024
    return out


def import_measured(directory, name):
    """import_model() in a fresh backend: (seconds, notices, VmHWM before,
    VmHWM after, maxima of RssAnon / RssFile / RssShmem during it)."""
    conn = connect()
    cur = conn.cursor()
    cur.execute("SET client_min_messages = notice; LOAD 'transformer'")
    pid = one(cur, "SELECT pg_backend_pid()")[0]
    before = status(pid)
    ticks0 = cpu_ticks(pid)
    peaks = {"RssAnon": 0, "RssFile": 0, "RssShmem": 0, "VmRSS": 0}
    timeline = []
    done = threading.Event()

    def poll():
        t0 = time.time()
        while not done.is_set():
            try:
                s = status(pid)
            except OSError:
                break
            for k in peaks:
                peaks[k] = max(peaks[k], s.get(k, 0))
            timeline.append((time.time() - t0, s.get("VmRSS", 0), s.get("RssAnon", 0)))
            time.sleep(0.02)
    th = threading.Thread(target=poll)
    th.start()
    t0 = time.time()
    try:
        params = one(cur, "SELECT import_model(%s, %s)", (name, directory))[0]
    finally:
        secs = time.time() - t0
        done.set()
        th.join()
    after = status(pid)
    ticks = cpu_ticks(pid) - ticks0
    notices = [n.strip() for n in conn.notices]
    conn.close()
    return {"secs": secs, "params": params, "notices": notices, "hwm0": before["VmHWM"], "hwm": after["VmHWM"],
            "rss0": before["VmRSS"], "ticks": ticks, "anon0": before.get("RssAnon", 0), "peaks": peaks, "timeline": timeline}


def load_measured(acur, name, shared, datadir):
    """A fresh backend's first generate() on name, the model's shared file removed first (so
    this backend builds it): seconds, VmHWM before and after, the maxima of RssAnon / RssFile /
    RssShmem sampled every 10 ms, and the packed weights' bytes (the shared file's size; None
    with sharing off, where the backend packs the same weights privately)."""
    acur.execute("SELECT file, name FROM transformer_weight_files() WHERE kind = 'weights'")
    for f, n in acur.fetchall():
        if n == name:
            os.remove(os.path.join(datadir, one(acur, "SHOW transformer.weight_cache_dir")[0], f))
    conn = connect()
    cur = conn.cursor()
    cur.execute("SET client_min_messages = warning; LOAD 'transformer'; SET transformer.shared_weights = %s"
                % ("on" if shared else "off"))
    pid = one(cur, "SELECT pg_backend_pid()")[0]
    before = status(pid)
    peaks = {"RssAnon": 0, "RssFile": 0, "RssShmem": 0, "VmRSS": 0}
    done = threading.Event()

    def poll():
        while not done.is_set():
            try:
                st = status(pid)
            except OSError:
                break
            for k in peaks:
                peaks[k] = max(peaks[k], st.get(k, 0))
            time.sleep(0.01)
    th = threading.Thread(target=poll)
    th.start()
    t0 = time.time()
    try:
        cur.execute(gen_sql(name, "Hallo.", 1, 1))
    finally:
        secs = time.time() - t0
        done.set()
        th.join()
    after = status(pid)
    packed = one(acur, "SELECT sum(bytes)::bigint FROM transformer_weight_files() WHERE kind = 'weights' AND name = %s",
                 (name,))[0] if shared else None
    conn.close()
    return {"secs": secs, "hwm0": before["VmHWM"], "hwm": after["VmHWM"], "rss0": before["VmRSS"],
            "anon0": before.get("RssAnon", 0), "peaks": peaks, "packed": packed or 0}


def tensors_md5(cur, name):
    """(md5 of every tensor's name and bytes, tensors, rows, bytes); since
    0.6.0 a tensor over transformer.tensor_part_size spans rows (part 0, 1, ...)."""
    parts = one(cur, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'transformer_tensors'::regclass "
                     "AND attname = 'part' AND NOT attisdropped")[0]
    order = "name, part" if parts else "name"
    return one(cur, "SELECT md5(string_agg(name || ':' || md5(data), ',' ORDER BY %s)), count(DISTINCT name), "
                    "count(*), sum(octet_length(data)) FROM transformer_tensors WHERE model = %%s" % order, (name,))


def build_info():
    lib = subprocess.run(["pg_config", "--pkglibdir"], capture_output=True, text=True).stdout.strip()
    st = os.stat(os.path.join(lib, "transformer.so"))
    return "%s/transformer.so of %s (%d bytes)" % (
        lib, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(st.st_mtime)), st.st_size)


def gen_sql(model, text, beam, max_new):
    return ("SELECT generate(%s, %s, beam_size => %d, source_lang => %s, target_lang => %s, max_new_tokens => %d)"
            % (bl.quote(text), bl.quote(model), beam, bl.quote(SRC_LANG), bl.quote(TGT_LANG), max_new))


def translate_sql(model, texts, beam, max_new):
    return ("SELECT translate(ARRAY[%s], %s, beam_size => %d, source_lang => %s, target_lang => %s, "
            "max_new_tokens => %d)" % (",".join(bl.quote(t) for t in texts), bl.quote(model), beam,
                                       bl.quote(SRC_LANG), bl.quote(TGT_LANG), max_new))


def mb(x):
    return x / 1e6


# ------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/transformer_bench_nllb600m",
                    help="the safetensors checkpoint; pytorch_model.bin goes to DIR_bin")
    ap.add_argument("-n", type=int, default=20, help="sentences timed one at a time")
    ap.add_argument("--batch", type=int, default=32, help="sentences of the batch form")
    ap.add_argument("--batch-reps", type=int, default=2, help="runs of each batch measurement")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--quick", action="store_true", help="-n 4 --batch 8 --batch-reps 1")
    ap.add_argument("--parts", default="build,import,load,speed,batch")
    ap.add_argument("--wait-quiet", type=float, default=20, help="minutes to wait for other processes to stop")
    args = ap.parse_args()
    if args.quick:
        args.n, args.batch, args.batch_reps = min(args.n, 4), min(args.batch, 8), 1
    parts = set(args.parts.split(","))
    torch.set_num_threads(1)
    st_dir, bin_dir = args.dir.rstrip("/"), args.dir.rstrip("/") + "_bin"
    T = args.max_new_tokens

    build(st_dir, bin_dir)
    st_bytes = os.path.getsize(os.path.join(st_dir, "model.safetensors"))
    bin_bytes = os.path.getsize(os.path.join(bin_dir, "pytorch_model.bin"))
    largest = CONFIG["vocab_size"] * CONFIG["d_model"] * 4
    if not parts - {"build"}:
        return

    admin = connect()
    acur = admin.cursor()
    acur.execute("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS transformer; LOAD 'transformer'")
    build0 = build_info()
    acur.execute("SELECT extversion FROM pg_extension WHERE extname = 'transformer'")
    log("extension %s, %s; transformer.tensor_part_size %s" % (
        acur.fetchone()[0], build0,
        one(acur, "SELECT coalesce(current_setting('transformer.tensor_part_size', true), '(none)')")[0]))

    if "import" in parts:
        log("waiting until no other process uses the CPU (up to %g minutes)" % args.wait_quiet)
        busy_import = wait_quiet(args.wait_quiet)
        meter = LoadMeter(one(acur, "SELECT pg_backend_pid()")[0])
        log("\nimport_model() memory, one fresh backend per import (largest tensor: model.shared.weight "
            "256206 x 1024 x 4 = %.1f MB)" % mb(largest))
        sums = {}
        for label, d, name in (("pytorch_model.bin", bin_dir, MODEL + "_bin"), ("model.safetensors", st_dir, MODEL)):
            for n in (MODEL, MODEL + "_bin", MODEL_I8):
                acur.execute("SELECT drop_model(%s)", (n,))
            acur.execute("CHECKPOINT")
            r = import_measured(d, name)
            meter.extra += r["ticks"]
            fbytes = bin_bytes if label.endswith(".bin") else st_bytes
            grew = r["hwm"] - r["hwm0"]
            p = r["peaks"]
            log("  %-17s %.1f MB file, %d parameters: %.1f s (%.0f MB/s); %d NOTICEs%s" % (
                label, mb(fbytes), r["params"], r["secs"], mb(fbytes) / r["secs"], len(r["notices"]),
                (", first: %s; last: %s" % (r["notices"][0], r["notices"][-1])) if r["notices"] else ""))
            log("    VmHWM %.1f MB before, %.1f MB after: +%.1f MB = %.2fx the largest tensor; "
                "peak / largest tensor %.2fx" % (mb(r["hwm0"]), mb(r["hwm"]), mb(grew), grew / largest,
                                                  r["hwm"] / largest))
            log("    during it (sampled every 20 ms): RssAnon max %.1f MB (%.1f before), RssFile max %.1f MB, "
                "RssShmem max %.1f MB" % (mb(p["RssAnon"]), mb(r["anon0"]), mb(p["RssFile"]), mb(p["RssShmem"])))
            tl = r["timeline"]
            if tl:
                step = max(1, len(tl) // 12)
                log("    RSS / anon over time (s: MB): " + ", ".join(
                    "%.1f: %.0f/%.0f" % (t, mb(v), mb(a)) for t, v, a in tl[::step]))
            sums[label] = tensors_md5(acur, name)
        a, b = sums["pytorch_model.bin"], sums["model.safetensors"]
        log("  the two imports' tensors: %d and %d tensors in %d and %d rows, %.1f and %.1f MB stored, "
            "identical bytes: %s" % (a[1], b[1], a[2], b[2], mb(a[3]), mb(b[3]), "yes" if a[0] == b[0] else "NO"))
        acur.execute("SELECT drop_model(%s)", (MODEL + "_bin",))
        log("  other processes used %.2f cores during the imports%s" % (
            meter.others(), "; busy before: " + ", ".join(busy_import) if busy_import else ""))
    if not ({"load", "speed", "batch"} & parts):
        return

    have = one(acur, "SELECT count(*) FROM transformer_models WHERE name = %s", (MODEL,))[0]
    if not have:
        t0 = time.time()
        acur.execute("SET client_min_messages = warning; SELECT import_model(%s, %s)", (MODEL, st_dir))
        log("imported %s in %.1f s" % (MODEL, time.time() - t0))
    if "load" in parts:
        datadir = one(acur, "SHOW data_directory")[0]
        log("\nthe first load of %s fp32 in a fresh backend (its shared file removed first), twice each; "
            "peak = VmHWM after - VmHWM before" % MODEL)
        wait_quiet(args.wait_quiet)
        packed = 0
        for shared in (True, False):
            for rep in range(2):
                acur.execute("CHECKPOINT")
                r = load_measured(acur, MODEL, shared, datadir)
                packed = r["packed"] = r["packed"] or packed
                grew = r["hwm"] - r["hwm0"]
                p = r["peaks"]
                log("  shared weights %-3s: %.1f s; packed %.1f MB; peak +%.1f MB = %.2fx the packed size; "
                    "RssAnon max %.1f MB (%.1f before), RssFile max %.1f MB, RssShmem max %.1f MB" % (
                        "on" if shared else "off", r["secs"], mb(r["packed"]), mb(grew),
                        grew / r["packed"] if r["packed"] else float("nan"), mb(p["RssAnon"]), mb(r["anon0"]),
                        mb(p["RssFile"]), mb(p["RssShmem"])))
    if not ({"speed", "batch"} & parts):
        return
    t0 = time.time()
    acur.execute("SELECT drop_model(%s); SELECT quantize_model(%s, %s)", (MODEL_I8, MODEL, MODEL_I8))
    log("quantize_model(%s, %s): %.1f s" % (MODEL, MODEL_I8, time.time() - t0))
    acur.execute("CHECKPOINT")

    # PyTorch: the same file, the same source ids
    tok = nt.from_pretrained(st_dir)
    tok.src_lang = SRC_LANG
    forced = tok.lang_id(TGT_LANG)
    sents = bl.sentences("de", max(args.n, args.batch if "batch" in parts else 0))
    srcs = [tok.encode(s) for s in sents]
    t0 = time.time()
    model = load_model(st_dir)
    gen = m2m.generation_config(st_dir, model.cfg)
    fp = NllbDecoder(model, gen, forced, T)
    log("PyTorch: model loaded in %.1f s" % (time.time() - t0))

    conn = connect()
    cur = conn.cursor()
    cur.execute("SET transformer.threads = 1; SET client_min_messages = warning")
    cur.execute(TIMED)
    pid = one(cur, "SELECT pg_backend_pid()")[0]
    # the source ids: SQL's tokenizer gives the same pieces
    same_src = 0
    for s, ids in zip(sents, srcs):
        sql = one(cur, "SELECT tokenize(%s, %s)", (s, MODEL + "/source"))[0]
        same_src += [tok.lang_id(SRC_LANG)] + sql + [2] == ids
    log("source ids ([deu_Latn] pieces </s>): NllbTokenizer (tools/nllb_tokenizer.py) = SQL tokenize() + "
        "language + </s>: %d/%d" % (same_src, len(sents)))
    # our incremental decoder against the port's generate() (no cache: short)
    check = 6
    for beam in (1, 4):
        ref = m2m.generate(model, srcs[0], gen, num_beams=beam, max_new_tokens=check, forced_bos_token_id=forced)
        short = NllbDecoder(model, gen, forced, check)
        mine = short.greedy(srcs[0]) if beam == 1 else short.beam([srcs[0]], 4)[0]
        log("PyTorch incremental decoder = tools/m2m100_torch.generate(), %s, %d tokens: %s" % (
            "greedy" if beam == 1 else "beam 4", check, "yes" if mine == ref else "NO: %s vs %s" % (mine, ref)))
    t0 = time.time()
    q8 = NllbDecoder.quantized(model, gen, forced, T)
    log("PyTorch: quantize_dynamic in %.1f s" % (time.time() - t0))
    hwm = status(pid)["VmHWM"]
    for name in (MODEL, MODEL_I8):        # cold loads, then warm
        t0 = time.time()
        cur.execute(gen_sql(name, "Hallo.", 1, 1))
        st = status(pid)
        log("first generate() on %s in this backend (load and pack): %.1f s; VmHWM %.1f MB -> %.1f MB, "
            "then VmRSS %.1f MB (RssAnon %.1f, RssFile %.1f)" % (name, time.time() - t0, mb(hwm), mb(st["VmHWM"]),
                                                                 mb(st["VmRSS"]), mb(st["RssAnon"]), mb(st["RssFile"])))
        hwm = st["VmHWM"]
    st = status(pid)
    log("the backend with both models loaded: VmHWM %.1f MB, VmRSS %.1f MB (RssAnon %.1f, RssFile %.1f, "
        "RssShmem %.1f)" % (mb(st["VmHWM"]), mb(st["VmRSS"]), mb(st["RssAnon"]), mb(st["RssFile"]), mb(st["RssShmem"])))
    machine(cur, pid)

    log("\nwaiting until no other process uses the CPU (up to %g minutes)" % args.wait_quiet)
    busy = wait_quiet(args.wait_quiet, exclude=[pid])
    rows = []

    if "speed" in parts:
        meter = LoadMeter(pid)
        faults = major_faults(pid)
        sides = ("sql32", "torch32", "sql8", "torch8")
        t = {b: {s: [] for s in sides} for b in (1, 4)}
        same = {b: {"fp32": 0, "int8": 0} for b in (1, 4)}
        int8_vs_fp32 = {1: 0, 4: 0}
        lengths = []
        for i, src in enumerate(srcs[: args.n]):
            for beam in (1, 4):
                ids = {}
                for side in sides:
                    if side.startswith("sql"):
                        secs, out = one(cur, "SELECT * FROM pg_temp.timed_ids(%s)",
                                        (gen_sql(MODEL if side == "sql32" else MODEL_I8, sents[i], beam, T),))
                    else:
                        dec = fp if side == "torch32" else q8
                        t0 = time.perf_counter()
                        out = dec.greedy(src) if beam == 1 else dec.beam([src], 4)[0]
                        secs = time.perf_counter() - t0
                    t[beam][side].append(secs)
                    ids[side] = list(out)
                same[beam]["fp32"] += ids["sql32"] == ids["torch32"]
                same[beam]["int8"] += ids["sql8"] == ids["torch8"]
                int8_vs_fp32[beam] += ids["sql8"] == ids["sql32"]
                lengths.append(len(ids["sql32"]))
            log("  sentence %d/%d: %d source tokens; greedy %s, beam 4 %s (s: SQL fp32, PyTorch fp32, SQL int8, "
                "PyTorch int8)" % (i + 1, args.n, len(src), " ".join("%.2f" % t[1][s][-1] for s in sides),
                                   " ".join("%.2f" % t[4][s][-1] for s in sides)))
        load = meter.others()
        n = args.n
        log("\nper sentence, %d sentences, %d generated tokens each (max_new_tokens; lengths %d-%d), one thread "
            "each side; other processes used %.2f cores meanwhile" % (n, T, min(lengths), max(lengths), load))
        for beam in (1, 4):
            for dtype, ours, theirs in (("fp32", "sql32", "torch32"), ("int8", "sql8", "torch8")):
                r = [a / b for a, b in zip(t[beam][theirs], t[beam][ours])]
                rows.append(("%s, %s, per sentence" % ("greedy" if beam == 1 else "beam 4", dtype),
                             statistics.mean(t[beam][theirs]) * 1e3, statistics.mean(t[beam][ours]) * 1e3,
                             statistics.median(r), min(r), max(r), "%d/%d" % (same[beam][dtype], n)))
        log("  int8 ids = fp32 ids (SQL): greedy %d/%d, beam 4 %d/%d; the backend's major page faults meanwhile: %d"
            % (int8_vs_fp32[1], n, int8_vs_fp32[4], n, major_faults(pid) - faults))

    if "batch" in parts:
        meter = LoadMeter(pid)
        B = args.batch
        for beam in (1, 4):
            for dtype, name, dec in (("fp32", MODEL, fp), ("int8", MODEL_I8, q8)):
                sql_t, torch_t = [], []
                for _ in range(args.batch_reps):         # the sides alternate
                    secs, texts = one(cur, "SELECT * FROM pg_temp.timed_texts(%s)",
                                      (translate_sql(name, sents[:B], beam, T),))
                    sql_t.append(secs)
                    t0 = time.perf_counter()
                    out = dec.batch_greedy(srcs[:B]) if beam == 1 else dec.beam(srcs[:B], 4)
                    torch_t.append(time.perf_counter() - t0)
                ref = [tok.decode(o, skip_special_tokens=True) for o in out]
                ok = sum(a == b for a, b in zip(texts, ref))
                r = [a / b for a, b in zip(torch_t, sql_t)]
                rows.append(("%s, %s, batch of %d" % ("greedy" if beam == 1 else "beam 4", dtype, B),
                             statistics.median(torch_t) / B * 1e3, statistics.median(sql_t) / B * 1e3,
                             statistics.median(torch_t) / statistics.median(sql_t), min(r), max(r),
                             "%d/%d" % (ok, B)))
                log("  batch %d, %s, %s: SQL translate(text[]) %s s, PyTorch batched %s s" % (
                    B, "greedy" if beam == 1 else "beam 4", dtype, " ".join("%.1f" % x for x in sql_t),
                    " ".join("%.1f" % x for x in torch_t)))
        log("  other processes used %.2f cores during the batch part" % meter.others())

    log("\n| decoding | PyTorch ms/sentence | ours ms/sentence | ratio PyTorch / ours | same output |")
    log("|---|---|---|---|---|")
    for name, pt, us, r, lo, hi, same_ in rows:
        rng = " [%.2f, %.2f]" % (lo, hi) if lo is not None else ""
        log("| %s | %.0f | %.0f | **%.2fx**%s | %s |" % (name, pt, us, r, rng, same_))
    log("(per sentence: mean times, median [min, max] of the per-sentence ratios; batch: medians of %d runs, "
        "the ratio of the medians [min, max of the runs' ratios])" % args.batch_reps)
    if busy:
        log("timed under load: %s" % ", ".join(busy))
    if build_info() != build0:
        log("WARNING: the extension was reinstalled during the run: now %s" % build_info())
    conn.close()
    admin.close()


if __name__ == "__main__":
    main()
