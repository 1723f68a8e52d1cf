#!/usr/bin/python3
"""The summary of test/sanitize_server/run.sh: regression files and pgTAP
tests passed/failed, and the sanitizers' reports, deduplicated.

    summarize.py WORK SECONDS

WORK holds results/ (regress.out, pgtap/*.out, pgtap/timeline.tsv),
san/asan.PID (one file per process that reported), server.log and tree/.
Exit status 0 when every test passed (timing-only failures allowed) and the
sanitizers reported nothing, else 1.
"""
import collections
import glob
import os
import re
import sys

WORK = sys.argv[1]
SECONDS = int(sys.argv[2]) if len(sys.argv) > 2 else 0
RES = os.path.join(WORK, "results")
TREE = os.path.join(WORK, "tree")

# pgTAP tests that measure time: under the sanitizers' slowdown a failure
# there says nothing about correctness (12_cancel compares a cancelled call
# with a whole one, in the same run)
TIMING_FILES = {"12_cancel.sql"}
# failures the sanitizer itself causes (see the README of the directory,
# i.e. the comments in run.sh): pattern on "file: description"
# failures the sanitizers themselves cause, (pattern, why): none known.  (The
# shared tokenizers' fixed addresses used to lie in ASan's heap; src/pg/store/load/weight_cache.c
# now keeps them below it.)
SANITIZER_CAUSED = []


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


# ------------------------------------------------------------ pg_regress
def regress():
    out = read(os.path.join(RES, "regress.out"))
    files = []
    for m in re.finditer(r"^(?:test\s+|\s+)?(\w+)\s+\.\.\.\s+(ok|FAILED|failed \(ignored\))", out, re.M):
        files.append((m.group(1), m.group(2) == "ok"))
    diffs = read(os.path.join(TREE, "regression.diffs"))
    per_test = {}
    for block in re.split(r"^(?=diff -U3 )", diffs, flags=re.M):
        m = re.search(r"/expected/(\w+)\.out", block.split("\n", 1)[0])
        if m:
            per_test[m.group(1)] = block
    return files, per_test, out


# ------------------------------------------------------------ pgTAP
def pgtap():
    result = []
    for path in sorted(glob.glob(os.path.join(RES, "pgtap", "*.sql.out"))):
        name = os.path.basename(path)[:-4]
        out = read(path)
        plan = None
        passed, failed = 0, []
        for line in out.splitlines():
            m = re.match(r"^\s*1\.\.(\d+)", line)
            if m:
                plan = int(m.group(1))
                continue
            m = re.match(r"^\s*(not ok|ok)\s+(\d+)\s*-?\s*(.*)$", line)
            if not m:
                continue
            desc = m.group(3)
            if m.group(1) == "ok" or re.search(r"#\s*TODO", desc, re.I):
                passed += 1
            else:
                failed.append((int(m.group(2)), desc))
        seen = passed + len(failed)
        missing = (plan - seen) if plan is not None and plan > seen else 0
        ok = re.search(r"^Result: PASS", out, re.M) is not None
        errors = [l for l in out.splitlines() if re.search(r"\b(ERROR|FATAL|PANIC):|server closed the connection|Dubious|Bad plan", l)]
        result.append(dict(name=name, plan=plan, passed=passed, failed=failed, missing=missing, ok=ok, errors=errors))
    return result


def classify(name, desc):
    if name in TIMING_FILES:
        return "timing"
    key = f"{name}: {desc}"
    for pat, why in SANITIZER_CAUSED:
        if pat.search(key):
            return "sanitizer:" + why
    return "real"


# ------------------------------------------------------------ sanitizer reports
ASAN_START = re.compile(r"^==(\d+)==(ERROR|WARNING): (\w+Sanitizer)?:? ?(.*)$")
UBSAN_START = re.compile(r"^(\S+?):(\d+):(\d+): runtime error: (.*)$")
FRAME = re.compile(r"^\s+#(\d+) 0x[0-9a-f]+ (?:in (\S+) )?\s*(.*?)(?: \(BuildId: [0-9a-f]+\))?$")
OURS = re.compile(r"(/tree/src/|transformer\.so)")


def pid_apps():
    """pid -> application name, from the server log's connection lines"""
    apps = {}
    for line in read(os.path.join(WORK, "server.log")).splitlines():
        m = re.search(r"\[(\d+)\] [^:]*: LOG:  connection authorized: .*application_name=(\S+)", line)
        if m:
            apps[int(m.group(1))] = m.group(2)
    return apps


def timeline():
    spans = []
    t = read(os.path.join(RES, "regress.start")).strip(), read(os.path.join(RES, "regress.end")).strip()
    if t[0] and t[1]:
        spans.append((float(t[0]), float(t[1]), "pg_regress"))
    for line in read(os.path.join(RES, "pgtap", "timeline.tsv")).splitlines():
        name, t0, t1, _ = line.split("\t")
        spans.append((float(t0), float(t1), "pgtap/" + name))
    return spans


def reports():
    apps = pid_apps()
    spans = timeline()
    found = []
    for path in sorted(glob.glob(os.path.join(WORK, "san", "asan.*"))):
        pid = int(path.rsplit(".", 1)[1]) if path.rsplit(".", 1)[1].isdigit() else 0
        who = apps.get(pid)
        if who is None:                # a parallel worker, say: by time
            mt = os.path.getmtime(path)
            who = next((n + " (by time)" for a, b, n in spans if a <= mt <= b + 2), "unknown")
        cur = None
        for line in read(path).splitlines():
            ma, mu = ASAN_START.match(line), UBSAN_START.match(line)
            if ma or mu:
                cur = dict(pid=pid, who=who, lines=[line], frames=[], file=path)
                if ma:
                    cur["kind"] = "ASan " + re.sub(r" on address.*| 0x[0-9a-f]+.*", "", ma.group(4)).strip()
                    cur["where"] = None
                else:
                    msg = re.sub(r"0x[0-9a-f]+", "0x…", mu.group(4))
                    msg = re.sub(r"-?\d+(\.\d+)?(e[+-]?\d+)?", "N", msg)
                    cur["kind"] = "UBSan " + msg
                    cur["where"] = f"{os.path.relpath(mu.group(1), TREE) if mu.group(1).startswith('/') else mu.group(1)}:{mu.group(2)}"
                found.append(cur)
                continue
            if cur is None:
                continue
            cur["lines"].append(line)
            mf = FRAME.match(line)
            if mf and "allocated by" not in "".join(cur["lines"][-2:-1]):
                cur["frames"].append((mf.group(2) or "?", mf.group(3)))
    for r in found:
        ours = [f for f in r["frames"] if OURS.search(f[1])]
        top = ours[0] if ours else (r["frames"][0] if r["frames"] else ("?", "?"))
        loc = re.sub(r"^.*/tree/", "", top[1])
        r["ours"] = bool(ours)
        r["key"] = (r["kind"], r["where"] or f"{top[0]} {loc}")
    return found


def short(line):
    line = re.sub(r" \(BuildId: [0-9a-f]+\)", "", line)
    line = line.replace(os.path.join(WORK, "tree") + "/", "").replace(os.path.join(WORK, "root"), "")
    return re.sub(r"^(\s+#\d+) 0x[0-9a-f]+ in ", r"\1 ", line)[:170]


def excerpt(lines):
    """a report's first lines: its header, the first frames of each stack
    (up to 6, or to 2 past the last of ours), the lines between stacks"""
    out, stack = [], []

    def flush():
        if not stack:
            return
        ours = [i for i, l in enumerate(stack) if OURS.search(l)]
        n = max(6, ours[-1] + 3) if ours else 6
        n = min(n, 12)
        out.extend(short(l) for l in stack[:n])
        if len(stack) > n:
            out.append(f"    ... {len(stack) - n} more frames")
        stack.clear()

    for l in lines:
        if re.match(r"^(Shadow bytes|\s+0x[0-9a-f]+:|=>0x|SUMMARY)", l):
            break
        if FRAME.match(l):
            stack.append(l)
            continue
        flush()
        if l.strip() and not re.match(r"^=+$", l) and len(out) < 60:
            out.append(short(l))
    flush()
    return out


# ------------------------------------------------------------ server log
def server_log_notes():
    notes = []
    for line in read(os.path.join(WORK, "server.log")).splitlines():
        if "logical replication launcher" in line:     # exits with 1 at every shutdown
            continue
        if re.search(r"terminated by signal|exited with exit code [1-9]|runtime error:|AddressSanitizer|PANIC", line):
            notes.append(line)
    return notes


def main():
    bad = False
    print()
    print("=" * 72)
    print("sanitize_server summary" + (f" ({SECONDS // 60} min {SECONDS % 60} s)" if SECONDS else ""))
    print("=" * 72)

    files, diffs, regress_out = regress()
    npass = sum(1 for _, ok in files if ok)
    print(f"\npg_regress: {npass} of {len(files)} files passed, {len(files) - npass} failed")
    if not files:
        print("  (no results: see results/regress.out)")
        print("  " + "\n  ".join(regress_out.strip().splitlines()[-10:]))
        bad = True
    for name, ok in files:
        if not ok:
            bad = True
            print(f"  FAILED {name}: first lines of its diff (tree/regression.diffs):")
            body = [l for l in diffs.get(name, "").splitlines()[2:] if l[:1] in "+-@"]
            for l in body[:14]:
                print("    " + l[:160])

    tap = pgtap()
    t_pass = sum(t["passed"] for t in tap)
    t_fail = sum(len(t["failed"]) + t["missing"] for t in tap)
    f_ok = sum(1 for t in tap if t["ok"])
    print(f"\npgTAP: {f_ok} of {len(tap)} files passed; tests: {t_pass} passed, {t_fail} failed")
    timing, sancaused = [], []
    for t in tap:
        if t["ok"]:
            continue
        print(f"  {t['name']}: {t['passed']} passed, {len(t['failed'])} failed"
              + (f", {t['missing']} not run (planned {t['plan']})" if t["missing"] else "")
              + ("" if t["plan"] is not None else ", no plan"))
        for n, desc in t["failed"]:
            c = classify(t["name"], desc)
            tag = {"timing": "timing-only", "real": "FAILED"}.get(c, "sanitizer-caused")
            print(f"    {tag}: {n} - {desc[:150]}")
            if c == "timing":
                timing.append((t["name"], n))
            elif c.startswith("sanitizer:"):
                sancaused.append((t["name"], n, c[10:]))
            else:
                bad = True
        if (t["missing"] or not t["failed"]) and t["name"] not in TIMING_FILES:
            bad = True              # tests not run, or the file died
        for e in t["errors"][:5]:
            print(f"    | {e[:160]}")
    if timing:
        print(f"  timing-only failures ({len(timing)}): " + ", ".join(f"{a} #{b}" for a, b in timing))
    if sancaused:
        print(f"  sanitizer-caused failures ({len(sancaused)}):")
        for a, b, why in sancaused:
            print(f"    {a} #{b}: {why}")

    found = reports()
    groups = collections.OrderedDict()
    for r in found:
        groups.setdefault(r["key"], []).append(r)
    ours = sum(1 for r in found if r["ours"])
    print(f"\nsanitizer reports: {len(found)} ({len(groups)} distinct; {ours} with a frame in our code), "
          f"in {len(set(r['file'] for r in found))} processes (san/asan.PID; the canary's in san/canary)")
    for i, (key, rs) in enumerate(groups.items(), 1):
        r = rs[0]
        whos = sorted(set(x["who"] for x in rs))
        print(f"\n  [{i}] {r['kind']}  at {key[1]}")
        print(f"      {len(rs)} report(s); from: {', '.join(whos)[:200]}; first in {os.path.relpath(r['file'], WORK)}")
        for l in excerpt(r["lines"]):
            print("      " + l)
    if found:
        bad = True

    notes = server_log_notes()
    if notes:
        print(f"\nserver log ({len(notes)} notable lines: crashes, or reports on stderr):")
        for l in notes[:10]:
            print("  " + l[:170])
        bad = True

    print("\ntotal, pg_regress files and pgTAP tests:")
    print(f"{t_pass + npass} passed, {t_fail + len(files) - npass} failed")
    print(f"(logs: {WORK}/run.log, results/, san/, server.log, tree/regression.diffs)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
