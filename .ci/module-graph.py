#!/usr/bin/env python3
"""Module import graph check: fails when modules import each other in a circle.

For every crate source folder it maps each file to its module path
(`lib.rs` -> the crate root, `a.rs` and `a/mod.rs` -> `a`, `a/b.rs` -> `a::b`),
reads the `crate::` and `super::` paths the file uses (in `use` items, braces
expanded, and inline), and builds two kinds of graph:

- top: edges between the crate's top-level modules;
- folder: edges between sibling submodules of one folder (`exec/bwrap` ->
  `exec/run`), one graph per folder.

A child naming its parent, or a parent naming its child, is no edge: only
siblings are compared. Comments, files named `tests.rs` and `#[cfg(test)]`
modules are skipped, so test-only imports do not count.

Usage:
    module-graph.py [--scope top|folder|all] [--edges] [SRC_DIR ...]
    module-graph.py --self-test

With no SRC_DIR it checks the `src/` folder of every member listed in the
workspace's root Cargo.toml. Exit status 1 when a circle is found, listing
each strongly connected set of modules with the lines that make its edges.
"""

import argparse
import os
import re
import sys
from collections import defaultdict

PATH_RE = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_RE = re.compile(r"\buse\s+((?:crate|super)\b[^;]*);", re.S)


def strip_comments(text):
    """Removes `//` and `/* */` comments, keeping string literals and line numbers."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_test_modules(text):
    """Blanks `#[cfg(test)] mod name { ... }` blocks (line numbers kept)."""
    out = []
    pos = 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < pos:
            continue
        depth, j = 1, m.end()
        while j < len(text) and depth:
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
            j += 1
        out.append(text[pos : m.start()])
        out.append("\n" * text.count("\n", m.start(), j))
        pos = j
    out.append(text[pos:])
    return "".join(out)


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> [`a::b`, `a::c::d`, `a::c::e`]."""
    tree = re.sub(r"\s+", "", tree)

    def split_top(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += ch == "{"
            depth -= ch == "}"
            cur += ch
        if cur:
            parts.append(cur)
        return parts

    def expand(s):
        k = s.find("{")
        if k < 0:
            return [s]
        prefix, inner = s[:k], s[k + 1 : s.rfind("}")]
        result = []
        for part in split_top(inner):
            for tail in expand(part):
                result.append(prefix + tail)
        return result

    return [re.sub(r"\bas\b.*$", "", p) for p in expand(tree)]


def module_of(rel):
    """Module path of a source file, relative to src/."""
    parts = rel[:-3].split(os.sep)
    if parts[-1] in ("lib", "main") and len(parts) == 1:
        return ()
    if parts[-1] == "mod":
        parts = parts[:-1]
    return tuple(parts)


def resolve(module, kind, rest):
    """Absolute path (tuple) named by `crate::rest` or `super::rest` in `module`."""
    segs = [s for s in rest.split("::") if s]
    if kind == "crate":
        return tuple(segs)
    # `super` is the parent of the module the file defines.
    base = list(module[:-1])
    while segs and segs[0] == "super":
        base = base[:-1]
        segs = segs[1:]
    return tuple(base + segs)


def scan_crate(src):
    files = {}
    for root, _dirs, names in os.walk(src):
        for name in names:
            if not name.endswith(".rs") or name == "tests.rs":
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)
            if rel.split(os.sep)[0] == "bin":
                continue
            files[path] = module_of(rel)
    modules = set(files.values())
    # A module the crate root re-exports under another path (`pub use
    # observation::messages;`) is followed to where it is defined.
    aliases = {}
    for path, module in files.items():
        if module != ():
            continue
        with open(path, encoding="utf-8") as f:
            text = strip_comments(f.read())
        for m in re.finditer(r"\bpub\s+use\s+([^;]*);", text):
            for p in expand_use(m.group(1).replace("crate::", "").replace("self::", "")):
                target = tuple(x for x in p.split("::") if x)
                if target in modules:
                    aliases[target[-1]] = target
    refs = []  # (from_module, to_path, file, line)
    for path, module in sorted(files.items()):
        with open(path, encoding="utf-8") as f:
            text = strip_test_modules(strip_comments(f.read()))
        for m in USE_RE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            for p in expand_use(m.group(1)):
                kind, _, rest = p.partition("::")
                target = resolve(module, kind, rest)
                refs.append((module, target, path, line))
        use_spans = [(m.start(), m.end()) for m in USE_RE.finditer(text)]
        for m in PATH_RE.finditer(text):
            if any(a <= m.start() < b for a, b in use_spans):
                continue
            line = text.count("\n", 0, m.start()) + 1
            target = resolve(module, m.group(1), m.group(2))
            refs.append((module, target, path, line))
    refs = [
        (src, aliases[t[0]] + t[1:] if t and t[0] in aliases and t[:1] not in modules else t, path, line)
        for src, t, path, line in refs
    ]
    return modules, refs


def module_prefix(modules, target):
    """Longest prefix of `target` that is a known module."""
    for k in range(len(target), -1, -1):
        if target[:k] in modules:
            return target[:k]
    return ()


def build_graphs(modules, refs):
    """{scope: {from: {to: [(file, line)]}}}; scope () is the top level."""
    graphs = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for src_mod, target, path, line in refs:
        dst_mod = module_prefix(modules, target)
        k = 0
        while k < min(len(src_mod), len(dst_mod)) and src_mod[k] == dst_mod[k]:
            k += 1
        if k >= len(src_mod) or k >= len(dst_mod):
            continue  # same module, or parent/child
        graphs[src_mod[:k]][src_mod[k]][dst_mod[k]].append((path, line))
    return graphs


def sccs(graph):
    """Tarjan's strongly connected components with more than one node."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    nodes = set(graph) | {d for es in graph.values() for d in es}

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def workspace_srcs(root):
    with open(os.path.join(root, "Cargo.toml"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"members\s*=\s*\[([^\]]*)\]", text)
    members = re.findall(r'"([^"]+)"', m.group(1)) if m else ["."]
    return [os.path.join(root, mem, "src") for mem in members if os.path.isdir(os.path.join(root, mem, "src"))]


def self_test():
    """Checks the checker on a small crate: a circle of siblings in a folder
    is found; a chain at the top level, imports in doc comments, in a
    `#[cfg(test)]` module and in `tests.rs` are not circles."""
    import tempfile

    files = {
        "lib.rs": "pub mod a;\npub mod b;\npub mod c;\npub mod f;\nmod tests;\npub use f::p;\n",
        "a.rs": "use crate::{b::X, c};\n",
        "b.rs": "/// Not [`crate::a::Y`].\npub struct X;\n#[cfg(test)]\nmod tests {\n    use crate::a::Z;\n}\n",
        "c.rs": "fn f() { let _ = crate::b::X; } // crate::a::V\nuse crate::p::H;\n",
        "tests.rs": "use crate::a::W;\n",
        "f/mod.rs": "mod p;\nmod q;\n",
        "f/p.rs": "use super::q::{self, A};\n",
        "f/q.rs": "pub fn g() { super::p::h() }\n",
    }
    with tempfile.TemporaryDirectory() as src:
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(src, name)), exist_ok=True)
            with open(os.path.join(src, name), "w", encoding="utf-8") as f:
                f.write(text)
        modules, refs = scan_crate(src)
        graphs = build_graphs(modules, refs)
    top = {a: sorted(graphs[()][a]) for a in graphs[()]}
    assert top == {"a": ["b", "c"], "c": ["b", "f"]}, top
    assert sccs(graphs[()]) == [], "no circle at the top level"
    assert sccs(graphs[("f",)]) == [["p", "q"]], "the folder circle"
    print("self-test passed")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("srcs", nargs="*", help="crate source folders (default: every workspace member's src/)")
    ap.add_argument("--scope", choices=["top", "folder", "all"], default="all")
    ap.add_argument("--edges", action="store_true", help="print every edge of the checked graphs")
    args = ap.parse_args()

    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    srcs = args.srcs or workspace_srcs(root)
    failures = 0
    for src in srcs:
        modules, refs = scan_crate(src)
        graphs = build_graphs(modules, refs)
        for scope in sorted(graphs):
            if scope == () and args.scope == "folder":
                continue
            if scope != () and args.scope == "top":
                continue
            graph = graphs[scope]
            where = f"{src}: " + ("top level" if scope == () else "::".join(scope) + "/")
            if args.edges:
                for a in sorted(graph):
                    for b in sorted(graph[a]):
                        print(f"{where}: {a} -> {b} ({len(graph[a][b])} uses)")
            for comp in sccs(graph):
                failures += 1
                print(f"circle in {where}: {' <-> '.join(comp)}")
                members = set(comp)
                for a in comp:
                    for b in sorted(graph[a]):
                        if b in members:
                            path, line = graph[a][b][0]
                            more = len(graph[a][b]) - 1
                            extra = f" (+{more} more)" if more else ""
                            print(f"    {a} -> {b}: {os.path.relpath(path)}:{line}{extra}")
    if failures:
        print(f"{failures} import circle(s)")
        return 1
    print("no import circles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
