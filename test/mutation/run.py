#!/usr/bin/python3
"""Mutation testing: are the tests good enough to catch a deliberate bug?

Each mutant in test/mutation/mutants.txt names one deliberate bug in src/
(an exact text, found exactly once, and its replacement) and the tests that
should catch it.  For each mutant, one at a time, this script

  1. applies it to a copy of the source tree and builds that copy;
  2. installs the build into a private, relocated copy of the PostgreSQL
     server (the system's install is never touched) and runs the tests:
     the mutant's own first, then, unless one of those failed, the rest of
     the fast suite (C unit tests, every pg_regress file, every pgTAP file);
  3. reports the mutant as caught by the first test that failed (or ran
     far longer than it does on the unmutated build), or as survived.

Before any mutant, every test named in the file must pass on the unmutated
build: a test that fails anyway catches nothing.

Usage: test/mutation/run.py [--only NAME[,NAME...]] [--full] [--list] [--shard K/N]
  --full   run the whole fast suite for every mutant, not stopping at the
           first failure, and report every test that caught it
Exit status 1 if a mutant survived or failed to build.
"""
import argparse
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MUTANTS = os.path.join(REPO, "test", "mutation", "mutants.txt")
CORE_SRC = ["src/core/tensor_ops.c", "src/core/gemm.c", "src/core/gemm_int8.c", "src/core/product_parts.c", "src/core/threads.c",
            "src/core/attention.c",
            "src/core/online_softmax.c", "src/core/weight_file.c", "src/core/model.c",
            "src/core/search.c", "src/core/logits.c", "src/core/metrics.c", "src/core/tokenize_13a.c", "src/core/spm_model.c",
            "src/core/protobuf.c"]
# pgTAP files that run shell commands: run to their end.  (24_jobs and 30_jobs_trust commit, but
# drop what an earlier run left before they begin: stopped early, they start clean the next time.)
TAP_RUN_WHOLE = {"11_large_files"}
# the unit tests (make unittest-NAME) that print "not ok" or "FAIL" at a failed check and keep no state
STREAMED_UNITS = {"markup", "spans", "casing", "placement", "special_tokens", "wordpiece", "cpu_kernels"}
SLOW_FACTOR, SLOW_EXTRA = 2.0, 6.0       # a test past twice its time + 6 s has caught a mutant
UNMUTATED_LIMIT = 600.0                  # the most a test may take unmutated


def log(*a):
    print(*a, flush=True)


# ---------------------------------------------------------------- mutants
def parse_mutants(path):
    """Blocks of 'key: value' lines; find: and replace: take the lines up to
    the next 'replace:' / 'end' (tabs kept), so code is written as is."""
    mutants, cur, field = [], None, None
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for ln, line in enumerate(lines, 1):
        if field in ("find", "replace"):
            if line == "replace:" and field == "find":
                field = "replace"
                cur["replace"] = []
                continue
            if line == "end":
                cur["find"] = "\n".join(cur["find"])
                cur["replace"] = "\n".join(cur.get("replace", []))
                mutants.append(cur)
                cur, field = None, None
                continue
            cur[field].append(line)
            continue
        if not line.strip() or line.startswith("#"):
            continue
        m = re.match(r"^(\w+):\s*(.*)$", line)
        if not m:
            sys.exit(f"{path}:{ln}: cannot parse: {line!r}")
        key, val = m.group(1), m.group(2)
        if key == "mutant":
            if cur is not None:
                sys.exit(f"{path}:{ln}: mutant {cur['name']} has no 'end'")
            cur = {"name": val, "line": ln}
        elif cur is None:
            sys.exit(f"{path}:{ln}: {key} outside a mutant")
        elif key == "find":
            field = "find"
            cur["find"] = []
        elif key in ("file", "why", "tests", "origin"):
            cur[key] = val
        else:
            sys.exit(f"{path}:{ln}: unknown key {key}")
    names = [m["name"] for m in mutants]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        sys.exit(f"duplicate mutant names: {sorted(dup)}")
    for m in mutants:
        for k in ("file", "why", "tests", "find"):
            if k not in m:
                sys.exit(f"{path}:{m['line']}: mutant {m['name']} lacks {k}")
        m["tests"] = m["tests"].split()
    return mutants


# ---------------------------------------------------------------- the server
def run(cmd, cwd=None, env=None, timeout=None, user=None, check=True, quiet=True):
    if user:
        cmd = ["runuser", "-u", user, "--"] + cmd
    p = subprocess.run(cmd, cwd=cwd, env=env, timeout=timeout,
                       stdout=subprocess.PIPE if quiet else None,
                       stderr=subprocess.STDOUT if quiet else None, text=True)
    if check and p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stdout or ''}")
    return p


def pg_config(key):
    return subprocess.check_output(["pg_config", "--" + key], text=True).strip()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    """A relocated copy of the system's PostgreSQL with its own cluster."""

    def __init__(self, work):
        self.work = work
        self.root = os.path.join(work, "root")
        bindir, pkglib, share = pg_config("bindir"), pg_config("pkglibdir"), pg_config("sharedir")
        self.bindir = self.root + bindir
        self.pkglib = self.root + pkglib
        for d in (bindir, pkglib, share):
            dst = self.root + d
            if not os.path.exists(dst):
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copytree(d, dst, symlinks=True)
        self.data = os.path.join(work, "data")
        self.sock = os.path.join(work, "sock")
        self.port = free_port()
        # postgres will not run as root
        self.user = "postgres" if os.geteuid() == 0 else None
        os.makedirs(self.sock, exist_ok=True)
        if self.user:
            pw = pwd.getpwnam(self.user)
            for d in (work, self.sock):
                os.chown(d, pw.pw_uid, pw.pw_gid)
        self.env = dict(os.environ, PGHOST=self.sock, PGPORT=str(self.port),
                        PGUSER=self.user or pwd.getpwuid(os.geteuid()).pw_name,
                        PGDATABASE="postgres",
                        PG_BINDIR=self.bindir)   # test/jobs/run.py's private clusters run this build
        for k in ("PGSERVICE", "PGPASSWORD", "PGOPTIONS"):
            self.env.pop(k, None)

    def initdb(self):
        run([self.bindir + "/initdb", "-D", self.data, "-E", "UTF8", "--locale=C.UTF-8",
             "-A", "trust", "-U", self.env["PGUSER"]], user=self.user)
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(f"port = {self.port}\nunix_socket_directories = '{self.sock}'\n"
                    "listen_addresses = ''\nfsync = off\nsynchronous_commit = off\n"
                    "full_page_writes = off\nmax_connections = 40\n")

    def start(self):
        run([self.bindir + "/pg_ctl", "-D", self.data, "-l", os.path.join(self.work, "server.log"),
             "-w", "start"], user=self.user)

    def stop(self, mode="fast"):
        run([self.bindir + "/pg_ctl", "-D", self.data, "-m", mode, "-w", "stop"],
            user=self.user, check=False)

    def stop_strays(self):
        """Private clusters that a killed test left running on this build (test/jobs/run.py's):
        an immediate shutdown (SIGQUIT to their postmaster), so none outlives the run."""
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    args = f.read().decode(errors="replace").split("\0")
            except OSError:
                continue
            if args[0] == self.bindir + "/postgres" and "-D" in args[:-1] \
                    and os.path.realpath(args[args.index("-D") + 1]) != os.path.realpath(self.data):
                try:
                    os.kill(int(pid), signal.SIGQUIT)
                except ProcessLookupError:
                    pass

    def clear_weight_files(self):
        # a mutated build's shared weights files must not outlive it
        shutil.rmtree(os.path.join(self.data, "pgsql_tmp_transformer"), ignore_errors=True)


# ---------------------------------------------------------------- tests
class Suite:
    def __init__(self, tree, server):
        self.tree, self.server = tree, server
        self.baseline = {}

    def all_tests(self):
        mk = open(os.path.join(self.tree, "Makefile")).read()
        regress = re.search(r"^REGRESS\s*=\s*(.*)$", mk, re.M).group(1).split()
        taps = sorted(f[:-4] for f in os.listdir(os.path.join(self.tree, "test", "pgtap"))
                      if f.endswith(".sql"))
        return ["unit"] + ["regress:" + r for r in regress] + ["tap:" + t for t in taps]

    def command(self, test):
        kind, _, name = test.partition(":")
        if kind == "unit":
            # its lines unbuffered: the first FAIL ends the run (the mutant is caught)
            # (the trainer's 10 steps first: 0.1 s, and most of the training mutants fail there;
            # then the core against its fixtures and the gradients', 3 s)
            return ["sh", "-c", "stdbuf -oL test/unit/test_train test/fixtures/train"
                    " && stdbuf -oL test/unit/test_core test/fixtures/core_ops.txt test/fixtures/grad_ops.txt"]
        if kind == "pathological":
            # pathological:SHAPE runs that shape only (seconds, not the whole harness's half minute)
            if name:
                return ["env", "PATHOLOGICAL_ONLY=" + name, "make", "-s", "pathological"]
            return ["make", "-s", "pathological"]
        if kind == "limits-memory":
            # limits-memory:FUNCTION,... the peak memory at 10 MB alone (one short cancel at 1 MB)
            return ["env", "LIMITS_ONLY=" + name,
                    "LIMITS_ARGS=--sizes 10 --memory-timeout-ms 4000 --cancel-mb 1 --timeout-ms 400",
                    "make", "-s", "limits"]
        if kind == "limits":
            # limits:FUNCTION,... runs the limits harness on those functions only
            # (a 40 MB call cancelled in each of its phases: one gap without checks is enough;
            # 4 s for the memory at 10 MB, so that a loaded machine gets as far as the peak)
            return ["env", "LIMITS_ONLY=" + name,
                    "LIMITS_ARGS=--sizes 10 --memory-timeout-ms 4000 --cancel-mb 40 --timeout-ms " +
                    ",".join(str(t) for t in range(300, 3001, 200)),
                    "make", "-s", "limits"]
        if kind == "make" and name.startswith("unittest-") and name[9:] in STREAMED_UNITS:
            # make:unittest-NAME as the Makefile runs it, but its lines unbuffered: the first
            # failed check ends the run (a quadratic mutant would run on for a minute after it)
            unit = "test/unit/test_" + name[9:]
            return ["sh", "-c", f"make -s {unit} && TF_PATHOLOGICAL_MB=2 stdbuf -oL {unit}"]
        if kind == "make":
            # make:TARGET, a check of the source tree (check-core, check-cycles)
            return ["make", "-s", name]
        if kind == "regress":
            return ["make", "-s", "installcheck", "REGRESS=" + name]
        if kind == "tap":
            # psql as pg_prove runs it, its lines unbuffered: the first "not ok" can end the run
            # (pg_prove's Perl holds its output back); tap_verdict() judges as pg_prove does
            return ["stdbuf", "-oL", "psql", "-X", "--no-align", "--quiet", "--pset", "pager=off",
                    "--pset", "tuples_only=true", "--set", "ON_ERROR_STOP=1", "-d", "mutation_tap",
                    "-f", f"test/pgtap/{name}.sql"]
        sys.exit(f"unknown test {test}")

    def prepare(self):
        env = self.server.env
        # a mutant that crashed a backend leaves the server in crash recovery for a moment
        for _ in range(120):
            if run(["pg_isready", "-q", "-d", "postgres"], env=env, check=False).returncode == 0:
                break
            time.sleep(0.25)
        run(["dropdb", "--force", "--if-exists", "mutation_tap"], env=env)
        run(["createdb", "-E", "UTF8", "-T", "template0", "mutation_tap"], env=env)
        run(["psql", "-X", "-q", "-d", "mutation_tap", "-c", "CREATE EXTENSION pgtap"], env=env)

    def run(self, test):
        """(passed, seconds, tail of output)"""
        # an unmutated run has no time of its own yet: a hang still ends (CI's clock is 90 minutes)
        limit = UNMUTATED_LIMIT
        if test in self.baseline:
            limit = self.baseline[test] * SLOW_FACTOR + SLOW_EXTRA
        t0 = time.time()
        # in a session of its own, so that a timeout kills the whole group: make's
        # children (a unit test gone quadratic) would run on and take the cores
        # from every test after them
        proc = subprocess.Popen(self.command(test), cwd=self.tree, env=self.server.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", start_new_session=True)
        # A pgTAP file ends at its first failed check (its database dropped and made again):
        # the mutant is caught, and the rest of the file would only take time (a
        # whole file ran for each mutant).  The files that run shell commands run to their end.
        lines, failed = [], threading.Event()
        streamed = test.startswith("make:unittest-") and test[14:] in STREAMED_UNITS
        stop_early = (test.startswith("tap:") and test[4:] not in TAP_RUN_WHOLE) or test == "unit" or streamed
        marker = "FAIL" if test == "unit" else ("not ok", "FAIL") if streamed else "not ok"

        def reader():
            # (a unit test prints the bytes of its inputs: any bytes, read as U+FFFD)
            try:
                for line in proc.stdout:
                    lines.append(line)
                    if stop_early and line.startswith(marker):
                        failed.set()
            finally:
                failed.set()

        th = threading.Thread(target=reader, daemon=True)
        th.start()
        timed_out = not failed.wait(timeout=limit)
        if stop_early and not timed_out and proc.poll() is None and any(l.startswith(marker) for l in lines):
            # the first failure of a file that keeps nothing: stop it, and its backends
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            # its database dropped with every backend in it, job workers too: whatever the file
            # committed or started is gone before the next test
            if test.startswith("tap:"):
                self.prepare()
            first = next(l for l in lines if l.startswith(marker))
            return False, time.time() - t0, first + "".join(lines[-6:]) + "\n(stopped at its first failure)"
        if not timed_out:
            th.join()
            proc.wait()
            p = subprocess.CompletedProcess(proc.args, proc.returncode, "".join(lines))
        else:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            # a mutant without interrupt checks cannot be cancelled: restart
            self.server.stop_strays()
            self.server.stop("immediate")
            self.server.start()
            self.prepare()
            base = f"{self.baseline[test]:.1f} s" if test in self.baseline else "not yet run"
            return False, time.time() - t0, f"ran past {limit:.0f} s (unmutated: {base})"
        dt = time.time() - t0
        out = p.stdout
        if test.startswith("tap:") and p.returncode == 0 and not tap_verdict(out):
            p.returncode = 1
        if test.startswith("tap:") and p.returncode != 0:
            # a file that ended on an error (not a failed check) may have committed what it
            # drops at its end: its database made again, as after a first failure
            self.prepare()
        if test.startswith("regress:") and p.returncode != 0:
            diffs = os.path.join(self.tree, "regression.diffs")
            if os.path.exists(diffs):
                out += open(diffs, errors="replace").read()
        lines = out.strip().split("\n")
        if test == "unit" and p.returncode != 0:
            # the failed checks, not the last ones
            lines = [l for l in lines if l.startswith("FAIL")][:2] + lines[-1:]
        elif p.returncode != 0:
            # what failed, wherever it is (a jobs scenario's line comes before the server log's tail)
            said = [l for l in lines[:-12] if l.startswith(("not ok", "FAIL", "jobs:", "limits:")) or "failed" in l][:6]
            lines = said + lines[-12:]
        return p.returncode == 0, dt, "\n".join(lines[-18:])


TIMES = os.path.join(REPO, "test", "mutation", "times.txt")
DEFAULT_SECONDS = 12.0          # a mutant or test the last run did not time
GROUP_SECONDS = 60.0            # the most a runner claims at once, by the last run's times


def read_times():
    """test/mutation/times.txt: "NAME SECONDS" per mutant and per test (its unmutated run), from make mutation-times."""
    times = {}
    if os.path.exists(TIMES):
        for line in open(TIMES):
            parts = line.split()
            if len(parts) == 2 and not line.startswith("#"):
                times[parts[0]] = float(parts[1])
    return times


def claimed_groups(mutants, queue, until=None, left=None):
    """The mutants by their first test, heaviest first by the last run's times, each group
    claimed by one of the runners that share the directory queue (a file made exclusively):
    runners that start at different times still end together.

    With until (make test's budget), no group starts after that time: the ones not yet
    claimed are claimed into left, not run.  The order is then the mutants new since the last
    full run's times first (the ones a change just added), then the rest turned by the day, so
    that each day's runs begin at another part and a few days' runs cover them all."""
    times = read_times()
    by_test = {}
    for m in mutants:
        by_test.setdefault(m["tests"][0], []).append(m)
    # a test's mutants in parts of at most GROUP_SECONDS (each part runs the test's baseline
    # again, cheap for the tests that have many mutants), so that no part left at the end
    # keeps one runner busy while the other has finished
    groups = {}
    for t, ms in by_test.items():
        part, load = [], times.get(t, DEFAULT_SECONDS)
        for m in ms:
            if part and load + times.get(m["name"], DEFAULT_SECONDS) > GROUP_SECONDS:
                groups[(t, len(groups))] = part
                part, load = [], times.get(t, DEFAULT_SECONDS)
            part.append(m)
            load += times.get(m["name"], DEFAULT_SECONDS)
        groups[(t, len(groups))] = part

    def weight(g):
        return times.get(g[0], DEFAULT_SECONDS) + sum(times.get(m["name"], DEFAULT_SECONDS) for m in groups[g])

    order = sorted(groups, key=lambda g: (-weight(g), g))
    if until is not None:
        turn = int(time.time() // 86400) * 7 % len(order) if order else 0
        order = order[turn:] + order[:turn]
        order = [g for g in order if any(m["name"] not in times for m in groups[g])] + \
                [g for g in order if all(m["name"] in times for m in groups[g])]
    os.makedirs(queue, exist_ok=True)
    for k, t in enumerate(order):
        try:
            os.close(os.open(os.path.join(queue, f"{k:04d}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue
        if until is not None and time.time() >= until:
            left.extend(groups[t])
            continue
        yield groups[t]


def tap_verdict(out):
    """A TAP stream passes as pg_prove judges it: a plan, as many checks as planned, none "not ok"."""
    plan = re.search(r"^1\.\.(\d+)\s*$", out, re.M)
    checks = re.findall(r"^(not ok|ok)\b", out, re.M)
    return plan is not None and len(checks) == int(plan.group(1)) and "not ok" not in checks


# ---------------------------------------------------------------- the tree
def copy_tree(dst):
    files = subprocess.check_output(["git", "-C", REPO, "ls-files", "-co", "--exclude-standard"],
                                    text=True).split("\n")
    # the build's outputs too, if there (times kept): make then rebuilds only what a mutant changes
    for pattern in ("src/*/*.o", "src/*/*/*.o", "src/*/*/*/*.o", "transformer.so", "test/unit/obj/*.o",
                    "test/unit/test_core"):
        files += [os.path.relpath(f, REPO) for f in glob.glob(os.path.join(REPO, pattern))]
    for f in files:
        if not f or not os.path.isfile(os.path.join(REPO, f)):
            continue
        d = os.path.join(dst, f)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        shutil.copy2(os.path.join(REPO, f), d)
    # the tests read ../shared/data, relative to the repository
    shared = os.path.join(os.path.dirname(REPO), "shared")
    if os.path.isdir(shared):
        os.symlink(shared, os.path.join(os.path.dirname(dst), "shared"))


def install_so(so, server):
    """The build into the private server: a new file renamed over the old, never written in place
    (a process that still maps the old library, a job worker, would crash on the changed pages)."""
    dst = os.path.join(server.pkglib, "transformer.so")
    shutil.copy2(so, dst + ".new")
    os.replace(dst + ".new", dst)


def touch_includers(tree, path):
    """A mutated header: PGXS has no header dependencies, so the sources that include it (directly or
    through other headers) are touched."""
    if not path.endswith(".h"):
        return
    files = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(tree, "src")) for f in fs if f.endswith((".c", ".h"))]
    text = {f: open(f, encoding="utf-8").read() for f in files}
    names, grown = {os.path.basename(path)}, True
    while grown:
        more = {os.path.basename(f) for f in files if f.endswith(".h") and
                any('#include "%s"' % n in text[f] for n in names)}
        grown = not more <= names
        names |= more
    for f in files:
        if f.endswith(".c") and any('#include "%s"' % n in text[f] for n in names):
            os.utime(f)


SOURCE_CHECKS = ("make:check-cycles", "make:check-core")


def build(tree, what):
    """Build the extension ("so") or the unit tests ("unit"); None, or make's output on failure."""
    target = ["test/unit/test_core", "test/unit/test_train"] if what == "unit" else []
    p = run(["make", "-s", "-j2"] + target, cwd=tree, check=False)
    return None if p.returncode == 0 else p.stdout


def main():
    # a kill ends like Ctrl-C: the private server is stopped on the way out
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("mutation testing: terminated"))
    ap = argparse.ArgumentParser()
    ap.add_argument("--only")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--work", default=None)
    ap.add_argument("--queue", default=None,
                    help="a directory shared by several runners: each takes the next group of mutants left")
    ap.add_argument("--record", default=None,
                    help="write each mutant's and each test's seconds to this file (times.txt's format)")
    ap.add_argument("--until", type=float, default=None,
                    help="with --queue: start no group of mutants after this time (seconds since the epoch); "
                         "the ones left are listed, for make mutation to run")
    ap.add_argument("--shard", default=None,
                    help="K/N: only the mutants whose first named test falls to shard K of N (tests dealt out "
                         "by how many mutants name them first), each shard its own tree and server")
    args = ap.parse_args()

    mutants = parse_mutants(MUTANTS)
    if args.shard:
        k, n = (int(x) for x in args.shard.split("/"))
        if not 1 <= k <= n:
            sys.exit(f"--shard {args.shard}: K must be 1 to N")
        # the mutants by their first test (a shard runs each test's unmutated baseline once),
        # each group weighed by the times of the last full run (test/mutation/times.txt), the
        # heaviest first to the lightest shard: the shards end together
        times = read_times()
        groups = {}
        for m in mutants:
            t = m["tests"][0]
            groups[t] = groups.get(t, times.get(t, DEFAULT_SECONDS)) + times.get(m["name"], DEFAULT_SECONDS)
        load = [0.0] * n
        mine = set()
        for t in sorted(groups, key=lambda t: (-groups[t], t)):
            i = min(range(n), key=lambda i: (load[i], i))
            load[i] += groups[t]
            if i == k - 1:
                mine.add(t)
        mutants = [m for m in mutants if m["tests"][0] in mine]
        log(f"shard {k}/{n}: {len(mutants)} mutants, about {load[k - 1]:.0f} s by the last run's times")
    if args.only:
        want = args.only.split(",")
        unknown = set(want) - {m["name"] for m in mutants}
        if unknown:
            sys.exit(f"unknown mutants: {sorted(unknown)}")
        mutants = [m for m in mutants if m["name"] in want]
    if args.list:
        for m in mutants:
            log(f"{m['name']:32} {m['file']:24} {' '.join(m['tests'])}\n    {m['why']}")
        return 0

    # every mutant applies to the tree as it is: exactly one match
    for m in mutants:
        src = open(os.path.join(REPO, m["file"]), encoding="utf-8").read()
        n = src.count(m["find"])
        if n != 1:
            sys.exit(f"mutant {m['name']}: its text occurs {n} times in {m['file']}")

    work = args.work or f"/tmp/transformer-mutation-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    tree = os.path.join(work, "src", "main")
    os.makedirs(tree)
    t_start = time.time()
    log(f"mutation testing in {work}: {len(mutants)} mutants")
    copy_tree(tree)
    server = Server(work)
    suite = Suite(tree, server)
    if build(tree, "so") or build(tree, "unit"):
        sys.exit("the unmutated tree does not build")
    run(["make", "-s", "install", "DESTDIR=" + server.root], cwd=tree)
    so = os.path.join(tree, "transformer.so")
    server.initdb()
    server.start()
    results = []
    left = []                   # not run: make test's budget was spent (--until)
    try:
        suite.prepare()
        i = 0
        dirty = False           # the server runs a mutant's build (the last one's)
        for batch in (claimed_groups(mutants, args.queue, args.until, left) if args.queue else [mutants]):
            if dirty:
                # the unmutated build back before the next tests' unmutated runs
                if build(tree, "so") or build(tree, "unit"):
                    sys.exit("the unmutated tree does not build")
                install_so(so, server)
                server.clear_weight_files()
                dirty = False
            # the tests named by mutants must pass unmutated (and give the time limits)
            named = []
            for m in batch:
                named += [t for t in m["tests"] if t not in named and t not in suite.baseline]
            if args.full:
                named = [t for t in suite.all_tests() if t not in suite.baseline]
            for t in named:
                # a test the other runner of the queue has passed unmutated (the same build): its time
                shared = os.path.join(args.queue, "unmutated-" + re.sub(r"[^A-Za-z0-9_.-]", "_", t)) \
                    if args.queue else None
                if shared and os.path.exists(shared):
                    suite.baseline[t] = float(open(shared).read())
                    log(f"  unmutated: {t} passed in the other runner ({suite.baseline[t]:.1f} s)")
                    continue
                ok, dt, out = suite.run(t)
                if not ok:
                    sys.exit(f"{t} fails on the unmutated build:\n{out}")
                suite.baseline[t] = dt
                log(f"  unmutated: {t} passes ({dt:.1f} s)")
                if shared:
                    with open(shared + ".new", "w") as f:
                        f.write(f"{dt:.2f}")
                    os.replace(shared + ".new", shared)

            for m in batch:
                i += 1
                dirty = True
                t0 = time.time()
                path = os.path.join(tree, m["file"])
                orig = open(path, encoding="utf-8").read()
                with open(path, "w", encoding="utf-8") as f:
                    f.write(orig.replace(m["find"], m["replace"], 1))
                touch_includers(tree, m["file"])
                unit_needed = m["file"] in CORE_SRC
                built = set()
                try:
                    order = list(m["tests"])
                    rest = [t for t in suite.all_tests() if t not in order]
                    if not unit_needed:
                        rest = [t for t in rest if t != "unit"]
                    caught = []
                    err = None
                    for t in order + rest:
                        # built when first needed: a mutant caught by the unit tests needs no server build
                        what = "unit" if t == "unit" else "so"
                        # the checks of the sources' includes read no build
                        if t in SOURCE_CHECKS:
                            what = None
                        if what and what not in built:
                            err = build(tree, what)
                            if err:
                                break
                            built.add(what)
                            if what == "so":
                                install_so(so, server)
                                server.clear_weight_files()
                                if m["file"].startswith("sql/"):
                                    # a mutated install script: the built one replaces the installed one
                                    ext = os.path.join(server.root + pg_config("sharedir"), "extension")
                                    for f in os.listdir(os.path.join(tree, "sql")):
                                        if f.startswith("transformer--") and f.endswith(".sql"):
                                            shutil.copy2(os.path.join(tree, "sql", f), ext)
                        ok, dt, out = suite.run(t)
                        if not ok:
                            caught.append(t)
                            first = out.strip().split("\n")
                            log(f"      {t} fails ({dt:.1f} s): " + " | ".join(first[-3:])[:300])
                            if not args.full:
                                break
                    if err:
                        results.append((m, "BUILD FAILED", [], time.time() - t0))
                        log(f"[{i}] {m['name']}: does not build\n{err[-2000:]}")
                        continue
                    status = "caught" if caught else "SURVIVED"
                    results.append((m, status, caught, time.time() - t0))
                    log(f"[{i}] {m['name']}: {status}"
                        + (f" by {', '.join(caught)}" if caught else "") + f" ({time.time() - t0:.0f} s)")
                finally:
                    with open(path, "w", encoding="utf-8") as f:
                        f.write(orig)
                    os.utime(path)
                    touch_includers(tree, m["file"])
                    if m["file"].startswith("sql/"):
                        # the unmutated install script back in place for the next mutant
                        build(tree, "so")
                        ext = os.path.join(server.root + pg_config("sharedir"), "extension")
                        for f in os.listdir(os.path.join(tree, "sql")):
                            if f.startswith("transformer--") and f.endswith(".sql"):
                                shutil.copy2(os.path.join(tree, "sql", f), ext)
    finally:
        server.stop_strays()
        server.stop("immediate")

    if args.record:
        with open(args.record, "w") as f:
            for t, dt in sorted(suite.baseline.items()):
                f.write(f"{t} {dt:.1f}\n")
            for m, status, caught, dt in results:
                f.write(f"{m['name']} {dt:.1f}\n")
    log("\n| mutant | file | caught by | seconds |\n|---|---|---|---|")
    for m, status, caught, dt in results:
        by = ", ".join(caught) if caught else f"**{status}**"
        log(f"| {m['name']} | {m['file']} | {by} | {dt:.0f} |")
    n_caught = sum(1 for r in results if r[1] == "caught")
    log(f"\n{n_caught} of {len(results)} mutants caught in {time.time() - t_start:.0f} s")
    if left:
        log(f"{len(left)} mutants left to make mutation (make test's budget spent): "
            + " ".join(m["name"] for m in left))
    if n_caught == len(results):
        shutil.rmtree(work, ignore_errors=True)
        return 0
    # last, so that the tail of a long CI log names them
    for m, status, caught, dt in results:
        if status != "caught":
            log(f"NOT CAUGHT: {m['name']} ({status}) in {m['file']}, expected by {' '.join(m['tests'])}")
    log(f"work directory kept: {work}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
