#!/usr/bin/python3
"""Ours against CTranslate2 at its best: bench/ctranslate2.py once per
CTranslate2 setting, and per row the setting that was fastest (issue 40).

Each setting is a separate run of bench/ctranslate2.py, because CTranslate2
reads its ISA, and MKL its code paths, when the library loads.  Within a
run the two sides alternate sentence by sentence (batch by batch), so each
row's ratio is measured side by side; per row the lowest ratio over the
settings (CTranslate2's fastest) is the headline.

Settings, natively:
  - CTranslate2's own choice of ISA (it picks AVX2 on AVX-512 CPUs);
  - CT2_FORCE_CPU_ISA=AVX512 (its AVX-512 kernels);
  - when the installed CTranslate2 links MKL: the same two with MKL
    (CT2_USE_MKL=1) and with oneDNN (CT2_USE_MKL=0), and MKL on its Intel
    code paths on AMD CPUs (MKL_DEBUG_CPU_TYPE=5); without MKL in the
    build, those rows say so.
The compute types are the converter's int8 weights run as int8_float32 (on
CPU, CTranslate2's int8 is int8_float32) and float32.
With --isa avx2: one setting, every side held to AVX2 (bench/ctranslate2.py
--isa avx2).

    pg_virtualenv -t bench/ct2_best.py [--isa native|avx2] [--out DIR] [bench/ctranslate2.py's options ...]
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--isa", choices=("native", "avx2"), default="native")
    ap.add_argument("--out", default="/tmp/transformer_ct2_best")
    args, argv = ap.parse_known_args()       # the rest goes to bench/ctranslate2.py
    isa, out = args.isa, args.out
    os.makedirs(out, exist_ok=True)
    probe = subprocess.run(["/usr/bin/python3", "-c", "import ctranslate2, os; print(os.path.dirname(ctranslate2.__file__))"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        print("CTranslate2 is not installed: build it from its repository (see bench/README.md); skipped")
        return 0
    libs = subprocess.run("ldd %s/*.so* 2>/dev/null" % probe.stdout.strip(), shell=True, capture_output=True,
                          text=True).stdout + subprocess.run(
        "ldd $(ldconfig -p | awk '/libctranslate2.so/ {print $NF; exit}') 2>/dev/null", shell=True,
        capture_output=True, text=True).stdout
    has_mkl = "mkl" in libs
    if isa == "avx2":
        settings = [("held to AVX2", {}, ["--isa", "avx2"])]
    else:
        settings = [("its ISA choice", {}, []), ("AVX-512 forced", {}, ["--ct2-isa", "AVX512"])]
        if has_mkl:
            settings = [(name + ", " + lib, dict(env, CT2_USE_MKL=flag), args)
                        for name, env, args in settings for lib, flag in (("MKL", "1"), ("oneDNN", "0"))]
            settings += [("AVX-512 forced, MKL on its Intel paths", {"CT2_USE_MKL": "1", "MKL_DEBUG_CPU_TYPE": "5"},
                          ["--ct2-isa", "AVX512"])]
    print("CTranslate2 settings: %s%s" % ("; ".join(s[0] for s in settings),
                                          "" if has_mkl or isa == "avx2" else
                                          " (this CTranslate2 does not link MKL: its MKL settings are not measured)"),
          flush=True)
    runs = []
    for k, (name, env, args) in enumerate(settings):
        path = os.path.join(out, "run%d.json" % k)
        print("\n=== setting %d: %s" % (k + 1, name), flush=True)
        rc = subprocess.call(["/usr/bin/python3", os.path.join(HERE, "ctranslate2.py")] + args + argv
                             + ["--json", path], env=dict(os.environ, **env))
        if rc != 0 or not os.path.exists(path):
            sys.exit("bench/ctranslate2.py failed for setting %r" % name)
        runs.append((name, json.load(open(path))))
    key = lambda r: (r["model"], r["decoding"], r["precision"], r["form"])
    rows = {}
    for name, run in runs:
        for r in run["rows"]:
            rows.setdefault(key(r), []).append((name, r))
    print("\n| model | decoding | precision | form | ours ms/sentence | CTranslate2's fastest: setting | its ms/sentence "
          "| **fastest CTranslate2 / ours** | every setting's ratio | PyTorch fp32 / ours |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k, per in rows.items():
        name, best = min(per, key=lambda x: x[1]["ratio"])
        print("| %s | %s | %s | %s | %.1f | %s | %.1f | **%.2fx** | %s | %s |" % (
            k[0], k[1], k[2], k[3], best["ours_ms"], name, best["ct2_ms"], best["ratio"],
            "; ".join("%s %.2fx" % (n, r["ratio"]) for n, r in per),
            "%.2fx" % best["torch_ratio"] if best.get("torch_ratio") else "-"))
    print("(ratios: CTranslate2's time over ours, each measured side by side in its own run; %s)"
          % ("both sides held to AVX2" if isa == "avx2" else "native"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
