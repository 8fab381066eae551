#!/usr/bin/env python3
"""Prints the import graph between the top-level modules of a crate and
fails if it has a cycle. Reads every .rs file under the crate's src/ (test
modules, from `#[cfg(test)]` on, are left out: a test may reach across),
takes each `crate::<module>` it names, and groups files by their top-level
module (src/<module>.rs or src/<module>/...). Then the same one level down
and further: among the modules of one parent (the files of
`robot/`, of `tools/shared/`, ...), following `super::`, `self::` and
`crate::` paths, so that two files that import each other are found too.

    scripts/module-cycles.py crates/aicc-bridge [--graph]
"""
import pathlib
import re
import sys


def top_module(src: pathlib.Path, path: pathlib.Path) -> str:
    part = path.relative_to(src).parts[0]
    return part[:-3] if part.endswith(".rs") else part


def production_text(path: pathlib.Path) -> str:
    text = path.read_text()
    cut = re.search(r"^#\[cfg\(test\)\]", text, re.M)
    return text[: cut.start()] if cut else text


def module_files(src: pathlib.Path) -> list:
    """The crate's module files: not its roots (lib.rs, main.rs), not its binaries."""
    return [p for p in sorted(src.rglob("*.rs"))
            if not (p.parent == src and p.name in ("lib.rs", "main.rs")) and "bin" not in p.relative_to(src).parts]


def graph(crate: pathlib.Path) -> dict:
    src = crate / "src"
    edges: dict = {}
    for path in module_files(src):
        here = top_module(src, path)
        names = set(re.findall(r"\bcrate::([a-z_][a-z0-9_]*)", production_text(path)))
        # `use crate::{a, b::c}` groups name their modules after the brace.
        for group in re.findall(r"\bcrate::\{([^}]*)\}", production_text(path)):
            names.update(re.findall(r"(?:^|,)\s*([a-z_][a-z0-9_]*)", group))
        edges.setdefault(here, set()).update(name for name in names if name != here)
    return edges


def cycles(edges: dict) -> list:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in edges:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def module_path(src: pathlib.Path, path: pathlib.Path) -> list:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "mod" else parts


def uses(text: str, here: list) -> set:
    """The absolute module paths a file's `crate::`, `super::` and `self::`
    paths name (groups expanded one level)."""
    found = set()
    for match in re.finditer(r"\b((?:crate|self|super)(?:::super)*)::((?:[a-z_][a-z0-9_]*::)*)(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*)", text):
        head, middle, last = match.groups()
        steps = head.split("::")
        if steps[0] == "crate":
            base = []
        elif steps[0] == "self":
            base = list(here)
        else:
            base = list(here)[: len(here) - len(steps)] if len(steps) <= len(here) else []
        base += [m for m in middle.split("::") if m]
        if last.startswith("{"):
            found.add(tuple(base))
            for name in re.findall(r"(?:^|[{,])\s*([a-z_][a-z0-9_]*)", last):
                found.add(tuple(base + [name]))
        else:
            found.add(tuple(base + [last]))
    return found


def sibling_cycles(crate: pathlib.Path) -> list:
    """Cycles among the modules of one parent, at every level below the top."""
    src = crate / "src"
    # What each module file names, read once (doc links are not imports).
    named = {}
    for path in module_files(src):
        module = tuple(module_path(src, path))
        code = re.sub(r"//[^\n]*", "", production_text(path))
        named[module] = uses(code, list(module))
    found = []
    parents = {m[:-1] for m in named if len(m) >= 2}
    for parent in sorted(parents):
        depth = len(parent)
        children = {m[depth] for m in named if len(m) > depth and m[:depth] == parent}
        edges: dict = {c: set() for c in children}
        for module, targets in named.items():
            if len(module) <= depth or module[:depth] != parent:
                continue
            child = module[depth]
            for target in targets:
                if len(target) > depth and target[:depth] == parent:
                    other = target[depth]
                    if other in children and other != child:
                        edges[child].add(other)
        for component in cycles(edges):
            found.append("::".join(parent) + ": " + ", ".join(component))
    return found


def main() -> int:
    crate = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "crates/aicc-bridge")
    edges = graph(crate)
    if "--graph" in sys.argv:
        for module in sorted(edges):
            print(f"{module} -> {', '.join(sorted(n for n in edges[module] if n in edges)) or '(nothing)'}")
    found = cycles(edges)
    for component in found:
        print(f"cycle among: {', '.join(component)}")
    below = sibling_cycles(crate)
    for component in below:
        print(f"cycle among the modules of {component}")
    if found or below:
        return 1
    print(f"{crate}: {len(edges)} top-level modules, no import cycle among them or among any module's files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
