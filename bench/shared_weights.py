#!/usr/bin/python3
"""One copy of the weights for every connection (issue 15): cold start,
memory of 8 connections, pgbench -C, warm speed; shared files on vs off.

For the bundled model (fp16) and transformer-base (random weights, fp32,
and its int8 copy from quantize_model()):
- cold start: a new connection's library load (LOAD, as
  session_preload_libraries does) and first translate() (greedy, one
  sentence; the times psql reports, so connecting is not counted), against
  the mean of the same call twice more in that connection, medians of N
  connections; target load + first <= 1.2 x warm + 10 ms;
- memory: 8 connections that each translated, held open; the sum of their
  proportional set sizes (Pss of /proc/PID/smaps_rollup, needs root or the
  server's user) against one copy of the weights (the shared file's size,
  or what the backend holds when off); target <= 1.5x;
- pgbench -C -c 8 -T T: a new connection per translate(), transactions per
  second;
- warm speed: translate() of the same sentences in a session with sharing
  on and one with it off, alternating, medians of 3 each: time off / on.
Every "off" runs with transformer.shared_weights = off in the session.

Usage: pg_virtualenv bench/shared_weights.py [-n N] [--pgbench-seconds T] [--cold-only]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

import benchlib as bl

SENTENCE = {"de": "Ein Mann fährt Fahrrad auf der Straße.", "en": "A man rides a bicycle down the street."}


def timed_session(model, lang, shared):
    """(library load, first, warm) ms of a new connection: LOAD, then translate() three times."""
    s = bl.quote(SENTENCE[lang])
    # the library's load timed apart (LOAD, as session_preload_libraries does it), then the first call
    script = ("\\timing on\nLOAD 'transformer';\nSET transformer.shared_weights = %s;\nSELECT translate(%s, %s, 1);\n"
              "SELECT translate(%s, %s, 1);\nSELECT translate(%s, %s, 1);\n"
              % ("on" if shared else "off", s, bl.quote(model), s, bl.quote(model), s, bl.quote(model)))
    out = subprocess.run(["psql", "-X", "-q", "-A", "-t"], input=script, capture_output=True, text=True,
                         check=True).stdout
    ts = [float(x) for x in re.findall(r"Time: ([\d.]+) ms", out)]
    return ts[0], ts[2], statistics.mean(ts[3:])


def pss_of(pids):
    total = 0
    for pid in pids:
        with open("/proc/%s/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
    return total


def memory(model, lang, shared, conns=8):
    sessions = [bl.Session() for _ in range(conns)]
    base = []
    for s in sessions:
        s.query("SET transformer.shared_weights = %s;" % ("on" if shared else "off"))
        base.append(s.query("SELECT pg_backend_pid();").strip())
    before = pss_of(base)
    for s in sessions:
        s.query("SELECT length(translate(%s, %s, 1));" % (bl.quote(SENTENCE[lang]), bl.quote(model)))
    after = pss_of(base)
    held = int(sessions[0].query(
        "SELECT coalesce(sum(total_bytes), 0) FROM pg_backend_memory_contexts "
        "WHERE name = 'transformer cache entry' AND ident = %s;" % bl.quote(model)) or 0)
    f = sessions[0].query("SELECT coalesce(max(bytes), 0) FROM transformer_weight_files() "
                          "WHERE kind = 'weights' AND name = %s AND state = 'current';" % bl.quote(model))
    tok = sessions[0].query("SELECT coalesce(sum(bytes), 0) FROM transformer_weight_files() "
                            "WHERE kind = 'tokenizer' AND state = 'current' AND name IN "
                            "(SELECT source_tokenizer FROM transformer_models WHERE name = %s UNION "
                            "SELECT target_tokenizer FROM transformer_models WHERE name = %s);"
                            % (bl.quote(model), bl.quote(model)))
    for s in sessions:
        s.close()
    return after - before, int(f or 0), int(tok or 0)


def pgbench(model, lang, shared, seconds):
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write("SELECT translate(%s, %s, 1);\n" % (bl.quote(SENTENCE[lang]), bl.quote(model)))
        path = f.name
    env = dict(os.environ, PGOPTIONS="-c transformer.shared_weights=%s" % ("on" if shared else "off"))
    out = subprocess.run(["/usr/lib/postgresql/15/bin/pgbench", "-n", "-C", "-c", "8", "-j", "2", "-T", str(seconds),
                          "-f", path], capture_output=True, text=True, env=env, check=True).stdout
    os.unlink(path)
    return float(re.search(r"tps = ([\d.]+)", out).group(1))


def warm_compare(model, lang, n):
    """Warm translate() of n sentences, sharing on and off in two sessions,
    alternating sentence by sentence: the per-sentence ratio off/on."""
    sents = bl.sentences(lang, n)
    on, off = bl.Session(), bl.Session()
    for sess, flag in ((on, "on"), (off, "off")):
        sess.query("SET transformer.shared_weights = %s;" % flag)
        sess.query(bl.TIMER)
        sess.query("SELECT length(translate('a', %s, 1));" % bl.quote(model))
    ratios = []
    for s in sents:
        q = bl.quote("SELECT translate(%s, %s, 1)" % (bl.quote(s), bl.quote(model)))
        t_on = float(on.query("SELECT pg_temp.bench_median(%s, 3);" % q))
        t_off = float(off.query("SELECT pg_temp.bench_median(%s, 3);" % q))
        ratios.append(t_off / t_on)
    on.close()
    off.close()
    return ratios


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=10, help="new connections per case")
    ap.add_argument("--pgbench-seconds", type=int, default=15)
    ap.add_argument("--warm", type=int, default=20, help="sentences of the warm comparison")
    ap.add_argument("--cold-only", action="store_true", help="the cold start alone")
    args = ap.parse_args()
    directory, _ = bl.make_base_model("F32")
    bl.psql("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS transformer;"
            "SELECT drop_model('multi30k_de_en'); SELECT import_model('multi30k_de_en');"
            "SELECT drop_model('base_random'); SELECT drop_model('base_int8');"
            "SELECT import_model('base_random', %s); SELECT quantize_model('base_random', 'base_int8');"
            % bl.quote(directory))
    models = [("multi30k_de_en", "de", "bundled, fp16"), ("base_random", "en", "transformer-base, fp32"),
              ("base_int8", "en", "transformer-base, int8")]
    for model, lang, label in models:
        timed_session(model, lang, True)       # the file exists from here on
        print("%s (%s)" % (model, label))
        for shared in (False, True):
            loads, firsts, warms = zip(*[timed_session(model, lang, shared) for _ in range(args.n)])
            load, first, warm = statistics.median(loads), statistics.median(firsts), statistics.median(warms)
            both = statistics.median([a + b for a, b in zip(loads, firsts)])
            print("  shared %-3s cold start: library load %.1f ms, first call %.1f ms (together %.1f ms), warm %.1f ms: "
                  "load + first = %.2f x warm + %.1f ms (target <= 1.2 x warm + 10 ms: %s)"
                  % ("on" if shared else "off", load, first, both, warm, both / warm, both - warm,
                     "met" if both <= 1.2 * warm + 10 else "not met"))
        if args.cold_only:
            continue
        for shared in (False, True):
            pss, weights, tokenizers = memory(model, lang, shared)
            print("  shared %-3s memory: 8 connections' Pss grew by %.1f MB; one copy of the weights %.1f MB: %.2fx%s; "
                  "of the weights and tokenizers (%.1f MB more): %.2fx"
                  % ("on" if shared else "off", pss / 1e6, weights / 1e6, pss / weights,
                     " (target <= 1.5x)" if shared else "", tokenizers / 1e6, pss / (weights + tokenizers)))
        tps = [pgbench(model, lang, shared, args.pgbench_seconds) for shared in (False, True)]
        print("  pgbench -C -c 8: %.1f tps off, %.1f tps on: %.2fx" % (tps[0], tps[1], tps[1] / tps[0]))
        print("  warm translate(), %d sentences, time off / time on per sentence: %s (1: no change)"
              % (args.warm, bl.fmt_ratio(warm_compare(model, lang, args.warm))))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
