#!/usr/bin/python3
"""The manual's reference against the catalog, in both directions (issue 23).

The "Catalog" table of docs/reference.md lists every function of the
extension with its signature, result, kind, strictness, volatility, parallel
safety and whether PUBLIC may execute it.  This reads the same from pg_proc
in a fresh database (CREATE EXTENSION transformer) and fails on any
difference either way.  It also checks that every function of the catalog is
named in the reference (docs/reference.md above the table, or docs/jobs.md
for the job functions), and that every SQLSTATE that README.md or a page of
docs/ names is asserted by code in a pgTAP file (throws_ok(..., 'XXXXX', ...)).

    test/readme/check.py            (make readme-check; needs a server: PGHOST etc.)
    test/readme/check.py --print    the catalog table as it should be, from the server
"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DB = "transformer_readme"

QUERY = r"""
SELECT p.oid::regprocedure::text,
       CASE WHEN p.proretset AND p.prorettype <> 'record'::regtype THEN 'SETOF ' || format_type(p.prorettype, NULL)
            ELSE pg_get_function_result(p.oid) END,
       CASE p.prokind WHEN 'a' THEN 'aggregate' ELSE 'function' END,
       CASE WHEN p.prokind = 'a' THEN '-' WHEN p.proisstrict THEN 'yes' ELSE 'no' END,
       CASE p.provolatile WHEN 'i' THEN 'immutable' WHEN 's' THEN 'stable' ELSE 'volatile' END,
       CASE p.proparallel WHEN 's' THEN 'safe' WHEN 'r' THEN 'restricted' ELSE 'unsafe' END,
       CASE WHEN has_function_privilege('public', p.oid, 'EXECUTE') THEN 'yes' ELSE 'no' END
FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'transformer'
ORDER BY 1
"""

HEADER = "| function | returns | kind | strict | volatility | parallel | PUBLIC may execute |"
REFERENCE = os.path.join("docs", "reference.md")      # the Catalog table, and the reference above it
JOBS = os.path.join("docs", "jobs.md")                # the job functions' reference


def psql(db, sql):
    out = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1", "-d", db, "-c", sql],
                         check=True, capture_output=True, text=True).stdout
    return [tuple(l.split("\t")) for l in out.splitlines() if l]


def catalog():
    subprocess.run(["dropdb", "--if-exists", DB], check=True, capture_output=True)
    subprocess.run(["createdb", DB], check=True, capture_output=True)
    try:
        psql(DB, "CREATE EXTENSION transformer")
        return psql(DB, QUERY)
    finally:
        subprocess.run(["dropdb", "--if-exists", DB], check=True, capture_output=True)


def row_text(r):
    return "| `%s` | `%s` | %s | %s | %s | %s | %s |" % r


def readme_catalog(text):
    """The rows of the Catalog table, as tuples."""
    i = text.find(HEADER)
    if i < 0:
        sys.exit("readme check: %s has no Catalog table (its header: %s)" % (REFERENCE, HEADER))
    rows = []
    for line in text[i:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 7:
            sys.exit("readme check: a Catalog row without 7 cells: " + line)
        rows.append(tuple(c[1:-1] if c.startswith("`") and c.endswith("`") else c for c in cells))
    return rows


def main():
    rows = catalog()
    if "--print" in sys.argv:
        print(HEADER)
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            print(row_text(r))
        return
    text = open(os.path.join(ROOT, REFERENCE), encoding="utf-8").read()
    documented = readme_catalog(text)
    failures = []
    for r in sorted(set(rows) - set(documented)):
        failures.append("in the catalog, not (so) in %s: %s" % (REFERENCE, row_text(r)))
    for r in sorted(set(documented) - set(rows)):
        failures.append("in %s, not (so) in the catalog: %s" % (REFERENCE, row_text(r)))

    # every function is named in the reference above the Catalog table (the
    # job functions in docs/jobs.md, "Translating a whole table")
    reference = open(os.path.join(ROOT, JOBS), encoding="utf-8").read() + text[:text.find(HEADER)]
    for r in rows:
        name = r[0].split("(")[0]
        if not re.search(r"`%s[(`]" % re.escape(name), reference):
            failures.append("not in the SQL reference: " + name)

    # every SQLSTATE the README or a page of the manual names is asserted by code in a pgTAP file
    pages = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    codes = set()
    for page in pages:
        codes |= set(re.findall(r"`([0-9A-Z]{5})`", open(page, encoding="utf-8").read()))
    codes = {c for c in codes if re.search(r"[0-9]", c) and not c.isdigit() or c.isdigit() and len(c) == 5}
    asserted = set()
    for f in glob.glob(os.path.join(ROOT, "test", "**", "*.sql"), recursive=True):
        asserted |= set(re.findall(r"'([0-9A-Z]{5})'", open(f, encoding="utf-8").read()))
    for c in sorted(codes - asserted):
        failures.append("SQLSTATE %s is in the README or docs/ but no pgTAP file asserts it" % c)

    if failures:
        print("\n".join("readme check: " + f for f in failures), file=sys.stderr)
        sys.exit(1)
    print("readme check: %d functions, each as %s says (signature, result, kind, strictness, volatility, "
          "parallel safety, EXECUTE for PUBLIC); %d SQLSTATEs of README.md and docs/, each asserted by a pgTAP test"
          % (len(rows), REFERENCE, len(codes)))


if __name__ == "__main__":
    main()
