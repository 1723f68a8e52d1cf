#!/usr/bin/python3
"""Fail on a circle between the C files of src/ through their calls.

The include check (check_include_cycles.py) sees headers only: two files
that call each other through one header each pass it.  This reads what the
linker reads.  For every object the build made under src/ (make first),
`nm` gives the external symbols it defines and those it uses; a use of a
symbol that another object defines is an edge from the user's file to the
definer's.  Functions and variables both count.  Every strongly connected
group of two or more files (Tarjan, check_include_cycles.py's) is a circle: it is printed with, for
each edge inside it, the names that make it, and the check fails.

Then the layers, bottom first (LAYERS): a file may call files of its own
layer and of the layers below it, never above.  A call up is printed with
its names and fails, and so does a file in no layer.

Usage: tools/check_call_graph.py [SRC_DIR]     (make check-calls)
"""
import os
import subprocess
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_include_cycles import strong_components  # noqa: E402


# bottom first: the folder of each layer under SRC_DIR
LAYERS = [
    ("core", "the numeric and text core: no PostgreSQL"),
    ("pg/base", "server files, our tables, arrays, the input limit"),
    ("pg/store/load", "the model store: rows -> memory -> shared files, tokenizers"),
    ("pg/store/import", "the model store: files -> rows"),
    ("pg/pipeline", "translate: sentences, batches, search, documents"),
    ("pg/jobs", "background jobs: rows, launching, sync triggers"),
    ("pg/sql", "SQL entry points and _PG_init"),
    ("worker", "background worker processes"),
]


def layer_of(src, obj):
    rel = os.path.relpath(obj, src)
    best = None
    for i, (folder, _) in enumerate(LAYERS):
        if os.path.dirname(rel) == folder:
            best = i
    return best


def symbols(obj, which):
    out = subprocess.run(["nm", which, "--extern-only", obj], check=True, capture_output=True, text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def edges_of(objs):
    defined = {o: symbols(o, "--defined-only") for o in objs}
    owner = defaultdict(set)
    for o, names in defined.items():
        for n in names:
            owner[n].add(o)
    edges = defaultdict(lambda: defaultdict(set))
    for o in objs:
        for n in symbols(o, "--undefined-only"):
            for d in owner.get(n, ()):
                if d != o:
                    edges[o][d].add(n)
    return edges


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "src"
    objs = sorted(os.path.join(r, f) for r, _, fs in os.walk(src) for f in fs if f.endswith(".o"))
    if not objs:
        print("check_call_graph: no objects under %s/: run make first" % src, file=sys.stderr)
        return 2
    edges = edges_of(objs)
    found = strong_components({o: edges[o] for o in objs})
    src_of = lambda o: o[:-2] + ".c"
    for i, comp in enumerate(found, 1):
        print("call circle %d: %s" % (i, ", ".join(src_of(o) for o in comp)))
        for a in comp:
            for b in comp:
                if b in edges[a]:
                    print("  %s -> %s: %s" % (src_of(a), src_of(b), ", ".join(sorted(edges[a][b]))))
    up = 0
    unplaced = [o for o in objs if layer_of(src, o) is None]
    for o in unplaced:
        print("file in no layer: %s (LAYERS: %s)" % (src_of(o), ", ".join(f for f, _ in LAYERS)))
    for a in objs:
        la = layer_of(src, a)
        for b, names in sorted(edges[a].items()):
            lb = layer_of(src, b)
            if la is not None and lb is not None and lb > la:
                up += 1
                print("call up: %s (%s) -> %s (%s): %s" % (src_of(a), LAYERS[la][0], src_of(b), LAYERS[lb][0],
                                                          ", ".join(sorted(names))))
    nedges = sum(len(v) for v in edges.values())
    print("check_call_graph: %d files in %d layers, %d edges between them, %d circle(s), %d call(s) up"
          % (len(objs), len(LAYERS), nedges, len(found), up))
    return 1 if found or up or unplaced else 0


if __name__ == "__main__":
    sys.exit(main())
