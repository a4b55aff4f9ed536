#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Finds module dependency cycles in a Rust crate.

    scripts/modcycles.py CRATE_ROOT.rs [--graph]

Reads the module tree from `mod` declarations (honouring #[path]; #[cfg(test)] modules are
left out: they are not part of the kernel module), then every path a file names that starts
with `crate::`, `super::` or `self::` (in `use` trees and in code). A path depends on the
deepest module it names, so `use super::qp::Qp` is an edge to the file of module `qp`, and
an item defined in a parent's own file (not re-exported) makes the child depend on the
parent. Prints each cycle (a strongly connected group of files, with the names that tie
them) and exits 1 if there is any; --graph prints every edge too.
"""
import os
import re
import sys


def strip(src):
    """Source without comments, string and char literals (their text cannot name modules)."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', src[i:i + 10]) and not re.match(r"\w", src[i - 1:i] or " "):
            m = re.match(r'r(#*)"', src[i:])
            end = src.find('"' + m.group(1), i + len(m.group(0)))
            i = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", src[i:i + 4]) or (
            c == "'" and re.match(r"'\\(x..|u\{[0-9a-fA-F]+\})'", src[i:i + 12])
        ):
            m = re.match(r"'(\\x..|\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", src[i:])
            i += len(m.group(0))
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def drop_test_modules(src):
    """Source without `#[cfg(test)] mod name { ... }` blocks: test code is not part of the
    kernel module, and its `super::` paths are relative to the inline module."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", src):
        if m.start() < i:
            continue
        out.append(src[i:m.start()])
        depth, j = 1, m.end()
        while j < len(src) and depth:
            depth += {"{": 1, "}": -1}.get(src[j], 0)
            j += 1
        i = j
    out.append(src[i:])
    return "".join(out)


MOD_RE = re.compile(
    r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])"
)


class Module:
    def __init__(self, path, file, is_dir_owner):
        self.path = path  # tuple of segments from the crate root
        self.file = file
        # Whether children live in the file's own directory (crate root, mod.rs, #[path]).
        self.is_dir_owner = is_dir_owner


def load_tree(root_file):
    modules = {(): Module((), root_file, True)}
    todo = [modules[()]]
    while todo:
        m = todo.pop()
        src = strip(open(m.file).read())
        base = os.path.dirname(m.file)
        if not m.is_dir_owner:
            base = os.path.join(base, os.path.splitext(os.path.basename(m.file))[0])
        for attrs, name, kind in MOD_RE.findall(src):
            if kind == "{" or "cfg(test)" in attrs.replace(" ", ""):
                continue
            pm = re.search(r'path\s*=\s*""', attrs)
            raw = re.search(r'#\[path\s*=\s*"([^"]*)"\]', open(m.file).read())
            if pm and raw:
                f = os.path.join(os.path.dirname(m.file), raw.group(1))
                owner = True
            elif os.path.exists(os.path.join(base, name + ".rs")):
                f, owner = os.path.join(base, name + ".rs"), False
            elif os.path.exists(os.path.join(base, name, "mod.rs")):
                f, owner = os.path.join(base, name, "mod.rs"), True
            else:
                continue
            child = Module(m.path + (name,), f, owner)
            modules[child.path] = child
            todo.append(child)
    return modules


def expand_use(tree):
    """`a::{b, c::{d}}` -> [a::b, a::c::d] (`self` inside braces means the prefix)."""
    tree = re.sub(r"\s+as\s+\w+", "", tree)
    tree = re.sub(r"\s+", "", tree)

    def split_top(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        return parts

    def go(prefix, s):
        i = s.find("{")
        if i < 0:
            return [prefix + s]
        head = s[:i]
        body = s[i + 1:s.rfind("}")]
        out = []
        for part in split_top(body):
            if part == "self":
                out.append((prefix + head).rstrip(":"))
            else:
                out.extend(go(prefix + head, part))
        return out

    return go("", tree)


PATH_RE = re.compile(r"\b((?:crate|super|self)(?:::\w+)+)")


def paths_of(src, children=()):
    """Paths from `crate::`, `super::` or `self::`; at the crate root, whose paths may
    start with a module's own name, also those (written `self::` here)."""
    found = []
    for m in re.finditer(r"\buse\s+([^;]*);", src):
        found.extend(expand_use(m.group(1)))
    code = re.sub(r"\buse\s+[^;]*;", "", src)
    found.extend(PATH_RE.findall(code))
    if children:
        names = "|".join(map(re.escape, children))
        found.extend("self::" + p for p in re.findall(rf"(?<![\w:$])((?:{names})(?:::\w+)+)", code))
        found = ["self::" + p if p.split("::")[0] in children else p for p in found]
    return found


def resolve(mod_path, path, modules):
    segs = path.split("::")
    if segs[0] == "crate":
        cur, rest = (), segs[1:]
    elif segs[0] in ("super", "self"):
        cur = mod_path
        rest = segs
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                cur = cur[:-1]
            rest = rest[1:]
    else:
        return None
    best = cur
    for s in rest:
        if cur + (s,) in modules:
            cur = cur + (s,)
            best = cur
        else:
            break
    return best


def sccs(nodes, edges):
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
            out.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    modules = load_tree(args[0])
    by_file = {m.file: m for m in modules.values()}
    edges, why = {}, {}
    for m in modules.values():
        src = drop_test_modules(strip(open(m.file).read()))
        children = [p[-1] for p in modules if len(p) == 1] if m.path == () else ()
        for p in paths_of(src, children):
            target = resolve(m.path, p, modules)
            if target is None:
                continue
            tf = modules[target].file
            if tf == m.file:
                continue
            edges.setdefault(m.file, set()).add(tf)
            why.setdefault((m.file, tf), set()).add(p.split("::")[-1])
    top = os.path.dirname(os.path.abspath(args[0]))

    def rel(f):
        return os.path.relpath(f, top)

    if "--graph" in sys.argv:
        for f in sorted(edges):
            for t in sorted(edges[f]):
                print(f"{rel(f)} -> {rel(t)}")
    cycles = [c for c in sccs(list(by_file), edges) if len(c) > 1]
    for c in cycles:
        print(f"cycle of {len(c)} modules: " + ", ".join(sorted(rel(f) for f in c)))
        for f in sorted(c):
            for t in sorted(edges.get(f, ())):
                if t in c:
                    names = ", ".join(sorted(why[(f, t)])[:6])
                    print(f"  {rel(f)} -> {rel(t)}: {names}")
    print(f"{len(modules)} modules, {sum(len(v) for v in edges.values())} dependencies, "
          f"{len(cycles)} cycles")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
