#!/usr/bin/env python3
"""Fails when the files of a Rust crate import each other in a cycle.

usage: check-import-cycles.py SRC_DIR...

Reads `crate::a::b`, `crate::{a, b}` and `super::a` paths (comments left
out) and maps each to the file that defines the module it names; a module
imported through its parent's re-export counts as an import of the parent.
Prints every strongly connected set of two or more files with the imports
that tie it, and exits 1 if there is any.
"""
import collections
import os
import re
import sys


def graph(root):
    files = {}
    for d, _, fs in os.walk(root):
        for f in fs:
            if f.endswith(".rs"):
                p = os.path.join(d, f)
                parts = os.path.relpath(p, root)[:-3].split("/")
                if parts[-1] in ("mod", "lib"):
                    parts = parts[:-1]
                files[tuple(parts)] = p

    def resolve(path):
        parts = list(path)
        while parts:
            if tuple(parts) in files:
                return files[tuple(parts)]
            parts.pop()
        return None

    edges = collections.defaultdict(set)
    for mod, p in files.items():
        src = re.sub(r"//[^\n]*", "", open(p).read())
        targets = [m.group(1).split("::") for m in re.finditer(r"\bcrate::((?:\w+::)*\w+)", src)]
        for m in re.finditer(r"\bcrate::\{([^;]*)\}", src):
            targets += [[n] for n in re.findall(r"(?:^|[,{]\s*)(\w+)", m.group(1))]
        for m in re.finditer(r"\bsuper::((?:\w+::)*\w+)", src):
            targets.append(list(mod[:-1]) + m.group(1).split("::"))
        for t in targets:
            f = resolve(t)
            if f and f != p:
                edges[p].add(f)
    return files, edges


def cycles(files, edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                out.append(sorted(scc))

    for v in files.values():
        if v not in index:
            visit(v)
    return out


def main():
    bad = 0
    for root in sys.argv[1:]:
        files, edges = graph(root)
        found = cycles(files, edges)
        for scc in found:
            bad += 1
            print(f"{root}: import cycle of {len(scc)} files:")
            members = set(scc)
            for a in scc:
                for b in sorted(edges[a] & members):
                    print(f"  {a} -> {b}")
        print(f"{root}: {len(files)} files, {sum(len(e) for e in edges.values())} imports, {len(found)} cycles")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
