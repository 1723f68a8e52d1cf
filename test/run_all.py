#!/usr/bin/python3
"""make test: every suite, in two lanes at once (one per core), then mutation testing in both.

Lane 1 needs no server: the layout checks, the C unit tests, the pathological
shapes, the sanitizers and fuzzers; in CI (--without-shared) also the tests
that read ../shared/data, with it hidden (make test-without-shared, a server
of its own); then the jobs, in private clusters.  Lane 2 runs the suites that
share the server that `pg_virtualenv make test` started, one after another
(crash restarts it, weight-cache fills its disk): pg_regress, pgTAP, the
manual's examples, the limits, concurrency, soak, dump, crash, browser, then
Citus in private clusters.  When a lane is done, it runs mutants: the two runners take
groups of mutants from one queue (test/mutation/run.py --queue), so the lanes
end together however long their suites took.  They start no group after
MUTATION_BUDGET seconds (default 660; "all": every mutant): the mutants new
since test/mutation/times.txt first, then the rest from a point that turns
each day; the ones left are named at the end, for make mutation.

Each step's output goes to test/logs/STEP.log; a table of the steps' times
ends the run.  A failure stops both lanes from starting new steps and prints
the tail of its log.

    test/run_all.py [--without-shared] [--only-lane 1|2]     (make test; needs a server: PGHOST etc.)
"""
import argparse
import os
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOGS = os.path.join(ROOT, "test", "logs")
QUEUE = os.path.join(ROOT, "test", "mutation", "queue")
PYTHON = "/usr/bin/python3"

LANE1 = ["check-core", "check-cycles", "check-calls", "unittest", "pathological", "sanitize"]
LANE2 = ["installcheck", "prove", "readme-check", "doctest", "encodings", "limits", "concurrency", "soak",
         "weight-cache", "dump", "crash", "browser", "citus"]
# private clusters of their own, so in either lane: in lane 1, after its suites, the lanes end
# their suites near together (3.4 of lane 2's 11.5 minutes in rehearsal 32)
LANE1_LAST = ["jobs"]

# make test starts no group of mutants after this many seconds of its run (CI's 15 minutes, less
# the install and the build; a group ends within a minute): those left are named, and make
# mutation runs them all
DEFAULT_MUTATION_BUDGET = 660

failed = threading.Event()
lock = threading.Lock()
times = []          # (lane, step, seconds, ok)
failures = []       # what a failed step printed, said again at the very end (CI keeps only the output's tail)


def say(msg):
    with lock:
        print(msg, flush=True)


def step(lane, name, cmd):
    if failed.is_set():
        return False
    log = os.path.join(LOGS, name + ".log")
    t0 = time.time()
    say(f"[lane {lane}] {name} ...")
    with open(log, "w") as f:
        rc = subprocess.call(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
    dt = time.time() - t0
    with lock:
        times.append((lane, name, dt, rc == 0))
    if rc != 0:
        failed.set()
        tail = open(log, errors="replace").read().splitlines()[-40:]
        msg = (f"[lane {lane}] {name} FAILED (exit {rc}, {dt:.0f} s); the end of {os.path.relpath(log, ROOT)}:\n"
               + "\n".join("    " + l for l in tail))
        with lock:
            failures.append(msg)
        say(msg)
        return False
    say(f"[lane {lane}] {name} ok ({dt:.0f} s)")
    return True


def lane(k, steps, until):
    for name, cmd in steps:
        if not step(k, name, cmd):
            return
    step(k, f"mutation-{k}", [PYTHON, "test/mutation/run.py", "--queue", QUEUE,
                               "--record", f"test/mutation/shard{k}.times", "--work",
                               f"/tmp/transformer-mutation-lane{k}-{os.getpid()}"]
         + (["--until", str(until)] if until is not None else []))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--without-shared", action="store_true",
                    help="lane 1 also runs make test-without-shared (CI)")
    ap.add_argument("--only-lane", type=int, default=None)
    args = ap.parse_args()
    os.makedirs(LOGS, exist_ok=True)
    shutil.rmtree(QUEUE, ignore_errors=True)
    os.makedirs(QUEUE)
    make = lambda t: ["make", "-s", t]
    lane1 = [(t, make(t)) for t in LANE1]
    if args.without_shared:
        lane1.append(("test-without-shared", make("test-without-shared")))
    lane1 += [(t, make(t)) for t in LANE1_LAST]
    lane2 = [(t, make(t)) for t in LANE2]
    t0 = time.time()
    # the mutants in the time left of the budget (MUTATION_BUDGET seconds from here, "all": no limit)
    budget = os.environ.get("MUTATION_BUDGET", str(DEFAULT_MUTATION_BUDGET))
    until = None if budget == "all" else t0 + float(budget)
    lanes = [threading.Thread(target=lane, args=(1, lane1, until)), threading.Thread(target=lane, args=(2, lane2, until))]
    if args.only_lane:
        lanes = [lanes[args.only_lane - 1]]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    wall = time.time() - t0
    print("\n| lane | step | seconds |\n|---|---|---|")
    for k, name, dt, ok in sorted(times):
        print(f"| {k} | {name}{'' if ok else ' **FAILED**'} | {dt:.0f} |")
    print(f"\nmake test: {wall:.0f} s wall ({sum(t[2] for t in times):.0f} s of steps in two lanes)")
    # the mutants' own report, both runners
    for k in (1, 2):
        path = os.path.join(LOGS, f"mutation-{k}.log")
        if os.path.exists(path):
            for line in open(path):
                if line.startswith("NOT CAUGHT") or "mutants caught in" in line or "mutants left to" in line:
                    print(f"mutation-{k}: {line.rstrip()}")
    for msg in failures:
        print("\n" + msg)
    return 1 if failed.is_set() else 0


if __name__ == "__main__":
    sys.exit(main())
