#!/usr/bin/python3
"""Fail on a circle in the include graph of src/.

Each `#include "..."` line of a file under src/ (comments and #if ignored:
every quoted include counts) is resolved as the compiler does: first beside
the including file, then in the build's include directories (src/core,
src/pg).  Headers found nowhere under src/ are not ours and are skipped.
A circle (a.h includes b.h, which includes a.h) is printed and fails.

Usage: tools/check_include_cycles.py [SRC_DIR]     (make check-cycles)
"""
import os
import re
import sys

SRC = sys.argv[1] if len(sys.argv) > 1 else "src"
INCLUDE_DIRS = [os.path.join(SRC, "core"), os.path.join(SRC, "pg")]
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def resolve(name, including):
    for d in [os.path.dirname(including)] + INCLUDE_DIRS:
        p = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(p):
            return p
    return None


def graph():
    files = []
    for root, _, names in os.walk(SRC):
        files += [os.path.join(root, n) for n in names if n.endswith((".c", ".h"))]
    edges = {}
    for f in sorted(files):
        text = COMMENT.sub("", open(f, encoding="utf-8", errors="replace").read())
        deps = []
        for name in INCLUDE.findall(text):
            p = resolve(name, f)
            if p is not None and p not in deps:
                deps.append(p)
        edges[os.path.normpath(f)] = deps
    return edges


def strong_components(edges):
    """Tarjan's strongly connected components of edges ({node: [node, ...]}
    or {node: {node: ...}}) that hold a circle: two nodes or more, or one
    that reaches itself.  Also used by check_call_graph.py."""
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        # iterative, so a deep graph cannot overflow Python's stack
        work = [(v, iter(edges.get(v, [])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(edges.get(w, []))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1 or node in edges.get(node, []):
                    comps.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return comps


def cycles(edges):
    """One circle per strongly connected component, as a path."""
    out = []
    for comp in strong_components(edges):
        members = set(comp)
        # a shortest way back from the component's first file to itself
        start = comp[0]
        prev, queue, found = {start: None}, [start], None
        while queue and found is None:
            nxt = []
            for u in queue:
                for w in edges.get(u, []):
                    if w == start:
                        found = u
                        break
                    if w in members and w not in prev:
                        prev[w] = u
                        nxt.append(w)
                if found is not None:
                    break
            queue = nxt
        path, u = [], found
        while u is not None:
            path.append(u)
            u = prev[u]
        path.reverse()
        out.append((path + [start], comp))
    return out


def main():
    edges = graph()
    found = cycles(edges)
    for path, comp in found:
        print("include circle: " + " -> ".join(path))
        if len(comp) > len(path) - 1:
            print("  (files in the same circle: " + ", ".join(comp) + ")")
    if found:
        print(f"check-cycles: FAILED: {len(found)} circle(s) in the include graph of {SRC}/",
              file=sys.stderr)
        return 1
    n_edges = sum(len(v) for v in edges.values())
    print(f"check-cycles: ok, {len(edges)} files and {n_edges} includes in {SRC}/, no circle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
