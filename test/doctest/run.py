#!/usr/bin/python3
"""Every SQL example of the manual runs, and shows what it gives (make doctest).

Reads README.md and docs/*.md (that order, then each page top to bottom) and
runs each page's fenced ```sql blocks in one psql session on a fresh
database of its own (createdb; dropped afterwards), so a block sees the
tables, settings and psql variables of the blocks above it.  The harness
creates nothing in that database: each page creates the extension itself,
in its first block or in a setup comment (below).

A ```text block that follows a ```sql block (blank lines between at most) is
what the block prints, compared exactly: psql's aligned format without the
"(n rows)" footer (psql -X -q -P footer=off -P pager=off), each line's trailing
spaces dropped, blank lines around the block dropped, and psql's
"psql:<stdin>:N: " prefix taken off error lines.  That is the whole
normalisation.  A block that shows no output must still run without an
error.

Markers, HTML comments, which the rendered page does not show:

  <!-- doctest: skip: REASON -->       the next ```sql block is not run (shown
                                       in the summary with its reason)
  <!-- doctest: error -->              the next ```sql block must raise an error
                                       (its ```text, if any, compared as usual)
  <!-- doctest: stand-in PATH DIR -->  from here to the end of the page, PATH in
                                       the blocks is replaced by the absolute path
                                       of DIR (relative to the repository): a
                                       fixture stands in for a model the page
                                       names; a block using it is skipped, with
                                       that reason, where DIR does not exist
  <!-- doctest: setup                  SQL run at this point, not shown on the
  ...SQL...                            page (a table the examples assume)
  -->

The links of every page are checked too: a relative link must name a file of
the repository, and its #anchor a heading of that page.

    test/doctest/run.py                  (make doctest; a server: PGHOST etc.)
    test/doctest/run.py --page README.md --page docs/jobs.md
    test/doctest/run.py --list           the blocks, and what is done with each
    test/doctest/run.py --page docs/jobs.md --print   what each block gives

Exit status 1 on any failure, each named by page and line.
"""
import argparse
import difflib
import glob
import os
import re
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PAGE_TIMEOUT = 600
MARK = "@@doctest block %d@@"


class Block:
    def __init__(self, page, line, sql):
        self.page, self.line, self.sql = page, line, sql
        self.expected = None        # lines of the ```text block after it
        self.skip = None            # the reason
        self.error = False          # an error is expected
        self.setup = False          # from a setup comment


def pages():
    return ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))


def parse(page):
    """The blocks of a page, in order."""
    lines = open(os.path.join(ROOT, page), encoding="utf-8").read().split("\n")
    blocks, standins = [], []
    pending_skip, pending_error = None, False
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^<!-- doctest: (.*?)\s*(-->)?$", line)
        if m:
            what, closed = m.group(1), m.group(2)
            if what.startswith("skip:"):
                pending_skip = what[5:].strip()
            elif what == "error":
                pending_error = True
            elif what.startswith("stand-in "):
                parts = what.split()
                if len(parts) != 3:
                    sys.exit(f"{page}:{i + 1}: doctest: stand-in takes PATH DIR")
                standins.append((parts[1], parts[2]))
            elif what == "setup" and not closed:
                j = i + 1
                while j < len(lines) and lines[j].strip() != "-->":
                    j += 1
                b = Block(page, i + 1, "\n".join(lines[i + 1:j]))
                b.setup = True
                b.standins = list(standins)
                blocks.append(b)
                i = j
            else:
                sys.exit(f"{page}:{i + 1}: unknown doctest marker: {line}")
            i += 1
            continue
        if line.startswith("```"):
            lang = line[3:].strip()
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            body = lines[i + 1:j]
            if lang == "sql":
                b = Block(page, i + 1, "\n".join(body))
                b.skip, b.error, b.standins = pending_skip, pending_error, list(standins)
                pending_skip, pending_error = None, False
                # its output: a ```text block after blank lines only
                k = j + 1
                while k < len(lines) and not lines[k].strip():
                    k += 1
                if k < len(lines) and lines[k].strip() == "```text":
                    e = k + 1
                    while e < len(lines) and not lines[e].startswith("```"):
                        e += 1
                    b.expected = lines[k + 1:e]
                    j = e
                blocks.append(b)
            elif pending_skip or pending_error:
                sys.exit(f"{page}:{i + 1}: a doctest marker before a block that is not ```sql")
            i = j + 1
            continue
        i += 1
    return blocks


def apply_standins(b):
    sql = b.sql
    for path, d in b.standins:
        if path in sql:
            full = os.path.join(ROOT, d)
            if not os.path.exists(full):
                return None, f"its stand-in {d} does not exist here"
            sql = sql.replace(path, os.path.normpath(full) + ("/" if path.endswith("/") else ""))
    return sql, None


def tidy(lines):
    out = [re.sub(r"^psql:<stdin>:\d+: ", "", l).rstrip() for l in lines]
    while out and not out[0]:
        out.pop(0)
    while out and not out[-1]:
        out.pop()
    return out


ERROR_LINE = re.compile(r"^(ERROR|FATAL|PANIC):|^error:|^invalid command|^psql: error|^unterminated ")


def run_page(page, blocks, keep=False, show=False):
    """Failures (text), and counts."""
    failures, counts = [], {"run": 0, "compared": 0}
    db = "doctest_" + re.sub(r"[^a-z0-9]", "_", page.lower().replace(".md", ""))
    subprocess.run(["dropdb", "--force", "--if-exists", db], check=True, capture_output=True)
    subprocess.run(["createdb", "-E", "UTF8", "-T", "template0", db], check=True, capture_output=True)
    script, todo = [], []
    for n, b in enumerate(blocks):
        if b.skip:
            continue
        sql, why = apply_standins(b)
        if sql is None:
            b.skip = why
            continue
        script.append("\\echo '" + MARK % n + "'")
        script.append(sql)
        # a block's last statement may lack its semicolon: it is the page's mistake, but it
        # must not run glued to the next block
        script.append(";" if not sql.rstrip().endswith((";", "\\gset")) and not sql.rstrip().startswith("\\") else "")
        todo.append(n)
    script.append("\\echo '" + MARK % len(blocks) + "'")
    env = dict(os.environ, PGDATABASE=db, PGOPTIONS=(os.environ.get("PGOPTIONS", "") + " -c client_min_messages=notice"))
    try:
        p = subprocess.run(["stdbuf", "-oL", "-eL", "psql", "-X", "-q", "-v", "ON_ERROR_STOP=0", "-P", "footer=off",
                            "-P", "pager=off", "-d", db],
                           input="\n".join(script) + "\n", stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, env=env, timeout=PAGE_TIMEOUT, cwd=ROOT)
        out = p.stdout
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        failures.append(f"{page}: timed out after {PAGE_TIMEOUT} s")
    # the output of each block: from its marker to the next
    parts, cur = {}, None
    for line in out.split("\n"):
        m = re.match(r"^@@doctest block (\d+)@@$", line)
        if m:
            cur = int(m.group(1))
            parts[cur] = []
        elif cur is not None:
            parts[cur].append(line)
        elif line.strip():
            failures.append(f"{page}: psql said before the first block: {line}")
    for n in todo:
        b = blocks[n]
        where = f"{page}:{b.line}" + (" (setup)" if b.setup else "")
        if n not in parts:
            failures.append(f"{where}: never ran (psql stopped before it)")
            continue
        counts["run"] += 1
        got = tidy(parts[n])
        if show:
            print(f"---- {where}\n" + "\n".join(got), flush=True)
        errors = [l for l in got if ERROR_LINE.match(l)]
        if b.error and not errors:
            failures.append(f"{where}: should have raised an error, and did not")
        if errors and not b.error and b.expected is None:
            failures.append(f"{where}: " + " | ".join(errors[:3]) + ("\n    " + "\n    ".join(got[:20])))
            continue
        if b.expected is not None:
            counts["compared"] += 1
            want = tidy(b.expected)
            if got != want:
                diff = difflib.unified_diff(want, got, "shown on the page", "what it gives", lineterm="", n=2)
                failures.append(f"{where}: the output differs from the page's\n    " + "\n    ".join(diff))
    if not keep:
        subprocess.run(["dropdb", "--force", "--if-exists", db], capture_output=True)
    return failures, counts


def slug(heading):
    h = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return h.replace(" ", "-")


def anchors(path):
    out, fence = set(), False
    for l in open(path, encoding="utf-8").read().split("\n"):
        if l.startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"^#{1,6} (.*)$", l)
        if m:
            out.add(slug(m.group(1)))
    return out


def check_links(page_list):
    """Relative links: the file exists, and the anchor is a heading of it."""
    failures, n = [], 0
    for page in page_list:
        text = open(os.path.join(ROOT, page), encoding="utf-8").read()
        fence = False
        for ln, line in enumerate(text.split("\n"), 1):
            if line.startswith("```"):
                fence = not fence
            if fence:
                continue
            for m in re.finditer(r"\]\(([^)\s]+)\)", line):
                target = m.group(1)
                if re.match(r"^[a-z]+:", target):
                    continue
                n += 1
                path, _, anchor = target.partition("#")
                full = os.path.normpath(os.path.join(ROOT, os.path.dirname(page), path)) if path else os.path.join(ROOT, page)
                if not os.path.exists(full):
                    failures.append(f"{page}:{ln}: a link to {target}: no such file")
                elif anchor and (not full.endswith(".md") or anchor not in anchors(full)):
                    failures.append(f"{page}:{ln}: a link to {target}: no such heading")
        # a link whose text is cut by a line break
        for m in re.finditer(r"\]\(\s*\n", text):
            failures.append(f"{page}: a link target broken across lines near offset {m.start()}")
    return failures, n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--page", action="append", help="only this page (README.md, docs/jobs.md); repeatable")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep each page's database")
    ap.add_argument("--print", action="store_true", help="print what each block gives (to write a page's ```text)")
    args = ap.parse_args()
    t0 = time.time()
    page_list = pages()
    if args.page:
        unknown = set(args.page) - set(page_list)
        if unknown:
            sys.exit(f"doctest: no such page: {sorted(unknown)}")
        page_list = [p for p in page_list if p in args.page]
    parsed = {p: parse(p) for p in page_list}
    if args.list:
        for p, blocks in parsed.items():
            for b in blocks:
                what = "setup" if b.setup else "skip: " + b.skip if b.skip else \
                    "run, output compared" if b.expected is not None else "run"
                print(f"{p}:{b.line}: {what}" + (" (an error expected)" if b.error else ""))
        return 0
    failures = []
    totals = {"pages": 0, "run": 0, "compared": 0, "skipped": 0}
    skips = []
    for p, blocks in parsed.items():
        if not blocks:
            continue
        t = time.time()
        f, c = run_page(p, blocks, args.keep, args.print)
        failures += f
        totals["pages"] += 1
        totals["run"] += sum(1 for b in blocks if not b.setup and not b.skip)
        totals["compared"] += c["compared"]
        sk = [b for b in blocks if b.skip]
        totals["skipped"] += len(sk)
        skips += [f"{b.page}:{b.line}: {b.skip}" for b in sk]
        n_setup = sum(1 for b in blocks if b.setup)
        print(f"doctest: {p}: {sum(1 for b in blocks if not b.setup and not b.skip)} blocks run"
              f"{f' (and {n_setup} setup)' if n_setup else ''}, {c['compared']} outputs compared, {len(sk)} skipped, "
              f"{time.time() - t:.1f} s" + (f", {len(f)} FAILED" if f else ""), flush=True)
    lf, nlinks = check_links(page_list)
    failures += lf
    print(f"doctest: {totals['pages']} pages, {totals['run']} blocks run, {totals['compared']} outputs compared, "
          f"{totals['skipped']} skipped; {nlinks} links checked; {time.time() - t0:.0f} s")
    for s in skips:
        print("  skipped: " + s)
    if failures:
        print("\n".join("doctest: FAILED: " + f for f in failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
