"""Shared by the bench/ scripts: psql, in-server timing, the Multi30k test
sentences, the transformer-base model with random weights, statistics, the
CPU time of other processes."""
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import marian_torch as mt  # noqa: E402

DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")
BUNDLED = os.path.join(ROOT, "models", "multi30k_de_en")
BASE_SPM = os.path.join(DATA, "spm", "opus-mt-en-mg")
BASE_DIR = "/tmp/transformer_base_random"


def psql(sql):
    return subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"],
                          input=sql, capture_output=True, text=True, check=True).stdout.strip()


class Session:
    """One psql session kept open, so measurements on both sides can
    alternate (the speed of a shared machine drifts over minutes)."""

    def __init__(self):
        self.p = subprocess.Popen(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def query(self, sql):
        self.p.stdin.write(sql + "\n\\echo __end__\n")
        self.p.stdin.flush()
        out = []
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("psql exited")
            if line.rstrip("\n") == "__end__":
                return "\n".join(out)
            out.append(line.rstrip("\n"))

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def quote(s):
    return "'" + s.replace("'", "''") + "'"


def sentences(lang, n, split="test_2016_flickr"):
    path = os.path.join(DATA, "multi30k", "%s.%s.gz" % (split, lang))
    if not os.path.exists(path):
        sys.exit("benchmark skipped: %s is missing (Multi30k, in ../shared/data beside the clone)" % path)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [l.rstrip("\n") for l in f][:n]


# In-server timing: the median of reps evaluations of a query, in seconds,
# so neither psql nor the client round trip is in the figure.
TIMER = """
CREATE OR REPLACE FUNCTION pg_temp.bench_median(query text, reps int) RETURNS float8
LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; ts float8[] := '{}';
BEGIN
  FOR i IN 1..reps LOOP
    t0 := clock_timestamp();
    EXECUTE query;
    ts := ts || extract(epoch FROM clock_timestamp() - t0)::float8;
  END LOOP;
  RETURN (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY x) FROM unnest(ts) x);
END $$;
"""


def summary(xs):
    return statistics.median(xs), min(xs), max(xs)


def fmt_ratio(xs):
    m, lo, hi = summary(xs)
    return "%.2fx [%.2f, %.2f]" % (m, lo, hi)


def make_base_model(dtype="F32"):
    """transformer-base with OPUS-MT en-mg's configuration and tokenizers and
    random weights (N(0, 0.02), as Marian initializes); returns the
    directory and the parameter count."""
    import torch
    with open(os.path.join(BASE_SPM, "config.json")) as f:
        cfg = json.load(f)
    torch.manual_seed(0)
    model = mt.Marian(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
        for n, p in model.named_parameters():
            if "layer_norm" in n and n.endswith("weight"):
                p.fill_(1.0)
    os.makedirs(BASE_DIR, exist_ok=True)
    mt.save_safetensors(os.path.join(BASE_DIR, "model.safetensors"),
                        mt.marian_state(model, mt.DTYPES[dtype]))
    shutil.copy(os.path.join(BASE_SPM, "config.json"), BASE_DIR)
    for f in ("source.spm", "target.spm", "vocab.json"):
        shutil.copy(os.path.join(BASE_SPM, f), BASE_DIR)
    return BASE_DIR, sum(p.numel() for p in model.parameters())


def torch_threads_and_blas():
    """One thread, and OpenBLAS's kernels for this CPU: Debian's OpenBLAS
    0.3.21 does not know recent Xeons and falls back to generic SSE3 ones,
    which would make the baseline unfairly slow.  The extension makes the
    same choice (tf_blas_init)."""
    import torch
    torch.set_num_threads(1)
    return os.environ.get("OPENBLAS_CORETYPE")


def reexec_with_coretype():
    """Re-run this script with OPENBLAS_CORETYPE set before torch loads."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return
    flags = open("/proc/cpuinfo").read()
    core = "SkylakeX" if " avx512f " in flags else ("Haswell" if " avx2 " in flags else None)
    if core:
        os.environ["OPENBLAS_CORETYPE"] = core
        os.execv(sys.executable, [sys.executable] + sys.argv)


# ------------------------------------------------------------ the machine's load
# (bench/nllb.py and bench/ctranslate2.py have their own copies of these)

def cpu_ticks(pid="self"):
    with open("/proc/%s/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])         # utime + stime (all threads)


def busy_ticks():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]                          # all but idle and iowait


def other_processes(seconds=3.0, exclude=()):
    """Processes other than ours using more than 10% of a core over a few seconds."""
    def sample():
        out = {}
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    with open("/proc/%s/stat" % p) as f:
                        s = f.read()
                    out[p] = (s[s.index("(") + 1: s.rindex(")")], cpu_ticks(p))
                except (OSError, ValueError, IndexError):
                    pass
        return out
    hz = os.sysconf("SC_CLK_TCK")
    a = sample()
    time.sleep(seconds)
    b = sample()
    mine = {str(os.getpid())} | {str(x) for x in exclude}
    busy = []
    for p, (name, t) in b.items():
        if p in mine or p not in a:
            continue
        share = (t - a[p][1]) / hz / seconds
        if share > 0.10:
            busy.append("%s (%s) %.0f%%" % (name, p, 100 * share))
    return busy


class LoadMeter:
    """CPU time of everything but this process and the given ones (a
    backend, a child process), since creation, in cores (0: the machine
    was ours)."""

    def __init__(self, *pids):
        self.pids = pids
        self.hz = os.sysconf("SC_CLK_TCK")
        self.extra = 0                  # ticks of our processes that have exited since
        self.t0, self.busy0, self.own0 = time.time(), busy_ticks(), self.own()

    def own(self):
        return cpu_ticks() + sum(cpu_ticks(p) for p in self.pids)

    def others(self):
        wall = time.time() - self.t0
        mine = self.own() - self.own0 + self.extra
        return max(0.0, (busy_ticks() - self.busy0 - mine) / self.hz / wall)
