#!/usr/bin/python3
"""Background translation jobs under kills, crashes and restarts.

In a private cluster of its own (a temporary directory, its own socket
directory and port, fsync off), with the bundled model multi30k_de_en and
German sentences of Multi30k train, five scenarios, each in its own database:

  1. kill loop: a keep_in_sync job with two workers on a table that two
     writers INSERT into, UPDATE and DELETE from for 20 s (JOBS_KILL_LOOP_SECONDS), while a killer
     kills a job worker every 2-4 s, SIGTERM and SIGKILL in turn (a SIGKILL
     makes the postmaster crash-restart the whole server).  Afterwards
     wait_for_job() is true, every row holds translate(de), the queue is
     empty, no error row, and no (id, de) was written twice (a trigger logs
     every write of a new translation);
  2. kill -9 of the only worker mid-job, then nothing but reads of the view:
     the worker comes back by itself (bgw_restart_time) and the job is done;
  3. a clean restart (-m fast) mid-job: no worker comes back by itself, the
     job stays running; the next translate() in its database resumes it;
  4. the same with shared_preload_libraries = 'transformer': the launcher
     resumes it at server start, with no use at all;
  5. max_worker_processes = 2: a second job waits for a free slot (the view's
     waiting column says so), and starts once the first job's workers leave;
  6. several jobs, databases and roles (translate and embed): a clean restart
     resumed by the first use of each database, a kill -9 resumed with no use,
     a kill -9 of the postmaster, no value written twice, and rows inserted
     afterwards done by every synced job;
  7. transformer.max_job_workers 2: one role's 7 jobs and another role's
     job: never more than 2 workers, the other role's job is not starved,
     parallel query still gets workers, and idle jobs hold no worker;
  8. fine_tune() (transformer.checkpoint_interval 1 s): a run whose worker
     is killed with kill -9 (a crash restart) and which then goes through a
     clean restart ends with the weights of an uninterrupted run of the same
     settings, bit for bit, having resumed from its saved states.

    test/jobs/run.py [--log FILE] [--only N[,N...]]
        root; python3-psycopg2; the installed extension.  --log: a copy of
        the whole server log; --only: run these scenarios (1-8) alone

One line per scenario with its figures; a failed check prints what it saw
and the tail of the server log, and the other scenarios still run.  The
last line is 'N passed, N failed'; exit status 1 if any failed.  PGHOST,
PGPORT etc. of the environment are ignored (make test runs it under
pg_virtualenv).  About 2 minutes on 2 cores.
"""
import gzip
import os
import pwd
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import psycopg2

# the server binaries: PG_BINDIR (make mutation gives its relocated build), else the system's
BIN = os.environ.get("PG_BINDIR", "/usr/lib/postgresql/15/bin")
MODEL = "multi30k_de_en"
HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN_DE = os.path.join(HERE, "..", "..", "..", "shared", "data", "multi30k", "train.de.gz")
WORKER_LIKE = "transformer job % worker %"
KILL_LOOP_SECONDS = int(os.environ.get("JOBS_KILL_LOOP_SECONDS", "20"))   # 45 or more by hand
WATCHDOG_SECONDS = 720          # the whole run, whatever happens

# PGHOST, PGPORT, PGOPTIONS, PGDATABASE ... (pg_virtualenv's) must not reach libpq or pg_ctl
for _k in [k for k in os.environ if k.startswith("PG")]:
    del os.environ[_k]


class Failure(Exception):
    pass


def log(*a):
    print(*a, flush=True)


# ------------------------------------------------------------------ the cluster
class Cluster:
    def __init__(self):
        # in /tmp, whatever TMPDIR says: postgres must reach it, and socket paths are short
        self.tmp = tempfile.mkdtemp(prefix="transformer_jobs_", dir="/tmp")
        self.data = os.path.join(self.tmp, "data")
        self.sock = os.path.join(self.tmp, "sock")
        self.logfile = os.path.join(self.tmp, "server.log")
        os.mkdir(self.sock)
        pw = pwd.getpwnam("postgres")
        for d in (self.tmp, self.sock):
            os.chown(d, pw.pw_uid, pw.pw_gid)
        self.port = self.free_port()
        self.lock = threading.Lock()
        self.cleaned = False

    @staticmethod
    def free_port():
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        return port

    def run(self, args, timeout=120, check=True):
        p = subprocess.run(["runuser", "-u", "postgres", "--"] + args, cwd=self.tmp,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise Failure("%s failed (exit %d):\n%s" % (" ".join(args), p.returncode, p.stdout))
        return p

    def init(self):
        self.run([BIN + "/initdb", "-D", self.data, "-A", "trust", "-E", "UTF8", "--locale=C.UTF-8",
                  "-U", "postgres"])
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write("\n# test/jobs/run.py\n"
                    "port = %d\n"
                    "listen_addresses = ''\n"
                    "unix_socket_directories = '%s'\n"
                    "fsync = off\n"
                    "restart_after_crash = on\n"
                    "log_line_prefix = '%%m [%%p] %%b: '\n"
                    "max_connections = 40\n"
                    "transformer.threads = 1\n"
                    % (self.port, self.sock))

    def pg_ctl(self, *args, timeout=90):
        return self.run([BIN + "/pg_ctl", "-D", self.data, "-l", self.logfile, "-w", "-t", str(timeout - 10)]
                        + list(args), timeout=timeout)

    def start(self):
        self.pg_ctl("start")

    def restart(self):
        self.pg_ctl("restart", "-m", "fast")

    def log_text(self):
        try:
            with open(self.logfile, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def crash_restarts(self):
        return self.log_text().count("all server processes terminated; reinitializing")

    def log_tail(self, n=80):
        return "\n".join(self.log_text().splitlines()[-n:])

    def cleanup(self):
        with self.lock:
            if self.cleaned:
                return
            self.cleaned = True
        if os.path.exists(os.path.join(self.data, "postmaster.pid")):
            try:
                self.run([BIN + "/pg_ctl", "-D", self.data, "-m", "immediate", "-w", "-t", "30", "stop"],
                         timeout=40, check=False)
            except Exception as e:          # noqa: BLE001 - cleanup goes on
                log("jobs: could not stop the cluster: %s" % e)
        shutil.rmtree(self.tmp, ignore_errors=True)


C = None        # the Cluster
SAVE_LOG = None


def connect(db, app="jobs test", timeout_ms=240000):
    c = psycopg2.connect(host=C.sock, port=C.port, user="postgres", dbname=db, connect_timeout=5,
                         application_name=app, options="-c statement_timeout=%d" % timeout_ms)
    c.autocommit = True
    return c


def connect_retry(db, within=30, **kw):
    """Connect, retrying while the server (crash-)restarts."""
    deadline = time.time() + within
    while True:
        try:
            return connect(db, **kw)
        except psycopg2.OperationalError as e:
            if time.time() > deadline:
                raise Failure("could not connect to database %s for %d s: %s" % (db, within, str(e).strip()))
            time.sleep(0.2)


def lost(c, e):
    """Whether error e on connection c is the server going away (a crash restart, a shutdown):
    psycopg2 reports a connection lost in the middle of a statement as DatabaseError too."""
    return (isinstance(e, (psycopg2.OperationalError, psycopg2.InterfaceError)) or c is None or c.closed != 0
            or "server closed the connection" in str(e) or "terminating connection" in str(e))


def q(c, sql, *args):
    with c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall() if cur.description else None


def one(c, sql, *args):
    rows = q(c, sql, *args)
    return rows[0][0] if rows else None


def close(c):
    try:
        c.close()
    except Exception:       # noqa: BLE001
        pass


# ------------------------------------------------------------------ helpers
LINES = []


def sentences(start, n):
    return LINES[start:start + n]


def new_db(name):
    admin = connect("postgres")
    one(admin, "CREATE DATABASE %s TEMPLATE tmpl" % name)
    close(admin)
    return connect(name)


def fill(c, table, first_line, n):
    one(c, "CREATE TABLE %s (id int PRIMARY KEY, de text, en text)" % table)
    with c.cursor() as cur:
        cur.executemany("INSERT INTO %s (id, de) VALUES (%%s, %%s)" % table,
                        [(i + 1, s) for i, s in enumerate(sentences(first_line, n))])


def job_row(c, job):
    rows = q(c, "SELECT state, rows_done, rows_pending, rows_failed, waiting, last_error "
                "FROM transformer_jobs WHERE id = %s", job)
    if not rows:
        raise Failure("job %s is not in transformer_jobs" % job)
    return dict(zip(("state", "rows_done", "rows_pending", "rows_failed", "waiting", "last_error"), rows[0]))


def job_workers(c, job=None):
    """Job workers of the whole cluster; or of one job of c's database (job ids are per database)."""
    if job is None:
        return q(c, "SELECT pid, application_name FROM pg_stat_activity "
                    "WHERE application_name LIKE %s OR backend_type LIKE %s ORDER BY pid", WORKER_LIKE, WORKER_LIKE)
    like = "transformer job %d worker %%" % job
    return q(c, "SELECT pid, application_name FROM pg_stat_activity WHERE datname = current_database() "
                "AND (application_name LIKE %s OR backend_type LIKE %s) ORDER BY pid", like, like)


STALL_SECONDS = 10             # no row done for this long: nothing is working on the job


def poll_done(db, job, timeout, what):
    """Read the view (nothing else) until the job is done; reconnects after a crash.
    Fails after timeout, or once rows_done has not moved for STALL_SECONDS (a
    worker comes back within a second or two of a restart)."""
    deadline = time.time() + timeout
    c, last = None, None
    moved_at, done_before = time.time(), None
    while time.time() < deadline and time.time() - moved_at < STALL_SECONDS:
        try:
            if c is None:
                c = connect_retry(db, within=max(1, deadline - time.time()))
            last = job_row(c, job)
            if last["rows_done"] != done_before:
                moved_at, done_before = time.time(), last["rows_done"]
            if last["state"] == "done":
                close(c)
                return last
            if last["state"] in ("failed", "cancelled", "paused"):
                break
        except (psycopg2.DatabaseError, psycopg2.InterfaceError) as e:
            if not lost(c, e):
                raise
            close(c)
            c = None
        time.sleep(0.2)
    close(c)
    c = connect_retry(db)
    workers = job_workers(c)
    close(c)
    raise Failure("%s: job %s not done (%d s at most, %d s without progress): %s; job workers now: %s"
                  % (what, job, timeout, STALL_SECONDS, last, workers))


def check_translated(c, table, job, what):
    """Every row equals translate(de); no error row; the queue empty."""
    bad = q(c, "SELECT id, de, en, t FROM (SELECT id, de, en, translate(de, %%s) AS t FROM %s) s "
               "WHERE en IS DISTINCT FROM t ORDER BY id" % table, MODEL)
    errors = q(c, "SELECT key::text, sqlstate, message FROM transformer_job_errors WHERE job = %s ORDER BY at", job)
    queued = one(c, "SELECT count(*) FROM transformer_job_queue WHERE job = %s", job)
    if bad or errors or queued:
        raise Failure("%s: %d rows differ from translate(de) (first: %s); %d error rows (%s); %d rows queued"
                      % (what, len(bad), bad[:3], len(errors), errors[:5], queued))
    return one(c, "SELECT count(*) FROM %s" % table)


def wait_first_batch(c, job, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = job_row(c, job)
        if r["state"] == "running" and r["rows_done"] > 0:
            return r
        if r["state"] not in ("queued", "running"):
            raise Failure("%s: job %s is %s before any kill or restart: %s" % (what, job, r["state"], r))
        time.sleep(0.01)
    raise Failure("%s: job %s wrote no row in %d s: %s" % (what, job, timeout, job_row(c, job)))


def wait_watched(db, job, timeout, limit):
    """wait_for_job(job, timeout) in a thread; meanwhile, another connection looks for job
    workers waiting for a lock that the wait_for_job() backend holds.  (ok, what was seen)"""
    res = {}

    def waiter():
        try:
            w = connect(db, app="jobs test waiter", timeout_ms=(limit + 10) * 1000)
            res["pid"] = one(w, "SELECT pg_backend_pid()")
            res["ok"] = one(w, "SELECT wait_for_job(%s, %s)", job, timeout)
            close(w)
        except Exception as e:      # noqa: BLE001 - reported below
            res["error"] = "%s: %s" % (type(e).__name__, str(e).strip())

    th = threading.Thread(target=waiter, daemon=True)
    th.start()
    m = connect(db, app="jobs test monitor")
    blocked = []
    deadline = time.time() + limit
    while th.is_alive() and time.time() < deadline:
        if "pid" in res:
            for r in q(m, "SELECT application_name, wait_event_type, wait_event, state, "
                          "round(extract(epoch FROM clock_timestamp() - xact_start))::int "
                          "FROM pg_stat_activity WHERE (application_name LIKE %s OR backend_type LIKE %s) "
                          "AND %s = ANY (pg_blocking_pids(pid))", WORKER_LIKE, WORKER_LIKE, res["pid"]):
                seen = "%s waits (%s: %s) for the backend running wait_for_job() (pid %d) " \
                       "(its transaction %d s old)" % (r[0], r[1], r[2], res["pid"], r[4])
                if not blocked or blocked[-1].split(" (its")[0] != seen.split(" (its")[0]:
                    blocked.append(seen)
                else:
                    blocked[-1] = seen
        th.join(0.5)
    close(m)
    if th.is_alive():
        raise Failure("wait_for_job(%s, %s) still running after %d s" % (job, timeout, limit))
    if "error" in res:
        raise Failure("wait_for_job(%s, %s) failed: %s" % (job, timeout, res["error"]))
    return res.get("ok"), "; ".join(blocked)


# ------------------------------------------------------------------ 1. the kill loop
class Shared:
    def __init__(self):
        self.lock = threading.Lock()
        self.next_id = 1000000
        self.next_tag = 0
        self.stop = threading.Event()
        self.stats = {"insert": 0, "update": 0, "delete": 0, "interrupted": 0, "reconnects": 0}

    def take(self, what):
        with self.lock:
            if what == "id":
                self.next_id += 1
                return self.next_id
            self.next_tag += 1
            return self.next_tag

    def count(self, key):
        with self.lock:
            self.stats[key] += 1


class Writer(threading.Thread):
    def __init__(self, n, sh, pool):
        super().__init__(name="writer %d" % n, daemon=True)
        self.sh, self.pool, self.error = sh, pool, None
        self.rnd = random.Random(1000 + n)

    def run(self):
        try:
            self.loop()
        except BaseException as e:      # noqa: BLE001 - reported by the main thread
            self.error = "%s: %s" % (type(e).__name__, str(e).strip())

    def loop(self):
        c = connect_retry("s1", app=self.name, timeout_ms=30000)
        while not self.sh.stop.is_set():
            op = self.rnd.choices(("insert", "update", "delete"), (35, 45, 20))[0]
            try:
                if op == "insert":
                    one(c, "INSERT INTO docs (id, de) VALUES (%s, %s)",
                        self.sh.take("id"), self.rnd.choice(self.pool))
                elif op == "update":
                    one(c, "UPDATE docs SET de = %s WHERE id = (SELECT id FROM docs ORDER BY random() LIMIT 1)",
                        "%s (%d)" % (self.rnd.choice(self.pool), self.sh.take("tag")))
                else:
                    one(c, "DELETE FROM docs WHERE id = (SELECT id FROM docs ORDER BY random() LIMIT 1)")
                self.sh.count(op)
            except (psycopg2.DatabaseError, psycopg2.InterfaceError) as e:
                # the server crash-restarts: committed or not, the final check reads the table
                if not lost(c, e):
                    raise
                self.sh.count("interrupted")
                if c.closed or self.dead(c):
                    close(c)
                    c = connect_retry("s1", within=30, app=self.name, timeout_ms=30000)
                    self.sh.count("reconnects")
            time.sleep(self.rnd.uniform(0.01, 0.05))
        close(c)

    @staticmethod
    def dead(c):
        try:
            one(c, "SELECT 1")
            return False
        except (psycopg2.DatabaseError, psycopg2.InterfaceError):
            return True


class Killer(threading.Thread):
    def __init__(self, sh):
        super().__init__(name="killer", daemon=True)
        self.sh, self.error = sh, None
        self.rnd = random.Random(7)
        self.kills = []             # (signal name, worker name, crash restart seen)
        self.no_worker = 0

    def run(self):
        try:
            self.loop()
        except BaseException as e:      # noqa: BLE001
            self.error = "%s: %s" % (type(e).__name__, str(e).strip())

    def loop(self):
        c = None
        while not self.sh.stop.wait(self.rnd.uniform(2.0, 4.0)):
            if c is None:
                c = connect_retry("s1", app="killer")
            try:
                workers = job_workers(c)
            except (psycopg2.DatabaseError, psycopg2.InterfaceError) as e:
                if not lost(c, e):
                    raise
                close(c)
                c = None
                continue
            if not workers:
                self.no_worker += 1
                continue
            pid, name = self.rnd.choice(workers)
            sig = signal.SIGKILL if len(self.kills) % 2 == 1 else signal.SIGTERM
            before = C.crash_restarts()
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                continue
            crashed = False
            if sig == signal.SIGKILL:
                close(c)
                c = None
                # wait for the crash restart to show in the log, then for the server to take connections
                deadline = time.time() + 30
                while time.time() < deadline and C.crash_restarts() == before:
                    time.sleep(0.05)
                crashed = C.crash_restarts() > before
                c = connect_retry("s1", app="killer")
            self.kills.append((sig.name, name, crashed))
        close(c)


def scenario_kill_loop():
    t0 = time.time()
    c = new_db("s1")
    fill(c, "docs", 0, 300)
    one(c, "CREATE TABLE writes (id int, de text, at timestamptz DEFAULT clock_timestamp())")
    one(c, """CREATE FUNCTION log_write() RETURNS trigger LANGUAGE plpgsql AS $$
              BEGIN
                IF NEW.en IS DISTINCT FROM OLD.en AND NEW.en IS NOT NULL THEN
                  INSERT INTO writes (id, de) VALUES (NEW.id, NEW.de);
                END IF;
                RETURN NEW;
              END $$""")
    one(c, "CREATE TRIGGER log_write BEFORE UPDATE ON docs FOR EACH ROW EXECUTE FUNCTION log_write()")
    job = one(c, "SELECT translate_column('docs', 'de', 'en', %s, workers => 2)", MODEL)
    close(c)
    try:
        kill_loop_run(job, t0)
    finally:
        # then cancel_job (after a failure too: no worker of this job left for the other scenarios)
        try:
            c = connect_retry("s1")
            one(c, "SELECT cancel_job(%s)", job)
            close(c)
        except Exception as e:      # noqa: BLE001
            log("jobs: kill loop: cancel_job(%s) failed: %s" % (job, str(e).strip()))


def kill_loop_run(job, t0):
    sh = Shared()
    pool = sentences(2000, 3000)
    writers = [Writer(n, sh, pool) for n in (1, 2)]
    killer = Killer(sh)
    crashes0 = C.crash_restarts()
    try:
        for t in writers + [killer]:
            t.start()
        sh.stop.wait(KILL_LOOP_SECONDS)
    finally:
        sh.stop.set()       # whatever happens: no killer left for the other scenarios
        for t in writers + [killer]:
            t.join(60)
    for t in writers + [killer]:
        if t.is_alive():
            raise Failure("kill loop: %s still running 60 s after the stop" % t.name)
        if t.error:
            raise Failure("kill loop: %s failed: %s" % (t.name, t.error))
    crashes = C.crash_restarts() - crashes0
    loop_s = time.time() - t0

    # the backlog: wait_for_job, again if a connection drops
    t1 = time.time()
    deadline = time.time() + 200
    ok, c = None, None
    while ok is None:
        try:
            c = connect_retry("s1")
            ok = one(c, "SELECT wait_for_job(%s, '3 min')", job)
        except (psycopg2.DatabaseError, psycopg2.InterfaceError) as e:
            if not lost(c, e):
                raise Failure("kill loop: wait_for_job(%s, '3 min') raised: %s; job: %s"
                              % (job, str(e).strip(), job_row(connect_retry("s1"), job)))
            close(c)
            if time.time() > deadline:
                raise Failure("kill loop: wait_for_job(%s) kept failing: %s" % (job, str(e).strip()))
    if ok is not True:
        raise Failure("kill loop: wait_for_job(%s, '3 min') returned %s; job: %s; job workers: %s"
                      % (job, ok, job_row(c, job), job_workers(c, job)))
    wait_s = time.time() - t1
    state = job_row(c, job)

    bad = q(c, "SELECT id, de, en, t FROM (SELECT id, de, en, translate(de, %s) AS t FROM docs) s "
               "WHERE en IS DISTINCT FROM t ORDER BY id", MODEL)
    errors = q(c, "SELECT key::text, sqlstate, message FROM transformer_job_errors WHERE job = %s ORDER BY at", job)
    error_keys = set(k for k, _, _ in errors)
    unexplained = [b for b in bad if '["%d"]' % b[0] not in error_keys]
    queued = q(c, "SELECT keys::text, queued_at FROM transformer_job_queue WHERE job = %s", job)
    twice = q(c, "SELECT id, de, count(*) FROM writes GROUP BY 1, 2 HAVING count(*) > 1 ORDER BY 1")
    nrows = one(c, "SELECT count(*) FROM docs")
    nwrites = one(c, "SELECT count(*) FROM writes")
    sigkills = [k for k in killer.kills if k[0] == "SIGKILL"]
    problems = []
    if unexplained:
        problems.append("%d rows differ from translate(de): %s" % (len(unexplained), "; ".join(
            "id %d: de %r, en %r, translate(de) %r, written for this row: %s"
            % (i, de, en, t, q(c, "SELECT de, at::time::text FROM writes WHERE id = %s ORDER BY at", i))
            for i, de, en, t in unexplained[:3])))
    if errors:
        problems.append("%d error rows in transformer_job_errors (rows at fault: %d): %s"
                        % (len(errors), len(bad) - len(unexplained), errors[:5]))
    if queued:
        problems.append("%d keys still queued: %s" % (len(queued), queued[:5]))
    if twice:
        problems.append("%d (id, de) written more than once: %s" % (len(twice), twice[:5]))
    if len(killer.kills) < 3:
        problems.append("only %d kills (%d times no worker to kill)" % (len(killer.kills), killer.no_worker))
    if not any(k[2] for k in sigkills) or crashes == 0:
        problems.append("no SIGKILL followed by a crash restart (kills: %s; crash restarts in the log: %d)"
                        % (killer.kills, crashes))
    s = sh.stats
    figures = ("%.0f s, %d kills (%d SIGTERM, %d SIGKILL), %d crash restarts; writers: %d inserts, %d updates, "
               "%d deletes, %d interrupted, %d reconnects; wait_for_job %.1f s; %d rows, %d writes logged"
               % (loop_s, len(killer.kills), len(killer.kills) - len(sigkills), len(sigkills), crashes,
                  s["insert"], s["update"], s["delete"], s["interrupted"], s["reconnects"], wait_s, nrows, nwrites))
    close(c)
    if problems:
        raise Failure("kill loop (%s; job %s %s): %s" % (figures, job, state, "; ".join(problems)))
    log("jobs: kill loop: %s; all rows = translate(de), none written twice, queue empty, no error row" % figures)


# ------------------------------------------------------------------ 2. kill -9, then only reads
def kill9_and_wait_restart(pid, what):
    """kill -9 of a job worker, and the postmaster's crash restart it causes (within 30 s)."""
    before = C.crash_restarts()
    os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 30
    while time.time() < deadline and C.crash_restarts() == before:
        time.sleep(0.05)
    if C.crash_restarts() == before:
        raise Failure("%s: kill -9 of worker %s: no crash restart in the server log" % (what, pid))


def scenario_crash_no_use():
    t0 = time.time()
    c = new_db("s2")
    fill(c, "t2", 300, 200)
    job = one(c, "SELECT translate_column('t2', 'de', 'en', %s, workers => 1, keep_in_sync => false)", MODEL)
    close(c)
    c = connect("s2")           # a connection that has used no extension function
    at = wait_first_batch(c, job, 60, "crash restart")
    workers = job_workers(c, job)
    if not workers:
        raise Failure("crash restart: job %s runs (%s) but no worker is in pg_stat_activity" % (job, at))
    close(c)
    kill9_and_wait_restart(workers[0][0], "crash restart")
    r = poll_done("s2", job, 90, "crash restart (no use after it)")
    c = connect("s2")
    n = check_translated(c, "t2", job, "crash restart")
    close(c)
    log("jobs: crash restart: kill -9 of the worker at %d rows done, %d pending; done by itself %.1f s later "
        "(rows_done %d), %d rows all = translate(de)"
        % (at["rows_done"], at["rows_pending"], time.time() - t0, r["rows_done"], n))


# ------------------------------------------------------------------ 3. clean restart, resumed by the next use
def scenario_clean_restart():
    """Two jobs in one database (A, then B): after a clean restart neither runs until the database is
    used; the first use resumes both at once, not the lowest job id alone."""
    c = new_db("s3")
    fill(c, "t3", 500, 300)
    fill(c, "t3b", 1000, 250)
    job = one(c, "SELECT translate_column('t3', 'de', 'en', %s, workers => 1, keep_in_sync => false)", MODEL)
    job_b = one(c, "SELECT translate_column('t3b', 'de', 'en', %s, workers => 1, keep_in_sync => false)", MODEL)
    close(c)
    c = connect("s3")
    at = wait_first_batch(c, job, 60, "clean restart")
    wait_first_batch(c, job_b, 60, "clean restart (job B)")
    if job_row(c, job)["rows_pending"] == 0:
        raise Failure("clean restart: job %s finished before job %s wrote its first row: they did not run side "
                      "by side" % (job, job_b))
    close(c)
    C.restart()
    c = connect_retry("s3")
    t0 = time.time()
    seen = None
    while time.time() - t0 < 3:
        w = job_workers(c)
        rs = [job_row(c, j) for j in (job, job_b)]
        if w or any(r["state"] != "running" or r["rows_pending"] == 0 for r in rs):
            seen = (w, rs)
            break
        time.sleep(0.2)
    if seen:
        raise Failure("clean restart: within 3 s of the restart, with no use: job workers %s, jobs %s "
                      "(expected no worker, both jobs running with rows pending)" % seen)
    after = job_row(c, job)
    one(c, "SELECT translate('Ein Hund.', %s)", MODEL)
    t1 = time.time()
    # both jobs resumed by that one use, together (0.8.0 resumed the lowest job id alone)
    together = False
    while time.time() - t1 < 12:
        if job_workers(c, job) and job_workers(c, job_b):
            together = True
            break
        rs = [job_row(c, j) for j in (job, job_b)]
        if any(r["rows_pending"] == 0 for r in rs):
            break
        time.sleep(0.1)
    if not together:
        raise Failure("clean restart: after the first use, jobs %s and %s never had workers at the same time within 12 s: %s"
                      % (job, job_b, [job_row(c, j) for j in (job, job_b)]))
    close(c)
    r = poll_done("s3", job, 90, "clean restart (resumed by translate())")
    poll_done("s3", job_b, 90, "clean restart (job B, resumed by translate())")
    resumed_s = time.time() - t1
    c = connect("s3")
    n = check_translated(c, "t3", job, "clean restart")
    n += check_translated(c, "t3b", job_b, "clean restart (job B)")
    close(c)
    log("jobs: clean restart: at %d rows done; 3 s without worker, running with %d pending; after one translate() "
        "both jobs resumed together, done in %.1f s (rows_done %d), %d rows all = translate(de)"
        % (at["rows_done"], after["rows_pending"], resumed_s, r["rows_done"], n))


# ------------------------------------------------------------------ 4. shared_preload_libraries
def scenario_preload():
    c = connect("postgres")
    one(c, "ALTER SYSTEM SET shared_preload_libraries = 'transformer'")
    close(c)
    try:
        C.restart()
        c = new_db("s4")
        fill(c, "t4", 700, 200)
        job = one(c, "SELECT translate_column('t4', 'de', 'en', %s, workers => 1, keep_in_sync => false)", MODEL)
        close(c)
        c = connect("s4")
        at = wait_first_batch(c, job, 60, "shared_preload_libraries")
        close(c)
        C.restart()
        t1 = time.time()
        try:
            r = poll_done("s4", job, 90, "shared_preload_libraries (resumed at start)")
        except Failure as e:
            c = connect_retry("postgres")
            dbs = one(c, "SELECT count(*) FROM pg_database WHERE datallowconn AND NOT datistemplate")
            mwp = one(c, "SHOW max_worker_processes")
            close(c)
            raise Failure("%s (%d databases, max_worker_processes %s; the server log says: %s)"
                          % (e, dbs, mwp, [ln.split(": ", 1)[-1] for ln in C.log_text().splitlines()
                                           if "slot" in ln and "transformer" in ln][-3:] or "nothing about slots"))
        resumed_s = time.time() - t1
        c = connect("s4")
        n = check_translated(c, "t4", job, "shared_preload_libraries")
        stats = check_model_stats(c, n)
        close(c)
    finally:
        c = connect_retry("postgres")
        one(c, "ALTER SYSTEM RESET shared_preload_libraries")
        close(c)
        C.restart()
    log("jobs: shared_preload_libraries: restart at %d rows done; done %.1f s after it with no use (rows_done %d), "
        "%d rows all = translate(de)" % (at["rows_done"], resumed_s, r["rows_done"], n))
    log("jobs: statistics (transformer_stat_models): %s" % stats)


def check_model_stats(c, rows):
    """The per-model statistics in shared memory, with the library preloaded (issue 28)."""
    st = q(c, "SELECT calls, sentences, tokens_in, tokens_out, total_time, cache_hits, cache_misses "
              "FROM transformer_stat_models WHERE model = %s", MODEL)
    if len(st) != 1 or st[0][1] < 1:
        raise Failure("statistics: the job's translations are not counted: %s" % st)
    c3 = connect("tmpl")
    one(c3, "SELECT translate('Ein Hund.', %s)", MODEL)
    one(c, "SELECT transformer_stat_reset(%s)", MODEL)
    if q(c, "SELECT * FROM transformer_stat_models WHERE model = %s", MODEL):
        raise Failure("statistics: transformer_stat_reset(model) left the row")
    if one(c3, "SELECT calls FROM transformer_stat_models WHERE model = %s", MODEL) != 1:
        raise Failure("statistics: transformer_stat_reset(model) in one database cleared another's")
    close(c3)
    doc = "Ein Mann fährt Fahrrad. Zwei Hunde spielen im Schnee."
    for _ in range(3):
        one(c, "SELECT translate(%s, %s)", doc, MODEL)
    calls, sents, tin, tout, total, mean, hits, misses = q(
        c, "SELECT calls, sentences, tokens_in, tokens_out, total_time, mean_time, cache_hits, cache_misses "
           "FROM transformer_stat_models WHERE model = %s", MODEL)[0]
    want_in = one(c, "SELECT 3 * (cardinality(tokenize('Ein Mann fährt Fahrrad.', %s || '/source')) + "
                     "cardinality(tokenize('Zwei Hunde spielen im Schnee.', %s || '/source')) + 2)", MODEL, MODEL)
    if (calls, sents, tin) != (3, 6, want_in) or tout < 6 or total <= 0 or abs(mean - total / 3) > 1e-6 \
            or hits + misses < 3:
        raise Failure("statistics: 3 calls of 2 sentences (%d tokens) counted as calls %d, sentences %d, tokens in %d "
                      "out %d, total %.3f ms, mean %.3f, cache hits %d misses %d"
                      % (want_in, calls, sents, tin, tout, total, mean, hits, misses))
    # another backend adds to the same row
    c2 = connect("s4")
    one(c2, "SELECT translate(%s, %s)", doc, MODEL)
    close(c2)
    if one(c, "SELECT calls FROM transformer_stat_models WHERE model = %s", MODEL) != 4:
        raise Failure("statistics: a second backend's call is not counted in shared memory")
    # other databases do not see it; reset needs a grant
    c3 = connect("tmpl")
    if q(c3, "SELECT * FROM transformer_stat_models WHERE model = %s AND calls >= 4", MODEL):
        raise Failure("statistics: another database sees this database's row")
    close(c3)
    one(c, "CREATE ROLE stats_reader")
    one(c, "SET ROLE stats_reader")
    try:
        one(c, "SELECT transformer_stat_reset()")
        raise Failure("statistics: a role without a grant could reset them")
    except psycopg2.Error as e:
        if e.pgcode != "42501":
            raise Failure("statistics: reset by a role without a grant: %s, not 42501" % e.pgcode)
    readable = one(c, "SELECT count(*) FROM transformer_stat_models")
    one(c, "RESET ROLE")
    one(c, "SELECT transformer_stat_reset()")
    left = one(c, "SELECT count(*) FROM transformer_stat_models")
    if left != 0:
        raise Failure("statistics: transformer_stat_reset() left %d rows" % left)
    return ("the job's %d rows counted; 3 calls of 2 sentences: calls 3, sentences 6, tokens in %d (as tokenize() "
            "counts them), out %d, mean %.1f ms, cache hits %d misses %d; a second backend adds to the row; other "
            "databases do not see it; any role reads them, reset needs a grant (42501) and clears %d rows"
            % (rows, tin, tout, mean, hits, misses, readable))


# ------------------------------------------------------------------ 5. no free worker slot
def scenario_no_slot():
    try:
        no_slot()
    finally:
        c = connect_retry("postgres")
        one(c, "ALTER SYSTEM RESET max_worker_processes")
        one(c, "ALTER SYSTEM RESET max_logical_replication_workers")
        close(c)
        C.restart()


def no_slot():
    c = connect("postgres")
    one(c, "ALTER SYSTEM SET max_worker_processes = 2")
    # the logical replication launcher would take one of the two slots
    one(c, "ALTER SYSTEM SET max_logical_replication_workers = 0")
    close(c)
    C.restart()
    c = new_db("s5")
    fill(c, "ta", 900, 300)
    fill(c, "tb", 1200, 50)
    # the first use in this database starts a supervisor (a slot for a moment): before the jobs, not during
    one(c, "SELECT translate('Ein Hund.', %s)", MODEL)
    deadline = time.time() + 20
    while q(c, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'transformer job supervisor'"):
        if time.time() > deadline:
            raise Failure("no free slot: the job supervisor is still running after 20 s")
        time.sleep(0.1)
    time.sleep(0.5)
    a = one(c, "SELECT translate_column('ta', 'de', 'en', %s, workers => 2, keep_in_sync => false)", MODEL)
    # A's supervisor starts at the commit, and A's worker takes the last slot
    deadline = time.time() + 30
    while not job_workers(c, a) and time.time() < deadline:
        time.sleep(0.05)
    b = one(c, "SELECT translate_column('tb', 'de', 'en', %s, workers => 1, keep_in_sync => false)", MODEL)
    deadline = time.time() + 10
    while time.time() < deadline:
        ra, rb = job_row(c, a), job_row(c, b)
        if rb["waiting"]:
            break
        time.sleep(0.05)
    wa = job_workers(c, a)
    if ra["state"] not in ("queued", "running") or ra["rows_pending"] == 0:
        raise Failure("no free slot: job A %s is no longer running when B is declared: %s" % (a, ra))
    if rb["state"] != "queued" or not rb["waiting"] or "max_worker_processes" not in rb["waiting"]:
        raise Failure("no free slot: while job A runs (%s, workers %s), job B is %s (expected queued, "
                      "waiting naming max_worker_processes)" % (ra, wa, rb))
    t0 = time.time()
    ok, blocked = wait_watched("s5", b, "2 min", 150)
    wait_s = time.time() - t0
    rb2 = job_row(c, b)
    if ok is not True:
        raise Failure("no free slot: wait_for_job(B, '2 min') returned %s after %.0f s; A: %s; B: %s; job workers "
                      "now: %s; while it waited: %s"
                      % (ok, wait_s, job_row(c, a), rb2, job_workers(c),
                         blocked or "no job worker waited for a lock held by the wait_for_job() backend"))
    if rb2["waiting"] is not None:
        raise Failure("no free slot: B's waiting is still %r after wait_for_job: %s" % (rb2["waiting"], rb2))
    n = check_translated(c, "tb", b, "no free slot (job B)")
    ra2 = job_row(c, a)
    close(c)
    log("jobs: no free slot: max_worker_processes 2; B queued while A ran (%d pending, %d workers): waiting %r; "
        "wait_for_job(B) true after %.1f s, waiting NULL, %d rows of B all = translate(de) (A: %s)"
        % (ra["rows_pending"], len(wa), rb["waiting"], wait_s, n, ra2["state"]))


# ------------------------------------------------------------------ 6. several jobs, databases and roles
def scenario_plural():
    """Two databases, two roles, four jobs each (translate and embed, synced and not): a clean
    restart resumed by the first use of each database, then kill -9 of a worker (a crash
    restart) resumed with no use at all; then rows inserted later are done by every synced job."""
    dbs = ("p1", "p2")
    admin = connect("postgres")
    for r in ("tf_p_alice", "tf_p_bob"):
        one(admin, "DROP ROLE IF EXISTS %s" % r)
        one(admin, "CREATE ROLE %s LOGIN" % r)
    close(admin)
    jobs = {}
    for d in dbs:
        c = new_db(d)
        one(c, "SELECT import_model('multi30k_sentence_de_en')")
        for i, r in enumerate(("tf_p_alice", "tf_p_bob")):
            t = "t_%s" % r
            fill(c, t, 1500 + 300 * i, 300)
            one(c, "ALTER TABLE %s ADD COLUMN v real[]" % t)
            # every committed write of a new value, to find one written twice
            one(c, "CREATE TABLE %s_log (id int, col text)" % t)
            one(c, "CREATE FUNCTION %s_log() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN "
                   "IF NEW.en IS DISTINCT FROM OLD.en THEN INSERT INTO %s_log VALUES (NEW.id, 'en'); END IF; "
                   "IF NEW.v IS DISTINCT FROM OLD.v THEN INSERT INTO %s_log VALUES (NEW.id, 'v'); END IF; "
                   "RETURN NEW; END $f$" % (t, t, t))
            one(c, "CREATE TRIGGER log BEFORE UPDATE ON %s FOR EACH ROW EXECUTE FUNCTION %s_log()" % (t, t))
            for o in (t, t + "_log", "FUNCTION %s_log()" % t):
                one(c, "ALTER %s OWNER TO %s" % (o if o.startswith("FUNCTION") else "TABLE " + o, r))
            one(c, "SET ROLE %s" % r)
            jobs[(d, t, "en")] = one(c, "SELECT translate_column(%s, 'de', 'en', %s, keep_in_sync => %s)", t, MODEL, i == 0)
            jobs[(d, t, "v")] = one(c, "SELECT embed_column(%s, 'de', 'v', 'multi30k_sentence_de_en')", t)
            one(c, "RESET ROLE")
        close(c)
    time.sleep(1)
    C.restart()
    # every database looked at before any is used: job_workers() sees the whole cluster, and the
    # workers that p1's first use starts may run before p2 is looked at (80 ms later)
    for d in dbs:
        c = connect_retry(d)
        if job_workers(c):
            raise Failure("plural: job workers run after a clean restart with no use: %s" % job_workers(c))
        close(c)
    for d in dbs:
        c = connect_retry(d)
        one(c, "SELECT transformer_version()")       # the first use of the database
        close(c)
    c = connect_retry("p1")
    deadline = time.time() + 60
    while not job_workers(c) and time.time() < deadline:
        time.sleep(0.1)
    workers = job_workers(c)
    close(c)
    if not workers:
        raise Failure("plural: no job worker ran within 60 s of the first use after a clean restart")
    before = C.crash_restarts()
    os.kill(workers[0][0], signal.SIGKILL)
    deadline = time.time() + 30
    while time.time() < deadline and C.crash_restarts() == before:
        time.sleep(0.05)
    # then kill -9 of the postmaster itself, mid-backfill (once workers run again): started again, the first use resumes
    deadline, pending = time.time() + 30, 0
    while time.time() < deadline:
        try:
            c = connect_retry("p1")
            pending = one(c, "SELECT sum(rows_pending) FROM transformer_jobs") or 0
            running = job_workers(c)
            close(c)
            if running or not pending:
                break
        except psycopg2.Error:
            pass
        time.sleep(0.1)
    with open(os.path.join(C.data, "postmaster.pid")) as f:
        pm = int(f.readline())
    children = [int(p) for p in subprocess.run(["pgrep", "-P", str(pm)], stdout=subprocess.PIPE,
                                               text=True).stdout.split()]
    os.kill(pm, signal.SIGKILL)
    # its children leave once they see the postmaster gone; then the server starts again
    deadline = time.time() + 60
    while time.time() < deadline and any(os.path.exists("/proc/%d" % p) for p in children):
        time.sleep(0.2)
    C.start()
    for d in dbs:
        c = connect_retry(d)
        one(c, "SELECT transformer_version()")       # the first use after the start
        close(c)
    t0 = time.time()
    states = {}
    while time.time() - t0 < 240:
        try:
            states = {}
            for d in dbs:
                c = connect_retry(d)
                for (jd, t, col), job in jobs.items():
                    if jd == d:
                        states[(jd, t, col)] = (one(c, "SELECT state || ' ' || rows_pending FROM transformer_jobs WHERE id = %s", job))
                close(c)
            if all(v in ("done 0", "syncing 0") for v in states.values()):
                break
        except psycopg2.Error:
            pass
        time.sleep(0.5)
    if not all(v in ("done 0", "syncing 0") for v in states.values()):
        raise Failure("plural: after a clean restart and a crash restart, not every job finished: %s" % states)
    for d in dbs:
        c = connect(d)
        for r in ("tf_p_alice", "tf_p_bob"):
            one(c, "INSERT INTO t_%s (id, de) VALUES (100000, 'Ein Hund schläft im Garten.')" % r)
        close(c)
    for (d, t, col), job in jobs.items():
        c = connect(d)
        if one(c, "SELECT keep_in_sync FROM transformer_jobs WHERE id = %s", job):
            one(c, "SELECT wait_for_job(%s, '2 min')", job)
        close(c)
    for d in dbs:
        c = connect(d)
        for i, r in enumerate(("tf_p_alice", "tf_p_bob")):
            t = "t_%s" % r
            bad = one(c, "SELECT count(*) FROM %s WHERE %s en IS DISTINCT FROM translate(de, %%s)"
                         % (t, "id < 100000 AND" if i == 1 else ""), MODEL)
            badv = one(c, "SELECT count(*) FROM %s WHERE v IS NULL OR (SELECT max(abs(a - b)) FROM "
                          "unnest(v, embed(de, 'multi30k_sentence_de_en')) u(a, b)) > 1e-6" % t)
            if bad or badv:
                raise Failure("plural: %s.%s: %d rows not translated, %d vectors wrong" % (d, t, bad, badv))
        close(c)
    for d in dbs:
        c = connect(d)
        for r in ("tf_p_alice", "tf_p_bob"):
            twice = q(c, "SELECT id, col, count(*) FROM t_%s_log GROUP BY id, col HAVING count(*) > 1" % r)
            missing = one(c, "SELECT count(*) FROM t_%s t WHERE NOT EXISTS (SELECT FROM t_%s_log l WHERE l.id = t.id "
                             "AND l.col = 'v')" % (r, r))
            if twice or missing:
                raise Failure("plural: %s.t_%s: written twice %s, %d rows without a logged vector write"
                              % (d, r, twice[:5], missing))
        close(c)
    log("jobs: several jobs: 2 databases x 2 roles x (translate, embed), 8 jobs; a clean restart resumed by the first use "
        "of each database, a kill -9 of a worker (crash restart, no use) and of the postmaster (%s rows pending; started "
        "again, first use); all done %.1f s after it, no value written twice, and rows inserted later done by every "
        "synced job" % (pending, time.time() - t0))


# ------------------------------------------------------------------ 7. the cap and the fair shares
def scenario_fair():
    """transformer.max_job_workers 2: one role's 7 jobs with backlogs, then another role's job.
    Never more than 2 job workers; the second role's job gets a worker and finishes while the
    first role's backlog is still pending; parallel query still launches workers; and once
    every queue is empty, no job worker is left (idle syncing jobs hold no slot)."""
    admin = connect("postgres")
    one(admin, "LOAD 'transformer'")           # its settings exist once the library is loaded
    one(admin, "ALTER SYSTEM SET transformer.max_job_workers = 2")
    one(admin, "SELECT pg_reload_conf()")
    for r in ("tf_f_many", "tf_f_one"):
        one(admin, "DROP ROLE IF EXISTS %s" % r)
        one(admin, "CREATE ROLE %s LOGIN" % r)
    close(admin)
    try:
        c = new_db("s7")
        for i in range(7):
            fill(c, "m%d" % i, 2000 + 300 * i, 300)
            one(c, "ALTER TABLE m%d OWNER TO tf_f_many" % i)
        fill(c, "o", 4200, 40)
        one(c, "ALTER TABLE o OWNER TO tf_f_one")
        one(c, "CREATE TABLE big AS SELECT g AS x FROM generate_series(1, 2000000) g")
        one(c, "ANALYZE big")
        one(c, "SET ROLE tf_f_many")
        many = [one(c, "SELECT translate_column('m%d', 'de', 'en', %%s, workers => 2)" % i, MODEL) for i in range(7)]
        one(c, "RESET ROLE")
        most, samples = 0, 0
        deadline = time.time() + 30
        while len(job_workers(c)) < 2 and time.time() < deadline:
            time.sleep(0.05)
        one(c, "SET ROLE tf_f_one")
        t0 = time.time()
        o = one(c, "SELECT translate_column('o', 'de', 'en', %s)", MODEL)
        one(c, "RESET ROLE")
        o_done = None
        while time.time() - t0 < 120 and o_done is None:
            n = len(job_workers(c))
            most, samples = max(most, n), samples + 1
            if one(c, "SELECT state FROM transformer_jobs WHERE id = %s", o) == "syncing":
                o_done = time.time() - t0
            time.sleep(0.05)
        many_pending = one(c, "SELECT sum(rows_pending) FROM transformer_jobs WHERE owner = 'tf_f_many'::regrole")
        one(c, "SET max_parallel_workers_per_gather = 2")
        one(c, "SET parallel_setup_cost = 0")
        one(c, "SET parallel_tuple_cost = 0")
        plan = one(c, "EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM big")
        launched = plan[0]["Plan"].get("Plans", [{}])[0].get("Workers Launched", 0)
        if o_done is None:
            raise Failure("fair shares: the other role's job did not finish within 120 s while 7 jobs of one role ran: %s"
                          % job_row(c, o))
        if not many_pending:
            raise Failure("fair shares: the 7 jobs were done before the other role's job (%.1f s): nothing was shown"
                          % o_done)
        if most > 2:
            raise Failure("fair shares: %d job workers at once with transformer.max_job_workers 2" % most)
        if launched < 1:
            raise Failure("fair shares: a parallel query launched no worker while the jobs ran: %s" % plan)
        for j in many:
            one(c, "SELECT wait_for_job(%s, '5 min')", j)
        deadline = time.time() + 20
        while job_workers(c) and time.time() < deadline:
            time.sleep(0.1)
        left = job_workers(c)
        if left:
            raise Failure("fair shares: job workers left with every queue empty: %s" % left)
        bad = sum(one(c, "SELECT count(*) FROM %s WHERE en IS DISTINCT FROM translate(de, %%s)" % t, MODEL)
                  for t in ["m%d" % i for i in range(7)] + ["o"])
        if bad:
            raise Failure("fair shares: %d rows not translated" % bad)
        close(c)
        log("jobs: fair shares: max_job_workers 2, one role's 7 jobs (2,100 rows) running: another role's job done "
            "%.1f s after it was declared, with %d rows of the 7 still pending; at most %d job workers in %d samples; "
            "a parallel query launched %d workers meanwhile; no worker left once the queues were empty"
            % (o_done, many_pending, most, samples, launched))
    finally:
        admin = connect_retry("postgres")
        one(admin, "LOAD 'transformer'")
        one(admin, "ALTER SYSTEM RESET transformer.max_job_workers")
        one(admin, "SELECT pg_reload_conf()")
        close(admin)


# ------------------------------------------------------------------ main

# ------------------------------------------------------------------ 8. fine_tune() across a crash and a restart
FT_ARGS = ("'SELECT de, en FROM t8 ORDER BY n', max_steps => 40, batch_size => 8, learning_rate => 1e-4, "
           "warmup_steps => 10, dropout => 0.1, seed => 3, average_last => 2")


def ft_digest(c, model):
    return one(c, "SELECT md5(string_agg(name || md5(data), ',' ORDER BY name, part)) FROM transformer_tensors "
                  "WHERE model = %s", model)


def ft_step(c, job):
    return one(c, "SELECT coalesce(step, 0) FROM transformer_jobs WHERE id = %s", job)


def scenario_fine_tune():
    c = new_db("s8")
    one(c, "SELECT transformer_version()")     # the library, whose setting ALTER SYSTEM checks
    one(c, "ALTER SYSTEM SET transformer.checkpoint_interval = 1")
    one(c, "SELECT pg_reload_conf()")
    one(c, "CREATE TABLE t8 (n int PRIMARY KEY, de text, en text)")
    # a pair is a German line and the next one: what is learned does not matter, that it resumes exactly does
    for i in range(120):
        one(c, "INSERT INTO t8 VALUES (%s, %s, %s)", i, LINES[2000 + i], LINES[2001 + i])
    whole = one(c, "SELECT fine_tune(%s, 'ft_whole', " + FT_ARGS + ")", MODEL)
    close(c)
    poll_ft(whole, 120, "fine_tune (uninterrupted)")
    c = connect("s8")
    want = ft_digest(c, "ft_whole")
    job = one(c, "SELECT fine_tune(%s, 'ft_resumed', " + FT_ARGS + ")", MODEL)
    close(c)
    c = connect("s8")
    t0 = time.time()
    while time.time() - t0 < 60 and (ft_step(c, job) < 10 or
                                     one(c, "SELECT count(*) FROM transformer_job_checkpoints WHERE job = %s", job) == 0):
        time.sleep(0.05)
    killed_at = ft_step(c, job)
    workers = job_workers(c, job)
    if not workers:
        raise Failure("fine_tune: job %s at step %s has no worker" % (job, killed_at))
    close(c)
    kill9_and_wait_restart(workers[0][0], "fine_tune")
    c = connect_retry("s8")
    t0 = time.time()
    while time.time() - t0 < 60 and ft_step(c, job) < killed_at + 10:
        time.sleep(0.05)
    restarted_at = ft_step(c, job)
    close(c)
    C.restart()
    c = connect_retry("s8")
    one(c, "SELECT translate('Ein Hund.', %s)", MODEL)     # the first use resumes the jobs
    close(c)
    poll_ft(job, 120, "fine_tune (killed, then restarted)")
    c = connect("s8")
    got = ft_digest(c, "ft_resumed")
    resumes = C.log_text().count("transformer job %s resumes fine-tuning" % job)
    one(c, "SELECT transformer_version()")
    one(c, "ALTER SYSTEM RESET transformer.checkpoint_interval")
    one(c, "SELECT pg_reload_conf()")
    close(c)
    if got != want:
        raise Failure("fine_tune: the run killed at step %s and restarted at step %s ends with other weights than "
                      "the uninterrupted run (%s, %s)" % (killed_at, restarted_at, got, want))
    if resumes < 2:
        raise Failure("fine_tune: the server log shows %d resumes from a saved state, not 2" % resumes)
    log("jobs: fine_tune: kill -9 of the worker at step %d, a clean restart at step %d; resumed from its saved state "
        "%d times; the 40 steps' weights equal the uninterrupted run's bit for bit" % (killed_at, restarted_at, resumes))


def poll_ft(job, timeout, what):
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            c = connect("s8")
            state, err = q(c, "SELECT state, last_error FROM transformer_jobs WHERE id = %s", job)[0]
            close(c)
        except psycopg2.Error:
            time.sleep(0.5)
            continue
        if state == "done":
            return
        if state in ("failed", "cancelled"):
            raise Failure("%s: job %s %s: %s" % (what, job, state, err))
        time.sleep(0.2)
    raise Failure("%s: job %s not done within %d s" % (what, job, timeout))


def watchdog():
    time.sleep(WATCHDOG_SECONDS)
    log("jobs: FAILED: still running after %d s; stopping" % WATCHDOG_SECONDS)
    if C is not None:
        log("--- server log (tail) ---\n" + C.log_tail())
        C.cleanup()
    os._exit(1)


def main():
    global C, SAVE_LOG
    args, only = sys.argv[1:], None
    while args:
        if args[0] == "--log" and len(args) > 1:
            SAVE_LOG = os.path.abspath(args[1])
        elif args[0] == "--only" and len(args) > 1 and re.fullmatch(r"[1-8](,[1-8])*", args[1]):
            only = set(int(n) for n in args[1].split(","))
        else:
            sys.exit("usage: test/jobs/run.py [--log FILE] [--only N[,N...]]\n"
                     "  --log FILE  a copy of the whole server log;  --only  the scenarios 1-8 to run")
        args = args[2:]
    if os.geteuid() != 0:
        sys.exit("jobs: run as root (the cluster runs as postgres, and the test kills its processes)")
    t0 = time.time()
    if os.path.exists(TRAIN_DE):
        with gzip.open(TRAIN_DE, "rt", encoding="utf-8") as f:
            for i, line in enumerate(f):
                if i >= 5000:
                    break
                LINES.append(line.rstrip("\n"))
    else:
        # a clone with nothing beside it: sentences of a small grammar of our own
        log("jobs: %s is not there: German sentences from a small grammar instead" % os.path.normpath(TRAIN_DE))
        subj = ["Ein Mann", "Eine Frau", "Ein Kind", "Ein Hund", "Zwei Männer", "Eine Gruppe von Menschen", "Ein Junge",
                "Ein Mädchen", "Eine ältere Frau", "Ein Arbeiter"]
        verb = ["steht", "sitzt", "läuft", "spielt", "wartet", "arbeitet", "lacht", "liest ein Buch", "fährt Fahrrad",
                "schläft"]
        place = ["auf der Straße", "im Park", "am Strand", "vor einem Gebäude", "in einer Küche", "auf einer Bank",
                 "im Schnee", "neben einem Auto", "in der Stadt", "auf dem Feld"]
        for i in range(5000):
            LINES.append("%s %s %s." % (subj[i % 10], verb[(i // 10) % 10], place[(i // 100) % 10])
                         + ("" if i < 1000 else " Nummer %d." % i))
    C = Cluster()
    threading.Thread(target=watchdog, daemon=True).start()
    passed, failed = 0, []
    try:
        C.init()
        C.start()
        c = connect("postgres")
        one(c, "CREATE DATABASE tmpl")
        close(c)
        c = connect("tmpl")
        one(c, "SET client_min_messages = warning")
        one(c, "CREATE EXTENSION transformer")
        one(c, "SELECT import_model(%s)", MODEL)
        version = one(c, "SELECT extversion FROM pg_extension WHERE extname = 'transformer'")
        close(c)
        log("jobs: private cluster on port %d, transformer %s, %s" % (C.port, version, MODEL))
        # each scenario in its own database: one that fails does not keep the others from running
        for n, scenario in enumerate(SCENARIOS, 1):
            if only is not None and n not in only:
                continue
            log_from = len(C.log_text())
            try:
                scenario()
                passed += 1
            except Exception as e:      # noqa: BLE001 - Failure, psycopg2's, or a bug of this script
                failed.append(n)
                if isinstance(e, Failure):
                    log("jobs: FAILED: %s" % e)
                else:
                    log("jobs: FAILED: scenario %d (%s) with an exception:\n%s"
                        % (n, scenario.__name__, traceback.format_exc()))
                log("--- server log during scenario %d (tail) ---\n%s\n---"
                    % (n, "\n".join(C.log_text()[log_from:].splitlines()[-60:])))
                connect_retry("postgres", within=30).close()    # the server is up for the next one
    except Exception as e:      # noqa: BLE001 - the cluster itself
        log("jobs: FAILED: %s" % (e if isinstance(e, Failure) else traceback.format_exc()))
        log("--- server log (tail) ---\n" + C.log_tail())
        failed.append(0)
    finally:
        if SAVE_LOG:
            with open(SAVE_LOG, "w") as f:
                f.write(C.log_text())
        C.cleanup()
    log("jobs: %.0f s%s" % (time.time() - t0, "; failed: scenario %s" % ", ".join(str(n) for n in failed if n)
                                               if failed else ""))
    log("%d passed, %d failed" % (passed, len(failed)))
    return 1 if failed else 0


SCENARIOS = [scenario_kill_loop, scenario_crash_no_use, scenario_clean_restart, scenario_preload, scenario_no_slot,
             scenario_plural, scenario_fair, scenario_fine_tune]


if __name__ == "__main__":
    sys.exit(main())
